"""The sweep scheduler on the simulated bus: complete reads, faults, calibration persistence, diagnostics."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from shape_sensing.drivers.bno055 import CalibrationProfile, Mode, Reg
from shape_sensing.drivers.bno055_chain import (
    Bno055Chain,
    CalibrationStore,
    ChainOptions,
    example_topology_params,
)
from shape_sensing.drivers.errors import DriverConfigError
from shape_sensing.drivers.i2c_topology import Topology
from shape_sensing.sim.register_level import SimulatedHardware, build_simulated_hardware
from shape_sensing.types import DiagnosticLevel

NAMES = [f"imu_{i:02d}" for i in range(18)]


def make(options: ChainOptions | None = None, store: CalibrationStore | None = None, calibrated: bool = True, seed=0):
    topo = Topology.from_params(example_topology_params())
    hw = build_simulated_hardware(topo, seed=seed)
    rots = Rotation.random(18, random_state=seed)
    for i, chip in enumerate(hw.sensors.values()):
        chip.set_motion(rots[i].as_quat(), [0.1 * i, -0.2, 0.3], [0.0, 0.0, 9.81], [20e-6, 0.0, -40e-6], 20 + i)
        if calibrated:
            chip.calibrate()
    chain = Bno055Chain(
        hw.bus, topo, options or ChainOptions(), calibration=store, clock=hw.bus.clock, sleep=hw.bus.sleep
    )
    assert chain.start() == []
    return hw, chain, rots


def run(chain: Bno055Chain, hw: SimulatedHardware, seconds: float, period: float = 0.01):
    """Sweep at ``period`` of simulated time for ``seconds``; returns all sweep results."""
    out = []
    t_end = hw.bus.now_ns + int(seconds * 1e9)
    while hw.bus.now_ns < t_end:
        t_next = hw.bus.now_ns + int(period * 1e9)
        out.append(chain.sweep())
        hw.bus.now_ns = max(hw.bus.now_ns, t_next)
    return out


def test_18_sensor_two_level_tree_is_read_completely_and_correctly():
    hw, chain, rots = make()
    result = chain.sweep()
    assert [r.name for r in result.readings] == NAMES or [r.name for r in result.readings] == NAMES[::-1]
    for r in result.readings:
        i = NAMES.index(r.name)
        q = r.orientation
        # Same rotation as loaded (q and -q are one rotation), within the chip's 2^-14 quantisation.
        assert min(np.abs(q - rots[i].as_quat()).max(), np.abs(q + rots[i].as_quat()).max()) < 2e-4
        np.testing.assert_allclose(r.angular_velocity, [0.1 * i, -0.2, 0.3], atol=1 / 1800)
        np.testing.assert_allclose(r.linear_acceleration, [0.0, 0.0, 9.81], atol=0.005)
    stamps = [r.stamp_ns for r in result.readings]
    assert stamps == sorted(stamps) and len(set(stamps)) == 18  # stamped at each read, in bus order
    assert hw.bus.stats.conflicts == 0
    assert all(chip.timing_violations == 0 for chip in hw.sensors.values())


def test_low_rate_fields_and_status_arrive_at_their_rates():
    hw, chain, _ = make(ChainOptions(mag_rate=20.0, status_rate=1.0))
    results = run(chain, hw, 1.0)
    mags = sum(r.magnetic_field is not None for res in results for r in res.readings)
    temps = [r.temperature for res in results for r in res.readings if r.temperature is not None]
    assert 18 * 19 <= mags <= 18 * 21  # 20 Hz each over 1 s
    assert 18 <= len(temps) <= 2 * 18 and set(temps) <= {20.0 + i for i in range(18)}
    m = next(r.magnetic_field for res in results for r in res.readings if r.magnetic_field is not None)
    np.testing.assert_allclose(m, [20e-6, 0.0, -40e-6], atol=1 / 16 * 1e-6)


def test_nack_marks_one_sensor_stale_and_retries_with_backoff():
    hw, chain, _ = make(ChainOptions(retry_initial=0.02, retry_max=0.16))
    hw.set_dead("imu_05")
    results = run(chain, hw, 0.5)
    # Everyone else streamed in every sweep.
    for res in results:
        assert {r.name for r in res.readings} == set(NAMES) - {"imu_05"}
    h = chain.health["imu_05"]
    assert h.stale and h.nacks >= 3
    # Backoff: next sweep, then 20, 40, 80, 160, 160 ms ... -> far fewer attempts than sweeps.
    assert h.nacks <= 8 < len(results)
    assert "Remote I/O error" in h.last_error
    diag = {d.name: d for d in chain.diagnostics()}
    assert diag["bno055_chain: imu_05"].level == DiagnosticLevel.ERROR
    assert diag["bno055_chain: imu_05"].values["nacks"] == str(h.nacks)
    assert diag["bno055_chain: summary"].message == "17/18 sensors streaming"
    # It comes back.
    hw.set_dead("imu_05", False)
    results = run(chain, hw, 0.3)
    assert "imu_05" in {r.name for r in results[-1].readings}
    assert not chain.health["imu_05"].stale


def test_random_nacks_and_timeouts_are_counted_and_never_stop_a_sweep():
    hw, chain, _ = make(ChainOptions(retry_initial=0.01, retry_max=0.05))
    hw.bus.nack_rate[0x29] = 0.05
    hw.bus.timeout_rate[0x28] = 0.03
    results = run(chain, hw, 1.0)
    n = sum(len(r.readings) for r in results)
    total_nacks = sum(h.nacks for h in chain.health.values())
    total_timeouts = sum(h.timeouts for h in chain.health.values())
    assert total_nacks > 0 and total_timeouts > 0
    assert n > 0.8 * 18 * len(results)
    assert not any(mh.down for mh in chain.mux_health.values())


def test_reset_sensor_is_reconfigured_and_its_calibration_reapplied():
    hw, chain, _ = make()
    run(chain, hw, 0.1)
    stored = chain.calibration.profiles["imu_07"]  # captured at start (sensors were fully calibrated)
    assert stored.to_bytes() == hw.sensors["imu_07"].learned
    hw.reset_sensor("imu_07")
    chip = hw.sensors["imu_07"]
    assert chip.mode == Mode.CONFIG and chip.levels == (0, 0, 0, 0)
    results = run(chain, hw, 0.2)
    h = chain.health["imu_07"]
    assert h.resets == 1
    assert chip.mode == Mode.NDOF
    raw = bytes(chip.regs[Reg.CALIB_DATA : Reg.CALIB_DATA + 22])
    assert CalibrationProfile.from_bytes(raw) == stored
    assert chip.levels == (3, 3, 3, 3)
    assert "imu_07" in {r.name for r in results[-1].readings}
    assert chip.timing_violations == 0
    # Others never stopped.
    assert all(len(r.readings) >= 17 for r in results)


def test_reset_found_by_status_read_when_orientation_is_not_read():
    hw, chain, _ = make(ChainOptions(imu_fields=("angular_velocity",), status_rate=10.0))
    run(chain, hw, 0.05)
    hw.reset_sensor("imu_00")
    run(chain, hw, 0.3)
    assert chain.health["imu_00"].resets == 1
    assert hw.sensors["imu_00"].mode == Mode.NDOF


def test_dead_mux_isolates_its_subtree_and_recovers():
    hw, chain, _ = make(ChainOptions(retry_initial=0.02, retry_max=0.1))
    hw.set_mux_dead("arm_b")
    results = run(chain, hw, 0.5)
    arm_b = {f"imu_{i:02d}" for i in range(6, 12)}
    assert chain.mux_health["arm_b"].down
    for res in results[2:]:
        assert {r.name for r in res.readings} == set(NAMES) - arm_b
    # The subtree was not hammered sensor by sensor: few failed transactions overall.
    assert hw.bus.stats.nacks < 40
    diag = {d.name: d for d in chain.diagnostics()}
    assert diag["bno055_chain: mux arm_b"].level == DiagnosticLevel.ERROR
    assert diag["bno055_chain: imu_08"].message.startswith("isolated: mux arm_b")
    hw.set_mux_dead("arm_b", False)
    results = run(chain, hw, 0.3)
    assert {r.name for r in results[-1].readings} == set(NAMES)
    assert not chain.mux_health["arm_b"].down


def test_stuck_mux_is_caught_by_read_back_and_isolated():
    hw, chain, _ = make(ChainOptions(mux_verify_period=0.05, retry_initial=0.02))
    run(chain, hw, 0.02)
    hw.set_mux_stuck("arm_a")
    results = run(chain, hw, 0.3)
    assert chain.mux_health["arm_a"].down
    assert "stuck" in chain.mux_health["arm_a"].last_error
    last = {r.name for r in results[-1].readings}
    assert last == set(NAMES) - {f"imu_{i:02d}" for i in range(6)}


def test_bad_frame_is_counted_and_skipped():
    hw, chain, _ = make()
    chip = hw.sensors["imu_03"]
    chip.set_motion([0.0, 0.0, 0.0, 1.0])
    chip._refresh()
    chip.regs[Reg.QUA_DATA : Reg.QUA_DATA + 2] = (8000).to_bytes(2, "little", signed=True)  # |q| = 0.49
    chip._dirty = False
    res = chain.sweep()
    assert "imu_03" not in {r.name for r in res.readings}
    assert chain.health["imu_03"].bad_frames == 1
    assert not chain.health["imu_03"].stale


def test_calibration_save_restore_round_trip(tmp_path):
    hw, chain, _ = make()
    run(chain, hw, 0.05)
    assert set(chain.calibration.profiles) == set(NAMES)
    path = chain.save_calibration(tmp_path / "cal" / "bno055.yaml")
    loaded = CalibrationStore.load(path)
    assert {n: p.to_bytes() for n, p in loaded.profiles.items()} == {n: hw.sensors[n].learned for n in NAMES}
    # A fresh, uncalibrated set of chips (power cycled) gets the profiles at bring-up.
    hw2, chain2, _ = make(store=loaded, calibrated=False)
    for n in NAMES:
        raw = bytes(hw2.sensors[n].regs[Reg.CALIB_DATA : Reg.CALIB_DATA + 22])
        assert CalibrationProfile.from_bytes(raw) == loaded.profiles[n]
    res = run(chain2, hw2, 0.05)
    assert all(chain2.health[n].calibration is not None for n in NAMES)
    assert len(res[-1].readings) == 18


def test_capture_waits_for_full_calibration():
    hw, chain, _ = make(calibrated=False)
    run(chain, hw, 0.1)
    assert chain.calibration.profiles == {}
    hw.sensors["imu_02"].calibrate((3, 3, 3, 2))
    run(chain, hw, 1.1)
    assert chain.calibration.profiles == {}
    hw.sensors["imu_02"].calibrate()
    run(chain, hw, 1.1)
    assert set(chain.calibration.profiles) == {"imu_02"}
    diag = {d.name: d for d in chain.diagnostics()}
    assert diag["bno055_chain: imu_02"].values["calibration_stored"] == "True"
    assert diag["bno055_chain: imu_00"].level == DiagnosticLevel.WARN  # calibrating


def test_calibration_file_errors(tmp_path):
    with pytest.raises(DriverConfigError, match="does not exist"):
        CalibrationStore.load(tmp_path / "none.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("format: other\n")
    with pytest.raises(DriverConfigError, match="format 'other', expected"):
        CalibrationStore.load(bad)
    bad.write_text(
        "format: shape_sensing/bno055_calibration/1\nsensors:\n"
        "  imu_00: {accel_offset: [1, 2, 3], mag_offset: [0, 0, 0], gyro_offset: [0, 0, 0],"
        " accel_radius: 9999, mag_radius: 0}\n"
    )
    with pytest.raises(DriverConfigError, match="sensor imu_00: calibration accel_radius = 9999"):
        CalibrationStore.load(bad)


def test_bad_options():
    with pytest.raises(DriverConfigError, match="unknown \\['euler'\\]"):
        ChainOptions(imu_fields=("euler",))
    with pytest.raises(DriverConfigError, match="retry_initial"):
        ChainOptions(retry_initial=1.0, retry_max=0.1)


def test_imu_mode_reads_no_magnetometer():
    hw, chain, _ = make(ChainOptions(mode=Mode.IMU, mag_rate=20.0))
    results = run(chain, hw, 0.3)
    assert all(r.magnetic_field is None for res in results for r in res.readings)
    assert all(chip.mode == Mode.IMU for chip in hw.sensors.values())
