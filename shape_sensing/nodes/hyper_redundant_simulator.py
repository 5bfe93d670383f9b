"""``hyper_redundant_simulator`` node: a simulated n-module robot publishing WT901 IMU topics and ground truth.

Every reading goes through the WT901 protocol (emulator, line faults, parser),
as in ``shape-sensing demo hyper-redundant``. For the first ``rods_seconds``
the robot is held straight, so a ``rigid_module_estimator`` with
``calibrate_on_start`` takes its rods calibration then.

Publishes (relative names): ``imu/platform_<i>`` (sensor_msgs/Imu, sensor-data
QoS), ``truth/joint_states`` (sensor_msgs/JointState), ``truth/end_effector``
(geometry_msgs/PoseStamped in ``base_link``), at ``rate`` Hz of node time.
Under ``use_sim_time`` nothing is published until ``/clock`` runs; the
simulation starts at the first tick with a running clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shape_sensing.messages import common as msgs
from shape_sensing.messages import hyper_redundant as hmsgs
from shape_sensing.messages.factory import MessageFactory
from shape_sensing.messages.imu_array import IMU_ARRAY_TYPE, imu_array_msg
from shape_sensing.nodes._common import declare_schema, reliable_qos, run, sensor_qos
from shape_sensing.sim.hyper_redundant import SCHEMA, EmulatedSensors, HyperRedundantSim

__all__ = ["NODE_NAME", "HyperRedundantSimulatorNode", "main"]

NODE_NAME = "hyper_redundant_simulator"


class HyperRedundantSimulatorNode:
    """Steps the simulator on a timer and publishes its sensors and truth."""

    def __init__(self, node: Any) -> None:
        self.node = node
        p = declare_schema(node, SCHEMA)
        self.params = p
        self.sim = HyperRedundantSim(
            n_modules=p["n_modules"], d1=p["d1"], d2=p["d2"], amplitude_deg=p["amplitude_deg"],
            mount_deg=p["mount_deg"], yaw_disturbance_deg=p["yaw_disturbance_deg"], rods_s=p["rods_seconds"],
            seed=p["seed"],
        )  # fmt: skip
        n = p["n_modules"] + 1
        self.sensors = EmulatedSensors(
            n, rate_hz=p["rate"], byte_error_rate=p["byte_error_rate"], seed=p["seed"] + 1,
            frame_prefix=p["frame_prefix"],
        )  # fmt: skip
        self.factory = MessageFactory("rclpy")
        imu_cls = self.factory.cls("sensor_msgs/msg/Imu")
        self.imu_pubs = [node.create_publisher(imu_cls, f"imu/platform_{i}", sensor_qos()) for i in range(n)]
        topic = p["imu_array_topic"]
        self.array_pub = node.create_publisher(self.factory.cls(IMU_ARRAY_TYPE), topic, sensor_qos()) if topic else None
        self.joint_pub = node.create_publisher(
            self.factory.cls("sensor_msgs/msg/JointState"), "truth/joint_states", reliable_qos()
        )
        self.tip_pub = node.create_publisher(
            self.factory.cls("geometry_msgs/msg/PoseStamped"), "truth/end_effector", reliable_qos()
        )
        self.names = hmsgs.joint_names(p["n_modules"], p["frame_prefix"])
        self.start_ns: int | None = None
        self.timer = node.create_timer(1.0 / p["rate"], self._on_tick)

    def _on_tick(self) -> None:
        now = int(self.node.get_clock().now().nanoseconds)
        if now <= 0:
            return  # use_sim_time without a /clock yet: starting at 0 would jump the simulation ahead once it runs
        if self.start_ns is None:
            self.start_ns = now
        snap = self.sim.snapshot((now - self.start_ns) * 1e-9)
        f = self.factory
        recovered = self.sensors.samples(snap, now)
        for i, sample in recovered:
            self.imu_pubs[i].publish(msgs.imu_to_msg(sample, f))
        if self.array_pub is not None and recovered:
            base_frame = self.params["frame_prefix"] + "base_link"
            self.array_pub.publish(imu_array_msg(now, base_frame, [s for _, s in recovered], f))
        self.joint_pub.publish(hmsgs.joint_state_msg(now, self.names, snap.theta, f))
        base = self.params["frame_prefix"] + "base_link"
        self.tip_pub.publish(hmsgs.pose_stamped_msg(now, base, snap.poses[-1], f))


def main(args: Sequence[str] | None = None) -> int:
    """Console-script entry."""
    return run(NODE_NAME, HyperRedundantSimulatorNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
