"""Vine robot localised from collisions (seed 004): raw base-station, cap and force topics -> pivots and tip.

The same :class:`CollisionTracker` runs in the live demo, in ``shape-sensing replay`` and in the
``collision_pivot_estimator`` node. It steps the estimator on every length message (the base
station's frame rate) with the latest pressure, cap state, heading and force, so a replayed bag
reproduces the live estimates exactly. Inputs older than ``stale_timeout`` at a step are stale:
the force and the cap then count as missing (no contact), the heading and pressure hold.

Topics (relative names under the robot namespace, ``/vine`` by default):

=========================  ===================================  ===========================================
topic                      type                                 content
=========================  ===================================  ===========================================
``base/state``             shape_sensing/BaseStationState       raw frame: counts, pressure, switches (input)
``base/length``            sensor_msgs/JointState               position[0] = grown length, m (input, steps)
``base/pressure``          sensor_msgs/FluidPressure            internal pressure at the base, Pa (input)
``cap/state``              shape_sensing/ContactCapState        switches, contact flag and angle (input)
``cap/imu``                sensor_msgs/Imu                      cap BNO055; heading = yaw (input)
``obstacle/wrench``        geometry_msgs/WrenchStamped          normal force on ``force_axis`` (input)
``P/pivot``                shape_sensing/PivotEstimate          per step: pivot length, pivot, tip
``P/events``               shape_sensing/ContactEvent           contact start/end, pivot candidate/fixed/withdrawn
``P/tip``                  geometry_msgs/PoseStamped            tip in ``vine_base``
``P/path``                 nav_msgs/Path                        tip path so far (``path_rate``)
``P/markers``              visualization_msgs/MarkerArray       estimated body, pivots, tip (``path_rate``)
``/tf``                    tf2_msgs/TFMessage                   ``vine_base`` -> ``vine_tip``
``/diagnostics``           diagnostic_msgs/DiagnosticArray      stale inputs, buckling violated, holds
``truth/tip``, ``truth/pivot``, ``truth/path``, ``truth/obstacles``   simulator ground truth
=========================  ===================================  ===========================================

``P`` is the estimator's ``output_prefix``: ``collision`` (the improved filter) and, in demos and
replay, ``collision_paper`` (the paper's filter as written, tip frame ``vine_tip_paper``).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from shape_sensing.config import load_node_params
from shape_sensing.drivers.contact_cap import heading_from_quaternion
from shape_sensing.estimators.collision_pivot import (
    SCHEMA,
    CollisionPivotConfig,
    CollisionPivotEstimator,
    CollisionSample,
    PivotOutput,
)
from shape_sensing.io.bag import BagMessage, BagWriter
from shape_sensing.io.errors import BagError
from shape_sensing.messages import collision as cmsgs
from shape_sensing.messages import common as msgs
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import MessageFactory
from shape_sensing.messages.growth import pose_stamped_msg
from shape_sensing.pipelines.common import DiagnosticsThrottle, RateThrottle, resolve_topic
from shape_sensing.pipelines.contracts import COLLISION_IMU_TOPIC_RE as IMU_TOPIC_RE
from shape_sensing.pipelines.contracts import COLLISION_NAMESPACE as DEFAULT_NAMESPACE
from shape_sensing.pipelines.contracts import vine_collision_arguments as add_replay_arguments
from shape_sensing.pipelines.contracts import vine_collision_matches as matches
from shape_sensing.types import DiagnosticLevel, DiagnosticStatus, TransformStamped

__all__ = [
    "DEFAULT_NAMESPACE",
    "IMU_TOPIC_RE",
    "INPUT_KINDS",
    "INPUT_TOPICS",
    "NAME",
    "PAPER_PREFIX",
    "CollisionErrors",
    "CollisionMessages",
    "CollisionTracker",
    "add_replay_arguments",
    "feed",
    "input_topics",
    "matches",
    "replay",
]

NAME = "vine-collision"
PAPER_PREFIX = "collision_paper"
PATH_SPACING = 0.02  # m between the points of the published tip path
INPUT_TOPICS: dict[str, str] = {
    "base/state": "shape_sensing/msg/BaseStationState",
    "base/length": "sensor_msgs/msg/JointState",
    "base/pressure": "sensor_msgs/msg/FluidPressure",
    "cap/state": "shape_sensing/msg/ContactCapState",
    "cap/imu": "sensor_msgs/msg/Imu",
    "obstacle/wrench": "geometry_msgs/msg/WrenchStamped",
}
TRUTH_TOPICS: dict[str, str] = {
    "truth/tip": "geometry_msgs/msg/PoseStamped",
    "truth/pivot": "shape_sensing/msg/PivotEstimate",
    "truth/path": "nav_msgs/msg/Path",
    "truth/obstacles": "visualization_msgs/msg/MarkerArray",
}


@dataclass
class _Input:
    stamp_ns: int = -1
    count: int = 0
    stale_steps: int = 0


class CollisionTracker:
    """Latest inputs + one or more estimators stepped on each length message.

    Args:
        params: ``collision_pivot_estimator`` parameters (validated here).
        variants: extra ``output_prefix -> filter`` estimators fed the same samples (demo/replay comparison).
    """

    def __init__(self, params: dict[str, Any], variants: dict[str, str] | None = None) -> None:
        self.params = SCHEMA.validate(params)
        p = self.params
        base = CollisionPivotConfig.from_params(p)
        self.estimators: dict[str, CollisionPivotEstimator] = {p["output_prefix"]: CollisionPivotEstimator(base)}
        for prefix, filt in (variants or {}).items():
            cfg = CollisionPivotConfig(**{**base.__dict__, "filter": filt})
            self.estimators[prefix] = CollisionPivotEstimator(cfg)
        self.stale_ns = round(p["stale_timeout"] * 1e9)
        self.inputs = {k: _Input() for k in ("pressure", "cap", "imu", "wrench")}
        self.pressure = math.nan
        self.cap = (False, False, math.nan)
        self.heading = 0.0
        self.heading_seen = False
        self.force = math.nan
        self.last_length_ns = -1
        self.bad_samples = 0
        self.out_of_order = 0
        self.samples: list[CollisionSample] = []
        self.record = False

    # -- inputs ---------------------------------------------------------------
    def _seen(self, key: str, stamp_ns: int) -> None:
        inp = self.inputs[key]
        inp.stamp_ns = max(inp.stamp_ns, stamp_ns)
        inp.count += 1

    def push_pressure(self, stamp_ns: int, pressure: float) -> None:
        if not math.isfinite(pressure):
            self.bad_samples += 1
            return
        self.pressure = float(pressure)
        self._seen("pressure", stamp_ns)

    def push_cap(self, stamp_ns: int, in_contact: bool, live: bool, angle: float) -> None:
        self.cap = (bool(in_contact), bool(live), float(angle))
        self._seen("cap", stamp_ns)

    def push_heading(self, stamp_ns: int, heading: float) -> None:
        if not math.isfinite(heading):
            self.bad_samples += 1
            return
        self.heading = float(heading)
        self.heading_seen = True
        self._seen("imu", stamp_ns)

    def push_force(self, stamp_ns: int, force: float) -> None:
        if not math.isfinite(force):
            self.bad_samples += 1
            return
        self.force = float(force)
        self._seen("wrench", stamp_ns)

    def _fresh(self, key: str, stamp_ns: int) -> bool:
        inp = self.inputs[key]
        ok = inp.stamp_ns >= 0 and stamp_ns - inp.stamp_ns <= self.stale_ns
        if not ok:
            inp.stale_steps += 1
        return ok

    def push_length(self, stamp_ns: int, length: float) -> dict[str, PivotOutput]:
        """A length reading: one step of every estimator (none for a bad or out-of-order reading)."""
        if not (math.isfinite(length) and length >= 0):
            self.bad_samples += 1
            return {}
        if stamp_ns <= self.last_length_ns:
            self.out_of_order += 1
            return {}
        self.last_length_ns = stamp_ns
        cap_ok = self._fresh("cap", stamp_ns)
        in_contact, live, angle = self.cap if cap_ok else (False, False, self.cap[2])
        force = self.force if self._fresh("wrench", stamp_ns) else math.nan
        self._fresh("pressure", stamp_ns)  # held when stale, but counted
        self._fresh("imu", stamp_ns)
        sample = CollisionSample(stamp_ns, float(length), self.pressure, force, angle, in_contact, live, self.heading)
        if self.record:
            self.samples.append(sample)
        return {prefix: est.update(sample) for prefix, est in self.estimators.items()}

    def diagnostics(self, prefix: str, stamp_ns: int) -> list[DiagnosticStatus]:
        """Health of the inputs and of estimator ``prefix``."""
        est = self.estimators[prefix]
        out = []
        stale = [k for k, inp in self.inputs.items() if inp.stamp_ns < 0 or stamp_ns - inp.stamp_ns > self.stale_ns]
        level = DiagnosticLevel.WARN if stale else DiagnosticLevel.OK
        msg = f"stale: {', '.join(stale)}" if stale else "all inputs fresh"
        values = {f"{k}_stale_steps": str(v.stale_steps) for k, v in self.inputs.items()}
        values |= {"bad_samples": str(self.bad_samples), "out_of_order": str(self.out_of_order)}
        out.append(DiagnosticStatus(f"{prefix}: inputs", level, msg, values=values))
        c = est.counts
        level = DiagnosticLevel.WARN if c["buckling_violations"] else DiagnosticLevel.OK
        msg = (
            f"{c['buckling_violations']} contact samples violated the transverse buckling condition (Eq. 1)"
            if c["buckling_violations"]
            else "transverse buckling condition held"
        )
        if c["held_samples"]:
            msg += f"; contact lost and held for {c['held_samples']} samples"
        values = {k: str(v) for k, v in c.items()}
        drift, var = est.drift.estimate
        values["heading_drift_deg_per_m"] = f"{math.degrees(drift):.4f}"
        values["heading_drift_sigma_deg_per_m"] = f"{math.degrees(math.sqrt(var)):.4f}"
        out.append(DiagnosticStatus(f"{prefix}: estimator", level, msg, values=values))
        return out


# the estimator's inputs: kind -> message type (topics from the ``<kind>_topic`` parameters)
INPUT_KINDS: dict[str, str] = {
    "length": "sensor_msgs/msg/JointState",
    "pressure": "sensor_msgs/msg/FluidPressure",
    "cap": "shape_sensing/msg/ContactCapState",
    "imu": "sensor_msgs/msg/Imu",
    "wrench": "geometry_msgs/msg/WrenchStamped",
}


def feed(tracker: CollisionTracker, kind: str, msg: Any) -> dict[str, PivotOutput]:
    """One received input message of ``kind`` (see :data:`INPUT_KINDS`) into the tracker.

    The one reader of the input messages, shared by the node, the demo and replay. Returns the
    estimator steps it caused (only length messages step).

    Raises:
        MessageError, AttributeError, TypeError, ValueError: a malformed message (callers count it).
    """
    stamp = msgs.stamp_from_msg(msg)
    if kind == "length":
        pos = list(msg.position)
        if not pos:
            tracker.bad_samples += 1
            return {}
        return tracker.push_length(stamp, float(pos[0]))
    if kind == "pressure":
        tracker.push_pressure(stamp, float(msg.fluid_pressure))
    elif kind == "cap":
        tracker.push_cap(stamp, *cmsgs.cap_state_from_msg(msg))
    elif kind == "imu":
        q = msg.orientation
        tracker.push_heading(stamp, heading_from_quaternion((q.x, q.y, q.z, q.w)))
    elif kind == "wrench":
        tracker.push_force(stamp, cmsgs.wrench_from_msg(msg, tracker.params["force_axis"]))
    else:
        raise ValueError(f"input kind {kind!r}: expected one of {list(INPUT_KINDS)}")
    return {}


def input_topics(params: dict[str, Any], namespace: str) -> dict[str, str]:
    """Resolved input topic -> kind."""
    return {resolve_topic(params[f"{k}_topic"], namespace): k for k in INPUT_KINDS}


class CollisionMessages:
    """The messages of one estimator's steps (topics under ``output_prefix``); publisher-agnostic.

    Args:
        tracker: gives diagnostics.
        prefix: the estimator's output prefix.
        factory: message factory (rosbags for bags, rclpy in nodes).
        tip_frame: child frame of the tip transform (``frame_prefix`` applied by the caller).
        diagnostics: status throttle, about 1 Hz by the steps' stamps (naming the node and hardware in a node);
            default: 1 Hz, the core's names.
    """

    def __init__(
        self,
        tracker: CollisionTracker,
        prefix: str,
        factory: MessageFactory,
        tip_frame: str,
        diagnostics: DiagnosticsThrottle | None = None,
    ) -> None:
        p = tracker.params
        self.tracker, self.prefix, self.factory = tracker, prefix, factory
        self.base_frame = p["frame_prefix"] + p["base_frame"]
        self.tip_frame = p["frame_prefix"] + tip_frame
        self.throttle = RateThrottle(p["path_rate"])
        self.diagnostics = diagnostics or DiagnosticsThrottle()
        self.path: list[tuple[float, float]] = []
        self.radius = p["radius"]

    def build(self, out: PivotOutput) -> list[tuple[str, Any]]:
        """``(topic, message)`` pairs of one step."""
        f, frame, pre = self.factory, self.base_frame, self.prefix
        T = cmsgs.planar_pose(out.tip[0], out.tip[1], out.heading)
        if not self.path or math.dist(self.path[-1], out.tip) >= PATH_SPACING:
            self.path.append(out.tip)
        pairs: list[tuple[str, Any]] = [
            (f"{pre}/pivot", cmsgs.pivot_estimate_msg(out, frame, f)),
            (f"{pre}/tip", pose_stamped_msg(out.stamp_ns, frame, T, f)),
            ("/tf", msgs.tf_message([TransformStamped(out.stamp_ns, frame, self.tip_frame, T)], f)),
        ]
        pairs += [(f"{pre}/events", cmsgs.contact_event_msg(e, frame, f)) for e in out.events]
        if self.throttle.ready(out.stamp_ns):
            xy = np.asarray([*self.path, out.tip])
            pts = np.column_stack([xy, np.zeros(len(xy))])
            pairs.append((f"{pre}/path", msgs.path_msg(out.stamp_ns, frame, pts, f)))
            pivots = np.array([(x, y) for x, y, _ in self.tracker.estimators[pre].recon.pivots])
            pairs.append((f"{pre}/markers", cmsgs.collision_markers(
                out.stamp_ns, frame, pivots, out.tip, out.in_contact, ns=pre, radius=self.radius, factory=f)))
        statuses = self.diagnostics.add(out.stamp_ns, self.tracker.diagnostics(pre, out.stamp_ns))
        if statuses is not None:
            pairs.append(("/diagnostics", msgs.diagnostic_array(out.stamp_ns, statuses, f)))
        return pairs  # fmt: skip


@dataclass
class CollisionErrors:
    """Tip and pivot errors of one estimator against ground truth."""

    tip_errors: list[float] = field(default_factory=list)
    lengths: list[float] = field(default_factory=list)
    pivot_errors: list[float] = field(default_factory=list)
    tips: list[tuple[float, float]] = field(default_factory=list)

    def add(self, out: PivotOutput, true_tip: Any, true_length: float, true_pivot_length: float,
            true_in_contact: bool) -> None:  # fmt: skip
        self.tip_errors.append(math.dist(out.tip, (float(true_tip[0]), float(true_tip[1]))))
        self.lengths.append(true_length)
        self.tips.append(out.tip)
        if true_in_contact and out.in_contact:
            self.pivot_errors.append(out.pivot_length - true_pivot_length)

    def metrics(self) -> dict[str, float | int]:
        """Max tip error as % of the final length (the paper's figure), RMSE, pivot bias and mean error."""
        if not self.tip_errors:
            return {"estimates_scored": 0}
        e = np.asarray(self.tip_errors)
        full = max(self.lengths)
        piv = np.asarray(self.pivot_errors)
        return {
            "estimates_scored": len(e),
            "tip_error_max_pct_of_length": float(100.0 * e.max() / full),
            "tip_error_max_cm": float(100.0 * e.max()),
            "tip_rmse_cm": float(100.0 * np.sqrt(np.mean(e**2))),
            "pivot_error_mean_abs_cm": float(100.0 * np.mean(np.abs(piv))) if len(piv) else float("nan"),
            "pivot_error_mean_cm": float(100.0 * np.mean(piv)) if len(piv) else float("nan"),
            "robot_length_m": float(full),
        }


# -- replay ------------------------------------------------------------------


def replay(
    messages: Iterator[BagMessage], writer: BagWriter, config: Path | None, args: argparse.Namespace
) -> dict[str, Any] | None:
    """Re-estimate a vine-collision bag with the improved and the paper's filters.

    ``config``: the estimator's parameter file (``shape-sensing replay`` passes the parameters recorded in
    the bag unless given ``--config`` or ``--ignore-bag-parameters``); ``None``: the defaults.
    """
    namespace = getattr(args, "namespace", DEFAULT_NAMESPACE)
    params = load_node_params(config, SCHEMA) if config is not None else {}
    tracker = CollisionTracker(params, variants={PAPER_PREFIX: "paper"})
    p = tracker.params
    main = p["output_prefix"]
    if main == PAPER_PREFIX:
        raise ValueError(f"output_prefix {main!r} is the paper filter's prefix in replay; choose another")
    writers = {
        main: CollisionMessages(tracker, main, writer.factory, p["tip_frame"]),
        PAPER_PREFIX: CollisionMessages(tracker, PAPER_PREFIX, writer.factory, p["tip_frame"] + "_paper"),
    }
    kinds = input_topics(p, namespace)
    passthrough = {resolve_topic(t, namespace) for t in (*INPUT_TOPICS, *TRUTH_TOPICS)} | {"/tf_static"}
    truth: dict[int, tuple[Any, float, float, bool]] = {}
    errors = {k: CollisionErrors() for k in writers}
    outputs: list[dict[str, PivotOutput]] = []
    truth_pivot_topic = resolve_topic("truth/pivot", namespace)
    for bm in messages:
        new: dict[str, PivotOutput] = {}
        if bm.topic in passthrough:
            writer.copy(bm, qos="static" if bm.topic == "/tf_static" else "default")
        try:
            if bm.topic in kinds:
                new = feed(tracker, kinds[bm.topic], bm.msg)
            elif bm.topic == truth_pivot_topic:
                m = bm.msg
                tp = m.tip.position
                stamp = msgs.stamp_from_msg(m)
                truth[stamp] = ((tp.x, tp.y), float(m.total_length), float(m.pivot_length), bool(m.in_contact))
        except (BagError, MessageError, AttributeError, TypeError, ValueError):
            tracker.bad_samples += 1
            continue
        for prefix, out in new.items():
            for t, msg in writers[prefix].build(out):
                writer.write(resolve_topic(t, namespace), msg, out.stamp_ns)
        if new:
            outputs.append(new)
    if not truth:
        return None
    for step in outputs:
        for prefix, out in step.items():
            tr = truth.get(out.stamp_ns)
            if tr is not None:
                errors[prefix].add(out, *tr)
    return {"filter_" + ("improved" if k == main else "paper"): e.metrics() for k, e in errors.items()}
