"""``shape-sensing demo growing``: a tip-growing robot planned to a random goal and grown there step by step.

Robot A of the seed paper (Rc = 10 cm; one 0.077 cm, 0.45 deg layer per
step, so its real bending radius is 9.855 cm). A random goal ``--distance``
Rc away is planned with the 3D Dubins planner and grown both open loop (the
paper) and closed loop (re-planning from the reached pose). The bag holds
what the ``growth_planner`` node publishes plus the growth itself:

* ``/growing/plan/path`` (nav_msgs/Path) and ``/growing/plan/markers``
  (visualization_msgs/MarkerArray) once, at the start;
* ``/tf``: ``growing_base -> growing_tip``, the closed-loop tip as it grows;
* ``/growing/body/path`` (nav_msgs/Path, the grown body) and
  ``/growing/body/markers`` (its tube), about once per second.

Simulated time is compressed: the whole growth takes ``--duration`` seconds
of bag time (the real robot would take hours at 18 s per layer).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np

from shape_sensing.demos.common import (
    DemoOutputs,
    Progress,
    StopSignals,
    add_common_arguments,
    positive_float,
    print_metrics,
)
from shape_sensing.estimators.growth import direction_from_angles, tip_frame
from shape_sensing.io.bag import BagWriter
from shape_sensing.messages import common as msgs
from shape_sensing.messages import growth as gmsgs
from shape_sensing.planning.executor import RC, ROBOT_A
from shape_sensing.planning.growth_planner import SCHEMA, GrowthPlanner
from shape_sensing.types import ShapeEstimate, TransformStamped

__all__ = ["add_arguments", "run", "run_demo"]

NS = "/growing"
BASE, TIP = "growing_base", "growing_tip"
BODY_RADIUS = 0.022  # m, the seed robot's rt


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of the growing demo."""
    add_common_arguments(parser, default_out="out/growing", default_duration=30.0)
    parser.add_argument("--distance", type=positive_float, default=8.0, help="start-goal distance in Rc (default 8)")
    parser.add_argument(
        "--rate", type=positive_float, default=50.0, help="TF rate of the tip in bag time, Hz (default 50)"
    )


def _random_goal(seed: int, distance: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    th = rng.uniform(-math.pi, math.pi, 2)
    ga = rng.uniform(-math.pi / 3, math.pi / 3, 2)
    u = rng.normal(size=3)
    pe = distance * RC * u / np.linalg.norm(u)
    return tip_frame(np.zeros(3), th[0], ga[0]), pe, direction_from_angles(th[1], ga[1])


def run_demo(
    out: Path,
    *,
    duration: float = 30.0,
    seed: int = 0,
    distance: float = 8.0,
    rate: float = 50.0,
    distro: str = "jazzy",
    progress: bool = True,
    picture: bool = True,
) -> dict[str, Any]:
    """Run the demo; return the metrics. Writes ``out/growing.mcap`` and ``out/growing.png``."""
    if not (math.isfinite(duration) and duration > 0):
        raise ValueError(f"--duration {duration}: expected a positive number of seconds")
    if not (math.isfinite(distance) and 0 < distance <= 100):
        raise ValueError(f"--distance {distance}: expected 0 < distance <= 100 (in Rc)")
    if not (math.isfinite(rate) and 1 <= rate <= 1000):
        raise ValueError(f"--rate {rate}: expected 1..1000 Hz")
    T0, pe, ve = _random_goal(seed, distance)
    base = SCHEMA.defaults() | {
        "radius": RC, "step_length": ROBOT_A.step_length, "bend_per_step": ROBOT_A.bend_per_step,
        "plan_frame": BASE, "tip_frame": TIP,
    }  # fmt: skip
    results = {}
    for mode in ("open", "closed"):
        planner = GrowthPlanner(base | {"closed_loop": mode == "closed"})
        results[mode] = planner.plan(pe, ve, T0)
    grown = results["closed"]
    poses = grown.execution.poses
    n_steps = len(poses) - 1
    stamps = (np.arange(len(poses)) * (duration / max(n_steps, 1)) * 1e9).astype(np.int64)
    tf_every = max(1, round(len(poses) / (duration * rate)))
    body_every = tf_every * max(1, round(rate))  # about once per second of bag time
    prog = Progress("growing demo", len(poses), enabled=progress)
    # Written under temporary names and moved into place at the end: a crash or a signal leaves the previous
    # outputs as they were and what was recorded as a readable growing.partial.mcap.
    with DemoOutputs(out, "growing") as outputs:
        with StopSignals() as stop, BagWriter(outputs.path(".mcap"), distro=distro) as writer:
            f = writer.factory
            # The launch file's world -> growing_base placement, so the bag connects in RViz.
            static = TransformStamped(0, "world", BASE, np.eye(4))
            writer.write("/tf_static", msgs.tf_message([static], f), 0, qos="static")
            writer.write(f"{NS}/plan/path", msgs.path_msg(0, BASE, grown.frames, f), 0)
            markers = gmsgs.plan_markers(0, BASE, grown.plan, executed=poses[:, :3, 3], factory=f)
            writer.write(f"{NS}/plan/markers", markers, 0)
            indices = list(range(0, len(poses), tf_every))
            if indices[-1] != len(poses) - 1:
                indices.append(len(poses) - 1)  # the tip at the end of growth is always in the bag
            stamp = 0
            for i in indices:
                if stop.mark_partial(writer, stamp * 1e-9):
                    break
                stamp = int(stamps[i])
                tf = TransformStamped(stamp, BASE, TIP, poses[i])
                writer.write("/tf", msgs.tf_message([tf], f), stamp)
                if i % body_every == 0 or i == len(poses) - 1:
                    body = poses[: i + 1 : max(1, (i + 1) // 300)]
                    if len(body) >= 2:
                        writer.write(f"{NS}/body/path", msgs.path_msg(stamp, BASE, body, f), stamp)
                        shape = ShapeEstimate(
                            stamp_ns=stamp, parent_frame=BASE, frame_ids=[TIP], poses=poses[i][None],
                            position_covariance=None, backbone=body[:, :3, 3], radius=BODY_RADIUS,
                            length=float(i * ROBOT_A.step_length),
                        )  # fmt: skip
                        writer.write(f"{NS}/body/markers", msgs.shape_markers(shape, ns="body", factory=f), stamp)
                prog.update(i)
        prog.close()
        if stop.requested:
            raise outputs.interrupted(stop.requested, stamp * 1e-9, duration)
        metrics: dict[str, Any] = {
            "word": grown.plan.word,
            "case": grown.plan.case,
            "path_length_m": grown.plan.length,
            "path_length_rc": grown.plan.length / RC,
            "planning_time_ms": grown.planning_time_s * 1e3,
            "steps": grown.execution.steps,
            "k": ROBOT_A.k(RC),
        }
        for mode, res in results.items():
            e = res.execution.errors
            metrics |= {
                f"{mode}_position_norm": e["position_norm"],
                f"{mode}_position_mm": e["position"] * 1e3,
                f"{mode}_heading_deg": e["heading_deg"],
                f"{mode}_pitch_deg": e["pitch_deg"],
            }
        metrics["replans"] = grown.execution.replans
        metrics["bag"] = str(outputs.final(".mcap"))
        if picture:
            metrics["picture"] = str(outputs.final(".png"))
            _draw(outputs.path(".png"), results, pe, ve, T0)
        outputs.commit()
    return metrics


def _draw(path: Path, results: dict[str, Any], pe: np.ndarray, ve: np.ndarray, T0: np.ndarray) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plan = results["closed"].plan
    fig = plt.figure(figsize=(11, 5))
    ax = fig.add_subplot(1, 2, 1, projection="3d")
    for seg in plan.segments:
        if seg.length <= 0:
            continue
        n = max(2, int(seg.length / 0.002))
        s = np.linspace(0, seg.length, n)
        p0, t0, nv = (np.asarray(v) for v in (seg.position, seg.direction, seg.normal))
        if seg.kind == "S":
            pts = p0 + s[:, None] * t0
        else:
            b = np.cross(nv, t0) if seg.kind == "L" else np.cross(t0, nv)
            a = s / plan.radius
            pts = p0 + plan.radius * (np.sin(a)[:, None] * t0 + (1 - np.cos(a))[:, None] * b)
        ax.plot(*pts.T, color="tab:blue" if seg.kind == "S" else "tab:red", lw=2)
    for mode, color in (("open", "tab:orange"), ("closed", "tab:green")):
        p = results[mode].execution.poses[:, :3, 3]
        ax.plot(*p.T, color=color, lw=1, label=f"grown, {mode} loop")
    L = 0.5 * plan.radius
    ax.quiver(*T0[:3, 3], *(L * T0[:3, 2]), color="m")
    ax.quiver(*pe, *(L * ve), color="k")
    ax.scatter(*plan.waypoint, color="k", s=12)
    ax.set_title(f"{plan.word} ({plan.case}), {plan.length:.2f} m")
    ax.legend(fontsize=7)
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_zlabel("z (m)")
    ax2 = fig.add_subplot(1, 2, 2)
    for mode, color in (("open", "tab:orange"), ("closed", "tab:green")):
        poses = results[mode].execution.poses
        d = np.linalg.norm(poses[:, :3, 3] - pe, axis=1)
        ax2.semilogy(np.arange(len(d)), np.maximum(d, 1e-6), color=color, label=f"{mode} loop")
    ax2.set_xlabel("growth step")
    ax2.set_ylabel("distance to goal (m)")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    """CLI entry."""
    metrics = run_demo(
        args.out, duration=args.duration, seed=args.seed, distance=args.distance, rate=args.rate,
        distro=args.distro, progress=not args.json,
    )  # fmt: skip
    print_metrics(metrics, args.json, title="growing demo (robot A)")
    return 0
