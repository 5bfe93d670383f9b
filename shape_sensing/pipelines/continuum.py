"""Continuum-robot pipeline: gyro and pose-sensor bags re-estimated by the sliding-window tracker.

Inputs (relative names under ``--continuum-namespace``, default ``/continuum``;
the names and arc lengths come from the ``continuum_estimator`` parameter file
given with ``--config``, the package's ``config/continuum_estimator.yaml`` by
default): ``gyro_topics`` (sensor_msgs/Imu, angular velocity in the backbone
frame) and ``pose_topics`` (geometry_msgs/PoseWithCovarianceStamped, the
backbone frame in the base frame). This is what ``continuum_estimator.launch.xml
record:=true`` records, and what ``eval-continuum`` writes beside its estimate
(with the parameter file that matches it).

Outputs: the inputs, copied, and the node's topics for every slice leaving the
window: ``/tf``, ``shape/path``, ``shape/tip`` (Laplace covariance) and
``shape/markers`` (at ``marker_rate``). Estimate topics already in the input bag
are not copied: they are what is re-estimated. Ground truth topics
(``truth/...`` under the namespace, and ``/truth/...``) are copied unchanged;
no metrics are computed here (``eval-continuum`` scores the dataset's trials).
Where the truth is a shape_sensing/ShapeSamples topic (the ToF demo's
``/truth/shape``), the estimate is also written as ShapeSamples on
``/estimate/shape`` at the truth's stamps and arc lengths (the window's
finalised slices, interpolated in time by the GP prior), which
``shape-sensing eval-tof OUT`` scores.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from shape_sensing.config import Schema, load_node_params
from shape_sensing.io.bag import BagMessage, BagWriter
from shape_sensing.io.errors import BagError
from shape_sensing.messages import common as msgs
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.strain import strain_from_float64_multiarray, strain_from_msg
from shape_sensing.messages.tof import tof_frame_from_msg
from shape_sensing.pipelines.common import resolve_topic
from shape_sensing.pipelines.continuum_tracker import SCHEMA, ContinuumMessages, ContinuumTracker
from shape_sensing.pipelines.contracts import CONTINUUM_NAMESPACE as DEFAULT_NAMESPACE
from shape_sensing.pipelines.contracts import continuum_arguments as add_replay_arguments
from shape_sensing.pipelines.contracts import continuum_matches as matches
from shape_sensing.pipelines.input_stage import LIVE_PARAMS

#: The node's parameters: the estimator's and those of the live input stage (unused by replay).
NODE_SCHEMA = Schema(SCHEMA.node, SCHEMA.params + LIVE_PARAMS, SCHEMA.description)

__all__ = [
    "DEFAULT_CONFIG",
    "DEFAULT_NAMESPACE",
    "NAME",
    "NODE_SCHEMA",
    "add_replay_arguments",
    "default_config",
    "matches",
    "replay",
]

NAME = "continuum"
#: The package's parameter file (the real robot of the space_time_continuum dataset), in a source tree.
DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "config" / "continuum_estimator.yaml"


def default_config() -> Path | None:
    """The package's ``continuum_estimator.yaml``: from the ROS 2 install (ament index) or the source tree."""
    try:
        from ament_index_python.packages import get_package_share_directory

        shared = Path(get_package_share_directory("shape_sensing")) / "config" / "continuum_estimator.yaml"
        if shared.is_file():
            return shared
    except Exception:  # no ROS 2 here, or the package is not installed in a workspace
        pass
    return DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None


_log = logging.getLogger(__name__)
_POSE = "geometry_msgs/msg/PoseWithCovarianceStamped"
_IMU = "sensor_msgs/msg/Imu"


def _params(config: Path | None) -> tuple[dict[str, Any], str]:
    """The node parameters, and where they come from."""
    if config is not None:
        if not config.is_file():
            raise ValueError(f"continuum pipeline: parameter file {config} does not exist")
        return load_node_params(config, SCHEMA), str(config)
    found = default_config()
    if found is None:
        _log.warning("continuum pipeline: no --config and no package parameter file: the node's defaults")
        return {}, "the node's defaults"
    return load_node_params(found, SCHEMA), str(found)


def replay(
    messages: Iterator[BagMessage], writer: BagWriter, config: Path | None, args: argparse.Namespace
) -> dict[str, Any] | None:
    """Re-estimate a continuum bag (topics in the module docstring); returns ``None`` (no metrics)."""
    topics: dict[str, str] | None = getattr(args, "bag_topics", None)
    ns = getattr(args, "continuum_namespace", DEFAULT_NAMESPACE)
    params, source = _params(config)
    tracker = ContinuumTracker(params)
    p = tracker.params
    gyro_index = {resolve_topic(t, ns): i for i, t in enumerate(p["gyro_topics"])}
    pose_index = {resolve_topic(t, ns): i for i, t in enumerate(p["pose_topics"])}
    tof_index = {resolve_topic(t, ns): i for i, t in enumerate(p["tof_topics"])}
    if topics is not None:
        for index, kind in ((gyro_index, _IMU), (pose_index, _POSE)):
            wrong = {t: topics[t] for t in index if t in topics and topics[t] != kind}
            if wrong:
                raise ValueError(f"continuum pipeline: topics {wrong} are not {kind}")
        if not any(t in topics for t in (*gyro_index, *pose_index, *tof_index)):
            raise ValueError(
                f"none of the configured topics {sorted(gyro_index) + sorted(pose_index)} is in the bag "
                f"(namespace {ns!r}; the topics and their arc lengths come from --config)"
            )
        unused = sorted(
            t for t, ty in topics.items() if ty in (_IMU, _POSE) and "/shape/" not in t and t not in gyro_index
            and t not in pose_index
        )  # fmt: skip
        if unused:
            _log.warning(
                "sensor topics in the bag that the parameters (%s) do not use: %s; is it the robot's parameter file?",
                source, ", ".join(unused),
            )  # fmt: skip
    builder = ContinuumMessages(writer.factory, p["frame_prefix"], p["marker_rate"])
    truth_prefix = resolve_topic("truth/", ns)
    sampler = _TruthSampler(tracker, writer, p["frame_prefix"] + p["base_frame"])
    strain_topic = resolve_topic(p["strain_topic"], ns) if p["strain_topic"] else None
    map_written = False
    for bm in messages:
        if tracker.tof_map is not None and not map_written:
            topic, m = builder.prior_map(bm.stamp_ns, p["frame_prefix"] + p["base_frame"], tracker.tof_map)
            writer.write(resolve_topic(topic, ns), m, bm.stamp_ns, qos="static")
            map_written = True
        if bm.topic in tof_index:
            writer.copy(bm, qos="sensor")
            try:
                stamp, _, distance, status = tof_frame_from_msg(bm.msg)
            except (AttributeError, TypeError, ValueError, BagError):
                tracker.stats.skipped_bad += 1
                continue
            new = tracker.push_tof(tof_index[bm.topic], stamp, distance, status)
        elif bm.topic == strain_topic:
            writer.copy(bm, qos="sensor")
            try:
                if bm.msgtype == "std_msgs/msg/Float64MultiArray":  # recordings before StrainArray
                    s_, th, ka = strain_from_float64_multiarray(bm.msg.data)
                    stamp, ok = bm.stamp_ns, None
                else:
                    stamp, s_, th, ka, ok = strain_from_msg(bm.msg)
            except (AttributeError, MessageError, BagError):
                tracker.stats.skipped_bad += 1
                continue
            new = tracker.push_strain(stamp, s_, th, ka, ok)
        elif bm.topic in gyro_index:
            writer.copy(bm, qos="sensor")
            try:
                sample = msgs.imu_from_msg(bm.msg)
            except (MessageError, BagError):
                tracker.stats.skipped_bad += 1
                continue
            new = tracker.push_gyro(gyro_index[bm.topic], sample.stamp_ns, sample.angular_velocity)
        elif bm.topic in pose_index:
            writer.copy(bm, qos="sensor")
            try:
                T = msgs.pose_to_matrix(bm.msg.pose.pose)
                stamp = msgs.stamp_from_msg(bm.msg)
            except (ValueError, AttributeError, BagError):  # zero or non-finite quaternion, not a pose
                tracker.stats.skipped_bad += 1
                continue
            new = tracker.push_pose(pose_index[bm.topic], stamp, T)
        else:
            if bm.topic.startswith((truth_prefix, "/truth/")) or bm.topic == "/tf_static":
                writer.copy(bm)
                if bm.msgtype == _SAMPLES:
                    sampler.add(bm)
            continue
        first = len(tracker.window.final_t) - len(new) if tracker.window is not None else 0
        for j, est in enumerate(new):
            rec = tracker.pop_reconstruction(first + j)
            for topic, m in builder.build(est, tracker.tip_covariance(first + j), rec):
                writer.write(resolve_topic(topic, ns), m, est.stamp_ns)
            sampler.finalised(first + j)
    return None


_SAMPLES = "shape_sensing/msg/ShapeSamples"
#: where the estimate at the ground truth's stamps goes (``shape-sensing eval-tof``'s default estimate topic)
ESTIMATE_SAMPLES_TOPIC = "/estimate/shape"


class _TruthSampler:
    """The window's estimate at the ground truth's stamps and arc lengths, written as ShapeSamples once the slices
    around each stamp are final (the GP's interpolation between them, as the batch estimate is scored)."""

    def __init__(self, tracker: ContinuumTracker, writer: BagWriter, frame: str) -> None:
        self.tracker, self.writer, self.frame = tracker, writer, frame
        self.pending: list[tuple[int, Any]] = []  # (stamp_ns, arc lengths) of truth samples not yet estimated

    def add(self, bm: BagMessage) -> None:
        from shape_sensing.messages.tof import shape_samples_from_msg

        try:
            stamp, s, _ = shape_samples_from_msg(bm.msg)
        except (AttributeError, MessageError, ValueError):
            return
        if s.size and np.all(np.isfinite(s)) and s.min() >= 0.0 and s.max() <= self.tracker.params["length"] + 1e-9:
            self.pending.append((stamp, s))

    def finalised(self, i: int) -> None:
        """Slice ``i`` is final: every pending truth stamp from it up to the next slice is estimated."""
        from shape_sensing.estimators.continuum.model import GridState
        from shape_sensing.estimators.continuum.query import query_poses
        from shape_sensing.messages.tof import shape_samples_msg

        win, tr = self.tracker.window, self.tracker
        if win is None or tr.t0_ns is None or not self.pending:
            return
        t0 = float(win.final_t[i])
        if i + 1 < len(win.final_t):
            nxt = (win.final_t[i + 1], win.final_T[i + 1], win.final_eps[i + 1], win.final_varpi[i + 1])
        else:
            nxt = (float(win.state.t[0]), win.state.T[0], win.state.eps[0], win.state.varpi[0])
        two = GridState(
            np.array([t0, float(nxt[0])]),
            tr.s_nodes,
            np.stack([win.final_T[i], nxt[1]]),
            np.stack([win.final_eps[i], nxt[2]]),
            np.stack([win.final_varpi[i], nxt[3]]),
        )
        keep = []
        for stamp, s in self.pending:
            t = float((Fraction(stamp) - tr._t0) / 10**9)
            if t < t0:  # before the first slice (the still start): never estimated
                continue
            if t >= float(nxt[0]):
                keep.append((stamp, s))
                continue
            T = query_poses(two, np.full(s.size, t), s)
            msg = shape_samples_msg(stamp, self.frame, "continuum_window", s, T, None, self.writer.factory)
            self.writer.write(ESTIMATE_SAMPLES_TOPIC, msg, stamp)
        self.pending = keep
