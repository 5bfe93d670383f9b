"""Weights, grid state and measurement containers of the continuum estimator.

State per node ``(k, n)`` (time slice ``k``, arc-length node ``n``): pose
``T`` in SE(3) (the local backbone frame in the base frame, z the tangent),
body strain ``epsilon`` in R^6 (``dT/ds = T epsilon^``) and body velocity
``varpi`` in R^6 (``dT/dt = T varpi^``), both ``[linear; angular]``. A node
has 18 degrees of freedom ordered ``[pose | strain | velocity]``; variables
are ordered time-major, node ``(k, n)`` at ``18 * (k * N + n)``, so every
factor couples nodes at most ``N`` apart and the Gauss-Newton system is
block-banded.

Arc length ``s`` is a material coordinate: for an extensible robot the
linear strain along z (the stretch) carries the length change.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shape_sensing.estimators.continuum import lie
from shape_sensing.estimators.continuum.errors import ContinuumError
from shape_sensing.geometry import FloatArray

__all__ = ["DOF", "GridState", "Measurements", "Weights", "straight_state"]

#: Degrees of freedom per node: pose (6), strain (6), velocity (6).
DOF = 18


def _diag(v: FloatArray | list[float], n: int, name: str) -> FloatArray:
    a = np.asarray(v, dtype=np.float64).reshape(-1)
    if a.shape != (n,):
        raise ContinuumError(f"weight {name} must have {n} entries, got {a.size}")
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ContinuumError(f"weight {name} must hold finite variances > 0, got {a.tolist()}")
    return a


@dataclass(frozen=True)
class Weights:
    """Noise model (diagonal variances, ``[linear; angular]`` order).

    Attributes:
        P0: 18 variances of the base prior ``[pose | strain | velocity]``.
        Q1: power of white noise on acceleration in time (6).
        Q2: power of white noise on the strain rate along s (6).
        Q3: power of the strain random walk in time (6); along s it is also the velocity's own noise
            (the strain rate in the compatibility equation, as in the robot configs' convention).
        R_pose: pose-measurement variances of the error ``log(T_meas^-1 T)`` (6).
        R_gyro: gyroscope variances (3).
        prior_factor: multiplies every prior covariance (P0, Q1-Q3).
        measurement_factor: multiplies R_pose and R_gyro.
        cauchy_pose: Cauchy scale (in whitened units) of the pose factors, ``None`` for least squares.
        cauchy_gyro: same for the gyroscope factors.
        cauchy_prior: same for every prior factor (along s, in time, base; normally ``None``).
        cauchy_space: same for the along-s strain prior only (overrides ``cauchy_prior`` there): the
            strain may then change abruptly along s where a contact or a segment end bends the robot,
            while it stays smooth elsewhere.
        fixed_base: apply the base prior at every time slice (a clamped base), not only the first.
        T0: base pose of the prior (4x4).
        epsilon0: strain of the base prior (6).
        varpi0: velocity of the base prior (6).
        tof_sigma_extra: 1-sigma (m) added in quadrature to every time-of-flight point's own noise (the
            seed's "additional noise to account for unmodelled process errors").
        cauchy_tof: Cauchy scale (whitened units) of the point-to-plane factors; 1 is the seed's Eq. 3.
        tof_gate: points farther than this (m) from their nearest map point are not matched at all.
    """

    P0: FloatArray
    Q1: FloatArray
    Q2: FloatArray
    Q3: FloatArray
    R_pose: FloatArray
    R_gyro: FloatArray
    prior_factor: float = 1.0
    measurement_factor: float = 1.0
    cauchy_pose: float | None = None
    cauchy_gyro: float | None = None
    cauchy_prior: float | None = None
    cauchy_space: float | None = None
    fixed_base: bool = True
    T0: FloatArray = field(default_factory=lambda: np.eye(4))
    epsilon0: FloatArray = field(default_factory=lambda: np.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0]))
    varpi0: FloatArray = field(default_factory=lambda: np.zeros(6))
    tof_sigma_extra: float = 0.0
    cauchy_tof: float | None = 1.0
    tof_gate: float = 0.5

    def __post_init__(self) -> None:
        for name, n in (("P0", 18), ("Q1", 6), ("Q2", 6), ("Q3", 6), ("R_pose", 6), ("R_gyro", 3)):
            object.__setattr__(self, name, _diag(getattr(self, name), n, name))
        for name in ("prior_factor", "measurement_factor"):
            v = getattr(self, name)
            if not np.isfinite(v) or v <= 0:
                raise ContinuumError(f"weight {name} must be > 0, got {v!r}")
        if not (np.isfinite(self.tof_sigma_extra) and self.tof_sigma_extra >= 0):
            raise ContinuumError(f"tof_sigma_extra must be >= 0 m, got {self.tof_sigma_extra!r}")
        if not (np.isfinite(self.tof_gate) and self.tof_gate > 0):
            raise ContinuumError(f"tof_gate must be > 0 m, got {self.tof_gate!r}")
        for name in ("cauchy_pose", "cauchy_gyro", "cauchy_prior", "cauchy_space", "cauchy_tof"):
            v = getattr(self, name)
            if v is not None and (not np.isfinite(v) or v <= 0):
                raise ContinuumError(f"{name} must be > 0 or None, got {v!r}")
        T0 = np.asarray(self.T0, dtype=np.float64)
        if T0.shape != (4, 4):
            raise ContinuumError(f"T0 must be 4x4, got shape {T0.shape}")
        object.__setattr__(self, "T0", T0)
        object.__setattr__(self, "epsilon0", np.asarray(self.epsilon0, dtype=np.float64).reshape(6))
        object.__setattr__(self, "varpi0", np.asarray(self.varpi0, dtype=np.float64).reshape(6))


@dataclass
class GridState:
    """Estimate on a grid of ``K`` time slices by ``N`` arc-length nodes.

    Attributes:
        t: ``(K,)`` slice times (s), increasing.
        s: ``(N,)`` node arc lengths (material coordinate), increasing.
        T: ``(K, N, 4, 4)`` poses.
        eps: ``(K, N, 6)`` strains.
        varpi: ``(K, N, 6)`` velocities.
    """

    t: FloatArray
    s: FloatArray
    T: FloatArray
    eps: FloatArray
    varpi: FloatArray

    @property
    def K(self) -> int:
        """Number of time slices."""
        return int(self.t.shape[0])

    @property
    def N(self) -> int:
        """Number of arc-length nodes."""
        return int(self.s.shape[0])

    def copy(self) -> GridState:
        """A deep copy."""
        return GridState(self.t.copy(), self.s.copy(), self.T.copy(), self.eps.copy(), self.varpi.copy())

    def retract(self, dx: FloatArray) -> GridState:
        """``x (+) dx`` with ``dx`` of size ``18 K N`` (right perturbation on poses)."""
        d = dx.reshape(self.K, self.N, DOF)
        T = self.T @ lie.exp(d[..., :6])
        return GridState(self.t.copy(), self.s.copy(), T, self.eps + d[..., 6:12], self.varpi + d[..., 12:])


def straight_state(t: FloatArray, s: FloatArray, T0: FloatArray, epsilon0: FloatArray) -> GridState:
    """A robot of constant strain ``epsilon0`` from base ``T0``, at rest, at every time."""
    t = np.asarray(t, dtype=np.float64)
    s = np.asarray(s, dtype=np.float64)
    Ts = np.asarray(T0) @ lie.exp(s[:, None] * np.asarray(epsilon0)[None, :])
    K, N = t.size, s.size
    return GridState(
        t,
        s,
        np.broadcast_to(Ts, (K, N, 4, 4)).copy(),
        np.broadcast_to(np.asarray(epsilon0, dtype=np.float64), (K, N, 6)).copy(),
        np.zeros((K, N, 6)),
    )


@dataclass
class Measurements:
    """Measurements in time order, each at an arc length.

    Attributes:
        pose_t: ``(P,)`` times of pose measurements.
        pose_s: ``(P,)`` their arc lengths.
        pose_mat: ``(P, 4, 4)`` measured poses.
        gyro_t: ``(G,)`` times of gyroscope readings.
        gyro_s: ``(G,)`` their arc lengths.
        gyro_w: ``(G, 3)`` body angular velocities (rad/s).
        tof_t: ``(Q,)`` times of time-of-flight points (every point of a frame shares its frame's time).
        tof_s: ``(Q,)`` arc lengths of the ring carrying each point's sensor.
        tof_q: ``(Q, 3)`` the points in the ring's backbone frame (sensor mounting applied).
        tof_sigma: ``(Q,)`` 1-sigma isotropic noise of each point (m), e.g. Table I of the range.
        strain_t: ``(S,)`` times of strain (curvature) readings.
        strain_s: ``(S,)`` their arc lengths.
        strain_k: ``(S, 2)`` measured body curvatures about x and y (1/m), the strain's angular x, y entries.
        strain_w: ``(S, 2, 2)`` their square-root information (``W^T W = Sigma^-1``).
        tof_map: the prior map the points are matched against (a
            :class:`~shape_sensing.io.maps.PriorMap`); ``None`` leaves the points out.
        tof_mixed: ``(Q, 2)`` for each point that may merge two surfaces (a depth edge in its frame, or the chip's
            large-pulse status; see :func:`~.tof.mixed_zones`), the offsets (in this order of points) of the two
            points of the same frame whose surfaces it may merge; ``0`` where it is not mixed, or where that
            neighbour gave no point. Empty: none known.
    """

    pose_t: FloatArray = field(default_factory=lambda: np.zeros(0))
    pose_s: FloatArray = field(default_factory=lambda: np.zeros(0))
    pose_mat: FloatArray = field(default_factory=lambda: np.zeros((0, 4, 4)))
    gyro_t: FloatArray = field(default_factory=lambda: np.zeros(0))
    gyro_s: FloatArray = field(default_factory=lambda: np.zeros(0))
    gyro_w: FloatArray = field(default_factory=lambda: np.zeros((0, 3)))
    tof_t: FloatArray = field(default_factory=lambda: np.zeros(0))
    tof_s: FloatArray = field(default_factory=lambda: np.zeros(0))
    tof_q: FloatArray = field(default_factory=lambda: np.zeros((0, 3)))
    tof_sigma: FloatArray = field(default_factory=lambda: np.zeros(0))
    strain_t: FloatArray = field(default_factory=lambda: np.zeros(0))
    strain_s: FloatArray = field(default_factory=lambda: np.zeros(0))
    strain_k: FloatArray = field(default_factory=lambda: np.zeros((0, 2)))
    strain_w: FloatArray = field(default_factory=lambda: np.zeros((0, 2, 2)))
    tof_map: Any = None
    tof_mixed: NDArray[np.int64] = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))

    def mixed_offsets(self) -> NDArray[np.int64]:
        """``tof_mixed`` as ``(Q, 2)`` offsets (all 0 where it was not filled)."""
        m = np.asarray(self.tof_mixed, dtype=np.int64)
        return m if m.shape == (self.tof_t.size, 2) else np.zeros((self.tof_t.size, 2), dtype=np.int64)

    def between(self, t0: float, t1: float, include_end: bool = False) -> Measurements:
        """The measurements with ``t0 <= t < t1`` (or ``<= t1``)."""
        mp = (self.pose_t >= t0) & ((self.pose_t <= t1) if include_end else (self.pose_t < t1))
        mg = (self.gyro_t >= t0) & ((self.gyro_t <= t1) if include_end else (self.gyro_t < t1))
        mq = (self.tof_t >= t0) & ((self.tof_t <= t1) if include_end else (self.tof_t < t1))
        ms = (self.strain_t >= t0) & ((self.strain_t <= t1) if include_end else (self.strain_t < t1))
        return Measurements(
            self.pose_t[mp],
            self.pose_s[mp],
            self.pose_mat[mp],
            self.gyro_t[mg],
            self.gyro_s[mg],
            self.gyro_w[mg],
            self.tof_t[mq],
            self.tof_s[mq],
            self.tof_q[mq],
            self.tof_sigma[mq],
            self.strain_t[ms],
            self.strain_s[ms],
            self.strain_k[ms],
            self.strain_w[ms],
            self.tof_map,
            self.mixed_offsets()[mq],
        )

    @staticmethod
    def concat(parts: list[Measurements]) -> Measurements:
        """Concatenate several sets."""
        if not parts:
            return Measurements()
        return Measurements(
            np.concatenate([p.pose_t for p in parts]),
            np.concatenate([p.pose_s for p in parts]),
            np.concatenate([p.pose_mat for p in parts]),
            np.concatenate([p.gyro_t for p in parts]),
            np.concatenate([p.gyro_s for p in parts]),
            np.concatenate([p.gyro_w for p in parts]),
            np.concatenate([p.tof_t for p in parts]),
            np.concatenate([p.tof_s for p in parts]),
            np.concatenate([p.tof_q for p in parts]),
            np.concatenate([p.tof_sigma for p in parts]),
            np.concatenate([p.strain_t for p in parts]),
            np.concatenate([p.strain_s for p in parts]),
            np.concatenate([p.strain_k for p in parts]),
            np.concatenate([p.strain_w for p in parts]),
            next((p.tof_map for p in parts if p.tof_map is not None), None),
            np.concatenate([p.mixed_offsets() for p in parts]),
        )
