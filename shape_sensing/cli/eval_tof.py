"""``shape-sensing eval-tof DIR_OR_BAG``: score a ToF continuum run (seed 001, Table II figures).

Reads ``/truth/shape`` and ``/estimate/shape`` (shape_sensing/ShapeSamples) from a bag, or from the
``tof-continuum.mcap`` inside a demo's output directory, pairs the samples by stamp (within 1 ms) and prints
the translation and rotation MAE and RMSE at every sampled arc length but the base (the rings), each as the
mean and standard deviation across rings.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from shape_sensing.cli.scoring import pose_errors
from shape_sensing.demos.common import print_metrics
from shape_sensing.estimators.continuum.tof_localise import summarise_errors
from shape_sensing.geometry import FloatArray
from shape_sensing.io.bag import read_bag
from shape_sensing.io.errors import BagError
from shape_sensing.messages.tof import shape_samples_from_msg

__all__ = ["add_arguments", "evaluate", "run"]

TRUTH = "/truth/shape"
ESTIMATE = "/estimate/shape"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options."""
    parser.add_argument("path", type=Path, help="a bag (.mcap or rosbag2 directory) or a tof-continuum demo output")
    parser.add_argument("--truth-topic", default=TRUTH, help=f"ground truth topic (default {TRUTH})")
    parser.add_argument("--estimate-topic", default=ESTIMATE, help=f"estimate topic (default {ESTIMATE})")
    parser.add_argument("--json", action="store_true", help="print the metrics as one JSON object")
    parser.add_argument(
        "--reestimate",
        type=Path,
        default=None,
        metavar="MAP",
        help="estimate again from the bag's sensor data against this prior map (.ply/.pcd) and score that",
    )
    parser.add_argument("--no-strain", action="store_true", help="with --reestimate: leave strain out")
    parser.add_argument("--no-gyro", action="store_true", help="with --reestimate: leave the gyroscopes out")
    parser.add_argument(
        "--no-tof", action="store_true", help="with --reestimate: leave the ToF frames out (the map is still read)"
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help="with --reestimate: the estimator's parameter file (continuum_estimator layout, e.g. a copy of "
        "config/continuum_tof.yaml) naming the sensor topics and arc lengths; the ToF mountings come from the "
        "bag's /tf_static. Default: the demo's /tof_rig topic",
    )
    parser.add_argument(
        "--range-convention",
        choices=("perpendicular", "radial"),
        default=None,
        help="with --reestimate: what the ToF distances measure (default: the parameter file's "
        "tof_range_convention, else perpendicular; see docs/robots/tof_real_recording.md)",
    )
    parser.add_argument(
        "--base-registration",
        choices=("fixed", "still"),
        default="fixed",
        help="with --reestimate: the robot's base in the map: fixed where the map's origin is (default; a map made "
        "in the base's frame) or registered from the still start's ToF frames, then again with the whole run's, "
        "with a 5 cm / 5 deg prior (a map made apart from the robot, a base placed by hand)",
    )
    parser.add_argument(
        "--gyro-time-offset",
        choices=("fixed", "estimate"),
        default="fixed",
        help="with --reestimate: the gyroscopes' clock against the ToF sensors': fixed (one clock, default) or "
        "estimate (calibrated from the run against a ToF-only estimate, within +-100 ms; printed with its sigma)",
    )
    parser.add_argument(
        "--still",
        type=float,
        default=None,
        metavar="SECONDS",
        help="with --reestimate: the robot stood still this long from the first sensor stamp (gyroscope bias); "
        "default: the parameter file's gyro_bias_duration, or the demo rig's still period",
    )


def _resolve(path: Path) -> Path:
    if path.is_dir() and not (path / "metadata.yaml").exists():
        cand = path / "tof-continuum.mcap"
        if cand.exists():
            return cand
    return path


def evaluate(path: Path, truth_topic: str = TRUTH, estimate_topic: str = ESTIMATE) -> dict[str, object]:
    """Table II figures of the estimate in a bag against its ground truth."""
    bag = _resolve(Path(path))
    truth: dict[int, tuple[FloatArray, FloatArray]] = {}
    est: dict[int, tuple[FloatArray, FloatArray]] = {}
    for m in read_bag(bag, [truth_topic, estimate_topic]):
        stamp, s, T = shape_samples_from_msg(m.msg)
        (truth if m.topic == truth_topic else est)[stamp] = (s, T)
    if not truth:
        raise BagError(f"{bag} has no ground truth on {truth_topic}: nothing to score against")
    if not est:
        raise BagError(f"{bag} has no estimate on {estimate_topic}")
    ts = np.array(sorted(truth))
    dp_rows, ang_rows = [], []
    s_ref: FloatArray | None = None
    for stamp in sorted(est):
        j = int(np.argmin(np.abs(ts - stamp)))
        if abs(int(ts[j]) - stamp) > 1_000_000:
            continue
        s_t, T_t = truth[int(ts[j])]
        s_e, T_e = est[stamp]
        if s_t.shape != s_e.shape or not np.allclose(s_t, s_e):
            raise BagError(f"{bag}: estimate at {stamp} ns samples arc lengths {s_e} but the truth {s_t}")
        s_ref = s_t
        ring = s_t > 0
        dp_ring, ang_ring = pose_errors(T_e[ring], T_t[ring])
        dp_rows.append(dp_ring)
        ang_rows.append(ang_ring)
    if not dp_rows:
        raise BagError(f"{bag}: no estimate stamp within 1 ms of a ground-truth stamp")
    dp, ang = np.array(dp_rows), np.array(ang_rows)
    out: dict[str, object] = {"bag": str(bag), "samples": len(dp_rows)}
    out.update({k: round(v, 4) for k, v in summarise_errors(dp, ang).items()})
    assert s_ref is not None
    out["ring_s"] = [round(float(v), 4) for v in s_ref[s_ref > 0]]
    out["ring_trans_mae_cm"] = [round(float(v), 3) for v in dp.mean(axis=0) * 100]
    out["ring_rot_mae_deg"] = [round(float(v), 3) for v in np.rad2deg(ang.mean(axis=0))]
    return out


def reestimate(
    path: Path,
    map_path: Path,
    use_strain: bool = True,
    truth_topic: str = TRUTH,
    progress: bool = False,
    config: Path | None = None,
    still: float | None = None,
    range_convention: str | None = None,
    base_registration: str = "fixed",
    use_gyro: bool = True,
    use_tof: bool = True,
    gyro_time_offset: str = "fixed",
) -> dict[str, object]:
    """Estimate again from the sensor data in a bag and score it against the bag's ground truth (``progress``: a
    bar of the solver's iterations on stderr; the estimate takes minutes on a long run). ``config`` and
    ``still``: where the sensors sit and the still start (see
    :func:`~shape_sensing.pipelines.tof_recording.sensor_data_from_bag`); ``range_convention``: what the ToF
    distances measure (``None``: the parameter file's ``tof_range_convention``, else perpendicular);
    ``base_registration``, ``gyro_time_offset``: those of
    :class:`~shape_sensing.estimators.continuum.tof_localise.LocaliseConfig`."""
    from shape_sensing.demos.common import Progress
    from shape_sensing.estimators.continuum.tof_localise import LocaliseConfig, localise, ring_errors
    from shape_sensing.io.maps import load_map
    from shape_sensing.pipelines.tof_recording import sensor_data_from_bag

    bag = _resolve(Path(path))
    truth = {}
    for m in read_bag(bag, [truth_topic]):
        stamp, s, T = shape_samples_from_msg(m.msg)
        truth[stamp] = (s, T)
    if not truth:
        raise BagError(f"{bag} has no ground truth on {truth_topic}: nothing to score against")
    data = sensor_data_from_bag(bag, config, still)
    prior = load_map(map_path)
    with Progress("eval-tof: estimate", 0, enabled=progress, unit="iteration") as bar:
        cfg = LocaliseConfig(
            use_strain=use_strain,
            use_gyro=use_gyro,
            use_tof=use_tof,
            range_convention=range_convention or _convention(config),
            base_registration=base_registration,
            gyro_time_offset=gyro_time_offset,
        )
        res = localise(data, prior, cfg, progress=lambda done, _: bar.update(done))
    stamps = np.array(sorted(truth))
    s_all = truth[int(stamps[0])][0]
    T_all = np.stack([truth[int(k)][1] for k in stamps])
    ring = s_all > 0
    # the truth's stamps on the sensor data's clock (relative to its first sensor stamp; any epoch)
    dp, ang = ring_errors(res.state, (stamps - data.t0_ns) * 1e-9, s_all[ring], T_all[:, ring])
    out: dict[str, object] = {"bag": str(bag), "reestimated": True, "tof_points": res.stats.tof_points}
    share = res.tof_matched_fraction  # NaN without valid ToF points: null in the JSON
    out["tof_matched_fraction"] = round(share, 4) if np.isfinite(share) else None
    out.update({k: round(v, 4) for k, v in summarise_errors(dp, ang).items()})
    if res.registration is not None:
        c = res.registration.correction
        out["base_registration_moved_mm"] = round(1000 * float(np.linalg.norm(c[:3])), 2)
        out["base_registration_moved_deg"] = round(float(np.rad2deg(np.linalg.norm(c[3:]))), 3)
        out["base_registration_points"] = res.registration.points
    if res.gyro_time_offset is not None:
        out["gyro_time_offset_ms"] = round(1e3 * res.gyro_time_offset.offset, 2)
        out["gyro_time_offset_sigma_ms"] = round(1e3 * res.gyro_time_offset.sigma, 2)
    return out


def _convention(config: Path | None) -> str:
    """The parameter file's ``tof_range_convention`` (perpendicular without one)."""
    if config is None:
        return "perpendicular"
    from shape_sensing.config import load_node_params
    from shape_sensing.pipelines.continuum_tracker import SCHEMA

    # the file's value (checked against the node's choices), else the node's default
    return str({**SCHEMA.defaults(), **load_node_params(Path(config), SCHEMA)}["tof_range_convention"])


def _watched() -> bool:
    import sys

    return sys.stderr.isatty()


def run(args: argparse.Namespace) -> int:
    """CLI entry."""
    if args.reestimate is not None:
        if args.no_strain and args.no_gyro and args.no_tof:
            raise ValueError("--no-strain, --no-gyro and --no-tof together leave nothing to estimate from")
        if args.no_tof and args.base_registration == "still":
            raise ValueError(
                "--base-registration still registers the ToF frames to the map; it cannot go with --no-tof"
            )
        if args.gyro_time_offset == "estimate" and (args.no_gyro or args.no_tof):
            raise ValueError("--gyro-time-offset estimate lays the gyroscopes on the ToF frames: it needs both")
        if not args.reestimate.is_file():
            raise ValueError(f"--reestimate {args.reestimate}: no such map file (.ply/.pcd)")
        if args.config is not None and not args.config.is_file():
            raise ValueError(f"--config {args.config}: no such parameter file")
        if args.still is not None and not (np.isfinite(args.still) and args.still >= 0):
            raise ValueError(f"--still {args.still}: expected a finite time >= 0 (s)")
        metrics = reestimate(
            args.path, args.reestimate, not args.no_strain, args.truth_topic, progress=not args.json or _watched(),
            config=args.config, still=args.still, range_convention=args.range_convention,
            base_registration=args.base_registration, use_gyro=not args.no_gyro, use_tof=not args.no_tof,
            gyro_time_offset=args.gyro_time_offset,
        )  # fmt: skip
    else:
        if args.base_registration != "fixed" or args.gyro_time_offset != "fixed":
            raise ValueError("--base-registration and --gyro-time-offset apply to --reestimate MAP only (the bag's own "
                             "estimate is scored)")  # fmt: skip
        if args.no_gyro or args.no_tof or args.no_strain:
            raise ValueError("--no-strain, --no-gyro and --no-tof apply to --reestimate MAP only")
        metrics = evaluate(args.path, args.truth_topic, args.estimate_topic)
    print_metrics(metrics, args.json, title="eval-tof")
    return 0
