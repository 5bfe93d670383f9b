"""ToF continuum demo (seed 001): a 1.5 m robot with ToF rings localised against a prior map in a compressor duct.

Simulates scene ``--scene`` (S0 unchanged; S1-S3 with unmodelled objects; S4-S6 with modelled blades removed;
S7-S9 both), always localising against the S0 map (Poisson-disk samples of the S0 mesh), as Table II of the
seed does. Writes, under ``--out``:

* ``tof-continuum.mcap``: the sensor data (``/tof/<sensor>`` shape_sensing/TofFrame, ``/gyro/ring<i>``
  sensor_msgs/Imu, ``/strain`` shape_sensing/StrainArray of bending angle and curvature), the ground truth
  (``/truth/shape``, shape_sensing/ShapeSamples at the base and the rings), the estimate at the same stamps
  (``/estimate/shape``), the ring-to-sensor mountings and ``world`` -> ``continuum_base`` on ``/tf_static``,
  point clouds (sensor_msgs/PointCloud2: ``/map/prior``, ``/reconstruction``, ``/anomalies``) and the estimator's
  parameters in its metadata (also beside it as ``tof-continuum.params.yaml``);
* ``prior_map.ply``, ``reconstruction.ply`` (with the squared Mahalanobis distance per point),
  ``anomalies.ply``;
* ``tof-continuum.png`` (true and estimated robot over the map, reconstruction, anomalies, ring errors) and
  ``metrics.json`` (the Table II figures, anomaly precision and recall against the simulator's added objects).

``shape-sensing eval-tof OUT`` scores the bag again. The outputs are written under temporary names and moved
into place together at the end; SIGINT/SIGTERM or a crash leaves the previous outputs as they were and what was
recorded as a readable ``tof-continuum.partial.mcap``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from shape_sensing.demos.common import (
    DemoOutputs,
    Progress,
    StopSignals,
    add_common_arguments,
    non_negative_int,
    print_metrics,
)
from shape_sensing.drivers.vl53l5cx import TofReading
from shape_sensing.estimators.continuum.tof_localise import (
    LocaliseConfig,
    SensorData,
    localise,
    reconstruct,
    ring_errors,
    summarise_errors,
)
from shape_sensing.io.bag import BagWriter
from shape_sensing.io.maps import DEFAULT_SPACING, PriorMap, load_map, write_ply
from shape_sensing.messages import common as msgs
from shape_sensing.messages.strain import (
    strain_array_msg,
)
from shape_sensing.messages.tof import point_cloud2_msg, shape_samples_msg, tof_frame_msg
from shape_sensing.pipelines.tof_recording import RIG_TOPIC, STRAIN_TOPIC
from shape_sensing.sim.tof_continuum import Imperfections, SimConfig, SimRun, simulate
from shape_sensing.sim.tof_scene import SCENES, compressor_scene
from shape_sensing.types import ImuSample, TransformStamped

__all__ = [
    "BAG_NAME",
    "RIG_TOPIC",
    "STRAIN_TOPIC",
    "add_arguments",
    "estimator_parameters",
    "rig_description",
    "run",
    "run_demo",
    "sensor_data",
]

STEM = "tof-continuum"
BAG_NAME = f"{STEM}.mcap"
#: the robot's base frame (config/continuum_tof.yaml's ``base_frame``), fixed in ``world`` as the launch file does
BASE_FRAME = "continuum_base"
WORLD_FRAME = "world"
#: name under which the estimator's parameters are recorded (the batch localiser of seed 001)
ESTIMATOR = "continuum_tof_localise"
MAP_SPACING = DEFAULT_SPACING  # m, Poisson-disk spacing of the S0 mesh's map


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Demo options."""
    add_common_arguments(parser, default_out="out/tof-continuum", default_duration=6.0)
    parser.add_argument("--scene", default="S0", choices=sorted(SCENES), help="scene variant (default S0)")
    parser.add_argument(
        "--trajectory", type=non_negative_int, default=0, help="robot trajectory 0, 1, 2, ... (default 0)"
    )
    parser.add_argument("--no-strain", action="store_true", help="leave the strain readings out of the estimate")
    parser.add_argument("--no-tof", action="store_true", help="leave the ToF frames out (gyro and strain only)")
    parser.add_argument("--no-gyro", action="store_true", help="leave the gyroscopes out")
    parser.add_argument(
        "--window",
        type=non_negative_int,
        default=0,
        help="sliding window of this many slices instead of the batch (default 0)",
    )
    parser.add_argument("--map", type=Path, default=None, help="prior map file (.ply/.pcd) instead of the S0 mesh")
    parser.add_argument("--no-picture", action="store_true", help="skip the PNG")
    parser.add_argument(
        "--sim",
        choices=("auto", *SIMULATORS),
        default="auto",
        help="simulator: mujoco (physical: links, ball joints, tendons, gravity, contact) or kinematic "
        "(constant-curvature segments, no physics); default auto = mujoco if it is installed, else kinematic",
    )


#: the simulators a run can come from
SIMULATORS = ("mujoco", "kinematic")


def resolve_simulator(name: str) -> str:
    """``auto`` -> ``mujoco`` where MuJoCo imports, else ``kinematic``; ``mujoco`` without MuJoCo is an error."""
    from shape_sensing.sim import tof_mujoco

    if name == "auto":
        return "mujoco" if tof_mujoco.available() else "kinematic"
    if name not in SIMULATORS:
        raise ValueError(f"simulator {name!r} unknown; expected one of {', '.join(SIMULATORS)} or auto")
    if name == "mujoco" and not tof_mujoco.available():
        raise ImportError(
            "--sim mujoco needs the mujoco package: pip install 'mujoco>=4.0,<5' (the 'sim' extra), "
            "or use --sim kinematic"
        )
    return name


def simulate_run(
    scene: str,
    simulator: str,
    duration: float,
    trajectory: int,
    seed: int,
    reach: float | None = None,
    imperfections: Imperfections | None = None,
) -> SimRun:
    """A run of ``scene`` on ``simulator`` (``mujoco`` or ``kinematic``); ``reach`` (m): the commanded shape's
    largest distance from the duct axis (``SimConfig.max_radius``; default the simulator's own);
    ``imperfections``: the real rig's (kinematic simulator only; default none)."""
    if reach is not None and not (np.isfinite(reach) and reach > 0):
        raise ValueError(f"reach must be a positive number of metres, got {reach!r}")
    if imperfections is not None and imperfections != Imperfections() and simulator != "kinematic":
        raise ValueError(f"imperfections are simulated by the kinematic simulator only, not by {simulator!r}")
    if simulator == "mujoco":
        from shape_sensing.sim import tof_mujoco

        r = tof_mujoco.MAX_RADIUS if reach is None else reach
        cfg = SimConfig(duration=duration, trajectory=trajectory, seed=seed, max_radius=r)
        return tof_mujoco.simulate(compressor_scene(scene), cfg=cfg)
    if simulator == "kinematic":
        cfg = SimConfig(
            duration=duration, trajectory=trajectory, seed=seed, imperfections=imperfections or Imperfections()
        )
        if reach is not None:
            cfg = dataclasses.replace(cfg, max_radius=reach)
        return simulate(compressor_scene(scene), cfg=cfg)
    raise ValueError(f"simulator {simulator!r} unknown; expected one of {', '.join(SIMULATORS)}")


def sensor_data(run: SimRun) -> SensorData:
    """The estimator's view of a simulated run."""
    return SensorData(
        run.robot.length,
        run.mounts,
        run.tof_t,
        run.tof_mount,
        run.tof_distance,
        run.tof_status,
        run.gyro_t,
        run.gyro_s,
        run.gyro_w,
        run.strain_t,
        run.strain_s,
        run.strain_theta,
        run.strain_kappa,
        run.config.still,
    )




def rig_description(run: SimRun) -> dict[str, Any]:
    """What re-estimating from the bag needs beyond the messages: robot length, still period, sensor mountings."""
    return {
        "length": run.robot.length,
        "still": run.config.still,
        "mounts": [
            {
                "name": m.name,
                "s": m.s,
                "T_ring_sensor": np.asarray(m.T_ring_sensor).tolist(),
                "zones_per_side": m.zones_per_side,
                "fov": m.fov,
                "max_range": m.max_range,
            }
            for m in run.mounts
        ],
    }


def sim_reading(stamp_ns: int, distance: np.ndarray, status: np.ndarray, stream: int) -> TofReading:
    """A simulated frame as the VL53L5CX driver reports one (mm, first target, Table I sigma), for the one
    TofFrame builder the ring driver also uses."""
    from shape_sensing.estimators.continuum.tof import table_i_sigma

    d = np.asarray(distance, dtype=np.float64)
    hit = np.isfinite(d)
    z = d.size
    return TofReading(
        stamp_ns,
        z,
        stream % 256,
        25.0,
        np.where(hit, np.maximum(d, 0.0) * 1000.0, 0.0),
        np.nan_to_num(table_i_sigma(d)) * 1000.0,
        np.asarray(status, dtype=np.uint8),
        hit.astype(np.uint8),
        np.zeros(z),
        np.zeros(z),
    )


def _ns(t: float) -> int:
    return round(t * 1e9)


def _write_sensors(w: BagWriter, run: SimRun) -> None:
    """The recorded part of a run: sensor mountings, rig description, sensor streams and ground truth."""
    f = w.factory
    rings = sorted({m.s for m in run.mounts})
    tfs = [TransformStamped(0, f"ring_{rings.index(m.s)}", m.name, m.T_ring_sensor) for m in run.mounts]
    w.write("/tf_static", msgs.tf_message(tfs, f), 0, qos="static")
    w.write(RIG_TOPIC, f.make("std_msgs/msg/String", data=json.dumps(rig_description(run))), 0, qos="static")
    events: list[tuple[float, int, str, Any]] = []
    for i in range(run.tof_t.size):
        m = run.mounts[int(run.tof_mount[i])]
        msg = tof_frame_msg(
            sim_reading(_ns(run.tof_t[i]), run.tof_distance[i], run.tof_status[i], i),
            m.name,
            max_range=m.max_range,
            fov=m.fov,
            factory=f,
        )
        events.append((run.tof_t[i], 0, f"/tof/{m.name}", msg))
    for t, s, wv in zip(run.gyro_t, run.gyro_s, run.gyro_w, strict=True):
        ring = rings.index(float(s))
        msg = msgs.imu_to_msg(ImuSample(_ns(t), f"ring_{ring}", None, wv), f)
        events.append((t, 1, f"/gyro/ring{ring}", msg))
    for t in np.unique(run.strain_t):
        sel = run.strain_t == t
        msg = strain_array_msg(_ns(t), BASE_FRAME, run.strain_s[sel], run.strain_theta[sel], run.strain_kappa[sel],
                               factory=f)  # fmt: skip
        events.append((t, 2, STRAIN_TOPIC, msg))
    for k, t in enumerate(run.truth_t):
        msg = shape_samples_msg(_ns(t), BASE_FRAME, "truth", run.truth_s, run.truth_pose[k], None, f)
        events.append((t, 3, "/truth/shape", msg))
    events.sort(key=lambda e: (e[0], e[1]))
    for t, _, topic, msg in events:
        w.write(topic, msg, _ns(t), qos="sensor" if topic.startswith(("/tof", "/gyro")) else "default")


def _write_estimates(w: BagWriter, run: SimRun, est_T: np.ndarray, clouds: dict[str, Any]) -> None:
    """The estimate at the truth's stamps and the map, reconstruction and anomaly clouds; the estimated ring poses
    on ``/tf`` (``continuum_base`` -> ``ring_<i>``), which place every ToF frame (``ring_<i>`` -> sensor on
    ``/tf_static``) when the bag is played into RViz."""
    f = w.factory
    ring_s = sorted({m.s for m in run.mounts})
    rings = [  # (sample of the truth's arc lengths, ring index) of every ring
        (int(np.argmin(np.abs(run.truth_s - s))), i) for i, s in enumerate(ring_s)
    ]
    for k, t in enumerate(run.truth_t[: est_T.shape[0]]):
        msg = shape_samples_msg(_ns(t), BASE_FRAME, "continuum_tof", run.truth_s, est_T[k], None, f)
        w.write("/estimate/shape", msg, _ns(t))
        tfs = [TransformStamped(_ns(t), BASE_FRAME, f"ring_{i}", est_T[k, j]) for j, i in rings]
        w.write("/tf", msgs.tf_message(tfs, f), _ns(t))
    t_end = _ns(float(run.truth_t[-1]))
    for topic, (pts, scal) in clouds.items():
        w.write(topic, point_cloud2_msg(t_end, BASE_FRAME, pts, scal, f), t_end)


def _precision_recall(flag: np.ndarray, truth: np.ndarray) -> tuple[float | None, float | None]:
    tp = int((flag & truth).sum())
    prec = tp / int(flag.sum()) if flag.any() else None
    rec = tp / int(truth.sum()) if truth.any() else None
    return prec, rec


def estimator_parameters(cfg: LocaliseConfig, map_path: Path | None) -> dict[str, Any]:
    """The continuum estimator's parameters of a run (recorded in the bag): its configuration and prior map."""
    return {
        **dataclasses.asdict(cfg),
        "map_file": "" if map_path is None else str(map_path),
        "map_spacing": MAP_SPACING,
    }


def run_demo(
    out: Path,
    *,
    scene: str = "S0",
    trajectory: int = 0,
    duration: float = 6.0,
    seed: int = 0,
    use_strain: bool = True,
    use_tof: bool = True,
    use_gyro: bool = True,
    window: int = 0,
    map_path: Path | None = None,
    distro: str = "jazzy",
    picture: bool = True,
    progress: bool = False,
    sim: str = "kinematic",
    reach: float | None = None,
) -> dict[str, Any]:
    """Simulate, localise, reconstruct, write the outputs; return the metrics (``progress``: stage bar on stderr).

    ``sim``: ``kinematic`` or ``mujoco`` (see :func:`resolve_simulator` for ``auto``); ``reach``: see
    :func:`simulate_run` (MuJoCo runs beyond ~0.14 m touch the blades).

    The outputs are written under temporary names and moved into place together at the end; SIGINT/SIGTERM
    (checked between stages) or a crash leaves the previous outputs as they were and what was recorded as a
    readable ``tof-continuum.partial.mcap``.
    """
    if not (use_tof or use_gyro or use_strain):
        raise ValueError("no sensor to estimate from: ToF, gyroscopes and strain are all left out")
    wall0 = time.perf_counter()
    sim_name = resolve_simulator(sim)
    cfg = LocaliseConfig(use_tof=use_tof, use_gyro=use_gyro, use_strain=use_strain, window=window)
    others = ("prior_map.ply", "reconstruction.ply", "anomalies.ply", "metrics.json")
    with DemoOutputs(Path(out), STEM, (".mcap", ".png", ".params.yaml"), others) as outputs:
        prog = Progress("tof-continuum demo (map, simulate, estimate, reconstruct, bag)", 5, enabled=progress,
                        unit="stage")  # fmt: skip
        recorded = 0.0  # simulated seconds in the bag
        with StopSignals() as stop, BagWriter(outputs.path(".mcap"), distro=distro) as bag, prog:
            outputs.record_parameters(bag, ESTIMATOR, estimator_parameters(cfg, map_path))
            world = TransformStamped(0, WORLD_FRAME, BASE_FRAME, np.eye(4))
            bag.write("/tf_static", msgs.tf_message([world], bag.factory), 0, qos="static")
            tof_map = (
                load_map(map_path)
                if map_path is not None
                else PriorMap.from_mesh(
                    compressor_scene("S0").mesh(include_added=False), spacing=MAP_SPACING, source="S0 mesh"
                )
            )
            prog.update(1)
            if not stop.requested:
                simrun = simulate_run(scene, sim_name, duration, trajectory, seed, reach)
                _write_sensors(bag, simrun)
                recorded = float(simrun.truth_t[-1])
                prog.update(2)
            if not stop.requested:
                t_sim = time.perf_counter()
                with Progress("tof-continuum: estimate", 0, enabled=progress, unit="iteration") as solving:

                    def estimating(done: int, unit: str) -> None:
                        # Ctrl-C/SIGTERM during the estimate (minutes on a long run) ends it at the next iteration
                        if stop.requested:
                            raise _EstimateStoppedError
                        solving.update(done)

                    with contextlib.suppress(_EstimateStoppedError):
                        res = localise(sensor_data(simrun), tof_map, cfg, progress=estimating)
                t_est = time.perf_counter()
                prog.update(3)
            if not stop.requested:
                result = _reconstruct(simrun, res, tof_map, cfg)
                prog.update(4)
            if not stop.requested:
                _write_estimates(bag, simrun, result["est_T"], result["clouds"])
                count = bag.count
                prog.update(5)
            stop.mark_partial(bag, recorded)
        if stop.requested:
            raise outputs.interrupted(stop.requested, recorded, duration)
        rec, dp, ang, tt, est_T = result["rec"], result["dp"], result["ang"], result["tt"], result["est_T"]
        added = result["added"]
        prec, recall = _precision_recall(rec.anomaly, added)
        write_ply(
            outputs.other("prior_map.ply"), tof_map.points, normals=tof_map.normals,
            scalars={"planarity": tof_map.planarity},
        )  # fmt: skip
        write_ply(outputs.other("reconstruction.ply"), rec.points, scalars={"mahalanobis2": rec.mahalanobis2})
        write_ply(outputs.other("anomalies.ply"), rec.points[rec.anomaly])
        summary = summarise_errors(dp, ang)
        metrics: dict[str, Any] = {
            "scene": scene,
            "trajectory": trajectory,
            "duration_s": duration,
            "simulator": sim_name,
            "reach_m": reach,
            **_physics_metrics(simrun),
            "sensors": {"tof": use_tof, "gyro": use_gyro, "strain": use_strain},
            "estimator": f"window {window}" if window else "batch",
            **{k: round(v, 4) for k, v in summary.items()},
            "ring_trans_mae_cm": [round(float(v), 3) for v in dp.mean(axis=0) * 100],
            "ring_rot_mae_deg": [round(float(v), 3) for v in np.rad2deg(ang.mean(axis=0))],
            "iterations": res.iterations,
            "converged": bool(res.converged),
            "stop": res.stop,
            "tof_points": res.stats.tof_points,
            "tof_zones_invalid": res.stats.tof_invalid,
            "tof_matched_fraction": round(rec.matched_fraction, 4),
            "anomalies": int(rec.anomaly.sum()),
            "points_on_added_objects": int(added.sum()),
            "anomaly_precision": None if prec is None else round(prec, 4),
            "anomaly_recall": None if recall is None else round(recall, 4),
            "anomaly_tau": round(rec.tau, 3),
            "map_points": len(tof_map),
            "messages": count,
            "simulate_s": round(t_sim - wall0, 2),
            "estimate_s": round(t_est - t_sim, 2),
            "bag": str(outputs.final(".mcap")),
        }
        if picture:
            _plot(outputs.path(".png"), simrun, est_T, tt, tof_map, rec, dp, ang, scene)
            metrics["picture"] = str(outputs.final(".png"))
        metrics["runtime_s"] = round(time.perf_counter() - wall0, 2)
        outputs.other("metrics.json").write_text(json.dumps(metrics, indent=1, sort_keys=True))
        outputs.commit()
    return metrics


class _EstimateStoppedError(Exception):
    """The estimate abandoned at a stop request (the run then ends as interrupted)."""


def _physics_metrics(run: SimRun) -> dict[str, Any]:
    """What the MuJoCo physics did in a run (nothing for the kinematic simulator)."""
    from shape_sensing.sim.tof_mujoco import MujocoRun

    if not isinstance(run, MujocoRun):
        return {}
    return {
        "max_penetration_mm": round(1000 * run.max_penetration, 3),
        "contact_steps": run.contact_steps,
        "parts_touched": run.parts_touched,
    }


def _reconstruct(sim: SimRun, res: Any, tof_map: PriorMap, cfg: LocaliseConfig) -> dict[str, Any]:
    """Ring errors, the estimate at the truth's stamps, the reconstruction and its anomalies of a run."""
    from shape_sensing.estimators.continuum.query import query_poses

    dp, ang = ring_errors(res.state, sim.truth_t, sim.truth_s[1:], sim.truth_pose[:, 1:])
    tt = sim.truth_t[sim.truth_t <= res.state.t[-1]]
    S = sim.truth_s.size
    est_T = query_poses(res.state, np.repeat(tt, S), np.tile(sim.truth_s, tt.size)).reshape(tt.size, S, 4, 4)
    # reconstruction and anomalies from every ToF point (also when the estimate did not use them)
    rec_meas = res.meas
    if not cfg.use_tof:
        from shape_sensing.estimators.continuum.tof_localise import build_measurements

        rec_meas, _ = build_measurements(sensor_data(sim), tof_map, LocaliseConfig())
    rec = reconstruct(res.state, rec_meas, tof_map, ab=res.ab, sigma_extra=cfg.tof_sigma_extra, gate=cfg.tof_gate,
                      extra_cov=res.rig_covariances)  # fmt: skip
    # which reconstructed points hit an added object: the same zones, in the same order as build_measurements
    labels = _point_labels(sim)
    added = np.array([p.added for p in sim.scene.parts] + [False])[labels]
    clouds = {
        "/map/prior": (tof_map.points, {"planarity": tof_map.planarity}),
        "/reconstruction": (rec.points, {"mahalanobis2": rec.mahalanobis2}),
        "/anomalies": (rec.points[rec.anomaly], None),
    }
    return {"dp": dp, "ang": ang, "tt": tt, "est_T": est_T, "rec": rec, "added": added, "clouds": clouds}


def _point_labels(sim: SimRun) -> np.ndarray:
    """Part hit by each valid zone, in :func:`build_measurements`' order (-1 -> the extra 'none' slot)."""
    from shape_sensing.estimators.continuum.tof import table_i_sigma

    out = []
    for i in range(sim.tof_t.size):
        m = sim.mounts[int(sim.tof_mount[i])]
        d = sim.tof_distance[i]
        ok = np.isfinite(table_i_sigma(d)) & (d <= m.max_range) & np.isin(sim.tof_status[i], (5, 9))
        out.append(sim.tof_part[i][ok])
    lab = np.concatenate(out) if out else np.zeros(0, dtype=np.int64)
    return np.where(lab < 0, len(sim.scene.parts), lab)


def _plot(
    path: Path,
    sim: SimRun,
    est_T: np.ndarray,
    tt: np.ndarray,
    tof_map: PriorMap,
    rec: Any,
    dp: np.ndarray,
    ang: np.ndarray,
    scene: str,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(16, 5.5))
    ax1 = fig.add_subplot(1, 3, 1, projection="3d")
    ax2 = fig.add_subplot(1, 3, 2, projection="3d")
    ax3 = fig.add_subplot(1, 3, 3)
    mp = tof_map.points[:: max(1, len(tof_map) // 4000)]
    for ax in (ax1, ax2):
        ax.scatter(mp[:, 0], mp[:, 1], mp[:, 2], s=0.3, c="0.7", alpha=0.3)
    snaps = np.linspace(0, tt.size - 1, 4).astype(int)
    colors = plt.cm.viridis(np.linspace(0, 0.9, snaps.size))
    for k, c in zip(snaps, colors, strict=True):
        ax1.plot(*sim.truth_pose[k, :, :3, 3].T, "o", color=c, ms=4)
        ax1.plot(*est_T[k, :, :3, 3].T, "x-", color=c, lw=1.2, label=f"t={tt[k]:.1f} s")
    ax1.set(title=f"{scene}: rings true (o) vs estimated (x)", xlabel="x", ylabel="y", zlabel="z")
    ax1.legend(fontsize=7)
    sub = rec.points[:: max(1, rec.points.shape[0] // 20000)]
    ax2.scatter(sub[:, 0], sub[:, 1], sub[:, 2], s=0.5, c=sub[:, 2], cmap="viridis")
    an = rec.points[rec.anomaly]
    if an.size:
        ax2.scatter(an[:, 0], an[:, 1], an[:, 2], s=3, c="red", label=f"anomalies ({an.shape[0]})")
        ax2.legend(fontsize=7)
    ax2.set(title="reconstruction (Eq. 10-11), anomalies (Eq. 12)", xlabel="x", ylabel="y", zlabel="z")
    for i in range(dp.shape[1]):
        ax3.plot(tt[: dp.shape[0]], 100 * dp[:, i], lw=1, label=f"ring {i + 1}: {np.rad2deg(ang[:, i]).mean():.2f} deg")
    ax3.set(xlabel="time (s)", ylabel="translation error (cm)", title="ring errors (legend: rotation MAE)")
    ax3.grid(True, alpha=0.3)
    ax3.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run(args: argparse.Namespace) -> int:
    """CLI entry."""
    if args.no_tof and args.no_gyro and args.no_strain:
        raise ValueError("--no-tof, --no-gyro and --no-strain leave no sensor to estimate from; drop one of them")
    if args.map is not None and not args.map.is_file():
        raise ValueError(f"--map {args.map}: no such file")
    sim = resolve_simulator(args.sim)
    if args.sim == "auto" and sim != "mujoco":
        print(
            "tof-continuum demo: mujoco is not installed (pip install 'mujoco>=4.0,<5', the 'sim' extra): "
            "using the kinematic simulator (no contact, gravity or dynamics)",
            file=sys.stderr,
        )
    metrics = run_demo(
        args.out,
        scene=args.scene,
        trajectory=args.trajectory,
        duration=args.duration,
        seed=args.seed,
        use_strain=not args.no_strain,
        use_tof=not args.no_tof,
        use_gyro=not args.no_gyro,
        window=args.window,
        map_path=args.map,
        distro=args.distro,
        picture=not args.no_picture,
        # the bars go to stderr: shown under --json too when a person watches (minutes of estimate)
        progress=not args.json or sys.stderr.isatty(),
        sim=sim,
    )
    print_metrics(metrics, args.json, title=f"tof-continuum demo ({args.scene})")
    return 0
