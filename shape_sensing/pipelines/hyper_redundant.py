"""Hyper-redundant robot: raw WT901 IMU topics -> rigid-module shape topics.

The same :class:`HyperRedundantTracker` runs in the live demo, in
``shape-sensing replay`` and in the ``rigid_module_estimator`` node. It is
driven by message stamps only: the estimate for publishing tick ``k`` is made
when the first message stamped after the tick arrives, from all data stamped
up to it, and carries the stamp of the newest reading it used. The rods
calibration averages every reading of the first ``rods_s`` seconds (the rig
is held straight on its rods); no estimate is published before it. Replaying
a bag therefore reproduces the live estimates exactly.

Topics (relative names under the robot namespace, ``/hyper_redundant`` by default):

===========================  =======================================  ================================
topic                        type                                     frame / content
===========================  =======================================  ================================
``imu/platform_<i>``         sensor_msgs/Imu                          ``platform_<i>`` (input, i=0..n)
``joint_states``             sensor_msgs/JointState                   ``module_<j>_theta_x/_y``, rad
``shape/path``               nav_msgs/Path                            backbone in ``base_link``
``shape/markers``            visualization_msgs/MarkerArray           body, backbone, frames, tip cov.
``shape/end_effector``       geometry_msgs/PoseWithCovarianceStamped  ``end_effector`` in ``base_link``
``truth/joint_states``       sensor_msgs/JointState                   simulator ground truth
``truth/end_effector``       geometry_msgs/PoseStamped                simulator ground truth
``/tf``                      tf2_msgs/TFMessage                       ``base_link`` -> ``platform_<i>``,
                                                                      ``end_effector``
``/diagnostics``             diagnostic_msgs/DiagnosticArray          sensors, twist residual, inputs
===========================  =======================================  ================================
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from shape_sensing.config import load_node_params
from shape_sensing.estimators.rigid_module import (
    SCHEMA,
    RigidModuleConfig,
    RigidModuleEstimate,
    RigidModuleEstimator,
    euler_zyx_to_matrix,
    quat_to_euler_zyx,
    quats_to_euler_zyx,
)
from shape_sensing.geometry import FloatArray, rotation_angle
from shape_sensing.io.bag import BagMessage, BagWriter
from shape_sensing.messages import common as msgs
from shape_sensing.messages import hyper_redundant as hmsgs
from shape_sensing.messages.common import UNIT_QUATERNION_TOLERANCE
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import MessageFactory
from shape_sensing.pipelines.common import DiagnosticsThrottle, RateThrottle, StampTicker, resolve_topic
from shape_sensing.pipelines.contracts import HR_IMU_TOPIC_RE as IMU_TOPIC_RE
from shape_sensing.pipelines.contracts import HR_NAMESPACE as DEFAULT_NAMESPACE
from shape_sensing.pipelines.contracts import hyper_redundant_arguments as add_replay_arguments
from shape_sensing.pipelines.contracts import hyper_redundant_matches as matches
from shape_sensing.types import DiagnosticLevel, DiagnosticStatus, ImuSample

__all__ = [
    "DEFAULT_NAMESPACE",
    "NAME",
    "SHAPE_TOPICS",
    "EstimateCdr",
    "EstimateMessages",
    "EstimateWriter",
    "HyperRedundantTracker",
    "Scores",
    "add_replay_arguments",
    "matches",
    "replay",
    "resolve_topic",
]

NAME = "hyper-redundant"


@dataclass
class _Stats:
    bad_samples: int = 0
    out_of_order: int = 0
    unknown_frame: int = 0
    non_unit_quaternion: int = 0
    frame_mismatch: int = 0
    estimates: int = 0


class HyperRedundantTracker:
    """Latest reading per platform, rods calibration, and estimates on a stamp-driven tick.

    Args:
        params: rigid_module_estimator parameters (validated here).
        rods_s: seconds at the start of the stream averaged for the rods calibration
            (0: no automatic calibration; then ``calibration_bias`` or :meth:`request_calibration`).
    """

    def __init__(self, params: dict[str, Any], rods_s: float = 1.0) -> None:
        self.params = SCHEMA.validate(params)
        if rods_s < 0:
            raise ValueError(f"rods_s={rods_s}: expected seconds >= 0")
        self.config = RigidModuleConfig.from_params(self.params)
        self.estimator = RigidModuleEstimator(self.config)
        self.n = self.config.n_modules + 1
        self.ticker = StampTicker(self.params["publish_rate"])
        self.latest_ns = -1
        self.last_estimate_ns = -1  # stamp of the last estimate; each new one must carry a newer data stamp
        self.last_ns = np.full(self.n, -1, dtype=np.int64)
        self.stats = _Stats()
        self.rods_ns = round(rods_s * 1e9)
        self.calibrated = bool(self.config.calibration_bias) or self.rods_ns == 0
        self._cal_start: int | None = None
        self._cal_end: int | None = None
        self._cal_sum = np.zeros((self.n, 4))  # roll, pitch, cos(yaw), sin(yaw)
        self._cal_count = np.zeros(self.n, dtype=int)
        self._cal_gravity: list[list[FloatArray]] = [[] for _ in range(self.n)]  # gravity directions in the window
        self.calibration_missing: list[int] = []
        #: why the last rods calibration was refused (the corrections before it are kept), or None
        self.calibration_refused: str | None = None
        self._sweep_index: dict[tuple[str, ...], np.ndarray] = {}  # platform index of each row, by the rows' frames

    def request_calibration(self, stamp_ns: int, duration_s: float) -> None:
        """Average the readings from ``stamp_ns`` for ``duration_s`` as the rods calibration (the node's service)."""
        self.calibrated = False
        self._cal_start = stamp_ns
        self._cal_end = stamp_ns + round(duration_s * 1e9)
        self._cal_sum[:] = 0.0
        self._cal_count[:] = 0
        self._cal_gravity = [[] for _ in range(self.n)]

    def _advance(self, stamp_ns: int) -> list[RigidModuleEstimate]:
        if not self.ticker.started and not self.calibrated and self._cal_start is None:
            self._cal_start = stamp_ns  # the rods calibration window opens with the first message
            self._cal_end = stamp_ns + self.rods_ns
        return [est for tick in self.ticker.due(stamp_ns) if (est := self._estimate(tick)) is not None]

    def _finish_calibration(self, tick: int) -> None:
        if self.calibrated or self._cal_end is None or tick < self._cal_end:
            return
        missing = np.flatnonzero(self._cal_count == 0).tolist()
        self.calibration_missing = missing
        self.calibrated = True
        if 0 in missing:
            # Without the base reference nothing can be calibrated: keep the present corrections.
            return
        mean = self._cal_sum / np.maximum(self._cal_count, 1)[:, None]
        readings = np.column_stack([mean[:, 0], mean[:, 1], np.arctan2(mean[:, 3], mean[:, 2])])
        readings[missing] = readings[0]  # a platform silent on the rods keeps no correction (identity)
        self.calibration_refused = self._calibration_refusal(readings, missing)
        if self.calibration_refused is None:
            self.estimator.calibrate(readings)

    def _calibration_refusal(self, readings: FloatArray, missing: list[int]) -> str | None:
        """Why the rods readings of the window cannot be a calibration (the rig moved, or is bent), or None.

        Stillness: each platform's gravity direction (the sensor's roll and pitch) stays within
        ``calibration_max_motion_deg`` of its mean over the window. Straightness: each correction the calibration
        would make stays within ``calibration_max_bias_deg`` (mounting errors are a few degrees; more is a bent or
        twisted rig, whose bend would be stored as a mounting error and subtracted from every later shape).
        """
        p = self.params
        moved = []
        for i, dirs in enumerate(self._cal_gravity):
            if i in missing or len(dirs) < 2:
                continue
            g = np.asarray(dirs)
            m = g.mean(axis=0)
            m /= np.linalg.norm(m)
            worst = float(np.degrees(np.arccos(np.clip(g @ m, -1.0, 1.0)).max()))
            if worst > p["calibration_max_motion_deg"]:
                moved.append(f"platform {i} moved {worst:.1f} deg")
        if moved:
            return (
                f"rods calibration refused: the rig moved during the {p['calibration_duration']:g} s window "
                f"({', '.join(moved)}; limit {p['calibration_max_motion_deg']:g} deg): hold it still on its rods "
                "and calibrate again"
            )
        trial = RigidModuleEstimator(self.config)
        bias = np.degrees(np.linalg.norm(trial.calibrate(readings), axis=1))
        bent = [f"platform {i} {b:.1f} deg" for i, b in enumerate(bias) if b > p["calibration_max_bias_deg"]]
        if bent:
            return (
                f"rods calibration refused: corrections beyond {p['calibration_max_bias_deg']:g} deg "
                f"({', '.join(bent)}): the rig is bent or twisted, not on its rods; straighten it and calibrate again"
            )
        return None

    def _estimate(self, tick: int) -> RigidModuleEstimate | None:
        self._finish_calibration(tick)
        if not self.calibrated or self.latest_ns < 0:
            return None
        if self.latest_ns <= self.last_estimate_ns:
            return None  # no data newer than the last estimate: it would repeat that estimate with the same stamp
        self.last_estimate_ns = self.latest_ns
        est = self.estimator.estimate(self.latest_ns)
        if self.calibration_refused:
            est.shape.diagnostics.append(
                DiagnosticStatus(
                    name="rigid_module/calibration", level=DiagnosticLevel.ERROR, message=self.calibration_refused
                )
            )
        if self.calibration_missing:
            est.shape.diagnostics.append(
                DiagnosticStatus(
                    name="rigid_module/calibration",
                    level=DiagnosticLevel.WARN,
                    message=f"rods calibration without platform(s) {self.calibration_missing}: "
                    + ("nothing calibrated (no base reading)" if 0 in self.calibration_missing else "left uncorrected"),
                )
            )
        st = self.stats
        if st.bad_samples or st.out_of_order or st.unknown_frame or st.non_unit_quaternion or st.frame_mismatch:
            est.shape.diagnostics.append(
                DiagnosticStatus(
                    name="rigid_module/inputs",
                    level=DiagnosticLevel.WARN,
                    message="bad, out-of-order or unknown samples were skipped",
                    values={k: str(v) for k, v in self.stats.__dict__.items()},
                )
            )
        self.stats.estimates += 1
        return est

    def push_sweep(self, samples: list[ImuSample]) -> list[RigidModuleEstimate]:
        """The samples of one bus cycle (e.g. an ImuArray), each platform known by its frame id.

        What :meth:`push_imu` does for each sample in stamp order, with the attitudes of a cycle that shares one
        stamp computed and stored at once (:meth:`push_sweep_arrays`).
        """
        if not samples:
            return []
        q = np.array([(np.nan,) * 4 if s.orientation is None else s.orientation for s in samples], dtype=float)
        stamps = np.array([s.stamp_ns for s in samples], dtype=np.int64)
        return self.push_sweep_arrays(stamps, [s.frame_id for s in samples], q, samples)

    def push_sweep_arrays(
        self, stamps_ns: np.ndarray, frame_ids: list[str], quats: FloatArray, samples: list[ImuSample] | None = None
    ) -> list[RigidModuleEstimate]:
        """:meth:`push_sweep` of a cycle given as arrays: ``(n,)`` stamps, ``n`` frame ids and ``(n, 4)`` unit
        quaternions, NaN where a platform sent none. A cycle whose stamps differ goes sample by sample through
        :meth:`push_imu` in stamp order (``samples``: the cycle's samples, else made from the arrays)."""
        n = len(frame_ids)
        if not n:
            return []
        stamps = np.asarray(stamps_ns, dtype=np.int64)
        s0 = int(stamps[0])
        if np.any(stamps != s0):
            if samples is None:
                samples = [
                    ImuSample(stamp_ns=int(stamps[i]), frame_id=frame_ids[i],
                              orientation=None if np.isnan(quats[i]).any() else np.array(quats[i], dtype=float))
                    for i in range(n)
                ]  # fmt: skip
            out: list[RigidModuleEstimate] = []
            for s in sorted(samples, key=lambda s: s.stamp_ns):
                out += self.push_imu(s)
            return out
        out = self._advance(s0)
        key = tuple(frame_ids)
        idx = self._sweep_index.get(key)
        if idx is None:
            index_of = self.estimator.index_of
            idx = np.array([-1 if (i := index_of(f)) is None else i for f in frame_ids], dtype=np.int64)
            if len(self._sweep_index) > 64:
                self._sweep_index.clear()
            self._sweep_index[key] = idx
        known = (idx >= 0) & (idx < self.n)
        self.stats.unknown_frame += int((~known).sum())
        q = np.asarray(quats, dtype=float)
        with np.errstate(invalid="ignore"):
            norm = np.sqrt(np.einsum("ij,ij->i", q, q))
            good = known & np.isfinite(q).all(axis=1) & (norm > 0.5) & (norm < 1.5)
        self.stats.bad_samples += int((known & ~good).sum())
        older = good & (s0 < self.last_ns[np.where(known, idx, 0)])
        self.stats.out_of_order += int(older.sum())
        take = good & ~older
        if not take.any():
            return out
        idx = idx[take]
        self.estimator.push_quats(idx, q[take], s0)  # made angles when next used: once per estimate
        self.last_ns[idx] = s0
        self.latest_ns = max(self.latest_ns, s0)
        in_window = self._cal_start is not None and self._cal_end is not None
        if not self.calibrated and in_window and self._cal_start <= s0 < self._cal_end:  # type: ignore[operator]
            euler = quats_to_euler_zyx(q[take])
            rows = np.column_stack([euler[:, 0], euler[:, 1], np.cos(euler[:, 2]), np.sin(euler[:, 2])])
            np.add.at(self._cal_sum, idx, rows)
            np.add.at(self._cal_count, idx, 1)
            for i, up in zip(idx.tolist(), euler_zyx_to_matrix(euler)[:, 2], strict=True):
                self._cal_gravity[i].append(up)  # world z in the sensor frame, as push_imu keeps it
        return out

    def push_imu(self, sample: ImuSample, index: int | None = None) -> list[RigidModuleEstimate]:
        """Add one platform's reading (index from the argument or the sample's frame id)."""
        out = self._advance(sample.stamp_ns)
        i = self.estimator.index_of(sample.frame_id) if index is None else index
        if i is None or not 0 <= i < self.n:
            self.stats.unknown_frame += 1
            return out
        tail = sample.frame_id.rsplit("platform_", 1)[-1]
        named = int(tail) if "platform_" in sample.frame_id and tail.isdigit() else None
        if index is not None and named is not None and named != index:
            self.stats.frame_mismatch += 1  # the topic of platform `index` carries another platform's frame
            return out
        q = sample.orientation
        if q is None or not np.all(np.isfinite(q)):
            self.stats.bad_samples += 1
            return out
        if not abs(float(np.linalg.norm(q)) - 1.0) <= UNIT_QUATERNION_TOLERANCE:
            self.stats.non_unit_quaternion += 1
            return out
        if sample.stamp_ns < self.last_ns[i]:
            self.stats.out_of_order += 1
            return out
        euler = quat_to_euler_zyx(q)  # = matrix_to_euler_zyx(quat_to_matrix(q)), without the matrix
        self.estimator.push_euler(i, euler, sample.stamp_ns)
        self.last_ns[i] = sample.stamp_ns
        self.latest_ns = max(self.latest_ns, sample.stamp_ns)
        in_window = self._cal_start is not None and self._cal_end is not None
        if not self.calibrated and in_window and self._cal_start <= sample.stamp_ns < self._cal_end:  # type: ignore[operator]
            self._cal_sum[i] += [euler[0], euler[1], np.cos(euler[2]), np.sin(euler[2])]
            self._cal_count[i] += 1
            self._cal_gravity[i].append(euler_zyx_to_matrix(euler)[2])  # world z in the sensor frame
        return out

    def flush(self) -> list[RigidModuleEstimate]:
        """Estimate at the last tick not yet fired (end of a recording)."""
        if self.latest_ns < 0:
            return []
        return [est for tick in self.ticker.flush() if (est := self._estimate(tick)) is not None]


# Estimate topics (relative to the robot namespace unless absolute) -> message type.
SHAPE_TOPICS: dict[str, str] = {
    "/tf": "tf2_msgs/msg/TFMessage",
    "joint_states": "sensor_msgs/msg/JointState",
    "shape/path": "nav_msgs/msg/Path",
    "shape/end_effector": "geometry_msgs/msg/PoseWithCovarianceStamped",
    "/diagnostics": "diagnostic_msgs/msg/DiagnosticArray",
    "shape/markers": "visualization_msgs/msg/MarkerArray",
}


class EstimateMessages:
    """The messages of each estimate, on the topics of :data:`SHAPE_TOPICS`; publisher-agnostic.

    :class:`EstimateWriter` writes them to a bag and the ``rigid_module_estimator``
    node publishes them, so both emit the same messages. Markers are throttled
    to ``marker_rate`` (by estimate stamps).

    Args:
        factory: builds the messages (rosbags for bags, rclpy in nodes).
        frame_prefix: prefix of every frame id.
        marker_rate: marker rate, Hz.
        diagnostics: status throttle (about 1 Hz by stamps, naming the node and hardware); default: the core's names.
    """

    def __init__(
        self,
        factory: MessageFactory,
        frame_prefix: str = "",
        marker_rate: float = 5.0,
        diagnostics: DiagnosticsThrottle | None = None,
    ) -> None:
        self.factory = factory
        self.prefix = frame_prefix
        self.markers = RateThrottle(marker_rate)
        self.diagnostics = diagnostics or DiagnosticsThrottle()

    def build(self, est: RigidModuleEstimate) -> list[tuple[str, Any]]:
        """``(topic, message)`` pairs: TF, joint states, path, end effector, diagnostics, markers when due."""
        f, p = self.factory, self.prefix
        shape = est.shape
        stamp = shape.stamp_ns
        base = p + shape.parent_frame
        names = hmsgs.joint_names(len(est.theta), p)
        out = [
            ("/tf", msgs.tf_message(msgs.shape_transforms(shape, p), f)),
            ("joint_states", hmsgs.joint_state_msg(stamp, names, est.theta, f, frame_id=base)),
            ("shape/path", msgs.path_msg(stamp, base, shape.backbone, f)),
            (
                "shape/end_effector",
                msgs.pose_with_covariance_stamped(stamp, base, shape.tip_pose, est.tip_covariance, f),
            ),
        ]
        statuses = self.diagnostics.add(stamp, shape.diagnostics)
        if statuses is not None:
            out.append(("/diagnostics", msgs.diagnostic_array(stamp, statuses, f)))
        if self.markers.ready(stamp):
            out.append(("shape/markers", msgs.shape_markers(shape, frame_prefix=p, factory=f)))
        return out


class EstimateCdr:
    """The CDR bytes of :class:`EstimateMessages`' messages, written straight from the estimate's arrays.

    The ``rigid_module_estimator`` node publishes these serialised (no message objects per pose); the numbers and
    the throttles are those of :class:`EstimateMessages` (same arguments), so the bytes are those of its messages
    serialised (``test/test_shape_cdr.py``). Only for the message definitions :func:`cdr.supported` accepts.
    """

    def __init__(self, frame_prefix: str = "", marker_rate: float = 5.0,
                 diagnostics: DiagnosticsThrottle | None = None) -> None:  # fmt: skip
        self.prefix = frame_prefix
        self.markers = RateThrottle(marker_rate)
        self.diagnostics = diagnostics or DiagnosticsThrottle()
        self._names: dict[int, list[str]] = {}

    def build(self, est: RigidModuleEstimate) -> list[tuple[str, bytes]]:
        """``(topic, CDR bytes)`` of one estimate, the topics and order of :meth:`EstimateMessages.build`."""
        from shape_sensing.messages import cdr

        p, shape = self.prefix, est.shape
        stamp = shape.stamp_ns
        base = p + shape.parent_frame
        n = len(est.theta)
        names = self._names.get(n)
        if names is None:
            names = self._names[n] = hmsgs.joint_names(n, p)
        cov = np.zeros((6, 6)) if est.tip_covariance is None else est.tip_covariance
        if cdr.single_layout_fits(shape):
            tf, path, tip = cdr.single_shape_cdr(shape, cov, p)  # the layout's templates filled: the same bytes
        else:
            tf, path = cdr.tf_cdr(shape, p), cdr.path_cdr(stamp, base, shape.backbone)
            tip = cdr.tip_cdr(stamp, base, shape.tip_pose, cov)
        out = [
            ("/tf", tf),
            ("joint_states", cdr.joint_state_cdr(stamp, base, names, est.theta)),
            ("shape/path", path),
            ("shape/end_effector", tip),
        ]
        statuses = self.diagnostics.add(stamp, shape.diagnostics)
        if statuses is not None:
            out.append(("/diagnostics", cdr.diagnostics_cdr(stamp, statuses)))
        if self.markers.ready(stamp):
            out.append(("shape/markers", cdr.markers_cdr(shape, frame_prefix=p)))
        return out


class EstimateWriter:
    """Write estimates to a bag with the topics of a live run (under ``namespace``)."""

    def __init__(
        self, writer: BagWriter, namespace: str = DEFAULT_NAMESPACE, frame_prefix: str = "", marker_rate: float = 5.0
    ) -> None:
        self.writer = writer
        self.namespace = namespace
        node = f"{namespace.rstrip('/')}/rigid_module_estimator"
        throttle = DiagnosticsThrottle(node=node, hardware_id=namespace)
        self.messages = EstimateMessages(writer.factory, frame_prefix, marker_rate, throttle)

    def write(self, est: RigidModuleEstimate) -> None:
        """Write every message of one estimate at its stamp."""
        for topic, msg in self.messages.build(est):
            self.writer.write(resolve_topic(topic, self.namespace), msg, est.shape.stamp_ns)


@dataclass
class Scores:
    """Errors of estimates against ground truth (matched by stamp)."""

    tip_mm: list[float] = field(default_factory=list)
    tip_deg: list[float] = field(default_factory=list)
    joint_sq: list[float] = field(default_factory=list)
    nees: list[float] = field(default_factory=list)
    twist_deg: list[float] = field(default_factory=list)
    stamps: list[int] = field(default_factory=list)

    def add(self, est: RigidModuleEstimate, true_tip: FloatArray, true_theta: FloatArray | None) -> None:
        """Score one estimate."""
        d = est.shape.tip_pose[:3, 3] - true_tip[:3, 3]
        self.tip_mm.append(1000.0 * float(np.linalg.norm(d)))
        self.tip_deg.append(float(np.degrees(rotation_angle(est.shape.tip_pose[:3, :3].T @ true_tip[:3, :3]))))
        if true_theta is not None and true_theta.size == est.theta.size:
            self.joint_sq.extend(np.degrees(est.theta.reshape(-1) - true_theta.reshape(-1)) ** 2)
        if est.tip_covariance is not None:
            P = est.tip_covariance[:3, :3]
            if np.linalg.cond(P) < 1e12:
                self.nees.append(float(d @ np.linalg.solve(P, d)))
        self.twist_deg.append(float(np.degrees(np.max(np.abs(est.twist)))) if est.twist.size else 0.0)
        self.stamps.append(est.shape.stamp_ns)

    def metrics(self) -> dict[str, float | int]:
        """Mean/max tip errors, joint RMSE, NEES, twist."""
        if not self.tip_mm:
            return {"estimates_scored": 0}
        tip = np.asarray(self.tip_mm)
        out: dict[str, float | int] = {
            "estimates_scored": len(tip),
            "tip_error_mean_mm": float(tip.mean()),
            "tip_error_max_mm": float(tip.max()),
            "tip_orientation_error_mean_deg": float(np.mean(self.tip_deg)),
            "tip_orientation_error_max_deg": float(np.max(self.tip_deg)),
            "twist_residual_max_deg": float(np.max(self.twist_deg)),
        }
        if self.joint_sq:
            out["joint_angle_rmse_deg"] = float(np.sqrt(np.mean(self.joint_sq)))
        if self.nees:
            out["tip_position_nees_mean"] = float(np.mean(self.nees))
        return out


# -- replay ----------------------------------------------------------------------------------------------------------


def _params_from(config: Path | None, topics: Iterable[str]) -> dict[str, Any]:
    if config is not None:
        return load_node_params(config, SCHEMA)
    idx = [int(m.group(1)) for t in topics if (m := IMU_TOPIC_RE.search(t))]
    if not idx:
        return {}
    return {"n_modules": max(1, max(idx))}


def check_platforms(n: int, topics: dict[str, str], ns: str) -> None:
    """Refuse a configuration for another robot: the bag's IMU platforms must be the ``n`` configured (a 7-module
    configuration on a 4-module bag gave a 240 mm tip error and rc 0)."""
    prefix = resolve_topic("imu/", ns)
    in_bag = sorted(
        int(m.group(1)) for t in topics if t.startswith(prefix) and (m := IMU_TOPIC_RE.search(t)) is not None
    )
    missing = sorted(set(range(n)) - set(in_bag))
    extra = sorted(set(in_bag) - set(range(n)))
    if missing or extra:
        raise ValueError(
            f"the configuration is for {n} IMU platforms (imu/platform_0..{n - 1}) but the bag has "
            f"{len(in_bag)} under {ns!r} ({in_bag}): "
            + (f"platform(s) {missing} missing" if missing else f"platform(s) {extra} not configured")
            + "; the configuration is for another robot (check its module count) or give --hr-namespace"
        )


def replay(
    messages: Iterator[BagMessage], writer: BagWriter, config: Path | None, args: argparse.Namespace
) -> dict[str, Any] | None:
    """Re-estimate a hyper-redundant bag (topics in the module docstring); metrics when truth is present."""
    topics: dict[str, str] | None = getattr(args, "bag_topics", None)
    ns = getattr(args, "hr_namespace", DEFAULT_NAMESPACE)
    rods_s = float(getattr(args, "hr_rods_seconds", 1.0))
    params = _params_from(config, (topics or {}).keys())
    tracker = HyperRedundantTracker(params, rods_s=rods_s)
    imu_index = {resolve_topic(f"imu/platform_{i}", ns): i for i in range(tracker.n)}
    if topics is not None and not any(t in topics for t in imu_index):
        raise ValueError(f"none of the IMU topics {sorted(imu_index)} is in the bag (namespace {ns!r})")
    if topics is not None:
        check_platforms(tracker.n, topics, ns)
    out_writer = EstimateWriter(writer, ns, tracker.params["frame_prefix"])
    truth_tip: dict[int, FloatArray] = {}
    truth_theta: dict[int, FloatArray] = {}
    tip_name = resolve_topic("truth/end_effector", ns)
    theta_name = resolve_topic("truth/joint_states", ns)
    estimates: list[RigidModuleEstimate] = []
    for bm in messages:
        new: list[RigidModuleEstimate] = []
        if bm.topic in imu_index:
            writer.write(bm.topic, bm.msg, bm.stamp_ns, qos="sensor")
            try:
                sample = msgs.imu_from_msg(bm.msg)
            except MessageError:
                tracker.stats.bad_samples += 1
                continue
            new = tracker.push_imu(sample, imu_index[bm.topic])
        elif bm.topic == "/tf_static":
            writer.copy(bm, qos="static")
        elif bm.topic == tip_name:
            stamp, T = hmsgs.pose_stamped_to_matrix(bm.msg)
            truth_tip[stamp] = T
            writer.write(bm.topic, bm.msg, bm.stamp_ns)
        elif bm.topic == theta_name:
            stamp, _, pos = hmsgs.joint_state_from_msg(bm.msg)
            truth_theta[stamp] = pos
            writer.write(bm.topic, bm.msg, bm.stamp_ns)
        for est in new:
            out_writer.write(est)
            estimates.append(est)
    for est in tracker.flush():
        out_writer.write(est)
        estimates.append(est)
    if not truth_tip:
        return None
    scores = Scores()
    for est in estimates:
        T_true = truth_tip.get(est.shape.stamp_ns)
        if T_true is not None:
            scores.add(est, T_true, truth_theta.get(est.shape.stamp_ns))
    return {"estimates": tracker.stats.estimates, **scores.metrics()}
