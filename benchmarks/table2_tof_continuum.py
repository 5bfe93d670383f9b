"""Seed 001 Table II on the simulated compressor duct: every scene S0-S9, several trajectories, always the S0 map.

Runs ``shape-sensing demo tof-continuum`` (without the picture) per scene, trajectory and sensor set, and prints
the Table II figures (translation and rotation MAE and RMSE at the rings, mean +- std across trials and rings),
the sensor ablation (ToF removed, gyro removed, strain removed, ToF only, gyro only) and the anomaly
precision and recall per scene.

    python benchmarks/table2_tof_continuum.py [--sim mujoco|kinematic] [--trajectories 3] [--duration 6]
        [--out /tmp/table2] [--jsonl FILE]

``--sim`` picks the simulator (default mujoco where it is installed, else kinematic, as the demo does).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from shape_sensing.demos.tof_continuum import SIMULATORS, resolve_simulator, run_demo
from shape_sensing.sim.tof_scene import SCENES

SEED = {"S0": (0.78, 0.99, 0.96, 0.98)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", choices=("auto", *SIMULATORS), default="auto", help="simulator (default auto)")
    ap.add_argument(
        "--reach",
        type=float,
        default=None,
        help="commanded shape's largest distance from the duct axis (m); "
        "MuJoCo runs beyond ~0.14 m press on the blades (default: the simulator's own)",
    )
    ap.add_argument("--trajectories", type=int, default=3)
    ap.add_argument("--duration", type=float, default=6.0)
    ap.add_argument("--scenes", default=",".join(sorted(SCENES)))
    ap.add_argument("--variants", default="full,no-strain,no-tof,no-gyro")
    ap.add_argument("--ablation-scenes", default="S0")
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "table2_tof")
    ap.add_argument("--jsonl", type=Path, default=None, help="append each run's metrics here")
    ap.add_argument("--tables-from", type=Path, default=None, help="only print the tables of a --jsonl file")
    a = ap.parse_args()
    if a.tables_from is not None:
        rows = [json.loads(line) for line in a.tables_from.read_text().splitlines() if line.strip()]
        # last run wins; rows of older files have no simulator (they are kinematic)
        keys = ("variant", "scene", "trajectory", "duration_s", "reach_m")
        unique = {(r.get("simulator", "kinematic"), *(r.get(k) for k in keys)): r for r in rows}
        print_tables(list(unique.values()))
        return 0
    rows: list[dict] = []
    sim = resolve_simulator(a.sim)
    print(f"simulator: {sim}", file=sys.stderr, flush=True)
    variants = a.variants.split(",")
    for variant in variants:
        scenes = a.scenes.split(",") if variant in ("full", "no-strain") else a.ablation_scenes.split(",")
        for scene in scenes:
            for traj in range(a.trajectories):
                m = run_demo(
                    a.out / f"{sim}_{variant}_{scene}_{traj}",
                    scene=scene,
                    trajectory=traj,
                    duration=a.duration,
                    use_strain=variant not in ("no-strain", "tof-only", "gyro-only"),
                    use_tof=variant not in ("no-tof", "gyro-only"),
                    use_gyro=variant not in ("no-gyro", "tof-only"),
                    picture=False,
                    sim=sim,
                    reach=a.reach,
                )
                m["variant"] = variant
                m.pop("ring_s", None)
                rows.append(m)
                print(
                    f"{sim} {variant:9s} {scene} traj {traj}: {m['trans_mae_cm']:.3f} cm {m['rot_mae_deg']:.3f} deg "
                    f"converged={m['converged']} it={m['iterations']} P={m['anomaly_precision']} "
                    f"R={m['anomaly_recall']}",
                    file=sys.stderr,
                    flush=True,
                )
                if a.jsonl:
                    with a.jsonl.open("a") as fh:
                        fh.write(json.dumps(m) + "\n")
    print_tables(rows)
    return 0


def print_tables(rows: list[dict]) -> None:
    """Table II (mean +- std across trials and rings) per variant and scene, and anomaly detection per scene."""

    def kind(r: dict) -> tuple[str, str, object]:
        return r.get("simulator", "kinematic"), r["variant"], r.get("reach_m")

    for sim, variant, reach in dict.fromkeys(kind(r) for r in rows):
        mine = [r for r in rows if kind(r) == (sim, variant, reach)]
        label = f"{sim} {variant}" + ("" if reach is None else f" reach {reach} m")
        print(f"\n{label}: scene  trans MAE (cm)  trans RMSE (cm)  rot MAE (deg)  rot RMSE (deg)  trials  contact")
        for scene in sorted({r["scene"] for r in mine}):
            sel = [r for r in mine if r["scene"] == scene]
            cells = []
            for key in ("trans_mae_cm", "trans_rmse_cm", "rot_mae_deg", "rot_rmse_deg"):
                # pooled over trials and rings: the per-trial ring spread and the trial means
                means = np.array([r[key] for r in sel])
                stds = np.array([r[key + "_std"] for r in sel])
                pooled_std = float(np.sqrt(np.mean(stds**2 + (means - means.mean()) ** 2)))
                cells.append(f"{means.mean():.3f} +- {pooled_std:.3f}")
            touched = sum(1 for r in sel if r.get("contact_steps"))
            print(f"  {scene}   " + "   ".join(cells) + f"   {len(sel)}   {touched}/{len(sel)}")
    for sim in dict.fromkeys(r.get("simulator", "kinematic") for r in rows):
        full = [r for r in rows if r["variant"] == "full" and r.get("simulator", "kinematic") == sim]
        if full:
            _print_anomalies(sim, full)
    print(f"\nseed 001 Table II, S0 with strain: {SEED['S0'][0]} cm MAE, {SEED['S0'][2]} deg MAE")


def _print_anomalies(sim: str, full: list[dict]) -> None:
    """Anomaly precision and recall per scene, pooled over trials."""
    if full:
        print(f"\n{sim} anomaly detection (full): scene  precision  recall  flagged  points on added objects")
        for scene in sorted({r["scene"] for r in full}):
            sel = [r for r in full if r["scene"] == scene]
            flagged = sum(r["anomalies"] for r in sel)
            on_added = sum(r["points_on_added_objects"] for r in sel)
            tp = sum((r["anomaly_precision"] or 0.0) * r["anomalies"] for r in sel)
            prec = f"{tp / flagged:.3f}" if flagged else "-"
            rec = f"{tp / on_added:.3f}" if on_added else "-"
            print(f"  {scene}   {prec}   {rec}   {flagged}   {on_added}")


if __name__ == "__main__":
    sys.exit(main())
