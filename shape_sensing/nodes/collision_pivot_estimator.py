"""``collision_pivot_estimator`` node: a vine robot's tip localised from collisions (seed 004), live.

Thin rclpy layer over :class:`shape_sensing.pipelines.vine_collision.CollisionTracker` (the same
pipeline as the demo and ``shape-sensing replay``); one estimator step per length message.

Subscribes (sensor-data QoS, relative names): ``length_topic`` (sensor_msgs/JointState),
``pressure_topic`` (sensor_msgs/FluidPressure), ``cap_topic`` (shape_sensing/ContactCapState),
``imu_topic`` (sensor_msgs/Imu, heading = yaw), ``wrench_topic`` (geometry_msgs/WrenchStamped); best effort,
``input_queue_depth`` deep, through a stamp-ordered input stage that reports lag and drops by policy when
behind (:mod:`shape_sensing.nodes._input`), so a step sees the same inputs as in replay.

Publishes (reliable) under ``output_prefix`` (default ``collision``): ``pivot``
(shape_sensing/PivotEstimate, every step), ``events`` (shape_sensing/ContactEvent: contact start and end,
pivot candidate, fixed, withdrawn), ``tip``
(geometry_msgs/PoseStamped), ``path`` (nav_msgs/Path) and ``markers`` (MarkerArray) at
``path_rate``; ``/tf`` ``vine_base`` -> ``vine_tip``; ``/diagnostics`` (stale inputs, buckling
condition violated, contact held, the online heading drift and its sigma). Stamps are the data's, so
``use_sim_time`` and bag replay work.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from shape_sensing.estimators.collision_pivot import SCHEMA
from shape_sensing.messages import common as msgs
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import MessageFactory
from shape_sensing.nodes._common import (
    InputWatch,
    declare_schema,
    diagnostics_throttle,
    note_input,
    reliable_qos,
    run,
    start_heartbeat,
    tf_qos,
    warn_throttled,
)
from shape_sensing.nodes._input import LiveInputs
from shape_sensing.pipelines.input_stage import Released
from shape_sensing.pipelines.vine_collision import INPUT_KINDS, CollisionMessages, CollisionTracker, feed

__all__ = ["NODE_NAME", "CollisionPivotEstimatorNode", "main"]

NODE_NAME = "collision_pivot_estimator"
OUTPUTS = {
    "pivot": "shape_sensing/msg/PivotEstimate",
    "events": "shape_sensing/msg/ContactEvent",
    "tip": "geometry_msgs/msg/PoseStamped",
    "path": "nav_msgs/msg/Path",
    "markers": "visualization_msgs/msg/MarkerArray",
}


class CollisionPivotEstimatorNode:
    """Wires a :class:`CollisionTracker` to an rclpy node.

    Raises:
        ConfigError: a bad parameter (named in the message).
    """

    def __init__(self, node: Any) -> None:
        self.node = node
        p = self.params = declare_schema(node, SCHEMA)
        self.tracker = CollisionTracker(p)
        f = self.factory = MessageFactory("rclpy")
        self.prefix = p["output_prefix"]
        self.messages = CollisionMessages(self.tracker, self.prefix, f, p["tip_frame"], diagnostics_throttle(node))
        self.pubs = {f"{self.prefix}/{k}": node.create_publisher(f.cls(t), f"{self.prefix}/{k}", reliable_qos())
                     for k, t in OUTPUTS.items()}  # fmt: skip
        self.pubs["/tf"] = node.create_publisher(f.cls("tf2_msgs/msg/TFMessage"), "/tf", tf_qos())
        self.pubs["/diagnostics"] = node.create_publisher(f.cls("diagnostic_msgs/msg/DiagnosticArray"),
                                                          "/diagnostics", reliable_qos())  # fmt: skip
        # ranks: the order a robot's drivers publish one step in (the length, which steps the filter, last)
        kinds = sorted(INPUT_KINDS, key=["imu", "wrench", "pressure", "cap", "length"].index)
        self.inputs = LiveInputs(node, p, kinds, self._on_released, self.pubs["/diagnostics"], f,
                                 names={k: p[f"{k}_topic"] for k in kinds})  # fmt: skip
        self.subs = [
            self.inputs.subscribe(f.cls(ty), p[f"{kind}_topic"], functools.partial(self._on_input, kind))
            for kind, ty in INPUT_KINDS.items()
        ]  # fmt: skip
        # heartbeat: every second on a steady timer, the inputs at fault named (each one is needed)
        self.kinds = list(INPUT_KINDS)
        self.watch = InputWatch([p[f"{kind}_topic"] for kind in self.kinds], 1.0)
        self.heartbeat = start_heartbeat(
            node, lambda: [self.watch.status(f"{NODE_NAME}: sensors heard")], f, self.pubs["/diagnostics"]
        )
        node.get_logger().info(f"collision-pivot estimator ({p['filter']} filter), outputs under {self.prefix}/")

    def _on_input(self, kind: str, msg: Any, info: Any) -> None:
        if note_input(self.node, self.watch, self.kinds.index(kind), msg):  # stamped ahead: skipped, named
            self.tracker.bad_samples += 1
            return
        try:
            stamp = msgs.stamp_from_msg(msg)
        except (AttributeError, TypeError, ValueError) as exc:
            self.tracker.bad_samples += 1
            warn_throttled(self.node, f"no stamp: {kind}", f"skipped a {kind} message without a stamp: {exc}")
            return
        self.inputs.offer(kind, stamp, msg, info)

    def _on_released(self, r: Released) -> None:
        kind, msg = str(r.key), r.item
        try:
            outs = feed(self.tracker, kind, msg)
        except (MessageError, AttributeError, TypeError, ValueError) as exc:
            self.tracker.bad_samples += 1
            warn_throttled(self.node, f"bad message: {kind}", f"skipped a bad {kind} message: {exc}")
            return
        for out in outs.values():
            for topic, m in self.messages.build(out):
                self.pubs[topic].publish(m)


def main(args: Sequence[str] | None = None) -> int:
    """Console-script entry: run the node until shut down; non-zero exit on a bad configuration."""
    return run(NODE_NAME, CollisionPivotEstimatorNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
