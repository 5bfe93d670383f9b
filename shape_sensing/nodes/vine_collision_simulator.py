"""``vine_collision_simulator`` node: a simulated vine robot among obstacles (seed 004) on ROS 2 topics.

Thin rclpy layer over :class:`shape_sensing.pipelines.vine_collision_rig.SimulatedRig` (the demo's
rig): a timer at ``rate`` (node clock, so ``use_sim_time`` is honoured) takes the next simulator
sample and publishes what the robot's driver nodes would, stamped with the node clock:
``base/state``, ``base/length``, ``base/pressure``, ``cap/state``, ``cap/imu``,
``obstacle/wrench`` (sensor-data QoS; the bytes went through the base-station parser, the BNO055
driver and the Net F/T decoder), and ``truth/tip``, ``truth/pivot``, ``truth/path`` (reliable),
``truth/obstacles`` and ``/tf_static`` ``world_frame`` -> ``vine_base`` (transient local; none if it is
''). With ``loop`` the course starts again when it ends.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

from shape_sensing.estimators.collision_pivot import SCHEMA as ESTIMATOR_SCHEMA
from shape_sensing.messages.factory import MessageFactory
from shape_sensing.nodes._common import declare_schema, reliable_qos, run, sensor_qos, static_qos
from shape_sensing.pipelines.vine_collision_rig import SimulatedRig
from shape_sensing.sim.base_station_emulator import LineFaults
from shape_sensing.sim.vine_collision import SCHEMA, SensorFaults, SimSample, VineCollisionSim, course_by_name

__all__ = ["NODE_NAME", "VineCollisionSimulatorNode", "main"]

NODE_NAME = "vine_collision_simulator"


class VineCollisionSimulatorNode:
    """Publishes a :class:`VineCollisionSim` through the simulated rig.

    Raises:
        ConfigError: a bad parameter (named in the message).
    """

    def __init__(self, node: Any) -> None:
        self.node = node
        p = self.params = declare_schema(node, SCHEMA)
        self.course = course_by_name(p["course"], p["obstacle_angle"], p["pivot_distance"])
        self.est_params = ESTIMATOR_SCHEMA.validate({"frame_prefix": p["frame_prefix"]})
        self.factory = MessageFactory("rclpy")
        self.pubs: dict[str, Any] = {}
        self._start()
        self.timer = node.create_timer(1.0 / p["rate"], self._on_tick)
        node.get_logger().info(f"simulating {self.course.name}: {self.course.description}")

    def _start(self) -> None:
        p = self.params
        drift = math.radians(p["heading_drift"])
        faults = SensorFaults(burst_fraction=p["burst_fraction"], heading_drift_per_metre=drift)
        self.sim = VineCollisionSim(self.course, faults, rate=p["rate"], speed=p["speed"], pressure=p["pressure"],
                                    seed=p["seed"])  # fmt: skip
        self.rig = SimulatedRig(self.sim, self.est_params, self.factory, hold_time=p["hold_time"],
                                line_faults=LineFaults(garbage=p["line_garbage"], corrupt=p["line_corrupt"]),
                                seed=p["seed"])  # fmt: skip
        self.samples: Iterator[SimSample] = self.sim.run()
        self.static_sent = False

    def _publish(self, topic: str, msg: Any, qos: str) -> None:
        pub = self.pubs.get(topic)
        if pub is None:
            profile = {"sensor": sensor_qos, "static": static_qos}.get(qos, reliable_qos)()
            pub = self.pubs[topic] = self.node.create_publisher(type(msg), topic, profile)
        pub.publish(msg)

    def _on_tick(self) -> None:
        now = int(self.node.get_clock().now().nanoseconds)
        if now <= 0:
            return  # use_sim_time without a /clock yet
        if not self.static_sent:
            for raw in self.rig.static_messages(now, self.params["world_frame"]):
                self._publish(raw.topic, raw.msg, raw.qos)
            self.static_sent = True
        s = next(self.samples, None)
        if s is None:
            if not self.params["loop"]:
                self.timer.cancel()
                return
            self._start()
            return
        for raw in self.rig.step(s, now):
            self._publish(raw.topic, raw.msg, raw.qos)


def main(args: Sequence[str] | None = None) -> int:
    """Console-script entry: run the node until shut down; non-zero exit on a bad configuration."""
    return run(NODE_NAME, VineCollisionSimulatorNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
