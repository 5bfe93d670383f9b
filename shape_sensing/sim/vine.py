"""Vine-robot simulator with distributed IMUs (ground truth for the hinge-arc estimator).

The body is *not* the hinge-arc model: it is a continuous-curvature rod whose
wall material is inextensible and whose inner side buckles when it bends. Every
point of the body is addressed by its material coordinate ``sigma`` (outer-edge
arc length from the base), and a shape is the bend per unit of material,
``kappa(sigma, t)`` (1/m): the outer edge's curvature. With the outer edge at
radius ``1 / kappa`` from the centre of curvature, the centreline at ``D / 2``
inside it turns by the same angle over ``1 - kappa * D / 2`` of its length per
unit of material, and the inner edge (``D`` inside) over ``1 - kappa * D``: the
inner wall is fully buckled at ``kappa = 1 / D``, the sharpest bend the body can
make (:meth:`VineSimulator.curvature` refuses a profile beyond it).
Eversion puts new material at the tip: the material already out never moves
along the body, and a sensor at ``sigma_i`` is out once the length exceeds it.

Shapes are planar bends in a bend plane through the base axis, one per scenario
of seed 000:

* ``active``: constant curvature over the whole 1.73 m body, ramping from 0
  to a centreline curvature of 0.15 1/cm (15 1/m; 7.6 1/m of material) and
  back (series-pouch-motor steering).
* ``passive``: straight up to a plank, a smooth bend (raised-cosine bend over
  42 cm of material, at most 7.5 1/m) whose angle ramps 0 -> 90 deg, straight
  along the plank.
* ``growth``: length grows 0.30 -> 1.75 m with an S-shaped steering
  curvature fixed in material.
* ``kink`` (not in seed 000): 45 deg in 21 cm of material across an IMU,
  as sharp as the wall allows.

Two scenarios leave the plane (not in seed 000; the body's frame is integrated
along the material, ``dR / dsigma = R [w]x`` with ``w`` the bend and twist per
unit of material in the body's own frame):

* ``helix``: beyond the first 10 cm a bend of 5 1/m of material (ramping in from
  0) whose direction turns about the tangent once per metre of material, the
  body's frame not twisting: a helix of curvature ``5 / (1 - 5 D / 2)`` and
  torsion ``2 pi / (1 - 5 D / 2)`` per unit of centreline.
* ``torsion``: the passive bend, with the body twisting about its tangent at up
  to 90 deg per metre of material (ramping in as the bend does): the sensors'
  line spirals round the body and the bend leaves the base's plane.

IMU model (stated; not from a datasheet):

* Orientation: ``R_meas = D_i(t) * W_i * R_world_base * B(sigma_i) * M_i * N``
  with ``W_i`` a per-sensor world-frame heading offset (std 2 deg, the BNO055
  NDOF heading is magnetic), ``M_i`` a random mounting rotation (std 5 deg per
  axis), ``N`` white noise (std ``orientation_noise_deg`` per axis) and
  ``D_i(t) = exp(t * r_i * a_i)`` a drift at rate ``r_i`` about a random unit axis
  ``a_i``. The rates are drawn from a gamma distribution and rescaled so their
  mean over the sensors is exactly ``drift_deg_per_min`` (seed 000: 1.33 deg/min).
* Gyro: true body rate plus white noise (``gyro_noise`` rad/s) and a constant
  bias (std 0.005 rad/s). Accelerometer: specific force of gravity in the sensor
  frame (quasi-static body) plus white noise (``accel_noise`` m/s^2).
* Sensors not yet everted ride inside the body, reversed (``inside:
  reversed``, the default, as on a real everting robot: the material inside
  runs back towards the base, inside out, so the sensor frame is the base
  frame turned by 180 deg about its y axis), or report the base orientation
  (``inside: base``). Either way the estimator must ignore them using the
  length from the base encoder, and their mounting can only be captured once
  they are everted (:meth:`VineSimulator.straight_samples` gives the readings
  of the robot fully everted and held straight, for the straight reference).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial.transform import Rotation

from shape_sensing.config import Param, Schema
from shape_sensing.geometry import FloatArray, canonical_quat, make_transform
from shape_sensing.types import ImuSample

__all__ = ["R_WORLD_BASE", "SCENARIOS", "SCHEMA", "VineSimConfig", "VineSimulator", "VineTruth"]

SCENARIOS = ("passive", "active", "growth", "kink", "helix", "torsion")
#: scenarios whose body leaves its bend plane (integrated as frames, not as one bend angle)
SPATIAL = ("helix", "torsion")

# The base frame: z along the initial growth direction (world x), x up (world z), sensors on top (+x).
R_WORLD_BASE = np.array([[0.0, 0.0, 1.0], [0.0, -1.0, 0.0], [1.0, 0.0, 0.0]])

GRAVITY = 9.80665

SCHEMA = Schema(
    "vine_imu_simulator",
    (
        Param("scenario", str, "passive", "seed-000 experiment to simulate", choices=SCENARIOS),
        Param("n_sensors", int, 18, "number of IMUs on the outer wall", min=2, max=64),
        Param(
            "imu_array_topic",
            str,
            "imus",
            "shape_sensing/ImuArray topic of each sweep of all IMUs, beside the "
            "per-IMU sensor_msgs/Imu topics; '' for none",
        ),
        Param("spacing", float, 0.102, "IMU spacing along the outer wall", min=0.01, unit="m"),
        Param("diameter", float, 0.129, "inflated body diameter", min=0.01, unit="m"),
        Param("first_sensor", float, 0.0, "material coordinate of the first IMU from the base", min=0.0, unit="m"),
        Param("rate", float, 100.0, "IMU publishing rate", min=1.0, max=1000.0, unit="Hz"),
        Param("duration", float, 60.0, "scenario duration (time over which the motion ramps)", min=1.0, unit="s"),
        Param("orientation_noise_deg", float, 0.1, "IMU orientation white noise per axis", min=0.0, unit="deg"),
        Param("drift_deg_per_min", float, 1.33, "mean IMU orientation drift rate over the sensors", min=0.0),
        Param("gyro_noise", float, 0.003, "gyro white noise", min=0.0, unit="rad/s"),
        Param("accel_noise", float, 0.02, "accelerometer white noise", min=0.0, unit="m/s^2"),
        Param("seed", int, 0, "random seed"),
        Param("frame_prefix", str, "", "prefix of every frame id (two robots in one TF tree)"),
        Param("world_frame", str, "world", "parent of the base in the node's static transform; '' for none"),
        Param(
            "inside",
            str,
            "reversed",
            "orientation of sensors not yet everted: reversed inside the body, or the base's",
            choices=("reversed", "base"),
        ),
    ),
    description="Simulated vine robot with distributed IMUs publishing sensor_msgs/Imu.",
)


@dataclass(frozen=True)
class VineSimConfig:
    """Simulator settings (see :data:`SCHEMA` for meaning and units)."""

    scenario: str = "passive"
    n_sensors: int = 18
    spacing: float = 0.102
    diameter: float = 0.129
    first_sensor: float = 0.0
    rate: float = 100.0
    duration: float = 60.0
    orientation_noise_deg: float = 0.1
    drift_deg_per_min: float = 1.33
    gyro_noise: float = 0.003
    accel_noise: float = 0.02
    seed: int = 0
    frame_prefix: str = ""
    inside: str = "reversed"

    @classmethod
    def from_params(cls, params: dict[str, object]) -> VineSimConfig:
        """Build from a validated parameter mapping (unknown keys ignored)."""
        values = SCHEMA.validate({k: v for k, v in params.items() if k in SCHEMA.names()})
        fields = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in values.items() if k in fields})

    @property
    def sensed_length(self) -> float:
        """Material length from the base to the last IMU."""
        return self.first_sensor + (self.n_sensors - 1) * self.spacing


@dataclass
class VineTruth:
    """Ground truth at one time, in the robot base frame."""

    t: float
    length: float
    backbone: FloatArray  # (M, 3) centreline points, base to tip
    sensor_poses: FloatArray  # (n, 4, 4) backbone frames at the sensors, moved D/2 onto the wall
    everted: np.ndarray  # (n,) bool
    tip_pose: FloatArray  # (4, 4) centreline frame at the tip


def _smoothstep(x: FloatArray | float) -> FloatArray:
    x = np.clip(x, 0.0, 1.0)
    return np.asarray(x * x * (3.0 - 2.0 * x))


class VineSimulator:
    """Ground truth and IMU samples of a simulated vine robot."""

    STEP = 0.004  # material step of the shape integration (m)

    def __init__(self, config: VineSimConfig) -> None:
        if config.scenario not in SCENARIOS:
            raise ValueError(f"scenario {config.scenario!r} unknown; expected one of {SCENARIOS}")
        self.config = config
        rng = np.random.default_rng(config.seed)
        n = config.n_sensors
        self.sigma = config.first_sensor + config.spacing * np.arange(n)
        self.sensor_names = [f"{config.frame_prefix}vine_imu_{i:02d}" for i in range(n)]
        self.base_frame = f"{config.frame_prefix}vine_imu_base"  # the chain's base: z along the growth
        self.vine_base_frame = f"{config.frame_prefix}vine_base"  # REP-103: x along the growth, z up
        if config.scenario == "growth":
            self.length_range = (0.30, max(1.75, self.sigma[-1] + 0.02))
        else:
            self.length_range = (self.sigma[-1] + 0.02, self.sigma[-1] + 0.02)
        # Sensor error model.
        self.mount = Rotation.from_rotvec(rng.normal(0.0, np.deg2rad(5.0), (n, 3)))
        self.world_offset = Rotation.from_rotvec(np.outer(rng.normal(0.0, np.deg2rad(2.0), n), [0.0, 0.0, 1.0]))
        rates = rng.gamma(2.0, 1.0, n)
        rates *= config.drift_deg_per_min / rates.mean() if rates.mean() > 0 else 0.0
        self.drift_rate = np.deg2rad(rates) / 60.0  # rad/s
        axes = rng.normal(size=(n, 3))
        self.drift_axis = axes / np.linalg.norm(axes, axis=1, keepdims=True)
        self.gyro_bias = rng.normal(0.0, 0.005, (n, 3))
        self._rng = np.random.default_rng(config.seed + 1)
        self._r_wb = Rotation.from_matrix(R_WORLD_BASE)

    # -- shape ------------------------------------------------------------
    def length(self, t: float) -> float:
        """Robot length (material, from the base) at time ``t``."""
        lo, hi = self.length_range
        return float(lo + (hi - lo) * _smoothstep(t / self.config.duration))

    def curvature(self, sigma: FloatArray, t: float) -> FloatArray:
        """Bend per unit of material (the outer edge's curvature, 1/m; for the planar scenarios about the base x
        axis) at ``sigma``."""
        if self.config.scenario in SPATIAL:
            w = self.rates(sigma, t)
            return np.asarray(np.hypot(w[:, 0], w[:, 1]))
        return self._bend(self.config.scenario, sigma, t)

    def _bend(self, scenario: str, sigma: FloatArray, t: float) -> FloatArray:
        c = self.config
        phase = _smoothstep(t / c.duration)
        if scenario == "active":
            # centreline curvature 0 -> 15 1/m -> 0 over the run (triangle in time, eased), per unit of material
            k = 15.0 * _smoothstep(1.0 - abs(2.0 * t / c.duration - 1.0))
            return self._checked(np.full_like(sigma, k / (1.0 + k * c.diameter / 2.0)))
        if scenario == "passive":
            angle = np.deg2rad(90.0) * phase
            # 42 cm: the raised cosine's peak, 2 * 90 deg / width, within the wall's 1 / D
            start, width = 0.55 * self.sigma[-1], 0.42
            x = (sigma - start) / width
            bump = np.where((x >= 0) & (x <= 1), 1.0 - np.cos(2 * np.pi * np.clip(x, 0, 1)), 0.0)
            return self._checked(angle * bump / width)  # integral of bump over material = width
        if scenario == "kink":
            # a kink: 45 deg in 21 cm of material, as sharp as the wall allows (peak 2 * 45 deg / width, just
            # within 1 / D, the inner wall fully buckled), across an IMU at 40 % of the body: the shape a hinge
            # model is least suited to (a segment's bend at one end, part of a bend in the IMU's own frame)
            angle = np.deg2rad(45.0) * phase
            start, width = 0.4 * self.sigma[-1] - 0.06, 0.21
            x = (sigma - start) / width
            bump = np.where((x >= 0) & (x <= 1), 1.0 - np.cos(2 * np.pi * np.clip(x, 0, 1)), 0.0)
            return self._checked(angle * bump / width)
        # growth: an S-shaped steering profile fixed in material coordinates
        return self._checked(2.2 * np.sin(2 * np.pi * sigma / 1.3) * (sigma > 0.15))

    def _checked(self, kappa: FloatArray) -> FloatArray:
        limit = 1.0 / self.config.diameter
        if np.any(np.abs(kappa) > limit * (1.0 + 1e-9)):
            raise ValueError(
                f"{self.config.scenario}: a bend of {float(np.abs(kappa).max()):.2f} 1/m of material is past the "
                f"fully buckled inner wall, 1/D = {limit:.2f} 1/m"
            )
        return kappa

    def rates(self, sigma: FloatArray, t: float) -> FloatArray:
        """Turn per unit of material of the body's frame, in that frame, at ``sigma`` (``(N, 3)``, rad/m): the
        bend about its x and y axes, the twist about its tangent z. For the planar scenarios, ``(kappa, 0, 0)``."""
        c = self.config
        phase = _smoothstep(t / c.duration)
        w = np.zeros((len(sigma), 3))
        if c.scenario == "helix":
            k = self._checked(5.0 * phase * _smoothstep((sigma - 0.1) / 0.1))
            direction = 2.0 * np.pi * sigma  # one turn of the bend's direction per metre of material
            w[:, 0], w[:, 1] = k * np.cos(direction), k * np.sin(direction)
            return w
        if c.scenario == "torsion":
            w[:, 0] = self._bend("passive", sigma, t)
            w[:, 2] = np.deg2rad(90.0) * phase
            return w
        w[:, 0] = self._bend(c.scenario, sigma, t)
        return w

    def _frames(self, t: float, sigma_end: float) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Material grid (with every sensor's coordinate on it), the body's frames and its centreline points up
        to ``sigma_end``, for any scenario. Each material step turns the frame by ``exp(w dsigma)`` (``w`` at the
        step's middle) and moves the centreline ``(1 - |bend| D / 2) dsigma`` along the tangent halfway through
        the turn."""
        D = self.config.diameter
        n_steps = max(2, int(np.ceil(sigma_end / self.STEP)))
        sensors = self.sigma[self.sigma < sigma_end]
        grid = np.unique(np.concatenate([np.linspace(0.0, sigma_end, n_steps + 1), sensors]))
        ds = np.diff(grid)
        w = self.rates(0.5 * (grid[1:] + grid[:-1]), t)
        bend = np.hypot(w[:, 0], w[:, 1])
        dc = ds * (1.0 - bend * D / 2.0)
        half = Rotation.from_rotvec(w * (ds / 2.0)[:, None]).as_matrix()
        R = np.empty((len(grid), 3, 3))
        pts = np.empty((len(grid), 3))
        R[0], pts[0] = np.eye(3), 0.0
        for j in range(len(ds)):
            mid = R[j] @ half[j]
            pts[j + 1] = pts[j] + mid[:, 2] * dc[j]
            R[j + 1] = mid @ half[j]
        return grid, R, pts

    def _integrate(self, t: float, sigma_end: float) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Material grid, tangent angles and centreline points up to ``sigma_end``."""
        D = self.config.diameter
        n_steps = max(2, int(np.ceil(sigma_end / self.STEP)))
        grid = np.linspace(0.0, sigma_end, n_steps + 1)
        mid = 0.5 * (grid[1:] + grid[:-1])
        kappa_mat = self.curvature(mid, t)
        # the outer edge inextensible, the inner one buckled: the centreline D/2 inside the outer edge turns by
        # the same angle over 1 - kappa D / 2 of its length per unit of material
        dc = np.diff(grid) * (1.0 - np.abs(kappa_mat) * D / 2.0)
        dtheta = kappa_mat * np.diff(grid)  # bend angle per material step
        theta = np.concatenate([[0.0], np.cumsum(dtheta)])
        theta_mid = 0.5 * (theta[1:] + theta[:-1])
        # Bend about the base x axis: tangent rotates from +z towards -y.
        step = np.stack([np.zeros_like(dc), -np.sin(theta_mid) * dc, np.cos(theta_mid) * dc], axis=1)
        pts = np.concatenate([np.zeros((1, 3)), np.cumsum(step, axis=0)])
        return grid, theta, pts

    def truth(self, t: float) -> VineTruth:
        """Ground truth at time ``t``."""
        length = self.length(t)
        if self.config.scenario in SPATIAL:
            grid, Rs, pts = self._frames(t, length)
            at = np.searchsorted(grid, np.minimum(self.sigma, length))
            R = Rs[at]
            wall = pts[at] + R[:, :, 0] * (self.config.diameter / 2.0)
            return VineTruth(t, length, pts, make_transform(R, wall), self.sigma <= length + 1e-9,
                             make_transform(Rs[-1], pts[-1]))  # fmt: skip
        grid, theta, pts = self._integrate(t, length)
        th_s = np.interp(np.minimum(self.sigma, length), grid, theta)
        px = np.interp(np.minimum(self.sigma, length), grid, pts[:, 1])
        pz = np.interp(np.minimum(self.sigma, length), grid, pts[:, 2])
        R = Rotation.from_rotvec(np.outer(th_s, [1.0, 0.0, 0.0])).as_matrix()
        centre = np.stack([np.zeros_like(px), px, pz], axis=1)
        wall = centre + R[:, :, 0] * (self.config.diameter / 2.0)
        everted = self.sigma <= length + 1e-9
        tip = make_transform(Rotation.from_rotvec([theta[-1], 0.0, 0.0]).as_matrix(), pts[-1])
        return VineTruth(t, length, pts, make_transform(R, wall), everted, tip)

    # -- sensors ----------------------------------------------------------
    def _true_backbone_rot(self, t: float, straight: bool = False) -> Rotation:
        if straight:  # fully everted and held straight: every backbone frame is the base frame
            return Rotation.from_rotvec(np.zeros((len(self.sigma), 3)))
        length = self.length(t)
        out = self.sigma <= length + 1e-9
        if self.config.scenario in SPATIAL:
            grid, Rs, _ = self._frames(t, length)
            R = Rs[np.searchsorted(grid, np.minimum(self.sigma, length))]
            R[~out] = np.eye(3)  # inside the body: base orientation ...
            rot = Rotation.from_matrix(R)
        else:
            grid, theta, _ = self._integrate(t, length)
            th = np.interp(np.minimum(self.sigma, length), grid, theta)
            th = np.where(out, th, 0.0)  # inside the body: base orientation ...
            rot = Rotation.from_rotvec(np.outer(th, [1.0, 0.0, 0.0]))
        if self.config.inside == "reversed":  # ... or reversed, inside out
            flip = Rotation.from_rotvec(np.outer(np.where(out, 0.0, np.pi), [0.0, 1.0, 0.0]))
            rot = rot * flip
        return rot

    def true_sensor_rotations(self, t: float, straight: bool = False) -> Rotation:
        """Noise-free, drift-free world orientations of the sensor frames (with mounting)."""
        return self.world_offset * self._r_wb * self._true_backbone_rot(t, straight) * self.mount

    def straight_samples(self, t: float = 0.0) -> list[ImuSample]:
        """Measured samples at time ``t`` with the robot fully everted and held straight (straight reference)."""
        return self.imu_samples(t, straight=True)

    def imu_samples(self, t: float, straight: bool = False) -> list[ImuSample]:
        """Measured IMU samples (all sensors) at time ``t`` (stamped ``t``)."""
        c = self.config
        n = c.n_sensors
        dt = 1.0 / c.rate
        r_now = self.true_sensor_rotations(t, straight)
        r_prev = self.true_sensor_rotations(max(0.0, t - dt), straight)
        drift = Rotation.from_rotvec(self.drift_axis * (self.drift_rate * t)[:, None])
        noise = Rotation.from_rotvec(self._rng.normal(0.0, np.deg2rad(c.orientation_noise_deg), (n, 3)))
        measured = drift * r_now * noise
        omega = (r_prev.inv() * r_now).as_rotvec() / dt if t > 0 else np.zeros((n, 3))
        gyro = omega + self.gyro_bias + self._rng.normal(0.0, c.gyro_noise, (n, 3))
        accel = r_now.inv().apply([0.0, 0.0, GRAVITY]) + self._rng.normal(0.0, c.accel_noise, (n, 3))
        quats = canonical_quat(measured.as_quat())
        stamp = round(t * 1e9)
        ocov = np.eye(3) * np.deg2rad(c.orientation_noise_deg) ** 2
        gcov = np.eye(3) * c.gyro_noise**2
        acov = np.eye(3) * c.accel_noise**2
        return [ImuSample(stamp, self.sensor_names[i], quats[i], gyro[i], accel[i], ocov, gcov, acov) for i in range(n)]
