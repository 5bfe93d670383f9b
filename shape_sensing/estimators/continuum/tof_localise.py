"""Localising a continuum robot against a prior map with ring-mounted ToF sensors, gyroscopes and strain (seed 001).

:func:`build_measurements` turns raw sensor data (ToF frames with status codes, gyroscope readings, bending
angle and curvature) into estimator :class:`~.model.Measurements`: invalid zones left out and counted, the
gyroscope bias of each sensor removed as the mean of its still start, strain readings whitened.
:func:`localise` runs the batch (or sliding-window) estimator with the ToF factor;
:func:`ring_errors` scores an estimate against ground truth (translation and rotation error at the rings);
:func:`reconstruct` projects every ToF point with its covariance (Eq. 10-11) and flags anomalies by the
squared Mahalanobis distance to the nearest prior-map point (Eq. 12).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.stats import chi2

from shape_sensing.estimators.continuum import lie
from shape_sensing.estimators.continuum.covariance import node_covariances
from shape_sensing.estimators.continuum.errors import ContinuumError
from shape_sensing.estimators.continuum.estimator import BatchEstimator
from shape_sensing.estimators.continuum.gyro_bias import apply_correction, bias_newton_step, still_mean_prior
from shape_sensing.estimators.continuum.gyro_time import TimeOffset, fit_time_offset
from shape_sensing.estimators.continuum.model import GridState, Measurements, Weights
from shape_sensing.estimators.continuum.query import query_poses
from shape_sensing.estimators.continuum.registration import (
    BaseRegistration,
    MountCalibration,
    calibrate_mount,
    register_base,
    registration_mount_sensitivity,
    run_points,
    still_points_by_sensor,
)
from shape_sensing.estimators.continuum.rig import RegisteredBase, sensor_origins
from shape_sensing.estimators.continuum.solver import assign_measurements, unique_pairs
from shape_sensing.estimators.continuum.tof import (
    TofEvaluation,
    TofMount,
    frames_points,
    project_points,
    stationary_bias,
    strain_measurement,
    tof_factor,
)
from shape_sensing.estimators.continuum.window import SlidingWindow
from shape_sensing.geometry import FloatArray

__all__ = [
    "LocaliseConfig",
    "Reconstruction",
    "SensorData",
    "build_measurements",
    "default_weights",
    "localise",
    "matched_fraction",
    "reconstruct",
    "ring_errors",
    "summarise_errors",
    "tof_residual_scale",
]

_log = logging.getLogger(__name__)

#: The batch solver's switches for ToF localisation: the Cauchy curvature inside the bend and the extrapolating
#: line search, without the trust region on the exact Hessian. The trust region starts once the set of robust
#: factors beyond the bend settles, which re-matching every iteration does not give; it was measured on the
#: recorded pose/gyro trials only, so ToF runs keep the solver their figures were taken with.
TOF_SOLVER = {"robust_curvature": True, "extrapolate": True, "trust_region": False}


@dataclass
class SensorData:
    """Raw sensor data of a run (what the bag holds), independent of where it came from."""

    length: float
    mounts: list[TofMount]
    tof_t: FloatArray  # (F,)
    tof_mount: NDArray[np.int64]  # (F,) index into mounts
    tof_distance: FloatArray  # (F, Z)
    tof_status: NDArray[np.uint8]  # (F, Z)
    gyro_t: FloatArray
    gyro_s: FloatArray
    gyro_w: FloatArray  # (G, 3)
    strain_t: FloatArray
    strain_s: FloatArray
    strain_theta: FloatArray
    strain_kappa: FloatArray
    still: float = 1.0
    #: the recording's clock at t = 0 (ns): a bag's stamps (any epoch) less this are the times above
    t0_ns: int = 0

    def until(self, t_end: float) -> SensorData:
        """The data stamped at or before ``t_end`` (an estimate that ends there has no place for later points)."""
        f, g, s = self.tof_t <= t_end, self.gyro_t <= t_end, self.strain_t <= t_end
        return dataclasses.replace(
            self, tof_t=self.tof_t[f], tof_mount=self.tof_mount[f], tof_distance=self.tof_distance[f],
            tof_status=self.tof_status[f], gyro_t=self.gyro_t[g], gyro_s=self.gyro_s[g], gyro_w=self.gyro_w[g],
            strain_t=self.strain_t[s], strain_s=self.strain_s[s], strain_theta=self.strain_theta[s],
            strain_kappa=self.strain_kappa[s],
        )  # fmt: skip


@dataclass(frozen=True)
class LocaliseConfig:
    """Estimator choices (defaults as tuned on scene S0, trajectory 0)."""

    node_spacing: float = 0.1
    rate: float = 5.0
    use_tof: bool = True
    use_gyro: bool = True
    use_strain: bool = True
    iterations: int = 30
    #: the batch's decrement stopping test (see :data:`~.solver.DECREMENT_TOL`): looser than the default 1e-4
    #: because matching points again at every evaluation makes the cost jump by the last few nearest-neighbour
    #: changes, so the final tiny steps are refused by the line search instead of converging (on S0 the
    #: decrement stalls at ~6e-4 with the estimate unchanged to 1e-4 m)
    decrement_tol: float = 1e-2
    window: int = 0  # 0: batch; else sliding-window size in slices
    #: Gauss-Newton iterations per window step: every slice is solved again in each of the ``window`` steps it
    #: spends in the window, so one per step converges across steps (3 per step took three times the CPU for
    #: the same ring errors: docs/results/tof_realtime.md)
    window_iterations: int = 1
    #: window only: at most this many ToF points per frame enter the solve (0: all; see
    #: :class:`~.window.SlidingWindow`)
    window_tof_points: int = 0
    tof_sigma_extra: float = 0.005
    cauchy_tof: float = 1.0
    tof_gate: float = 0.3
    strain_sigma_theta: float = 0.015
    strain_sigma_kappa: float = 0.01
    gyro_sigma: float = 0.01
    q_scale: float = 1.0
    #: the gyroscopes' constant biases: "still" holds each at its still-period mean (seed 001); "joint" takes
    #: that mean as a prior (variance ``gyro_sigma^2 / n``) and estimates the bias with the batch (see
    #: :mod:`~.gyro_bias`); the sliding window always uses "still"
    gyro_bias: str = "joint"
    #: Newton steps on the joint biases (each followed by a batch solve from the moved state)
    bias_iterations: int = 2
    #: the gyroscopes' clock against the ToF sensors': "fixed" takes their stamps as on one clock (seed 001);
    #: "estimate" calibrates one constant offset from the run (:func:`calibrate_time_offset`: a ToF-only batch
    #: first, the offset searched within ``+-gyro_time_search`` s) and estimates with the readings moved by it
    gyro_time_offset: str = "fixed"
    gyro_time_search: float = 0.1
    #: the ToF points' noise: "estimate" (the default) scales Table I plus ``tof_sigma_extra`` down by the robust
    #: scale (1.4826 median |r|) of the whitened point-to-plane residuals at the batch's estimate when that is
    #: below 1 (the model then overstates the points' noise: about 0.5 on the simulated duct; see
    #: :func:`tof_residual_scale`) and solves again; "fixed" takes the model as it is; the batch only
    tof_noise: str = "estimate"
    #: rounds of that estimate (each a batch solve from the last estimate)
    tof_noise_iterations: int = 2
    #: what the ToF distances measure: "perpendicular" (along the boresight; the VL53L5CX as ST describes it and
    #: the ring driver publishes) or "radial" (along each zone's ray); see :func:`~.tof.frame_points`
    range_convention: str = "perpendicular"
    #: where the robot's base sits in the map: "fixed" at the model's base pose (the map made in the base's frame,
    #: or registered beforehand), or "still": registered from the still start's ToF frames
    #: (:mod:`~.registration`) with a prior of ``registration_sigma`` (m) and ``registration_sigma_deg`` per axis
    #: around it, as for a map made apart from the robot and a base placed by hand
    base_registration: str = "fixed"
    registration_sigma: float = 0.05
    registration_sigma_deg: float = 5.0
    #: batch only, with ``base_registration="still"``: rounds of registering the base again with every ToF point of
    #: the run, placed in the base's frame by the last estimate, each followed by a batch solve from that estimate
    #: moved with the base. The still start sees few of the features that fix the base's roll; the whole run
    #: sees them all
    registration_rounds: int = 2
    #: batch only: calibrate each ToF sensor's mounting on its ring from the run (:func:`~.registration.calibrate_mount`
    #: on its points placed by the estimate, with a prior of ``mount_sigma`` m and ``mount_sigma_deg`` per axis around
    #: the configured mounting), then solve again with the calibrated mountings
    mount_calibration: bool = False
    mount_sigma: float = 0.003
    mount_sigma_deg: float = 3.0
    #: how well the ToF sensors' mountings are known (m, and deg per axis; 0: exactly): their consider covariance
    #: (:mod:`~.rig`) joins the Laplace one in :meth:`LocaliseResult.pose_covariances` and the anomaly test. A
    #: mounting error biases its ring for the whole run, which the points' noise alone does not cover (a printed
    #: mount and a hand-soldered board: about 1 mm and 0.6 deg per axis)
    mount_tolerance: float = 0.0
    mount_tolerance_deg: float = 0.0


#: what :attr:`LocaliseConfig.base_registration` can be
BASE_REGISTRATIONS = ("fixed", "still")


@dataclass
class BuildStats:
    """What :func:`build_measurements` kept and left out."""

    tof_points: int = 0
    tof_invalid: int = 0
    #: points that may merge two surfaces (:func:`~.tof.mixed_zones`): kept, flagged only beside a clean anomaly
    tof_mixed: int = 0
    #: ``(Q,)`` the index (into the mountings) of the sensor of each ToF point
    tof_sensor: NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: the sensors' mountings calibrated from the run (``mount_calibration``), by sensor name
    mount_calibration: dict[str, MountCalibration] = field(default_factory=dict)
    frames_bad: int = 0
    gyro_bias: dict[float, FloatArray] = field(default_factory=dict)


#: Power of the torsion's change along s (the last entry of ``Q2``, rad^2/m^3). Tendons bend the robot but do not
#: twist it; only gravity and contact do, against a backbone as stiff in torsion as in bending. 1e-5 lets the
#: twist at 1.5 m have a standard deviation of about 0.2 deg (the MuJoCo robot twists by at most 0.09 deg in
#: S6 trajectory 0); the former 1e-3 allowed 1.9 deg, so the roll of the rings where few features fix it (the
#: tip ring with blades removed, S6/S9) followed the gyros' bias error instead of the rings below: kinematic S6
#: trajectory 2 +35.5 % rotation over S0 with 1e-3, +1.5 % with 1e-5, and S0 itself 0.086 -> 0.074 deg
#: (MuJoCo trajectory 0: 0.087 -> 0.069 deg).
TORSION_RATE = 1e-5


def default_weights(cfg: LocaliseConfig) -> Weights:
    """Noise model of a clamped, inextensible, tendon-bent robot starting straight at rest on the z axis."""
    q = cfg.q_scale
    return Weights(
        P0=np.array([1e-8] * 6 + [1e-6, 1e-6, 1e-6, 1e-2, 1e-2, 1e-6] + [1e-4] * 6),
        Q1=q * np.array([1e-3, 1e-3, 1e-3, 1e-1, 1e-1, 1e-1]),
        Q2=q * np.array([1e-5, 1e-5, 1e-5, 3.0, 3.0, TORSION_RATE]),
        Q3=q * np.array([1e-5, 1e-5, 1e-5, 1.0, 1.0, 1e-3]),
        R_pose=np.ones(6),
        R_gyro=np.full(3, cfg.gyro_sigma**2),
        fixed_base=True,
        tof_sigma_extra=cfg.tof_sigma_extra,
        cauchy_tof=cfg.cauchy_tof,
        tof_gate=cfg.tof_gate,
    )


def build_measurements(data: SensorData, tof_map: Any, cfg: LocaliseConfig) -> tuple[Measurements, BuildStats]:
    """Estimator measurements from raw sensor data (see the module docstring)."""
    stats = BuildStats()
    meas = Measurements()
    if cfg.use_tof and tof_map is not None and data.tof_t.size:
        fp = frames_points(
            data.mounts, data.tof_mount, data.tof_distance, data.tof_status, range_convention=cfg.range_convention
        )
        stats.frames_bad += int(fp.bad.sum())
        stats.tof_invalid += int(fp.invalid[~fp.bad].sum())
        if fp.sigma.size:
            ring_s = np.array([m.s for m in data.mounts], dtype=np.float64)
            mount = np.asarray(data.tof_mount, dtype=np.int64)[fp.frame]
            meas.tof_q = fp.q
            meas.tof_sigma = fp.sigma
            meas.tof_t = np.asarray(data.tof_t, dtype=np.float64)[fp.frame]
            meas.tof_s = ring_s[mount]
            meas.tof_map = tof_map
            meas.tof_mixed = fp.mixed
            stats.tof_sensor = mount
            stats.tof_points = int(meas.tof_t.size)
            stats.tof_mixed = int(np.any(meas.tof_mixed != 0, axis=1).sum())
    if cfg.use_gyro and data.gyro_t.size:
        bias = stationary_bias(data.gyro_t, data.gyro_s, data.gyro_w, data.still)
        stats.gyro_bias = bias
        b = np.stack([bias[float(s)] for s in data.gyro_s])
        meas.gyro_t, meas.gyro_s, meas.gyro_w = data.gyro_t, data.gyro_s, data.gyro_w - b
    if cfg.use_strain and data.strain_t.size:
        k, W = strain_measurement(data.strain_theta, data.strain_kappa, cfg.strain_sigma_theta, cfg.strain_sigma_kappa)
        meas.strain_t, meas.strain_s, meas.strain_k, meas.strain_w = data.strain_t, data.strain_s, k, W
    return meas, stats


def mixed_offsets(ok: NDArray[np.bool_], pairs: NDArray[np.int64]) -> NDArray[np.int64]:
    """The ``(P, 2)`` ``Measurements.tof_mixed`` offsets of one frame's kept points (``ok``, ``(Z,)``) from
    :func:`~.tof.mixed_zones`' zone pairs ``(Z, 2)``: a partner zone that gave no point is 0 (none)."""
    point_of = np.cumsum(ok) - 1  # zone -> its point's index in the frame (valid where ok)
    pz = pairs[ok]
    has = (pz >= 0) & ok[np.clip(pz, 0, ok.size - 1)]
    own = point_of[ok][:, None]
    return np.where(has, point_of[np.clip(pz, 0, ok.size - 1)] - own, 0).astype(np.int64)


def s_nodes(length: float, spacing: float, must: list[float]) -> FloatArray:
    """Arc-length nodes every ``spacing`` plus every arc length in ``must`` (rings)."""
    n = max(1, int(np.ceil(length / spacing - 1e-9)))
    s = np.concatenate([np.linspace(0.0, length, n + 1), np.asarray(must, dtype=np.float64)])
    s = np.unique(np.round(s, 9))
    return s[(s >= 0) & (s <= length + 1e-9)]


@dataclass
class LocaliseResult:
    """An estimate and what produced it."""

    state: GridState
    weights: Weights
    meas: Measurements
    stats: BuildStats
    iterations: int
    converged: bool
    ab: FloatArray | None = None
    #: why the batch stopped: "converged", "no descent" (no step along the last direction lowered the re-matched
    #: cost: the point matches, not the estimate, still change) or "iteration cap"; "window" for the window
    stop: str = "converged"
    #: joint biases: the correction to each gyroscope's still-period mean (rad/s) and its posterior covariance
    #: ``(3 G, 3 G)`` in the order of the sensors' arc lengths
    bias_correction: dict[float, FloatArray] = field(default_factory=dict)
    bias_cov: FloatArray | None = None
    #: factor the estimate applied to every ToF point's noise (Table I and the extra) by ``tof_noise="estimate"``
    #: (else 1); ``meas`` and ``weights`` keep the configured noise, which the reconstruction and the anomaly
    #: test (Eq. 10-12) use as before
    tof_scale: float = 1.0
    #: share of the ToF points within the gate of the map at the estimate (NaN without ToF); a low share warns
    #: that the map may be in another frame (:func:`matched_fraction`)
    tof_matched_fraction: float = float("nan")
    #: the base's pose in the map from the still start (``base_registration="still"``), else ``None``
    registration: BaseRegistration | None = None
    #: the mountings' tolerance (m, rad per axis; :attr:`LocaliseConfig.mount_tolerance`) and the sensors' origins
    #: on their rings ``(S, 3)``, for :meth:`rig_covariances`
    mount_tolerance: tuple[float, float] = (0.0, 0.0)
    sensor_origins: FloatArray | None = None
    #: how the batch's base was registered from the data (``base_registration="still"``): its error then joins
    #: :meth:`rig_covariances`; ``None`` with the base fixed
    registered_base: RegisteredBase | None = None
    #: the gyroscopes' clock offset against the ToF sensors' as calibrated (``gyro_time_offset="estimate"``; their
    #: stamps less it are the ToF clock's), ``None`` where taken as one clock
    gyro_time_offset: TimeOffset | None = None

    def rig_covariances(self, nodes: NDArray[np.int64]) -> FloatArray:
        """What the rig adds to the pose covariance at flat ``nodes`` ``(n, 6, 6)``: the mountings' tolerance
        (:func:`~.rig.mount_consider_covariance`) and, with the base registered (:attr:`registered_base`), the
        base's error with the mountings moving it (:func:`~.rig.base_sensitivity`); zeros with neither or no
        system."""
        idx = np.asarray(nodes, dtype=np.int64).reshape(-1)
        if self.ab is None or (self.registered_base is None and not any(self.mount_tolerance)):
            return np.zeros((idx.size, 6, 6))
        from shape_sensing.estimators.continuum.rig import (
            base_sensitivity,
            mount_consider_covariance,
            registered_consider_covariance,
        )

        w = self.weights
        if self.registered_base is not None:
            sens = base_sensitivity(self.state, self.ab, w, idx, self.registered_base, meas=self.meas,
                                    sensor=self.stats.tof_sensor, origins=self.sensor_origins,
                                    sigma_extra=w.tof_sigma_extra, cauchy=w.cauchy_tof, gate=w.tof_gate,
                                    tof_scale=self.tof_scale)  # fmt: skip
            return registered_consider_covariance(sens, *self.mount_tolerance)
        if self.sensor_origins is None:
            return np.zeros((idx.size, 6, 6))
        return mount_consider_covariance(self.state, self.ab, self.meas, self.stats.tof_sensor, self.sensor_origins,
                                         idx, *self.mount_tolerance, sigma_extra=w.tof_sigma_extra,
                                         cauchy=w.cauchy_tof, gate=w.tof_gate, tof_scale=self.tof_scale)  # fmt: skip

    def pose_covariances(self, nodes: NDArray[np.int64]) -> FloatArray:
        """The pose covariance ``(n, 6, 6)`` at flat ``nodes`` (right perturbation ``[rho; phi]``): the Laplace
        marginal and what the rig adds (:meth:`rig_covariances`: the mountings' tolerance, a registered base)."""
        if self.ab is None:
            raise ContinuumError("this estimate has no Laplace system (a window keeps its own marginals)")
        return node_covariances(self.ab, nodes, slice(0, 6)) + self.rig_covariances(nodes)


def localise(
    data: SensorData,
    tof_map: Any,
    cfg: LocaliseConfig | None = None,
    t_end: float | None = None,
    progress: Callable[[int, str], None] | None = None,
) -> LocaliseResult:
    """Estimate the robot over the run (batch by default, sliding window with ``cfg.window``).

    ``progress(done, unit)`` after each Gauss-Newton iteration (``done`` counted over every solve of the run,
    ``unit`` "iteration") or window step ("step"); an exception it raises ends the estimate there (a caller's
    Ctrl-C or SIGTERM: minutes of solving are not waited for).
    """
    cfg = cfg or LocaliseConfig()
    if cfg.gyro_bias not in ("still", "joint"):
        raise ContinuumError(f"gyro_bias must be 'still' or 'joint', got {cfg.gyro_bias!r}")
    if cfg.tof_noise not in ("fixed", "estimate"):
        raise ContinuumError(f"tof_noise must be 'fixed' or 'estimate', got {cfg.tof_noise!r}")
    for name in ("mount_tolerance", "mount_tolerance_deg"):
        v = getattr(cfg, name)
        if not (np.isfinite(v) and v >= 0):
            raise ContinuumError(f"{name} must be a finite number >= 0, got {v!r}")
    if cfg.gyro_time_offset not in ("fixed", "estimate"):
        raise ContinuumError(f"gyro_time_offset must be 'fixed' or 'estimate', got {cfg.gyro_time_offset!r}")
    if cfg.gyro_time_offset == "estimate" and not (np.isfinite(cfg.gyro_time_search) and cfg.gyro_time_search > 0):
        raise ContinuumError(f"gyro_time_search must be a finite number of seconds > 0, got {cfg.gyro_time_search!r}")
    if cfg.base_registration not in BASE_REGISTRATIONS:
        raise ContinuumError(f"base_registration must be one of {BASE_REGISTRATIONS}, got {cfg.base_registration!r}")
    if cfg.base_registration == "still":
        for name in ("registration_sigma", "registration_sigma_deg"):
            v = getattr(cfg, name)
            if not (np.isfinite(v) and v > 0):
                raise ContinuumError(f"{name} must be a finite number > 0, got {v!r}")
        if not (isinstance(cfg.registration_rounds, (int, np.integer)) and cfg.registration_rounds >= 0):
            raise ContinuumError(f"registration_rounds must be an integer >= 0, got {cfg.registration_rounds!r}")
    if cfg.window and (cfg.mount_tolerance or cfg.mount_tolerance_deg):
        raise ContinuumError(
            "mount_tolerance enters through the batch's system; the sliding window (window > 0) has none"
        )
    if cfg.mount_calibration and (cfg.window or cfg.registration_rounds < 1):
        raise ContinuumError(
            "mount_calibration runs in the batch's registration rounds: it needs window 0 and registration_rounds >= 1"
        )
    if t_end is not None:
        if not np.isfinite(t_end) or t_end <= 0.0:
            raise ContinuumError(f"t_end must be a time after the run's start (s > 0), got {t_end!r}")
        data = data.until(float(t_end))
    time_offset: TimeOffset | None = None
    if cfg.gyro_time_offset == "estimate" and cfg.use_gyro and data.gyro_t.size:
        time_offset = calibrate_time_offset(data, tof_map, cfg)
        data = dataclasses.replace(data, gyro_t=data.gyro_t - time_offset.offset)
    meas, stats = build_measurements(data, tof_map, cfg)
    w = default_weights(cfg)
    nominal = list(data.mounts)
    registration = None
    registered = None
    if cfg.base_registration == "still":
        if tof_map is None or not cfg.use_tof:
            raise ContinuumError("base_registration 'still' needs the ToF frames and a prior map")
        pts, sig, sensor = still_points_by_sensor(data.mounts, data.tof_t, data.tof_mount, data.tof_distance,
                                                  data.tof_status, data.still, cfg.range_convention)  # fmt: skip
        registration = _register(cfg, pts, sig, tof_map, w.T0)
        # what the batch's covariance needs of it (rig.base_sensitivity): the sensors' origins in the straight
        # robot's base frame, where the still points are
        ring_s = np.array([m.s for m in data.mounts], dtype=np.float64)
        origins = sensor_origins(data.mounts) + ring_s[:, None] * np.array([0.0, 0.0, 1.0])
        still_mount = registration_mount_sensitivity(registration, pts, sig, sensor, origins, tof_map,
                                                     sigma_extra=cfg.tof_sigma_extra, gate=cfg.tof_gate)  # fmt: skip
        registered = RegisteredBase(cfg.registration_sigma, float(np.deg2rad(cfg.registration_sigma_deg)),
                                    cfg.registration_rounds, registration.cov, still_mount)  # fmt: skip
        w = dataclasses.replace(w, T0=registration.T)
        c = registration.correction
        _log.info("base registered to the map from %d still-start points: moved %.1f mm, %.2f deg",
                  registration.points, 1000 * np.linalg.norm(c[:3]), np.rad2deg(np.linalg.norm(c[3:])))  # fmt: skip
    nodes = s_nodes(data.length, cfg.node_spacing, [m.s for m in data.mounts])
    t1 = float(t_end) if t_end is not None else float(np.max(data.tof_t)) if data.tof_t.size else 0.0
    if cfg.window:
        win = SlidingWindow(w, nodes, cfg.rate, 0.0, size=cfg.window, iterations=cfg.window_iterations,
                            tof_points_per_frame=cfg.window_tof_points)  # fmt: skip
        st = win.run(meas, t1 + 1.0 / cfg.rate, None if progress is None else lambda k, n: progress(k, "step"))
        out = LocaliseResult(st, w, meas, stats, win.total_iterations, win.converged_steps == win.steps, None, "window")
        out.registration = registration
        out.tof_matched_fraction = matched_fraction(st, meas, tof_map, cfg.tof_gate)
        return out
    est = BatchEstimator(
        w, nodes, cfg.rate, max_iterations=cfg.iterations, decrement_tol=cfg.decrement_tol, solver=TOF_SOLVER
    )
    # the batch warns whenever it stops unconverged; here a stop for want of descent is expected (re-matching),
    # so only a stop at the iteration cap is worth a warning
    blog = logging.getLogger("shape_sensing.estimators.continuum.estimator")
    level = blog.level
    blog.setLevel(logging.ERROR)
    tof_scale = 1.0
    joint = cfg.gyro_bias == "joint" and meas.gyro_t.size > 0 and np.any(meas.gyro_t >= data.still)
    corr_out: dict[float, FloatArray] = {}
    bias_cov = None
    sigma0 = meas.tof_sigma
    done = [0]  # iterations of the solves before the current one

    def tick(i: int) -> None:
        if progress is not None:
            progress(done[0] + i, "iteration")

    try:
        res = est.solve(meas, 0.0, t1, progress=tick)
        iterations = done[0] = res.iterations
        calibrate = (registration is not None or cfg.mount_calibration) and meas.tof_t.size > 0
        if registered is not None and not calibrate:
            registered = dataclasses.replace(registered, rounds=0)  # the still start's base stays
        for _ in range(cfg.registration_rounds if calibrate else 0):
            st = res.state
            if registration is not None:
                keep = ~np.any(meas.mixed_offsets() != 0, axis=1)
                pts, sig = run_points(frame_poses(st, meas.tof_t, meas.tof_s), meas.tof_q, meas.tof_sigma, w.T0, keep)
                again = _register(cfg, pts, sig, tof_map, registration.prior, init=w.T0)
                move = again.T @ lie.inv(w.T0[None])[0]
                registration = again
                w = dataclasses.replace(w, T0=again.T)
                est.weights = dataclasses.replace(est.weights, T0=again.T)
                st = st.copy()
                st.T = move[None, None] @ st.T
            if cfg.mount_calibration:
                mounts, calibrations = _calibrated_mounts(data, st, meas, stats, tof_map, cfg, nominal)
                data = dataclasses.replace(data, mounts=mounts)
                meas, stats = build_measurements(data, tof_map, cfg)
                stats.mount_calibration = calibrations
                sigma0 = meas.tof_sigma
            res = est.solve(meas, 0.0, t1, init=st, progress=tick)
            iterations += res.iterations
            done[0] = iterations
        if cfg.tof_noise == "estimate" and meas.tof_t.size:
            for _ in range(cfg.tof_noise_iterations):
                sc = tof_residual_scale(res.state, meas, est.weights)
                if not sc < 0.95:
                    break
                tof_scale *= max(sc, TOF_SCALE_FLOOR)
                meas.tof_sigma = sigma0 * tof_scale
                est.weights = dataclasses.replace(w, tof_sigma_extra=w.tof_sigma_extra * tof_scale)
                res = est.solve(meas, 0.0, t1, init=res.state, progress=tick)
                iterations += res.iterations
                done[0] = iterations
        if joint:
            sensors = np.unique(meas.gyro_s)
            prior_var = still_mean_prior(data.gyro_t, data.gyro_s, data.still, cfg.gyro_sigma, sensors)
            corr = np.zeros((sensors.size, 3))
            raw_w = meas.gyro_w
            for _ in range(cfg.bias_iterations):
                if res.ab is None:
                    break
                try:
                    step = bias_newton_step(res.state, res.ab, meas, w.R_gyro, data.still, corr, prior_var, sensors)
                except ContinuumError as exc:  # e.g. a gyroscope between nodes: keep the still means
                    _log.warning("gyro biases held at the still-period means: %s", exc)
                    break
                corr = corr + step.delta
                bias_cov = step.cov
                meas.gyro_w = apply_correction(meas.gyro_t, meas.gyro_s, raw_w, data.still, sensors, corr)
                res = est.solve(meas, 0.0, t1, init=res.state.retract(step.dx), progress=tick)
                iterations += res.iterations
                done[0] = iterations
            corr_out = {float(sv): corr[i] for i, sv in enumerate(sensors)}
    finally:
        blog.setLevel(level)
        meas.tof_sigma = sigma0
    stop = "converged" if res.converged else "no descent" if res.iterations < cfg.iterations else "iteration cap"
    if stop == "iteration cap":
        _log.warning("ToF localisation stopped at the %d-iteration cap without converging", cfg.iterations)
    out = LocaliseResult(
        res.state, w, meas, stats, iterations, res.converged, res.ab, stop, corr_out, bias_cov, tof_scale
    )
    out.tof_matched_fraction = matched_fraction(res.state, meas, tof_map, cfg.tof_gate)
    out.registration = registration
    out.mount_tolerance = (float(cfg.mount_tolerance), float(np.deg2rad(cfg.mount_tolerance_deg)))
    out.sensor_origins = sensor_origins(data.mounts)
    out.registered_base = registered
    out.gyro_time_offset = time_offset
    return out


def calibrate_time_offset(data: SensorData, tof_map: Any, cfg: LocaliseConfig) -> TimeOffset:
    """The gyroscopes' clock offset against the ToF sensors' (:mod:`~.gyro_time`): the run estimated without the
    gyroscopes (the configuration otherwise as given), and their readings, less the still-period biases, laid on
    its rings' angular velocity.

    Raises:
        ContinuumError: no ToF frames or map (nothing but the gyroscopes to see the motion by), or the fit's own
            errors (too few readings, no motion).
    """
    if tof_map is None or not cfg.use_tof or not data.tof_t.size:
        raise ContinuumError("the gyroscopes' clock offset is calibrated against the ToF frames: needs them and a map")
    alone = localise(data, tof_map, dataclasses.replace(cfg, use_gyro=False, gyro_time_offset="fixed"))
    bias = stationary_bias(data.gyro_t, data.gyro_s, data.gyro_w, data.still)
    w = data.gyro_w - np.stack([bias[float(sv)] for sv in data.gyro_s])
    fit = fit_time_offset(alone.state, data.gyro_t, data.gyro_s, w, data.still, search=cfg.gyro_time_search)
    _log.info("gyro clock offset %.2f ms (sigma %.2f ms) from %d readings against the ToF-only estimate",
              1e3 * fit.offset, 1e3 * fit.sigma, fit.readings)  # fmt: skip
    return fit


def _register(
    cfg: LocaliseConfig,
    pts: FloatArray,
    sig: FloatArray,
    tof_map: Any,
    prior: FloatArray,
    init: FloatArray | None = None,
) -> BaseRegistration:
    """:func:`~.registration.register_base` with the configuration's prior, point noise and gate."""
    return register_base(
        pts,
        sig,
        tof_map,
        prior,
        sigma_translation=cfg.registration_sigma,
        sigma_rotation=float(np.deg2rad(cfg.registration_sigma_deg)),
        sigma_extra=cfg.tof_sigma_extra,
        gate=cfg.tof_gate,
        init=init,
    )


def _calibrated_mounts(
    data: SensorData,
    state: GridState,
    meas: Measurements,
    stats: BuildStats,
    tof_map: Any,
    cfg: LocaliseConfig,
    nominal: list[TofMount],
) -> tuple[list[TofMount], dict[str, MountCalibration]]:
    """Every sensor's mounting calibrated from its points of the run (not mixed), placed by ``state``, from its
    mounting in ``data`` (the last round's) with the prior around its configured one (``nominal``); a sensor with
    fewer than 100 points keeps its mounting."""
    Tw = frame_poses(state, meas.tof_t, meas.tof_s)
    keep = ~np.any(meas.mixed_offsets() != 0, axis=1)
    out, cal = [], {}
    for k, m in enumerate(data.mounts):
        sel = (stats.tof_sensor == k) & keep
        if sel.sum() < 100:
            out.append(m)
            continue
        Minv = lie.inv(m.T_ring_sensor[None])[0]
        q = meas.tof_q[sel] @ Minv[:3, :3].T + Minv[:3, 3]  # back in the sensor's frame
        c = calibrate_mount(Tw[sel], q, meas.tof_sigma[sel], tof_map, nominal[k].T_ring_sensor,
                            sigma_translation=cfg.mount_sigma, sigma_rotation=float(np.deg2rad(cfg.mount_sigma_deg)),
                            sigma_extra=cfg.tof_sigma_extra, gate=cfg.tof_gate, init=m.T_ring_sensor)  # fmt: skip
        cal[m.name] = c
        out.append(dataclasses.replace(m, T_ring_sensor=c.T))
    return out, cal


#: the smallest factor ``tof_noise="estimate"`` applies to the points' noise in one round
TOF_SCALE_FLOOR = 0.25


def tof_residual_scale(state: GridState, meas: Measurements, w: Weights) -> float:
    """Robust scale ``1.4826 median |r|`` of the whitened point-to-plane residuals of the matched ToF points at
    ``state`` (the factor's own matching and noise model; 1 when the model's noise is right, below 1 when it
    overstates the points' noise). NaN without matched points."""
    am = assign_measurements(state, meas)
    if am.tof_cells is None or am.tof_map is None:
        return float("nan")
    det: list[TofEvaluation] = []
    tof_factor(
        state.T.reshape(-1, 4, 4),
        state.eps.reshape(-1, 6),
        state.varpi.reshape(-1, 6),
        am.tof_cells,
        am.tof_frame,  # type: ignore[arg-type]
        am.tof_q,  # type: ignore[arg-type]
        am.tof_sigma,  # type: ignore[arg-type]
        am.tof_map,
        sigma_extra=w.tof_sigma_extra,
        cauchy=w.cauchy_tof,
        gate=w.tof_gate,
        details=det,
    )
    r = det[0].r
    return float(1.4826 * np.median(np.abs(r))) if r.size else float("nan")


def ring_errors(
    state: GridState, truth_t: FloatArray, truth_s: FloatArray, truth_pose: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """Translation (m) and rotation (rad) errors ``(T, S)`` at the truth's times and arc lengths within the estimate."""
    ok = (truth_t >= state.t[0]) & (truth_t <= state.t[-1])
    tt = truth_t[ok]
    S = truth_s.size
    Te = query_poses(state, np.repeat(tt, S), np.tile(truth_s, tt.size)).reshape(tt.size, S, 4, 4)
    Tt = truth_pose[ok]
    dp = np.linalg.norm(Te[..., :3, 3] - Tt[..., :3, 3], axis=-1)
    dR = np.swapaxes(Tt[..., :3, :3], -1, -2) @ Te[..., :3, :3]
    ang = np.linalg.norm(lie.so3_log(dR.reshape(-1, 3, 3)), axis=-1).reshape(tt.size, S)
    return dp, ang


def summarise_errors(dp: FloatArray, ang: FloatArray) -> dict[str, float]:
    """Table II figures over rings (columns): MAE and RMSE of translation (cm) and rotation (deg), each as the mean
    and standard deviation across rings."""
    mae_t = dp.mean(axis=0) * 100
    rmse_t = np.sqrt((dp**2).mean(axis=0)) * 100
    mae_r = np.rad2deg(ang.mean(axis=0))
    rmse_r = np.rad2deg(np.sqrt((ang**2).mean(axis=0)))
    out = {}
    for name, v in (
        ("trans_mae_cm", mae_t),
        ("trans_rmse_cm", rmse_t),
        ("rot_mae_deg", mae_r),
        ("rot_rmse_deg", rmse_r),
    ):
        out[name] = float(v.mean())
        out[name + "_std"] = float(v.std())
    return out


@dataclass
class Reconstruction:
    """Eq. 10-12 outcome."""

    points: FloatArray  # (P, 3)
    cov: FloatArray  # (P, 3, 3)
    mahalanobis2: FloatArray  # (P,)
    anomaly: NDArray[np.bool_]
    tau: float
    #: share of the points within ``gate`` of a map point (a map in another frame, or the wrong map, shows as ~0)
    matched_fraction: float = float("nan")
    #: ``(P,)`` points that may merge two surfaces (``Measurements.tof_mixed``): flagged only where one of the
    #: two points whose surfaces they may merge is flagged too
    mixed: NDArray[np.bool_] | None = None


def reconstruct(
    state: GridState,
    meas: Measurements,
    tof_map: Any,
    *,
    ab: FloatArray | None = None,
    tau: float | None = None,
    sigma_extra: float = 0.0,
    gate: float = 0.3,
    pose_cov: FloatArray | None = None,
    extra_cov: Callable[[NDArray[np.int64]], FloatArray] | None = None,
) -> Reconstruction:
    """Project every ToF point with its covariance (Eq. 10-11) and flag anomalies (Eq. 12).

    The pose covariance (Laplace, ``ab`` the final system of a batch solve) is that of the nearest arc-length
    node of the nearest slice at or before the point's time; ``pose_cov`` gives it per point instead
    ``(P, 6, 6)`` (e.g. a sliding window's finalised ring nodes); with neither only the point noise is used.
    ``tau`` defaults to the 99.9 % quantile of chi-square with 3 degrees of freedom. ``extra_cov(nodes)``, with
    ``ab``: a covariance added to the nodes' marginals (e.g. :meth:`LocaliseResult.rig_covariances`).
    """
    tau = float(chi2.ppf(0.999, 3)) if tau is None else float(tau)
    if meas.tof_t.size == 0:
        z = np.zeros((0, 3))
        return Reconstruction(z, np.zeros((0, 3, 3)), np.zeros(0), np.zeros(0, bool), tau)
    t = np.clip(meas.tof_t, state.t[0], state.t[-1])
    T = frame_poses(state, t, meas.tof_s)
    cov6 = None if pose_cov is None else np.asarray(pose_cov, dtype=np.float64).reshape(-1, 6, 6)
    if cov6 is not None and cov6.shape[0] != meas.tof_t.size:
        raise ContinuumError(f"pose_cov has {cov6.shape[0]} covariances for {meas.tof_t.size} ToF points")
    if ab is not None and cov6 is None:
        k = np.clip(np.searchsorted(state.t, t, side="right") - 1, 0, state.K - 1)
        n = np.argmin(np.abs(meas.tof_s[:, None] - state.s[None, :]), axis=1)
        flat = k * state.N + n
        uniq, inv = np.unique(flat, return_inverse=True)
        marg = node_covariances(ab, uniq, slice(0, 6))
        if extra_cov is not None:
            marg = marg + extra_cov(uniq)
        cov6 = marg[np.asarray(inv).reshape(-1)]
    sig = np.sqrt(meas.tof_sigma**2 + sigma_extra**2)
    p, cov = project_points(T, meas.tof_q, sig, cov6)
    dist, idx = tof_map.nearest(p)
    d = p - tof_map.points[idx]
    S = cov + (tof_map.point_sigma**2) * np.eye(3)[None]
    m2 = np.einsum("pi,pi->p", d, np.linalg.solve(S, d[:, :, None])[:, :, 0])
    matched = _matched_share(dist, gate)
    # a point that may merge two surfaces is flagged only with one of them: a merged return of two mapped
    # surfaces lies on neither and is no evidence of anything new; at an unmapped object's edge it is. The
    # evidence must be a point that is not itself mixed (else two mixed points side by side vouch for each
    # other), and the nearer of the two: the merged distance is signal-weighted, so it lies nearer to the surface
    # that gave most of the zone's light
    off = meas.mixed_offsets()
    mixed = np.any(off != 0, axis=1)
    raw = m2 > tau
    clean = raw & ~mixed
    pair = np.clip(np.arange(raw.size)[:, None] + off, 0, raw.size - 1)
    gap = np.linalg.norm(p[pair] - p[:, None, :], axis=2)
    gap = np.where(off != 0, gap, np.inf)
    nearer = np.argmin(gap, axis=1)
    near = pair[np.arange(raw.size), nearer]
    partner = np.isfinite(gap.min(axis=1)) & clean[near]
    return Reconstruction(p, cov, m2, raw & (~mixed | partner), tau, matched, mixed)


def frame_poses(state: GridState, t: FloatArray, s: FloatArray) -> FloatArray:
    """The estimate's pose ``(P, 4, 4)`` at each point's time ``t`` and arc length ``s``, interpolated once per
    distinct (time, arc length): the points of one frame share it."""
    first, inv = unique_pairs(np.asarray(t, dtype=np.float64), np.asarray(s, dtype=np.float64))
    return query_poses(state, t[first], s[first])[inv]


#: below this share of ToF points within the gate of the map, the map is taken to be in another frame (or of
#: another place) and a warning says so
MATCHED_WARN = 0.2


def _matched_share(dist: FloatArray, gate: float) -> float:
    """The share of points within ``gate`` of the map (NaN without points), with a warning when it is low."""
    if dist.size == 0:
        return float("nan")
    matched = float(np.mean(dist <= gate))
    if matched < MATCHED_WARN:
        _log.warning(
            "only %.0f %% of %d ToF points lie within %.2f m of the prior map: is the map in the robot's base frame?",
            100 * matched,
            dist.size,
            gate,
        )
    return matched


def matched_fraction(state: GridState, meas: Measurements, tof_map: Any, gate: float) -> float:
    """The share of the ToF points that lie within ``gate`` of the prior map at the estimate ``state`` (NaN
    without ToF points); warns when it is below :data:`MATCHED_WARN`."""
    if meas.tof_t.size == 0 or tof_map is None:
        return float("nan")
    T = frame_poses(state, meas.tof_t, meas.tof_s)
    p = np.einsum("pij,pj->pi", T[:, :3, :3], meas.tof_q) + T[:, :3, 3]
    dist, _ = tof_map.nearest(p)
    return _matched_share(dist, gate)
