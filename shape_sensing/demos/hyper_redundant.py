"""``shape-sensing demo hyper-redundant``: simulated n-module robot -> WT901 bytes -> rigid-module shape.

Every sensor's reading goes through the protocol: the WT901 emulator encodes
it into frames, a line-fault injector flips, drops and inserts bytes, and the
driver's parser and assembler recover the samples the estimator sees. The bag
holds the raw IMU topics, the estimates and the ground truth, so
``shape-sensing replay`` re-estimates it and reproduces the metrics.
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from shape_sensing.config import param_file_text
from shape_sensing.demos.common import (
    DemoOutputs,
    Progress,
    StopSignals,
    add_common_arguments,
    positive_float,
    print_metrics,
    probability,
)
from shape_sensing.drivers.wt901 import RATE_CODES
from shape_sensing.estimators.rigid_module import SCHEMA as ESTIMATOR_SCHEMA
from shape_sensing.estimators.rigid_module import RigidModuleEstimate
from shape_sensing.io.bag import BagWriter
from shape_sensing.messages import common as msgs
from shape_sensing.messages import hyper_redundant as hmsgs
from shape_sensing.pipelines.hyper_redundant import (
    DEFAULT_NAMESPACE,
    EstimateWriter,
    HyperRedundantTracker,
    Scores,
    resolve_topic,
)
from shape_sensing.sim.hyper_redundant import EmulatedSensors, HyperRedundantSim, SimSnapshot
from shape_sensing.types import TransformStamped

__all__ = ["add_arguments", "run", "run_demo"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of the hyper-redundant demo."""
    add_common_arguments(parser, default_out="out/hyper-redundant", default_duration=20.0)
    parser.add_argument("--modules", type=int, default=4, help="number of modules, 4..20 (default 4, the seed's rig)")
    parser.add_argument("--rate", type=positive_float, default=100.0, help="WT901 output rate in Hz (default 100)")
    parser.add_argument(
        "--heading-mode", choices=("roll_pitch", "full"), default="roll_pitch",
        help="ignore the magnetometer yaw and solve headings from the joints (default), or use it",
    )  # fmt: skip
    parser.add_argument(
        "--byte-error-rate", type=probability, default=1e-4,
        help="probability per byte of a bit flip and, separately, of a lost byte on the UART (default 1e-4)",
    )  # fmt: skip


def run_demo(
    out: Path,
    *,
    modules: int = 4,
    duration: float = 20.0,
    seed: int = 0,
    rate: float = 100.0,
    heading_mode: str = "roll_pitch",
    byte_error_rate: float = 1e-4,
    distro: str = "jazzy",
    progress: bool = True,
    picture: bool = True,
) -> dict[str, Any]:
    """Run the demo; return the metrics. Writes ``out/hyper-redundant.mcap`` and ``out/hyper-redundant.png``."""
    if not (math.isfinite(duration) and duration > 0):
        raise ValueError(f"--duration {duration}: expected a finite positive number of seconds")
    if not 4 <= modules <= 20:
        raise ValueError(f"--modules {modules}: expected 4..20")
    if float(rate) not in RATE_CODES:
        raise ValueError(f"--rate {rate}: expected a WT901 output rate, one of {sorted(RATE_CODES)} Hz")
    if not 0.0 <= byte_error_rate < 0.1:
        raise ValueError(f"--byte-error-rate {byte_error_rate}: expected 0 <= rate < 0.1")
    rods_s = 1.0
    sim = HyperRedundantSim(n_modules=modules, seed=seed, rods_s=rods_s)
    # what the run does, in the parameters the bag records: a node started on them calibrates on the same rods hold
    params = ESTIMATOR_SCHEMA.defaults() | {"n_modules": modules, "heading_mode": heading_mode,
                                            "calibrate_on_start": True, "calibration_duration": rods_s}  # fmt: skip
    tracker = HyperRedundantTracker(params, rods_s=rods_s)
    ns = DEFAULT_NAMESPACE
    n = modules + 1
    sensors = EmulatedSensors(n, rate_hz=rate, byte_error_rate=byte_error_rate, seed=seed + 1)
    imu_topics = [resolve_topic(f"imu/platform_{i}", ns) for i in range(n)]
    names = hmsgs.joint_names(modules)
    scores = Scores()
    truth_by_stamp: dict[int, SimSnapshot] = {}
    snapshots: list[tuple[RigidModuleEstimate, SimSnapshot]] = []
    tips: list[tuple[float, np.ndarray, np.ndarray]] = []
    snap_every = max((duration - rods_s) / 4.0, 1e-9)
    next_snap = rods_s + 0.5
    steps = round(duration * rate) + 1
    samples_in = 0
    wall0 = time.perf_counter()
    prog = Progress("hyper-redundant demo", steps, enabled=progress)
    # Written under temporary names and moved into place at the end: a crash or a signal leaves the previous
    # outputs as they were and what was recorded as a readable hyper-redundant.partial.mcap.
    with DemoOutputs(out, "hyper-redundant", (".mcap", ".png", ".params.yaml")) as outputs:
        with StopSignals() as stop, BagWriter(outputs.path(".mcap"), distro=distro) as writer:
            outputs.record_parameters(writer, ESTIMATOR_SCHEMA.node, tracker.params)
            f = writer.factory
            est_writer = EstimateWriter(writer, ns)
            # The launch files' world -> base placement, so the bag connects in RViz as the live robot does.
            base = tracker.params["frame_prefix"] + tracker.params["base_frame"]
            static = TransformStamped(0, "world", base, np.eye(4))
            writer.write("/tf_static", msgs.tf_message([static], f), 0, qos="static")

            def consume(estimates: list[RigidModuleEstimate]) -> None:
                nonlocal next_snap
                for est in estimates:
                    est_writer.write(est)
                    snap = truth_by_stamp.get(est.shape.stamp_ns)
                    if snap is None:
                        continue
                    scores.add(est, snap.poses[-1], snap.theta)
                    tips.append((snap.t, est.shape.tip_pose[:3, 3].copy(), snap.poses[-1, :3, 3].copy()))
                    if snap.t >= next_snap:
                        snapshots.append((est, snap))
                        next_snap += snap_every

            t = 0.0
            for k in range(steps):
                if stop.requested:
                    break
                t = k / rate
                stamp = round(t * 1e9)
                snap = sim.snapshot(t)
                truth_by_stamp = {stamp: snap} | {s: v for s, v in truth_by_stamp.items() if stamp - s < 200_000_000}
                writer.write(
                    resolve_topic("truth/joint_states", ns),
                    hmsgs.joint_state_msg(stamp, names, snap.theta, f),
                    stamp,
                )
                writer.write(
                    resolve_topic("truth/end_effector", ns),
                    hmsgs.pose_stamped_msg(stamp, "base_link", snap.poses[-1], f),
                    stamp,
                )
                for i, sample in sensors.samples(snap, stamp):
                    m = msgs.imu_to_msg(sample, f)
                    writer.write(imu_topics[i], m, stamp, qos="sensor")
                    samples_in += 1
                    consume(tracker.push_imu(msgs.imu_from_msg(m), i))
                prog.update(k + 1)
            if not stop.mark_partial(writer, t):
                consume(tracker.flush())
        prog.close()
        if stop.requested:
            raise outputs.interrupted(stop.requested, t, duration)
        if tracker.calibrated and tracker.calibration_refused is None and tracker.estimator.bias.any():
            # The node run on <stem>.params.yaml (config:=) starts with the rods calibration this run made (the
            # bag keeps the parameters the run started with: replay calibrates again on the same rods hold).
            bias = [round(float(v), 9) for v in tracker.estimator.bias.reshape(-1)]
            outputs.path(".params.yaml").write_text(param_file_text(
                ESTIMATOR_SCHEMA.node, dict(tracker.params) | {"calibration_bias": bias, "calibrate_on_start": False},
                f"{ESTIMATOR_SCHEMA.node} parameters of hyper-redundant.mcap (shape-sensing demo hyper-redundant), "
                f"with the rods calibration of its first {rods_s:g} s",
            ))  # fmt: skip
        runtime = time.perf_counter() - wall0
        if tracker.stats.estimates == 0:
            # a result that means nothing is an error, not "estimates 0" and rc 0 (what was recorded is kept)
            raise ValueError(
                f"--duration {duration:g} s: no estimate was made from {samples_in} samples of {modules} modules; "
                "give a longer --duration (a few seconds)"
            )
        metrics: dict[str, Any] = {
            "modules": modules,
            "heading_mode": heading_mode,
            "duration_s": duration,
            "sensor_rate_hz": rate,
            "d1_m": tracker.config.d1,
            "d2_m": tracker.config.d2,
            **sensors.stats(),
            "samples": samples_in,
            "samples_expected": steps * n,
            "estimates": tracker.stats.estimates,
            **scores.metrics(),
            "runtime_s": round(runtime, 3),
            "bag": str(outputs.final(".mcap")),
        }
        if picture:
            _plot(outputs.path(".png"), snapshots, tips, modules, heading_mode)
            metrics["picture"] = str(outputs.final(".png"))
        outputs.commit()
    return metrics


def _plot(
    path: Path,
    snapshots: list[tuple[RigidModuleEstimate, SimSnapshot]],
    tips: list[tuple[float, np.ndarray, np.ndarray]],
    modules: int,
    heading_mode: str,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(15, 5))
    ax3 = fig.add_subplot(1, 3, 1, projection="3d")
    colors = plt.cm.viridis(np.linspace(0, 0.9, max(len(snapshots), 1)))
    for (est, snap), c in zip(snapshots, colors, strict=False):
        truth_pts = snap.poses[:, :3, 3]
        ax3.plot(*truth_pts.T, "-", color=c, lw=3, alpha=0.35)
        ax3.plot(*est.shape.backbone.T, "--o", color=c, lw=1.2, ms=2, label=f"t={snap.t:.1f} s")
    ax3.set(xlabel="x (m)", ylabel="y (m)", zlabel="z (m)", title=f"{modules} modules (solid truth, dashed estimate)")
    ax3.legend(fontsize=7)
    ax = fig.add_subplot(1, 3, 2)
    if tips:
        est_tip = np.array([e for _, e, _ in tips])
        true_tip = np.array([g for _, _, g in tips])
        ax.plot(1000 * true_tip[:, 0], 1000 * true_tip[:, 1], "-", lw=3, alpha=0.4, label="truth")
        ax.plot(1000 * est_tip[:, 0], 1000 * est_tip[:, 1], "--", lw=1, label="estimate")
    ax.set(xlabel="x (mm)", ylabel="y (mm)", title="end effector, top view")
    ax.set_aspect("equal", adjustable="datalim")
    ax.legend(fontsize=8)
    ax.grid(True, alpha=0.3)
    ax = fig.add_subplot(1, 3, 3)
    if tips:
        tt = np.array([t for t, _, _ in tips])
        err = 1000 * np.linalg.norm(est_tip - true_tip, axis=1)
        ax.plot(tt, err, lw=1)
    ax.set(xlabel="time (s)", ylabel="tip position error (mm)", title=f"tip error ({heading_mode})")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    """CLI entry."""
    metrics = run_demo(
        args.out,
        modules=args.modules,
        duration=args.duration,
        seed=args.seed,
        rate=args.rate,
        heading_mode=args.heading_mode,
        byte_error_rate=args.byte_error_rate,
        distro=args.distro,
        progress=not args.json,
    )
    print_metrics(metrics, args.json, title=f"hyper-redundant demo ({args.modules} modules)")
    return 0
