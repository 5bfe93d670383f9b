"""Launch test of ``launch/growth_planner.launch.xml`` (launch_testing; skipped where ROS 2 is not sourced).

One launch serves: the ``plan`` service (nav_msgs/GetPlan) answers a goal in
the plan frame ``growing_base`` and the same goal stamped in ``world`` (the
launch's static transform, resolved with tf2) with the same plan; a goal on
``goal_pose`` publishes the plan topics with their types; tf2 resolves
``world`` to ``growing_base``; ``ros2 param dump`` equals the parameter file; a
misspelt parameter file stops the node; SIGINT shuts down cleanly.
"""

from __future__ import annotations

import unittest
from typing import Any

import launch_harness as h
import pytest

if not h.AVAILABLE:

    def test_launch_growth_planner() -> None:
        pytest.skip(h.REASON)

else:
    import launch_testing

    TOPICS: dict[str, tuple[str, float | None]] = {
        "/growing/plan/path": ("nav_msgs/msg/Path", None),
        "/growing/plan/predicted_path": ("nav_msgs/msg/Path", None),
        "/growing/plan/predicted_tip": ("geometry_msgs/msg/PoseStamped", None),
        "/growing/plan/markers": ("visualization_msgs/msg/MarkerArray", None),
        "/tf_static": ("tf2_msgs/msg/TFMessage", None),
    }

    def _goal(frame: str) -> Any:
        from geometry_msgs.msg import PoseStamped

        goal = PoseStamped()
        goal.header.frame_id = frame
        goal.pose.position.x, goal.pose.position.y, goal.pose.position.z = 0.4, 0.3, 0.1
        goal.pose.orientation.y, goal.pose.orientation.w = 0.7071068, 0.7071068
        return goal

    @pytest.mark.launch_test
    def generate_test_description() -> Any:
        return h.description("growth_planner.launch.xml")

    class TestGrowthPlanner(unittest.TestCase):
        @classmethod
        def setUpClass(cls) -> None:
            cls.probe = h.Probe()

        @classmethod
        def tearDownClass(cls) -> None:
            cls.probe.close()

        def _plan(self, frame: str) -> Any:
            from nav_msgs.srv import GetPlan

            p = self.probe
            client = p.node.create_client(GetPlan, "/growing/plan")
            try:
                assert p.spin_until(client.service_is_ready), "service /growing/plan not available"
                request = GetPlan.Request()
                request.goal = _goal(frame)
                future = client.call_async(request)
                assert p.spin_until(future.done), "/growing/plan did not answer"
                return future.result().plan
            finally:
                p.node.destroy_client(client)

        def test_1_plan_service_in_plan_frame_and_in_world(self) -> None:
            base = self._plan("growing_base")
            assert len(base.poses) > 10 and base.header.frame_id == "growing_base"
            end = base.poses[-1].pose.position
            assert (end.x, end.y, end.z) == pytest.approx((0.4, 0.3, 0.1), abs=1e-6)
            world = self._plan("world")
            assert len(world.poses) == len(base.poses), "a goal in world must be transformed, not refused"
            w = world.poses[-1].pose.position
            assert (w.x, w.y, w.z) == pytest.approx((end.x, end.y, end.z), abs=1e-9)

        def test_2_goal_topic_publishes_the_plan_topics(self) -> None:
            from geometry_msgs.msg import PoseStamped
            from rclpy.qos import QoSProfile

            p = self.probe
            tips: list[Any] = []
            sub = p.node.create_subscription(PoseStamped, "/growing/plan/predicted_tip", tips.append, 10)
            pub = p.node.create_publisher(PoseStamped, "/growing/goal_pose", QoSProfile(depth=10))
            try:
                assert p.spin_until(lambda: pub.get_subscription_count() > 0)
                pub.publish(_goal("growing_base"))
                assert p.spin_until(lambda: bool(tips)), "no predicted tip after a goal on goal_pose"
                h.check_topics(p, TOPICS)
            finally:
                p.node.destroy_subscription(sub)
                p.node.destroy_publisher(pub)

        def test_3_tf_world_to_plan_frame(self) -> None:
            h.check_frames(self.probe, ["growing_base"])

        def test_4_parameters_equal_the_file(self) -> None:
            config = h.share("config", "growth_planner.yaml")
            h.check_param_dump("/growing/growth_planner", h.expected_parameters("growth_planner", config))

        def test_5_bad_parameter_file_stops_the_node_naming_it(self) -> None:
            h.check_bad_parameter_file("growth_planner", "/bad_growing", {"radious": 0.2}, "radious")

    @launch_testing.post_shutdown_test()
    class TestGrowthPlannerShutdown(unittest.TestCase):
        def test_sigint_exits_cleanly(self, proc_info: Any, proc_output: Any) -> None:
            h.check_clean_shutdown(proc_info, proc_output)
