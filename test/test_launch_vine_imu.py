"""Launch test of ``launch/vine_imu.launch.xml`` (launch_testing; skipped where ROS 2 is not sourced).

The robot launch with its driver simulated (``driver:=true simulate:=true``: the
bno055_chain node on register-level BNO055 simulators), so the whole hardware
path runs: driver topics and rates, the estimator's outputs, tf2 from ``world``
(the launch's static transform) to the base, every IMU and the tip, both nodes'
``ros2 param dump`` against their files and the launch's ``simulate``
override, the ``offset`` service, a misspelt parameter file, and a clean SIGINT
shutdown.
"""

from __future__ import annotations

import unittest
from typing import Any

import launch_harness as h
import pytest

N_IMUS = 18

if not h.AVAILABLE:

    def test_launch_vine_imu() -> None:
        pytest.skip(h.REASON)

else:
    import launch_testing

    TOPICS: dict[str, tuple[str, float | None]] = {
        f"/vine/imu_{i:02d}/data": ("sensor_msgs/msg/Imu", 100.0 if i in (0, N_IMUS - 1) else None)
        for i in range(N_IMUS)
    }
    TOPICS |= {
        "/vine/imu_00/mag": ("sensor_msgs/msg/MagneticField", 5.0),
        "/vine/imu_17/temperature": ("sensor_msgs/msg/Temperature", 1.0),
        "/vine/imu_17/calibration_status": ("shape_sensing/msg/Bno055Calibration", None),
        "/vine/imus": ("shape_sensing/msg/ImuArray", 100.0),  # each sweep in one message, what the estimator reads
        "/vine/shape/path": ("nav_msgs/msg/Path", 30.0),
        "/vine/shape/tip": ("geometry_msgs/msg/PoseWithCovarianceStamped", 30.0),
        "/vine/shape/markers": ("visualization_msgs/msg/MarkerArray", 5.0),
        "/tf": ("tf2_msgs/msg/TFMessage", 30.0),
        "/tf_static": ("tf2_msgs/msg/TFMessage", None),
        "/diagnostics": ("diagnostic_msgs/msg/DiagnosticArray", 3.0),  # driver, estimator, its heartbeat: 1 Hz each
    }
    FRAMES = ["vine_base", "vine_imu_base", "vine_imu_tip"] + [f"vine_imu_{i:02d}" for i in range(N_IMUS)]

    @pytest.mark.launch_test
    def generate_test_description() -> Any:
        return h.description("vine_imu.launch.xml", {"driver": "true", "simulate": "true"})

    class TestVineImu(h.RobotChecks, unittest.TestCase):
        TOPICS, FRAMES = TOPICS, FRAMES

        def test_3_parameters_equal_the_files(self) -> None:
            # with driver:=true the launch points both at the driver's ImuArray topic (imu_array_topic:=imus)
            est = h.expected_parameters("hinge_arc_estimator", h.share("config", "vine_imu.yaml"),
                                        {"imu_array_topic": "imus"})  # fmt: skip
            h.check_param_dump("/vine/hinge_arc_estimator", est)
            driver = h.expected_parameters("bno055_chain", h.share("config", "bno055_chain.yaml"),
                                           {"simulate": True, "imu_array_topic": "imus"})  # fmt: skip
            h.check_param_dump("/vine/bno055_chain", driver)

        def test_4_offset_service_answers(self) -> None:
            response = h.call_trigger(self.probe, "/vine/hinge_arc_estimator/offset")
            assert response.success and "straight reference requested" in response.message

        def test_5_bad_parameter_file_stops_the_node_naming_it(self) -> None:
            h.check_bad_parameter_file("hinge_arc_estimator", "/bad_vine", {"publish_rate": 0.0}, "publish_rate")

    @launch_testing.post_shutdown_test()
    class TestVineImuShutdown(unittest.TestCase):
        def test_sigint_exits_cleanly(self, proc_info: Any, proc_output: Any) -> None:
            h.check_clean_shutdown(proc_info, proc_output)
