"""Launch test of ``launch/vine_collision_sim.launch.xml`` (launch_testing; skipped where ROS 2 is not sourced).

Simulator (base station, contact cap and force topics through the real drivers' parsers) and the two
collision-pivot estimators (improved filter under ``collision/``, the paper's under ``collision_paper/``)
in /vine. Checked: topics with their types (the package's own messages among them) and rates, tf2 from
``world`` to the base and both tips, ``ros2 param dump`` of the three nodes against the parameter file
and the launch's overrides, a bad parameter file, and a clean SIGINT shutdown.
"""

from __future__ import annotations

import unittest
from typing import Any

import launch_harness as h
import pytest

WHY_NOT = h.REASON or h.interfaces_reason()

if WHY_NOT:

    def test_launch_vine_collision_sim() -> None:
        pytest.skip(WHY_NOT)

else:
    import launch_testing

    TOPICS: dict[str, tuple[str, float | None]] = {
        "/vine/base/state": ("shape_sensing/msg/BaseStationState", 50.0),
        "/vine/base/length": ("sensor_msgs/msg/JointState", 50.0),
        "/vine/base/pressure": ("sensor_msgs/msg/FluidPressure", 50.0),
        "/vine/cap/state": ("shape_sensing/msg/ContactCapState", 50.0),
        "/vine/cap/imu": ("sensor_msgs/msg/Imu", 50.0),
        "/vine/obstacle/wrench": ("geometry_msgs/msg/WrenchStamped", 50.0),
        "/vine/truth/tip": ("geometry_msgs/msg/PoseStamped", 50.0),
        "/vine/truth/pivot": ("shape_sensing/msg/PivotEstimate", 50.0),
        "/vine/truth/path": ("nav_msgs/msg/Path", None),
        "/vine/truth/obstacles": ("visualization_msgs/msg/MarkerArray", None),
        "/tf_static": ("tf2_msgs/msg/TFMessage", None),
        "/tf": ("tf2_msgs/msg/TFMessage", 100.0),  # both estimators' vine_base -> tip, 50 Hz each
        "/diagnostics": ("diagnostic_msgs/msg/DiagnosticArray", None),
    }
    for prefix in ("collision", "collision_paper"):
        TOPICS |= {
            f"/vine/{prefix}/pivot": ("shape_sensing/msg/PivotEstimate", 50.0),
            f"/vine/{prefix}/tip": ("geometry_msgs/msg/PoseStamped", 50.0),
            f"/vine/{prefix}/path": ("nav_msgs/msg/Path", 5.0),
            f"/vine/{prefix}/markers": ("visualization_msgs/msg/MarkerArray", 5.0),
            f"/vine/{prefix}/events": ("shape_sensing/msg/ContactEvent", None),
        }

    @pytest.mark.launch_test
    def generate_test_description() -> Any:
        return h.description("vine_collision_sim.launch.xml")

    class TestVineCollisionSim(h.RobotChecks, unittest.TestCase):
        TOPICS, FRAMES = TOPICS, ["vine_base", "vine_tip", "vine_tip_paper"]

        def test_3_parameters_equal_the_file(self) -> None:
            config = h.share("config", "vine_collision_sim.yaml")
            sim = h.expected_parameters("vine_collision_simulator", config, {"course": "three", "seed": 0})
            h.check_param_dump("/vine/vine_collision_simulator", sim)
            est = h.expected_parameters("collision_pivot_estimator", config)
            h.check_param_dump("/vine/collision_pivot_estimator", est)
            section = "collision_pivot_estimator_paper"
            paper = h.expected_parameters("collision_pivot_estimator", config, section=section)
            h.check_param_dump("/vine/collision_pivot_estimator_paper", paper)

        def test_4_bad_parameter_file_stops_the_node_naming_it(self) -> None:
            h.check_bad_parameter_file("collision_pivot_estimator", "/bad_vine", {"filter": "kalman"}, "filter")

    @launch_testing.post_shutdown_test()
    class TestVineCollisionSimShutdown(unittest.TestCase):
        def test_sigint_exits_cleanly(self, proc_info: Any, proc_output: Any) -> None:
            h.check_clean_shutdown(proc_info, proc_output)
