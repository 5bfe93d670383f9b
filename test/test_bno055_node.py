"""The bno055_chain node on a ROS 2 machine (skipped without rclpy): simulated chain -> topics and services."""

from __future__ import annotations

import time

import pytest

try:
    import rclpy
except ImportError:  # no ROS 2: each test skips (a module-level skip aborts the whole run under ROS's pytest plugins)
    rclpy = None

pytestmark = [pytest.mark.rclpy, pytest.mark.skipif(rclpy is None, reason="needs rclpy (a sourced ROS 2)")]


def test_node_publishes_imu_and_saves_calibration(tmp_path):
    from rclpy.parameter import Parameter
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Imu
    from std_srvs.srv import Trigger

    from shape_sensing.drivers.bno055_chain import CalibrationStore
    from shape_sensing.nodes.bno055_chain import Bno055ChainNode

    rclpy.init()
    try:
        cal = tmp_path / "cal.yaml"
        node = rclpy.create_node(
            "bno055_chain",
            parameter_overrides=[
                Parameter("simulate", value=True),
                Parameter("rate", value=50.0),
                Parameter("calibration_file", value=str(cal)),
            ],
        )
        app = Bno055ChainNode(node)
        listener = rclpy.create_node("listener")
        got: list = []
        listener.create_subscription(Imu, "imu_00/data", got.append, qos_profile_sensor_data)
        executor = rclpy.executors.SingleThreadedExecutor()
        executor.add_node(node)
        executor.add_node(listener)
        t_end = time.monotonic() + 10.0
        while (len(got) < 5 or len(app.chain.calibration.profiles) < 18) and time.monotonic() < t_end:
            executor.spin_once(timeout_sec=0.05)
        assert len(got) >= 5
        assert got[0].header.frame_id == "vine_imu_00"
        assert abs(got[-1].orientation.w - 1.0) < 1e-3
        response = app._on_save(Trigger.Request(), Trigger.Response())
        assert response.success, response.message
        assert len(CalibrationStore.load(cal).profiles) == 18
        app.close()
        node.destroy_node()
        listener.destroy_node()
    finally:
        rclpy.shutdown()
