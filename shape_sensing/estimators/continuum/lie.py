"""Batched SE(3) helpers for the continuum estimator (vectorised over a leading axis).

These extend :mod:`shape_sensing.geometry` with what a Gauss-Newton solver on
SE(3) needs, all batched over ``(M, ...)`` arrays so that a whole factor type
is evaluated in a handful of numpy calls:

* :func:`exp` / :func:`log` on ``(M, 6)`` twists ``[rho; phi]`` and
  ``(M, 4, 4)`` transforms,
* :func:`jl` / :func:`jl_inv` (left Jacobian of SE(3) and its inverse) and
  :func:`jr` / :func:`jr_inv` (right Jacobian, ``Jr(xi) = Jl(-xi)``),
* :func:`adj` (6x6 adjoint), :func:`inv` and :func:`curly` (``ad``).

Perturbations are on the right: ``T <- T exp(delta^)``.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.transform import Rotation

from shape_sensing.geometry import FloatArray, hat, rotvec_to_matrix

__all__ = ["adj", "curly", "exp", "inv", "jl", "jl_inv", "jr", "jr_inv", "log", "skew", "so3_log"]

_SMALL = 1e-5


def skew(v: FloatArray) -> FloatArray:
    """``(M, 3)`` -> ``(M, 3, 3)`` skew-symmetric matrices (:func:`shape_sensing.geometry.hat`)."""
    return hat(v)


def _coeffs(theta: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Series-safe ``sin(t)/t``, ``(1-cos t)/t^2``, ``(t - sin t)/t^3`` and ``t^2``."""
    t2 = theta * theta
    small = theta < _SMALL
    th = np.where(small, 1.0, theta)
    a = np.where(small, 1.0 - t2 / 6.0, np.sin(th) / th)
    b = np.where(small, 0.5 - t2 / 24.0, (1.0 - np.cos(th)) / th**2)
    c = np.where(small, 1.0 / 6.0 - t2 / 120.0, (th - np.sin(th)) / th**3)
    return a, b, c, t2


def _so3_jl(phi: FloatArray) -> FloatArray:
    theta = np.linalg.norm(phi, axis=-1)
    _, b, c, _ = _coeffs(theta)
    K = skew(phi)
    return np.eye(3) + b[..., None, None] * K + c[..., None, None] * (K @ K)


def _so3_jl_inv(phi: FloatArray) -> FloatArray:
    theta = np.linalg.norm(phi, axis=-1)
    small = theta < _SMALL
    th = np.where(small, 1.0, theta)
    # (1/t^2) (1 - (t/2) cot(t/2)), series 1/12 + t^2/720
    d = np.where(small, 1.0 / 12.0 + theta**2 / 720.0, (1.0 - 0.5 * th / np.tan(0.5 * th)) / th**2)
    K = skew(phi)
    return np.eye(3) - 0.5 * K + d[..., None, None] * (K @ K)


def _q_matrix(rho: FloatArray, phi: FloatArray) -> FloatArray:
    """The off-diagonal block ``Q(rho, phi)`` of the SE(3) left Jacobian."""
    theta = np.linalg.norm(phi, axis=-1)
    small = theta < _SMALL
    th = np.where(small, 1.0, theta)
    s, co = np.sin(th), np.cos(th)
    t2 = theta * theta
    c1 = np.where(small, 1.0 / 6.0 - t2 / 120.0, (th - s) / th**3)
    c2 = np.where(small, 1.0 / 24.0 - t2 / 720.0, (th**2 + 2.0 * co - 2.0) / (2.0 * th**4))
    c3 = np.where(small, 1.0 / 120.0 - t2 / 2520.0, (2.0 * th - 3.0 * s + th * co) / (2.0 * th**5))
    P = skew(phi)
    Rh = skew(rho)
    PR = P @ Rh
    RP = Rh @ P
    PRP = PR @ P
    PP = P @ P
    out = 0.5 * Rh + c1[..., None, None] * (PR + RP + PRP)
    out = out + c2[..., None, None] * (PP @ Rh + RP @ P - 3.0 * PRP)
    out = out + c3[..., None, None] * (PRP @ P + PP @ RP)
    return np.asarray(out)


def exp(xi: FloatArray) -> FloatArray:
    """``(M, 6)`` twists -> ``(M, 4, 4)`` transforms ``exp(xi^)``."""
    xi = np.asarray(xi, dtype=np.float64)
    out = np.zeros((*xi.shape[:-1], 4, 4))
    out[..., :3, :3] = rotvec_to_matrix(xi[..., 3:])  # also for M = 0, which scipy 1.10-1.11 refuse
    out[..., :3, 3] = np.einsum("...ij,...j->...i", _so3_jl(xi[..., 3:]), xi[..., :3])
    out[..., 3, 3] = 1.0
    return out


def log(T: FloatArray) -> FloatArray:
    """``(M, 4, 4)`` transforms -> ``(M, 6)`` twists ``[rho; phi]``."""
    T = np.asarray(T, dtype=np.float64)
    phi = so3_log(T[..., :3, :3])
    rho = np.einsum("...ij,...j->...i", _so3_jl_inv(phi), T[..., :3, 3])
    return np.concatenate([rho, phi], axis=-1)


def so3_log(R: FloatArray) -> FloatArray:
    """``(M, 3, 3)`` rotations -> ``(M, 3)`` rotation vectors (scipy for angles near pi)."""
    R = np.asarray(R, dtype=np.float64)
    tr = R[..., 0, 0] + R[..., 1, 1] + R[..., 2, 2]
    c = np.clip(0.5 * (tr - 1.0), -1.0, 1.0)
    theta = np.arccos(c)
    v = np.stack([R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0], R[..., 1, 0] - R[..., 0, 1]], axis=-1)
    small = theta < 1e-4
    th = np.where(small, 1.0, theta)
    f = np.where(small, 0.5 + theta**2 / 12.0, 0.5 * th / np.sin(np.where(small, 1.0, th)))
    out = f[..., None] * v
    near_pi = theta > np.pi - 1e-3
    if np.any(near_pi):
        out[near_pi] = Rotation.from_matrix(R[near_pi].reshape(-1, 3, 3)).as_rotvec()
    return np.asarray(out)


def inv(T: FloatArray) -> FloatArray:
    """Inverse of ``(M, 4, 4)`` rigid transforms."""
    out = np.zeros_like(T)
    Rt = np.swapaxes(T[..., :3, :3], -1, -2)
    out[..., :3, :3] = Rt
    out[..., :3, 3] = -np.einsum("...ij,...j->...i", Rt, T[..., :3, 3])
    out[..., 3, 3] = 1.0
    return out


def adj(T: FloatArray) -> FloatArray:
    """6x6 adjoint of ``(M, 4, 4)`` transforms for the ``[rho; phi]`` ordering."""
    R = T[..., :3, :3]
    out = np.zeros((*T.shape[:-2], 6, 6))
    out[..., :3, :3] = R
    out[..., 3:, 3:] = R
    out[..., :3, 3:] = skew(T[..., :3, 3]) @ R
    return out


def curly(xi: FloatArray) -> FloatArray:
    """``ad(xi)`` (6x6) so that ``ad(a) b = [a^, b^]^vee``."""
    out = np.zeros((*xi.shape[:-1], 6, 6))
    P = skew(xi[..., 3:])
    out[..., :3, :3] = P
    out[..., 3:, 3:] = P
    out[..., :3, 3:] = skew(xi[..., :3])
    return out


def jl(xi: FloatArray) -> FloatArray:
    """Left Jacobian of SE(3): ``exp((xi + d)^) ~ exp((Jl(xi) d)^) exp(xi^)``."""
    xi = np.asarray(xi, dtype=np.float64)
    J = _so3_jl(xi[..., 3:])
    out = np.zeros((*xi.shape[:-1], 6, 6))
    out[..., :3, :3] = J
    out[..., 3:, 3:] = J
    out[..., :3, 3:] = _q_matrix(xi[..., :3], xi[..., 3:])
    return out


def jl_inv(xi: FloatArray) -> FloatArray:
    """Inverse of :func:`jl`."""
    xi = np.asarray(xi, dtype=np.float64)
    Ji = _so3_jl_inv(xi[..., 3:])
    out = np.zeros((*xi.shape[:-1], 6, 6))
    out[..., :3, :3] = Ji
    out[..., 3:, 3:] = Ji
    out[..., :3, 3:] = -Ji @ _q_matrix(xi[..., :3], xi[..., 3:]) @ Ji
    return out


def jr(xi: FloatArray) -> FloatArray:
    """Right Jacobian of SE(3): ``exp((xi + d)^) ~ exp(xi^) exp((Jr(xi) d)^)``."""
    return jl(-np.asarray(xi, dtype=np.float64))


def jr_inv(xi: FloatArray) -> FloatArray:
    """Inverse of :func:`jr`."""
    return jl_inv(-np.asarray(xi, dtype=np.float64))
