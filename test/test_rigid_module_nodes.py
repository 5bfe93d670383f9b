"""rclpy tests of the hyper-redundant nodes (run on a ROS 2 machine; skipped without rclpy)."""

from __future__ import annotations

import numpy as np
import pytest

try:
    import rclpy
except ImportError:  # no ROS 2: each test skips (a module-level skip aborts the whole run under ROS's pytest plugins)
    rclpy = None

from shape_sensing.messages import common as msgs
from shape_sensing.messages.factory import MessageFactory
from shape_sensing.types import ImuSample

pytestmark = [pytest.mark.rclpy, pytest.mark.skipif(rclpy is None, reason="needs rclpy (a sourced ROS 2)")]


def test_estimator_node_publishes_from_imu_callbacks() -> None:
    from shape_sensing.nodes.rigid_module_estimator import RigidModuleEstimatorNode

    rclpy.init()
    try:
        node = rclpy.create_node("rigid_module_estimator")
        app = RigidModuleEstimatorNode(node)
        published: list[str] = []
        for topic, pub in app.publishers.items():
            pub.publish = lambda msg, topic=topic: published.append(topic)  # type: ignore[method-assign]
        f = MessageFactory("rclpy")
        q = np.array([0.0, 0.0, 0.0, 1.0])
        for k in range(30):
            for i in range(app.tracker.n):
                app._on_imu(i, msgs.imu_to_msg(ImuSample(k * 10_000_000, f"platform_{i}", q), f), {})
        app.inputs.flush()  # what the stamp-ordered input stage still holds
        assert "/tf" in published and "shape/end_effector" in published and "joint_states" in published
        node.destroy_node()
    finally:
        rclpy.shutdown()
