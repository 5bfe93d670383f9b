"""Launch test of ``launch/hyper_redundant_sim.launch.xml`` (launch_testing; skipped where ROS 2 is not sourced).

Simulator (WT901 readings through the protocol emulator) and rigid-module
estimator in /hyper_redundant, RViz off (its default: no rviz2 here). Checked:
topics with types and rates, tf2 from ``world`` to the base, every platform and
the end effector, ``ros2 param dump`` of both nodes against the parameter file
and the launch's overrides, the rods ``calibrate`` service, a bad parameter
file, and a clean SIGINT shutdown.
"""

from __future__ import annotations

import unittest
from typing import Any

import launch_harness as h
import pytest

N_MODULES = 4

if not h.AVAILABLE:

    def test_launch_hyper_redundant_sim() -> None:
        pytest.skip(h.REASON)

else:
    import launch_testing

    NS = "/hyper_redundant"
    TOPICS: dict[str, tuple[str, float | None]] = {
        f"{NS}/imu/platform_{i}": ("sensor_msgs/msg/Imu", 100.0 if i in (0, N_MODULES) else None)
        for i in range(N_MODULES + 1)
    }
    TOPICS |= {
        f"{NS}/imu/array": ("shape_sensing/msg/ImuArray", 100.0),  # the bus cycles the estimator reads
        f"{NS}/truth/joint_states": ("sensor_msgs/msg/JointState", 100.0),
        f"{NS}/truth/end_effector": ("geometry_msgs/msg/PoseStamped", 100.0),
        f"{NS}/joint_states": ("sensor_msgs/msg/JointState", 20.0),
        f"{NS}/shape/path": ("nav_msgs/msg/Path", 20.0),
        f"{NS}/shape/end_effector": ("geometry_msgs/msg/PoseWithCovarianceStamped", 20.0),
        f"{NS}/shape/markers": ("visualization_msgs/msg/MarkerArray", 5.0),
        "/tf": ("tf2_msgs/msg/TFMessage", 20.0),
        "/tf_static": ("tf2_msgs/msg/TFMessage", None),
        "/diagnostics": ("diagnostic_msgs/msg/DiagnosticArray", 2.0),  # the estimator's and its heartbeat
    }
    FRAMES = ["base_link", "end_effector"] + [f"platform_{i}" for i in range(N_MODULES + 1)]

    @pytest.mark.launch_test
    def generate_test_description() -> Any:
        return h.description("hyper_redundant_sim.launch.xml")

    class TestHyperRedundantSim(h.RobotChecks, unittest.TestCase):
        TOPICS, FRAMES = TOPICS, FRAMES

        def test_3_parameters_equal_the_files(self) -> None:
            config = h.share("config", "hyper_redundant.yaml")
            launch = {"n_modules": N_MODULES, "heading_mode": "roll_pitch", "calibrate_on_start": True,
                      "calibration_duration": 1.0, "imu_array_topic": "imu/array"}  # fmt: skip
            h.check_param_dump(f"{NS}/rigid_module_estimator",
                               h.expected_parameters("rigid_module_estimator", config, launch))  # fmt: skip
            sim = {"n_modules": N_MODULES, "d1": 0.04, "d2": 0.04, "rate": 100.0, "rods_seconds": 6.0,
                   "imu_array_topic": "imu/array"}  # fmt: skip
            h.check_param_dump(f"{NS}/hyper_redundant_simulator",
                               h.expected_parameters("hyper_redundant_simulator", None, sim))  # fmt: skip

        def test_4_calibrate_service_answers(self) -> None:
            response = h.call_trigger(self.probe, f"{NS}/rigid_module_estimator/calibrate")
            assert response.success, response.message

        def test_5_bad_parameter_file_stops_the_node_naming_it(self) -> None:
            h.check_bad_parameter_file("rigid_module_estimator", "/bad_hr", {"heading_mode": "yaw"}, "heading_mode")

    @launch_testing.post_shutdown_test()
    class TestHyperRedundantSimShutdown(unittest.TestCase):
        def test_sigint_exits_cleanly(self, proc_info: Any, proc_output: Any) -> None:
            h.check_clean_shutdown(proc_info, proc_output)
