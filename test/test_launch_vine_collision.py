"""Launch test of ``launch/vine_collision.launch.xml`` (launch_testing; skipped where ROS 2 is not sourced).

The robot launch with ``drivers:=false`` (the collision-pivot estimator and the launch's ``world`` ->
``vine_base`` transform, as for inputs published by other hardware), fed by the collision simulator node
added by the test: it publishes the topics the base station, contact cap and Net F/T drivers would, through
the drivers' own parsers. Checked: the estimator's topics with their types and rates, tf2 from ``world`` to
the base and the tip, ``ros2 param dump`` against the robot's parameter file, a bad parameter file, and a
clean SIGINT shutdown. (The driver nodes themselves need their serial port, I2C bus and UDP sensor.)
"""

from __future__ import annotations

import unittest
from typing import Any

import launch_harness as h
import pytest

WHY_NOT = h.REASON or h.interfaces_reason()

if WHY_NOT:

    def test_launch_vine_collision() -> None:
        pytest.skip(WHY_NOT)

else:
    import launch_testing

    TOPICS: dict[str, tuple[str, float | None]] = {
        "/vine/collision/pivot": ("shape_sensing/msg/PivotEstimate", 50.0),  # one step per length message
        "/vine/collision/tip": ("geometry_msgs/msg/PoseStamped", 50.0),
        "/vine/collision/path": ("nav_msgs/msg/Path", 5.0),
        "/vine/collision/markers": ("visualization_msgs/msg/MarkerArray", 5.0),
        "/vine/collision/events": ("shape_sensing/msg/ContactEvent", None),
        "/tf": ("tf2_msgs/msg/TFMessage", 50.0),
        "/tf_static": ("tf2_msgs/msg/TFMessage", None),
        "/diagnostics": ("diagnostic_msgs/msg/DiagnosticArray", None),
    }

    @pytest.mark.launch_test
    def generate_test_description() -> Any:
        from launch_ros.actions import Node

        feeder = Node(package="shape_sensing", executable="vine_collision_simulator", namespace="vine",
                      name="vine_collision_simulator", output="screen")  # fmt: skip
        return h.description("vine_collision.launch.xml", {"drivers": "false"}, [feeder])

    class TestVineCollision(h.RobotChecks, unittest.TestCase):
        TOPICS, FRAMES = TOPICS, ["vine_base", "vine_tip"]

        def test_3_parameters_equal_the_file(self) -> None:
            config = h.share("config", "vine_collision.yaml")
            est = h.expected_parameters("collision_pivot_estimator", config)
            h.check_param_dump("/vine/collision_pivot_estimator", est)

        def test_4_bad_parameter_file_stops_the_node_naming_it(self) -> None:
            h.check_bad_parameter_file("collision_pivot_estimator", "/bad_vine", {"stale_timeot": 0.2}, "stale_timeot")

    @launch_testing.post_shutdown_test()
    class TestVineCollisionShutdown(unittest.TestCase):
        def test_sigint_exits_cleanly(self, proc_info: Any, proc_output: Any) -> None:
            h.check_clean_shutdown(proc_info, proc_output)
