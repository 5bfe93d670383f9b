"""Two ToF sensor-ring sets and two BNO055 chains side by side, from the launch files alone (launch_testing;
skipped without ROS 2).

``tof_rings`` and ``bno055_chain`` (both ``simulate:=true``), each launched twice with ``namespace:=`` and
``frame_prefix:=`` only. Checked (``launch_harness.SideBySideChecks``): every node once under its own name, each
set's topics in its namespace, tf2 from ``world`` to both ring sets' ring and sensor frames under their own names.
"""

from __future__ import annotations

import unittest
from typing import Any, ClassVar

import launch_harness as h
import pytest

WHY_NOT = h.REASON or h.interfaces_reason()
ROBOTS = ("a", "b")

if WHY_NOT:

    def test_launch_two_sensor_sets() -> None:
        pytest.skip(WHY_NOT)

else:
    import launch_testing

    LAUNCHES = [
        (f, {"namespace": f"{kind}_{r}", "frame_prefix": f"{kind}_{r}_", "simulate": "true"})
        for f, kind in (("tof_rings.launch.xml", "tof"), ("bno055_chain.launch.xml", "bno"))
        for r in ROBOTS
    ]

    @pytest.mark.launch_test
    def generate_test_description() -> Any:
        return h.side_by_side(LAUNCHES)

    class TestTwoSensorSets(h.SideBySideChecks, unittest.TestCase):
        NODES: ClassVar[list[str]] = [
            n for r in ROBOTS for n in (f"/tof_{r}/tof_ring", f"/tof_{r}/world_to_ring_0", f"/bno_{r}/bno055_chain")
        ]
        TOPICS: ClassVar[dict[str, tuple[str, float | None]]] = {t: (typ, None) for r in ROBOTS for t, typ in (
            (f"/tof_{r}/ring_1_tof_1/points", "sensor_msgs/msg/PointCloud2"),
            (f"/tof_{r}/ring_0_imu/imu", "sensor_msgs/msg/Imu"),
            (f"/bno_{r}/imu_00/data", "sensor_msgs/msg/Imu"))}  # fmt: skip
        FRAMES: ClassVar[list[str]] = [
            f
            for r in ROBOTS
            for f in (f"tof_{r}_ring_0", f"tof_{r}_ring_2", f"tof_{r}_ring_1_tof_1_optical", f"tof_{r}_ring_2_imu")
        ]
        BARE: ClassVar[list[str]] = ["ring_0", "ring_1_tof_1_optical", "ring_2_imu"]

    @launch_testing.post_shutdown_test()
    class TestTwoSensorSetsShutdown(unittest.TestCase):
        def test_sigint_exits_cleanly(self, proc_info: Any, proc_output: Any) -> None:
            h.check_clean_shutdown(proc_info, proc_output)
