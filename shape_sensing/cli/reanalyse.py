"""``shape-sensing reanalyse BAG --out DIR``: the seed 000 analyses of a vine-IMU recording, per sensor subset.

The recording is read and decoded once (:mod:`shape_sensing.pipelines.vine_imu_bulk`);
every subset then runs the hinge-arc estimator at every publishing tick,
exactly as the node or ``replay`` would with that subset configured. Results:

* tip error against sensor spacing (one row per subset),
* tip error against grown length (robot length bins),
* per-sensor drift over time: the angle between each IMU's orientation (in the
  base frame, after offsetting) and the truth's (``truth/sensors``), or, with
  ``--straight T0:T1`` windows in which the robot was straight, the angle of
  each sensor's backbone frame from the base frame; a line fitted over time
  gives deg/min.

Scoring: against ``truth/tip`` when the bag has it, or against the
``geometry_msgs/PoseStamped`` topic named by ``--reference`` (a tip position
in the estimator's base frame, e.g. from motion capture), each estimate
matched with the reference stamp nearest its own within ``--max-dt``.
Tables are printed (or one JSON object with ``--json``) and written with the
plots to ``--out``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from shape_sensing.cli.scoring import nearest
from shape_sensing.demos.common import DemoOutputs, Progress, positive_float, positive_int
from shape_sensing.estimators.hinge_arc import SCHEMA
from shape_sensing.geometry import quat_to_matrix, rotation_angle
from shape_sensing.io.bag import PARAMETERS_KEY, bag_metadata, bag_topics
from shape_sensing.io.bag_bulk import read_topics
from shape_sensing.pipelines.common import resolve_topic
from shape_sensing.pipelines.vine_imu import (
    DEFAULT_NAMESPACE,
    IMU_TOPIC_RE,
    VineImuTracker,
    _params_from,
    apply_recorded_reference,
)
from shape_sensing.pipelines.vine_imu_bulk import _decode, _truth, decode_inputs, estimates, tick_states

__all__ = ["Subset", "add_arguments", "parse_subsets", "reanalyse", "run"]

POSE_STAMPED = "geometry_msgs/msg/PoseStamped"


@dataclass(frozen=True)
class Subset:
    """A sensor subset: every k-th sensor, or an explicit list of sensor indices."""

    label: str
    every_k: int = 1
    sensors: tuple[int, ...] = ()

    def params(self) -> dict[str, Any]:
        return {"every_k": self.every_k, "use_sensors": list(self.sensors)}


def parse_subsets(specs: list[str] | None, n_sensors: int) -> list[Subset]:
    """``every-k=1..6``, ``every-k=1,2,4`` or an explicit comma list of sensor indices (per ``--subsets``).

    Raises:
        ValueError: a malformed spec, or a sensor index the recording does not have.
    """
    if not specs:
        specs = ["every-k=1..6"]
    out: list[Subset] = []
    for spec in specs:
        text = spec.strip()
        m = re.fullmatch(r"every-k=(\d+)\.\.(\d+)", text)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if lo < 1 or hi < lo:
                raise ValueError(f"--subsets {spec!r}: expected every-k=A..B with 1 <= A <= B")
            out += [Subset(f"every-k={k}", every_k=k) for k in range(lo, hi + 1)]
            continue
        m = re.fullmatch(r"every-k=(\d+(?:,\d+)*)", text)
        if m:
            ks = [int(k) for k in m.group(1).split(",")]
            if min(ks) < 1:
                raise ValueError(f"--subsets {spec!r}: every-k values must be >= 1")
            out += [Subset(f"every-k={k}", every_k=k) for k in ks]
            continue
        if not re.fullmatch(r"\d+(?:,\d+)*", text):
            raise ValueError(
                f"--subsets {spec!r}: expected every-k=A..B, every-k=A,B,... or a comma list of sensor indices"
            )
        idx = tuple(int(i) for i in text.split(","))
        bad = [i for i in idx if i >= n_sensors]
        if bad:
            raise ValueError(
                f"--subsets {spec!r}: sensor(s) {bad} do not exist; the recording has IMUs 0..{n_sensors - 1}"
            )
        if len(set(idx)) != len(idx):
            raise ValueError(f"--subsets {spec!r}: a sensor is listed twice")
        out.append(Subset("sensors=" + ",".join(map(str, sorted(idx))), sensors=tuple(sorted(idx))))
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``reanalyse``."""
    parser.add_argument("input", type=Path, help="vine-IMU recording: rosbag2 directory or .mcap file")
    parser.add_argument("--out", type=Path, required=True, help="directory for the tables (JSON) and plots")
    parser.add_argument(
        "--subsets",
        action="append",
        default=None,
        help="sensor subsets: every-k=A..B, every-k=A,B,... or a comma list of sensor indices (repeatable; "
        "default every-k=1..6)",
    )
    parser.add_argument("--reference", default=None, help="geometry_msgs/PoseStamped tip topic to score against")
    parser.add_argument(
        "--max-dt", type=positive_float, default=0.02, help="stamp matching tolerance, s > 0 (default 0.02)"
    )
    parser.add_argument(
        "--straight",
        action="append",
        default=None,
        metavar="T0:T1",
        help="a time window (s from the first stamped input) in which the robot was straight: drift from it",
    )
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help="estimator parameter file (ROS 2 YAML layout; default: the parameters recorded in the bag, as replay)",
    )
    parser.add_argument(
        "--ignore-bag-parameters",
        action="store_true",
        help="without --config: the estimator's defaults instead of the parameters recorded in the bag",
    )
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE, help="robot namespace (default /vine)")
    parser.add_argument(
        "--length-bins", type=positive_int, default=8, help="robot-length bins of the length table, >= 1 (default 8)"
    )
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")


def _windows(specs: list[str] | None) -> list[tuple[float, float]]:
    out = []
    for spec in specs or []:
        m = re.fullmatch(r"\s*([0-9.eE+-]+)\s*:\s*([0-9.eE+-]+)\s*", spec)
        if not m or not float(m.group(1)) < float(m.group(2)):
            raise ValueError(f"--straight {spec!r}: expected T0:T1 in seconds with T0 < T1")
        out.append((float(m.group(1)), float(m.group(2))))
    return out


def _recorded_params(text: str) -> dict[str, Any]:
    """The estimator's parameters from the parameter file text recorded in a bag."""
    import tempfile

    from shape_sensing.config import load_node_params

    with tempfile.TemporaryDirectory(prefix="shape-sensing-") as tmp:
        path = Path(tmp) / f"{SCHEMA.node}.params.yaml"
        path.write_text(text)
        return load_node_params(path, SCHEMA)


def _reference(arrays: dict[str, Any], topic: str) -> tuple[np.ndarray, np.ndarray]:
    """Sorted stamps and tip positions of a PoseStamped topic (the last message of a repeated stamp)."""
    return _truth(arrays[topic])


def reanalyse(
    bag: Path,
    *,
    subsets: list[str] | None = None,
    reference: str | None = None,
    max_dt: float = 0.02,
    straight: list[str] | None = None,
    config: Path | None = None,
    namespace: str = DEFAULT_NAMESPACE,
    length_bins: int = 8,
    progress: bool = True,
    bag_parameters: bool = True,
) -> dict[str, Any]:
    """Run the analyses; returns the tables (see the module docstring).

    Without ``config`` the estimator runs with the parameters and the straight reference recorded in the bag (as
    ``replay`` and the node that recorded it did), unless ``bag_parameters`` is false.

    Raises:
        ValueError: no IMU topics, a reference topic that is missing or not a PoseStamped, bad subsets, bad
        ``max_dt`` or ``length_bins``, nothing scored against a reference that is there.
    """
    if not (math.isfinite(max_dt) and max_dt > 0):
        raise ValueError(f"--max-dt {max_dt}: expected a stamp matching tolerance > 0 (s)")
    if length_bins < 1:
        raise ValueError(f"--length-bins {length_bins}: expected an integer >= 1")
    topics = bag_topics(bag)
    imu_in_bag = [t for t, ty in topics.items() if IMU_TOPIC_RE.search(t) and ty == "sensor_msgs/msg/Imu"]
    if not imu_in_bag:
        listing = ", ".join(f"{t} [{ty}]" for t, ty in sorted(topics.items())) or "no topics"
        raise ValueError(f"{bag} holds no vine IMU topics (*/imu_NN/data, sensor_msgs/Imu); it has: {listing}")
    if reference is not None:
        if reference not in topics:
            raise ValueError(f"--reference {reference}: no such topic in {bag} (topics: {', '.join(sorted(topics))})")
        if topics[reference] != POSE_STAMPED:
            raise ValueError(f"--reference {reference} is {topics[reference]}; expected {POSE_STAMPED}")
    windows = _windows(straight)
    meta = bag_metadata(bag)
    recorded = meta.get(PARAMETERS_KEY.format(node=SCHEMA.node)) if config is None and bag_parameters else None
    if recorded is not None:
        base = SCHEMA.validate(_recorded_params(recorded), where=f"the parameters recorded in {bag}")
        parameters = "recorded in the bag"
    else:
        base = SCHEMA.validate(_params_from(config, topics.keys(), namespace))
        parameters = str(config) if config is not None else "defaults"
    recorded_reference = argparse.Namespace(bag_metadata=meta) if config is None and bag_parameters else None
    n = len(base["imu_topics"])
    chosen = parse_subsets(subsets, n)
    imu_names = [resolve_topic(t, namespace) for t in base["imu_topics"]]
    if not any(t in topics for t in imu_names):
        raise ValueError(f"none of the configured IMU topics {sorted(imu_names)} is in {bag}")
    length_name = resolve_topic(base["length_topic"], namespace) if base["length_topic"] else None
    truth_tip = resolve_topic("truth/tip", namespace)
    truth_sensors = resolve_topic("truth/sensors", namespace)
    wanted = [*imu_names, *([length_name] if length_name else []), truth_tip, truth_sensors]
    if reference:
        wanted.append(reference)
    bar = Progress("reanalyse: read", 1.0, enabled=progress)
    arrays = read_topics(bag, wanted, bar.update)
    inputs = decode_inputs(arrays, imu_names, length_name, truth_tip)
    if reference:
        ref_stamps, ref_tips, scored_by = (*_reference(arrays, reference), reference)
    elif len(inputs.truth_stamps):
        ref_stamps, ref_tips, scored_by = inputs.truth_stamps, inputs.truth_tips, truth_tip
    else:
        ref_stamps, ref_tips, scored_by = np.zeros(0, dtype=np.int64), np.zeros((0, 3)), None
    states = None
    rows: list[dict[str, Any]] = []
    per_subset: dict[str, dict[str, Any]] = {}
    drift: dict[str, Any] | None = None
    t_start = None
    for s_i, sub in enumerate(chosen):
        tracker = VineImuTracker(base | sub.params())
        if recorded_reference is not None:
            apply_recorded_reference(tracker, recorded_reference)
        if states is None:
            states = tick_states(inputs, tracker.ticker.period_ns)
        if not tracker.config.used.any():
            raise ValueError(f"subset {sub.label} selects no sensor of the {n}")
        bar = Progress(f"reanalyse: {sub.label} ({s_i + 1}/{len(chosen)})", 1.0, enabled=progress)
        stamps, tips, lengths, sensor_rot = [], [], [], []
        want_rot = s_i == 0
        for t, est in estimates(tracker, states, bar.update):
            stamps.append(est.stamp_ns)
            tips.append(est.poses[-1, :3, 3])
            ln = states.length[t]
            lengths.append(est.length if math.isnan(ln) else float(ln))
            if want_rot:
                rot = np.full((n, 3, 3), np.nan)
                idx = [tracker.frame_ids.index(f) for f in est.frame_ids[:-1]]
                rot[idx] = est.poses[:-1, :3, :3]
                sensor_rot.append(rot)
        st = np.array(stamps, dtype=np.int64)
        if t_start is None:  # time 0: the first stamped input
            streams = [*inputs.imus, inputs.length]
            firsts = [int(x.stamp[x.status == 0].min()) for x in streams if (x.status == 0).any()]
            t_start = min(firsts) if firsts else 0
        tip = np.array(tips).reshape(-1, 3)
        ln = np.array(lengths)
        used = np.flatnonzero(tracker.config.used)
        pos = tracker.config.sensor_positions[used]
        row: dict[str, Any] = {
            "subset": sub.label,
            "sensors_used": len(used),
            "spacing_m": float(np.mean(np.diff(pos))) if len(pos) > 1 else float("nan"),
            "estimates": len(st),
        }
        j, ok = nearest(ref_stamps, st, round(max_dt * 1e9))
        if scored_by is not None and ok.any():
            err = np.linalg.norm(tip[ok] - ref_tips[j[ok]], axis=1)
            pct = 100.0 * err / np.maximum(ln[ok], 1e-9)
            row |= {
                "scored": int(ok.sum()),
                "tip_error_mean_m": float(err.mean()),
                "tip_error_median_m": float(np.median(err)),
                "tip_error_max_m": float(err.max()),
                "tip_error_final_m": float(err[-1]),
                "tip_error_mean_pct": float(pct.mean()),
            }
            per_subset[sub.label] = {"t": (st[ok] - t_start) * 1e-9, "err": err, "length": ln[ok]}
        else:
            row["scored"] = 0
        rows.append(row)
        if want_rot and sensor_rot:
            drift = _drift(np.array(sensor_rot), st, t_start, tracker, arrays.get(truth_sensors), windows, max_dt, n)
    if scored_by is not None and not any(r["scored"] for r in rows):
        raise ValueError(
            f"nothing scored: no estimate of {bag} is within --max-dt {max_dt:g} s of a stamp on {scored_by}; "
            "a larger --max-dt, or another --reference"
        )
    by_length = _length_table(per_subset, length_bins)
    return {
        "bag": str(bag),
        "parameters": parameters,
        "scored_against": scored_by,
        "ticks": 0 if states is None else len(states.ticks),
        "spacing": rows,
        "error_vs_length": by_length,
        "drift": drift,
        "_series": per_subset,
    }


def _length_table(per_subset: dict[str, dict[str, Any]], bins: int) -> dict[str, Any]:
    if not per_subset:
        return {"bins_m": [], "rows": []}
    all_len = np.concatenate([v["length"] for v in per_subset.values()])
    lo, hi = float(all_len.min()), float(all_len.max())
    if hi - lo < 1e-6:
        edges = np.array([lo - 1e-6, hi + 1e-6])
    else:
        edges = np.linspace(lo, hi, max(1, bins) + 1)
    rows = []
    for label, v in per_subset.items():
        k = np.clip(np.searchsorted(edges, v["length"], side="right") - 1, 0, len(edges) - 2)
        means = [float(v["err"][k == b].mean()) if np.any(k == b) else None for b in range(len(edges) - 1)]
        rows.append({"subset": label, "tip_error_mean_m": means})
    return {"bins_m": [[float(a), float(b)] for a, b in itertools.pairwise(edges)], "rows": rows}


def _drift(
    rot: np.ndarray,
    stamps: np.ndarray,
    t_start: int,
    tracker: VineImuTracker,
    truth_sensors: Any,
    windows: list[tuple[float, float]],
    max_dt: float,
    n: int,
) -> dict[str, Any] | None:
    """Per-sensor orientation error over time and its fitted rate (deg/min).

    From truth: the change, since the sensor's first scored sample, of the rotation between its estimated and
    true orientation. From straight windows: the angle of the sensor's backbone frame from the base frame.
    """
    t = (stamps - t_start) * 1e-9
    angles = np.full((len(stamps), n), np.nan)
    if windows:
        source = "straight windows"
        mount = tracker.estimator.mountings()
        inside = np.zeros(len(t), dtype=bool)
        for a, b in windows:
            inside |= (t >= a) & (t <= b)
        for i in range(n):
            have = inside & ~np.isnan(rot[:, i, 0, 0])
            if have.any():  # the backbone frame B_i = R_i M_i^T is the base frame when straight
                angles[have, i] = np.degrees(rotation_angle(rot[have, i] @ mount[i].T))
    elif truth_sensors is not None and len(truth_sensors):
        source = "truth/sensors"
        ts, poses = [], []
        for k in range(0, len(truth_sensors)):
            msg = _decode(truth_sensors.raw(k), truth_sensors.msgtype)
            ts.append(int(msg.header.stamp.sec) * 1_000_000_000 + int(msg.header.stamp.nanosec))
            poses.append([[p.orientation.x, p.orientation.y, p.orientation.z, p.orientation.w] for p in msg.poses])
        order = np.argsort(ts, kind="stable")
        ts_arr = np.array(ts, dtype=np.int64)[order]
        j, ok = nearest(ts_arr, stamps, round(max_dt * 1e9))
        # Discrepancy D = R_est^T R_true per sensor; its change since the sensor's first sample is the drift
        # (a constant part, e.g. a mounting the truth does not include, cancels).
        first: dict[int, np.ndarray] = {}
        for e in np.flatnonzero(ok):
            qs = poses[order[j[e]]]
            if not qs:
                continue
            R_true = quat_to_matrix(np.array(qs))
            m = min(len(qs), n)  # the truth lists the everted sensors, base first
            idx = np.flatnonzero(~np.isnan(rot[e, :m, 0, 0]))
            if not len(idx):
                continue
            D = np.swapaxes(rot[e, idx], 1, 2) @ R_true[idx]
            D0 = np.stack([first.setdefault(int(i), d) for i, d in zip(idx, D, strict=True)])
            angles[e, idx] = np.degrees(rotation_angle(np.swapaxes(D0, 1, 2) @ D))
    else:
        return None
    sensors = []
    for i in range(n):
        have = ~np.isnan(angles[:, i])
        if have.sum() >= 2 and np.ptp(t[have]) > 0:
            slope, icpt = np.polyfit(t[have] / 60.0, angles[have, i], 1)
            sensors.append(
                {
                    "sensor": i,
                    "samples": int(have.sum()),
                    "drift_deg_per_min": float(slope),
                    "error_start_deg": float(icpt),
                    "error_final_deg": float(angles[have, i][-1]),
                }
            )
    rates = [s["drift_deg_per_min"] for s in sensors]
    return {
        "source": source,
        "sensors": sensors,
        "mean_abs_drift_deg_per_min": float(np.mean(np.abs(rates))) if rates else None,
        "_t": t,
        "_angles": angles,
    }


def _plots(out: Path, result: dict[str, Any]) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    files = []
    rows = [r for r in result["spacing"] if r.get("scored")]
    if rows:
        fig, ax = plt.subplots(figsize=(6, 4))
        x = [100 * r["spacing_m"] for r in rows]
        ax.plot(x, [100 * r["tip_error_mean_m"] for r in rows], "o-", label="mean")
        ax.plot(x, [100 * r["tip_error_max_m"] for r in rows], "s--", label="max")
        for xi, r in zip(x, rows, strict=True):
            ax.annotate(r["subset"], (xi, 100 * r["tip_error_mean_m"]), fontsize=7)
        ax.set(xlabel="sensor spacing (cm)", ylabel="tip error (cm)", title="tip error vs sensor spacing")
        ax.grid(True, alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "tip_error_vs_spacing.png", dpi=110)
        plt.close(fig)
        files.append(str(out / "tip_error_vs_spacing.png"))
        fig, ax = plt.subplots(figsize=(6, 4))
        for label, v in result["_series"].items():
            ax.plot(v["length"], 100 * v["err"], ".", ms=1.5, alpha=0.4, label=label)
        ax.set(xlabel="robot length (m)", ylabel="tip error (cm)", title="tip error vs grown length")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, markerscale=6)
        fig.tight_layout()
        fig.savefig(out / "error_vs_length.png", dpi=110)
        plt.close(fig)
        files.append(str(out / "error_vs_length.png"))
    drift = result["drift"]
    if drift is not None:
        fig, ax = plt.subplots(figsize=(7, 4))
        for i in range(drift["_angles"].shape[1]):
            have = ~np.isnan(drift["_angles"][:, i])
            if have.any():
                ax.plot(drift["_t"][have] / 60.0, drift["_angles"][have, i], lw=0.8, label=f"imu {i}")
        ax.set(xlabel="time (min)", ylabel="orientation error (deg)", title=f"per-sensor drift ({drift['source']})")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6, ncol=3)
        fig.tight_layout()
        fig.savefig(out / "drift.png", dpi=110)
        plt.close(fig)
        files.append(str(out / "drift.png"))
    return files


def _public(result: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in result.items() if not k.startswith("_")}
    if out.get("drift") is not None:
        out["drift"] = {k: v for k, v in out["drift"].items() if not k.startswith("_")}
    return out


def _fmt(v: Any, scale: float = 1.0, digits: int = 2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{v * scale:.{digits}f}"


def _print_tables(result: dict[str, Any]) -> None:
    print(f"reanalysis of {result['bag']} ({result['ticks']} ticks; scored against {result['scored_against']})")
    print("\ntip error vs sensor spacing")
    print(f"{'subset':<22}{'sensors':>8}{'spacing cm':>11}{'scored':>8}{'mean cm':>9}{'median cm':>10}"
          f"{'max cm':>8}{'mean %L':>8}")  # fmt: skip
    for r in result["spacing"]:
        print(
            f"{r['subset']:<22}{r['sensors_used']:>8}{_fmt(r['spacing_m'], 100, 1):>11}{r['scored']:>8}"
            f"{_fmt(r.get('tip_error_mean_m'), 100):>9}{_fmt(r.get('tip_error_median_m'), 100):>10}"
            f"{_fmt(r.get('tip_error_max_m'), 100):>8}{_fmt(r.get('tip_error_mean_pct'), 1, 1):>8}"
        )
    table = result["error_vs_length"]
    if table["rows"]:
        print("\nmean tip error (cm) vs robot length (m)")
        print(f"{'subset':<22}" + "".join(f"{f'{a:.2f}-{b:.2f}':>12}" for a, b in table["bins_m"]))
        for r in table["rows"]:
            print(f"{r['subset']:<22}" + "".join(f"{_fmt(v, 100):>12}" for v in r["tip_error_mean_m"]))
    drift = result["drift"]
    if drift is not None:
        print(f"\nper-sensor drift ({drift['source']}; all sensors used)")
        print(f"{'sensor':>6}{'samples':>9}{'deg/min':>9}{'start deg':>10}{'final deg':>10}")
        for s in drift["sensors"]:
            print(
                f"{s['sensor']:>6}{s['samples']:>9}{s['drift_deg_per_min']:>9.3f}{s['error_start_deg']:>10.2f}"
                f"{s['error_final_deg']:>10.2f}"
            )
        print(f"mean |drift|: {_fmt(drift['mean_abs_drift_deg_per_min'], 1, 3)} deg/min")


#: what reanalyse writes under --out, replaced together (a previous run's file this run does not write is removed)
OUTPUTS = ("reanalysis.json", "tip_error_vs_spacing.png", "error_vs_length.png", "drift.png")


def run(args: argparse.Namespace) -> int:
    """CLI entry. The tables and plots are written under temporary names in ``--out`` and moved into place together
    at the end: an error, Ctrl-C or SIGTERM leaves the previous run's files as they were and no temporary file."""
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file; reanalyse writes a directory of tables and plots")
    result = reanalyse(
        args.input, subsets=args.subsets, reference=args.reference, max_dt=args.max_dt, straight=args.straight,
        config=args.config, namespace=args.namespace, length_bins=args.length_bins, progress=not args.json,
        bag_parameters=not args.ignore_bag_parameters,
    )  # fmt: skip
    with DemoOutputs(out, "reanalysis", suffixes=(), others=OUTPUTS) as outputs:
        written = _plots(outputs.tmp, result)
        files = [str(out / Path(f).name) for f in written]
        public = _public(result) | {"plots": files}
        outputs.other("reanalysis.json").write_text(json.dumps(public, indent=1, allow_nan=True) + "\n")
        outputs.commit()
    if args.json:
        print(json.dumps(public, sort_keys=True))
    else:
        _print_tables(result)
        print(f"\nwritten: {out / 'reanalysis.json'}" + "".join(f", {f}" for f in files))
    return 0
