"""The growth_planner node on a ROS 2 system: the GetPlan service answers with a path ending at the goal."""

from __future__ import annotations

import pytest

try:
    import rclpy
except ImportError:  # no ROS 2: each test skips (a module-level skip aborts the whole run under ROS's pytest plugins)
    rclpy = None
pytestmark = [pytest.mark.rclpy, pytest.mark.skipif(rclpy is None, reason="needs rclpy (a sourced ROS 2)")]


def test_get_plan_service_round_trip() -> None:
    import rclpy.executors
    from nav_msgs.srv import GetPlan

    from shape_sensing.nodes.growth_planner import GrowthPlannerNode

    rclpy.init()
    try:
        server = rclpy.create_node("growth_planner")
        GrowthPlannerNode(server)
        client_node = rclpy.create_node("growth_planner_client")
        client = client_node.create_client(GetPlan, "plan")
        assert client.wait_for_service(timeout_sec=5.0)
        request = GetPlan.Request()
        request.goal.header.frame_id = "growth_base"
        request.goal.pose.position.x, request.goal.pose.position.y = 0.4, 0.2
        request.goal.pose.orientation.y = 0.7071068  # z axis of the goal along +x
        request.goal.pose.orientation.w = 0.7071068
        future = client.call_async(request)
        executor = rclpy.executors.SingleThreadedExecutor()
        executor.add_node(server)
        executor.add_node(client_node)
        executor.spin_until_future_complete(future, timeout_sec=10.0)
        plan = future.result().plan
        end = plan.poses[-1].pose.position
        assert abs(end.x - 0.4) < 1e-6 and abs(end.y - 0.2) < 1e-6
    finally:
        rclpy.shutdown()
