"""Vine robot with distributed IMUs: raw IMU topics -> hinge-arc shape topics.

The same :class:`VineImuTracker` runs in the live demo, in ``shape-sensing
replay`` and in the ``hinge_arc_estimator`` node. It is driven by message
stamps only: an estimate for publishing tick ``k`` is made when the first
message stamped after the tick arrives, from all data stamped up to it.
Replaying a bag therefore reproduces the live estimates exactly.

Topics (relative names under the robot namespace, ``/vine`` by default):

==========================  ====================================  ==========================
topic                       type                                  frame / content
==========================  ====================================  ==========================
``imu_NN/data``             sensor_msgs/Imu                       ``vine_imu_NN`` (input)
``base/length``             sensor_msgs/JointState                position[0] = length, m
``shape/path``              nav_msgs/Path                         centreline in ``vine_imu_base``
``shape/markers``           visualization_msgs/MarkerArray        body tube, backbone, frames
``shape/tip``               geometry_msgs/PoseWithCovarianceStamped  tip in ``vine_imu_base``
``truth/path``              nav_msgs/Path                         simulator ground truth
``truth/tip``               geometry_msgs/PoseStamped             simulator ground truth
``truth/sensors``           geometry_msgs/PoseArray               simulator ground truth
``/tf``                     tf2_msgs/TFMessage                    ``vine_imu_base`` -> sensors, tip
``/tf_static``              tf2_msgs/TFMessage                    ``world`` -> ``vine_base`` -> ``vine_imu_base``
``/diagnostics``            diagnostic_msgs/DiagnosticArray       estimator health
==========================  ====================================  ==========================
"""

from __future__ import annotations

import argparse
import itertools
import logging
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from shape_sensing.config import load_node_params
from shape_sensing.estimators.hinge_arc import SCHEMA, HingeArcConfig, HingeArcEstimator
from shape_sensing.estimators.straight_reference import StraightReference, capture_reference
from shape_sensing.geometry import FloatArray
from shape_sensing.io.bag import BagMessage, BagWriter
from shape_sensing.io.errors import BagError
from shape_sensing.messages import common as msgs
from shape_sensing.messages.common import UNIT_QUATERNION_TOLERANCE
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import MessageFactory
from shape_sensing.messages.imu_array import IMU_ARRAY_TYPE as IMU_ARRAY_MSG
from shape_sensing.messages.imu_array import imu_sweep_from_cdr, imu_sweep_from_msg
from shape_sensing.pipelines.common import DiagnosticsThrottle, RateThrottle, StampTicker, resolve_topic
from shape_sensing.pipelines.contracts import R_VINE_BASE_IMU_BASE, VINE_BASE_FRAME, VINE_IMU_BASE_FRAME
from shape_sensing.pipelines.contracts import VINE_IMU_ARRAY_RE as IMU_ARRAY_RE
from shape_sensing.pipelines.contracts import VINE_IMU_TOPIC_RE as IMU_TOPIC_RE
from shape_sensing.pipelines.contracts import VINE_NAMESPACE as DEFAULT_NAMESPACE
from shape_sensing.pipelines.contracts import vine_imu_arguments as add_replay_arguments
from shape_sensing.pipelines.contracts import vine_imu_matches as matches
from shape_sensing.types import DiagnosticLevel, DiagnosticStatus, ImuSample, ShapeEstimate, TransformStamped

if TYPE_CHECKING:
    from shape_sensing.sim.vine import VineTruth

__all__ = [
    "NAME",
    "SHAPE_TOPICS",
    "TRUTH_TOPICS",
    "ShapeMessages",
    "ShapeWriter",
    "TipErrors",
    "VineImuTracker",
    "add_replay_arguments",
    "length_message",
    "matches",
    "replay",
    "resolve_topic",
    "truth_messages",
]

_log = logging.getLogger(__name__)

NAME = "vine-imu"
#: custom_data keys of a bag's straight reference (YAML of StraightReference) and how it was taken.
REFERENCE_KEY = "shape_sensing.straight_reference.hinge_arc_estimator"
REFERENCE_HOW_KEY = REFERENCE_KEY + ".how"


@dataclass
class _Stats:
    bad_samples: int = 0
    out_of_order: int = 0
    non_unit_quaternion: int = 0
    frame_mismatch: int = 0
    estimates: int = 0
    last_rejection: str = ""


class VineImuTracker:
    """Keeps the latest reading per IMU and runs the estimator on a stamp-driven tick.

    Args:
        params: hinge_arc_estimator parameters (validated here).
        frame_ids: one frame id per IMU topic (default ``vine_imu_NN``, prefixed).
    """

    def __init__(self, params: dict[str, Any], frame_ids: list[str] | None = None) -> None:
        self.params = SCHEMA.validate(params)
        n = len(self.params["imu_topics"])
        prefix = self.params["frame_prefix"]
        self.frame_ids = frame_ids or [f"{prefix}vine_imu_{i:02d}" for i in range(n)]
        self.config = HingeArcConfig.from_params(self.params)
        self.estimator = HingeArcEstimator(self.config, self.frame_ids)
        self.n = n
        self.quats = np.tile([0.0, 0.0, 0.0, 1.0], (n, 1))
        self.last_ns = np.full(n, -1, dtype=np.int64)
        self.length: float | None = None
        self.ticker = StampTicker(self.params["publish_rate"])
        self.latest_ns = -1
        self.last_estimate_ns = -1  # stamp of the last estimate; each new one must carry a newer data stamp
        self.stats = _Stats()
        self._frame_list = list(self.frame_ids)
        self._offset_requested = bool(self.params["auto_offset"])
        self._offset_manual = False
        self.stale_ns = int(self.params["stale_timeout"] * 1e9)
        self.offset_warning: str = ""
        self.capture_at_ns: int | None = None  # capture at the first tick this long after the first message
        self.first_ns = -1
        # ~/offset's stillness check: from the request on, each IMU's orientation when it last turned by more than
        # offset_max_motion_deg, and since when it has stayed within that of it
        self._still_check = False
        self._request_ns = -1
        self._anchor = self.quats.copy()
        self._still_since = np.full(n, -1, dtype=np.int64)
        #: why the last capture was refused (the reference before it is kept), or ""
        self.offset_refused = ""
        #: base-to-tip bend (deg) of the last estimate, for ~/offset's straightness check
        self.last_bend_deg: float | None = None
        self.reference_status = "not captured yet" + (
            " (auto capture when safe)" if self._offset_requested else " (call ~/offset, or load a saved reference)"
        )
        path = self.params["straight_reference_file"]
        if path:
            if Path(path).is_file():
                self.set_reference(StraightReference.from_yaml(path), f"loaded from {path}")
            else:
                self.reference_status += f"; no saved reference at {path} yet"

    def request_offset(self, check_still: bool = True) -> None:
        """Capture the straight reference (the ``~/offset`` service) once the robot has been still.

        Every everted, fresh used IMU is captured (with a length, IMUs not yet everted are left out and stay
        unusable until a capture that has them). With ``check_still`` the capture waits for a tick at which each of
        them has turned less than ``offset_max_motion_deg`` for ``offset_still_s`` since the request, and is refused
        (saying which IMUs moved) when that does not happen within ``offset_timeout``, or when the robot's last
        estimate is bent (:meth:`_bend_refusal`). A refused capture keeps the reference there was.
        """
        self._offset_requested = True
        self._offset_manual = True
        self._still_check = check_still and self.params["offset_still_s"] > 0
        self._request_ns = self.latest_ns
        self._anchor = self.quats.copy()
        self._still_since = np.where(self.last_ns >= 0, self.latest_ns, -1)

    def capture_at(self, seconds: float) -> None:
        """Capture the straight reference (as :meth:`request_offset`) at the first tick ``seconds`` after the
        first message, and not automatically before."""
        self._offset_requested = False
        self._still_check = False
        self.capture_at_ns = round(seconds * 1e9)
        self.reference_status = f"to be captured at t = {seconds:g} s from the first message"

    def set_reference(self, ref: StraightReference, how: str = "given") -> None:
        """Use a saved or captured straight reference; no automatic capture afterwards."""
        self.estimator.apply_reference(ref)
        self._offset_requested = False
        self.reference_status = f"{how}: {ref.describe()}"

    def save_reference(self, path: str | None = None) -> str:
        """Write the current straight reference to ``path`` (default ``straight_reference_file``)."""
        target = path or self.params["straight_reference_file"]
        if not target:
            raise ValueError("no file to save the straight reference to: set 'straight_reference_file'")
        ref = self.estimator.reference
        if ref is None:
            raise ValueError("no straight reference to save yet: capture one first (~/offset with the robot straight)")
        return str(ref.to_yaml(target))

    def _everted(self) -> np.ndarray:
        if self.length is None:
            return np.ones(self.n, dtype=bool)
        return np.asarray(self.config.sensor_positions <= self.length + 1e-9)

    def _try_capture(self, valid: np.ndarray) -> None:
        wanted = self.config.used
        everted = self._everted()
        if not self._offset_manual and not everted[wanted].all():
            # A robot that starts short grows: IMUs not yet out ride inside reversed, and by the time all are out
            # the robot is no longer known to be straight. So no automatic capture in this run.
            last = float(self.config.sensor_positions[wanted][-1])
            self._offset_requested = False
            self.reference_status = (
                f"no automatic capture: the robot started growing (length {self.length:.3f} m, last used IMU at "
                f"{last:.3f} m; IMUs not yet everted ride inside reversed); load a saved reference "
                "(straight_reference_file, captured fully everted and straight) or call ~/offset with the robot "
                "straight"
            )
            return
        take = wanted & everted
        if not take.any() or not valid[take].all():
            return  # wait for a tick at which every IMU to capture is fresh
        if self._offset_manual and self._still_check:
            window = round(self.params["offset_still_s"] * 1e9)
            moving = take & ((self._still_since < 0) | (self.latest_ns - self._still_since < window))
            if moving.any():
                if self.latest_ns - self._request_ns <= round(self.params["offset_timeout"] * 1e9):
                    return  # wait for the robot to be still
                self._refuse(
                    f"the robot was not still: IMU(s) {np.flatnonzero(moving).tolist()} turned more than "
                    f"{self.params['offset_max_motion_deg']:g} deg within every {self.params['offset_still_s']:g} s "
                    f"of the {self.params['offset_timeout']:g} s after the request; hold it still and call ~/offset "
                    "again"
                )
                return
            bent = self._bend_refusal()
            if bent:
                self._refuse(bent)
                return
        ref = capture_reference(
            self.quats,
            valid & everted,
            self.latest_ns,
            self.frame_ids,
            first_mount=self.config.first_mount,
            placement=self.config.base_placement,
            length=self.length,
        )
        how = "captured on request" if self._offset_manual else "auto-captured (all used IMUs everted and fresh)"
        self.set_reference(ref, how)
        self._offset_manual = False
        self._still_check = False
        self.offset_refused = ""
        missing = [int(i) for i in np.flatnonzero(wanted & ~everted)]
        self.offset_warning = f"offset without {missing} (not everted)" if missing else ""

    def _bend_refusal(self) -> str:
        """Why the robot is not straight by its last estimate (with the reference there is), or "".

        The bend is the angle between the base's growth axis (z) and the tip's, as last estimated: more than
        ``offset_max_bend_deg`` is a bent robot, whose bend a capture would store as mounting errors and subtract
        from every later shape. Without a reference there is no estimate to judge by (the IMUs' orientations alone
        hold their unknown mountings and magnetic headings, tens of degrees apart on a straight robot): then only
        stillness is checked.
        """
        limit = self.params["offset_max_bend_deg"]
        if self.last_bend_deg is None or self.last_bend_deg <= limit:
            return ""
        return (
            f"the robot is not straight: its last estimate bends {self.last_bend_deg:.0f} deg from base to tip "
            f"(limit {limit:g} deg, offset_max_bend_deg); straighten it and call ~/offset again"
        )

    def _refuse(self, why: str) -> None:
        """A capture refused: keep the reference there was and say why."""
        self._offset_requested = False
        self._offset_manual = False
        self._still_check = False
        self.offset_refused = f"straight reference refused: {why}"
        if self.estimator.is_offset:
            self.offset_warning = f"last capture refused ({why}); the reference before it is kept"
        else:
            self.reference_status = f"not captured: {self.offset_refused}"
        _log.warning(self.offset_refused)

    def _advance(self, stamp_ns: int) -> list[ShapeEstimate]:
        """Estimate at every tick strictly before ``stamp_ns``."""
        return [est for tick in self.ticker.due(stamp_ns) if (est := self._estimate(tick)) is not None]

    def _fresh(self, tick: int) -> np.ndarray:
        return (self.last_ns >= 0) & (tick - self.last_ns <= self.stale_ns)

    def _estimate(self, tick: int) -> ShapeEstimate | None:
        job = self._prepare(tick)
        if job is None:
            return None
        valid, extra = job
        est = self.estimator.update(self.quats, valid, self.latest_ns, self.length)
        est.diagnostics.extend(extra)
        axis = est.tip_pose[:3, 2]
        cos_bend = float(axis[2]) / max(float(np.linalg.norm(axis)), 1e-12)
        self.last_bend_deg = math.degrees(math.acos(max(-1.0, min(1.0, cos_bend))))
        return est

    def _prepare(self, tick: int, valid: np.ndarray | None = None) -> tuple[np.ndarray, list[DiagnosticStatus]] | None:
        """Everything of an estimate at ``tick`` but the estimator's update: ``None`` when there is none, else
        the sensors that are fresh and the diagnostics to add to the update's (the bulk replay runs the
        updates of many ticks at once, :meth:`HingeArcEstimator.update_many`, and passes ``valid``, the
        sensors fresh at ``tick``, found for all ticks at once)."""
        if valid is None:
            valid = self._fresh(tick)
        if self.capture_at_ns is not None and self.first_ns >= 0 and tick - self.first_ns >= self.capture_at_ns:
            self.capture_at_ns = None
            self.request_offset(check_still=False)  # a time chosen in a recording: its bend is still checked
        if self._offset_requested:
            self._try_capture(valid)
        if not self.estimator.is_offset:
            return None
        if self.latest_ns <= self.last_estimate_ns:
            return None  # no data newer than the last estimate: it would repeat that estimate with the same stamp
        self.last_estimate_ns = self.latest_ns
        extra = [
            DiagnosticStatus(
                name="hinge_arc_estimator: straight reference",
                level=DiagnosticLevel.WARN if self.offset_warning else DiagnosticLevel.OK,
                message=self.reference_status + (f"; {self.offset_warning}" if self.offset_warning else ""),
                values={"captured_sensors": str(int(self.estimator.reference.captured.sum()))}
                if self.estimator.reference is not None
                else {},
            )
        ]
        st = self.stats
        if st.bad_samples or st.out_of_order or st.non_unit_quaternion or st.frame_mismatch:
            extra.append(
                DiagnosticStatus(
                    name="hinge_arc_estimator: inputs",
                    level=DiagnosticLevel.WARN,
                    message="bad or out-of-order samples were skipped"
                    + (f" (last: {st.last_rejection})" if st.last_rejection else ""),
                    values={
                        "bad_samples": str(st.bad_samples),
                        "out_of_order": str(st.out_of_order),
                        "non_unit_quaternion": str(st.non_unit_quaternion),
                        "frame_mismatch": str(st.frame_mismatch),
                    },
                )
            )
        self.stats.estimates += 1
        return valid, extra

    def push_imu(self, index: int, sample: ImuSample) -> list[ShapeEstimate]:
        """Add a reading of IMU ``index``; returns the estimates that became due."""
        return self.push_orientation(index, sample.stamp_ns, sample.orientation, sample.frame_id)

    def push_orientation(
        self, index: int, stamp_ns: int, q: FloatArray | None, frame_id: str | None = None
    ) -> list[ShapeEstimate]:
        """Add the orientation ``[x, y, z, w]`` (or ``None``: absent) read by IMU ``index`` at ``stamp_ns``.

        What :meth:`push_imu` does with an :class:`ImuSample`, for callers that read only the orientation
        (:func:`~shape_sensing.messages.common.imu_orientation_from_msg`); returns the estimates that became due.
        A quaternion whose norm is not 1 (within ``UNIT_QUATERNION_TOLERANCE``) and, when ``frame_id`` is
        given, a frame other than sensor ``index``'s are counted and skipped, never estimated from.
        """
        ticker = self.ticker
        # No tick due (the common case): skip building an empty list of estimates.
        out = self._advance(stamp_ns) if ticker.next_tick is None or ticker.next_tick < stamp_ns else []
        if q is None:
            self.stats.bad_samples += 1
            return out
        norm = math.sqrt(float(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]))
        if not abs(norm - 1.0) <= UNIT_QUATERNION_TOLERANCE:  # also true for NaN
            self.stats.non_unit_quaternion += 1
            self.stats.last_rejection = f"sensor {index}: quaternion norm {norm:.4g}"
            return out
        if frame_id is not None and frame_id != self.frame_ids[index]:
            self.stats.frame_mismatch += 1
            self.stats.last_rejection = f"sensor {index}: frame {frame_id!r}, expected {self.frame_ids[index]!r}"
            return out
        if stamp_ns < self.last_ns[index]:
            self.stats.out_of_order += 1
            return out
        self.quats[index] = q
        if self._still_check:
            a = self._anchor[index]
            cos_half = abs(float(a[0] * q[0] + a[1] * q[1] + a[2] * q[2] + a[3] * q[3])) / norm
            turned = 2.0 * math.degrees(math.acos(min(1.0, cos_half / max(float(np.linalg.norm(a)), 1e-12))))
            if self._still_since[index] < 0 or turned > self.params["offset_max_motion_deg"]:
                self._anchor[index] = q
                self._still_since[index] = stamp_ns
        self.last_ns[index] = stamp_ns
        if self.first_ns < 0:
            self.first_ns = stamp_ns
        if stamp_ns > self.latest_ns:
            self.latest_ns = stamp_ns
        return out

    def push_orientations(
        self,
        stamps_ns: np.ndarray,
        quats: FloatArray,
        usable: np.ndarray,
        frame_ids: Sequence[str] | None = None,
    ) -> list[ShapeEstimate]:
        """The unit orientations of one sweep (row i: IMU i; ``usable`` false: absent or bad), e.g. of an ImuArray.

        The same as :meth:`push_orientation` for each IMU in stamp order (index order among equal stamps),
        in one vectorised step when the sweep shares one stamp; sensors beyond the tracker's IMUs are ignored.
        With ``frame_ids`` (the sweep's per-sensor frames), a row whose frame is not IMU i's is counted as a frame
        mismatch and not used (a driver listing its sensors in another order than ``imu_topics``).
        """
        n = min(len(stamps_ns), self.n)
        if n == 0:
            return []
        if frame_ids is not None and list(frame_ids[:n]) != self._frame_list[:n]:
            wrong = np.array([f != e for f, e in zip(frame_ids[:n], self._frame_list[:n], strict=True)])
            i = int(np.flatnonzero(wrong)[0])
            self.stats.frame_mismatch += int((wrong & np.asarray(usable[:n], dtype=bool)).sum())
            self.stats.last_rejection = f"sensor {i}: frame {frame_ids[i]!r}, expected {self._frame_list[i]!r}"
            usable = np.asarray(usable, dtype=bool).copy()
            usable[:n] &= ~wrong
        stamps = np.asarray(stamps_ns[:n], dtype=np.int64)
        ok = np.asarray(usable[:n], dtype=bool)
        self.stats.bad_samples += int(n - ok.sum())
        ticker = self.ticker
        # In stamp order (index order among equal stamps; a driver reads its sensors one after the other, each
        # stamped), the readings between two ticks pushed at once, each tick estimated before the first reading
        # after it -- what push_orientation does reading by reading. One stamp (a simulator's sweep): one group.
        order = np.argsort(stamps, kind="stable")
        sorted_stamps = stamps[order]
        out = []
        pos = 0
        while pos < n:
            first = int(sorted_stamps[pos])
            if ticker.next_tick is None or ticker.next_tick < first:
                out += self._advance(first)
            nxt = ticker.next_tick
            end = n if nxt is None else pos + int(np.searchsorted(sorted_stamps[pos:], nxt, side="right"))
            end = max(end, pos + 1)
            self._push_rows(order[pos:end], stamps, quats, ok)
            pos = end
        return out

    def _push_rows(self, rows: np.ndarray, stamps: np.ndarray, quats: FloatArray, ok: np.ndarray) -> None:
        """Store the usable readings of sweep ``rows`` (row i: IMU i, each at most once), no tick between them:
        :meth:`push_orientation`'s bookkeeping for each (out-of-order refused, still check), at once."""
        rows = rows[ok[rows]]
        if not rows.size:
            return
        st = stamps[rows]
        older = st < self.last_ns[rows]
        self.stats.out_of_order += int(older.sum())
        rows, st = rows[~older], st[~older]
        if not rows.size:
            return
        q = quats[rows]
        self.quats[rows] = q
        if self._still_check:
            a = self._anchor[rows]
            norm = np.sqrt(np.einsum("ij,ij->i", q, q))
            cos_half = np.abs(np.einsum("ij,ij->i", a, q)) / norm
            a_norm = np.maximum(np.sqrt(np.einsum("ij,ij->i", a, a)), 1e-12)
            turned = 2.0 * np.degrees(np.arccos(np.minimum(1.0, cos_half / a_norm)))
            moved = (self._still_since[rows] < 0) | (turned > self.params["offset_max_motion_deg"])
            self._anchor[rows[moved]] = q[moved]
            self._still_since[rows[moved]] = st[moved]
        self.last_ns[rows] = st
        if self.first_ns < 0:
            self.first_ns = int(st.min())
        top = int(st.max())
        if top > self.latest_ns:
            self.latest_ns = top

    def push_length(self, stamp_ns: int, length: float) -> list[ShapeEstimate]:
        """Add a robot length reading (m); returns the estimates that became due."""
        out = self._advance(stamp_ns)
        if not np.isfinite(length) or length < 0:
            self.stats.bad_samples += 1
            return out
        self.length = float(length)
        if self.first_ns < 0:
            self.first_ns = stamp_ns
        self.latest_ns = max(self.latest_ns, stamp_ns)
        return out

    def flush(self) -> list[ShapeEstimate]:
        """Estimate at the last tick not yet fired (end of a recording)."""
        if self.latest_ns < 0:
            return []
        return [est for tick in self.ticker.flush() if (est := self._estimate(tick)) is not None]


# Topics of one estimate (relative to the robot namespace unless absolute) -> message type.
SHAPE_TOPICS: dict[str, str] = {
    "/tf": "tf2_msgs/msg/TFMessage",
    "shape/path": "nav_msgs/msg/Path",
    "shape/tip": "geometry_msgs/msg/PoseWithCovarianceStamped",
    "/diagnostics": "diagnostic_msgs/msg/DiagnosticArray",
    "shape/markers": "visualization_msgs/msg/MarkerArray",
}

# Ground-truth and length topics of the simulator (relative to the robot namespace) -> message type.
TRUTH_TOPICS: dict[str, str] = {
    "truth/tip": "geometry_msgs/msg/PoseStamped",
    "truth/path": "nav_msgs/msg/Path",
    "truth/sensors": "geometry_msgs/msg/PoseArray",
}


class ShapeMessages:
    """The messages of each estimate, with the topics of :data:`SHAPE_TOPICS`; publisher-agnostic.

    :class:`ShapeWriter` writes them to a bag and the ``hinge_arc_estimator``
    node publishes them, so both emit the same messages. Body markers are
    throttled to ``marker_rate`` and ``/diagnostics`` to about 1 Hz (by estimate
    stamps, see :class:`DiagnosticsThrottle`).

    The tip pose's covariance has the position block of the estimate; the
    orientation is not estimated, so its block is a diagonal of
    :data:`~shape_sensing.messages.common.UNOBSERVED_VARIANCE` (1e6 rad^2: no
    information, and a positive definite matrix, as robot_localization, nav2
    and RViz read it), the position-orientation blocks zero. The position block
    is floored to :data:`~shape_sensing.messages.common.VARIANCE_FLOOR` along
    every axis (a straight body has none along its length), so the matrix is
    positive definite.

    Args:
        factory: builds the messages (rosbags for bags, rclpy in nodes).
        marker_rate: body marker rate, Hz.
        diagnostics: status throttle (naming the node and hardware); default: 1 Hz, the core's names.
    """

    def __init__(
        self, factory: MessageFactory, marker_rate: float = 5.0, diagnostics: DiagnosticsThrottle | None = None
    ) -> None:
        self.factory = factory
        self.markers = RateThrottle(marker_rate)
        self.diagnostics = diagnostics or DiagnosticsThrottle()

    def build(self, shape: ShapeEstimate) -> list[tuple[str, Any]]:
        """``(topic, message)`` pairs of one estimate: TF, path, tip pose, diagnostics and (when due) markers."""
        f, stamp = self.factory, shape.stamp_ns
        cov6 = np.zeros((6, 6))
        cov6[3:, 3:] = np.eye(3) * msgs.UNOBSERVED_VARIANCE  # orientation is not estimated: no information
        if shape.position_covariance is not None:
            cov6[:3, :3] = msgs.positive_definite(shape.position_covariance[-1])
        out = [
            ("/tf", msgs.tf_message(msgs.shape_transforms(shape), f)),
            ("shape/path", msgs.path_msg(stamp, shape.parent_frame, shape.backbone, f)),
            ("shape/tip", msgs.pose_with_covariance_stamped(stamp, shape.parent_frame, shape.tip_pose, cov6, f)),
        ]
        statuses = self.diagnostics.add(stamp, shape.diagnostics)
        if statuses is not None:
            out.append(("/diagnostics", msgs.diagnostic_array(stamp, statuses, f)))
        if self.markers.ready(stamp):
            out.append(("shape/markers", msgs.shape_markers(shape, factory=f)))
        return out


def base_transforms(stamp_ns: int, world_imu_base: FloatArray, prefix: str = "") -> list[TransformStamped]:
    """``world -> vine_base`` (REP-103: x along the initial growth, z up) and ``vine_base -> vine_imu_base`` (the
    chain's base: z along the growth, x towards the IMUs), from the chain base's placement in the world (4x4)."""
    r = np.asarray(R_VINE_BASE_IMU_BASE, dtype=float)
    t_base_imu = np.eye(4)
    t_base_imu[:3, :3] = r
    t_world_base = np.asarray(world_imu_base, dtype=float) @ np.linalg.inv(t_base_imu)
    base, imu_base = prefix + VINE_BASE_FRAME, prefix + VINE_IMU_BASE_FRAME
    return [
        TransformStamped(stamp_ns, "world", base, t_world_base),
        TransformStamped(stamp_ns, base, imu_base, t_base_imu),
    ]


def length_message(stamp_ns: int, frame_id: str, length: float, velocity: float, factory: MessageFactory) -> Any:
    """The ``base/length`` sensor_msgs/JointState: position[0] = robot length (m), velocity[0] in m/s."""
    return factory.make(
        "sensor_msgs/msg/JointState",
        header=msgs.header(stamp_ns, frame_id, factory),
        name=["vine_length"],
        position=np.array([float(length)]),
        velocity=np.array([float(velocity)]),
        effort=np.zeros(0),
    )


def truth_messages(
    truth: VineTruth, stamp_ns: int, base_frame: str, factory: MessageFactory, *, full: bool = True
) -> list[tuple[str, Any]]:
    """``(topic, message)`` pairs of the simulator's ground truth (:data:`TRUTH_TOPICS`).

    The tip pose always; the backbone path and sensor poses only when ``full``.
    """
    f = factory
    hdr = msgs.header(stamp_ns, base_frame, f)
    out = [("truth/tip", f.make("geometry_msgs/msg/PoseStamped", header=hdr, pose=msgs.pose_msg(truth.tip_pose, f)))]
    if full:
        out.append(("truth/path", msgs.path_msg(stamp_ns, base_frame, truth.backbone[::5], f)))
        poses = [msgs.pose_msg(T, f) for T in truth.sensor_poses[truth.everted]]
        out.append(("truth/sensors", f.make("geometry_msgs/msg/PoseArray", header=hdr, poses=poses)))
    return out


class ShapeWriter:
    """Writes estimates with the topics of a live run; body markers throttled to ``marker_rate``."""

    def __init__(self, writer: BagWriter, namespace: str = DEFAULT_NAMESPACE, marker_rate: float = 5.0) -> None:
        self.writer = writer
        self.namespace = namespace
        node = f"{namespace.rstrip('/')}/hinge_arc_estimator"
        throttle = DiagnosticsThrottle(node=node, hardware_id=namespace)
        self.messages = ShapeMessages(writer.factory, marker_rate, throttle)

    def write(self, shape: ShapeEstimate) -> None:
        """Write one estimate: TF, path, tip pose, diagnostics and (when due) markers."""
        for topic, msg in self.messages.build(shape):
            self.writer.write(resolve_topic(topic, self.namespace), msg, shape.stamp_ns)


@dataclass
class TipErrors:
    """Tip position errors of estimates against ground truth."""

    errors: list[float] = field(default_factory=list)
    lengths: list[float] = field(default_factory=list)
    stamps: list[int] = field(default_factory=list)

    def add(self, stamp_ns: int, est_tip: FloatArray, true_tip: FloatArray, length: float) -> None:
        self.errors.append(float(np.linalg.norm(np.asarray(est_tip) - np.asarray(true_tip))))
        self.lengths.append(float(length))
        self.stamps.append(int(stamp_ns))

    def metrics(self) -> dict[str, float | int]:
        """Mean/max/final tip error in metres and in % of the robot length."""
        if not self.errors:
            return {"estimates_scored": 0}
        e = np.asarray(self.errors)
        pct = 100.0 * e / np.maximum(np.asarray(self.lengths), 1e-9)
        return {
            "estimates_scored": len(e),
            "tip_error_mean_m": float(e.mean()),
            "tip_error_max_m": float(e.max()),
            "tip_error_final_m": float(e[-1]),
            "tip_error_mean_pct": float(pct.mean()),
            "tip_error_max_pct": float(pct.max()),
            "robot_length_mean_m": float(np.mean(self.lengths)),
        }


# -- replay ------------------------------------------------------------------


def _array_topics(topics: dict[str, str], namespace: str) -> list[str]:
    """The bag's ImuArray topics named like the vine chain's sweeps (``<namespace>/imus``)."""
    prefix = namespace.rstrip("/") + "/"
    return sorted(t for t, ty in topics.items() if ty == IMU_ARRAY_MSG and IMU_ARRAY_RE.search(t) and
                  t.startswith(prefix))  # fmt: skip


def reads_sweeps(topics: dict[str, str], config: Path | None, namespace: str) -> bool:
    """Whether a replay of this bag reads the IMUs from ImuArray sweeps: the configuration's ``imu_array_topic``,
    or, without one, a bag holding ``<namespace>/imus`` and no per-IMU topic (the bulk replay reads only the latter)."""
    if config is not None:
        return bool(load_node_params(config, SCHEMA).get("imu_array_topic"))
    return bool(_array_topics(topics, namespace)) and not any(IMU_TOPIC_RE.search(t) for t in topics)


def _peek(messages: Iterator[BagMessage], topic: str) -> tuple[BagMessage | None, Iterator[BagMessage]]:
    """The first message on ``topic`` and an iterator giving every message again, that one included."""
    seen: list[BagMessage] = []
    for bm in messages:
        seen.append(bm)
        if bm.topic == topic:
            return bm, itertools.chain(seen, messages)
    return None, iter(seen)


def _params_from(config: Path | None, topics: Iterable[str], namespace: str) -> dict[str, Any]:
    if config is not None:
        return load_node_params(config, SCHEMA)
    # No config: use every imu_NN/data topic in the bag, in index order.
    topics = list(topics)
    found = sorted(
        (t for t in topics if IMU_TOPIC_RE.search(t)), key=lambda t: int(re.findall(r"imu_(\d+)/data$", t)[0])
    )
    if not found:
        shown = ", ".join(sorted(topics)[:12]) + (", ..." if len(topics) > 12 else "") if topics else "none"
        raise ValueError(
            f"the bag has no vine IMU topic ({namespace.rstrip('/')}/imu_NN/data): not a vine-IMU recording "
            f"(its topics: {shown}); or give the IMU topics with --config (imu_topics)"
        )
    rel = [t[len(namespace.rstrip("/")) + 1 :] if t.startswith(namespace.rstrip("/") + "/") else t for t in found]
    return {"imu_topics": rel}


def apply_recorded_reference(tracker: VineImuTracker, args: argparse.Namespace) -> None:
    """Use the straight reference recorded in the bag (``args.bag_metadata``) unless the user gave one."""
    if getattr(args, "reference", None) is not None or getattr(args, "reference_at", None) is not None:
        return
    meta: dict[str, str] = getattr(args, "bag_metadata", None) or {}
    text = meta.get(REFERENCE_KEY)
    if text is not None:
        ref = StraightReference.from_yaml_text(text, "the bag's recorded straight reference")
        tracker.set_reference(ref, meta.get(REFERENCE_HOW_KEY, "recorded in the bag"))


def check_inputs(tracker: VineImuTracker, topics: dict[str, str] | None, namespace: str) -> None:
    """Refuse a replay whose configured IMU topics cannot give an estimate from this bag (names them)."""
    array = tracker.params["imu_array_topic"]
    if array:
        name = resolve_topic(array, namespace)
        if topics is not None and name not in topics:
            raise ValueError(f"the configured ImuArray topic {name} (imu_array_topic) is not in the bag")
        return
    imu_index = {resolve_topic(t, namespace): i for i, t in enumerate(tracker.params["imu_topics"])}
    missing = [t for t in imu_index if topics is not None and t not in topics]
    if topics is not None and len(missing) == len(imu_index):
        raise ValueError(f"none of the configured IMU topics {sorted(imu_index)} is in the bag")
    used_missing = [t for t in missing if tracker.config.used[imu_index[t]]]
    if used_missing and tracker.params["auto_offset"]:
        # The straight reference waits for every used IMU: with one never heard, no estimate would come out.
        raise ValueError(
            f"used IMU topic(s) {used_missing} are not in the bag (namespace {namespace!r}); "
            "fix imu_topics/use_sensors/every_k in the config or --namespace"
        )


def check_made_estimates(tracker: VineImuTracker) -> None:
    """After a replay: no estimate at all is an error saying why, not an empty bag and exit 0."""
    if tracker.stats.estimates:
        return
    heard = int((tracker.last_ns >= 0).sum())
    reason = (
        "no configured IMU topic had a usable message"
        if heard == 0
        else f"the straight reference was never captured ({heard}/{tracker.n} IMUs heard; every used IMU "
        "must be fresh at one tick, or auto_offset is false)"
    )
    raise ValueError(f"replay made no estimate: {reason}")


def replay(
    messages: Iterator[BagMessage],
    writer: BagWriter,
    config: Path | None,
    args: argparse.Namespace,
) -> dict[str, Any] | None:
    """Re-estimate a vine-IMU bag (see the module docstring for topics).

    ``args.bag_topics`` (topic -> type of the input bag), when set, is used to
    pick the IMU topics when no config is given and to check the config's.
    """
    topics: dict[str, str] | None = getattr(args, "bag_topics", None)
    namespace = getattr(args, "namespace", DEFAULT_NAMESPACE)
    arrays = _array_topics(topics or {}, namespace)
    has_imu_topics = any(IMU_TOPIC_RE.search(t) for t in (topics or {}))
    if config is None and arrays and not has_imu_topics:
        # No config and only the sweeps (ImuArray): one IMU per row of the first sweep, read from the array.
        first, messages = _peek(messages, arrays[0])
        if first is None:
            raise ValueError(f"{arrays[0]} holds no message")
        n = len(first.msg.frame_id)
        params: dict[str, Any] = {
            "imu_topics": [f"imu_{i:02d}/data" for i in range(n)],
            "imu_array_topic": arrays[0][len(namespace.rstrip("/")) + 1 :],
        }
    else:
        params = _params_from(config, (topics or {}).keys(), namespace)
    tracker = VineImuTracker(params)
    reference = getattr(args, "reference", None)
    reference_at = getattr(args, "reference_at", None)
    if reference is not None:
        tracker.set_reference(StraightReference.from_yaml(reference), f"loaded from {reference}")
    elif reference_at is not None:
        if not (math.isfinite(reference_at) and reference_at >= 0):
            raise ValueError(f"--reference-at {reference_at}: expected a time >= 0 (s)")
        tracker.capture_at(reference_at)
    apply_recorded_reference(tracker, args)
    array_name = (
        resolve_topic(tracker.params["imu_array_topic"], namespace) if tracker.params["imu_array_topic"] else ""
    )
    imu_index = (
        {} if array_name else {resolve_topic(t, namespace): i for i, t in enumerate(tracker.params["imu_topics"])}
    )
    check_inputs(tracker, topics, namespace)
    length_topic = tracker.params["length_topic"]
    length_name = resolve_topic(length_topic, namespace) if length_topic else None
    truth_tip_name = resolve_topic("truth/tip", namespace)
    shape_writer = ShapeWriter(writer, namespace, tracker.params["marker_rate"])
    truth: dict[int, FloatArray] = {}
    errors = TipErrors()
    estimates: list[ShapeEstimate] = []
    passthrough = {
        truth_tip_name,
        resolve_topic("truth/path", namespace),
        resolve_topic("truth/sensors", namespace),
        "/tf_static",
    }
    lengths: dict[int, float] = {}
    for bm in messages:
        new: list[ShapeEstimate] = []
        if bm.topic in imu_index:
            writer.copy(bm, qos="sensor")
            try:
                stamp, q = msgs.imu_orientation_from_cdr(bm.raw)
            except MessageError:
                try:  # not plain little-endian CDR: let the full decoder judge it
                    stamp, q = msgs.imu_orientation_from_msg(bm.msg)
                except (MessageError, BagError):
                    tracker.stats.bad_samples += 1
                    continue
            except BagError:
                tracker.stats.bad_samples += 1
                continue
            new = tracker.push_orientation(imu_index[bm.topic], stamp, q)
        elif array_name and bm.topic == array_name:  # a sweep: every IMU's orientation at once, as the node takes it
            writer.copy(bm, qos="sensor")
            try:
                sweep = imu_sweep_from_cdr(bm.raw)
            except MessageError:
                try:  # not plain little-endian CDR: let the full decoder judge it
                    sweep = imu_sweep_from_msg(bm.msg)
                except (MessageError, BagError):
                    tracker.stats.bad_samples += 1
                    continue
            except BagError:
                tracker.stats.bad_samples += 1
                continue
            quats, usable = sweep.unit_orientations()
            new = tracker.push_orientations(sweep.stamps_ns, quats, usable, sweep.frame_ids)
        elif length_name is not None and bm.topic == length_name:
            pos = list(bm.msg.position)
            if pos:
                new = tracker.push_length(msgs.stamp_from_msg(bm.msg), float(pos[0]))
                lengths[msgs.stamp_from_msg(bm.msg)] = float(pos[0])
            else:
                tracker.stats.bad_samples += 1
            writer.copy(bm, qos="sensor")
        elif bm.topic in passthrough:
            if bm.topic == truth_tip_name:
                p = bm.msg.pose.position
                truth[msgs.stamp_from_msg(bm.msg)] = np.array([p.x, p.y, p.z])
            writer.copy(bm, qos="static" if bm.topic == "/tf_static" else "default")
        for est in new:
            shape_writer.write(est)
            estimates.append(est)
    for est in tracker.flush():
        shape_writer.write(est)
        estimates.append(est)
    check_made_estimates(tracker)
    if not truth:
        return None
    truth_stamps = np.array(sorted(truth))
    length_stamps = np.array(sorted(lengths)) if lengths else None
    for est in estimates:
        j = int(np.argmin(np.abs(truth_stamps - est.stamp_ns)))
        if abs(int(truth_stamps[j]) - est.stamp_ns) > 20_000_000:
            continue
        if length_stamps is not None:
            k = int(np.argmin(np.abs(length_stamps - est.stamp_ns)))
            length = lengths[int(length_stamps[k])]
        else:
            length = est.length
        errors.add(est.stamp_ns, est.tip_pose[:3, 3], truth[int(truth_stamps[j])], length)
    return errors.metrics()
