"""Where the robot's base sits in the prior map, from the ToF frames of the still start; where each ToF sensor sits
on its ring, from a whole run.

The estimator's model clamps the base at ``Weights.T0``. Where the map was made apart from the robot (a scan of
the duct, a CAD model), ``T0`` is only known to the accuracy the base was placed with, a few centimetres and
degrees; the shape estimate then bends the robot to make up for the error at the base. During the still start
the robot is at rest and straight along its base's z axis (the model's own assumption at ``t = 0``), so every
valid zone of those frames is a point known in the base's frame up to its noise. :func:`register_base` aligns
those points with the map: point-to-plane Gauss-Newton on the base pose, a Cauchy loss against points on
things the map does not have, matches re-made at every step, and a Gaussian prior on how far the base can be
from where it was said to be (without the prior, a featureless duct would leave the base free to slide along
its axis).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shape_sensing.estimators.continuum import lie
from shape_sensing.estimators.continuum.errors import ContinuumError
from shape_sensing.estimators.continuum.tof import TofMount, frames_points
from shape_sensing.geometry import FloatArray

__all__ = [
    "BaseRegistration",
    "MountCalibration",
    "calibrate_mount",
    "register_base",
    "registration_mount_sensitivity",
    "run_points",
    "still_points",
    "still_points_by_sensor",
]


@dataclass
class BaseRegistration:
    """The base pose in the map and how well the data fixed it."""

    T: FloatArray  # (4, 4) the base in the map's frame
    cov: FloatArray  # (6, 6) of the left perturbation [translation, rotation] of T
    prior: FloatArray  # (4, 4) where the base was said to be
    points: int  # points used (the still start's, or the whole run's after a round over it)
    inliers: int  # of those, matched within the gate at the end
    iterations: int
    rms: float  # m, point-to-plane residual of the inliers

    @property
    def correction(self) -> FloatArray:
        """``log(T prior^-1)``: how far (m, rad) the data moved the base from the prior."""
        return np.asarray(lie.log((self.T @ lie.inv(self.prior[None])[0])[None])[0])


def still_points(
    mounts: list[TofMount],
    tof_t: FloatArray,
    tof_mount: NDArray[np.int64],
    tof_distance: FloatArray,
    tof_status: NDArray[np.uint8],
    still: float,
    range_convention: str = "perpendicular",
) -> tuple[FloatArray, FloatArray]:
    """The valid zones of the frames before ``still`` as points in the base's frame of a straight robot (a ring
    at arc length ``s`` sits at ``[0, 0, s]`` with the base's orientation), and their Table I sigmas; zones that
    may merge two surfaces (:func:`~.tof.mixed_zones`) are left out."""
    pts, sig, _ = still_points_by_sensor(mounts, tof_t, tof_mount, tof_distance, tof_status, still, range_convention)
    return pts, sig


def still_points_by_sensor(
    mounts: list[TofMount],
    tof_t: FloatArray,
    tof_mount: NDArray[np.int64],
    tof_distance: FloatArray,
    tof_status: NDArray[np.uint8],
    still: float,
    range_convention: str = "perpendicular",
) -> tuple[FloatArray, FloatArray, NDArray[np.int64]]:
    """:func:`still_points` and the index (into ``mounts``) of each point's sensor."""
    early = np.flatnonzero(np.asarray(tof_t) < still)
    fp = frames_points(mounts, np.asarray(tof_mount)[early], np.asarray(tof_distance)[early],
                       np.asarray(tof_status)[early], range_convention=range_convention)  # fmt: skip
    if not fp.sigma.size:
        return np.zeros((0, 3)), np.zeros(0), np.zeros(0, dtype=np.int64)
    sensor = np.asarray(tof_mount, dtype=np.int64)[early][fp.frame]
    ring_s = np.array([m.s for m in mounts], dtype=np.float64)[sensor]
    pts = fp.q + ring_s[:, None] * np.array([0.0, 0.0, 1.0])
    return pts[fp.clean], fp.sigma[fp.clean], sensor[fp.clean]


def register_base(
    points: FloatArray,
    sigma: FloatArray,
    tof_map: Any,
    prior: FloatArray,
    *,
    sigma_translation: float = 0.05,
    sigma_rotation: float = float(np.deg2rad(5.0)),
    sigma_extra: float = 0.005,
    gate: float = 0.3,
    cauchy: float = 1.0,
    iterations: int = 40,
    tol: float = 1e-7,
    init: FloatArray | None = None,
) -> BaseRegistration:
    """The base pose in the map that best explains ``points`` (``(P, 3)`` in the base's frame, 1-sigma ``sigma``)
    against ``tof_map`` (points, normals, nearest-neighbour queries), with a Gaussian prior at ``prior`` of
    ``sigma_translation`` (m) and ``sigma_rotation`` (rad) per axis.

    Each step matches every point to its nearest map point (within ``gate``), whitens the point-to-plane error
    by the point's noise with ``sigma_extra`` and the map's point sigma added in quadrature, weighs it with a
    Cauchy loss of scale ``cauchy`` (whitened), and solves for a left perturbation of the pose. The covariance is
    the inverse of the final weighted normal matrix (prior included). ``init``: where to start (default the
    prior)."""
    P = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    sig = np.asarray(sigma, dtype=np.float64).reshape(-1)
    T0 = np.asarray(prior, dtype=np.float64).reshape(4, 4)
    if not (sigma_translation > 0 and sigma_rotation > 0):
        raise ContinuumError(
            f"registration prior sigmas must be > 0, got {sigma_translation} m and {sigma_rotation} rad"
        )
    if P.shape[0] < 6:
        raise ContinuumError(
            f"the still start has {P.shape[0]} valid ToF points; the base cannot be registered to the map"
        )
    prior_info = np.diag([sigma_translation**-2] * 3 + [sigma_rotation**-2] * 3)
    map_sigma = float(getattr(tof_map, "point_sigma", 0.0))
    s_eff = np.sqrt(sig**2 + sigma_extra**2 + map_sigma**2)
    T = T0.copy() if init is None else np.asarray(init, dtype=np.float64).reshape(4, 4).copy()
    H = prior_info.copy()
    done = 0
    r = np.zeros(0)
    inl = np.zeros(P.shape[0], dtype=bool)
    for _ in range(iterations):
        done += 1
        x = P @ T[:3, :3].T + T[:3, 3]
        dist, idx = tof_map.nearest(x)
        inl = dist < gate
        n = tof_map.normals[idx[inl]]
        xi = x[inl]
        r = np.einsum("pi,pi->p", n, xi - tof_map.points[idx[inl]]) / s_eff[inl]
        J = np.concatenate([n, np.cross(xi, n)], axis=1) / s_eff[inl, None]
        w = 1.0 / (1.0 + (r / cauchy) ** 2)
        e = np.asarray(lie.log((T @ lie.inv(T0[None])[0])[None])[0])  # the pose's offset from the prior
        H = J.T @ (w[:, None] * J) + prior_info
        g = J.T @ (w * r) + prior_info @ e
        step = -np.linalg.solve(H, g)
        T = lie.exp(step[None])[0] @ T
        if float(step @ step) < tol**2:
            break
    rms = float(np.sqrt(np.mean((r * s_eff[inl]) ** 2))) if r.size else float("nan")
    return BaseRegistration(T, np.linalg.inv(H), T0, int(P.shape[0]), int(inl.sum()), done, rms)


def registration_mount_sensitivity(
    reg: BaseRegistration,
    points: FloatArray,
    sigma: FloatArray,
    sensor: NDArray[np.int64],
    origins: FloatArray,
    tof_map: Any,
    *,
    sigma_extra: float = 0.005,
    gate: float = 0.3,
    cauchy: float = 1.0,
) -> FloatArray:
    """``(6, 6 S)``: how the base :func:`register_base` returned (``reg``, from ``points`` with sigmas ``sigma`` and
    the same ``sigma_extra``, ``gate`` and ``cauchy``) moves, to first order, with a right perturbation ``(a, b)`` of
    each sensor's mounting written in its ring's frame (as :func:`~.rig.mount_sensitivity`): ``-H^-1 J^T W J_m``,
    ``H`` the registration's final normal matrix (``reg.cov`` inverted) and ``J_m`` the point-to-plane errors'
    Jacobian in the mounting, a point moving by ``a + b x (p - o_j)`` with ``sensor`` ``(P,)`` each point's sensor
    and ``origins`` ``(S, 3)`` the sensors' origins in the points' frame."""
    P = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    sensor = np.asarray(sensor, dtype=np.int64).reshape(-1)
    origins = np.asarray(origins, dtype=np.float64).reshape(-1, 3)
    if sensor.size != P.shape[0]:
        raise ContinuumError(f"{sensor.size} sensor indices for {P.shape[0]} points")
    out = np.zeros((6, 6 * origins.shape[0]))
    if P.shape[0] == 0:
        return out
    map_sigma = float(getattr(tof_map, "point_sigma", 0.0))
    s_eff = np.sqrt(np.asarray(sigma, dtype=np.float64).reshape(-1) ** 2 + sigma_extra**2 + map_sigma**2)
    R, t = reg.T[:3, :3], reg.T[:3, 3]
    x = P @ R.T + t
    dist, idx = tof_map.nearest(x)
    inl = np.flatnonzero(dist < gate)
    n = tof_map.normals[idx[inl]]
    r = np.einsum("pi,pi->p", n, x[inl] - tof_map.points[idx[inl]]) / s_eff[inl]
    w = 1.0 / (1.0 + (r / cauchy) ** 2)
    J = np.concatenate([n, np.cross(x[inl], n)], axis=1) / s_eff[inl, None]
    # the point in the base's frame moves by [I, -[p - o_j]x] (a, b); in the map by R times that
    lever = P[inl] - origins[sensor[inl]]
    nb = n @ R  # the normal in the base's frame
    Jm = np.concatenate([nb, np.cross(lever, nb)], axis=1) / s_eff[inl, None]
    blocks = (w[:, None] * J)[:, :, None] * Jm[:, None, :]  # (P, 6, 6)
    cross = np.zeros((origins.shape[0], 6, 6))
    np.add.at(cross, sensor[inl], blocks)
    Bm = np.swapaxes(cross, 0, 1).reshape(6, -1)
    return np.asarray(-np.linalg.solve(np.linalg.inv(reg.cov), Bm))


def run_points(
    T_world: FloatArray, q: FloatArray, sigma: FloatArray, T_base: FloatArray, keep: NDArray[np.bool_] | None = None
) -> tuple[FloatArray, FloatArray]:
    """Every point of a run in the base's frame as an estimate puts it: ``T_world`` ``(P, 4, 4)`` each point's ring
    pose in the map at its time, ``q`` ``(P, 3)`` the point in its ring's frame, ``T_base`` the base in the map the
    estimate was made with; ``keep`` selects points (e.g. not mixed)."""
    x = np.einsum("pij,pj->pi", T_world[:, :3, :3], q) + T_world[:, :3, 3]
    Tinv = lie.inv(np.asarray(T_base, dtype=np.float64)[None])[0]
    xb = x @ Tinv[:3, :3].T + Tinv[:3, 3]
    if keep is None:
        return xb, np.asarray(sigma, dtype=np.float64)
    return xb[keep], np.asarray(sigma, dtype=np.float64)[keep]


@dataclass
class MountCalibration:
    """A sensor's mounting on its ring as a run's data put it."""

    T: FloatArray  # (4, 4) the sensor in its ring's frame
    cov: FloatArray  # (6, 6) of the right perturbation [translation, rotation] of T
    nominal: FloatArray  # (4, 4) the mounting it was said to have
    points: int
    inliers: int

    @property
    def correction(self) -> FloatArray:
        """``log(nominal^-1 T)``: how far (m, rad) the data moved the sensor, in its own frame."""
        return np.asarray(lie.log((lie.inv(self.nominal[None])[0] @ self.T)[None])[0])


def calibrate_mount(
    T_ring: FloatArray,
    q: FloatArray,
    sigma: FloatArray,
    tof_map: Any,
    nominal: FloatArray,
    *,
    sigma_translation: float = 0.003,
    sigma_rotation: float = float(np.deg2rad(3.0)),
    sigma_extra: float = 0.005,
    gate: float = 0.3,
    cauchy: float = 1.0,
    iterations: int = 20,
    tol: float = 1e-7,
    init: FloatArray | None = None,
) -> MountCalibration:
    """The mounting ``T`` of one sensor that best explains its points against ``tof_map``: ``q`` ``(P, 3)`` in the
    sensor's frame, seen from ring poses ``T_ring`` ``(P, 4, 4)`` (an estimate of the run), a point in the map being
    ``T_ring T q``; Gaussian prior at ``nominal`` of ``sigma_translation`` (m) and ``sigma_rotation`` (rad) per axis.
    Point-to-plane Gauss-Newton on a right perturbation of ``T``, as :func:`register_base`, from ``init`` (default the
    nominal)."""
    q = np.asarray(q, dtype=np.float64).reshape(-1, 3)
    if q.shape[0] < 6:
        raise ContinuumError(f"{q.shape[0]} points cannot calibrate a sensor's mounting")
    M0 = np.asarray(nominal, dtype=np.float64).reshape(4, 4)
    prior_info = np.diag([sigma_translation**-2] * 3 + [sigma_rotation**-2] * 3)
    map_sigma = float(getattr(tof_map, "point_sigma", 0.0))
    s_eff = np.sqrt(np.asarray(sigma, dtype=np.float64) ** 2 + sigma_extra**2 + map_sigma**2)
    Rr, tr = T_ring[:, :3, :3], T_ring[:, :3, 3]
    M = M0.copy() if init is None else np.asarray(init, dtype=np.float64).reshape(4, 4).copy()
    H = prior_info.copy()
    inl = np.zeros(q.shape[0], dtype=bool)
    for _ in range(iterations):
        qm = q @ M[:3, :3].T + M[:3, 3]  # in the ring's frame
        x = np.einsum("pij,pj->pi", Rr, qm) + tr
        dist, idx = tof_map.nearest(x)
        inl = dist < gate
        n = tof_map.normals[idx[inl]]
        r = np.einsum("pi,pi->p", n, x[inl] - tof_map.points[idx[inl]]) / s_eff[inl]
        # x = T_ring M exp(d) q: dx/d(rho, phi) = R_ring R_M [I, -q^]
        nb = np.einsum("pji,pj->pi", Rr[inl], n) @ M[:3, :3]  # n in the sensor's frame
        J = np.concatenate([nb, np.cross(q[inl], nb)], axis=1) / s_eff[inl, None]
        w = 1.0 / (1.0 + (r / cauchy) ** 2)
        e = np.asarray(lie.log((lie.inv(M0[None])[0] @ M)[None])[0])
        H = J.T @ (w[:, None] * J) + prior_info
        g = J.T @ (w * r) + prior_info @ e
        step = -np.linalg.solve(H, g)
        M = M @ lie.exp(step[None])[0]
        if float(step @ step) < tol**2:
            break
    return MountCalibration(M, np.linalg.inv(H), M0, int(q.shape[0]), int(inl.sum()))
