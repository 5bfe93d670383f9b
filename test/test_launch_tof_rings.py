"""Launch test of ``launch/tof_rings.launch.xml`` (launch_testing; skipped where ROS 2 is not sourced).

The sensor rings simulated (``simulate:=true``: register-level VL53L5CX and ISM330BX simulators seeing the
demo's box scene; the launch then also publishes ``world`` -> ring frames of the straight robot). Checked:
every sensor's topics with their types (the package's TofFrame among them) and rates, tf2 from ``world`` to
every ring and every ToF and IMU mounting, ``ros2 param dump`` against the parameter file and the launch's
``simulate``, a bad parameter file, and a clean SIGINT shutdown.
"""

from __future__ import annotations

import unittest
from typing import Any

import launch_harness as h
import pytest

WHY_NOT = h.REASON or h.interfaces_reason()
RINGS = ["ring_0", "ring_1", "ring_2"]
TOFS = [f"{ring}_tof_{k}" for ring in RINGS for k in range(3)]
IMUS = [f"{ring}_imu" for ring in RINGS]

if WHY_NOT:

    def test_launch_tof_rings() -> None:
        pytest.skip(WHY_NOT)

else:
    import launch_testing

    NS = "/tof_rings"
    TOPICS: dict[str, tuple[str, float | None]] = {}
    for name in TOFS:
        rate = 15.0 if name in ("ring_0_tof_0", "ring_2_tof_2") else None  # ranging_frequency 15 Hz
        TOPICS[f"{NS}/{name}/frame"] = ("shape_sensing/msg/TofFrame", rate)
        TOPICS[f"{NS}/{name}/points"] = ("sensor_msgs/msg/PointCloud2", rate)
    for name in IMUS:
        TOPICS[f"{NS}/{name}/imu"] = ("sensor_msgs/msg/Imu", 120.0 if name == "ring_1_imu" else None)  # imu_odr
    TOPICS |= {
        f"{NS}/fov_markers": ("visualization_msgs/msg/MarkerArray", None),
        "/tf_static": ("tf2_msgs/msg/TFMessage", None),
        "/diagnostics": ("diagnostic_msgs/msg/DiagnosticArray", 1.0),
    }

    @pytest.mark.launch_test
    def generate_test_description() -> Any:
        return h.description("tof_rings.launch.xml", {"simulate": "true"})

    class TestTofRings(h.RobotChecks, unittest.TestCase):
        TOPICS, FRAMES = TOPICS, RINGS + [f"{t}_optical" for t in TOFS] + IMUS  # REP-103's optical suffix

        def test_3_parameters_equal_the_file(self) -> None:
            config = h.share("config", "tof_rings.yaml")
            h.check_param_dump(f"{NS}/tof_ring", h.expected_parameters("tof_ring", config, {"simulate": True}))

        def test_4_bad_parameter_file_stops_the_node_naming_it(self) -> None:
            h.check_bad_parameter_file("tof_ring", "/bad_tof", {"simulate": True, "resolution": 5}, "resolution")

    @launch_testing.post_shutdown_test()
    class TestTofRingsShutdown(unittest.TestCase):
        def test_sigint_exits_cleanly(self, proc_info: Any, proc_output: Any) -> None:
            h.check_clean_shutdown(proc_info, proc_output)
