"""``rigid_module_estimator`` node: WT901 IMU topics of a hyper-redundant robot -> shape on TF, Path, markers.

Thin rclpy layer over :class:`shape_sensing.pipelines.hyper_redundant.HyperRedundantTracker`
(the same stamp-driven pipeline as the demo and ``shape-sensing replay``).

Subscribes (relative names, best effort, ``input_queue_depth`` deep):
    ``imu/platform_<i>`` (sensor_msgs/Imu), i = 0 (base) .. n_modules, or, when
    ``imu_array_topic`` is set, that topic instead (shape_sensing/ImuArray: one
    message per sweep of the bus). Inputs pass a stamp-ordered input stage that
    reports lag and drops by policy when behind (:mod:`shape_sensing.nodes._input`).

Publishes (reliable QoS), for every estimate, stamped with the data's stamp:
    ``/tf`` (``base_link`` -> ``platform_<i>``, ``end_effector``, with
    ``frame_prefix``), ``joint_states`` (sensor_msgs/JointState,
    ``module_<j>_theta_x/_y``), ``shape/path`` (nav_msgs/Path),
    ``shape/end_effector`` (geometry_msgs/PoseWithCovarianceStamped, 6x6
    covariance from the sensors' stated accuracy), ``shape/markers``
    (visualization_msgs/MarkerArray, at ``marker_rate``), ``/diagnostics``
    (per-sensor freshness, twist residual, heading conditioning).

Service:
    ``~/calibrate`` (std_srvs/Trigger): rods calibration -- average the next
    ``calibration_duration`` seconds with every platform held parallel to the
    base; the resulting ``calibration_bias`` is logged ready to paste into the
    parameter file.

Time: only message stamps drive the estimator, so ``use_sim_time`` and
``ros2 bag play --clock`` work unchanged.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from shape_sensing.config import ConfigError
from shape_sensing.estimators.rigid_module import SCHEMA, RigidModuleEstimate
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
from shape_sensing.pipelines.hyper_redundant import SHAPE_TOPICS, EstimateCdr, EstimateMessages, HyperRedundantTracker
from shape_sensing.pipelines.input_stage import Released
from shape_sensing.types import DiagnosticLevel, DiagnosticStatus

__all__ = ["NODE_NAME", "RigidModuleEstimatorNode", "main"]

NODE_NAME = "rigid_module_estimator"
STATUS_PERIOD_S = 1.0


class RigidModuleEstimatorNode:
    """Wires a :class:`HyperRedundantTracker` to an rclpy node.

    Raises:
        ConfigError: a parameter is of the wrong type, out of range or inconsistent.
    """

    def __init__(self, node: Any) -> None:
        from std_srvs.srv import Trigger

        self.node = node
        self.params = declare_schema(node, SCHEMA)
        rods = self.params["calibration_duration"] if self.params["calibrate_on_start"] else 0.0
        try:
            self.tracker = HyperRedundantTracker(self.params, rods_s=rods)
        except ValueError as exc:
            raise ConfigError(f"node {node.get_name()}: {exc}") from exc
        self.factory = MessageFactory("rclpy")
        self.messages = EstimateMessages(
            self.factory, self.params["frame_prefix"], self.params["marker_rate"], diagnostics_throttle(node)
        )
        # the same messages as CDR bytes written from arrays (published serialised: no message objects per pose),
        # where this ROS 2's definitions are those the layout was checked against
        live = self.factory.backend == "rclpy" and cdr_layout_supported()
        self.cdr = (
            EstimateCdr(self.params["frame_prefix"], self.params["marker_rate"], diagnostics_throttle(node))
            if live
            else None
        )
        self.publishers = {
            topic: node.create_publisher(
                self.factory.cls(typename), topic, tf_qos() if topic == "/tf" else reliable_qos()
            )
            for topic, typename in SHAPE_TOPICS.items()
        }
        self.topics = [f"imu/platform_{i}" for i in range(self.tracker.n)]
        self._rows: dict[tuple[str, ...], np.ndarray] = {}
        array_topic = self.params["imu_array_topic"]
        keys: list[Any] = ["imus"] if array_topic else list(range(self.tracker.n))
        names: dict[Any, str] = {"imus": array_topic} | dict(enumerate(self.topics))
        self.inputs = LiveInputs(node, self.params, keys, self._on_released, None, self.factory, names=names)
        if array_topic:
            self.read_sweep = SweepReader(self.factory.cls(IMU_ARRAY_TYPE))  # its messages, taken raw
            self.subscriptions = [
                self.inputs.subscribe(self.factory.cls(IMU_ARRAY_TYPE), array_topic, self._on_imu_array, raw=True)
            ]
        else:
            imu_cls = self.factory.cls("sensor_msgs/msg/Imu")
            self.subscriptions = [
                self.inputs.subscribe(imu_cls, topic, functools.partial(self._on_imu, i))
                for i, topic in enumerate(self.topics)
            ]
        self.calibrate_service = node.create_service(Trigger, "~/calibrate", self._on_calibrate)
        # heartbeat: every second on a steady timer, the platforms at fault named (the base and one more needed)
        self.watch = InputWatch(self.topics, max(self.params["stale_timeout"], 0.5), required=2)
        self.heartbeat = start_heartbeat(node, self._heartbeat, self.factory, self.publishers["/diagnostics"])
        self._calibration_pending = not self.tracker.calibrated
        self.estimates_since_status = 0
        self._inputs_status: DiagnosticStatus | None = None  # the last inputs status, not sent yet
        self.status_timer = node.create_timer(STATUS_PERIOD_S, self._on_status)
        node.get_logger().info(
            f"{self.tracker.config.n_modules} modules (d1={self.tracker.config.d1} m, d2={self.tracker.config.d2} m), "
            f"heading mode {self.tracker.config.heading_mode}, publishing at {self.params['publish_rate']} Hz"
            + (f"; rods calibration over the first {rods:g} s" if rods else "")
        )

    def _on_imu(self, index: int, msg: Any, info: Any) -> None:
        if note_input(self.node, self.watch, index, msg):  # stamped ahead of the clock: skipped, named
            self.tracker.stats.bad_samples += 1
            return
        try:
            sample = msgs.imu_from_msg(msg)
        except MessageError as exc:
            self.tracker.stats.bad_samples += 1
            warn_throttled(self.node, "bad sample", f"skipped a bad sample on {self.topics[index]}: {exc}")
            return
        self.inputs.offer(index, sample.stamp_ns, sample, info)

    def _on_imu_array(self, raw: bytes, info: Any) -> None:
        try:
            sweep = self.read_sweep(raw)
            quats, _ = sweep.provided_orientations()
        except MessageError as exc:
            self.tracker.stats.bad_samples += 1
            warn_throttled(self.node, "bad sweep", f"skipped a bad sweep on {self.params['imu_array_topic']}: {exc}")
            return
        now_ns = int(self.node.get_clock().now().nanoseconds)
        if stamped_ahead(self.node, self.params["imu_array_topic"], sweep.stamp_ns, now_ns):
            self.tracker.stats.bad_samples += 1
            return
        rows = self._watch_rows(sweep.frame_ids)  # the heartbeat's record of each platform heard
        heard = rows >= 0
        self.watch.seen_many(rows[heard], sweep.stamps_ns[heard], now_ns)
        self.inputs.offer("imus", sweep.stamp_ns, (sweep.stamps_ns, sweep.frame_ids, quats), info)

    def _watch_rows(self, frame_ids: list[str]) -> np.ndarray:
        """The heartbeat's input of each row (``platform_<i>``, as the tracker reads it), -1 for none; by frames."""
        key = tuple(frame_ids)
        rows = self._rows.get(key)
        if rows is None:
            found = []
            for frame_id in frame_ids:
                tail = frame_id.rsplit("platform_", 1)[-1]
                ok = "platform_" in frame_id and tail.isdigit() and int(tail) < len(self.topics)
                found.append(int(tail) if ok else -1)
            rows = np.array(found, dtype=np.intp)
            if len(self._rows) > 64:
                self._rows.clear()
            self._rows[key] = rows
        return rows

    def _on_released(self, r: Released) -> None:
        """An input in stamp order from the input stage, into the tracker."""
        if r.key == "imus":
            # each sensor by its frame id (a bus cycle carries the samples recovered, not always all platforms)
            self.publish(self.tracker.push_sweep_arrays(*r.item))
        else:
            self.publish(self.tracker.push_imu(r.item, r.key))
        self._check_calibration()

    def _check_calibration(self) -> None:
        if self._calibration_pending and self.tracker.calibrated:
            self._calibration_pending = False
            if self.tracker.calibration_refused:  # the user's to fix (hold the rig still): a warning, an ERROR status
                self.node.get_logger().warning(self.tracker.calibration_refused)
                return
            bias = [round(float(v), 6) for v in self.tracker.estimator.bias.reshape(-1)]
            self.node.get_logger().info(f"rods calibration done; to keep it set calibration_bias: {bias}")

    def _on_calibrate(self, request: Any, response: Any) -> Any:
        duration = self.params["calibration_duration"]
        if self.tracker.latest_ns < 0:
            response.success = False
            response.message = "no IMU data yet; cannot calibrate"
            return response
        self.tracker.request_calibration(self.tracker.latest_ns, duration)
        self._calibration_pending = True
        response.success = True
        response.message = (
            f"averaging {duration:g} s of readings: keep every platform parallel to the base and the rig still "
            "(a moving or bent rig is refused, with the reason in /diagnostics and the log)"
        )
        self.node.get_logger().info(response.message)
        return response

    def publish(self, estimates: Sequence[RigidModuleEstimate]) -> None:
        """Publish the messages of each estimate."""
        for est in estimates:
            if self._inputs_status is not None:  # out with this estimate's statuses, at the throttle's 1 Hz
                est.shape.diagnostics.append(self._inputs_status)
                self._inputs_status = None
            if self.cdr is not None:
                for topic, raw in self.cdr.build(est):
                    self.publishers[topic].publish(raw)
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
        t = self.tracker
        heard = int((t.last_ns >= 0).sum())
        if heard == 0:
            reason = "no IMU message received yet"
        elif not t.calibrated:
            reason = f"rods calibration in progress ({heard}/{t.n} platforms heard)"
        else:
            reason = "no new IMU data"
        status = DiagnosticStatus(
            name=f"{fq_name(self.node)}: status",
            hardware_id=node_namespace(self.node),
            level=DiagnosticLevel.WARN,
            message=f"no estimate in the last {STATUS_PERIOD_S:g} s: {reason}",
            values={k: str(v) for k, v in t.stats.__dict__.items()} | {"platforms_heard": str(heard)},
        )
        now_ns = self.node.get_clock().now().nanoseconds
        named = qualify_status(inputs, fq_name(self.node), node_namespace(self.node))
        self.publishers["/diagnostics"].publish(msgs.diagnostic_array(now_ns, [status, named], self.factory))

    def _heartbeat(self) -> list[Any]:
        t = self.tracker
        state = t.calibration_refused or ("rods calibration done" if t.calibrated else "rods calibration pending")
        return [self.watch.status(f"{NODE_NAME}: sensors heard", state)]


def main(args: Sequence[str] | None = None) -> int:
    """Console-script entry: run the node until shut down; non-zero exit on a bad configuration."""
    return run(NODE_NAME, RigidModuleEstimatorNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
