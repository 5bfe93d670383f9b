"""``shape-sensing demo vine-imu --register-level``: the vine demo read through the BNO055 driver and simulators."""

from __future__ import annotations

from shape_sensing.demos.vine_imu import run_demo
from shape_sensing.io.bag import read_bag


def test_register_level_demo_runs_end_to_end_and_matches_the_direct_run(tmp_path):
    direct = run_demo(tmp_path / "direct", duration=3.0, progress=False, picture=False)
    reg = run_demo(tmp_path / "reg", duration=3.0, progress=False, picture=False, register_level=True)
    assert reg["imu_source"].startswith("register-level")
    assert reg["estimates"] == direct["estimates"]
    # Quantisation (2^-14) and read stamps a few ms later change the tip error by millimetres, not more.
    assert abs(reg["tip_error_mean_m"] - direct["tip_error_mean_m"]) < 0.005
    imu_05 = [m for m in read_bag(reg["bag"]) if m.topic.endswith("imu_05/data")]
    assert len(imu_05) == 301  # 3 s at 100 Hz: every sweep read imu_05
