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


def test_estimator_node_gives_the_same_shape_from_sweeps_as_from_platform_topics() -> None:
    """The same readings as one ImuArray per bus cycle and as per-platform Imu messages: the same estimates (every
    published end effector and joint state), and a sweep with a corrupted row is skipped as a bad sample."""
    from rclpy.serialization import deserialize_message, serialize_message
    from scipy.spatial.transform import Rotation

    from shape_sensing.messages.imu_array import imu_array_msg
    from shape_sensing.nodes.rigid_module_estimator import RigidModuleEstimatorNode

    rclpy.init()
    try:
        f = MessageFactory("rclpy")
        rng = np.random.default_rng(4)
        apps, sent = [], []
        for name, array in (("rigid_topics", ""), ("rigid_arrays", "imu/array")):
            node = rclpy.create_node(name, parameter_overrides=[rclpy.parameter.Parameter("imu_array_topic",
                                                                                            value=array)])  # fmt: skip
            app = RigidModuleEstimatorNode(node)
            out: list[tuple[str, object]] = []
            for topic, pub in app.publishers.items():
                pub.publish = lambda msg, topic=topic, out=out: out.append((topic, msg))  # type: ignore[method-assign]
            apps.append(app)
            sent.append(out)
        n = apps[0].tracker.n
        angles = np.cumsum(rng.normal(0.0, 0.02, (200, n, 3)), axis=0)
        for k in range(200):
            stamp = 1_000_000_000 + k * 10_000_000
            samples = [
                ImuSample(stamp, f"platform_{i}", Rotation.from_rotvec(angles[k, i]).as_quat()) for i in range(n)
            ]
            for i, s in enumerate(samples):
                apps[0]._on_imu(i, msgs.imu_to_msg(s, f), {})
            # taken raw, as the node subscribes: the CDR bytes rclpy's serialiser writes; every tenth big-endian
            # (rosbags' serialiser), which the node leaves to rclpy's decoder
            if k % 10 == 5:
                fb = MessageFactory("rosbags")
                raw = bytes(fb.typestore.serialize_cdr(imu_array_msg(stamp, "base_link", samples, fb),
                                                       "shape_sensing/msg/ImuArray", little_endian=False))  # fmt: skip
                assert raw[:2] == b"\x00\x00"
            else:
                raw = serialize_message(imu_array_msg(stamp, "base_link", samples, f))
            apps[1]._on_imu_array(raw, {})
        bad = imu_array_msg(3_000_000_000, "base_link", samples, f)
        bad.orientation[3] = 3.0  # sensor 0 is no unit quaternion
        before = apps[1].tracker.stats.bad_samples
        apps[1]._on_imu_array(serialize_message(bad), {})
        apps[1]._on_imu_array(serialize_message(bad)[:200], {})  # truncated
        apps[1]._on_imu_array(b"\x00\x07\x00\x00" + serialize_message(bad)[4:], {})  # an encoding nobody reads
        assert apps[1].tracker.stats.bad_samples == before + 3
        for app in apps:
            app.inputs.flush()

        def decoded(out: list[tuple[str, object]], topic: str, cls: object) -> list[object]:
            return [m if not isinstance(m, bytes) else deserialize_message(m, cls) for t, m in out if t == topic]

        from geometry_msgs.msg import PoseWithCovarianceStamped
        from sensor_msgs.msg import JointState

        ends = [decoded(out, "shape/end_effector", PoseWithCovarianceStamped) for out in sent]
        joints = [decoded(out, "joint_states", JointState) for out in sent]
        assert len(ends[0]) >= 15 and len(ends[0]) == len(ends[1]) and len(joints[0]) == len(joints[1])
        for a, b in zip(*ends, strict=True):
            assert (a.header.stamp.sec, a.header.stamp.nanosec) == (b.header.stamp.sec, b.header.stamp.nanosec)
            p, q = a.pose.pose.position, b.pose.pose.position
            np.testing.assert_allclose([p.x, p.y, p.z], [q.x, q.y, q.z], atol=1e-12)
            np.testing.assert_allclose(a.pose.covariance, b.pose.covariance, atol=1e-12)  # finite differences
        for a, b in zip(*joints, strict=True):
            np.testing.assert_allclose(a.position, b.position, atol=1e-12)
        for app in apps:
            app.node.destroy_node()
    finally:
        rclpy.shutdown()
