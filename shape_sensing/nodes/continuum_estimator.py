"""``continuum_estimator`` node: gyro and pose topics -> continuum-robot shape on TF, Path, markers, tip pose.

Thin rclpy layer over :class:`shape_sensing.pipelines.continuum_tracker.ContinuumTracker`
(a sliding-window continuous-time estimator with Gaussian-process priors in arc
length and time).

Subscribes (relative names, best effort, ``input_queue_depth`` deep, through a stamp-ordered input stage
that reports lag and, when behind, decimates ToF frames 1:2 and then drops the oldest inputs; see
:mod:`shape_sensing.nodes._input`):
    ``gyro_topics`` (sensor_msgs/Imu: angular_velocity in the backbone frame at
    ``gyro_arc_lengths``), ``pose_topics`` (geometry_msgs/PoseWithCovarianceStamped:
    the backbone frame at ``pose_arc_lengths`` in the base frame), ``tof_topics``
    (shape_sensing/TofFrame of ring-mounted ToF sensors at ``tof_arc_lengths`` and
    ``tof_azimuths``, matched against the prior map ``map_file``; seed 001).

Publishes (reliable QoS), one set per slice leaving the window (stamp = slice
time, ``(window_size - 1) / rate`` behind the data): ``/tf`` (``base_frame`` ->
``<node_frame_prefix>NN``, with ``frame_prefix``), ``shape/path`` (nav_msgs/Path),
``shape/tip`` (PoseWithCovarianceStamped, Laplace covariance), ``shape/markers``
(at ``marker_rate``), and ``/diagnostics`` once per second (sample counts, skipped
samples, steps). With ToF sensors and a map also the scene reconstruction (seed 001,
Eq. 10-12) of the ToF points between a slice and the next, ``tof/reconstruction`` and
``tof/anomalies`` (sensor_msgs/PointCloud2 in ``base_frame``: x y z, mahalanobis2,
anomaly), and the prior map on ``tof/prior_map`` (latched: transient local) at start, and again 1 and 3 s
(steady time) after the node's clock starts or jumps back (a subscriber that reset itself on that jump, as RViz
does when a bag's clock starts, gets it again).
``strain_topic`` (shape_sensing/StrainArray: bending angle and curvature at arc lengths)
adds the strain factor.

Time: only message stamps drive the estimator, so ``use_sim_time`` and
``ros2 bag play --clock`` work unchanged.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from typing import Any

from shape_sensing.config import ConfigError
from shape_sensing.messages import common as msgs
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import MessageFactory
from shape_sensing.messages.strain import strain_from_msg
from shape_sensing.messages.tof import tof_frame_from_msg
from shape_sensing.nodes._common import (
    InputWatch,
    declare_schema,
    fq_name,
    node_namespace,
    note_input,
    reliable_qos,
    run,
    start_heartbeat,
    static_qos,
    tf_qos,
    warn_throttled,
)
from shape_sensing.nodes._input import LiveInputs
from shape_sensing.pipelines.continuum import NODE_SCHEMA as SCHEMA
from shape_sensing.pipelines.continuum_tracker import (
    CONTINUUM_TOF_TOPICS,
    CONTINUUM_TOPICS,
    ContinuumMessages,
    ContinuumTracker,
)
from shape_sensing.pipelines.input_stage import LIVE_PARAMS, Released
from shape_sensing.runtime import retain_heap
from shape_sensing.types import DiagnosticLevel, DiagnosticStatus, ShapeEstimate

__all__ = ["NODE_NAME", "ContinuumEstimatorNode", "main"]

NODE_NAME = "continuum_estimator"
#: after the node's clock starts or jumps back, the prior map goes out again this long after (steady s)
MAP_REPUBLISH_AFTER_S = (1.0, 3.0)
#: a step back of the node's clock longer than this is a jump (a bag played again, a simulation reset)
CLOCK_JUMP_BACK_NS = 500_000_000
STATUS_PERIOD_S = 1.0


class ContinuumEstimatorNode:
    """Wires a :class:`ContinuumTracker` to an rclpy node.

    Args:
        node: the ``rclpy.node.Node``.

    Raises:
        ConfigError: a bad or inconsistent parameter.
    """

    def __init__(self, node: Any) -> None:
        self.node = node
        self.params = declare_schema(node, SCHEMA)
        try:
            live = {q.name for q in LIVE_PARAMS}  # the input stage's, not the estimator's
            self.tracker = ContinuumTracker({k: v for k, v in self.params.items() if k not in live})
        except ValueError as exc:
            raise ConfigError(f"node {node.get_name()}: {exc}") from exc
        self.factory = MessageFactory("rclpy")
        self.messages = ContinuumMessages(self.factory, self.params["frame_prefix"], self.params["marker_rate"])
        self.publishers = {
            topic: node.create_publisher(self.factory.cls(t), topic, tf_qos() if topic == "/tf" else reliable_qos())
            for topic, t in CONTINUUM_TOPICS.items()
        }
        p = self.params
        names: dict[Any, str] = {("gyro", i): t for i, t in enumerate(p["gyro_topics"])}
        names |= {("pose", i): t for i, t in enumerate(p["pose_topics"])}
        names |= {("tof", i): t for i, t in enumerate(p["tof_topics"])}
        if p["strain_topic"]:
            names[("strain", 0)] = p["strain_topic"]
        self.inputs = LiveInputs(
            node, p, list(names), self._on_released, None, self.factory, names=names,
            decimate=[k for k in names if k[0] == "tof"],
        )  # fmt: skip
        imu_cls = self.factory.cls("sensor_msgs/msg/Imu")
        pose_cls = self.factory.cls("geometry_msgs/msg/PoseWithCovarianceStamped")
        self.subscriptions = [
            self.inputs.subscribe(imu_cls, topic, functools.partial(self._on_gyro, i))
            for i, topic in enumerate(p["gyro_topics"])
        ] + [
            self.inputs.subscribe(pose_cls, topic, functools.partial(self._on_pose, i))
            for i, topic in enumerate(p["pose_topics"])
        ]
        if p["tof_topics"]:
            tof_cls = self.factory.cls("shape_sensing/msg/TofFrame")
            self.subscriptions += [
                self.inputs.subscribe(tof_cls, topic, functools.partial(self._on_tof, i))
                for i, topic in enumerate(p["tof_topics"])
            ]
        if p["strain_topic"]:
            strain_cls = self.factory.cls("shape_sensing/msg/StrainArray")
            self.subscriptions.append(self.inputs.subscribe(strain_cls, p["strain_topic"], self._on_strain))
        if self.tracker.tof_map is not None:
            for topic, t in CONTINUUM_TOF_TOPICS.items():
                qos = static_qos() if topic == "tof/prior_map" else reliable_qos()
                self.publishers[topic] = node.create_publisher(self.factory.cls(t), topic, qos)
            self._publish_prior_map()
        # when the node's clock starts (a bag's /clock) or jumps back (a bag played again), subscribers on the same
        # clock reset themselves (RViz drops every display's data, the latched map included): the map goes out again
        # 1 and 3 s later on the steady heartbeat, once they have reset
        self._clock_seen_ns = 0
        self._map_due: list[float] = []
        self.published = 0
        self.status_timer = node.create_timer(STATUS_PERIOD_S, self._on_status)
        # heartbeat: every second on a steady timer (also while a bag's /clock is paused or not yet running), the
        # inputs never heard, stale or stamped ahead of the clock named; ERROR when no input is fresh
        self.key_index = {k: i for i, k in enumerate(names)}
        self.watch = InputWatch(list(names.values()), 1.0, required=1)
        self.estimates_total = 0
        self._beat_estimates = 0
        self.heartbeat = start_heartbeat(node, self._heartbeat, self.factory, self.publishers["/diagnostics"])
        node.get_logger().info(
            f"{len(self.params['gyro_topics'])} gyro, {len(self.params['pose_topics'])} pose and "
            f"{len(self.params['tof_topics'])} ToF topics, "
            f"{self.params['nodes']} nodes at {self.params['rate']} Hz, window {self.params['window_size']} slices"
        )

    def _on_gyro(self, index: int, msg: Any, info: Any) -> None:
        if note_input(self.node, self.watch, self.key_index[("gyro", index)], msg):  # stamped ahead: skipped
            self.tracker.stats.skipped_bad += 1
            return
        try:
            sample = msgs.imu_from_msg(msg)
        except MessageError as exc:
            self.tracker.stats.skipped_bad += 1
            warn_throttled(self.node, "bad gyro", f"skipped a bad gyro sample: {exc}")
            return
        self.inputs.offer(("gyro", index), sample.stamp_ns, sample.angular_velocity, info)

    def _publish_prior_map(self) -> None:
        now_ns = self.node.get_clock().now().nanoseconds
        base = self.params["frame_prefix"] + self.params["base_frame"]
        topic, msg = self.messages.prior_map(now_ns, base, self.tracker.tof_map)
        self.publishers[topic].publish(msg)

    def _republish_map_after_clock_jumps(self) -> None:
        """On the steady heartbeat: see whether the node's clock started or jumped back since the last beat; publish
        the prior map again when due (see ``__init__``)."""
        if self.tracker.tof_map is None:
            return
        now_ns = int(self.node.get_clock().now().nanoseconds)
        steady = time.monotonic()
        started = self._clock_seen_ns <= 0 < now_ns
        back = now_ns < self._clock_seen_ns - CLOCK_JUMP_BACK_NS
        if started or back:
            self._map_due = [steady + d for d in MAP_REPUBLISH_AFTER_S]
        self._clock_seen_ns = now_ns
        if self._map_due and steady >= self._map_due[0] - 0.05:
            self._map_due.pop(0)
            self._publish_prior_map()

    def _on_pose(self, index: int, msg: Any, info: Any) -> None:
        if note_input(self.node, self.watch, self.key_index[("pose", index)], msg):  # stamped ahead: skipped
            self.tracker.stats.skipped_bad += 1
            return
        try:
            T = msgs.pose_to_matrix(msg.pose.pose)
        except ValueError as exc:  # zero or non-finite quaternion
            self.tracker.stats.skipped_bad += 1
            warn_throttled(self.node, "bad pose", f"skipped a bad pose: {exc}")
            return
        self.inputs.offer(("pose", index), msgs.stamp_from_msg(msg), T, info)

    def _on_tof(self, index: int, msg: Any, info: Any) -> None:
        if note_input(self.node, self.watch, self.key_index[("tof", index)], msg):  # stamped ahead: skipped
            self.tracker.stats.skipped_bad += 1
            return
        stamp, _, distance, status = tof_frame_from_msg(msg)
        self.inputs.offer(("tof", index), stamp, (distance, status), info)

    def _on_strain(self, msg: Any, info: Any) -> None:
        if note_input(self.node, self.watch, self.key_index[("strain", 0)], msg):  # stamped ahead: skipped
            self.tracker.stats.skipped_bad += 1
            return
        try:
            stamp, s, theta, kappa, valid = strain_from_msg(msg)
        except MessageError as exc:
            self.tracker.stats.skipped_bad += 1
            warn_throttled(self.node, "bad strain", f"skipped a bad strain reading: {exc}")
            return
        self.inputs.offer(("strain", 0), stamp, (s, theta, kappa, valid), info)

    def _on_released(self, r: Released) -> None:
        """An input in stamp order from the input stage, into the tracker."""
        kind, index = r.key  # type: ignore[misc]
        t = self.tracker
        if kind == "gyro":
            self.publish(t.push_gyro(index, r.stamp_ns, r.item))
        elif kind == "pose":
            self.publish(t.push_pose(index, r.stamp_ns, r.item))
        elif kind == "tof":
            self.publish(t.push_tof(index, r.stamp_ns, *r.item))
        else:
            self.publish(t.push_strain(r.stamp_ns, *r.item))

    def publish(self, estimates: Sequence[ShapeEstimate]) -> None:
        """Publish the messages of each estimate (with the scene reconstruction up to the next slice)."""
        first = len(self.tracker.window.final_t) - len(estimates) if self.tracker.window else 0
        for j, est in enumerate(estimates):
            rec = self.tracker.pop_reconstruction(first + j)
            for topic, m in self.messages.build(est, self.tracker.tip_covariance(first + j), rec):
                self.publishers[topic].publish(m)
            self.published += 1
            self.estimates_total += 1

    def _on_status(self) -> None:
        st = self.tracker.stats
        inputs = self.inputs.status()
        level = DiagnosticLevel.OK if self.published else DiagnosticLevel.WARN
        message = "estimating" if level == DiagnosticLevel.OK else "no estimate in the last second"
        if level == DiagnosticLevel.OK and self.inputs.degraded:  # never OK while inputs are discarded
            level = DiagnosticLevel.WARN
            message = "estimating from fewer inputs than received (see the inputs status)"
        self.published = 0
        status = DiagnosticStatus(
            name=f"{fq_name(self.node)}: status",
            hardware_id=node_namespace(self.node),
            level=level,
            message=message,
            values={k: str(v) for k, v in vars(st).items()},
        )
        now_ns = self.node.get_clock().now().nanoseconds
        self.publishers["/diagnostics"].publish(msgs.diagnostic_array(now_ns, [status, inputs], self.factory))

    def _heartbeat(self) -> list[DiagnosticStatus]:
        self._republish_map_after_clock_jumps()
        done = self.estimates_total - self._beat_estimates
        self._beat_estimates = self.estimates_total
        return [self.watch.status(f"{NODE_NAME}: sensors heard", f"{done} estimates in the last second")]


def main(args: Sequence[str] | None = None) -> int:
    """Console-script entry: run the node until shut down; non-zero exit on a bad configuration."""
    retain_heap()  # keep the window's per-step arrays resident (see shape_sensing.runtime)
    return run(NODE_NAME, ContinuumEstimatorNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
