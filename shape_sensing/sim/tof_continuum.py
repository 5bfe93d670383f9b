"""Kinematic simulation of a tendon-driven continuum robot with rings of 8x8 ToF sensors, gyroscopes and strain.

The robot (seed 001's simulated robot) is 1.5 m long, three segments of constant curvature whose bending is
driven in time (what three tendon pairs do to a segment), clamped at the base on the duct's axis, a sensor
ring every 30 cm with three radial VL53L5CX-like sensors (45 deg, 8x8, 4 m) at 120 deg, rings offset by 60
deg, a forward sensor at the tip, a gyroscope per ring (120 Hz, constant bias, 0.01 rad/s noise) and strain
(bending angle and curvature) every 3 cm at 20 Hz. ToF frames (15 Hz) are ray cast exactly against a
:class:`~shape_sensing.sim.tof_scene.Scene` and get Table I noise; a small share of zones is reported with
an invalid status as the chip does.

This is a kinematic simulator: no contact, gravity or dynamics. :mod:`shape_sensing.sim.tof_mujoco` is the
physical one (MuJoCo: short rigid links on ball joints, tendons, gravity, contact and friction); both produce
the same :class:`SimRun` (and the same bag topics) with the same sensor noise (the helpers below).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from shape_sensing.estimators.continuum import lie
from shape_sensing.estimators.continuum.tof import TofMount, ring_mounts, table_i_sigma, zone_directions
from shape_sensing.geometry import FloatArray
from shape_sensing.sim.tof_scene import Scene

__all__ = [
    "RobotSpec",
    "SimConfig",
    "SimRun",
    "gyro_readings",
    "ray_lengths",
    "robot_poses",
    "segment_curvatures",
    "simulate",
    "strain_readings",
    "zone_readings",
]

STATUS_VALID = 5
STATUS_SIGMA_HIGH = 3
STATUS_NO_TARGET = 255


@dataclass(frozen=True)
class RobotSpec:
    """Geometry and sensors of the simulated robot."""

    length: float = 1.5
    segments: int = 3
    ring_s: tuple[float, ...] = (0.3, 0.6, 0.9, 1.2, 1.5)
    ring_radius: float = 0.03
    tip_forward: bool = True
    strain_spacing: float = 0.03

    def mounts(self) -> list[TofMount]:
        """The ToF sensors."""
        return ring_mounts(list(self.ring_s), self.ring_radius, tip_forward=self.tip_forward)

    def strain_s(self) -> FloatArray:
        """Arc lengths of the strain readings (every ``strain_spacing`` from half a spacing on)."""
        return np.arange(0.5 * self.strain_spacing, self.length, self.strain_spacing)


@dataclass(frozen=True)
class SimConfig:
    """Rates, noise and motion of a run."""

    duration: float = 8.0
    still: float = 1.0
    tof_rate: float = 15.0
    gyro_rate: float = 120.0
    strain_rate: float = 20.0
    truth_rate: float = 30.0
    gyro_sigma: float = 0.01
    gyro_bias_sigma: float = 0.02
    strain_sigma_theta: float = 0.015
    strain_sigma_kappa: float = 0.01
    invalid_fraction: float = 0.02
    #: what the simulated chips report: "perpendicular" (distance along the boresight, the VL53L5CX as ST
    #: describes it) or "radial" (the length of each zone's ray, as the seed paper's simulated rangefinders)
    range_convention: str = "perpendicular"
    trajectory: int = 0
    max_radius: float = 0.18
    seed: int = 0


@dataclass
class SimRun:
    """Everything a run produced (ground truth included)."""

    robot: RobotSpec
    config: SimConfig
    scene: Scene
    mounts: list[TofMount]
    tof_t: FloatArray  # (F,)
    tof_mount: NDArray[np.int64]  # (F,)
    tof_distance: FloatArray  # (F, 64), NaN without target
    tof_status: NDArray[np.uint8]  # (F, 64)
    tof_part: NDArray[np.int64]  # (F, 64) part hit (-1 none)
    gyro_t: FloatArray
    gyro_s: FloatArray
    gyro_w: FloatArray
    gyro_bias: dict[float, FloatArray]
    strain_t: FloatArray
    strain_s: FloatArray
    strain_theta: FloatArray
    strain_kappa: FloatArray
    truth_t: FloatArray
    truth_s: FloatArray
    truth_pose: FloatArray  # (Tt, S, 4, 4)
    part_names: list[str] = field(default_factory=list)


def zone_readings(
    lam: FloatArray,
    hit: NDArray[np.bool_],
    rng: np.random.Generator,
    invalid_fraction: float,
    ray_length: FloatArray | None = None,
) -> tuple[FloatArray, NDArray[np.uint8]]:
    """Reported distances and status codes of zones whose exact boresight distance is ``lam`` (``hit``: a
    target within range): Table I noise, "sigma high" below its 0.025 m minimum and for a random
    ``invalid_fraction`` of the zones, "no target" (NaN) where nothing was hit. ``ray_length``: the length of
    each zone's ray per unit of boresight distance (``lam``'s shape): a radial chip reports ``lam ray_length``."""
    if ray_length is not None:
        lam = lam * ray_length
    d = np.where(hit, lam, np.nan)
    sig = table_i_sigma(d)
    noisy = d + np.nan_to_num(sig) * rng.standard_normal(d.shape)
    status = np.where(hit, STATUS_VALID, STATUS_NO_TARGET).astype(np.uint8)
    status[hit & (noisy < 0.025)] = STATUS_SIGMA_HIGH
    bad = hit & (rng.random(d.shape) < invalid_fraction)
    status[bad] = STATUS_SIGMA_HIGH
    return noisy, status


def ray_lengths(u: FloatArray, convention: str) -> FloatArray | None:
    """Per zone ray ``u`` (``(..., 3)``, unit boresight component), the factor from boresight distance to the reported
    one: ``|u|`` for a radial chip, ``None`` (no change) for a perpendicular one."""
    if convention == "perpendicular":
        return None
    if convention == "radial":
        return np.asarray(np.linalg.norm(u, axis=-1))
    raise ValueError(f"range_convention must be 'perpendicular' or 'radial', got {convention!r}")


def gyro_readings(
    w: FloatArray, rings: FloatArray, rng: np.random.Generator, cfg: SimConfig
) -> tuple[FloatArray, dict[float, FloatArray]]:
    """Gyroscope readings of the true body rates ``w`` (``(T * len(rings), 3)``, ring-major within a sample
    time): a constant bias per ring (``cfg.gyro_bias_sigma``) and white noise (``cfg.gyro_sigma``)."""
    bias = {float(s): cfg.gyro_bias_sigma * rng.standard_normal(3) for s in rings}
    bias_arr = np.tile(np.stack([bias[float(s)] for s in rings]), (w.shape[0] // len(rings), 1))
    return w + bias_arr + cfg.gyro_sigma * rng.standard_normal(w.shape), bias


def strain_readings(kk: FloatArray, rng: np.random.Generator, cfg: SimConfig) -> tuple[FloatArray, FloatArray]:
    """Bending angle and curvature readings ``(theta, kappa)`` of true angular strains ``kk`` (``(..., 2)``
    about x and y; ``kk = kappa [-sin(theta), cos(theta)]``) with the seed's noise."""
    kappa = np.hypot(kk[..., 0], kk[..., 1])
    theta = np.arctan2(-kk[..., 0], kk[..., 1])
    kappa = kappa + cfg.strain_sigma_kappa * rng.standard_normal(kappa.shape)
    theta = theta + cfg.strain_sigma_theta * rng.standard_normal(theta.shape)
    return theta, kappa


def _smoothstep(x: FloatArray) -> FloatArray:
    x = np.clip(x, 0.0, 1.0)
    return x * x * (3 - 2 * x)


def segment_curvatures(t: FloatArray, trajectory: int, segments: int, still: float, scale: float = 1.0) -> FloatArray:
    """``(len(t), segments, 2)`` body curvatures about x, y (1/m) of each segment: still until ``still``, then
    a smooth start into sinusoids whose frequencies and phases depend on ``trajectory``."""
    t = np.atleast_1d(np.asarray(t, dtype=np.float64))
    rng = np.random.default_rng(1000 + trajectory)
    amp = rng.uniform(0.5, 1.0, (segments, 2)) * np.array([[1.6], [1.2], [0.9]])[:segments]
    freq = rng.uniform(0.12, 0.3, (segments, 2))
    phase = rng.uniform(0, 2 * np.pi, (segments, 2))
    tau = np.clip(t - still, 0.0, None)
    ramp = _smoothstep(tau / 1.0)
    k = amp[None] * (np.sin(2 * np.pi * freq[None] * tau[:, None, None] + phase[None]) - np.sin(phase[None]))
    return scale * ramp[:, None, None] * k


def robot_poses(kappa: FloatArray, s: FloatArray, length: float) -> FloatArray:
    """``(len(kappa), len(s), 4, 4)`` backbone poses from per-segment curvatures ``(T, segments, 2)``."""
    nt, nseg, _ = kappa.shape
    s = np.asarray(s, dtype=np.float64)
    seg_len = length / nseg
    out = np.empty((nt, s.size, 4, 4))
    for i in range(nt):
        ends = [np.eye(4)]
        for j in range(nseg):
            xi = seg_len * np.array([0, 0, 1.0, kappa[i, j, 0], kappa[i, j, 1], 0])
            ends.append(ends[-1] @ lie.exp(xi[None])[0])
        j = np.clip((s / seg_len).astype(np.int64), 0, nseg - 1)
        local = s - j * seg_len
        xis = np.zeros((s.size, 6))
        xis[:, 2] = local
        xis[:, 3:5] = local[:, None] * kappa[i, j]
        out[i] = np.stack([ends[jj] for jj in j]) @ lie.exp(xis)
    return out


def _fit_scale(cfg: SimConfig, robot: RobotSpec) -> float:
    """Amplitude scale keeping the backbone within ``cfg.max_radius`` of the duct axis."""
    t = np.linspace(0, cfg.duration, 400)
    s = np.linspace(0, robot.length, 31)
    k = segment_curvatures(t, cfg.trajectory, robot.segments, cfg.still)
    T = robot_poses(k, s, robot.length)
    r = np.hypot(T[..., 0, 3], T[..., 1, 3]).max()
    return float(min(1.0, cfg.max_radius / r)) if r > 0 else 1.0


def simulate(scene: Scene, robot: RobotSpec | None = None, cfg: SimConfig | None = None) -> SimRun:
    """Run the robot through ``scene``: ToF frames, gyroscopes, strain and ground truth."""
    robot = robot or RobotSpec()
    cfg = cfg or SimConfig()
    if cfg.duration <= cfg.still:
        raise ValueError(f"duration {cfg.duration} s must exceed the still period {cfg.still} s")
    rng = np.random.default_rng(cfg.seed)
    scale = _fit_scale(cfg, robot)

    def poses(t: FloatArray, s: FloatArray) -> FloatArray:
        return robot_poses(
            segment_curvatures(t, cfg.trajectory, robot.segments, cfg.still, scale), np.asarray(s), robot.length
        )

    mounts = robot.mounts()
    # ToF: each sensor at 15 Hz, sensors of a ring read one after another within the frame period
    period = 1.0 / cfg.tof_rate
    frames_t = np.arange(0.0, cfg.duration - 1e-9, period)
    tt, mm, dd, st, pp = [], [], [], [], []
    for mi, m in enumerate(mounts):
        t_m = frames_t + (mi % 3) * period / 3.0
        t_m = t_m[t_m < cfg.duration]
        Tr = poses(t_m, np.array([m.s]))[:, 0]
        Ts = Tr @ m.T_ring_sensor
        u_loc = zone_directions(m.zones_per_side, m.fov)
        Z = u_loc.shape[0]
        u = np.einsum("fij,zj->fzi", Ts[:, :3, :3], u_loc).reshape(-1, 3)
        o = np.repeat(Ts[:, :3, 3], Z, axis=0)
        lam, part = scene.cast(o, u)
        hit = np.isfinite(lam) & (lam * np.linalg.norm(u, axis=1) <= m.max_range)
        ray = ray_lengths(u, cfg.range_convention)
        noisy, status = zone_readings(lam, hit, rng, cfg.invalid_fraction, ray)
        tt.append(t_m)
        mm.append(np.full(t_m.size, mi))
        dd.append(noisy.reshape(-1, Z))
        st.append(status.reshape(-1, Z))
        pp.append(np.where(hit, part, -1).reshape(-1, Z))
    order = np.argsort(np.concatenate(tt), kind="stable")
    tof_t = np.concatenate(tt)[order]
    # gyroscopes: body angular velocity of the ring frame, bias and noise
    gt = np.arange(0.0, cfg.duration, 1.0 / cfg.gyro_rate)
    rings = np.asarray(robot.ring_s)
    h = 1e-4
    Ta = poses(gt - h, rings).reshape(-1, 4, 4)
    Tb = poses(gt + h, rings).reshape(-1, 4, 4)
    w = lie.log(lie.inv(Ta) @ Tb)[:, 3:] / (2 * h)
    w, bias = gyro_readings(w, rings, rng, cfg)
    # strain: bending angle and curvature of the segment at each site
    sts = robot.strain_s()
    stt = np.arange(0.0, cfg.duration, 1.0 / cfg.strain_rate)
    k = segment_curvatures(stt, cfg.trajectory, robot.segments, cfg.still, scale)
    seg = np.clip((sts / (robot.length / robot.segments)).astype(np.int64), 0, robot.segments - 1)
    theta, kappa = strain_readings(k[:, seg], rng, cfg)  # k[:, seg]: (T, S, 2) angular strain about x, y
    # ground truth at the base and the rings
    trt = np.arange(0.0, cfg.duration, 1.0 / cfg.truth_rate)
    trs = np.concatenate([[0.0], rings])
    return SimRun(
        robot,
        cfg,
        scene,
        mounts,
        tof_t,
        np.concatenate(mm)[order],
        np.concatenate(dd)[order],
        np.concatenate(st)[order],
        np.concatenate(pp)[order],
        np.repeat(gt, rings.size),
        np.tile(rings, gt.size),
        w,
        bias,
        np.repeat(stt, sts.size),
        np.tile(sts, stt.size),
        theta.reshape(-1),
        kappa.reshape(-1),
        trt,
        trs,
        poses(trt, trs),
        [p.name for p in scene.parts],
    )
