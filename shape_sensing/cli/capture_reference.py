"""``shape-sensing capture-reference BAG --at T --out FILE``: the vine robot's straight reference from a recording.

Record the robot fully everted and held straight (``ros2 bag record`` of the
``imu_NN/data`` topics, and ``base/length`` if there is one), then capture the
reference at a time when it was straight. The YAML it writes is what the
``hinge_arc_estimator`` node loads at start (``straight_reference_file``) and
what ``shape-sensing replay --reference FILE`` uses. The node's
``~/offset`` + ``~/save_reference`` services do the same live.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from shape_sensing.demos.common import non_negative_float
from shape_sensing.io.bag import bag_topics, read_bag
from shape_sensing.messages import common as msgs
from shape_sensing.messages.errors import MessageError
from shape_sensing.pipelines.vine_imu import DEFAULT_NAMESPACE, VineImuTracker, _params_from, resolve_topic

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the command."""
    parser.add_argument("bag", type=Path, help="recording of the robot fully everted and held straight")
    parser.add_argument(
        "--at", type=non_negative_float, default=0.0, help="seconds after the first message, >= 0 (default 0)"
    )
    parser.add_argument("--out", type=Path, required=True, help="straight reference YAML to write")
    parser.add_argument("--config", type=Path, default=None, help="hinge_arc_estimator parameter file")
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE, help=f"robot namespace (default {DEFAULT_NAMESPACE})")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out file")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")


def check_output(out: Path, bag: Path, overwrite: bool) -> None:
    """Refuse an ``--out`` that is the input recording (or inside it), a directory, or an existing file without
    ``--overwrite``: before anything is read, so that nothing recorded is lost."""
    target, source = out.resolve(), bag.resolve()
    if target == source or source in target.parents:
        raise ValueError(f"--out {out} is the input recording {bag}; choose another file for the reference")
    if out.is_dir():
        raise ValueError(f"--out {out} is a directory; give the reference's file name (e.g. {out / 'straight.yaml'})")
    if out.exists() and not overwrite:
        raise ValueError(f"--out {out} already exists; choose another file or replace it with --overwrite")


def run(args: argparse.Namespace) -> int:
    """Replay the bag up to the capture, write the reference."""
    if not (math.isfinite(args.at) and args.at >= 0):
        raise ValueError(f"--at {args.at}: expected a time >= 0 (s)")
    check_output(Path(args.out), Path(args.bag), args.overwrite)
    topics = bag_topics(args.bag)
    tracker = VineImuTracker(_params_from(args.config, topics.keys(), args.namespace))
    tracker.capture_at(args.at)
    imu_index = {resolve_topic(t, args.namespace): i for i, t in enumerate(tracker.params["imu_topics"])}
    if not any(t in topics for t in imu_index):
        raise ValueError(f"none of the IMU topics {sorted(imu_index)} is in {args.bag}")
    length_topic = tracker.params["length_topic"]
    length_name = resolve_topic(length_topic, args.namespace) if length_topic else None
    wanted = [*imu_index, *([length_name] if length_name else [])]
    for bm in read_bag(args.bag, wanted):
        if bm.topic in imu_index:
            try:
                tracker.push_imu(imu_index[bm.topic], msgs.imu_from_msg(bm.msg))
            except MessageError:
                tracker.stats.bad_samples += 1
        elif bm.msg.position:
            tracker.push_length(msgs.stamp_from_msg(bm.msg), float(bm.msg.position[0]))
        if tracker.estimator.reference is not None:
            break
    else:
        tracker.flush()
    if tracker.estimator.reference is None:
        raise ValueError(
            f"no straight reference captured from {args.bag} at t = {args.at:g} s: "
            f"{int((tracker.last_ns >= 0).sum())}/{tracker.n} IMUs heard; every used, everted IMU must be fresh at "
            "one tick after that time"
        )
    path = tracker.save_reference(str(args.out))
    ref = tracker.estimator.reference
    result = {"reference": path, "summary": ref.describe(), "not_captured": [
        fid for fid, ok in zip(ref.frame_ids, ref.captured, strict=True) if not ok
    ]}  # fmt: skip
    from shape_sensing.demos.common import print_metrics

    print_metrics(result, args.json, title="straight reference")
    return 0
