"""``shape-sensing demo vine-collision``: simulated vine robot among obstacles -> collision localisation.

Every sensor reaches the estimator through its real protocol code: the base station's frames are
built by the byte-level emulator and parsed by the driver (with garbage and corrupted bytes on
the line), the cap's heading is read by the BNO055 driver from the simulated chip over the
simulated I2C bus, the force as Net F/T RDT records decoded by the receiver. The bag holds every
raw topic, so ``shape-sensing replay`` reproduces the estimates; it also holds the ground truth.
Both filters run on the same data: the improved one (``collision/...``) and the paper's as written
(``collision_paper/...``); the ablation reruns each improvement alone on the same samples.

The estimator's parameters are recorded in the bag (rosbag2 ``custom_data``) and beside it in
``vine-collision.params.yaml``; replay uses the recorded ones. The outputs are written under
temporary names and moved into place together at the end; SIGINT/SIGTERM or a crash leaves the
previous outputs as they were and what was recorded as a readable ``vine-collision.partial.mcap``.
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from shape_sensing.demos.common import (
    DemoOutputs,
    Progress,
    StopSignals,
    add_common_arguments,
    finite_float,
    positive_float,
    print_metrics,
)
from shape_sensing.drivers.base_station import ParserStats
from shape_sensing.drivers.contact_cap import ContactCap
from shape_sensing.estimators.collision_pivot import (
    IMPROVEMENTS,
    SCHEMA,
    CollisionPivotConfig,
    CollisionPivotEstimator,
    CollisionSample,
)
from shape_sensing.io.bag import BagWriter
from shape_sensing.messages.factory import default_factory
from shape_sensing.pipelines.common import resolve_topic
from shape_sensing.pipelines.vine_collision import (
    DEFAULT_NAMESPACE,
    PAPER_PREFIX,
    CollisionErrors,
    CollisionMessages,
    CollisionTracker,
    feed,
    input_topics,
)
from shape_sensing.pipelines.vine_collision_rig import SimulatedRig
from shape_sensing.sim.base_station_emulator import LineFaults
from shape_sensing.sim.vine_collision import (
    COURSES,
    PAPER_OBSTACLE_ANGLES,
    PAPER_PIVOT_DISTANCES,
    Course,
    SensorFaults,
    SimSample,
    VineCollisionSim,
    course_by_name,
    single_course,
)

__all__ = ["ABLATION", "FAULT_CASES", "PAPER", "add_arguments", "fault_case", "run", "run_demo", "score_core",
           "sweep"]

# The paper's reported figures (seed 004, Sec. V): three-obstacle demonstration.
PAPER = {"tip_error_max_pct_of_length": "< 5 (20 cm)", "tip_rmse_cm": "3.22 and 7.65 (two datasets)"}
START_NS = 1_000_000_000  # stamps start at 1 s


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of the vine-collision demo."""
    add_common_arguments(
        parser, default_out="out/vine-collision", default_duration=None, whole="the whole course, grown to full length"
    )
    parser.add_argument("--course", choices=COURSES, default="three", help="obstacle course (default three)")
    parser.add_argument(
        "--angle", type=finite_float, default=150.0, help="single course: obstacle angle, deg (default 150)"
    )
    parser.add_argument(
        "--pivot", type=positive_float, default=0.55, help="single course: pivot to obstacle, m (default 0.55)"
    )
    parser.add_argument("--rate", type=positive_float, default=50.0, help="base station frame rate, Hz (default 50)")
    parser.add_argument("--no-sweep", action="store_true", help="single course: skip the 5x5 sweep of the paper")
    parser.add_argument(
        "--faults", choices=FAULT_CASES, default="nominal",
        help="sensor faults: nominal (the paper's, drift calibrated), bursts (contact lost in bursts of about 0.3 s "
        "over 15 %% of the contact time), drift (2 deg/m of heading drift the estimator is not told), "
        "all (both)")  # fmt: skip


def _course(name: str, angle: float, pivot: float) -> Course:
    return course_by_name(name, angle, pivot)


# fault case -> (the simulator's faults, whether the estimator is told the heading drift)
FAULT_CASES = ("nominal", "bursts", "drift", "all")


def fault_case(name: str) -> tuple[SensorFaults, bool]:
    """The sensor faults of a named case and whether the drift is configured (calibrated) in the estimator."""
    if name not in FAULT_CASES:
        raise ValueError(f"fault case {name!r}: expected one of {list(FAULT_CASES)}")
    if name == "nominal":
        return SensorFaults(), True
    if name == "bursts":
        return SensorFaults(burst_fraction=0.15), True
    if name == "drift":
        return SensorFaults(), False
    return SensorFaults.all_faults(), False


def _params(faults: SensorFaults, drift_known: bool = True) -> dict[str, Any]:
    """Estimator parameters for the simulated robot: the nominal (calibrated) drop and, if known, drift."""
    return {
        "pressure_drop_per_metre": faults.pressure_drop_per_metre,
        "heading_drift_per_metre": faults.heading_drift_per_metre if drift_known else 0.0,
        "force_noise": faults.force_noise,
        "pressure_noise": faults.pressure_noise,
    }


def score_core(course: Course, faults: SensorFaults, seed: int, filters: dict[str, CollisionPivotConfig],
               rate: float = 50.0, hold_time: float = 0.15,
               speed: float = 0.03) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Run the estimators on a simulated course through the core only (no bytes, no messages)."""
    sim = VineCollisionSim(course, faults, rate=rate, seed=seed, speed=speed)
    cap = ContactCap(sim.n_switches, sim.sensing_arc, hold_time)
    ests = {k: CollisionPivotEstimator(c) for k, c in filters.items()}
    errs = {k: CollisionErrors() for k in filters}
    for s in sim.run():
        ns = START_NS + round(s.t * 1e9)
        r = cap.update(ns, s.cap_mask)
        sample = CollisionSample(ns, s.length_measured, s.pressure_measured, s.force_measured, r.contact_angle,
                                 r.in_contact, r.in_contact and not r.held, s.heading_measured)  # fmt: skip
        for k, est in ests.items():
            errs[k].add(est.update(sample), s.tip, s.length, s.pivot_length, s.in_contact)
    out = {}
    for k, e in errs.items():
        drift, var = ests[k].drift.estimate
        out[k] = {**e.metrics(), "heading_drift_deg_per_m": math.degrees(drift),
                  "heading_drift_sigma_deg_per_m": math.degrees(math.sqrt(var)),
                  "true_heading_drift_deg_per_m": math.degrees(sim.true_drift),
                  "counts": dict(ests[k].counts)}  # fmt: skip
    return out


def sweep(seed: int = 0, faults: SensorFaults | None = None, drift_known: bool = True) -> list[dict[str, Any]]:
    """The paper's single-obstacle sweep (5 angles x 5 pivot distances), both filters, core only."""
    faults = faults or SensorFaults()
    base = CollisionPivotConfig(**_params(faults, drift_known))
    filters = {"paper": CollisionPivotConfig(**{**base.__dict__, "filter": "paper"}), "improved": base}
    rows = []
    for i, angle in enumerate(PAPER_OBSTACLE_ANGLES):
        for j, dist in enumerate(PAPER_PIVOT_DISTANCES):
            m = score_core(single_course(angle, dist), faults, seed + 100 * i + j, filters)
            rows.append({"angle_deg": angle, "pivot_distance_m": dist, **{
                f"{k}_{q}": round(float(v[q]), 3) for k, v in m.items()
                for q in ("tip_error_max_pct_of_length", "tip_rmse_cm", "pivot_error_mean_cm")}})  # fmt: skip
    return rows


def run_demo(
    out: Path,
    *,
    course: str = "three",
    angle: float = 150.0,
    pivot: float = 0.55,
    rate: float = 50.0,
    seed: int = 0,
    duration: float | None = None,
    distro: str = "jazzy",
    progress: bool = True,
    picture: bool = True,
    with_sweep: bool = True,
    faults: str = "nominal",
) -> dict[str, Any]:
    """Run the demo; returns the metrics.

    Writes ``out/vine-collision.mcap``, ``out/vine-collision.params.yaml`` and ``out/vine-collision.png``.
    ``duration`` (s) stops the course early (default: the whole course).
    """
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"--rate {rate}: expected a positive frame rate in Hz")
    if duration is not None and not (math.isfinite(duration) and duration > 0):
        raise ValueError(f"--duration {duration}: expected a finite positive number of seconds")
    crs = _course(course, angle, pivot)
    fault_name = faults
    sim_faults, drift_known = fault_case(fault_name)
    sim = VineCollisionSim(crs, sim_faults, rate=rate, seed=seed)
    est_params = _params(sim_faults, drift_known)
    tracker = CollisionTracker(est_params, variants={PAPER_PREFIX: "paper"})
    tracker.record = True
    p = tracker.params
    ns = DEFAULT_NAMESPACE
    main = p["output_prefix"]
    rig = SimulatedRig(sim, p, default_factory(distro), line_faults=LineFaults(garbage=0.02, corrupt=0.005), seed=seed)
    kinds = input_topics(p, ns)
    errors = {k: CollisionErrors() for k in tracker.estimators}
    truth_tips: list[np.ndarray] = []
    last_body = np.zeros((1, 2))
    steps = sim.n_steps if duration is None else min(sim.n_steps, math.floor(duration * rate) + 1)
    prog = Progress("vine-collision demo", steps, enabled=progress)
    wall0 = time.perf_counter()
    t_sim = 0.0
    # Written under temporary names and moved into place at the end: a crash or a signal leaves the previous
    # outputs as they were and what was recorded as a readable vine-collision.partial.mcap.
    with DemoOutputs(Path(out), "vine-collision", (".mcap", ".png", ".params.yaml")) as outputs:
        with StopSignals() as stop, BagWriter(outputs.path(".mcap"), distro=distro) as writer:
            outputs.record_parameters(writer, SCHEMA.node, p)
            f = writer.factory
            builders = {
                main: CollisionMessages(tracker, main, f, p["tip_frame"]),
                PAPER_PREFIX: CollisionMessages(tracker, PAPER_PREFIX, f, p["tip_frame"] + "_paper"),
            }
            for raw in rig.static_messages(START_NS):
                writer.write(resolve_topic(raw.topic, ns), raw.msg, raw.log_ns, qos=raw.qos)
            s: SimSample
            for k, s in enumerate(sim.run()):
                if stop.requested or k >= steps:
                    break
                t_sim = s.t
                stamp = START_NS + round(s.t * 1e9)
                for raw in rig.step(s, stamp):
                    topic = resolve_topic(raw.topic, ns)
                    writer.write(topic, raw.msg, raw.log_ns, qos=raw.qos)
                    if topic not in kinds:
                        continue
                    # the estimator reads exactly what was written, as replay and the node do
                    for prefix, o in feed(tracker, kinds[topic], raw.msg).items():
                        for t, m in builders[prefix].build(o):
                            writer.write(resolve_topic(t, ns), m, o.stamp_ns + 1, qos="default")
                        errors[prefix].add(o, s.tip, s.length, s.pivot_length, s.in_contact)
                truth_tips.append(s.tip)
                last_body = s.body
                prog.update(k + 1)
            stop.mark_partial(writer, t_sim)
        prog.close()
        if stop.requested:
            raise outputs.interrupted(stop.requested, t_sim, (steps - 1) / rate)
        truth_pivots = last_body[:-1]
        runtime = time.perf_counter() - wall0
        stats: ParserStats = rig.driver.parser.stats
        emulator = rig.emulator
        metrics: dict[str, Any] = {
            "course": crs.name,
            "course_description": crs.description,
            "samples": len(tracker.samples),
            "filter_improved": errors[main].metrics(),
            "filter_paper": errors[PAPER_PREFIX].metrics(),
            "paper_reported": PAPER,
            "serial_line": {
                "frames": stats.frames,
                "crc_errors": stats.crc_errors,
                "garbage_bytes": stats.garbage_bytes,
                "dropped": stats.dropped,
                "emulator_corrupted": emulator.corrupted,
            },
            "estimator_counts": {k: dict(e.counts) for k, e in tracker.estimators.items()},
            "runtime_s": round(runtime, 2),
            "bag": str(outputs.final(".mcap")),
            "params": str(outputs.final(".params.yaml")),
        }
        imp = metrics["filter_improved"]["tip_error_max_pct_of_length"]
        pap = metrics["filter_paper"]["tip_error_max_pct_of_length"]
        if not (math.isfinite(imp) and math.isfinite(pap)):
            raise ValueError(
                f"--duration {duration}: the run scored no tip estimate ({len(tracker.samples)} samples); give a "
                "longer --duration (the course takes tens of seconds)"
            )
        metrics["max_error_removed_pct"] = round(100.0 * (1.0 - imp / pap), 1) if pap > 0 else float("nan")
        metrics["faults"] = fault_name
        est = tracker.estimators[main]
        drift, var = est.drift.estimate
        metrics["heading_drift"] = {
            "estimated_deg_per_m": round(math.degrees(drift), 4),
            "sigma_deg_per_m": round(math.degrees(math.sqrt(var)), 4),
            "true_deg_per_m": round(math.degrees(sim.true_drift), 4),
            "configured_deg_per_m": round(math.degrees(est_params["heading_drift_per_metre"]), 4),
        }
        metrics["ablation"] = ablation(tracker.samples, sim, est_params)
        if course == "single" and with_sweep:
            metrics["sweep"] = sweep(seed, sim_faults, drift_known)
        if picture:
            est_pivots = {k: np.array([(x, y) for x, y, _ in e.recon.pivots]) for k, e in tracker.estimators.items()}
            _plot(outputs.path(".png"), crs, np.asarray(truth_tips), np.asarray(truth_pivots), errors, est_pivots,
                  main, metrics)  # fmt: skip
            metrics["picture"] = str(outputs.final(".png"))
        outputs.commit()
    return metrics


# The ablation: the paper's filter, each improvement alone on it, the first three together (the bias-aware
# filter), then the contact hypotheses and the online drift on top of those, and all of them.
_BIAS = ("model_pressure_drop", "dropouts_missing", "pivot_events")
ABLATION: list[tuple[str, tuple[str, ...]]] = [
    ("paper (as written)", ()),
    *[(f"paper + {name}", (name,)) for name in _BIAS],
    ("paper + drift_online", ("drift_online",)),
    ("bias-aware (first three)", _BIAS),
    ("bias-aware + pivot_hypotheses", (*_BIAS, "pivot_hypotheses")),
    ("bias-aware + drift_online", (*_BIAS, "drift_online")),
    ("improved (all)", IMPROVEMENTS),
]


def ablation(samples: list[CollisionSample], sim: VineCollisionSim, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Each improvement alone, all of them, and the paper's filter, on the same synchronised samples."""
    last = samples[-1].stamp_ns if samples else START_NS - 1  # a run cut short (--duration) scores what it ran
    truth = itertools.takewhile(
        lambda s: START_NS + round(s.t * 1e9) <= last,
        VineCollisionSim(sim.course, sim.faults, rate=sim.rate, seed=sim.seed).run(),
    )
    by_stamp = {START_NS + round(s.t * 1e9): s for s in truth}
    variants = ABLATION
    rows = []
    for label, subset in variants:
        est = CollisionPivotEstimator(CollisionPivotConfig(**params, improvements=subset))
        err = CollisionErrors()
        for smp in samples:
            o = est.update(smp)
            tr = by_stamp.get(smp.stamp_ns)
            if tr is not None:
                err.add(o, tr.tip, tr.length, tr.pivot_length, tr.in_contact)
        m = err.metrics()
        rows.append({"variant": label, **{k: round(float(m[k]), 3) for k in (
            "tip_error_max_pct_of_length", "tip_rmse_cm", "pivot_error_mean_cm")}})  # fmt: skip
    return rows


def _plot(path: Path, course: Course, truth_tips: np.ndarray, truth_pivots: np.ndarray,
          errors: dict[str, CollisionErrors], est_pivots: dict[str, np.ndarray], main: str,
          metrics: dict[str, Any]) -> None:  # fmt: skip
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(15, 6), gridspec_kw={"width_ratios": [1.4, 1]})
    for i, poly in enumerate(course.obstacles):
        closed = np.vstack([poly, poly[:1]])
        ax.fill(closed[:, 0], closed[:, 1], color="0.8", zorder=0, label="obstacles" if i == 0 else None)
    ax.plot(truth_tips[:, 0], truth_tips[:, 1], "k-", lw=2.5, label="true tip path")
    styles = {main: ("tab:blue", "improved filter"), PAPER_PREFIX: ("tab:red", "paper's filter (as written)")}
    for prefix, (color, label) in styles.items():
        tips = np.asarray(errors[prefix].tips)
        ax.plot(tips[:, 0], tips[:, 1], "-", color=color, lw=1.2, label=f"estimated tip, {label}")
    if len(truth_pivots):
        ax.plot(truth_pivots[:, 0], truth_pivots[:, 1], "ko", ms=9, mfc="none", mew=2, label="true pivots")
    pv = est_pivots[main]
    ax.plot(pv[:, 0], pv[:, 1], "^", color="tab:blue", ms=8, label="estimated pivots, improved")
    pv = est_pivots[PAPER_PREFIX]
    ax.plot(pv[:, 0], pv[:, 1], "x", color="tab:red", ms=6,
            label=f"estimated pivots, paper's ({len(pv) - 1}: one per lost contact)")  # fmt: skip
    ax.set(xlabel="x (m)", ylabel="y (m)", title=f"{course.name}: {course.description}")
    ax.set_aspect("equal", adjustable="datalim")
    ax.grid(True, alpha=0.3)
    for prefix, (color, label) in styles.items():
        e = errors[prefix]
        ax2.plot(e.lengths, 100 * np.asarray(e.tip_errors), color=color, lw=1, label=label)
    ax2.axhline(5.0 * max(errors[main].lengths), color="k", ls="--", lw=1, label="5 % of the robot length")
    imp, pap = metrics["filter_improved"], metrics["filter_paper"]
    title = (f"tip error: max {pap['tip_error_max_pct_of_length']:.2f} % (paper's filter) vs "
             f"{imp['tip_error_max_pct_of_length']:.2f} % (improved) of length\nRMSE {pap['tip_rmse_cm']:.2f} vs "
             f"{imp['tip_rmse_cm']:.2f} cm (the paper reports < 5 %, RMSE 3.22 / 7.65 cm)")  # fmt: skip
    ax2.set(xlabel="grown length (m)", ylabel="tip error (cm)", title=title)
    ax2.grid(True, alpha=0.3)
    ax2.legend(fontsize=8)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    """CLI entry."""
    metrics = run_demo(
        args.out, course=args.course, angle=args.angle, pivot=args.pivot, rate=args.rate, seed=args.seed,
        duration=args.duration, distro=args.distro, progress=not args.json, with_sweep=not args.no_sweep,
        faults=args.faults,
    )  # fmt: skip
    if args.json:
        print_metrics(metrics, True)
        return 0
    _print_tables(metrics)
    return 0


def _print_tables(m: dict[str, Any]) -> None:
    imp, pap = m["filter_improved"], m["filter_paper"]
    print(f"vine-collision demo ({m['course']}: {m['course_description']})")
    print(f"  bag {m['bag']}; picture {m.get('picture', '-')}; {m['samples']} samples in {m['runtime_s']} s")
    print(f"  {'':34s} {'paper reports':>22s} {'paper filter':>13s} {'improved':>10s}")
    print(f"  {'max tip error, % of length':34s} {'< 5':>22s} {pap['tip_error_max_pct_of_length']:13.2f} "
          f"{imp['tip_error_max_pct_of_length']:10.2f}")  # fmt: skip
    print(f"  {'tip RMSE, cm':34s} {'3.22 / 7.65':>22s} {pap['tip_rmse_cm']:13.2f} {imp['tip_rmse_cm']:10.2f}")
    print(f"  {'pivot error (mean, signed), cm':34s} {'underestimated':>22s} {pap['pivot_error_mean_cm']:13.2f} "
          f"{imp['pivot_error_mean_cm']:10.2f}")  # fmt: skip
    print(f"  max error removed by the improvements: {m['max_error_removed_pct']} %")
    d = m["heading_drift"]
    print(f"  heading drift: estimated {d['estimated_deg_per_m']:.3f} +- {d['sigma_deg_per_m']:.3f} deg/m (true "
          f"{d['true_deg_per_m']:.3f}, configured {d['configured_deg_per_m']:.3f}); faults: {m['faults']}")  # fmt: skip
    print("  ablation (same samples):")
    for row in m["ablation"]:
        print(f"    {row['variant']:34s} max {row['tip_error_max_pct_of_length']:6.2f} %  RMSE "
              f"{row['tip_rmse_cm']:6.2f} cm  pivot {row['pivot_error_mean_cm']:7.2f} cm")  # fmt: skip
    sl = m["serial_line"]
    print(f"  serial line: {sl['frames']} frames, {sl['crc_errors']} CRC errors, {sl['garbage_bytes']} garbage bytes "
          f"skipped, {sl['dropped']} dropped")  # fmt: skip
    if "sweep" in m:
        print("  single-obstacle sweep (max tip error % of length / RMSE cm), paper filter -> improved:")
        for row in m["sweep"]:
            paper = f"{row['paper_tip_error_max_pct_of_length']:6.2f} / {row['paper_tip_rmse_cm']:5.2f}"
            ours = f"{row['improved_tip_error_max_pct_of_length']:6.2f} / {row['improved_tip_rmse_cm']:5.2f}"
            print(f"    {row['angle_deg']:5.0f} deg {100 * row['pivot_distance_m']:4.0f} cm   {paper}  ->  {ours}")
