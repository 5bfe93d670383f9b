"""Launch test of ``launch/continuum_estimator.launch.xml`` (launch_testing; skipped where ROS 2 is not sourced).

The launch has no simulator, so the test feeds the estimator's inputs itself: a
straight, still robot (base pose at the origin, tip pose 0.466 m along z,
gyroscopes at rest) at 50 Hz, stamped with the test's clock. Checked: the
outputs' types and rates, tf2 from ``world`` (the launch's static transform) to
the base and every arc-length node, ``ros2 param dump`` against the parameter
file, a bad parameter file, and a clean SIGINT shutdown.
"""

from __future__ import annotations

import unittest
from typing import Any

import launch_harness as h
import pytest

LENGTH = 0.466
NODES = 5

if not h.AVAILABLE:

    def test_launch_continuum_estimator() -> None:
        pytest.skip(h.REASON)

else:
    import launch_testing

    TOPICS: dict[str, tuple[str, float | None]] = {
        "/continuum/shape/path": ("nav_msgs/msg/Path", 30.0),
        "/continuum/shape/tip": ("geometry_msgs/msg/PoseWithCovarianceStamped", 30.0),
        "/continuum/shape/markers": ("visualization_msgs/msg/MarkerArray", 5.0),
        "/tf": ("tf2_msgs/msg/TFMessage", 30.0),
        "/tf_static": ("tf2_msgs/msg/TFMessage", None),
        "/diagnostics": ("diagnostic_msgs/msg/DiagnosticArray", 2.0),  # status and heartbeat, 1 Hz each
    }
    FRAMES = ["continuum_base"] + [f"continuum_node_{i:02d}" for i in range(NODES)]

    @pytest.mark.launch_test
    def generate_test_description() -> Any:
        return h.description("continuum_estimator.launch.xml")

    class TestContinuumEstimator(unittest.TestCase):
        @classmethod
        def setUpClass(cls) -> None:
            from geometry_msgs.msg import PoseWithCovarianceStamped
            from rclpy.qos import qos_profile_sensor_data
            from sensor_msgs.msg import Imu

            cls.probe = p = h.Probe()
            node = p.node
            poses = [
                node.create_publisher(PoseWithCovarianceStamped, f"/continuum/{t}", qos_profile_sensor_data)
                for t in ("base_pose", "tip_pose")
            ]
            gyros = [
                node.create_publisher(Imu, f"/continuum/{t}", qos_profile_sensor_data)
                for t in ("gyro_mid/data", "gyro_tip/data")
            ]

            def feed() -> None:
                stamp = node.get_clock().now().to_msg()
                for pub, z in zip(poses, (0.0, LENGTH), strict=True):
                    msg = PoseWithCovarianceStamped()
                    msg.header.stamp = stamp
                    msg.header.frame_id = "continuum_base"
                    msg.pose.pose.position.z = z
                    msg.pose.pose.orientation.w = 1.0
                    pub.publish(msg)
                for pub in gyros:
                    imu = Imu()
                    imu.header.stamp = stamp
                    imu.orientation.w = 1.0
                    pub.publish(imu)

            cls.feeder = node.create_timer(0.02, feed)

        @classmethod
        def tearDownClass(cls) -> None:
            cls.probe.close()

        def test_1_topics_types_and_rates(self) -> None:
            h.check_topics(self.probe, TOPICS)

        def test_2_tf_world_to_every_frame_straight_along_z(self) -> None:
            from rclpy.time import Time

            h.check_frames(self.probe, FRAMES)
            buffer = self.probe.tf_buffer()
            tip = buffer.lookup_transform("continuum_base", f"continuum_node_{NODES - 1:02d}", Time())
            assert abs(tip.transform.translation.z - LENGTH) < 5e-3, tip.transform.translation

        def test_3_parameters_equal_the_file(self) -> None:
            config = h.share("config", "continuum_estimator.yaml")
            h.check_param_dump("/continuum/continuum_estimator", h.expected_parameters("continuum_estimator", config))

        def test_4_bad_parameter_file_stops_the_node_naming_it(self) -> None:
            h.check_bad_parameter_file("continuum_estimator", "/bad_continuum", {"gyro_topicz": ["g"]}, "gyro_topicz")

    @launch_testing.post_shutdown_test()
    class TestContinuumEstimatorShutdown(unittest.TestCase):
        def test_sigint_exits_cleanly(self, proc_info: Any, proc_output: Any) -> None:
            h.check_clean_shutdown(proc_info, proc_output)
