"""Two of every vine robot kind side by side, from the launch files alone (launch_testing; skipped without ROS 2).

``vine_imu_sim`` and ``vine_collision_sim``, each launched twice with ``namespace:=`` and ``frame_prefix:=`` only.
Checked (``launch_harness.SideBySideChecks``): every node once under its own name, each robot's topics in its own
namespace, tf2 from ``world`` to both robots' frames under their own names (each robot publishing its own world
transform) and no unprefixed frame, and a clean shutdown. Before, launch files had no ``frame_prefix`` argument
(``<set_parameter>`` lost to the config's ``frame_prefix: ""``) and five had no ``namespace``.
"""

from __future__ import annotations

import unittest
from typing import Any, ClassVar

import launch_harness as h
import pytest

WHY_NOT = h.REASON or h.interfaces_reason()
ROBOTS = ("a", "b")

if WHY_NOT:

    def test_launch_two_vine_robots() -> None:
        pytest.skip(WHY_NOT)

else:
    import launch_testing

    LAUNCHES = [
        (f, {"namespace": f"{kind}_{r}", "frame_prefix": f"{kind}_{r}_"})
        for f, kind in (("vine_imu_sim.launch.xml", "imu"), ("vine_collision_sim.launch.xml", "col"))
        for r in ROBOTS
    ]

    @pytest.mark.launch_test
    def generate_test_description() -> Any:
        return h.side_by_side(LAUNCHES)

    class TestTwoVineRobots(h.SideBySideChecks, unittest.TestCase):
        NODES: ClassVar[list[str]] = [n for r in ROBOTS for n in (
            f"/imu_{r}/vine_imu_simulator", f"/imu_{r}/hinge_arc_estimator", f"/col_{r}/vine_collision_simulator",
            f"/col_{r}/collision_pivot_estimator", f"/col_{r}/collision_pivot_estimator_paper")]  # fmt: skip
        TOPICS: ClassVar[dict[str, tuple[str, float | None]]] = {t: (typ, None) for r in ROBOTS for t, typ in (
            (f"/imu_{r}/shape/tip", "geometry_msgs/msg/PoseWithCovarianceStamped"),
            (f"/imu_{r}/imu_17/data", "sensor_msgs/msg/Imu"),
            (f"/col_{r}/collision/tip", "geometry_msgs/msg/PoseStamped"),
            (f"/col_{r}/truth/obstacles", "visualization_msgs/msg/MarkerArray"))}  # fmt: skip
        FRAMES: ClassVar[list[str]] = [f for r in ROBOTS for f in (
            f"imu_{r}_vine_base", f"imu_{r}_vine_imu_base", f"imu_{r}_vine_imu_tip", f"imu_{r}_vine_imu_00",
            f"col_{r}_vine_base", f"col_{r}_vine_tip")]  # fmt: skip
        BARE: ClassVar[list[str]] = ["vine_base", "vine_imu_base", "vine_imu_tip", "vine_tip", "vine_imu_00"]

    @launch_testing.post_shutdown_test()
    class TestTwoVineRobotsShutdown(unittest.TestCase):
        def test_sigint_exits_cleanly(self, proc_info: Any, proc_output: Any) -> None:
            h.check_clean_shutdown(proc_info, proc_output)
