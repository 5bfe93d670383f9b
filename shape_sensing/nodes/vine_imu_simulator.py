"""``vine_imu_simulator`` node: a simulated vine robot publishing its IMU streams and ground truth.

Thin rclpy layer over :class:`shape_sensing.sim.vine.VineSimulator`. A timer
at ``rate`` (on the node clock, so ``use_sim_time`` is honoured) samples the
simulator at the time elapsed since the first tick and publishes, stamped
with the node clock:

* ``imu_NN/data`` (sensor_msgs/Imu, frame ``vine_imu_NN``; sensor-data QoS),
* ``base/length`` (sensor_msgs/JointState, position[0] = length in m; sensor-data QoS),
* ``truth/tip`` (geometry_msgs/PoseStamped) every tick, ``truth/path``
  (nav_msgs/Path) and ``truth/sensors`` (geometry_msgs/PoseArray) at about
  10 Hz (reliable QoS), all in ``vine_base``,
* ``/tf_static`` ``world_frame`` -> ``vine_base`` -> ``vine_imu_base`` once at start (transient local; without the
  first if ``world_frame`` is '').

After ``duration`` the scenario holds its final shape (growth, passive) or
returns straight (active) while the drift keeps accumulating.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from shape_sensing.config import ConfigError
from shape_sensing.messages import common as msgs
from shape_sensing.messages.factory import MessageFactory
from shape_sensing.messages.imu_array import IMU_ARRAY_TYPE, imu_array_msg
from shape_sensing.nodes._common import declare_schema, reliable_qos, run, sensor_qos, static_qos
from shape_sensing.pipelines.vine_imu import TRUTH_TOPICS, base_transforms, length_message, truth_messages
from shape_sensing.sim.vine import R_WORLD_BASE, SCHEMA, VineSimConfig, VineSimulator

__all__ = ["NODE_NAME", "VineImuSimulatorNode", "main", "world_to_base"]

NODE_NAME = "vine_imu_simulator"
TRUTH_RATE_HZ = 10.0


def world_to_base() -> np.ndarray:
    """``T_world_base`` of the simulated robot (the base sits at the world origin)."""
    T = np.eye(4)
    T[:3, :3] = R_WORLD_BASE
    return T


class VineImuSimulatorNode:
    """Publishes a :class:`VineSimulator` on an rclpy node.

    Args:
        node: the ``rclpy.node.Node``.

    Raises:
        ConfigError: a bad parameter (named in the message).
    """

    def __init__(self, node: Any) -> None:
        self.node = node
        self.params = declare_schema(node, SCHEMA)
        try:
            self.sim = VineSimulator(VineSimConfig.from_params(self.params))
        except ValueError as exc:
            raise ConfigError(f"node {node.get_name()}: {exc}") from exc
        f = self.factory = MessageFactory("rclpy")
        n = self.sim.config.n_sensors
        imu_cls = f.cls("sensor_msgs/msg/Imu")
        self.imu_publishers = [node.create_publisher(imu_cls, f"imu_{i:02d}/data", sensor_qos()) for i in range(n)]
        topic = self.params["imu_array_topic"]
        self.array_publisher = node.create_publisher(f.cls(IMU_ARRAY_TYPE), topic, sensor_qos()) if topic else None
        self.length_publisher = node.create_publisher(f.cls("sensor_msgs/msg/JointState"), "base/length", sensor_qos())
        self.truth_publishers = {
            topic: node.create_publisher(f.cls(typename), topic, reliable_qos())
            for topic, typename in TRUTH_TOPICS.items()
        }
        self.static_publisher = node.create_publisher(f.cls("tf2_msgs/msg/TFMessage"), "/tf_static", static_qos())
        self.static_published = False
        self.start_ns: int | None = None
        self.ticks = 0
        rate = self.sim.config.rate
        self.truth_every = max(1, round(rate / TRUTH_RATE_HZ))
        self.timer = node.create_timer(1.0 / rate, self._on_tick)
        node.get_logger().info(
            f"simulating the '{self.sim.config.scenario}' scenario: {n} IMUs at {rate:g} Hz, "
            f"{self.sim.config.spacing:g} m apart, diameter {self.sim.config.diameter:g} m"
        )

    def _on_tick(self) -> None:
        now_ns = int(self.node.get_clock().now().nanoseconds)
        if now_ns <= 0:
            return  # use_sim_time without a /clock yet
        f = self.factory
        base = self.sim.base_frame
        if not self.static_published:
            tfs = base_transforms(now_ns, world_to_base(), self.sim.config.frame_prefix)
            world = self.params["world_frame"]  # '' when something else places the robot (world_tf:=false)
            tfs = [replace(tfs[0], parent=world), *tfs[1:]] if world else tfs[1:]
            self.static_publisher.publish(msgs.tf_message(tfs, f))
            self.static_published = True
        if self.start_ns is None:
            self.start_ns = now_ns
        t = max(0.0, (now_ns - self.start_ns) * 1e-9)
        truth = self.sim.truth(t)
        velocity = (self.sim.length(t + 1e-3) - truth.length) / 1e-3
        self.length_publisher.publish(length_message(now_ns, base, truth.length, velocity, f))
        samples = [replace(sample, stamp_ns=now_ns) for sample in self.sim.imu_samples(t)]
        for i, sample in enumerate(samples):
            self.imu_publishers[i].publish(msgs.imu_to_msg(sample, f))
        if self.array_publisher is not None:
            self.array_publisher.publish(imu_array_msg(now_ns, base, samples, f))
        full = self.ticks % self.truth_every == 0
        for topic, msg in truth_messages(truth, now_ns, base, f, full=full):
            self.truth_publishers[topic].publish(msg)
        self.ticks += 1


def main(args: Sequence[str] | None = None) -> int:
    """Console-script entry: run the node until shut down; non-zero exit on a bad configuration."""
    return run(NODE_NAME, VineImuSimulatorNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
