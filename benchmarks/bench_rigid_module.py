"""Benchmarks of the hyper-redundant slice; prints figures, asserts nothing.

1. Rigid-module estimator update for 20 modules (21 WT901), with and without
   the covariance, against a naive per-module reference (scipy Rotation per
   platform, Python loop) run in the same process, and against the seed's
   50 ms loop budget.
2. WT901 parser throughput in frames/s against what a 921600-baud UART can
   carry (8N1: 10 bits per byte, 11 bytes per frame -> 8378 frames/s), clean
   and with line faults.

Run: ``.venv/bin/python benchmarks/bench_rigid_module.py``
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation

if "PYTHONPATH" not in os.environ:  # (the baseline comparison runs children with PYTHONPATH set)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from shape_sensing.drivers.wt901 import Wt901Parser
from shape_sensing.estimators.rigid_module import RigidModuleConfig, RigidModuleEstimator
from shape_sensing.sim.wt901_emulator import Corruptor, Wt901Emulator

N_MODULES = 20
D1 = D2 = 0.04
LINE_BAUD = 921600
LINE_FRAMES_PER_S = LINE_BAUD / 10 / 11


def best_of(fn: Callable[[], object], repeat: int = 5, number: int = 50) -> float:
    """Best mean time per call (s) over ``repeat`` runs of ``number`` calls."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t0) / number)
    return best


def naive_update(euler: np.ndarray) -> np.ndarray:
    """Reference: full-attitude chain, one scipy Rotation per platform and module, Python loops."""
    R = [Rotation.from_euler("ZYX", e[::-1]) for e in euler]
    T = np.eye(4)
    poses = []
    for j in range(1, len(R)):
        rel = (R[j - 1].inv() * R[j]).as_matrix()
        tx = np.arctan2(-rel[1, 2], rel[2, 2])
        ty = np.arcsin(np.clip(rel[0, 2], -1, 1))
        M = np.eye(4)
        M[:3, :3] = (Rotation.from_rotvec([tx, 0, 0]) * Rotation.from_rotvec([0, ty, 0])).as_matrix()
        up = np.eye(4)
        up[2, 3] = D1
        down = np.eye(4)
        down[2, 3] = D2
        T = T @ up @ M @ down
        poses.append(T)
    return np.asarray(poses)


def bench_estimator() -> None:
    rng = np.random.default_rng(0)
    euler = rng.normal(0.0, 0.2, (N_MODULES + 1, 3))
    print(f"rigid-module estimator, {N_MODULES} modules ({N_MODULES + 1} sensors)")
    t_naive = best_of(lambda: naive_update(euler))
    print(f"  naive reference (full attitudes, no covariance)   {1e3 * t_naive:8.3f} ms")
    for mode in ("full", "roll_pitch"):
        for cov in (False, True):
            cfg = RigidModuleConfig(n_modules=N_MODULES, d1=D1, d2=D2, heading_mode=mode, covariance=cov)
            est = RigidModuleEstimator(cfg)
            for i, e in enumerate(euler):
                est.push_euler(i, e, 0)
            t = best_of(lambda est=est: est.estimate(0))  # type: ignore[misc]
            label = f"{mode}, covariance {'on' if cov else 'off'}"
            print(
                f"  {label:<32} {1e3 * t:8.3f} ms   x{t_naive / t:6.2f} vs naive   "
                f"{100 * t / 0.050:5.1f}% of the seed's 50 ms loop   max rate {1 / t:7.0f} Hz"
            )


def bench_parser() -> None:
    emu = Wt901Emulator()  # acc, gyro, angle, mag: 4 frames per cycle
    rng = np.random.default_rng(1)
    cycles = 25_000
    eul = rng.normal(0, 0.5, (cycles, 3))
    clean = b"".join(emu.cycle_bytes(e) for e in eul)
    faulty = Corruptor(rng, flip_rate=1e-3, drop_rate=1e-3, garbage_rate=0.0).apply(clean)
    chunk = 4096
    print(f"WT901 parser, {len(clean) // 11} frames fed in {chunk}-byte reads")
    print(f"  a {LINE_BAUD}-baud 8N1 line carries {LINE_FRAMES_PER_S:8.0f} frames/s")
    for name, data in (("clean stream", clean), ("1e-3 flips + 1e-3 drops per byte", faulty)):

        def run(data: bytes = data) -> int:
            p = Wt901Parser()
            n = 0
            for k in range(0, len(data), chunk):
                n += len(p.feed(data[k : k + chunk]))
            return n

        t = best_of(run, repeat=3, number=1)
        n = run()
        rate = n / t
        print(f"  {name:<34} {rate:10.0f} frames/s = x{rate / LINE_FRAMES_PER_S:6.1f} the line rate")
    # Per-frame feeds (worst case: one read per frame).
    frames = [clean[k : k + 11] for k in range(0, 11 * 20000, 11)]

    def per_frame() -> int:
        p = Wt901Parser()
        return sum(len(p.feed(f)) for f in frames)

    t = best_of(per_frame, repeat=3, number=1)
    rate = len(frames) / t
    print(f"  {'one read per frame':<34} {rate:10.0f} frames/s = x{rate / LINE_FRAMES_PER_S:6.1f} the line rate")


def measure_pipeline() -> dict[str, float]:
    """Per reading (decode, checks, store) and per estimate of the pipeline the node runs (child process)."""
    from shape_sensing.estimators.rigid_module import SCHEMA
    from shape_sensing.messages import common as msgs
    from shape_sensing.messages.factory import default_factory
    from shape_sensing.pipelines.hyper_redundant import EstimateMessages, HyperRedundantTracker
    from shape_sensing.types import ImuSample

    f = default_factory()
    tracker = HyperRedundantTracker(SCHEMA.defaults() | {"n_modules": N_MODULES}, rods_s=0.0)
    q = Rotation.random(tracker.n, random_state=0).as_quat()
    imu = [msgs.imu_to_msg(ImuSample(1_000_000, f"imu_{i}", q[i]), f) for i in range(tracker.n)]
    tracker.ticker.due(0)  # started; nothing is due while timing readings

    def readings() -> None:
        for i, m in enumerate(imu):
            tracker.push_imu(msgs.imu_from_msg(m), i)

    per_msg = best_of(readings, number=100) / tracker.n
    estimate = best_of(lambda: tracker.estimator.estimate(1_000_000), number=20)
    builder = EstimateMessages(f)
    ests = [tracker.estimator.estimate(1_000_000 + k * 50_000_000) for k in range(20)]  # one second at 20 Hz
    build = best_of(lambda: [builder.build(e) for e in ests], repeat=3, number=1) / len(ests)
    return {"per_msg": per_msg, "estimate": estimate, "build": build}


def bench_pipeline(base: str, rounds: int) -> None:
    import _baseline

    cur, old = _baseline.compare(Path(__file__).resolve(), ["pipeline"], base, rounds=rounds)
    print(f"rigid-module pipeline (node path), {N_MODULES} modules: this checkout vs {base}, best of {rounds}")
    print(f"{'':52s}{'now us':>9}{'before us':>11}{'speed-up':>10}")
    for label, key in (
        ("per reading (decode, checks, Euler angles, store)", "per_msg"),
        ("estimate (20 modules, covariance as configured)", "estimate"),
        ("messages of one estimate (markers 5 Hz of 20 Hz)", "build"),
    ):
        print(f"{label:52s}{cur[key] * 1e6:9.1f}{old[key] * 1e6:11.1f}{old[key] / cur[key]:9.1f}x")

    def share(d: dict[str, float]) -> float:
        return 100.0 * ((N_MODULES + 1) * 100.0 * d["per_msg"] + 20.0 * (d["estimate"] + d["build"]))

    print(f"share of one core, {N_MODULES + 1} IMUs at 100 Hz + estimates at 20 Hz: {share(cur):.1f} % "
          f"(before {share(old):.1f} %)")  # fmt: skip


if __name__ == "__main__":
    import argparse
    import json

    sys.path.insert(1, str(Path(__file__).resolve().parent))
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--measure", nargs="*", help=argparse.SUPPRESS)
    parser.add_argument("--base", default=None, help="git revision to compare the pipeline with")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if args.measure is not None:
        print(json.dumps(measure_pipeline()))
    else:
        import _baseline

        bench_pipeline(args.base or _baseline.DEFAULT_BASE, args.rounds)
        bench_estimator()
        bench_parser()
