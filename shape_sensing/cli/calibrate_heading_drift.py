"""``shape-sensing calibrate-heading-drift``: the cap heading's drift per metre grown, from a straight growth.

Record the robot growing straight, with nothing touching it (``ros2 bag record /vine/base/length
/vine/cap/imu``, a metre or more of growth). The body does not turn, so the cap's yaw changes only by
its drift: the command fits the yaw against the grown length (least squares, free intercept) and
prints ``heading_drift_per_metre`` (rad/m) for ``config/vine_collision.yaml`` with its standard
deviation. A yaw that does not follow a line (residual scatter more than twice the heading noise)
means the growth was not straight: the command says so and exits non-zero. The online estimator
uses this value as the prior of its own drift estimate (``heading_drift_prior_sigma``).
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import sys
from pathlib import Path

from shape_sensing.drivers.contact_cap import heading_from_quaternion
from shape_sensing.estimators.heading_drift import fit_heading_drift
from shape_sensing.io.bag import read_bag
from shape_sensing.io.errors import BagError
from shape_sensing.messages import common as msgs
from shape_sensing.messages.errors import MessageError
from shape_sensing.pipelines.common import resolve_topic

__all__ = ["add_arguments", "read_straight_growth", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``calibrate-heading-drift``."""
    parser.add_argument("bag", type=Path, help="a recorded straight growth (rosbag2 directory or .mcap)")
    parser.add_argument("--namespace", default="/vine", help="robot namespace of the topics (default /vine)")
    parser.add_argument("--length-topic", default="base/length", help="sensor_msgs/JointState, position[0] = grown "
                        "length, m (default base/length)")  # fmt: skip
    parser.add_argument("--imu-topic", default="cap/imu", help="sensor_msgs/Imu of the cap (default cap/imu)")
    parser.add_argument("--heading-noise", type=float, default=0.5,
                        help="heading noise of the cap IMU, deg 1 sigma (default 0.5)")  # fmt: skip
    parser.add_argument("--min-growth", type=float, default=0.3, help="least growth to accept, m (default 0.3)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")


def read_straight_growth(
    bag: Path, length_topic: str, imu_topic: str
) -> tuple[list[float], list[float], dict[str, int]]:
    """``(grown lengths, headings, counts)``: each heading paired with the length interpolated at its stamp.

    Headings before the first or after the last length reading are left out; undecodable or malformed
    messages are counted (``bad``) and skipped.
    """
    counts = {"length": 0, "imu": 0, "bad": 0, "paired": 0}
    length_t: list[int] = []
    length_v: list[float] = []
    imu: list[tuple[int, float]] = []
    for bm in read_bag(bag, [length_topic, imu_topic]):
        try:
            m = bm.msg
            stamp = msgs.stamp_from_msg(m)
            if bm.topic == length_topic:
                value = float(m.position[0])
                if not math.isfinite(value) or (length_t and stamp <= length_t[-1]):
                    raise ValueError("bad or out-of-order length")
                length_t.append(stamp)
                length_v.append(value)
                counts["length"] += 1
            else:
                q = m.orientation
                h = heading_from_quaternion((q.x, q.y, q.z, q.w))
                if not math.isfinite(h):
                    raise ValueError("bad orientation")
                imu.append((stamp, h))
                counts["imu"] += 1
        except (BagError, MessageError, AttributeError, IndexError, TypeError, ValueError):
            counts["bad"] += 1
    lengths, headings = [], []
    for stamp, h in imu:
        i = bisect.bisect_left(length_t, stamp)
        if i == len(length_t) or (i == 0 and length_t[0] != stamp):
            continue
        if length_t[i] == stamp:
            value = length_v[i]
        else:
            t0, t1 = length_t[i - 1], length_t[i]
            value = length_v[i - 1] + (length_v[i] - length_v[i - 1]) * (stamp - t0) / (t1 - t0)
        lengths.append(value)
        headings.append(h)
    counts["paired"] = len(lengths)
    return lengths, headings, counts


def run(args: argparse.Namespace) -> int:
    """CLI entry."""
    if not (math.isfinite(args.heading_noise) and args.heading_noise > 0):
        raise ValueError(f"--heading-noise {args.heading_noise}: expected a positive number of degrees")
    length_topic = resolve_topic(args.length_topic, args.namespace)
    imu_topic = resolve_topic(args.imu_topic, args.namespace)
    lengths, headings, counts = read_straight_growth(args.bag, length_topic, imu_topic)
    if counts["length"] == 0 or counts["imu"] == 0:
        raise ValueError(f"{args.bag}: {counts['length']} messages on {length_topic} and {counts['imu']} on "
                         f"{imu_topic}: a straight growth needs both (see --namespace, --length-topic, "
                         "--imu-topic)")  # fmt: skip
    growth = max(lengths) - min(lengths) if lengths else 0.0
    if growth < args.min_growth:
        raise ValueError(f"{args.bag}: the robot grew {growth:.3f} m while the cap IMU was recorded; the fit needs "
                         f"at least --min-growth {args.min_growth} m")  # fmt: skip
    noise = math.radians(args.heading_noise)
    fit = fit_heading_drift(lengths, headings, noise, straightness=4.0)
    result = {
        "heading_drift_per_metre": fit.drift_per_metre,
        "sigma_per_metre": fit.sigma,
        "heading_drift_deg_per_m": math.degrees(fit.drift_per_metre),
        "sigma_deg_per_m": math.degrees(fit.sigma),
        "residual_rms_deg": math.degrees(fit.residual_rms),
        "growth_m": growth,
        "straight": fit.straight,
        **counts,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"heading_drift_per_metre: {fit.drift_per_metre:.6g}   # rad/m = {math.degrees(fit.drift_per_metre):.3f} "
              f"+- {math.degrees(fit.sigma):.3f} deg/m over {growth:.2f} m, {fit.samples} headings, residual RMS "
              f"{math.degrees(fit.residual_rms):.2f} deg")  # fmt: skip
        if counts["bad"]:
            print(f"  {counts['bad']} malformed messages skipped")
    if not fit.straight:
        print(f"shape-sensing: error: the heading scatters {math.degrees(fit.residual_rms):.2f} deg RMS about the "
              f"fitted line, more than twice the heading noise ({args.heading_noise} deg): the growth was not "
              "straight (or --heading-noise is too small); the drift above is not a calibration",
              file=sys.stderr)  # fmt: skip
        return 1
    return 0
