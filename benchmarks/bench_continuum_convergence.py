"""Convergence of the batch continuum estimator: the former solver against the current one on recorded trials.

For every member of the robot-2 noise-model family (``eval_continuum.noise_family()``, 72 members) on the three
robot-2 trials of the space_time_continuum dataset, the batch runs twice from the same straight start with the
same 50-iteration cap as ``eval-continuum``: the former solver (IRLS Gauss-Newton/Newton with a backtracking line
search; ``trust_region=False``) and the current one (the same until the iterations crawl and the set of factors
beyond the Cauchy bend has settled, then Levenberg-Marquardt on the exact robust Hessian; ``--solver previous``
instead runs the extrapolating line search with the Cauchy curvature inside the bend). Prints per run the
iterations, why it stopped, the final cost and the pooled all-s RMSE, and a summary: how many runs each leaves at
the cap, and for those both converge, the largest differences of cost and RMSE, and total iterations and CPU
seconds. Runs print as they finish (``--jsonl`` also writes them).

    .venv/bin/python benchmarks/bench_continuum_convergence.py [--members s1b0.01r1c1,...] [--trials ...]
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = ROOT.parent / "shared" / "datasets" / "space_time_continuum"
ROBOT2 = ("slow_free_space", "fast_contact", "impulse_1")
CAP = 50


SOLVERS: dict[str, dict[str, bool]] = {
    "former": {"trust_region": False},
    "current": {},
    "previous": {"robust_curvature": True, "extrapolate": True, "trust_region": False},
}


def run_one(job: tuple[Path, str, str, str]) -> list[dict[str, Any]]:
    """Both solvers on one (trial, member)."""
    from shape_sensing.cli.eval_continuum import noise_family, score
    from shape_sensing.estimators.continuum.estimator import (
        BatchEstimator,
        measurements_from_trial,
        weights_from_trial,
    )
    from shape_sensing.estimators.continuum.solver import assign_measurements, gauss_newton
    from shape_sensing.io.space_time_dataset import load_trial

    logging.disable(logging.WARNING)
    dataset, trial_name, member, other = job
    trial = load_trial(dataset, trial_name)
    tn = noise_family()[member]
    w = weights_from_trial(trial, tn)
    t0, t1 = trial.config.start_time, trial.config.end_time
    meas, _ = measurements_from_trial(trial, t0, t1, tn)
    s = np.linspace(0.0, trial.robot.length, trial.robot.N)
    st = BatchEstimator(w, s, trial.robot.K_per_second).initial_state(t0, t1)
    am = assign_measurements(st, meas)
    out = []
    for solver in ("former", other):
        tic = time.process_time()
        res = gauss_newton(st, w, am, max_iterations=CAP, **SOLVERS[solver])  # type: ignore[arg-type]
        dt = time.process_time() - tic
        a = score(trial, res.state, t0, t1)["all"]
        out.append({
            "trial": trial_name, "member": member, "solver": solver, "iterations": res.iterations,
            "stop": res.stop, "expanded": res.expanded, "cost": res.cost, "pos_rmse_mm": a["pos_mm"]["rmse"],
            "rot_rmse_deg": a["rot_deg"]["rmse"], "seconds": round(dt, 2),
        })  # fmt: skip
    return out


def main() -> None:
    from shape_sensing.cli.eval_continuum import noise_family

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--members", default="", help="comma-separated family members (default all 72)")
    parser.add_argument("--trials", default=",".join(ROBOT2))
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--solver", choices=["current", "previous"], default="current", help="compared with former")
    parser.add_argument("--jsonl", type=Path, default=None, help="also write every run as a JSON line")
    args = parser.parse_args()
    members = args.members.split(",") if args.members else list(noise_family())
    jobs = [(args.dataset, t, m, args.solver) for t in args.trials.split(",") for m in members]
    rows: list[dict[str, Any]] = []
    sink = args.jsonl.open("w") if args.jsonl else None
    head = f"{'trial':<16} {'member':<16} {'former: it stop cost mm deg':<44} {args.solver}: it stop cost mm deg"
    print(head, flush=True)
    with ProcessPoolExecutor(max_workers=args.jobs) as ex:
        for pair in ex.map(run_one, jobs):
            rows += pair
            if sink:
                sink.write("".join(json.dumps(r) + "\n" for r in pair))
                sink.flush()
            cells = [
                f"{r['iterations']:3d} {r['stop']:<13} {r['cost']:11.4f} {r['pos_rmse_mm']:6.2f} "
                f"{r['rot_rmse_deg']:5.2f}"
                for r in pair
            ]
            print(f"{pair[0]['trial']:<16} {pair[0]['member']:<16} {cells[0]:<44} {cells[1]}", flush=True)
    former = {(r["trial"], r["member"]): r for r in rows if r["solver"] == "former"}
    current = {(r["trial"], r["member"]): r for r in rows if r["solver"] == args.solver}
    capped = [k for k, r in former.items() if r["stop"] != "converged"]
    still = [k for k, r in current.items() if r["stop"] != "converged"]
    print(f"\nruns: {len(former)}; former solver unconverged at the {CAP}-iteration cap: {len(capped)}; "
          f"{args.solver}: {len(still)} {sorted(still)}")  # fmt: skip
    for name, runs in (("former", former), (args.solver, current)):
        print(f"{name}: {sum(r['iterations'] for r in runs.values())} iterations, "
              f"{sum(r['seconds'] for r in runs.values()):.0f} CPU s over all runs")  # fmt: skip
    if capped:
        fixed = [k for k in capped if current[k]["stop"] == "converged"]
        drop = [former[k]["cost"] - current[k]["cost"] for k in fixed]
        its = [current[k]["iterations"] for k in fixed]
        if fixed:
            print(f"of those, converged now: {len(fixed)} in {min(its)}-{max(its)} iterations (median "
                  f"{np.median(its):.0f}); cost lower by {min(drop):.3g}-{max(drop):.3g} "
                  f"(median {np.median(drop):.3g})")  # fmt: skip
    both = [k for k in former if former[k]["stop"] == "converged" and current[k]["stop"] == "converged"]
    if both:
        dc = max(abs(former[k]["cost"] - current[k]["cost"]) / max(1.0, abs(former[k]["cost"])) for k in both)
        dp = max(abs(former[k]["pos_rmse_mm"] - current[k]["pos_rmse_mm"]) for k in both)
        dr = max(abs(former[k]["rot_rmse_deg"] - current[k]["rot_rmse_deg"]) for k in both)
        fi = sum(former[k]["iterations"] for k in both)
        ci = sum(current[k]["iterations"] for k in both)
        print(f"both converged: {len(both)} runs; largest relative cost difference {dc:.2e}, pooled RMSE "
              f"difference {dp:.4f} mm / {dr:.4f} deg; iterations {fi} -> {ci} in total")  # fmt: skip


if __name__ == "__main__":
    main()
