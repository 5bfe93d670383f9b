"""Two hyper-redundant, two continuum robots and two growth planners side by side, from the launch files alone
(launch_testing; skipped without ROS 2).

``hyper_redundant_sim``, ``continuum_estimator`` and ``growth_planner``, each launched twice with ``namespace:=`` and
``frame_prefix:=`` only. Checked (``launch_harness.SideBySideChecks``): every node once under its own name (the world
transform publishers included: they live in the robot's namespace), each robot's topics in its namespace, tf2 from
``world`` to both robots' frames under their own names, no unprefixed ``base_link``, and each planner planning in
its own prefixed frame. Before, two of these launches collided on node names (``/world_to_base_link``) and frames.
"""

from __future__ import annotations

import unittest
from typing import Any, ClassVar

import launch_harness as h
import pytest

WHY_NOT = h.REASON or h.interfaces_reason()
ROBOTS = ("a", "b")

if WHY_NOT:

    def test_launch_two_arm_robots() -> None:
        pytest.skip(WHY_NOT)

else:
    import launch_testing

    LAUNCHES = [
        (f, {"namespace": f"{kind}_{r}", "frame_prefix": f"{kind}_{r}_"})
        for f, kind in (
            ("hyper_redundant_sim.launch.xml", "hr"),
            ("continuum_estimator.launch.xml", "cont"),
            ("growth_planner.launch.xml", "grow"),
        )
        for r in ROBOTS
    ]

    @pytest.mark.launch_test
    def generate_test_description() -> Any:
        return h.side_by_side(LAUNCHES)

    class TestTwoArmRobots(h.SideBySideChecks, unittest.TestCase):
        NODES: ClassVar[list[str]] = [n for r in ROBOTS for n in (
            f"/hr_{r}/hyper_redundant_simulator", f"/hr_{r}/rigid_module_estimator", f"/hr_{r}/world_to_base_link",
            f"/cont_{r}/continuum_estimator", f"/cont_{r}/world_to_continuum_base", f"/grow_{r}/growth_planner",
            f"/grow_{r}/world_to_growing_base")]  # fmt: skip
        TOPICS: ClassVar[dict[str, tuple[str, float | None]]] = {t: (typ, None) for r in ROBOTS for t, typ in (
            (f"/hr_{r}/shape/end_effector", "geometry_msgs/msg/PoseWithCovarianceStamped"),
            (f"/hr_{r}/imu/platform_0", "sensor_msgs/msg/Imu"),
            (f"/cont_{r}/shape/path", "nav_msgs/msg/Path"),
            (f"/grow_{r}/plan/path", "nav_msgs/msg/Path"))}  # fmt: skip
        FRAMES: ClassVar[list[str]] = [f for r in ROBOTS for f in (
            f"hr_{r}_base_link", f"hr_{r}_end_effector", f"hr_{r}_platform_4", f"cont_{r}_continuum_base",
            f"grow_{r}_growing_base")]  # fmt: skip
        BARE: ClassVar[list[str]] = ["base_link", "end_effector", "continuum_base", "growing_base"]

        def test_4_each_planner_plans_in_its_own_frame(self) -> None:
            from nav_msgs.srv import GetPlan

            p = self.probe
            for r in ROBOTS:
                client = p.node.create_client(GetPlan, f"/grow_{r}/plan")
                try:
                    assert p.spin_until(client.service_is_ready, h.SIDE_BY_SIDE_DISCOVERY_S), f"/grow_{r}/plan"
                    request = GetPlan.Request()
                    request.goal.header.frame_id = "world"  # through the robot's own world transform
                    request.goal.pose.position.x, request.goal.pose.position.y = 0.4, 0.3
                    request.goal.pose.position.z = 0.1
                    request.goal.pose.orientation.y = request.goal.pose.orientation.w = 0.7071068
                    future = client.call_async(request)
                    assert p.spin_until(future.done, h.SIDE_BY_SIDE_DISCOVERY_S), f"/grow_{r}/plan did not answer"
                    plan = future.result().plan
                    assert len(plan.poses) > 10 and plan.header.frame_id == f"grow_{r}_growing_base", plan.header
                finally:
                    p.node.destroy_client(client)

    @launch_testing.post_shutdown_test()
    class TestTwoArmRobotsShutdown(unittest.TestCase):
        def test_sigint_exits_cleanly(self, proc_info: Any, proc_output: Any) -> None:
            h.check_clean_shutdown(proc_info, proc_output)
