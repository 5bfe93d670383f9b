"""``rigid_module_estimator`` node: WT901 IMU topics of a hyper-redundant robot -> shape on TF, Path, markers.

Thin rclpy layer over :class:`shape_sensing.pipelines.hyper_redundant.HyperRedundantTracker`
(the same stamp-driven pipeline as the demo and ``shape-sensing replay``).

Subscribes (relative names, sensor-data QoS):
    ``imu/platform_<i>`` (sensor_msgs/Imu), i = 0 (base) .. n_modules.

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

from shape_sensing.config import ConfigError
from shape_sensing.estimators.rigid_module import SCHEMA, RigidModuleEstimate
from shape_sensing.messages import common as msgs
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import MessageFactory
from shape_sensing.nodes._common import (
    InputWatch,
    declare_schema,
    diagnostics_throttle,
    fq_name,
    node_namespace,
    note_input,
    reliable_qos,
    run,
    sensor_qos,
    start_heartbeat,
    tf_qos,
)
from shape_sensing.pipelines.hyper_redundant import SHAPE_TOPICS, EstimateMessages, HyperRedundantTracker
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
        self.publishers = {
            topic: node.create_publisher(
                self.factory.cls(typename), topic, tf_qos() if topic == "/tf" else reliable_qos()
            )
            for topic, typename in SHAPE_TOPICS.items()
        }
        imu_cls = self.factory.cls("sensor_msgs/msg/Imu")
        self.topics = [f"imu/platform_{i}" for i in range(self.tracker.n)]
        self.subscriptions = [
            node.create_subscription(imu_cls, topic, functools.partial(self._on_imu, i), sensor_qos())
            for i, topic in enumerate(self.topics)
        ]
        self.calibrate_service = node.create_service(Trigger, "~/calibrate", self._on_calibrate)
        # heartbeat: every second on a steady timer, the platforms at fault named (the base and one more needed)
        self.watch = InputWatch(self.topics, max(self.params["stale_timeout"], 0.5), required=2)
        self.heartbeat = start_heartbeat(node, self._heartbeat, self.factory, self.publishers["/diagnostics"])
        self._calibration_pending = not self.tracker.calibrated
        self.estimates_since_status = 0
        self.status_timer = node.create_timer(STATUS_PERIOD_S, self._on_status)
        node.get_logger().info(
            f"{self.tracker.config.n_modules} modules (d1={self.tracker.config.d1} m, d2={self.tracker.config.d2} m), "
            f"heading mode {self.tracker.config.heading_mode}, publishing at {self.params['publish_rate']} Hz"
            + (f"; rods calibration over the first {rods:g} s" if rods else "")
        )

    def _on_imu(self, index: int, msg: Any) -> None:
        note_input(self.node, self.watch, index, msg)
        try:
            sample = msgs.imu_from_msg(msg)
        except MessageError as exc:
            self.tracker.stats.bad_samples += 1
            self.node.get_logger().warning(
                f"skipped a bad sample on {self.topics[index]}: {exc}", throttle_duration_sec=5.0
            )
            return
        self.publish(self.tracker.push_imu(sample, index))
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
            for topic, msg in self.messages.build(est):
                self.publishers[topic].publish(msg)
            self.estimates_since_status += 1

    def _on_status(self) -> None:
        if self.estimates_since_status:
            self.estimates_since_status = 0
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
        self.publishers["/diagnostics"].publish(msgs.diagnostic_array(now_ns, [status], self.factory))


    def _heartbeat(self) -> list[Any]:
        t = self.tracker
        state = t.calibration_refused or ("rods calibration done" if t.calibrated else "rods calibration pending")
        return [self.watch.status(f"{NODE_NAME}: inputs", state)]


def main(args: Sequence[str] | None = None) -> int:
    """Console-script entry: run the node until shut down; non-zero exit on a bad configuration."""
    return run(NODE_NAME, RigidModuleEstimatorNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
