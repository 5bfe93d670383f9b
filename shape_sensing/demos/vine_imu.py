"""``shape-sensing demo vine-imu``: simulated vine robot -> hinge-arc shape -> bag, picture, metrics."""

from __future__ import annotations

import argparse
import math
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

from shape_sensing.demos.common import (
    DemoOutputs,
    Progress,
    StopSignals,
    add_common_arguments,
    positive_float,
    positive_int,
    print_metrics,
)
from shape_sensing.estimators.hinge_arc import SCHEMA as ESTIMATOR_SCHEMA
from shape_sensing.estimators.straight_reference import capture_reference
from shape_sensing.io.bag import BagWriter
from shape_sensing.messages import common as msgs
from shape_sensing.pipelines.vine_imu import (
    DEFAULT_NAMESPACE,
    REFERENCE_HOW_KEY,
    REFERENCE_KEY,
    ShapeWriter,
    TipErrors,
    VineImuTracker,
    base_transforms,
    length_message,
    resolve_topic,
    truth_messages,
)
from shape_sensing.sim.vine import R_WORLD_BASE, SCENARIOS, VineSimConfig, VineSimulator, VineTruth
from shape_sensing.types import ImuSample, ShapeEstimate

__all__ = ["add_arguments", "run", "run_demo"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of the vine-imu demo."""
    add_common_arguments(parser, default_out="out/vine-imu", default_duration=60.0)
    parser.add_argument(
        "--scenario", choices=SCENARIOS, default="passive", help="seed-000 experiment (default passive)"
    )
    parser.add_argument(
        "--every-k", type=positive_int, default=1, help="use every k-th IMU (spacing re-analysis; default 1)"
    )
    parser.add_argument("--rate", type=positive_float, default=100.0, help="IMU rate in Hz (default 100)")
    parser.add_argument(
        "--register-level",
        action="store_true",
        help="read the IMUs as the BNO055 driver does: simulated BNO055 registers behind simulated TCA9548A muxes",
    )


def run_demo(
    out: Path,
    *,
    scenario: str = "passive",
    duration: float = 60.0,
    seed: int = 0,
    every_k: int = 1,
    rate: float = 100.0,
    distro: str = "jazzy",
    progress: bool = True,
    picture: bool = True,
    register_level: bool = False,
) -> dict[str, Any]:
    """Run the demo; returns the metrics. Writes ``out/vine-imu.mcap`` and ``out/vine-imu.png``."""
    if not (math.isfinite(duration) and duration > 0):
        raise ValueError(f"--duration {duration}: expected a finite positive number of seconds")
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"--rate {rate}: expected a finite positive rate in Hz")
    if every_k < 1:
        raise ValueError(f"--every-k {every_k}: expected an integer >= 1")
    sim = VineSimulator(VineSimConfig(scenario=scenario, duration=duration, seed=seed, rate=rate))
    n = sim.config.n_sensors
    imu_source: Callable[[float], list[ImuSample]] = sim.imu_samples
    if register_level:  # the same samples, through BNO055/TCA9548A register simulators and the real driver
        from shape_sensing.sim.register_level import RegisterLevelSource

        imu_source = RegisterLevelSource(sim.imu_samples, seed=seed)
    sensor_index = {name: i for i, name in enumerate(sim.sensor_names)}
    params = ESTIMATOR_SCHEMA.defaults() | {
        "imu_topics": [f"imu_{i:02d}/data" for i in range(n)],
        "every_k": every_k,
        # The base's placement is known (it is the world -> vine_base -> vine_imu_base transform below): sensor 0's
        # mounting is solved at the straight capture instead of assumed.
        "base_orientation_world": _placement_rpy(),
    }
    tracker = VineImuTracker(params)
    if scenario == "growth":
        # As on the robot: the straight reference is captured with the robot fully everted and held straight
        # before the run (sensors not yet everted ride inside reversed, so they cannot be captured during it).
        straight = sim.straight_samples(0.0)
        quats = np.array([s.orientation for s in straight])
        tracker.set_reference(
            capture_reference(
                quats,
                np.ones(n, dtype=bool),
                0,
                tracker.frame_ids,
                first_mount=tracker.config.first_mount,
                placement=tracker.config.base_placement,
            ),
            "captured before the run, robot fully everted and straight",
        )
    recorded_reference = tracker.estimator.reference
    ns = DEFAULT_NAMESPACE
    imu_topics = [resolve_topic(t, ns) for t in params["imu_topics"]]
    length_topic = resolve_topic(params["length_topic"], ns)
    errors = TipErrors()
    snapshots: list[tuple[ShapeEstimate, VineTruth]] = []
    snap_every = max(duration / 4.0, 1e-9)
    next_snap = 0.0
    err_t: list[float] = []
    truth_cache: dict[int, VineTruth] = {}
    steps = round(duration * rate) + 1
    wall0 = time.perf_counter()
    prog = Progress("vine-imu demo", steps, enabled=progress)
    t = 0.0
    # Written under temporary names and moved into place at the end: a crash or a signal leaves the previous
    # outputs as they were and what was recorded as a readable vine-imu.partial.mcap.
    with DemoOutputs(out, "vine-imu", (".mcap", ".png", ".params.yaml")) as outputs:
        with StopSignals() as stop, BagWriter(outputs.path(".mcap"), distro=distro) as writer:
            if scenario == "growth" and recorded_reference is not None:
                # The reference taken before the run, in the bag too: replay reproduces the run with it.
                writer.set_metadata(REFERENCE_KEY, recorded_reference.to_yaml_text())
                writer.set_metadata(REFERENCE_HOW_KEY, tracker.reference_status.split(":", 1)[0])
            outputs.record_parameters(writer, ESTIMATOR_SCHEMA.node, tracker.params)
            f = writer.factory
            shape_writer = ShapeWriter(writer, ns, tracker.params["marker_rate"])
            writer.write(
                "/tf_static",
                msgs.tf_message(base_transforms(0, _world_base(), sim.config.frame_prefix), f),
                0,
                qos="static",
            )

            def consume(estimates: list[ShapeEstimate]) -> None:
                nonlocal next_snap
                for est in estimates:
                    shape_writer.write(est)
                    # Nearest truth within 20 ms: register-level reads are stamped a few ms after the step,
                    # and replay matches the same way.
                    near = min(truth_cache, key=lambda s: abs(s - est.stamp_ns), default=None)
                    truth = truth_cache[near] if near is not None and abs(near - est.stamp_ns) <= 20_000_000 else None
                    if truth is None:
                        continue
                    errors.add(est.stamp_ns, est.tip_pose[:3, 3], truth.tip_pose[:3, 3], truth.length)
                    err_t.append(est.stamp_ns * 1e-9)
                    if est.stamp_ns * 1e-9 >= next_snap:
                        snapshots.append((est, truth))
                        next_snap += snap_every

            for k in range(steps):
                if stop.requested:
                    break
                t = k / rate
                stamp = round(t * 1e9)
                truth = sim.truth(t)
                truth_cache = {stamp: truth} | {s: v for s, v in truth_cache.items() if stamp - s < 100_000_000}
                velocity = (sim.length(t + 1e-3) - sim.length(t)) / 1e-3
                length_msg = length_message(stamp, sim.base_frame, truth.length, velocity, f)
                writer.write(length_topic, length_msg, stamp, qos="sensor")
                consume(tracker.push_length(stamp, float(length_msg.position[0])))
                for sample in imu_source(t):
                    i = sensor_index[sample.frame_id]
                    m = msgs.imu_to_msg(sample, f)
                    writer.write(imu_topics[i], m, stamp, qos="sensor")
                    consume(tracker.push_imu(i, msgs.imu_from_msg(m)))
                full = k % max(1, int(rate / 10)) == 0
                for topic, m in truth_messages(truth, stamp, sim.base_frame, f, full=full):
                    writer.write(resolve_topic(topic, ns), m, stamp)
                prog.update(k + 1)
            if not stop.mark_partial(writer, t):
                consume(tracker.flush())
        prog.close()
        if stop.requested:
            raise outputs.interrupted(stop.requested, t, duration)
        runtime = time.perf_counter() - wall0
        metrics: dict[str, Any] = {
            "scenario": scenario,
            "duration_s": duration,
            "sensors": n,
            "sensors_used": int(tracker.config.used.sum()),
            "straight_reference": tracker.reference_status,
            "estimates": tracker.stats.estimates,
            **errors.metrics(),
            "runtime_s": round(runtime, 3),
            "bag": str(outputs.final(".mcap")),
        }
        if register_level:
            metrics["imu_source"] = "register-level (BNO055 driver over simulated I2C muxes)"
        if picture:
            _plot(outputs.path(".png"), snapshots, np.asarray(err_t), np.asarray(errors.errors), scenario)
            metrics["picture"] = str(outputs.final(".png"))
        outputs.commit()
    return metrics


def _placement_rpy() -> list[float]:
    """Roll, pitch, yaw of the base in the world (pitch is -90 deg: the robot lies along the world x axis)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # gimbal lock: the rotation is still exact
        return [float(v) for v in Rotation.from_matrix(R_WORLD_BASE).as_euler("xyz")]


def _world_base() -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = R_WORLD_BASE
    return T


def _plot(
    path: Path, snapshots: list[tuple[ShapeEstimate, VineTruth]], t: np.ndarray, err: np.ndarray, scenario: str
) -> None:
    import matplotlib.pyplot as plt

    fig = _figure(snapshots, t, err, scenario)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _figure(snapshots: list[tuple[ShapeEstimate, VineTruth]], t: np.ndarray, err: np.ndarray, scenario: str) -> Any:
    """The demo picture, readable on its own: legends for truth, estimate, IMU dots and snapshot times."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    fig, axes = plt.subplots(1, 3, figsize=(16, 5.2))
    colors = plt.cm.viridis(np.linspace(0, 0.9, max(len(snapshots), 1)))
    for (est, truth), c in zip(snapshots, colors, strict=False):
        ax = axes[0]
        ax.plot(truth.backbone[:, 2], truth.backbone[:, 1], "-", color=c, lw=3.0, alpha=0.4)
        ax.plot(est.backbone[:, 2], est.backbone[:, 1], "--", color=c, lw=1.5)
        ax.plot(est.poses[:-1, 2, 3], est.poses[:-1, 1, 3], "o", color=c, ms=3)
        # Out of plane: the centreline's x (up), in mm, along its own arc length; the truth stays at 0.
        for pts, style, lw, alpha in ((truth.backbone, "-", 3.0, 0.4), (est.backbone, "--", 1.5, 1.0)):
            arc = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(pts, axis=0), axis=1))])
            axes[1].plot(arc, 1e3 * pts[:, 0], style, color=c, lw=lw, alpha=alpha)
    times = [
        Line2D([], [], color=c, lw=2, label=f"t = {est.stamp_ns * 1e-9:.0f} s")
        for (est, _), c in zip(snapshots, colors, strict=False)
    ]
    kinds = [
        Line2D([], [], color="0.4", lw=3.0, alpha=0.4, label="truth (simulator)"),
        Line2D([], [], color="0.2", lw=1.5, ls="--", label="estimate (hinge-arc)"),
        Line2D([], [], color="0.2", marker="o", ms=4, ls="none", label="estimated IMU positions"),
    ]
    axes[0].set(xlabel="z (m, growth direction)", ylabel="y (m)", title="shape in the bend plane (vine_imu_base frame)")
    axes[0].set_aspect("equal", adjustable="datalim")
    axes[0].legend(handles=kinds + times, fontsize=8, loc="best")
    axes[1].set(
        xlabel="arc length along the centreline (m)",
        ylabel="x (mm, up)",
        title="out of the bend plane (centreline, mm; not to scale)",
    )
    axes[1].legend(handles=kinds[:2], fontsize=8, loc="best")
    for ax in axes[:2]:
        ax.grid(True, alpha=0.3)
    axes[2].plot(t, 100 * err, lw=1, color="tab:blue", label="tip position error")
    if err.size:
        mean_cm = 100 * float(err.mean())
        axes[2].axhline(mean_cm, color="tab:red", ls=":", label=f"mean {mean_cm:.2f} cm")
    axes[2].set(xlabel="time (s)", ylabel="tip error (cm)", title=f"tip error against the simulator, {scenario}")
    axes[2].legend(fontsize=8, loc="best")
    axes[2].grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def run(args: argparse.Namespace) -> int:
    """CLI entry."""
    metrics = run_demo(
        args.out,
        scenario=args.scenario,
        duration=args.duration,
        seed=args.seed,
        every_k=args.every_k,
        rate=args.rate,
        distro=args.distro,
        progress=not args.json,
        register_level=args.register_level,
    )
    print_metrics(metrics, args.json, title=f"vine-imu demo ({args.scenario})")
    return 0
