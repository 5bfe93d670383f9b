"""Vine collision localisation under faults: the improved filter and the paper's, with the ablation.

Run: .venv/bin/python benchmarks/collision_faults.py [--seeds 5] [--no-sweep] [--speed 0.03]

Cases (the simulated courses of ``shape-sensing demo vine-collision``, core only, same samples for
every filter):

* nominal: the paper's sensor faults, the heading drift calibrated (configured);
* bursts: plus contact lost in bursts of about 0.3 s over 15 % of the contact time;
* drift: 2 deg/m of heading drift (x (1 + 0.2 N(0,1)) per run), nothing configured;
* all: bursts and unconfigured drift together;
* the paper's single-obstacle sweep (130-170 deg, 35-75 cm, 25 runs), nominal and with every fault on.

Prints the max tip error in % of the grown length per filter (range and mean over the runs), the
ablation (what each change bought), the online drift estimate's error against the simulator's true
drift, the CPU time and the load average. Asserts nothing.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from typing import Any

import numpy as np

from shape_sensing.demos.vine_collision import ABLATION, _params, fault_case, score_core
from shape_sensing.estimators.collision_pivot import CollisionPivotConfig
from shape_sensing.sim.vine_collision import (
    PAPER_OBSTACLE_ANGLES,
    PAPER_PIVOT_DISTANCES,
    Course,
    single_course,
    three_course,
)

KEY = "tip_error_max_pct_of_length"
MAIN = ("improved (all)", "bias-aware (first three)", "paper (as written)")


def _runs(course_seeds: list[tuple[Course, int]], case: str, speed: float) -> list[dict[str, Any]]:
    faults, known = fault_case(case)
    params = _params(faults, known)
    filters = {label: CollisionPivotConfig(**params, improvements=subset) for label, subset in ABLATION}
    out = []
    for course, seed in course_seeds:
        out.append(score_core(course, faults, seed, filters, speed=speed))
    return out


def _summary(runs: list[dict[str, Any]], label: str) -> str:
    v = np.array([r[label][KEY] for r in runs])
    return f"{v.min():5.2f}-{v.max():5.2f} (mean {v.mean():5.2f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5, help="seeds of the three-obstacle course per case (default 5)")
    ap.add_argument("--no-sweep", action="store_true", help="skip the 25-run single-obstacle sweeps")
    ap.add_argument("--speed", type=float, default=0.03, help="growth speed, m/s (default 0.03)")
    args = ap.parse_args()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    three = [(three_course(), seed) for seed in range(args.seeds)]
    sweep = [(single_course(a, d), 100 * i + j) for i, a in enumerate(PAPER_OBSTACLE_ANGLES)
             for j, d in enumerate(PAPER_PIVOT_DISTANCES)]  # fmt: skip
    table: list[tuple[str, list[dict[str, Any]]]] = []
    for case in ("nominal", "bursts", "drift", "all"):
        table.append((f"three obstacles, {case}, {args.seeds} seeds", _runs(three, case, args.speed)))
    if not args.no_sweep:
        table.insert(1, ("single-obstacle sweep, nominal, 25 runs", _runs(sweep, "nominal", args.speed)))
        table.append(("single-obstacle sweep, every fault on, 25 runs", _runs(sweep, "all", args.speed)))
    print(f"max tip error, % of grown length: min-max (mean) over the runs; growth {args.speed} m/s")
    print(f"| {'case':48s} | {'improved filter':24s} | {'before (bias-aware)':24s} | {'paper filter as written':24s} |"
          f" worse than paper |")  # fmt: skip
    print("|" + "---|" * 5)
    for name, runs in table:
        worse = sum(r[MAIN[0]][KEY] > r[MAIN[2]][KEY] for r in runs)
        cells = " | ".join(f"{_summary(runs, m):24s}" for m in MAIN)
        print(f"| {name:48s} | {cells} | {worse}/{len(runs)} |")
    print("\nablation: mean (worst) max tip error %, per case")
    cases = [(n, r) for n, r in table if "three" in n]
    print(f"| {'variant':32s} | " + " | ".join(f"{n.split(', ')[1]:14s}" for n, _ in cases) + " |")
    print("|" + "---|" * (len(cases) + 1))
    for label, _subset in ABLATION:
        cells = []
        for _n, runs in cases:
            v = np.array([r[label][KEY] for r in runs])
            cells.append(f"{v.mean():5.2f} ({v.max():5.2f})")
        print(f"| {label:32s} | " + " | ".join(f"{c:14s}" for c in cells) + " |")
    print("\nonline heading drift estimate (improved filter, drift not configured), deg/m:")
    for name, runs in table:
        if "drift" not in name and "all" not in name and "every fault" not in name:
            continue
        err = np.array([r[MAIN[0]]["heading_drift_deg_per_m"] - r[MAIN[0]]["true_heading_drift_deg_per_m"]
                        for r in runs])  # fmt: skip
        sig = np.array([r[MAIN[0]]["heading_drift_sigma_deg_per_m"] for r in runs])
        print(f"  {name:48s} error mean {err.mean():+.3f}, RMS {math.sqrt(float(np.mean(err**2))):.3f}, worst "
              f"{np.abs(err).max():.3f}; reported sigma mean {sig.mean():.3f}; |error| / sigma max "
              f"{np.max(np.abs(err) / sig):.2f}")  # fmt: skip
    for name, runs in table:
        c = {k: sum(r[MAIN[0]]["counts"][k] for r in runs) for k in ("candidates", "merged", "withdrawn", "pivots")}
        print(f"  {name:48s} candidate pivots {c['candidates']}, merged back {c['merged']}, withdrawn later "
              f"{c['withdrawn']}, pivots fixed {c['pivots']}")  # fmt: skip
    print(f"\nCPU {time.process_time() - cpu0:.1f} s (wall {time.perf_counter() - wall0:.1f} s); load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip


if __name__ == "__main__":
    main()
