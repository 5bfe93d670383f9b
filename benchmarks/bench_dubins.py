"""Planning time per query: the 3D two-plane planner against easydubins' planar query, in the same run.

Run from the repository root:

    .venv/bin/python benchmarks/bench_dubins.py [--queries 5000]

Prints the time per 3D query (target <= 1 ms), per 3D query with its action
triples, per planar query of this package, and easydubins' time per planar
query (pure Python, the reference), with the ratios.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import numpy as np

from shape_sensing.estimators.growth import direction_from_angles, tip_frame
from shape_sensing.planning.dubins2d import shortest_path
from shape_sensing.planning.dubins3d import action_triples, plan_3d


def _per_query(func: Callable[[int], object], n: int, repeats: int = 3) -> float:
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        for i in range(n):
            func(i)
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=5000)
    args = parser.parse_args()
    from easydubins import dubin_path

    n = args.queries
    rng = np.random.default_rng(0)
    r = 0.1
    q2 = [
        ((rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-math.pi, math.pi)),
         (rng.uniform(-1, 1), rng.uniform(-1, 1), rng.uniform(-math.pi, math.pi)))
        for _ in range(n)
    ]  # fmt: skip
    th = rng.uniform(-math.pi, math.pi, (n, 2))
    ga = rng.uniform(-1.2, 1.2, (n, 2))
    ps = rng.normal(size=(n, 3))
    pe = ps + rng.normal(size=(n, 3))
    vs = direction_from_angles(th[:, 0], ga[:, 0])
    ve = direction_from_angles(th[:, 1], ga[:, 1])
    frames = [tip_frame(ps[i], th[i, 0], ga[i, 0]) for i in range(n)]
    plans = [plan_3d(ps[i], vs[i], pe[i], ve[i], r) for i in range(n)]

    t_ed = _per_query(lambda i: dubin_path.dubins_path(q2[i][0], q2[i][1], r), n)
    t_2d = _per_query(lambda i: shortest_path(q2[i][0], q2[i][1], r), n)
    t_3d = _per_query(lambda i: plan_3d(ps[i], vs[i], pe[i], ve[i], r), n)
    t_act = _per_query(lambda i: action_triples(plans[i], frames[i]), n)
    print(f"queries: {n} (best of 3 runs)")
    print(f"easydubins 2D query (reference):   {t_ed * 1e6:8.1f} us")
    print(f"shape_sensing 2D query:            {t_2d * 1e6:8.1f} us   ({t_2d / t_ed:.2f} x easydubins)")
    print(
        f"shape_sensing 3D query (plan_3d):  {t_3d * 1e6:8.1f} us   "
        f"({t_3d / t_ed:.2f} x easydubins' 2D; target <= 1000 us)"
    )
    t_all = t_3d + t_act
    print(f"3D query + action triples:         {t_all * 1e6:8.1f} us   ({t_all / t_ed:.2f} x easydubins' 2D)")


if __name__ == "__main__":
    main()
