"""``shape-sensing demo tof-rings``: the seed's 3 sensor rings (9 VL53L5CX, 3 ISM330BX) in front of a box scene.

Every byte goes through the real drivers (:class:`~shape_sensing.drivers.tof_ring.TofRingSet`)
and the real ``smbus2.SMBus`` class, into register-level simulators of the
chips and TCA9548A switches on one simulated bus per ring (``ring_buses``).
The robot lies along +x and sways about the vertical after a still start (the
IMUs estimate their gyro bias from it); each ToF chip is given the zone
distances ray-cast from its current pose.

Writes ``tof-rings.mcap`` (per ToF ``/tof_rings/NAME/frame`` TofFrame and
``/tof_rings/NAME/points`` PointCloud2, per IMU ``/tof_rings/NAME/imu``,
``/tf_static`` ring -> sensor, ``/tf`` world -> ring, ``/diagnostics``; the
``tof_ring`` node's parameters in its metadata), ``tof-rings.params.yaml``
(the same parameters as a ROS 2 parameter file) and ``tof-rings.png`` (the
valid zones' points over the scene, from above and from the side), and prints
metrics (``--json``: one JSON object). The outputs are written under
temporary names and moved into place together at the end; SIGINT/SIGTERM or a
crash leaves the previous outputs as they were and what was recorded as a
readable ``tof-rings.partial.mcap``.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
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
from shape_sensing.drivers.tof_ring import SCHEMA, PollResult, TofRingSet, layout_from_params, split_by_bus
from shape_sensing.drivers.vl53l5cx import UldBuffers
from shape_sensing.io.bag import BagWriter
from shape_sensing.messages.common import diagnostic_array, imu_to_msg, tf_message
from shape_sensing.messages.tof import tof_frame_msg, tof_points_msg, zone_points
from shape_sensing.sim.i2c_dev import RealSMBus
from shape_sensing.sim.tof_rings import BoxScene, SimRingHardware, build_ring_hardware, demo_scene
from shape_sensing.types import ImuSample, TransformStamped

__all__ = ["add_arguments", "run", "run_demo"]

_NS = 1_000_000_000
GRAVITY = 9.80665
WORLD = "world"
SWAY_START = 0.5  # s after recording starts
SWAY_AMPLITUDE = 0.25  # rad
SWAY_FREQUENCY = 0.25  # Hz


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Demo options."""
    add_common_arguments(parser, default_out="out/tof-rings", default_duration=4.0)
    parser.add_argument("--bitrate", type=positive_float, default=1_000_000.0, help="I2C clock of each ring's bus (Hz)")
    parser.add_argument("--resolution", type=int, default=8, choices=(4, 8), help="zones per side (default 8)")


def yaw(t: float) -> tuple[float, float]:
    """Sway angle (rad) and rate (rad/s) about world z at recording time ``t`` (s)."""
    if t < SWAY_START:
        return 0.0, 0.0
    w = 2 * math.pi * SWAY_FREQUENCY
    return SWAY_AMPLITUDE * math.sin(w * (t - SWAY_START)), SWAY_AMPLITUDE * w * math.cos(w * (t - SWAY_START))


def T_world_ring(s: float, t: float) -> np.ndarray:
    """Ring frame at arc length ``s``: z along the backbone (world +x before sway), x = world y, y = world z."""
    a, _ = yaw(t)
    Rz = np.array([[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0], [0.0, 0.0, 1.0]])
    R0 = np.column_stack([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    T = np.eye(4)
    T[:3, :3] = Rz @ R0
    T[:3, 3] = Rz @ np.array([s, 0.0, 0.0])
    return T


@dataclass
class _Bus:
    number: int
    params: dict[str, Any]
    hw: SimRingHardware
    rings: TofRingSet | None = None


def run_demo(
    out: Path,
    *,
    duration: float = 4.0,
    seed: int = 0,
    bitrate: float = 1_000_000.0,
    resolution: int = 8,
    distro: str = "jazzy",
    progress: bool = True,
    scene: BoxScene | None = None,
) -> dict[str, Any]:
    """Run the demo, write the bag and the picture into ``out``, return the metrics."""
    if not (math.isfinite(duration) and duration > 0):
        raise ValueError(f"--duration {duration}: expected a finite positive number of seconds")
    if not (math.isfinite(bitrate) and bitrate > 0):
        raise ValueError(f"--bitrate {bitrate}: expected a finite positive I2C clock in Hz")
    scene = scene or demo_scene()
    params = SCHEMA.validate({"simulate": True, "resolution": resolution, "bitrate": bitrate,
                              "ranging_frequency": 15, "bias_duration": 1.0})  # fmt: skip
    buffers = UldBuffers.from_package()
    per_bus = split_by_bus(params)
    buses: list[_Bus] = []
    for k, (number, q) in enumerate(per_bus.items()):
        hw = build_ring_hardware(layout_from_params(q), buffers, bitrate=bitrate, seed=seed * 10 + k)
        buses.append(_Bus(number, q, hw))
    layout = layout_from_params(params)
    arc = layout.rings
    tof_mount = {m.name: m for m in layout.tofs}
    imu_mount = {m.name: m for m in layout.imus}
    metrics: dict[str, Any] = {}
    world_points: dict[str, list[np.ndarray]] = {m: [] for m in tof_mount}
    range_err: list[np.ndarray] = []
    still_err: list[np.ndarray] = []  # frames while the robot is still: the chip's noise alone
    frames: dict[str, int] = dict.fromkeys(tof_mount, 0)
    imu_samples: dict[str, int] = dict.fromkeys(imu_mount, 0)
    boot_ns = -int(6.0 * _NS)  # start the hardware before t = 0 so the rings stream when recording starts
    for b in buses:
        b.hw.bus.now_ns = boot_ns
        for name, chip in b.hw.imus.items():
            s = arc[imu_mount[name].ring]

            def motion(t: float, s: float = s) -> tuple[np.ndarray, np.ndarray]:
                R = T_world_ring(s, t)[:3, :3]
                _, rate = yaw(t)
                return R.T @ np.array([0.0, 0.0, rate]), R.T @ np.array([0.0, 0.0, GRAVITY])

            chip.motion = motion
    prefix = "/tof_rings"

    def pose(name: str, t: float) -> np.ndarray:
        m = tof_mount[name]
        return T_world_ring(arc[m.ring], t) @ m.T_ring_sensor

    # Written under temporary names and moved into place at the end: a crash or a signal leaves the previous
    # outputs as they were and what was recorded as a readable tof-rings.partial.mcap.
    with DemoOutputs(Path(out), "tof-rings", (".mcap", ".png", ".params.yaml")) as outputs:
        with (
            StopSignals() as stop,
            RealSMBus([b.hw.bus for b in buses]) as smbuses,
            BagWriter(outputs.path(".mcap"), distro=distro) as bag,
        ):
            outputs.record_parameters(bag, SCHEMA.node, params)
            for b, sb in zip(buses, smbuses, strict=True):
                for name in b.hw.tofs:
                    b.hw.tofs[name].set_zones(scene.zone_distances(pose(name, boot_ns / _NS), resolution))
                b.rings = TofRingSet(sb, b.params, buffers, clock=b.hw.bus.clock, sleep=b.hw.bus.sleep)
            statics = [
                TransformStamped(0, m.ring, m.spec.frame_id, m.T_ring_sensor) for m in [*layout.tofs, *layout.imus]
            ]
            bag.write("/tf_static", tf_message(statics), 0, qos="static")
            # Bring-up: every bus until its sensors stream (the firmware uploads dominate).
            boot_done: dict[int, float] = {}
            for b in buses:
                assert b.rings is not None
                stats0 = b.hw.bus.stats.copy()
                while len(b.rings.streaming()) < len(b.rings.devices) and b.hw.bus.now_ns < 0:
                    b.rings.run_until(min(0, b.hw.bus.now_ns + _NS // 10))
                boot_done[b.number] = (b.hw.bus.now_ns - boot_ns) / _NS
                metrics[f"boot_bytes_bus{b.number}"] = b.hw.bus.stats.minus(stats0).bytes
                b.rings.run_until(0)  # streaming (not recorded) until recording starts
            step = _NS // 15
            prog = Progress("tof-rings demo", duration, enabled=progress)
            stats_start = {b.number: b.hw.bus.stats.copy() for b in buses}
            t_ns = 0
            next_diag = 0
            while t_ns < int(duration * _NS):
                if stop.requested:
                    break
                t = t_ns / _NS
                for b in buses:
                    for name in b.hw.tofs:
                        b.hw.tofs[name].set_zones(scene.zone_distances(pose(name, t), resolution))
                tfs = [TransformStamped(t_ns, WORLD, r, T_world_ring(s, t)) for r, s in arc.items()]
                bag.write("/tf", tf_message(tfs), t_ns)
                results: list[PollResult] = []
                for b in buses:
                    assert b.rings is not None
                    b.rings.run_until(t_ns + step, results.append)
                for r in results:
                    r.tof = [(n, x) for n, x in r.tof if x.stamp_ns >= 0]
                    r.imu = [(n, [x for x in xs if x.stamp_ns >= 0]) for n, xs in r.imu]
                    for name, reading in r.tof:
                        fid = tof_mount[name].spec.frame_id
                        bag.write(f"{prefix}/{name}/frame", tof_frame_msg(reading, fid), reading.stamp_ns, qos="sensor")
                        bag.write(
                            f"{prefix}/{name}/points", tof_points_msg(reading, fid), reading.stamp_ns, qos="sensor"
                        )
                        frames[name] += 1
                        ts = reading.stamp_ns / _NS
                        truth = scene.zone_distances(pose(name, ts), reading.zones_per_side)
                        d = reading.distance_mm / 1000.0
                        ok = reading.valid() & np.isfinite(truth)
                        range_err.append(d[ok] - truth[ok])
                        if ts < SWAY_START:
                            still_err.append(d[ok] - truth[ok])
                        pts = zone_points(np.where(reading.valid(), d, np.nan), reading.zones_per_side)
                        pts = pts[np.isfinite(pts[:, 0])]
                        T = pose(name, ts)
                        world_points[name].append(pts @ T[:3, :3].T + T[:3, 3])
                    for name, samples in r.imu:
                        fid = imu_mount[name].spec.frame_id
                        for smp in samples:
                            msg = imu_to_msg(ImuSample(smp.stamp_ns, fid, None, smp.angular_velocity,
                                                       smp.linear_acceleration))  # fmt: skip
                            bag.write(f"{prefix}/{name}/imu", msg, smp.stamp_ns, qos="sensor")
                        imu_samples[name] += len(samples)
                if t_ns >= next_diag:
                    statuses = [s for b in buses if b.rings is not None for s in b.rings.diagnostics()]
                    bag.write("/diagnostics", diagnostic_array(t_ns, statuses), t_ns)
                    next_diag += _NS
                t_ns += step
                prog.update(t)
            stop.mark_partial(bag, t_ns / _NS)
        prog.close()
        if stop.requested:
            raise outputs.interrupted(stop.requested, t_ns / _NS, duration)
        err = np.concatenate(range_err) if range_err else np.zeros(0)
        for b in buses:
            used = b.hw.bus.stats.minus(stats_start[b.number])
            metrics[f"bus{b.number}_utilisation"] = round(used.bits / (bitrate * duration), 4)
            metrics[f"boot_time_s_bus{b.number}"] = round(boot_done[b.number], 3)
        gyro_bias_err = []
        for b in buses:
            assert b.rings is not None
            for name, chip in b.hw.imus.items():
                drv = b.rings.by_name[name].driver
                if drv.bias is not None:
                    gyro_bias_err.append(float(np.abs(drv.bias.bias - chip.gyro_bias).max()))
        metrics.update(
            tof_frames=int(sum(frames.values())),
            tof_rate_hz_min=round(min(frames.values()) / duration, 2),
            imu_samples=int(sum(imu_samples.values())),
            imu_rate_hz_min=round(min(imu_samples.values()) / duration, 2),
            range_error_mean_mm=round(float(np.mean(err)) * 1000, 3) if err.size else float("nan"),
            range_error_rms_mm=round(float(np.sqrt(np.mean(err**2))) * 1000, 3) if err.size else float("nan"),
            range_error_rms_still_mm=round(float(np.sqrt(np.mean(np.concatenate(still_err) ** 2))) * 1000, 3)
            if still_err
            else float("nan"),
            valid_zones=int(err.size),
            gyro_bias_error_max_rad_s=round(max(gyro_bias_err), 5) if gyro_bias_err else float("nan"),
            bag=str(outputs.final(".mcap")),
        )
        _picture(outputs.path(".png"), scene, world_points, arc)
        metrics["picture"] = str(outputs.final(".png"))
        outputs.commit()
    return metrics


def _picture(path: Path, scene: BoxScene, points: dict[str, list[np.ndarray]], arc: dict[str, float]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    fig, axes = plt.subplots(1, 2, figsize=(12, 5.5))
    views = (("x", "y", 0, 1, "from above"), ("x", "z", 0, 2, "from the side (-y)"))
    cmap = plt.get_cmap("tab10")
    for ax, (xl, yl, i, j, title) in zip(axes, views, strict=True):
        for lo, hi in scene.boxes:
            ax.add_patch(Rectangle((lo[i], lo[j]), hi[i] - lo[i], hi[j] - lo[j], color="0.8", zorder=0))
        for p, n in scene.planes:
            if abs(n[i]) < 1e-9 and abs(n[j]) > 0.5:
                ax.axhline(p[j], color="0.5", lw=2, zorder=0)
        for k, (name, chunks) in enumerate(points.items()):
            if chunks:
                pts = np.concatenate(chunks)
                ax.scatter(pts[:, i], pts[:, j], s=2, color=cmap(k % 10), label=name, alpha=0.5)
        xs = np.array(list(arc.values()))
        ax.plot([0, xs.max() + 0.05], [0, 0], color="k", lw=4, label="robot (still pose)")
        ax.plot(xs, np.zeros_like(xs), "o", color="r", ms=7, label="rings")
        ax.set_xlabel(f"{xl} [m]")
        ax.set_ylabel(f"{yl} [m]")
        ax.set_title(title)
        ax.set_aspect("equal")
        ax.set_xlim(-0.6, 1.1)
        ax.set_ylim(-0.8, 0.8)
    axes[0].legend(fontsize=6, loc="lower right")
    fig.suptitle("VL53L5CX zones (valid, status 5/9) of 3 sensor rings over the scene (grey)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    """CLI entry."""
    metrics = run_demo(
        args.out, duration=args.duration, seed=args.seed, bitrate=args.bitrate, resolution=args.resolution,
        distro=args.distro, progress=not args.json,
    )  # fmt: skip
    print_metrics(metrics, args.json, title="tof-rings demo")
    return 0
