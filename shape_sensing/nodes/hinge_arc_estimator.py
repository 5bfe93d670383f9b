"""``hinge_arc_estimator`` node: IMU topics of a vine robot -> hinge-arc shape on TF, Path, markers, tip pose.

Thin rclpy layer over :class:`shape_sensing.pipelines.vine_imu.VineImuTracker`
(the same stamp-driven pipeline as the demo and ``shape-sensing replay``).

Subscribes (relative names, best effort, ``input_queue_depth`` deep):
    ``imu_topics`` (sensor_msgs/Imu, base to tip) or, when ``imu_array_topic``
    is set, that topic instead (shape_sensing/ImuArray: one message per sweep),
    ``length_topic`` (sensor_msgs/JointState, position[0] = robot length in m;
    '' for none). Inputs pass a stamp-ordered input stage that reports lag and
    drops by policy when behind (:mod:`shape_sensing.nodes._input`).

Publishes (reliable QoS), for every estimate, stamped with the data's stamp:
    ``/tf`` (``vine_imu_base`` -> ``vine_imu_NN``, ``vine_imu_tip``, all with
    ``frame_prefix``; ``vine_imu_base`` is a fixed child of the REP-103
    ``vine_base``), ``shape/path`` (nav_msgs/Path), ``shape/tip``
    (geometry_msgs/PoseWithCovarianceStamped), ``shape/markers``
    (visualization_msgs/MarkerArray, at ``marker_rate``), ``/diagnostics``.
    While no estimate comes out (no straight reference yet, no data) a
    ``/diagnostics`` status says why, once per second of node time.

Services (std_srvs/Trigger):
    ``~/offset``: capture the straight reference at the next publishing tick
    at which every used, everted IMU is fresh (robot straight and everted);
    ``~/save_reference``: write it to ``straight_reference_file``, which the
    node loads at start (see :mod:`shape_sensing.estimators.straight_reference`).

Time: only message stamps drive the estimator, so ``use_sim_time`` and
``ros2 bag play --clock`` work unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from shape_sensing.config import ConfigError
from shape_sensing.estimators.hinge_arc import SCHEMA
from shape_sensing.messages import common as msgs
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import MessageFactory
from shape_sensing.messages.imu_array import IMU_ARRAY_TYPE
from shape_sensing.nodes._common import (
    InputWatch,
    cdr_layout_supported,
    declare_schema,
    diagnostics_throttle,
    fq_name,
    node_namespace,
    note_input,
    reliable_qos,
    run,
    stamped_ahead,
    start_heartbeat,
    tf_qos,
    warn_throttled,
)
from shape_sensing.nodes._input import LiveInputs, SweepReader
from shape_sensing.pipelines.common import qualify_status
from shape_sensing.pipelines.input_stage import Released
from shape_sensing.pipelines.vine_imu import SHAPE_TOPICS, ShapeMessages, VineImuTracker
from shape_sensing.types import DiagnosticLevel, DiagnosticStatus, ShapeEstimate

__all__ = ["NODE_NAME", "HingeArcEstimatorNode", "main"]

NODE_NAME = "hinge_arc_estimator"
STATUS_PERIOD_S = 1.0


class HingeArcEstimatorNode:
    """Wires a :class:`VineImuTracker` to an rclpy node.

    Args:
        node: the ``rclpy.node.Node`` to declare parameters on and publish from.

    Raises:
        ConfigError: a parameter is missing its type, out of range or inconsistent.
    """

    def __init__(self, node: Any) -> None:
        from std_srvs.srv import Trigger

        self.node = node
        self.params = declare_schema(node, SCHEMA)
        try:
            self.tracker = VineImuTracker(self.params)
        except ValueError as exc:  # inconsistent parameters (e.g. use_sensors beyond the IMU count)
            raise ConfigError(f"node {node.get_name()}: {exc}") from exc
        self.factory = MessageFactory("rclpy")
        self.messages = ShapeMessages(self.factory, self.params["marker_rate"], diagnostics_throttle(node))
        # the same messages as CDR bytes written from arrays (published serialised: no message objects per pose)
        # where this ROS 2's definitions are those the layout was checked against
        live = self.factory.backend == "rclpy" and cdr_layout_supported()
        from shape_sensing.messages.cdr import ShapeCdr

        self.cdr = ShapeCdr(self.params["marker_rate"], diagnostics_throttle(node)) if live else None
        self.publishers = {
            topic: node.create_publisher(
                self.factory.cls(typename), topic, tf_qos() if topic == "/tf" else reliable_qos()
            )
            for topic, typename in SHAPE_TOPICS.items()
        }
        n = len(self.params["imu_topics"])
        array_topic = self.params["imu_array_topic"]
        imu_keys: list[Any] = ["imus"] if array_topic else list(range(n))
        names: dict[Any, str] = {"length": self.params["length_topic"] or "length", "imus": array_topic}
        names |= {i: t for i, t in enumerate(self.params["imu_topics"])}
        # the length first: the simulator and the drivers publish it before the IMUs of the same stamp
        # no length topic: no length input to wait for (an input never heard holds the others for a window)
        length_keys: list[Any] = ["length"] if self.params["length_topic"] else []
        self.inputs = LiveInputs(
            node, self.params, [*length_keys, *imu_keys], self._on_released, None,
            self.factory, names=names,
        )  # fmt: skip
        if array_topic:
            self.read_sweep = SweepReader(self.factory.cls(IMU_ARRAY_TYPE))  # its messages, taken raw
            self.subscriptions = [
                self.inputs.subscribe(self.factory.cls(IMU_ARRAY_TYPE), array_topic, self._on_imu_array, raw=True)
            ]
        else:
            imu_cls = self.factory.cls("sensor_msgs/msg/Imu")
            self.subscriptions = [
                self.inputs.subscribe(imu_cls, topic, functools.partial(self._on_imu, i))
                for i, topic in enumerate(self.params["imu_topics"])
            ]
        if self.params["length_topic"]:
            self.subscriptions.append(
                self.inputs.subscribe(
                    self.factory.cls("sensor_msgs/msg/JointState"), self.params["length_topic"], self._on_length
                )
            )
        self.offset_service = node.create_service(Trigger, "~/offset", self._on_offset)
        self.save_service = node.create_service(Trigger, "~/save_reference", self._on_save_reference)
        self.estimates_since_status = 0
        self._inputs_status: DiagnosticStatus | None = None  # the last inputs status, not sent yet
        self.status_timer = node.create_timer(STATUS_PERIOD_S, self._on_status)
        # heartbeat: every second on a steady timer, the inputs at fault named (a shape needs 2 fresh IMUs)
        length = [self.params["length_topic"]] if self.params["length_topic"] else []
        inputs = list(self.params["imu_topics"]) + length
        self.watch = InputWatch(inputs, max(self.params["stale_timeout"], 0.5), required=2)
        self._heartbeat_estimates = 0
        self.heartbeat = start_heartbeat(node, self._heartbeat, self.factory, self.publishers["/diagnostics"])
        log = node.get_logger()
        log.info(
            f"{len(self.params['imu_topics'])} IMU topics ({int(self.tracker.config.used.sum())} used), "
            f"length topic {self.params['length_topic'] or '(none)'}, publishing at {self.params['publish_rate']} Hz; "
            + f"straight reference: {self.tracker.reference_status}"
        )

    # -- inputs -----------------------------------------------------------
    def _on_imu(self, index: int, msg: Any, info: Any) -> None:
        if note_input(self.node, self.watch, index, msg):  # stamped ahead of the clock: skipped, named
            self.tracker.stats.bad_samples += 1
            return
        try:
            stamp_ns, orientation = msgs.imu_orientation_from_msg(msg)
        except MessageError as exc:
            self.tracker.stats.bad_samples += 1
            # Its own key: length warnings cannot hide IMU ones.
            warn_throttled(
                self.node, "bad sample", f"skipped a bad sample on {self.params['imu_topics'][index]}: {exc}"
            )
            return
        self.inputs.offer(index, stamp_ns, (orientation, str(msg.header.frame_id)), info)

    def _on_imu_array(self, raw: bytes, info: Any) -> None:
        try:
            sweep = self.read_sweep(raw)
        except MessageError as exc:
            self.tracker.stats.bad_samples += 1
            warn_throttled(self.node, "bad sweep", f"skipped a bad sweep on {self.params['imu_array_topic']}: {exc}")
            return
        now_ns = int(self.node.get_clock().now().nanoseconds)
        if stamped_ahead(self.node, self.params["imu_array_topic"], sweep.stamp_ns, now_ns):
            self.tracker.stats.bad_samples += 1
            return
        quats, usable = sweep.unit_orientations()
        heard = usable.nonzero()[0]  # the heartbeat's record of each IMU heard; one stamped ahead is left out
        heard = heard[heard < len(self.params["imu_topics"])]  # a row beyond them is the tracker's to refuse
        ahead = self.watch.seen_many(heard, sweep.stamps_ns[heard], now_ns)
        if ahead.any():
            usable[heard[ahead]] = False
            self.tracker.stats.bad_samples += int(ahead.sum())
        self.inputs.offer("imus", sweep.stamp_ns, (sweep.stamps_ns, quats, usable, sweep.frame_ids), info)

    def _on_length(self, msg: Any, info: Any) -> None:
        if note_input(self.node, self.watch, len(self.params["imu_topics"]), msg):
            self.tracker.stats.bad_samples += 1
            return
        position = list(msg.position)
        if not position:
            self.tracker.stats.bad_samples += 1
            warn_throttled(
                self.node,
                "length without position",
                f"skipped a JointState on {self.params['length_topic']} with no position",
            )
            return
        self.inputs.offer("length", msgs.stamp_from_msg(msg), float(position[0]), info)

    def _on_released(self, r: Released) -> None:
        """An input in stamp order from the input stage, into the tracker."""
        if r.key == "length":
            self.publish(self.tracker.push_length(r.stamp_ns, r.item))
        elif r.key == "imus":
            self.publish(self.tracker.push_orientations(*r.item))
        else:
            orientation, frame_id = r.item  # the frame checked against the sensor's (a foreign frame is skipped)
            self.publish(self.tracker.push_orientation(r.key, r.stamp_ns, orientation, frame_id))

    def _on_offset(self, request: Any, response: Any) -> Any:
        self.tracker.request_offset()
        used = int(self.tracker.config.used.sum())
        response.success = True
        p = self.params
        response.message = (
            f"straight reference requested: captured once all {used} used, everted IMUs are fresh and have been "
            f"still for {p['offset_still_s']:g} s; keep the robot straight (and fully everted: IMUs still inside "
            f"are left out) and still until then; a robot still moving after {p['offset_timeout']:g} s, or bent, "
            "is refused (the reason in /diagnostics and the log)"
        )
        self.node.get_logger().info(response.message)
        return response

    def _on_save_reference(self, request: Any, response: Any) -> Any:
        try:
            path = self.tracker.save_reference()
        except (ValueError, OSError) as exc:
            response.success = False
            response.message = f"straight reference not saved: {exc}"
            self.node.get_logger().error(response.message)
            return response
        response.success = True
        response.message = f"straight reference saved to {path}"
        self.node.get_logger().info(response.message)
        return response

    # -- outputs ----------------------------------------------------------
    def publish(self, estimates: Sequence[ShapeEstimate]) -> None:
        """Publish the messages of each estimate (see :class:`ShapeMessages`)."""
        for est in estimates:
            if self._inputs_status is not None:  # out with this estimate's statuses, at the throttle's 1 Hz
                est.diagnostics.append(self._inputs_status)
                self._inputs_status = None
            if self.cdr is not None:
                for topic, _type, raw in self.cdr.build(est):
                    self.publishers[topic].publish(bytes(raw))
            else:
                for topic, msg in self.messages.build(est):
                    self.publishers[topic].publish(msg)
            self.estimates_since_status += 1

    def _on_status(self) -> None:
        inputs = self.inputs.status(bare=True)
        if self.estimates_since_status:
            self.estimates_since_status = 0
            self._inputs_status = inputs
            return
        tracker = self.tracker
        heard = int((tracker.last_ns >= 0).sum())
        if heard == 0:
            reason = "no IMU message received yet"
        elif not tracker.estimator.is_offset:
            reason = (
                f"waiting for the straight reference ({tracker.reference_status}): {heard}/{tracker.n} IMUs heard, "
                "all used IMUs must be fresh at one tick"
            )
        else:
            reason = "no new IMU data"
        status = DiagnosticStatus(
            name=f"{fq_name(self.node)}: status",
            hardware_id=node_namespace(self.node),
            level=DiagnosticLevel.WARN,
            message=f"no estimate in the last {STATUS_PERIOD_S:g} s: {reason}",
            values={
                "imus_heard": str(heard),
                "imus": str(tracker.n),
                "offset_captured": str(tracker.estimator.is_offset),
                "bad_samples": str(tracker.stats.bad_samples),
                "out_of_order": str(tracker.stats.out_of_order),
                "estimates": str(tracker.stats.estimates),
            },
        )
        now_ns = self.node.get_clock().now().nanoseconds
        named = qualify_status(inputs, fq_name(self.node), node_namespace(self.node))
        self.publishers["/diagnostics"].publish(msgs.diagnostic_array(now_ns, [status, named], self.factory))

    def _heartbeat(self) -> list[DiagnosticStatus]:
        done = self.tracker.stats.estimates - self._heartbeat_estimates
        self._heartbeat_estimates = self.tracker.stats.estimates
        reference = "straight reference: " + self.tracker.reference_status
        return [self.watch.status(f"{NODE_NAME}: sensors heard", f"{done} estimates in the last second; {reference}")]


def main(args: Sequence[str] | None = None) -> int:
    """Console-script entry: run the node until shut down; non-zero exit on a bad configuration."""
    return run(NODE_NAME, HingeArcEstimatorNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
