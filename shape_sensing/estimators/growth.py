"""Kinematics of robots that grow from the tip, and a tip-growth motion model.

Conventions (SI units, radians):

* The tip frame's z axis is the growth direction; its x-y plane is the
  deposition plane. A tip *step* grows ``g`` (arc length) while bending by
  ``phi`` towards the direction ``alpha`` of the tip's x-y plane (measured
  from x towards y). The centre of curvature then lies at ``Rc = g / phi``
  along ``alpha``; material is added on the opposite side (``alpha + pi``).
  This is the closed form printed in Eq. 4 of the seed paper (its last column
  is ``Rc [Ca (1 - Cphi), Sa (1 - Cphi), Sphi]``, the printed ``y`` entry
  "``g Ca (1 - Sphi) / phi``" being an extraction error). The printed factors
  ``Tz(a) Ttr(v) Ty(phi) Ttr(-v) Tz(-a)`` give that matrix for ``v = [Rc, 0, 0]``
  (the centre of rotation); see :func:`tip_step`.
* Heading ``theta`` and pitch ``gamma`` (Eq. 6) give the growth direction
  ``[cos g cos t, cos g sin t, sin g]``.

Functions:

* :func:`min_bending_radius`: Rmin from the design parameters (Eq. 7).
* :func:`tip_step`: the step transform (Eq. 4), vectorised.
* :func:`chain`: the kinematic chain of steps (Eq. 5).
* :func:`integrate_configuration`: Eq. 6 under the curvature bound (Eq. 8).
* :class:`TipGrowthPredictor`: the motion model for estimators: predict the
  next tip pose (and its covariance) from growth and bending.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from shape_sensing.geometry import FloatArray, adjoint, inverse

__all__ = [
    "GrowthError",
    "TipGrowthPredictor",
    "angles_from_direction",
    "chain",
    "direction_from_angles",
    "integrate_configuration",
    "min_bending_radius",
    "tip_frame",
    "tip_step",
]


class GrowthError(ValueError):
    """A growth-kinematics argument is invalid; the message names it, its value and what was expected."""


def _finite(name: str, value: float, *, positive: bool = False, nonneg: bool = False) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise GrowthError(f"{name} = {value!r}: expected a number") from None
    if not math.isfinite(v):
        raise GrowthError(f"{name} = {value!r}: expected a finite number")
    if positive and v <= 0.0:
        raise GrowthError(f"{name} = {value!r}: expected a value > 0")
    if nonneg and v < 0.0:
        raise GrowthError(f"{name} = {value!r}: expected a value >= 0")
    return v


def min_bending_radius(rt: float, L: float, rr: float) -> float:
    """Minimum curvature radius of a growing robot from its design (Eq. 7).

    ``Rmin = (L^2 - rt^2 + rr^2) / (2 (rt - rr))``.

    Args:
        rt: distance from the centre line to where material is added.
        L: length of the non-steerable internal module (the "wheelbase").
        rr: radius of the cylinder enclosing the internal components.

    Raises:
        GrowthError: a value is not finite and positive, ``rt <= rr``, or the
            result is not positive.
    """
    rt_, L_, rr_ = (_finite(n, v, positive=True) for n, v in (("rt", rt), ("L", L), ("rr", rr)))
    if rt_ <= rr_:
        raise GrowthError(f"rt = {rt_} must exceed rr = {rr_} (the components must fit inside the body)")
    r = (L_ * L_ - rt_ * rt_ + rr_ * rr_) / (2.0 * (rt_ - rr_))
    if r <= 0.0:
        raise GrowthError(f"rt = {rt_}, L = {L_}, rr = {rr_} give Rmin = {r:.6g}: expected a positive radius")
    return r


def _sinc(x: FloatArray) -> FloatArray:
    """sin(x)/x, exact at 0."""
    return np.sinc(x / np.pi)


def tip_step(alpha: ArrayLike, g: ArrayLike, phi: ArrayLike) -> FloatArray:
    """Transform of one tip step (Eq. 4), in the frame of the tip before the step.

    ``T = Rz(alpha) Trans(v) Ry(phi) Trans(-v) Rz(-alpha)`` with
    ``v = [g / phi, 0, 0]``: an arc of length ``g`` and angle ``phi`` bending
    towards ``alpha``; ``phi = 0`` is straight growth by ``g`` along z. A
    negative ``phi`` bends towards ``alpha + pi``. Broadcasts over its inputs.

    Returns:
        ``(..., 4, 4)`` transforms.
    """
    a = np.asarray(alpha, dtype=float)
    s = np.asarray(g, dtype=float)
    p = np.asarray(phi, dtype=float)
    a, s, p = np.broadcast_arrays(a, s, p)
    ca, sa = np.cos(a), np.sin(a)
    cp, sp = np.cos(p), np.sin(p)
    out = np.zeros((*a.shape, 4, 4))
    out[..., 0, 0] = ca * ca * cp + sa * sa
    out[..., 0, 1] = ca * sa * (cp - 1.0)
    out[..., 0, 2] = ca * sp
    out[..., 1, 0] = ca * sa * (cp - 1.0)
    out[..., 1, 1] = sa * sa * cp + ca * ca
    out[..., 1, 2] = sa * sp
    out[..., 2, 0] = -ca * sp
    out[..., 2, 1] = -sa * sp
    out[..., 2, 2] = cp
    # g (1 - cos phi) / phi = g (phi / 2) sinc^2(phi / 2); g sin(phi) / phi = g sinc(phi).
    lateral = s * 0.5 * p * _sinc(0.5 * p) ** 2
    out[..., 0, 3] = ca * lateral
    out[..., 1, 3] = sa * lateral
    out[..., 2, 3] = s * _sinc(p)
    out[..., 3, 3] = 1.0
    return out


def chain(steps: ArrayLike, start: ArrayLike | None = None) -> FloatArray:
    """The kinematic chain of Eq. 5: cumulative products of step transforms.

    Args:
        steps: ``(N, 4, 4)`` step transforms (each in the frame of the tip before it).
        start: ``4x4`` start pose (default identity).

    Returns:
        ``(N + 1, 4, 4)`` tip poses, the start first.
    """
    T = np.asarray(steps, dtype=float)
    if T.ndim != 3 or T.shape[1:] != (4, 4):
        raise GrowthError(f"steps have shape {T.shape}: expected (N, 4, 4)")
    out = np.empty((len(T) + 1, 4, 4))
    out[0] = np.eye(4) if start is None else np.asarray(start, dtype=float)
    for i in range(len(T)):
        out[i + 1] = out[i] @ T[i]
    return out


def direction_from_angles(theta: ArrayLike, gamma: ArrayLike) -> FloatArray:
    """Unit growth direction(s) from heading ``theta`` and pitch ``gamma`` (Eq. 6)."""
    t = np.asarray(theta, dtype=float)
    g = np.asarray(gamma, dtype=float)
    cg = np.cos(g)
    return np.stack([cg * np.cos(t), cg * np.sin(t), np.sin(g) * np.ones_like(t)], axis=-1)


def angles_from_direction(v: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Heading ``theta`` in ``(-pi, pi]`` and pitch ``gamma`` in ``[-pi/2, pi/2]`` of direction(s) ``v``."""
    d = np.asarray(v, dtype=float)
    n = np.linalg.norm(d, axis=-1)
    theta = np.arctan2(d[..., 1], d[..., 0])
    gamma = np.arcsin(np.clip(d[..., 2] / n, -1.0, 1.0))
    return theta, gamma


def tip_frame(position: ArrayLike, theta: float, gamma: float) -> FloatArray:
    """A ``4x4`` tip pose at ``position`` whose z axis has heading ``theta`` and pitch ``gamma``.

    The frame is ``Rz(theta) Ry(pi/2 - gamma)``: its x axis points "down" in
    the vertical plane of the heading, its y axis is horizontal.
    """
    ct, st = math.cos(theta), math.sin(theta)
    b = math.pi / 2.0 - gamma
    cb, sb = math.cos(b), math.sin(b)
    out = np.eye(4)
    out[:3, :3] = np.array([[ct, -st, 0.0], [st, ct, 0.0], [0.0, 0.0, 1.0]]) @ np.array(
        [[cb, 0.0, sb], [0.0, 1.0, 0.0], [-sb, 0.0, cb]]
    )
    out[:3, 3] = np.asarray(position, dtype=float)
    return out


def integrate_configuration(
    state: ArrayLike,
    controls: ArrayLike,
    *,
    growth_rate: float,
    dt: float,
    min_radius: float,
    substeps: int = 8,
) -> FloatArray:
    """Integrate the configuration-space kinematics (Eq. 6) with RK4.

    ``x' = g cos(gamma) cos(theta)``, ``y' = g cos(gamma) sin(theta)``,
    ``z' = g sin(gamma)``, ``theta' = u1``, ``gamma' = u2``.

    The controls are bounded by the mechanism's minimum radius (Eq. 8). This
    checks the bound on the path's actual curvature,
    ``sqrt((u1 cos gamma)^2 + u2^2) <= g / Rmin`` (at the start of each step);
    Eq. 8's per-input bound ``|u_i| <= g / Rmin`` would let the curvature reach
    ``sqrt(2) / Rmin`` when both inputs saturate.

    Args:
        state: ``[x, y, z, theta, gamma]``.
        controls: ``(N, 2)`` inputs ``[u1, u2]`` (rad/s), held over each step.
        growth_rate: ``g`` (m/s), > 0.
        dt: step duration (s), > 0.
        min_radius: ``Rmin`` (m), > 0.
        substeps: RK4 sub-steps per control step.

    Returns:
        ``(N + 1, 5)`` states, the initial state first.

    Raises:
        GrowthError: a bad argument, or a control beyond the curvature bound
            (naming the step, the value and the bound).
    """
    g = _finite("growth_rate", growth_rate, positive=True)
    h = _finite("dt", dt, positive=True)
    rmin = _finite("min_radius", min_radius, positive=True)
    x = np.asarray(state, dtype=float).reshape(-1)
    if x.shape != (5,) or not np.all(np.isfinite(x)):
        raise GrowthError(f"state = {np.asarray(state).tolist()!r}: expected 5 finite values [x, y, z, theta, gamma]")
    u = np.asarray(controls, dtype=float)
    if u.ndim != 2 or u.shape[1] != 2 or not np.all(np.isfinite(u)):
        raise GrowthError(f"controls have shape {u.shape}: expected (N, 2) finite values [u1, u2]")
    if substeps < 1:
        raise GrowthError(f"substeps = {substeps}: expected >= 1")
    bound = g / rmin
    out = np.empty((len(u) + 1, 5))
    out[0] = x

    def f(s: FloatArray, u1: float, u2: float) -> FloatArray:
        cg = math.cos(s[4])
        return np.array([g * cg * math.cos(s[3]), g * cg * math.sin(s[3]), g * math.sin(s[4]), u1, u2])

    hs = h / substeps
    for i, (u1, u2) in enumerate(u):
        rate = math.hypot(u1 * math.cos(x[4]), u2)
        if rate > bound * (1.0 + 1e-9):
            raise GrowthError(
                f"controls[{i}] = [{u1:.6g}, {u2:.6g}] rad/s bend at {rate:.6g} rad/s: "
                f"expected at most g / Rmin = {bound:.6g} rad/s (radius >= {rmin:.6g} m)"
            )
        for _ in range(substeps):
            k1 = f(x, u1, u2)
            k2 = f(x + 0.5 * hs * k1, u1, u2)
            k3 = f(x + 0.5 * hs * k2, u1, u2)
            k4 = f(x + hs * k3, u1, u2)
            x = x + hs / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        out[i + 1] = x
    return out


@dataclass(frozen=True)
class TipGrowthPredictor:
    """Motion model of a tip-growing robot, for estimators' predict steps.

    The tip grows by ``growth`` (arc length) while bending with curvature
    ``curvature`` towards ``alpha`` in its x-y plane; the new tip pose is
    ``T @ tip_step(alpha, growth, curvature * growth)`` (Eq. 4). The body
    behind the tip does not move (eversion: new material appears at the tip).

    Uncertainty is a right perturbation ``T_true = T_est exp(xi)`` with
    ``xi = [rho; phi]`` in the tip frame (the ordering of
    :func:`shape_sensing.geometry.adjoint`). Process noise per step:
    axial growth std ``axial_std * growth``, bending std
    ``bend_std * sqrt(growth)`` about the tip x and y axes (and the lateral
    position error it causes), twist std ``twist_std * sqrt(growth)``.

    Args:
        min_radius: the robot's Rmin (m); larger curvatures are rejected.
        axial_std: relative growth-length error (the seed robot: about 0.02).
        bend_std: bending noise (rad per sqrt(m) of growth).
        twist_std: twist noise about the growth axis (rad per sqrt(m)).

    Example:
        >>> import numpy as np
        >>> model = TipGrowthPredictor(min_radius=0.0982)
        >>> T = model.predict(np.eye(4), growth=0.01)  # straight: 1 cm along z
        >>> float(T[2, 3])
        0.01
    """

    min_radius: float
    axial_std: float = 0.02
    bend_std: float = 0.01
    twist_std: float = 0.0

    def __post_init__(self) -> None:
        _finite("min_radius", self.min_radius, positive=True)
        for name in ("axial_std", "bend_std", "twist_std"):
            _finite(name, getattr(self, name), nonneg=True)

    def step(self, growth: float, alpha: float = 0.0, curvature: float = 0.0) -> FloatArray:
        """The ``4x4`` step transform for ``growth`` (m) at ``curvature`` (1/m) towards ``alpha`` (rad)."""
        s = _finite("growth", growth, nonneg=True)
        a = _finite("alpha", alpha)
        k = _finite("curvature", curvature)
        if abs(k) * self.min_radius > 1.0 + 1e-9:
            raise GrowthError(
                f"curvature = {k:.6g} 1/m: expected |curvature| <= 1 / Rmin = {1.0 / self.min_radius:.6g} 1/m"
            )
        return tip_step(a, s, k * s)

    def predict(self, pose: ArrayLike, growth: float, alpha: float = 0.0, curvature: float = 0.0) -> FloatArray:
        """The tip pose after growing ``growth`` from ``pose`` (both ``4x4``)."""
        T = np.asarray(pose, dtype=float)
        if T.shape != (4, 4) or not np.all(np.isfinite(T)):
            raise GrowthError(f"pose has shape {T.shape}: expected a finite 4x4 transform")
        return T @ self.step(growth, alpha, curvature)

    def process_noise(self, growth: float) -> FloatArray:
        """``6x6`` process-noise covariance (tip frame, ``[rho; phi]``) for one step of ``growth`` metres."""
        s = _finite("growth", growth, nonneg=True)
        var_bend = self.bend_std**2 * s
        var_lat = var_bend * (0.5 * s) ** 2
        return np.diag([var_lat, var_lat, (self.axial_std * s) ** 2, var_bend, var_bend, self.twist_std**2 * s])

    def predict_with_covariance(
        self, pose: ArrayLike, covariance: ArrayLike, growth: float, alpha: float = 0.0, curvature: float = 0.0
    ) -> tuple[FloatArray, FloatArray]:
        """Predict the pose and propagate its ``6x6`` covariance through one step.

        ``P' = Ad(S^-1) P Ad(S^-1)^T + Q`` where ``S`` is the step transform.
        """
        P = np.asarray(covariance, dtype=float)
        if P.shape != (6, 6) or not np.all(np.isfinite(P)):
            raise GrowthError(f"covariance has shape {P.shape}: expected a finite 6x6 matrix")
        S = self.step(growth, alpha, curvature)
        T = np.asarray(pose, dtype=float)
        if T.shape != (4, 4) or not np.all(np.isfinite(T)):
            raise GrowthError(f"pose has shape {T.shape}: expected a finite 4x4 transform")
        A = adjoint(inverse(S))
        return T @ S, A @ P @ A.T + self.process_noise(growth)
