"""Launch test of ``launch/vine_imu_sim.launch.xml`` (launch_testing; skipped where ROS 2 is not sourced).

One launch (simulator + hinge-arc estimator, namespace /vine) serves every check:
documented topics with their types and rates, tf2 from ``world`` to the base,
every IMU and the tip, ``ros2 param dump`` of both nodes against the parameter
file, the ``offset`` service, a misspelt and an out-of-range parameter file,
and a clean SIGINT shutdown (exit 0, no traceback or error in the logs).
"""

from __future__ import annotations

import unittest
from typing import Any

import launch_harness as h
import pytest

N_IMUS = 18

if not h.AVAILABLE:

    def test_launch_vine_imu_sim() -> None:
        pytest.skip(h.REASON)

else:
    import launch_testing

    TOPICS: dict[str, tuple[str, float | None]] = {
        f"/vine/imu_{i:02d}/data": ("sensor_msgs/msg/Imu", 100.0 if i in (0, N_IMUS - 1) else None)
        for i in range(N_IMUS)
    }
    TOPICS |= {
        "/vine/imus": ("shape_sensing/msg/ImuArray", 100.0),  # the sweep the estimator reads
        "/vine/base/length": ("sensor_msgs/msg/JointState", 100.0),
        "/vine/truth/tip": ("geometry_msgs/msg/PoseStamped", 100.0),
        "/vine/truth/path": ("nav_msgs/msg/Path", 10.0),
        "/vine/truth/sensors": ("geometry_msgs/msg/PoseArray", 10.0),
        "/vine/shape/path": ("nav_msgs/msg/Path", 30.0),
        "/vine/shape/tip": ("geometry_msgs/msg/PoseWithCovarianceStamped", 30.0),
        "/vine/shape/markers": ("visualization_msgs/msg/MarkerArray", 5.0),
        "/tf": ("tf2_msgs/msg/TFMessage", 30.0),
        "/tf_static": ("tf2_msgs/msg/TFMessage", None),
        "/diagnostics": ("diagnostic_msgs/msg/DiagnosticArray", 2.0),  # the estimator's and its heartbeat
    }
    FRAMES = ["vine_base", "vine_imu_base", "vine_imu_tip"] + [f"vine_imu_{i:02d}" for i in range(N_IMUS)]

    @pytest.mark.launch_test
    def generate_test_description() -> Any:
        return h.description("vine_imu_sim.launch.xml")

    class TestVineImuSim(h.RobotChecks, unittest.TestCase):
        TOPICS, FRAMES = TOPICS, FRAMES

        def test_3_parameters_equal_the_files(self) -> None:
            config = h.share("config", "vine_imu.yaml")
            launch = {"imu_array_topic": "imus"}  # the launch file's: one ImuArray per sweep
            h.check_param_dump(
                "/vine/hinge_arc_estimator", h.expected_parameters("hinge_arc_estimator", config, launch)
            )
            sim = {"scenario": "passive", "duration": 60.0, "seed": 0, "imu_array_topic": "imus"}
            h.check_param_dump("/vine/vine_imu_simulator", h.expected_parameters("vine_imu_simulator", None, sim))

        def test_4_offset_service_answers(self) -> None:
            response = h.call_trigger(self.probe, "/vine/hinge_arc_estimator/offset")
            assert response.success and "straight reference requested" in response.message

        def test_5_bad_parameter_files_stop_the_node_naming_it(self) -> None:
            misspelt = {"imu_topicz": ["imu_00/data"]}
            h.check_bad_parameter_file("hinge_arc_estimator", "/bad_vine", misspelt, "imu_topicz")
            h.check_bad_parameter_file("vine_imu_simulator", "/bad_vine", {"rate": -5.0}, "rate")

    @launch_testing.post_shutdown_test()
    class TestVineImuSimShutdown(unittest.TestCase):
        def test_sigint_exits_cleanly(self, proc_info: Any, proc_output: Any) -> None:
            h.check_clean_shutdown(proc_info, proc_output)
