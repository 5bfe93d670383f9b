"""Covariance consistency of every estimator that publishes one: mean NEES against ground truth; asserts nothing.

NEES (normalised estimation error squared) of the tip position, ``e^T P^-1 e``: a consistent 3-DoF estimate
averages 3. Each figure is printed with the 95 % band of the mean of ``M`` independent chi-square(3) draws
(``M`` = independent runs; samples within one run share their sensors' fixed errors, so they are not independent).

* hinge-arc (vine robot, simulator, passive scenario, seeds 0..M-1);
* rigid-module (hyper-redundant robot, simulator, both heading modes, seeds 0..M-1);
* collision-pivot (vine robot, collision simulator, three-obstacle course, every fault on, seeds 0..M-1): the
  pivot length (1 DoF) and the tip (2 DoF) of both filters, the tip with the covariance's terms added one by one;
* continuum (synthetic robot, batch, Laplace tip covariance, measurement noise as the weights state, seeds
  0..M-1);
* continuum (real dataset, tip Laplace covariance against the Vicon marker at the tip, batch; skipped without the
  dataset).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np
from scipy.stats import chi2

from shape_sensing.demos.common import Progress


def band(m: int) -> str:
    lo, hi = chi2.ppf([0.025, 0.975], 3 * m) / m
    return f"95 % band for {m} run(s): [{lo:.2f}, {hi:.2f}]"


def hinge_arc(runs: int, duration: float) -> None:
    from shape_sensing.estimators.hinge_arc import SCHEMA
    from shape_sensing.pipelines.vine_imu import VineImuTracker
    from shape_sensing.sim.vine import VineSimConfig, VineSimulator

    per_run = []
    with Progress("hinge-arc NEES", runs, unit="run") as bar:
        for seed in range(runs):
            sim = VineSimulator(VineSimConfig(scenario="passive", duration=duration, rate=10.0, seed=seed))
            tracker = VineImuTracker(SCHEMA.defaults())
            nees = []
            truths = {}
            for k in range(round(duration * 10) + 1):
                t = k / 10.0
                stamp = round(t * 1e9)
                truths[stamp] = sim.truth(t)
                out = tracker.push_length(stamp, sim.length(t))
                for i, s in enumerate(sim.imu_samples(t)):
                    out += tracker.push_imu(i, s)
                for est in out:
                    if est.position_covariance is None or est.stamp_ns not in truths:
                        continue  # estimates are stamped with the data they used: the step's stamp
                    e = est.tip_pose[:3, 3] - truths[est.stamp_ns].tip_pose[:3, 3]
                    nees.append(float(e @ np.linalg.solve(est.position_covariance[-1], e)))
            per_run.append(float(np.mean(nees)))
            bar.update(seed + 1)
    print(f"hinge-arc (vine, passive, {duration:g} s): tip NEES mean {np.mean(per_run):.2f}, runs "
          f"{np.round(per_run, 2).tolist()}; {band(runs)}")  # fmt: skip


def rigid_module(runs: int, duration: float) -> None:
    from shape_sensing.demos.hyper_redundant import run_demo

    for mode in ("roll_pitch", "full"):
        per_run = []
        with tempfile.TemporaryDirectory() as d, Progress(f"rigid-module NEES ({mode})", runs, unit="run") as bar:
            for seed in range(runs):
                m = run_demo(Path(d) / str(seed), duration=duration, seed=seed, heading_mode=mode, progress=False,
                             picture=False)  # fmt: skip
                per_run.append(m["tip_position_nees_mean"])
                bar.update(seed + 1)
        print(f"rigid-module ({mode}, {duration:g} s): tip NEES mean {np.mean(per_run):.2f}, runs "
              f"{np.round(per_run, 2).tolist()}; {band(runs)}")  # fmt: skip


def collision_pivot(runs: int) -> None:
    import time

    from shape_sensing.demos.consistency_collision import collision_nees, nees_band

    t0 = time.process_time()
    res = collision_nees(runs)
    cpu = time.process_time() - t0
    for f, r in res.items():
        lo, hi = nees_band(runs, 1)
        print(
            f"collision-pivot ({f}, three obstacles, all faults): pivot NEES (1 DoF) mean {np.mean(r['pivot']):.2f}, "
            f"runs {np.round(r['pivot'], 2).tolist()}; 95 % band for {runs} run(s): [{lo:.2f}, {hi:.2f}]"
        )
        lo, hi = nees_band(runs, 2)
        for terms, v in r["tip"].items():
            print(
                f"collision-pivot ({f}): tip NEES (2 DoF) with {terms}: mean {np.mean(v):.2f}, runs "
                f"{np.round(v, 2).tolist()}; 95 % band for {runs} run(s): [{lo:.2f}, {hi:.2f}]"
            )
    print(f"collision-pivot: {cpu:.1f} s CPU, load average {Path('/proc/loadavg').read_text().split()[0]}")


def continuum_synthetic(runs: int) -> None:
    import time

    from shape_sensing.demos.consistency_collision import nees_band
    from shape_sensing.demos.consistency_continuum import continuum_nees

    t0 = time.process_time()
    per_run = continuum_nees(runs)
    lo, hi = nees_band(runs, 3)
    print(
        f"continuum (synthetic bending robot, batch, poses at s 0/0.2, gyros at 0.2/0.4): tip NEES mean "
        f"{np.mean(per_run):.2f}, runs {np.round(per_run, 2).tolist()}; 95 % band for {runs} run(s): "
        f"[{lo:.2f}, {hi:.2f}] ({time.process_time() - t0:.1f} s CPU)"
    )


def continuum(dataset: Path | None) -> None:
    from shape_sensing.estimators.continuum import lie
    from shape_sensing.eval_continuum import evaluate_trial

    if dataset is None or not dataset.is_dir():
        print("continuum: dataset not found, skipped (--dataset DIR)")
        return
    for trial in ("slow_free_space", "fast_contact", "impulse_1"):
        _, tr, res = evaluate_trial(dataset, trial, "batch")
        state, cov = res.state, res.tip_cov
        vicon = max((st for st in tr.of_kind("vicon") if st.s[0] > 0), key=lambda st: float(st.s[0]))
        win = vicon.window(float(state.t[0]), float(state.t[-1]))
        nees = []
        for t, xi in zip(win.t, win.values, strict=True):
            k = int(np.argmin(np.abs(state.t - t)))
            if abs(state.t[k] - t) > 0.5 / tr.robot.K_per_second or cov is None:
                continue
            R = state.T[k, -1, :3, :3]
            P = R @ cov[k][:3, :3] @ R.T  # tip position covariance in the base frame
            e = lie.exp(xi[None])[0][:3, 3] - state.T[k, -1, :3, 3]
            nees.append(float(e @ np.linalg.solve(P, e)))
        print(f"continuum ({trial}, batch): tip NEES mean {np.mean(nees):.1f} over {len(nees)} Vicon samples "
              f"(one recording, errors correlated in time: {band(1)})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="independent simulated runs per estimator (default 10)")
    parser.add_argument("--dataset", type=Path, default=None, help="space_time_continuum dataset root")
    args = parser.parse_args()
    dataset = args.dataset
    if dataset is None:
        rel = Path("shared") / "datasets" / "space_time_continuum"
        dataset = next((p / rel for p in Path(__file__).resolve().parents if (p / rel).is_dir()), None)
    hinge_arc(args.runs, 20.0)
    rigid_module(args.runs, 8.0)
    collision_pivot(args.runs)
    continuum_synthetic(args.runs)
    continuum(dataset)


if __name__ == "__main__":
    main()
