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

import dataclasses
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from shape_sensing.estimators.continuum import lie
from shape_sensing.estimators.continuum.tof import TofMount, ring_mounts, table_i_sigma, zone_directions
from shape_sensing.geometry import FloatArray
from shape_sensing.sim.tof_scene import Scene

__all__ = [
    "IMPERFECTIONS",
    "Imperfections",
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
STATUS_LARGE_PULSE = 9
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
class Imperfections:
    """What a real rig has and the ideal simulation does not, each a switch: the defaults are all off (the ideal
    world); :meth:`realistic` turns each on at a value a real build has, :meth:`only` one of them.

    Attributes:
        footprint_rays: rays per zone side. A zone sees a patch of the scene, not a line: with more than one ray
            the zone's return is built from all of them as the chip's histogram does (see :func:`merged_returns`):
            surfaces closer together than ``merge_separation`` along the boresight merge into one target at the
            signal-weighted mean distance, which at a depth edge lies on no surface (a mixed pixel).
        merge_separation: m; ST gives 600 mm as the smallest separation at which two targets in one zone are
            told apart (VL53L5CX datasheet DS13754, multi-target detection).
        large_pulse_spread: m; a merged target whose surfaces span more than this along the boresight is
            reported with status 9, "range valid with large pulse (may be due to a merged target)" (UM2884).
            The chip's own threshold is not published; this is an assumption of the simulator.
        mount_translation: m, 1-sigma per axis of each sensor's position on its ring (what the estimator is told
            is the nominal mounting).
        mount_rotation_deg: deg, 1-sigma of each sensor's orientation error (about a random axis).
        gyro_time_offset: s, the gyroscopes' clock minus the ToF sensors' clock.
        gyro_clock_drift: the gyroscopes' clock rate error (50e-6: a 50 ppm crystal).
        registration_translation: m, how far the robot's base is from where the map puts it (a random
            direction).
        registration_rotation_deg: deg, the base's orientation error in the map (about a random axis).
        map_noise: m, 1-sigma per axis of the noise of the scanned prior map's points (used where the map is
            built, see :func:`shape_sensing.sim.tof_scene.scanned_map`).
        twist: rad/m, amplitude of the torsion of each segment (tendon loads off the neutral axis).
        extension: amplitude of the axial strain (negative: the backbone shortens under tendon tension, in
            proportion to its bending).
    """

    footprint_rays: int = 1
    merge_separation: float = 0.6
    large_pulse_spread: float = 0.10
    mount_translation: float = 0.0
    mount_rotation_deg: float = 0.0
    gyro_time_offset: float = 0.0
    gyro_clock_drift: float = 0.0
    registration_translation: float = 0.0
    registration_rotation_deg: float = 0.0
    map_noise: float = 0.0
    twist: float = 0.0
    extension: float = 0.0

    def __post_init__(self) -> None:
        if int(self.footprint_rays) != self.footprint_rays or self.footprint_rays < 1:
            raise ValueError(f"footprint_rays must be a whole number >= 1, got {self.footprint_rays!r}")
        for name in ("merge_separation", "large_pulse_spread"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be > 0 m, got {v!r}")
        for name in ("mount_translation", "mount_rotation_deg", "registration_translation",
                     "registration_rotation_deg", "map_noise", "twist", "extension"):  # fmt: skip
            v = getattr(self, name)
            if not (np.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be finite and >= 0, got {v!r}")
        for name in ("gyro_time_offset", "gyro_clock_drift"):
            if not np.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be finite, got {getattr(self, name)!r}")

    @classmethod
    def realistic(cls) -> Imperfections:
        """Every imperfection on at the value of :data:`IMPERFECTIONS`."""
        return cls(**{k: v for group in IMPERFECTIONS.values() for k, v in group.items()})  # type: ignore[arg-type]

    @classmethod
    def only(cls, *names: str) -> Imperfections:
        """The named groups of :data:`IMPERFECTIONS` on at their realistic values, the rest off."""
        bad = [n for n in names if n not in IMPERFECTIONS]
        if bad:
            raise ValueError(f"unknown imperfection(s) {bad}; expected some of {sorted(IMPERFECTIONS)}")
        return cls(**{k: v for n in names for k, v in IMPERFECTIONS[n].items()})  # type: ignore[arg-type]


#: The realistic value of each imperfection, by group (what :meth:`Imperfections.only` turns on):
#: a 3x3-ray footprint per zone (so mixed pixels form at depth edges); a sensor placed to 1 mm and 1 deg on its
#: ring (a printed mount, a hand-soldered board); the gyroscopes 5 ms late on the ToF clock with a 50 ppm
#: crystal; the base placed in the map to 2 cm and 2 deg (a tape measure and a level); a map scanned to 2 mm
#: (a structured-light or handheld laser scan); up to 0.5 deg/m of twist and 0.2 % axial compression.
IMPERFECTIONS: dict[str, dict[str, float]] = {
    "footprint": {"footprint_rays": 3},
    "mounting": {"mount_translation": 0.001, "mount_rotation_deg": 1.0},
    "time": {"gyro_time_offset": 0.005, "gyro_clock_drift": 50e-6},
    "registration": {"registration_translation": 0.02, "registration_rotation_deg": 2.0},
    "map": {"map_noise": 0.002},
    "twist": {"twist": float(np.deg2rad(0.5))},
    "extension": {"extension": 0.002},
}


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
    imperfections: Imperfections = field(default_factory=Imperfections)


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
    #: the sensors as they really sit (``mounts`` is what the estimator is told: the nominal layout)
    true_mounts: list[TofMount] = field(default_factory=list)
    #: the robot's base in the map's frame (the scene's); ``truth_pose`` is in the map's frame too
    T_map_base: FloatArray = field(default_factory=lambda: np.eye(4))
    #: per ToF zone: a merged return of surfaces more than 1 cm apart along the boresight (a mixed pixel)
    tof_mixed: NDArray[np.bool_] | None = None
    #: per ToF zone: the part with the second most signal in a merged return (-1: none)
    tof_part_other: NDArray[np.int64] | None = None


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


def segment_twist_stretch(
    kappa: FloatArray, t: FloatArray, trajectory: int, still: float, imp: Imperfections, bend_max: float
) -> FloatArray:
    """``(len(t), segments, 4)``: the bending ``kappa`` (``(T, segments, 2)``) with each segment's torsion (rad/m) and
    axial strain: the torsion a slow sinusoid of amplitude ``imp.twist`` started as the bending is, the axial
    strain ``-imp.extension`` times the bending over ``bend_max``, the run's largest (the tendons' pull shortens
    the backbone)."""
    nt, nseg, _ = kappa.shape
    out = np.zeros((nt, nseg, 4))
    out[..., :2] = kappa
    if imp.twist > 0:
        rng = np.random.default_rng(2000 + trajectory)
        freq = np.asarray(rng.uniform(0.1, 0.25, nseg), dtype=np.float64)
        phase = np.asarray(rng.uniform(0, 2 * np.pi, nseg), dtype=np.float64)
        tau = np.clip(np.asarray(t, dtype=np.float64) - still, 0.0, None)
        ramp = _smoothstep(tau / 1.0)
        out[..., 2] = imp.twist * ramp[:, None] * np.sin(2 * np.pi * freq[None] * tau[:, None] + phase[None])
    if imp.extension > 0 and bend_max > 0:
        out[..., 3] = -imp.extension * np.hypot(kappa[..., 0], kappa[..., 1]) / bend_max
    return out


def robot_poses(kappa: FloatArray, s: FloatArray, length: float) -> FloatArray:
    """``(len(kappa), len(s), 4, 4)`` backbone poses from per-segment curvatures ``(T, segments, 2)`` about x, y, or
    ``(T, segments, 4)`` with each segment's torsion (rad/m) and axial strain as well; ``s`` is material arc length."""
    nt, nseg, nk = kappa.shape
    s = np.asarray(s, dtype=np.float64)
    seg_len = length / nseg

    def strain(k: FloatArray) -> FloatArray:  # (..., nk) -> (..., 6): [0, 0, 1 + e, kx, ky, torsion]
        xi = np.zeros(k.shape[:-1] + (6,))
        xi[..., 2] = 1.0 + (k[..., 3] if nk > 3 else 0.0)
        xi[..., 3:5] = k[..., :2]
        if nk > 2:
            xi[..., 5] = k[..., 2]
        return xi

    out = np.empty((nt, s.size, 4, 4))
    for i in range(nt):
        ends = [np.eye(4)]
        for j in range(nseg):
            ends.append(ends[-1] @ lie.exp(seg_len * strain(kappa[i, j])[None])[0])
        j = np.clip((s / seg_len).astype(np.int64), 0, nseg - 1)
        local = s - j * seg_len
        xis = local[:, None] * strain(kappa[i, j])
        out[i] = np.stack([ends[jj] for jj in j]) @ lie.exp(xis)
    return out


def merged_returns(
    lam: FloatArray, ray: FloatArray, part: NDArray[np.int64], max_range: float, imp: Imperfections
) -> tuple[
    FloatArray,
    FloatArray,
    NDArray[np.bool_],
    NDArray[np.int64],
    NDArray[np.int64],
    NDArray[np.bool_],
    NDArray[np.bool_],
]:
    """What a zone reports from the ``R`` rays of its footprint: ``lam`` ``(N, R)`` their boresight distances (inf:
    no hit), ``ray`` ``(N, R)`` each ray's length per unit of boresight distance, ``part`` ``(N, R)`` what each hit.

    The chip bins the photons of the whole zone into one histogram: rays whose boresight distances lie within
    ``imp.merge_separation`` of each other (chained) form one target at their signal-weighted mean distance,
    signal falling with the square of the range (equal reflectance); of several targets the strongest is
    reported (the driver's default target order). Returns per zone the reported boresight distance and ray
    length (``lam * |u|`` averaged the same way), whether anything within ``max_range`` was hit, the part with the
    most signal in the target and the one with the next most (-1: one part only), whether the target merges
    two parts or surfaces more than 1 cm apart (a mixed pixel), and whether they span more than
    ``imp.large_pulse_spread`` (the chip's status 9)."""
    r = lam * ray
    hit = np.isfinite(r) & (r <= max_range)
    n, nr = lam.shape
    order = np.argsort(np.where(hit, lam, np.inf), axis=1)
    ls = np.take_along_axis(np.where(hit, lam, np.inf), order, axis=1)
    rs = np.take_along_axis(np.where(hit, r, np.inf), order, axis=1)
    ps = np.take_along_axis(part, order, axis=1)
    hs = np.isfinite(ls)
    w = np.where(hs, 1.0 / np.where(hs, rs, 1.0) ** 2, 0.0)
    gap = np.diff(np.where(hs, ls, 1e9), axis=1) > imp.merge_separation
    gid = np.concatenate([np.zeros((n, 1), dtype=np.int64), np.cumsum(gap, axis=1)], axis=1)
    signal = np.stack([np.sum(w * (gid == g), axis=1) for g in range(nr)], axis=1)  # (N, groups)
    best = np.argmax(signal, axis=1)
    ing = (gid == best[:, None]) & hs
    ws = np.where(ing, w, 0.0)
    tot = ws.sum(axis=1)
    ok = tot > 0
    den = np.where(ok, tot, 1.0)
    lam_rep = np.where(ok, np.sum(ws * np.where(ing, ls, 0.0), axis=1) / den, np.inf)
    r_rep = np.where(ok, np.sum(ws * np.where(ing, rs, 0.0), axis=1) / den, np.inf)
    lo = np.min(np.where(ing, ls, np.inf), axis=1)
    hi = np.max(np.where(ing, ls, -np.inf), axis=1)
    spread = np.where(ok, hi - lo, 0.0)
    same = ps[:, :, None] == ps[:, None, :]
    by_part = np.einsum("nij,nj->ni", same.astype(np.float64), ws)
    who = np.take_along_axis(ps, np.argmax(by_part, axis=1)[:, None], axis=1)[:, 0]
    other_signal = np.where(ps != who[:, None], by_part, 0.0)
    other = np.take_along_axis(ps, np.argmax(other_signal, axis=1)[:, None], axis=1)[:, 0]
    other = np.where(ok & (other_signal.max(axis=1) > 0), other, -1)
    mixed = ok & ((spread > 0.01) | (other >= 0))
    return lam_rep, r_rep, ok, np.where(ok, who, -1), other, mixed, ok & (spread > imp.large_pulse_spread)


def footprint_rays(u: FloatArray, zones_per_side: int, fov: float, rays: int) -> FloatArray:
    """``(Z, rays^2, 3)``: rays ``[tan(ax), tan(ay), 1]`` spread evenly over each zone's square of angles around its
    centre ray ``u`` (``(Z, 3)``); the zone spans ``fov / zones_per_side`` per axis."""
    if rays == 1:
        return np.asarray(u, dtype=np.float64)[:, None, :]
    width = fov / zones_per_side
    off = ((np.arange(rays) + 0.5) / rays - 0.5) * width
    ox, oy = np.meshgrid(off, off, indexing="xy")
    ax = np.arctan(u[:, 0])[:, None] + ox.reshape(1, -1)
    ay = np.arctan(u[:, 1])[:, None] + oy.reshape(1, -1)
    return np.stack([np.tan(ax), np.tan(ay), np.ones_like(ax)], axis=-1)


def _random_rotation(rng: np.random.Generator, angle: float) -> FloatArray:
    """A rotation by ``angle`` (rad) about a random axis."""
    axis = rng.standard_normal(3)
    axis /= np.linalg.norm(axis)
    return np.asarray(lie.exp(np.concatenate([np.zeros(3), angle * axis])[None])[0][:3, :3])


def perturbed_mounts(mounts: list[TofMount], imp: Imperfections, rng: np.random.Generator) -> list[TofMount]:
    """The sensors as built: each moved by ``imp.mount_translation`` and turned by ``imp.mount_rotation_deg``
    (1-sigma, per axis and about a random axis) from its nominal mounting."""
    if imp.mount_translation == 0 and imp.mount_rotation_deg == 0:
        return list(mounts)
    out = []
    for m in mounts:
        T = m.T_ring_sensor.copy()
        T[:3, 3] += imp.mount_translation * rng.standard_normal(3)
        T[:3, :3] = T[:3, :3] @ _random_rotation(rng, np.deg2rad(imp.mount_rotation_deg) * abs(rng.standard_normal()))
        out.append(dataclasses.replace(m, T_ring_sensor=T))
    return out


def base_in_map(imp: Imperfections, rng: np.random.Generator) -> FloatArray:
    """The robot's base in the map: ``imp.registration_translation`` off in a random direction and turned by
    ``imp.registration_rotation_deg`` about a random axis."""
    T = np.eye(4)
    if imp.registration_rotation_deg:
        T[:3, :3] = _random_rotation(rng, np.deg2rad(imp.registration_rotation_deg))
    if imp.registration_translation:
        d = rng.standard_normal(3)
        T[:3, 3] = imp.registration_translation * d / np.linalg.norm(d)
    return T


def _fit_scale(cfg: SimConfig, robot: RobotSpec) -> float:
    """Amplitude scale keeping the backbone within ``cfg.max_radius`` of the duct axis."""
    t = np.linspace(0, cfg.duration, 400)
    s = np.linspace(0, robot.length, 31)
    k = segment_curvatures(t, cfg.trajectory, robot.segments, cfg.still)
    T = robot_poses(k, s, robot.length)
    r = np.hypot(T[..., 0, 3], T[..., 1, 3]).max()
    return float(min(1.0, cfg.max_radius / r)) if r > 0 else 1.0


def simulate(scene: Scene, robot: RobotSpec | None = None, cfg: SimConfig | None = None) -> SimRun:
    """Run the robot through ``scene``: ToF frames, gyroscopes, strain and ground truth (in the map's frame,
    which is the scene's), with the imperfections of ``cfg.imperfections`` (none by default)."""
    robot = robot or RobotSpec()
    cfg = cfg or SimConfig()
    imp = cfg.imperfections
    if cfg.duration <= cfg.still:
        raise ValueError(f"duration {cfg.duration} s must exceed the still period {cfg.still} s")
    rng = np.random.default_rng(cfg.seed)
    # each imperfection draws from its own stream, so that turning one on leaves the others' draws (and the
    # sensor noise) as they were: runs with and without it differ by it alone
    T_map_base = base_in_map(imp, np.random.default_rng((cfg.seed, 2)))
    scale = _fit_scale(cfg, robot)
    # the run's largest bending, on a fixed grid (the same for every call below: ToF, gyroscopes, truth)
    grid = segment_curvatures(np.linspace(0.0, cfg.duration, 400), cfg.trajectory, robot.segments, cfg.still, scale)
    bend_max = float(np.hypot(grid[..., 0], grid[..., 1]).max())

    def poses(t: FloatArray, s: FloatArray) -> FloatArray:
        k = segment_curvatures(t, cfg.trajectory, robot.segments, cfg.still, scale)
        if imp.twist > 0 or imp.extension > 0:
            k = segment_twist_stretch(k, t, cfg.trajectory, cfg.still, imp, bend_max)
        return robot_poses(k, np.asarray(s), robot.length)

    mounts = robot.mounts()
    true_mounts = perturbed_mounts(mounts, imp, np.random.default_rng((cfg.seed, 1)))
    # ToF: each sensor at 15 Hz, sensors of a ring read one after another within the frame period
    period = 1.0 / cfg.tof_rate
    frames_t = np.arange(0.0, cfg.duration - 1e-9, period)
    tt, mm, dd, st, pp, mx, po = [], [], [], [], [], [], []
    for mi, m in enumerate(true_mounts):
        t_m = frames_t + (mi % 3) * period / 3.0
        t_m = t_m[t_m < cfg.duration]
        Tr = T_map_base @ poses(t_m, np.array([m.s]))[:, 0]
        Ts = Tr @ m.T_ring_sensor
        u_loc = zone_directions(m.zones_per_side, m.fov)
        Z = u_loc.shape[0]
        sub = footprint_rays(u_loc, m.zones_per_side, m.fov, imp.footprint_rays)  # (Z, R, 3)
        R = sub.shape[1]
        u = np.einsum("fij,zrj->fzri", Ts[:, :3, :3], sub).reshape(-1, 3)
        o = np.repeat(Ts[:, :3, 3], Z * R, axis=0)
        lam, part = scene.cast(o, u)
        ray_len = np.linalg.norm(u, axis=1)
        if R == 1:
            hit = np.isfinite(lam) & (lam * ray_len <= m.max_range)
            ray = ray_lengths(u, cfg.range_convention)
            noisy, status = zone_readings(lam, hit, rng, cfg.invalid_fraction, ray)
            mixed = np.zeros(lam.shape, dtype=bool)
            other = np.full(lam.shape, -1, dtype=np.int64)
        else:
            lam_z, r_z, hit, part, other, mixed, large = merged_returns(
                lam.reshape(-1, R), ray_len.reshape(-1, R), part.reshape(-1, R), m.max_range, imp
            )
            reported = r_z / np.where(hit, lam_z, 1.0) if cfg.range_convention == "radial" else None
            ray_lengths(u[:1], cfg.range_convention)  # the convention's name checked as for one ray
            noisy, status = zone_readings(np.where(hit, lam_z, np.nan), hit, rng, cfg.invalid_fraction, reported)
            status[large & (status == STATUS_VALID)] = STATUS_LARGE_PULSE
        tt.append(t_m)
        mm.append(np.full(t_m.size, mi))
        dd.append(noisy.reshape(-1, Z))
        st.append(status.reshape(-1, Z))
        pp.append(np.where(hit, part, -1).reshape(-1, Z))
        mx.append(mixed.reshape(-1, Z))
        po.append(other.reshape(-1, Z))
    order = np.argsort(np.concatenate(tt), kind="stable")
    tof_t = np.concatenate(tt)[order]
    # gyroscopes: body angular velocity of the ring frame, bias and noise, stamped by their own clock
    gt = np.arange(0.0, cfg.duration, 1.0 / cfg.gyro_rate)
    rings = np.asarray(robot.ring_s)
    h = 1e-4
    Ta = poses(gt - h, rings).reshape(-1, 4, 4)
    Tb = poses(gt + h, rings).reshape(-1, 4, 4)
    w = lie.log(lie.inv(Ta) @ Tb)[:, 3:] / (2 * h)
    w, bias = gyro_readings(w, rings, rng, cfg)
    gt_stamp = gt * (1.0 + imp.gyro_clock_drift) + imp.gyro_time_offset
    # strain: bending angle and curvature of the segment at each site
    sts = robot.strain_s()
    stt = np.arange(0.0, cfg.duration, 1.0 / cfg.strain_rate)
    k = segment_curvatures(stt, cfg.trajectory, robot.segments, cfg.still, scale)
    seg = np.clip((sts / (robot.length / robot.segments)).astype(np.int64), 0, robot.segments - 1)
    theta, kappa = strain_readings(k[:, seg], rng, cfg)  # k[:, seg]: (T, S, 2) angular strain about x, y
    # ground truth at the base and the rings, in the map's frame
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
        np.repeat(gt_stamp, rings.size),
        np.tile(rings, gt.size),
        w,
        bias,
        np.repeat(stt, sts.size),
        np.tile(sts, stt.size),
        theta.reshape(-1),
        kappa.reshape(-1),
        trt,
        trs,
        T_map_base @ poses(trt, trs),
        [p.name for p in scene.parts],
        true_mounts,
        T_map_base,
        np.concatenate(mx)[order],
        np.concatenate(po)[order],
    )
