"""SO(3)/SE(3) helpers over :class:`scipy.spatial.transform.Rotation`.

A layer of stateless array functions. Conventions used across the package:

* Quaternions are ``[x, y, z, w]`` (scipy's and ROS's order), unit norm.
* Homogeneous transforms are ``(..., 4, 4)`` float arrays, ``T_a_b`` maps
  points given in frame ``b`` into frame ``a``.
* A twist / tangent vector ``xi`` of SE(3) is ``[rho; phi]`` (linear first,
  then angular), with ``T = exp(xi^)``; the translation of ``T`` is
  ``J(phi) @ rho``, not ``rho``.
* SI units and radians everywhere.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.spatial.transform import Rotation

__all__ = [
    "FloatArray",
    "adjoint",
    "compose",
    "hat",
    "identity",
    "inverse",
    "left_jacobian_so3",
    "make_transform",
    "matrix_to_quat",
    "matrix_to_rotvec",
    "quat_to_matrix",
    "rotation_angle",
    "rotvec_to_matrix",
    "se3_exp",
    "se3_log",
    "so3_exp",
    "so3_log",
    "transform_points",
    "translation",
    "vee",
]

FloatArray = NDArray[np.float64]

_SMALL = 1e-9


def _as_float(a: ArrayLike) -> FloatArray:
    return np.asarray(a, dtype=np.float64)


def identity(n: int | None = None) -> FloatArray:
    """Return a 4x4 identity transform, or ``n`` of them stacked."""
    if n is None:
        return np.eye(4)
    return np.tile(np.eye(4), (n, 1, 1))


def make_transform(rotation: ArrayLike | Rotation | None = None, translation: ArrayLike | None = None) -> FloatArray:
    """Build ``(..., 4, 4)`` transforms from rotation matrices (or a Rotation) and translations."""
    if isinstance(rotation, Rotation):
        rot = rotation.as_matrix()
    elif rotation is None:
        rot = np.eye(3)
    else:
        rot = _as_float(rotation)
    t = np.zeros(3) if translation is None else _as_float(translation)
    batch = np.broadcast_shapes(rot.shape[:-2], t.shape[:-1])
    out = np.zeros((*batch, 4, 4))
    out[..., :3, :3] = rot
    out[..., :3, 3] = t
    out[..., 3, 3] = 1.0
    return out


def translation(T: ArrayLike) -> FloatArray:
    """Translation part of ``(..., 4, 4)`` transforms."""
    return _as_float(T)[..., :3, 3].copy()


def compose(*transforms: ArrayLike) -> FloatArray:
    """Left-to-right product of transforms (broadcasting over leading axes)."""
    out = _as_float(transforms[0])
    for T in transforms[1:]:
        out = out @ _as_float(T)
    return out


def inverse(T: ArrayLike) -> FloatArray:
    """Inverse of rigid transforms, exact (transpose of the rotation)."""
    T = _as_float(T)
    R = T[..., :3, :3]
    Rt = np.swapaxes(R, -1, -2)
    out = np.zeros_like(T)
    out[..., :3, :3] = Rt
    out[..., :3, 3] = -np.einsum("...ij,...j->...i", Rt, T[..., :3, 3])
    out[..., 3, 3] = 1.0
    return out


def transform_points(T: ArrayLike, points: ArrayLike) -> FloatArray:
    """Apply ``T`` (4x4) to ``(..., 3)`` points."""
    T = _as_float(T)
    p = _as_float(points)
    return p @ T[:3, :3].T + T[:3, 3]


def quat_to_matrix(q: ArrayLike) -> FloatArray:
    """``[x, y, z, w]`` quaternions (normalised here) to rotation matrices."""
    q = _as_float(q)
    norm = np.linalg.norm(q, axis=-1)
    if np.any(~np.isfinite(norm)) or np.any(norm < 1e-6):
        raise ValueError(f"quaternion with zero or non-finite norm: {q!r}")
    if q.size == 0:  # scipy 1.10-1.11 refuse empty stacks
        return np.zeros((*q.shape[:-1], 3, 3))
    return Rotation.from_quat(q.reshape(-1, 4)).as_matrix().reshape(*q.shape[:-1], 3, 3)


def canonical_quat(q: ArrayLike) -> FloatArray:
    """``[x, y, z, w]`` quaternions with the sign scipy's ``as_quat(canonical=True)`` picks (a copy).

    Of ``q`` and ``-q`` (the same rotation): the one with ``w > 0``; where ``w == 0``, the one whose first non-zero
    of ``x, y, z`` is positive. Done here because ``canonical=`` needs scipy >= 1.11 (Debian 12 has 1.10).
    """
    q = _as_float(q).copy()
    flip = q[..., 3] < 0
    undecided = q[..., 3] == 0
    for k in range(3):
        flip |= undecided & (q[..., k] < 0)
        undecided &= q[..., k] == 0
    q[flip] *= -1.0
    return q


def matrix_to_quat(R: ArrayLike) -> FloatArray:
    """Rotation matrices to ``[x, y, z, w]`` quaternions with ``w >= 0`` (:func:`canonical_quat`).

    Shepperd's method as scipy's ``from_matrix`` does it (the largest of the trace and the diagonal picks
    the formula), written with elementwise operations only: a matrix's quaternion does not depend on the
    stack it is converted in, so messages built one by one and CDR written for a block of estimates
    (:mod:`shape_sensing.messages.cdr`) hold the same bits.
    """
    R = _as_float(R)
    if R.size == 0:
        return np.zeros((*R.shape[:-2], 4))
    if R.shape == (3, 3):
        one = _matrix_to_quat_one(R)
        if one is not None:
            return one
    m = R.reshape(-1, 9)
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = (m[:, i] for i in range(9))
    trace = r00 + r11 + r22
    choice = np.argmax(np.stack([r00, r11, r22, trace], axis=1), axis=1)
    cand = np.empty((4, len(m), 4))
    # largest R00, R11, R22: q_i = 1 - trace + 2 R_ii, q_j = R_ji + R_ij, q_k = R_ki + R_ik, w = R_kj - R_jk
    one_minus = 1.0 - trace
    cand[0] = np.stack([one_minus + 2.0 * r00, r10 + r01, r20 + r02, r21 - r12], axis=1)
    cand[1] = np.stack([r01 + r10, one_minus + 2.0 * r11, r21 + r12, r02 - r20], axis=1)
    cand[2] = np.stack([r02 + r20, r12 + r21, one_minus + 2.0 * r22, r10 - r01], axis=1)
    cand[3] = np.stack([r21 - r12, r02 - r20, r10 - r01, 1.0 + trace], axis=1)
    q = cand[choice, np.arange(len(m))]
    sq = q * q
    q /= np.sqrt(sq[:, 0] + sq[:, 1] + sq[:, 2] + sq[:, 3])[:, None]
    return canonical_quat(q).reshape(*R.shape[:-2], 4)


def _matrix_to_quat_one(R: FloatArray) -> FloatArray | None:
    """:func:`matrix_to_quat` of one finite matrix in Python floats: the same IEEE operations in the same order (the
    candidates, the first largest of the diagonal and the trace, the norm summed left to right, the sign), so the
    same bits, without a stack's two dozen numpy calls (a single pose is what most messages hold). ``None`` for a
    matrix that is not finite (the stack's path decides what that gives)."""
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = R.reshape(9).tolist()
    trace = r00 + r11 + r22
    if not math.isfinite(trace) or not all(map(math.isfinite, (r01, r02, r10, r12, r20, r21))):
        return None
    one_minus = 1.0 - trace
    top = max(r00, r11, r22, trace)
    if r00 == top:
        q = [one_minus + 2.0 * r00, r10 + r01, r20 + r02, r21 - r12]
    elif r11 == top:
        q = [r01 + r10, one_minus + 2.0 * r11, r21 + r12, r02 - r20]
    elif r22 == top:
        q = [r02 + r20, r12 + r21, one_minus + 2.0 * r22, r10 - r01]
    else:
        q = [r21 - r12, r02 - r20, r10 - r01, 1.0 + trace]
    norm = math.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    x, y, z, w = q[0] / norm, q[1] / norm, q[2] / norm, q[3] / norm
    if w < 0 or (w == 0 and (x < 0 or (x == 0 and (y < 0 or (y == 0 and z < 0))))):
        x, y, z, w = -x, -y, -z, -w
    return np.array([x, y, z, w])


def rotvec_to_matrix(v: ArrayLike) -> FloatArray:
    """Rotation vectors (axis * angle) to rotation matrices (an empty stack gives an empty stack)."""
    v = _as_float(v)
    if v.size == 0:  # scipy 1.10-1.11 refuse empty stacks ("Invalid shape in axis 0: 0.")
        return np.zeros((*v.shape[:-1], 3, 3))
    return Rotation.from_rotvec(v.reshape(-1, 3)).as_matrix().reshape(*v.shape[:-1], 3, 3)


def matrix_to_rotvec(R: ArrayLike) -> FloatArray:
    """Rotation matrices to rotation vectors, angle in ``[0, pi]``."""
    R = _as_float(R)
    if R.size == 0:
        return np.zeros((*R.shape[:-2], 3))
    return Rotation.from_matrix(R.reshape(-1, 3, 3)).as_rotvec().reshape(*R.shape[:-2], 3)


def rotation_angle(R: ArrayLike) -> FloatArray:
    """Angle (rad) of rotation matrices, robust near 0 and pi."""
    return np.linalg.norm(matrix_to_rotvec(R), axis=-1)


def hat(v: ArrayLike) -> FloatArray:
    """``(..., 3)`` -> skew ``(..., 3, 3)``; ``(..., 6)`` -> se(3) ``(..., 4, 4)``."""
    v = _as_float(v)
    if v.shape[-1] == 3:
        out = np.zeros((*v.shape[:-1], 3, 3))
        out[..., 0, 1] = -v[..., 2]
        out[..., 0, 2] = v[..., 1]
        out[..., 1, 0] = v[..., 2]
        out[..., 1, 2] = -v[..., 0]
        out[..., 2, 0] = -v[..., 1]
        out[..., 2, 1] = v[..., 0]
        return out
    if v.shape[-1] == 6:
        out = np.zeros((*v.shape[:-1], 4, 4))
        out[..., :3, :3] = hat(v[..., 3:])
        out[..., :3, 3] = v[..., :3]
        return out
    raise ValueError(f"hat expects a 3- or 6-vector, got shape {v.shape}")


def vee(M: ArrayLike) -> FloatArray:
    """Inverse of :func:`hat` for 3x3 skew or 4x4 se(3) matrices."""
    M = _as_float(M)
    if M.shape[-2:] == (3, 3):
        return np.stack([M[..., 2, 1], M[..., 0, 2], M[..., 1, 0]], axis=-1)
    if M.shape[-2:] == (4, 4):
        return np.concatenate([M[..., :3, 3], vee(M[..., :3, :3])], axis=-1)
    raise ValueError(f"vee expects 3x3 or 4x4 matrices, got shape {M.shape}")


def so3_exp(phi: ArrayLike) -> FloatArray:
    """Exponential map of so(3) (alias of :func:`rotvec_to_matrix`)."""
    return rotvec_to_matrix(phi)


def so3_log(R: ArrayLike) -> FloatArray:
    """Logarithm of SO(3) (alias of :func:`matrix_to_rotvec`)."""
    return matrix_to_rotvec(R)


def left_jacobian_so3(phi: ArrayLike) -> FloatArray:
    """Left Jacobian ``J(phi)`` of SO(3), batched over leading axes."""
    phi = _as_float(phi)
    theta = np.linalg.norm(phi, axis=-1)[..., None, None]
    K = hat(phi)
    K2 = K @ K
    small = theta < 1e-6
    th = np.where(small, 1.0, theta)
    a = np.where(small, 0.5 - theta**2 / 24.0, (1.0 - np.cos(th)) / th**2)
    b = np.where(small, 1.0 / 6.0 - theta**2 / 120.0, (th - np.sin(th)) / th**3)
    return np.eye(3) + a * K + b * K2


def se3_exp(xi: ArrayLike) -> FloatArray:
    """Exponential map ``exp(xi^)`` of SE(3) for ``xi = [rho; phi]``."""
    xi = _as_float(xi)
    rho = xi[..., :3]
    phi = xi[..., 3:]
    R = rotvec_to_matrix(phi)
    t = np.einsum("...ij,...j->...i", left_jacobian_so3(phi), rho)
    return make_transform(R, t)


def se3_log(T: ArrayLike) -> FloatArray:
    """Logarithm of SE(3): returns ``xi = [rho; phi]`` with ``exp(xi^) = T``."""
    T = _as_float(T)
    phi = matrix_to_rotvec(T[..., :3, :3])
    J = left_jacobian_so3(phi)
    rho = np.linalg.solve(J, T[..., :3, 3][..., None])[..., 0]
    return np.concatenate([rho, phi], axis=-1)


def adjoint(T: ArrayLike) -> FloatArray:
    """6x6 adjoint of SE(3) for the ``[rho; phi]`` ordering."""
    T = _as_float(T)
    R = T[..., :3, :3]
    out = np.zeros((*T.shape[:-2], 6, 6))
    out[..., :3, :3] = R
    out[..., 3:, 3:] = R
    out[..., :3, 3:] = hat(T[..., :3, 3]) @ R
    return out
