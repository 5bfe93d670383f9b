"""ToF continuum benchmark: real-time factor of the live (sliding-window) estimator in two layouts, and where the
time goes.

* ``real``: the seed's real robot (three rings of three 8x8 ToF at 15 Hz, three gyros at 120 Hz, no strain, 0.9 m),
  the sliding window of :func:`~shape_sensing.estimators.continuum.tof_localise.localise` (4 slices at 10 Hz,
  its default iterations per step), on scene S0 against the S0 map.
* ``launch``: the node's core (:class:`~shape_sensing.pipelines.continuum_tracker.ContinuumTracker`) with
  ``config/continuum_tof.yaml``, what ``launch/continuum_tof.launch.xml`` runs: the 1.5 m simulated robot with 16
  ToF (five rings of three and a tip sensor), five gyros at 120 Hz and strain gauges every 3 cm at 20 Hz, window 4
  at 10 Hz, 16 nodes, the scene reconstruction and anomalies of every finalised slice; every reading pushed in
  stamp order as the node receives them (the still start of 1 s gives the gyro biases, as in replay).

Each layout prints the CPU seconds of this process (one BLAS thread), the real-time factor (seconds of data per
CPU second, the best of ``--repeat`` runs: a loaded machine only ever adds time) and the ring errors against the
simulator's truth (MAE over the run after the still start). ``--profile`` prints where the time goes (cProfile
with the process's CPU clock). ``--references`` adds the batch, a gyro-only window and the nearest-neighbour
comparison of the real layout.

Run: .venv/bin/python benchmarks/bench_tof_continuum.py [--layout both|real|launch] [--duration 6] [--repeat 2]
     [--profile] [--references] [--json]
Prints figures; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from shape_sensing.config import load_node_params
from shape_sensing.demos.tof_continuum import MAP_SPACING, sensor_data
from shape_sensing.estimators.continuum.tof_localise import LocaliseConfig, localise, ring_errors, summarise_errors
from shape_sensing.io.maps import PriorMap, write_ply
from shape_sensing.pipelines.continuum_tracker import SCHEMA, ContinuumTracker
from shape_sensing.sim.tof_continuum import RobotSpec, SimConfig, SimRun, simulate
from shape_sensing.sim.tof_scene import compressor_scene

ROOT = Path(__file__).resolve().parents[1]
LAUNCH_CONFIG = ROOT / "config" / "continuum_tof.yaml"
START_NS = 10**18  # stamps as a robot's clock gives them (a multiple of the slice period)


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


def _cpu(fn: Any, profile: bool) -> tuple[float, Any, cProfile.Profile | None]:
    prof = cProfile.Profile(time.process_time) if profile else None
    c0 = time.process_time()
    if prof:
        prof.enable()
    out = fn()
    if prof:
        prof.disable()
    return time.process_time() - c0, out, prof


def _errors(state: Any, run: SimRun, after: float) -> dict[str, float]:
    keep = run.truth_t >= after
    dp, ang = ring_errors(state, run.truth_t[keep], run.truth_s[1:], run.truth_pose[keep, 1:])
    return summarise_errors(dp, ang)


def real_layout(duration: float, tof_map: PriorMap, cfg: LocaliseConfig) -> tuple[SimRun, Any]:
    """The real robot's run and a set-up function returning the timed one (localising it with ``cfg``)."""
    robot = RobotSpec(length=0.9, ring_s=(0.3, 0.6, 0.9), tip_forward=False)  # 9 ToF, 3 gyros
    run = simulate(compressor_scene("S0"), robot, SimConfig(duration=duration, max_radius=0.15))
    data = sensor_data(run)
    return run, lambda: lambda: localise(data, tof_map, cfg).state


def tracker_events(run: SimRun, params: dict[str, Any]) -> list[tuple[str, int, tuple[Any, ...]]]:
    """Every reading of ``run`` as the node receives it: ``(kind, stamp_ns, args)`` in stamp order (ToF, then
    gyro, then strain at equal stamps)."""
    names = {t.split("/")[-1]: i for i, t in enumerate(params["tof_topics"])}
    rings = [float(s) for s in params["gyro_arc_lengths"]]
    ev: list[tuple[float, int, tuple[Any, ...]]] = []
    for i in range(run.tof_t.size):
        m = run.mounts[int(run.tof_mount[i])]
        ev.append((run.tof_t[i], 0, (names[m.name], run.tof_distance[i], run.tof_status[i])))
    for t, s, w in zip(run.gyro_t, run.gyro_s, run.gyro_w, strict=True):
        ev.append((t, 1, (rings.index(float(s)), w)))
    for t in np.unique(run.strain_t):
        sel = run.strain_t == t
        ev.append((t, 2, (run.strain_s[sel], run.strain_theta[sel], run.strain_kappa[sel])))
    ev.sort(key=lambda e: (e[0], e[1]))
    kinds = ("tof", "gyro", "strain")
    return [(kinds[k], START_NS + round(t * 1e9), a) for t, k, a in ev]


def feed(tracker: ContinuumTracker, events: list[tuple[str, int, tuple[Any, ...]]]) -> int:
    """Push ``events`` into ``tracker`` as the node does (collecting each estimate's reconstruction); the number
    of estimates."""
    n = 0
    for kind, ns, a in events:
        if kind == "tof":
            new = tracker.push_tof(a[0], ns, a[1], a[2])
        elif kind == "gyro":
            new = tracker.push_gyro(a[0], ns, a[1])
        else:
            new = tracker.push_strain(ns, a[0], a[1], a[2])
        if new:
            assert tracker.window is not None
            first = len(tracker.window.final_t) - len(new)
            for j in range(len(new)):
                tracker.pop_reconstruction(first + j)
            n += len(new)
    return n


def launch_layout(duration: float, map_path: Path, overrides: dict[str, Any]) -> tuple[SimRun, Any]:
    """The launch file's run and a set-up function (a fresh tracker: the map loaded) returning the timed one
    (feeding the run to the tracker; returns the finalised states)."""
    run = simulate(compressor_scene("S0"), cfg=SimConfig(duration=duration))
    params = load_node_params(LAUNCH_CONFIG, SCHEMA)
    params.update(map_file=str(map_path), gyro_bias_duration=1.0, **overrides)
    events = tracker_events(run, params)

    def setup() -> Any:
        tr = ContinuumTracker(params)

        def go() -> Any:
            feed(tr, events)
            assert tr.window is not None
            return tr.window.finalized()

        return go

    return run, setup


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layout", choices=("both", "real", "launch"), default="both")
    ap.add_argument("--duration", type=float, default=6.0, help="simulated seconds (the first is the still start)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per layout; the CPU time is the best of them")
    ap.add_argument("--rate", type=float, default=10.0, help="real layout: window slices per second")
    ap.add_argument("--size", type=int, default=4, help="real layout: window slices")
    ap.add_argument(
        "--iterations",
        type=int,
        default=LocaliseConfig.window_iterations,
        help=f"real layout: iterations per step (default {LocaliseConfig.window_iterations}, the estimator's)",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="launch layout: override a node parameter (YAML value), e.g. --set iterations=3",
    )
    ap.add_argument("--profile", action="store_true", help="print where the CPU time goes")
    ap.add_argument("--references", action="store_true", help="also the batch, a gyro-only window, k-d tree")
    ap.add_argument("--json", action="store_true", help="one JSON line per layout")
    a = ap.parse_args()
    import yaml

    overrides = {k: yaml.safe_load(v) for k, v in (s.split("=", 1) for s in a.set)}
    tof_map = PriorMap.from_mesh(compressor_scene("S0").mesh(include_added=False), spacing=MAP_SPACING)
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} (CPU time of this process; best of "
          f"{a.repeat})", flush=True)  # fmt: skip
    layouts = ("real", "launch") if a.layout == "both" else (a.layout,)
    with tempfile.TemporaryDirectory() as tmp:
        map_path = Path(tmp) / "map.ply"
        write_ply(map_path, tof_map.points, normals=tof_map.normals)
        for layout in layouts:
            if layout == "real":
                win = LocaliseConfig(use_strain=False, window=a.size, rate=a.rate, window_iterations=a.iterations)
                run, go = real_layout(a.duration, tof_map, win)
                label = f"real robot: 9 ToF, 3 gyros, window {a.size} x {a.rate:g} Hz"
            else:
                run, go = launch_layout(a.duration, map_path, overrides)
                label = "launch: 16 ToF, 5 gyros, strain, window 4 x 10 Hz (tracker)"
            best, state, prof = np.inf, None, None
            for i in range(max(1, a.repeat)):
                cpu, state, p = _cpu(go(), a.profile and i == 0)
                best = min(best, cpu)
                prof = prof or p
            e = _errors(state, run, run.config.still)
            rtf = a.duration / best
            if a.json:
                print(json.dumps({"layout": layout, "cpu_s": round(best, 3), "rtf": round(rtf, 3),
                                  "load": os.getloadavg()[0], **{k: round(v, 5) for k, v in e.items()}}))  # fmt: skip
            else:
                print(
                    f"{label}: CPU {best:6.2f} s for {a.duration:g} s, real-time factor {rtf:5.2f}; ring MAE "
                    f"{e['trans_mae_cm']:.4f} cm {e['rot_mae_deg']:.4f} deg (load {os.getloadavg()[0]:.2f})",
                    flush=True,
                )
            if prof is not None:
                st = pstats.Stats(prof)
                st.sort_stats("tottime").print_stats(12)
                st.sort_stats("cumtime").print_stats(25)
    if a.references:
        references(a, tof_map)


def references(a: argparse.Namespace, tof_map: PriorMap) -> None:
    """The batch and a gyro-only window on the real layout, and the nearest-neighbour structures."""
    gyro_only = LocaliseConfig(
        use_strain=False, use_tof=False, window=a.size, rate=a.rate, window_iterations=a.iterations
    )
    for label, cfg in (
        ("same window, gyro only", gyro_only),
        ("batch 5 Hz, ToF + gyro", LocaliseConfig(use_strain=False)),
    ):
        run, go = real_layout(a.duration, tof_map, cfg)
        cpu, state, _ = _cpu(go(), False)
        e = _errors(state, run, run.config.still)
        print(f"real robot, {label:26s} CPU {cpu:6.2f} s  real-time factor {a.duration / cpu:5.2f}  "
              f"ring MAE {e['trans_mae_cm']:.3f} cm {e['rot_mae_deg']:.3f} deg")  # fmt: skip
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
