"""``shape-sensing calibrate-base-station``: metres per encoder count from tape-measured growth trials.

Each trial: note the base station's ``encoder_counts`` (``ros2 topic echo /vine/base/state --field
encoder_counts``), grow the robot about a metre, measure the grown length with a tape, note the counts
again. Give the trials as ``--trial BEFORE AFTER METRES`` (three or more recommended); the least-squares
metres per count and the RMS residual are printed, with the line for ``config/vine_collision.yaml``.
"""

from __future__ import annotations

import argparse
import json
import math

from shape_sensing.demos.common import positive_float
from shape_sensing.drivers.base_station import calibrate_metres_per_count

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``calibrate-base-station``."""
    parser.add_argument("--trial", nargs=3, action="append", required=True, metavar=("BEFORE", "AFTER", "METRES"),
                        help="encoder counts before and after growing, and the grown length measured (m)")  # fmt: skip
    parser.add_argument(
        "--max-residual",
        type=positive_float,
        default=0.05,
        help="largest residual of a trial, as a fraction of its measured length, before the trials are refused as "
        "inconsistent (default 0.05: 5 %%)",
    )
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")


def run(args: argparse.Namespace) -> int:
    """CLI entry."""
    try:
        before = [int(t[0]) for t in args.trial]
        after = [int(t[1]) for t in args.trial]
        lengths = [float(t[2]) for t in args.trial]
    except ValueError as exc:
        raise ValueError(f"--trial expects BEFORE AFTER (integer counts) and METRES (a number): {exc}") from None
    mpc, rms = calibrate_metres_per_count(before, after, lengths)
    if not (math.isfinite(args.max_residual) and args.max_residual > 0):
        raise ValueError(f"--max-residual {args.max_residual}: expected a fraction > 0")
    # trials that disagree (a typo, counts of another robot, a slipping spool): a fit through them means nothing
    off = [
        (i, (a - b) * mpc - m, m)
        for i, (b, a, m) in enumerate(zip(before, after, lengths, strict=True))
        if abs((a - b) * mpc - m) > args.max_residual * m
    ]
    if off:
        listing = "; ".join(
            f"trial {i + 1}: {m:g} m measured, {m + r:.4g} m fitted ({(m / (after[i] - before[i])):.6g} m/count)"
            for i, r, m in off
        )
        raise ValueError(
            f"the trials disagree (RMS residual {rms:.3g} m, fit {mpc:.6g} m/count): {listing}; above "
            f"--max-residual {args.max_residual:g} of the length. Check those trials' counts and lengths"
        )
    if args.json:
        print(json.dumps({"metres_per_count": mpc, "rms_residual_m": rms, "trials": len(lengths)}))
        return 0
    print(f"metres_per_count: {mpc:.9g}   # {len(lengths)} trials, RMS residual {rms * 1000:.2f} mm")
    return 0
