"""``shape-sensing figure4``: the seed paper's Figure 4 (robot A) reproduced, open and closed loop.

Robot A: planning radius ``Rc = 10 cm``; the robot deposits one layer every
``t = 18 s`` growing ``g = 0.0043 cm/s`` and bending ``phi = 0.025 deg/s``
(0.077 cm and 0.45 deg per layer, ``k = g t / Rc = 0.0077``). Its real bending
radius ``g / phi = 9.855 cm`` differs from the planning radius; with it the
open-loop errors land on the paper's, while a robot bending at exactly
``Rc`` (reported as "exact radius") errs only by step rounding.

For each group (start-goal distance 4, 8, 16, 32 Rc) ``--pairs`` random
start/goal poses: positions a random direction apart, headings uniform,
pitches uniform in +-60 deg (heading is ill-defined near vertical, so the
poles are left out). Errors are Eq. 26-28. The error-vs-k trend (Figure 8D)
varies the step ``g t`` at fixed ``Rc`` (bending at exactly ``Rc``), averaging
the 8, 16 and 32 Rc groups as the paper does.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from shape_sensing.cli.scoring import spread_stats
from shape_sensing.estimators.growth import direction_from_angles, tip_frame
from shape_sensing.planning.executor import RC, ROBOT_A, StepModel, execute

__all__ = ["PAPER", "ROBOT_A", "add_arguments", "error_vs_k", "figure4", "run"]

GROUPS = (4, 8, 16, 32)
K_VALUES = (0.0077, 0.02, 0.05, 0.1, 0.2, 0.5)

# The paper's figures (Figure 4, robot A; Figure 8D): mean +- SD.
PAPER: dict[str, Any] = {
    "position_norm": {"4": (0.0084, 0.0069), "32": (0.0198, 0.0105)},
    "heading_deg": (1.89, 0.28),
    "pitch_deg": (1.77, 0.09),
    "k_trend": {
        "robot A (k = 0.0077)": (0.0077, "0.0084 .. 0.0198"),
        "robot C (k = 0.53)": (2.0 / 3.8, "0.1655 +- 0.1089"),
    },
}

_METRICS = ("position_norm", "heading_deg", "pitch_deg", "direction_deg")


def _pairs(n: int, k: float, rng: np.random.Generator) -> list[tuple[Any, Any, Any]]:
    out = []
    for _ in range(n):
        th = rng.uniform(-math.pi, math.pi, 2)
        ga = rng.uniform(-math.pi / 3, math.pi / 3, 2)
        u = rng.normal(size=3)
        pe = k * RC * u / np.linalg.norm(u)
        out.append((tip_frame(np.zeros(3), th[0], ga[0]), pe, direction_from_angles(th[1], ga[1])))
    return out


def figure4(seed: int = 0, pairs: int = 50, progress: Callable[[], None] | None = None) -> dict[str, Any]:
    """Run the Figure 4 groups; return per group and mode the error statistics (``progress()`` after each pair)."""
    rng = np.random.default_rng(seed)
    exact = StepModel(ROBOT_A.step_length)
    groups: dict[str, Any] = {}
    for k in GROUPS:
        runs: dict[str, list[dict[str, float]]] = {"open": [], "closed": [], "open_exact_radius": []}
        lengths = []
        for T0, pe, ve in _pairs(pairs, k, rng):
            o = execute(T0, pe, ve, RC, ROBOT_A)
            runs["open"].append(o.errors)
            runs["closed"].append(execute(T0, pe, ve, RC, ROBOT_A, closed_loop=True).errors)
            runs["open_exact_radius"].append(execute(T0, pe, ve, RC, exact).errors)
            lengths.append(o.plan.length / RC)
            if progress is not None:
                progress()
        groups[str(k)] = {
            mode: {m: spread_stats([e[m] for e in errs]) for m in _METRICS} for mode, errs in runs.items()
        } | {"path_length_rc": spread_stats(lengths)}
    return {"robot": "A", "rc_m": RC, "step_m": ROBOT_A.step_length, "bend_per_step_deg": math.degrees(
        ROBOT_A.bend_per_step or 0.0), "pairs": pairs, "seed": seed, "groups": groups}  # fmt: skip


def error_vs_k(
    seed: int = 0,
    pairs: int = 15,
    k_values: tuple[float, ...] = K_VALUES,
    progress: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """Mean normalised position error against ``k = g t / Rc`` (groups 8, 16, 32 Rc pooled)."""
    out = []
    for kk in k_values:
        rng = np.random.default_rng(seed)
        model = StepModel(kk * RC)
        o, c = [], []
        for group in GROUPS[1:]:
            for T0, pe, ve in _pairs(pairs, group, rng):
                o.append(execute(T0, pe, ve, RC, model).errors["position_norm"])
                c.append(execute(T0, pe, ve, RC, model, closed_loop=True).errors["position_norm"])
                if progress is not None:
                    progress()
        out.append({"k": kk, "open": spread_stats(o), "closed": spread_stats(c)})
    return out


def _pm(s: dict[str, float], digits: int = 4) -> str:
    return f"{s['mean']:.{digits}f} ± {s['sd']:.{digits}f}"


def format_table(result: dict[str, Any], trend: list[dict[str, Any]]) -> str:
    """The Figure 4 table beside the paper's figures, then the k trend."""
    lines = [
        f"Figure 4, robot A: Rc = {result['rc_m'] * 100:.0f} cm, step {result['step_m'] * 100:.4f} cm, "
        f"bend {result['bend_per_step_deg']:.2f} deg/step, {result['pairs']} pairs per group, seed {result['seed']}",
        "",
        "normalised position error (Eq. 26), mean ± SD",
        f"  {'group':>6}  {'paper':>17}  {'open loop':>17}  {'closed loop':>17}  "
        f"{'open, exact radius':>18}  {'l / Rc':>6}",
    ]
    for k, g in result["groups"].items():
        paper = PAPER["position_norm"].get(k)
        ptxt = f"{paper[0]:.4f} ± {paper[1]:.4f}" if paper else "(between)"
        lines.append(
            f"  {k + ' Rc':>6}  {ptxt:>17}  {_pm(g['open']['position_norm']):>17}  "
            f"{_pm(g['closed']['position_norm']):>17}  {_pm(g['open_exact_radius']['position_norm']):>18}  "
            f"{g['path_length_rc']['mean']:6.2f}"
        )
    for metric, title in (("heading_deg", "heading error (Eq. 27), deg"), ("pitch_deg", "pitch error (Eq. 28), deg")):
        p = PAPER[metric]
        lines += ["", f"{title}, mean ± SD (paper, all groups: {p[0]:.2f} ± {p[1]:.2f})"]
        lines.append(f"  {'group':>6}  {'open loop':>15}  {'closed loop':>15}  {'open, exact radius':>18}")
        for k, g in result["groups"].items():
            lines.append(
                f"  {k + ' Rc':>6}  {_pm(g['open'][metric], 2):>15}  {_pm(g['closed'][metric], 2):>15}  "
                f"{_pm(g['open_exact_radius'][metric], 2):>18}"
            )
        pooled_o = np.mean([g["open"][metric]["mean"] for g in result["groups"].values()])
        pooled_c = np.mean([g["closed"][metric]["mean"] for g in result["groups"].values()])
        lines.append(f"  {'all':>6}  {pooled_o:15.2f}  {pooled_c:15.2f}")
    lines += [
        "",
        "position error vs k = g t / Rc (8, 16, 32 Rc pooled; bending at exactly Rc), mean ± SD",
        f"  {'k':>7}  {'open loop':>17}  {'closed loop':>17}",
    ]
    for row in trend:
        lines.append(f"  {row['k']:7.4f}  {_pm(row['open']):>17}  {_pm(row['closed']):>17}")
    lines.append("  paper: " + "; ".join(f"{name}: {v[1]}" for name, v in PAPER["k_trend"].items()))
    return "\n".join(lines)


def _plot(result: dict[str, Any], trend: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(16, 3.8))
    x = [int(k) for k in result["groups"]]
    for ax, metric, title in zip(
        axes[:3],
        ("position_norm", "heading_deg", "pitch_deg"),
        ("position error / l", "heading (deg)", "pitch (deg)"),
        strict=True,
    ):
        for mode, color in (("open", "tab:red"), ("closed", "tab:blue"), ("open_exact_radius", "tab:gray")):
            m = [g[mode][metric]["mean"] for g in result["groups"].values()]
            s = [g[mode][metric]["sd"] for g in result["groups"].values()]
            ax.errorbar(x, m, yerr=s, marker="o", capsize=3, color=color, label=mode.replace("_", " "))
        ax.set_xscale("log", base=2)
        ax.set_xlabel("|Ps - Pe| / Rc")
        ax.set_title(title)
    for k, (m, s) in PAPER["position_norm"].items():
        axes[0].errorbar([int(k)], [m], yerr=[s], marker="s", color="k", capsize=3, label="paper" if k == "4" else None)
    axes[1].axhspan(PAPER["heading_deg"][0] - PAPER["heading_deg"][1], sum(PAPER["heading_deg"]), color="k", alpha=0.1)
    axes[2].axhspan(PAPER["pitch_deg"][0] - PAPER["pitch_deg"][1], sum(PAPER["pitch_deg"]), color="k", alpha=0.1)
    axes[0].legend(fontsize=7)
    ks = [r["k"] for r in trend]
    axes[3].errorbar(ks, [r["open"]["mean"] for r in trend], yerr=[r["open"]["sd"] for r in trend], marker="o",
                     color="tab:red", label="open")  # fmt: skip
    axes[3].errorbar(ks, [r["closed"]["mean"] for r in trend], yerr=[r["closed"]["sd"] for r in trend], marker="o",
                     color="tab:blue", label="closed")  # fmt: skip
    axes[3].errorbar([2.0 / 3.8], [0.1655], yerr=[0.1089], marker="s", color="k", capsize=3, label="paper robot C")
    axes[3].set_xscale("log")
    axes[3].set_yscale("log")
    axes[3].set_xlabel("k = g t / Rc")
    axes[3].set_title("position error / l vs k")
    axes[3].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """CLI options of ``shape-sensing figure4``."""
    from shape_sensing.demos.common import non_negative_int, positive_int

    parser.add_argument("--seed", type=non_negative_int, default=0, help="random seed, >= 0 (default 0)")
    parser.add_argument(
        "--pairs", type=positive_int, default=50, help="start/goal pairs per group (default 50, as the paper)"
    )
    parser.add_argument(
        "--k-pairs", type=positive_int, default=15, help="pairs per group for the k trend (default 15)"
    )
    parser.add_argument("--json", action="store_true", help="print the results as one JSON object")
    parser.add_argument("--out", type=Path, default=None, help="also write figure4.json and figure4.png here")


def run(args: argparse.Namespace) -> int:
    """Run the reproduction and print the table (or JSON)."""
    if args.pairs < 2 or args.k_pairs < 2:
        raise ValueError(f"--pairs = {args.pairs}, --k-pairs = {args.k_pairs}: expected at least 2 each")
    from shape_sensing.demos.common import Progress

    total = len(GROUPS) * args.pairs + len(K_VALUES) * len(GROUPS[1:]) * args.k_pairs
    with Progress("figure4", total, enabled=not args.json, unit="pair") as bar:
        done = [0]

        def step() -> None:
            done[0] += 1
            bar.update(done[0])

        result = figure4(args.seed, args.pairs, step)
        trend = error_vs_k(args.seed, args.k_pairs, progress=step)
    payload = {"figure4": result, "error_vs_k": trend, "paper": PAPER}
    if args.json:
        print(json.dumps(payload, sort_keys=True))
    else:
        print(format_table(result, trend))
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "figure4.json").write_text(json.dumps(payload, indent=1, sort_keys=True))
        _plot(result, trend, args.out / "figure4.png")
        if not args.json:
            print(f"\nwrote {args.out / 'figure4.json'} and {args.out / 'figure4.png'}")
    return 0
