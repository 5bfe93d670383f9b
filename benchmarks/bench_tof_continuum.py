"""ToF continuum benchmark: real-time factor of the sliding window with 9 ToF sensors at 15 Hz and 3 gyros at
120 Hz (the seed's real robot: three rings of three 8x8 sensors), and where the time goes; the batch and a
gyro-only window of the same run for reference; k-d tree against a hashed voxel map for the nearest-neighbour
queries of one Gauss-Newton evaluation.

Run: .venv/bin/python benchmarks/bench_tof_continuum.py [--duration 6] [--rate 10] [--size 4] [--iterations 3]
Prints figures (CPU seconds of this process, one BLAS thread); asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

import numpy as np

from shape_sensing.demos.tof_continuum import MAP_SPACING, sensor_data
from shape_sensing.estimators.continuum.tof_localise import LocaliseConfig, localise, ring_errors, summarise_errors
from shape_sensing.io.maps import PriorMap
from shape_sensing.sim.tof_continuum import RobotSpec, SimConfig, simulate
from shape_sensing.sim.tof_scene import compressor_scene


class VoxelHashMap:
    """Reference nearest neighbour: points hashed by voxel, a query searches its 27 surrounding voxels."""

    def __init__(self, points: np.ndarray, voxel: float) -> None:
        self.points = points
        self.voxel = voxel
        keys = np.floor(points / voxel).astype(np.int64)
        self.table: dict[tuple[int, int, int], np.ndarray] = {}
        order = np.lexsort(keys.T)
        ks = keys[order]
        split = np.flatnonzero(np.any(np.diff(ks, axis=0) != 0, axis=1)) + 1
        for grp in np.split(order, split):
            self.table[tuple(keys[grp[0]])] = grp

    def nearest(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keys = np.floor(q / self.voxel).astype(np.int64)
        dist = np.full(q.shape[0], np.inf)
        idx = np.full(q.shape[0], -1)
        off = np.array([(i, j, k) for i in (-1, 0, 1) for j in (-1, 0, 1) for k in (-1, 0, 1)])
        for n in range(q.shape[0]):
            best, bi = np.inf, -1
            for o in off:
                cand = self.table.get(tuple(keys[n] + o))
                if cand is None:
                    continue
                d = np.linalg.norm(self.points[cand] - q[n], axis=1)
                j = int(np.argmin(d))
                if d[j] < best:
                    best, bi = d[j], int(cand[j])
            dist[n], idx[n] = best, bi
        return dist, idx


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=6.0)
    ap.add_argument("--rate", type=float, default=10.0, help="window slices per second")
    ap.add_argument("--size", type=int, default=4, help="window slices")
    ap.add_argument("--iterations", type=int, default=3)
    a = ap.parse_args()
    robot = RobotSpec(length=0.9, ring_s=(0.3, 0.6, 0.9), tip_forward=False)  # 9 ToF, 3 gyros
    cfg = SimConfig(duration=a.duration, max_radius=0.15)
    tof_map = PriorMap.from_mesh(compressor_scene("S0").mesh(include_added=False), spacing=MAP_SPACING)
    run = simulate(compressor_scene("S0"), robot, cfg)
    data = sensor_data(run)
    frames = run.tof_t.size
    print(f"run: {a.duration} s, {len(run.mounts)} ToF sensors ({frames} frames), 3 gyros at 120 Hz, strain off")

    def timed(lc: LocaliseConfig, label: str, profile: bool = False) -> float:
        prof = cProfile.Profile() if profile else None
        c0 = time.process_time()
        if prof:
            prof.enable()
        res = localise(data, tof_map, lc)
        if prof:
            prof.disable()
        cpu = time.process_time() - c0
        dp, ang = ring_errors(res.state, run.truth_t, run.truth_s[1:], run.truth_pose[:, 1:])
        e = summarise_errors(dp, ang)
        print(
            f"{label:34s} CPU {cpu:6.2f} s  real-time factor {a.duration / cpu:5.2f}  "
            f"ring MAE {e['trans_mae_cm']:.3f} cm {e['rot_mae_deg']:.3f} deg"
        )
        if prof:
            st = pstats.Stats(prof)
            st.sort_stats("tottime").print_stats(8)
        return cpu

    win = LocaliseConfig(use_strain=False, window=a.size, rate=a.rate, window_iterations=a.iterations)
    cpu_win = timed(win, f"window {a.size} x {a.rate:g} Hz, ToF + gyro", profile=True)
    cpu_gyro = timed(
        LocaliseConfig(use_strain=False, use_tof=False, window=a.size, rate=a.rate, window_iterations=a.iterations),
        "same window, gyro only",
    )
    cpu_batch = timed(LocaliseConfig(use_strain=False), "batch 5 Hz, ToF + gyro")
    print(f"ratios: window ToF+gyro / gyro-only = {cpu_win / cpu_gyro:.2f}, batch / window = {cpu_batch / cpu_win:.2f}")
    # nearest neighbours of one evaluation: every valid point of one second of frames
    q = tof_map.points[np.random.default_rng(0).integers(0, len(tof_map), 9 * 64 * 15)] + 0.003
    c0 = time.process_time()
    for _ in range(20):
        tof_map.nearest(q)
    kd = (time.process_time() - c0) / 20
    vox = VoxelHashMap(tof_map.points, 0.05)
    c0 = time.process_time()
    dv, _ = vox.nearest(q[:2000])
    hv = (time.process_time() - c0) * q.shape[0] / 2000
    dk, _ = tof_map.nearest(q[:2000])
    assert np.allclose(dv, dk)
    print(
        f"nearest neighbour of {q.shape[0]} points (1 s of 9 sensors): k-d tree {1e3 * kd:.1f} ms, "
        f"voxel hash (Python loop) {1e3 * hv:.0f} ms, ratio {hv / kd:.0f}"
    )


if __name__ == "__main__":
    main()
