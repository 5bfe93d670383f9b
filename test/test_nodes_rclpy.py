"""The vine-IMU nodes in-process on a real ROS 2 (skipped where rclpy is absent).

A hand-made straight robot (three IMUs, all reading the identity orientation)
is published to the ``hinge_arc_estimator`` node; the shape must come out on
``/tf`` and ``shape/path``: a straight backbone along the base z axis, two
spacings long, stamped with the data's stamps. The simulator node must
publish its IMU streams and the static ``world`` -> ``vine_base`` -> ``vine_imu_base`` transforms.
A bad parameter must be refused with an error naming it. The continuum_estimator node
must turn base and tip poses of a straight, still robot into node frames along z.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

try:
    import rclpy
except ImportError:  # no ROS 2: each test skips (a module-level skip aborts the whole run under ROS's pytest plugins)
    rclpy = None

pytestmark = [pytest.mark.rclpy, pytest.mark.skipif(rclpy is None, reason="needs rclpy (a sourced ROS 2)")]

SPACING = 0.102
NS = "/test_vine"
TOPICS = ["imu_00/data", "imu_01/data", "imu_02/data"]
MAX_ROUNDS = 400  # publish/spin rounds before giving up (not a time limit)


def _node(context: Any, name: str, **overrides: Any) -> Any:
    from rclpy.parameter import Parameter

    params = [Parameter(k, value=v) for k, v in overrides.items()]
    return rclpy.create_node(name, namespace=NS, context=context, parameter_overrides=params)


def _spin_until(executor: Any, done: Callable[[], bool], step: Callable[[int], None] | None = None) -> bool:
    for k in range(MAX_ROUNDS):
        if step is not None:
            step(k)
        executor.spin_once(timeout_sec=0.02)
        if done():
            return True
    return False


def _imu(stamp_ns: int, frame: str) -> Any:
    from builtin_interfaces.msg import Time
    from sensor_msgs.msg import Imu

    msg = Imu()
    msg.header.stamp = Time(sec=stamp_ns // 1_000_000_000, nanosec=stamp_ns % 1_000_000_000)
    msg.header.frame_id = frame
    msg.orientation.x, msg.orientation.y, msg.orientation.z, msg.orientation.w = 0.0, 0.0, 0.0, 1.0
    return msg


def test_estimator_publishes_tf_and_path_of_a_straight_robot(context: Any) -> None:
    from nav_msgs.msg import Path
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, qos_profile_sensor_data
    from sensor_msgs.msg import Imu
    from std_srvs.srv import Trigger
    from tf2_msgs.msg import TFMessage

    from shape_sensing.nodes.hinge_arc_estimator import HingeArcEstimatorNode

    node = _node(context, "hinge_arc_estimator", imu_topics=TOPICS, length_topic="", publish_rate=10.0)
    estimator = HingeArcEstimatorNode(node)
    helper = _node(context, "test_helper")
    pubs = [helper.create_publisher(Imu, t, qos_profile_sensor_data) for t in TOPICS]
    tfs: list[Any] = []
    paths: list[Any] = []
    helper.create_subscription(TFMessage, "/tf", tfs.append, QoSProfile(depth=100))
    helper.create_subscription(Path, "shape/path", paths.append, QoSProfile(depth=10))
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    executor.add_node(helper)
    stamps: list[int] = []

    def publish(k: int) -> None:
        stamp = 1_000_000_000 + 20_000_000 * k  # 50 Hz of data, estimates at 10 Hz of stamps
        stamps.append(stamp)
        for i, pub in enumerate(pubs):
            pub.publish(_imu(stamp, f"vine_imu_{i:02d}"))

    try:
        assert _spin_until(executor, lambda: bool(tfs) and bool(paths), publish), "no /tf or shape/path came out"
        tf = tfs[-1]
        children = [t.child_frame_id for t in tf.transforms]
        assert children == ["vine_imu_00", "vine_imu_01", "vine_imu_02", "vine_imu_tip"]
        assert {t.header.frame_id for t in tf.transforms} == {"vine_imu_base"}
        tip = tf.transforms[-1].transform.translation
        assert (tip.x, tip.y, tip.z) == pytest.approx((0.0, 0.0, 2 * SPACING), abs=1e-9)
        path = paths[-1]
        assert path.header.frame_id == "vine_imu_base"
        pts = [(p.pose.position.x, p.pose.position.y, p.pose.position.z) for p in path.poses]
        assert pts[0] == pytest.approx((0.0, 0.0, 0.0), abs=1e-9)
        assert pts[-1] == pytest.approx((0.0, 0.0, 2 * SPACING), abs=1e-9)
        assert all(abs(x) < 1e-9 and abs(y) < 1e-9 for x, y, _ in pts)
        stamp_ns = path.header.stamp.sec * 1_000_000_000 + path.header.stamp.nanosec
        assert stamp_ns % 100_000_000 == 0 and stamps[0] < stamp_ns <= stamps[-1], "stamped on a tick of the data"

        client = helper.create_client(Trigger, "hinge_arc_estimator/offset")
        assert _spin_until(executor, client.service_is_ready), "~/offset service not offered"
        future = client.call_async(Trigger.Request())
        assert _spin_until(executor, future.done)
        assert future.result().success
        assert estimator.tracker._offset_requested  # captured at the next complete tick
    finally:
        executor.shutdown()
        helper.destroy_node()
        node.destroy_node()


def test_simulator_publishes_imu_streams_and_static_tf(context: Any) -> None:
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
    from sensor_msgs.msg import Imu
    from tf2_msgs.msg import TFMessage

    from shape_sensing.nodes.vine_imu_simulator import VineImuSimulatorNode

    node = _node(context, "vine_imu_simulator", n_sensors=4, rate=50.0)
    VineImuSimulatorNode(node)
    helper = _node(context, "test_helper")
    imus: list[Any] = []
    static: list[Any] = []
    helper.create_subscription(Imu, "imu_03/data", imus.append, qos_profile_sensor_data)
    latched = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
    helper.create_subscription(TFMessage, "/tf_static", static.append, latched)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    executor.add_node(helper)
    try:
        assert _spin_until(executor, lambda: len(imus) >= 3 and bool(static)), "no IMU stream or static TF"
        assert imus[-1].header.frame_id == "vine_imu_03"
        q = imus[-1].orientation
        assert q.x**2 + q.y**2 + q.z**2 + q.w**2 == pytest.approx(1.0, abs=1e-6)
        t = static[-1].transforms[0]
        assert (t.header.frame_id, t.child_frame_id) == ("world", "vine_base")
        t2 = static[-1].transforms[1]
        assert (t2.header.frame_id, t2.child_frame_id) == ("vine_base", "vine_imu_base")
    finally:
        executor.shutdown()
        helper.destroy_node()
        node.destroy_node()


def test_bad_parameter_is_refused_naming_it(context: Any) -> None:
    from shape_sensing.config import ConfigError
    from shape_sensing.nodes.hinge_arc_estimator import HingeArcEstimatorNode

    node = _node(context, "hinge_arc_estimator", every_k=0)
    try:
        with pytest.raises(ConfigError, match=r"parameter 'every_k' = 0: expected int >= 1"):
            HingeArcEstimatorNode(node)
    finally:
        node.destroy_node()
    node = _node(context, "hinge_arc_estimator_2", spacing=1)
    try:
        with pytest.raises(ConfigError, match=r"parameter 'spacing' rejected by ROS 2.*decimal point"):
            HingeArcEstimatorNode(node)
    finally:
        node.destroy_node()


def test_continuum_estimator_tracks_a_straight_robot(context: Any) -> None:
    """Base and tip poses of a straight, still robot in; node frames along z on /tf and the tip pose out."""
    from builtin_interfaces.msg import Time
    from geometry_msgs.msg import PoseWithCovarianceStamped
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.qos import QoSProfile, qos_profile_sensor_data
    from sensor_msgs.msg import Imu
    from tf2_msgs.msg import TFMessage

    from shape_sensing.nodes.continuum_estimator import ContinuumEstimatorNode

    length = 0.466
    node = _node(
        context,
        "continuum_estimator",
        pose_topics=["base_pose", "tip_pose"],
        pose_arc_lengths=[0.0, length],
    )
    ContinuumEstimatorNode(node)
    helper = _node(context, "test_helper")
    poses = [
        helper.create_publisher(PoseWithCovarianceStamped, t, qos_profile_sensor_data)
        for t in ("base_pose", "tip_pose")
    ]
    gyros = [helper.create_publisher(Imu, t, qos_profile_sensor_data) for t in ("gyro_mid/data", "gyro_tip/data")]
    tfs: list[Any] = []
    tips: list[Any] = []
    helper.create_subscription(TFMessage, "/tf", tfs.append, QoSProfile(depth=100))
    helper.create_subscription(PoseWithCovarianceStamped, "shape/tip", tips.append, QoSProfile(depth=10))
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    executor.add_node(helper)

    def publish(k: int) -> None:
        stamp = 2_000_000_000 + 20_000_000 * k  # 50 Hz of data
        t = Time(sec=stamp // 1_000_000_000, nanosec=stamp % 1_000_000_000)
        for pub, z in zip(poses, (0.0, length), strict=True):
            msg = PoseWithCovarianceStamped()
            msg.header.stamp = t
            msg.header.frame_id = "continuum_base"
            msg.pose.pose.position.z = z
            msg.pose.pose.orientation.w = 1.0
            pub.publish(msg)
        for pub in gyros:
            imu = Imu()
            imu.header.stamp = t
            imu.orientation.w = 1.0
            pub.publish(imu)

    try:
        assert _spin_until(executor, lambda: len(tfs) >= 5 and bool(tips), publish), "no /tf or shape/tip came out"
        last = tfs[-1].transforms
        assert [t.child_frame_id for t in last] == [f"continuum_node_{i:02d}" for i in range(5)]
        assert {t.header.frame_id for t in last} == {"continuum_base"}
        z = [t.transform.translation.z for t in last]
        assert z == pytest.approx([i * length / 4 for i in range(5)], abs=1e-3)
        tip = tips[-1]
        assert tip.header.frame_id == "continuum_base"
        assert tip.pose.pose.position.z == pytest.approx(length, abs=1e-3)
        assert all(tip.pose.covariance[i * 7] > 0.0 for i in range(6))
    finally:
        executor.shutdown()
        helper.destroy_node()
        node.destroy_node()
