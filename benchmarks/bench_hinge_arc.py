"""Hinge-arc benchmark: update time vs a plain per-segment loop; replay throughput vs real time.

Run: .venv/bin/python benchmarks/bench_hinge_arc.py [--minutes 10]
Prints figures; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation

from shape_sensing.estimators.hinge_arc import SCHEMA, HingeArcConfig, HingeArcEstimator
from shape_sensing.io.bag import BagWriter
from shape_sensing.messages import common as msgs
from shape_sensing.replay import replay_bag
from shape_sensing.types import ImuSample


def naive_chain(quats: np.ndarray, spacing: float, diameter: float) -> np.ndarray:
    """Reference: the hinge-arc chain written as a plain per-segment Python loop over scipy Rotations."""
    rots = [Rotation.from_quat(q) for q in quats]
    pos = np.zeros(3)
    frame = Rotation.identity()
    prev = Rotation.identity()
    for r in rots:
        rel = prev.inv() * r
        tangent = rel.apply([0.0, 0.0, 1.0])
        s = math.hypot(tangent[0], tangent[1])
        theta = math.atan2(s, tangent[2])
        if diameter * theta <= spacing:
            rc = diameter / 2
        else:
            rc = max(spacing / theta - diameter / 2, 0.0)
        straight = max(spacing - diameter * theta, 0.0) / 2
        n = np.array([tangent[0] / s, tangent[1] / s, 0.0]) if s > 1e-12 else np.zeros(3)
        d = straight * np.array([0.0, 0.0, 1.0]) + rc * s * np.array([0.0, 0.0, 1.0])
        d = d + rc * (1 - math.cos(theta)) * n + straight * tangent
        pos = pos + frame.apply(d)
        frame = frame * rel
        prev = r
    return pos


def bench_update(n: int = 18, reps: int = 2000) -> None:
    params = SCHEMA.defaults() | {"imu_topics": [f"imu_{i:02d}/data" for i in range(n)]}
    est = HingeArcEstimator(HingeArcConfig.from_params(params), [f"imu_{i}" for i in range(n)])
    valid = np.ones(n, dtype=bool)
    est.capture_offset(np.tile([0, 0, 0, 1.0], (n, 1)), valid, 0)
    rng = np.random.default_rng(0)
    quats = Rotation.from_rotvec(np.cumsum(rng.normal(0, 0.1, (n, 3)), axis=0)).as_quat()
    quats[0] = [0, 0, 0, 1.0]
    t0 = time.perf_counter()
    for _ in range(reps):
        shape = est.update(quats, valid, 1)
    fast = (time.perf_counter() - t0) / reps
    spacing = 0.102
    t0 = time.perf_counter()
    for _ in range(reps // 10):
        ref_tip = naive_chain(quats[1:], spacing, 0.129)
    slow = (time.perf_counter() - t0) / (reps // 10)
    # same chain: the loop starts at sensor 0 (identity, at the base), so compare centreline ends
    centre_tip = shape.poses[-2, :3, 3] - shape.poses[-2, :3, :3] @ est.mountings()[n - 1].T @ [0.129 / 2, 0, 0]
    agree = float(np.linalg.norm(centre_tip - ref_tip))
    print(f"update, {n} sensors (vectorised, incl. covariance, backbone, diagnostics): {fast * 1e6:8.1f} us")
    print(f"plain per-segment Python loop (positions only):                    {slow * 1e6:8.1f} us")
    print(f"speed-up: {slow / fast:.1f}x   (targets: >= 10x, update < 200 us)   agreement {agree:.2e} m")


def bench_replay(minutes: float) -> None:
    n, rate = 18, 100.0
    steps = int(minutes * 60 * rate)
    with tempfile.TemporaryDirectory() as tmp:
        bag = Path(tmp) / "rec.mcap"
        rng = np.random.default_rng(1)
        t0 = time.perf_counter()
        with BagWriter(bag) as w:
            f = w.factory
            topics = [f"/vine/imu_{i:02d}/data" for i in range(n)]
            # Pre-serialise one message per sensor and vary the stamp bytes: writing is not what is measured.
            for k in range(steps):
                stamp = int(k * 1e9 / rate)
                rot = Rotation.from_rotvec(np.outer(np.full(n, 0.3 * math.sin(k / 500)), [1.0, 0, 0]))
                q = (rot * Rotation.from_rotvec(rng.normal(0, 0.002, (n, 3)))).as_quat()
                for i in range(n):
                    m = msgs.imu_to_msg(ImuSample(stamp, f"vine_imu_{i:02d}", q[i]), f)
                    w.write(topics[i], m, stamp, qos="sensor")
        write_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        replay_bag(bag, Path(tmp) / "out.mcap", argparse.Namespace(namespace="/vine"))
        replay_s = time.perf_counter() - t0
        duration = steps / rate
        print(f"recording: {minutes:g} min, {n} IMUs at {rate:g} Hz = {steps * n} messages, written in {write_s:.1f} s")
        print(f"replay: {replay_s:.2f} s -> {duration / replay_s:.1f}x real time (target >= 200x); "
              f"{steps * n / replay_s:.0f} messages/s")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the recording to replay")
    args = parser.parse_args()
    bench_update()
    bench_replay(args.minutes)


if __name__ == "__main__":
    main()
