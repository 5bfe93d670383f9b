"""``shape-sensing calibrate-bno055`` on the simulated chain."""

from __future__ import annotations

from pathlib import Path

import pytest

from shape_sensing.cli import main
from shape_sensing.drivers.bno055_chain import CalibrationStore, example_topology_params
from shape_sensing.drivers.i2c_topology import Topology
from shape_sensing.sim.register_level import build_simulated_hardware

ROOT = Path(__file__).resolve().parents[1]


def test_calibrate_command_captures_every_profile(tmp_path, capsys):
    out = tmp_path / "bno055_calibration.yaml"
    assert main(["calibrate-bno055", "--simulate", "--seed", "3", "--out", str(out),
                 "--config", str(ROOT / "config" / "bno055_chain.yaml")]) == 0  # fmt: skip
    store = CalibrationStore.load(out)
    # The same seed wires the same simulated chips: their learned profiles are what must have been saved.
    hw = build_simulated_hardware(Topology.from_params(example_topology_params()), seed=3)
    saved = {n: p.to_bytes() for n, p in store.profiles.items()}
    assert saved == {name: chip.learned for name, chip in hw.sensors.items()}
    text = capsys.readouterr().out
    assert "imu_17: profile captured" in text and "saved 18 profile(s)" in text


def test_calibrate_command_timeout_and_bad_arguments(tmp_path, capsys):
    out = tmp_path / "cal.yaml"
    assert main(["calibrate-bno055", "--simulate", "--timeout", "0.3", "--out", str(out)]) == 1
    assert "not fully calibrated within 0.3 s" in capsys.readouterr().err
    assert CalibrationStore.load(out).profiles == {}
    with pytest.raises(SystemExit) as exc:
        main(["calibrate-bno055", "--simulate", "--rate", "0", "--out", str(out)])
    assert exc.value.code == 2
    assert "argument --rate: '0': expected a finite number > 0" in capsys.readouterr().err
