"""Rigid-module shape estimator of a hyper-redundant robot from per-platform attitudes (seed 003).

The robot is a chain of ``n`` identical 2-DoF modules. Module ``j`` joins
platform ``j-1`` (lower) to platform ``j`` (upper) through a universal joint
``d1`` above the lower and ``d2`` below the upper platform. A WT901 on every
platform (``n + 1`` sensors) gives its z-y-x attitude ``R_j = Rz(yaw) Ry(pitch)
Rx(roll)`` in a world frame.

Method:

1. Rods calibration: with every platform held parallel to the base, each
   sensor's reading relative to the base sensor's is its mounting
   misalignment, stored as a rotation ``C_j`` and removed from later readings
   as ``R_j C_j^T`` (so the correction stays right at any tilt, unlike a
   subtraction of Euler angles). In ``full`` mode ``C_j = R_0^T R_j`` at
   calibration. In ``roll_pitch`` mode only the tilt part is used (the
   smallest rotation taking sensor ``j``'s gravity direction onto the base
   sensor's), since the calibration headings are the disturbed ones; a
   mounting rotation about the gravity direction on the rods is not
   observable from roll and pitch and stays uncorrected.
2. Relative rotation of module ``j`` in the lower platform's body frame,
   ``R_rel = R_{j-1}^T R_j``. (The seed paper writes ``R_j R_{j-1}^T``, a
   world-frame increment; it equals the body-frame one only while the lower
   platform is level and un-yawed, see :func:`relative_rotations` and the
   tests.)
3. Universal joint: first axis x of the lower platform, second axis y of the
   cross, so ``R_rel = Rx(theta_x) Ry(theta_y) Rz(tau)`` with ``tau = 0`` for
   a perfect joint. ``tau`` (twist) is reported per module as a residual and
   in diagnostics; the model rotation ``Rx(theta_x) Ry(theta_y)`` is used for
   the chain.
4. Module transform ``T = Trans(z, d1) Rx(theta_x) Ry(theta_y) Trans(z, d2)``,
   chained from the base; end effector ``T_0n T_tool``.

Heading. The WT901's yaw comes from its magnetometer, which the robot's own
magnetic parts disturb (seed 003). In ``heading_mode="roll_pitch"`` (the
default) the measured yaw's value is not used: the base platform's heading
defines the frame (yaw 0) and each further platform's yaw is solved from the
joint constraint itself -- a universal joint cannot twist, so
``R_rel[0, 1] = 0``, which fixes the one unknown yaw from the platform's roll
and pitch up to a two-fold ambiguity; the measured (disturbed) yaw only picks
the nearer of the two solutions (see :func:`solve_headings`). It degrades when a lower
platform's x axis or an upper platform's y axis points near vertical (tilts
near 90 deg); the conditioning is reported per module. In
``heading_mode="full"`` the measured yaw is used and the twist residual shows
how far the magnetometer headings disagree with the joint model.

Covariance. The sensors' stated accuracy (0.05 deg roll/pitch, 1 deg yaw,
independent per sensor and per angle) is propagated to every frame's
position and to the end effector's pose through the Jacobian of the whole
estimate with respect to the input angles and each sensor's mounting turn: a
joint's angles depend on its two platforms' readings only, so forward
differences of every other platform at once (two batched chains per angle)
give all their derivatives; the frames' follow from the chain's geometric
Jacobian (each joint axis through its centre), the mounting turns' from the
z-y-x Euler rates. Where a heading falls back to the magnetometer, one chain per
input angle instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from shape_sensing.config import LIVE_PARAMS, ConfigError, Param, Schema
from shape_sensing.geometry import FloatArray, matrix_to_rotvec, quat_to_matrix, rotvec_to_matrix
from shape_sensing.types import DiagnosticLevel, DiagnosticStatus, ImuSample, ShapeEstimate

__all__ = [
    "SCHEMA",
    "RigidModuleConfig",
    "RigidModuleEstimate",
    "RigidModuleEstimator",
    "chain_transforms",
    "euler_zyx_to_matrix",
    "joint_angles",
    "matrix_to_euler_zyx",
    "module_transforms",
    "quat_to_euler_zyx",
    "relative_rotations",
    "solve_headings",
    "ujoint_rotation",
]


def _len_check(n: int) -> Any:
    def check(v: list[float]) -> str | None:
        return None if len(v) == n else f"expected {n} values, got {len(v)}"

    return check


def _bias_check(v: list[float]) -> str | None:
    return None if len(v) % 3 == 0 else "expected 3 values (a rotation vector in rad) per platform"


SCHEMA = Schema(
    node="rigid_module_estimator",
    description="Shape of a hyper-redundant robot of 2-DoF universal-joint modules from one WT901 per platform.",
    params=(
        Param("n_modules", int, 4, "number of modules (platforms = n_modules + 1)", min=1, max=64),
        Param(
            "imu_array_topic", str, "",
            "shape_sensing/ImuArray topic carrying a cycle of the bus (each sensor known by its frame id, "
            "platform_<i> with frame_prefix), read instead of imu/platform_<i>; '' for the per-platform topics",
        ),
        Param("d1", float, 0.040, "universal joint height above the lower platform", min=0.0, max=2.0, unit="m"),
        Param("d2", float, 0.040, "upper platform height above the universal joint", min=0.0, max=2.0, unit="m"),
        Param(
            "heading_mode", str, "roll_pitch",
            "'roll_pitch': ignore measured yaw, solve headings from the joint constraint; 'full': use measured yaw",
            choices=("roll_pitch", "full"),
        ),
        Param(
            "tool_offset", "float[]", [0.0, 0.0, 0.03, 0.0, 0.0, 0.0],
            "end effector in the last platform's frame: x, y, z (m), roll, pitch, yaw (rad, z-y-x)",
            check=_len_check(6),
        ),
        Param(
            "calibration_bias", "float[]", [],
            "per-platform mounting correction from the rods calibration, a rotation vector (rad); empty = none",
            check=_bias_check,
        ),
        Param(
            "heading_min_conditioning", float, 0.1,
            "roll_pitch mode: below this joint-constraint conditioning a platform's heading comes from its yaw",
            min=0.0, max=1.0,
        ),
        Param("roll_pitch_stddev_deg", float, 0.05, "stated roll/pitch accuracy of one sensor", min=0.0, unit="deg"),
        Param("yaw_stddev_deg", float, 1.0, "stated yaw accuracy of one sensor", min=0.0, unit="deg"),
        Param(
            "heading_disturbance_deg", float, 3.5,
            "std of the slow magnetic heading disturbance of each sensor (magnetic parts; full mode and fallbacks)",
            min=0.0, unit="deg",
        ),
        Param(
            "mounting_stddev_deg", float, 0.5,
            "std of each sensor's mounting misalignment about its z axis, which the roll_pitch rods calibration "
            "(aligning gravity) cannot see",
            min=0.0, unit="deg",
        ),
        Param("covariance", bool, True, "propagate the sensor accuracy to frame covariances"),
        Param("stale_timeout", float, 0.5, "a sensor older than this is reported stale", min=0.0, unit="s"),
        Param("twist_warn_deg", float, 3.0, "twist residual above which a module is WARN", min=0.0, unit="deg"),
        Param("base_frame", str, "base_link", "parent frame of the estimate (the base platform)"),
        Param("frame_prefix", str, "", "prefix of every published frame id (several robots in one TF tree)"),
        Param("radius", float, 0.035, "body radius for markers", min=0.0, unit="m"),
        Param("publish_rate", float, 20.0, "estimate rate of the node", min=0.1, max=1000.0, unit="Hz"),
        Param("marker_rate", float, 5.0, "marker rate of the node", min=0.1, max=100.0, unit="Hz"),
        Param(
            "calibrate_on_start", bool, False,
            "average the first calibration_duration seconds as the rods calibration (rig held straight at start)",
        ),
        Param(
            "calibration_duration", float, 1.0, "averaging time of the rods calibration (start or ~/calibrate)",
            min=0.0, max=60.0, unit="s",
        ),
        Param(
            "calibration_max_motion_deg", float, 1.0,
            "rods calibration refused when a platform's gravity direction moves more than this over the window "
            "(largest angle from its mean; roll/pitch noise is 0.05 deg)",
            min=0.0, max=90.0, unit="deg",
        ),
        Param(
            "calibration_max_bias_deg", float, 10.0,
            "rods calibration refused when a platform's correction exceeds this (a bent rig, not a mounting error)",
            min=0.0, max=180.0, unit="deg",
        ),
        *LIVE_PARAMS,
    ),
)  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------------
# Stateless array functions


_EYE4 = np.eye(4)


def euler_zyx_to_matrix(euler: ArrayLike) -> FloatArray:
    """``(..., 3)`` ``[roll, pitch, yaw]`` to ``(..., 3, 3)`` ``Rz(yaw) Ry(pitch) Rx(roll)``."""
    e = np.asarray(euler, dtype=float)
    cr, sr = np.cos(e[..., 0]), np.sin(e[..., 0])
    cp, sp = np.cos(e[..., 1]), np.sin(e[..., 1])
    cy, sy = np.cos(e[..., 2]), np.sin(e[..., 2])
    return _zyx_matrix(cr, sr, cp, sp, cy, sy)


def _zyx_matrix(cr: FloatArray, sr: FloatArray, cp: FloatArray, sp: FloatArray, cy: FloatArray,
                sy: FloatArray) -> FloatArray:  # fmt: skip
    """``Rz(yaw) Ry(pitch) Rx(roll)`` from the angles' cosines and sines (any broadcastable shapes)."""
    R = np.empty((*np.broadcast_shapes(cr.shape, cp.shape, cy.shape), 3, 3))
    R[..., 0, 0] = cy * cp
    R[..., 0, 1] = cy * sp * sr - sy * cr
    R[..., 0, 2] = cy * sp * cr + sy * sr
    R[..., 1, 0] = sy * cp
    R[..., 1, 1] = sy * sp * sr + cy * cr
    R[..., 1, 2] = sy * sp * cr - cy * sr
    R[..., 2, 0] = -sp
    R[..., 2, 1] = cp * sr
    R[..., 2, 2] = cp * cr
    return R


def matrix_to_euler_zyx(R: ArrayLike) -> FloatArray:
    """Inverse of :func:`euler_zyx_to_matrix` (pitch in ``[-pi/2, pi/2]``)."""
    R = np.asarray(R, dtype=float)
    roll = np.arctan2(R[..., 2, 1], R[..., 2, 2])
    pitch = -np.arcsin(np.clip(R[..., 2, 0], -1.0, 1.0))
    yaw = np.arctan2(R[..., 1, 0], R[..., 0, 0])
    return np.stack([roll, pitch, yaw], axis=-1)


def quat_to_euler_zyx(q: ArrayLike) -> FloatArray:
    """``matrix_to_euler_zyx(quat_to_matrix(q))`` for one finite ``[x, y, z, w]`` quaternion, same bits.

    The per-message path of the rigid-module pipeline: the quaternion is
    normalised and the five matrix entries the angles need are formed with
    scipy's operations in the same order (Python floats are IEEE doubles, so
    each operation rounds as numpy's does), then the same numpy functions
    give the angles. ``test_rigid_module_estimator`` compares it with the
    matrix path.
    """
    x, y, z, w = (float(v) for v in np.asarray(q, dtype=float).reshape(4))
    norm = math.sqrt(x * x + y * y + z * z + w * w)
    x, y, z, w = x / norm, y / norm, z / norm, w / norm
    x2, y2, z2, w2 = x * x, y * y, z * z, w * w
    r00 = x2 - y2 - z2 + w2
    r10 = 2 * (x * y + z * w)
    r20 = 2 * (x * z - y * w)
    r21 = 2 * (y * z + x * w)
    r22 = -x2 - y2 + z2 + w2
    f = np.float64
    roll = np.arctan2(f(r21), f(r22))
    pitch = -np.arcsin(np.clip(f(r20), -1.0, 1.0))
    yaw = np.arctan2(f(r10), f(r00))
    return np.array([roll, pitch, yaw])


def quats_to_euler_zyx(q: ArrayLike) -> FloatArray:
    """:func:`quat_to_euler_zyx` of each row of ``(n, 4)`` finite quaternions, the same operations elementwise."""
    q = np.asarray(q, dtype=float).reshape(-1, 4)
    x, y, z, w = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    norm = np.sqrt(x * x + y * y + z * z + w * w)
    x, y, z, w = x / norm, y / norm, z / norm, w / norm
    x2, y2, z2, w2 = x * x, y * y, z * z, w * w
    r00 = x2 - y2 - z2 + w2
    r10 = 2 * (x * y + z * w)
    r20 = 2 * (x * z - y * w)
    r21 = 2 * (y * z + x * w)
    r22 = -x2 - y2 + z2 + w2
    return np.column_stack([np.arctan2(r21, r22), -np.arcsin(np.clip(r20, -1.0, 1.0)), np.arctan2(r10, r00)])


def relative_rotations(R: ArrayLike, frame: str = "body") -> FloatArray:
    """Rotations between consecutive platforms ``(..., m, 3, 3) -> (..., m-1, 3, 3)``.

    Args:
        R: world attitudes of consecutive platforms.
        frame: ``"body"`` for ``R_{j-1}^T R_j`` (the joint's rotation, what a
            universal joint constrains) or ``"world"`` for ``R_j R_{j-1}^T``
            (the seed paper's expression, a world-frame increment).
    """
    R = np.asarray(R, dtype=float)
    lower, upper = R[..., :-1, :, :], R[..., 1:, :, :]
    if frame == "body":
        return np.swapaxes(lower, -1, -2) @ upper
    if frame == "world":
        return upper @ np.swapaxes(lower, -1, -2)
    raise ValueError(f"frame {frame!r}: expected 'body' or 'world'")


def joint_angles(R_rel: ArrayLike) -> FloatArray:
    """``(..., 3, 3)`` -> ``(..., 3)`` ``[theta_x, theta_y, twist]`` with ``R = Rx(theta_x) Ry(theta_y) Rz(twist)``."""
    R = np.asarray(R_rel, dtype=float)
    tx = np.arctan2(-R[..., 1, 2], R[..., 2, 2])
    ty = np.arcsin(np.clip(R[..., 0, 2], -1.0, 1.0))
    tz = np.arctan2(-R[..., 0, 1], R[..., 0, 0])
    return np.stack([tx, ty, tz], axis=-1)


def ujoint_rotation(theta_x: ArrayLike, theta_y: ArrayLike) -> FloatArray:
    """``Rx(theta_x) Ry(theta_y)``, batched."""
    a = np.asarray(theta_x, dtype=float)
    b = np.asarray(theta_y, dtype=float)
    ca, sa, cb, sb = np.cos(a), np.sin(a), np.cos(b), np.sin(b)
    R = np.zeros((*np.broadcast_shapes(a.shape, b.shape), 3, 3))
    R[..., 0, 0] = cb
    R[..., 0, 2] = sb
    R[..., 1, 0] = sa * sb
    R[..., 1, 1] = ca
    R[..., 1, 2] = -sa * cb
    R[..., 2, 0] = -ca * sb
    R[..., 2, 1] = sa
    R[..., 2, 2] = ca * cb
    return R


def module_transforms(theta: ArrayLike, d1: float, d2: float) -> FloatArray:
    """``(..., n, 2)`` joint angles -> ``(..., n, 4, 4)`` ``Trans(z, d1) Rx Ry Trans(z, d2)``."""
    th = np.asarray(theta, dtype=float)
    R = ujoint_rotation(th[..., 0], th[..., 1])
    T = np.zeros((*th.shape[:-1], 4, 4))
    T[..., :3, :3] = R
    T[..., :3, 3] = R[..., :, 2] * d2
    T[..., 2, 3] += d1
    T[..., 3, 3] = 1.0
    return T


def chain_transforms(T_modules: ArrayLike) -> FloatArray:
    """``(..., n, 4, 4)`` module transforms -> ``(..., n, 4, 4)`` platform poses in the base frame."""
    out = np.array(T_modules, dtype=float)
    n = out.shape[-3]
    d = 1
    while d < n:  # an inclusive scan in log2(n) batched products: platform j = T_0 ... T_j
        out[..., d:, :, :] = out[..., :-d, :, :] @ out[..., d:, :, :]
        d *= 2
    return out


def solve_headings(
    euler: ArrayLike, *, yaw_hint: bool = True, min_conditioning: float = 0.0, branches_of_first: bool = False
) -> tuple[FloatArray, FloatArray]:
    """World attitudes from roll and pitch, headings solved from the no-twist joint constraint.

    For each joint the constraint has two heading solutions (roll and pitch
    alone cannot tell them apart: they are two joint configurations that tilt
    the upper platform the same way). With ``yaw_hint`` the solution whose
    heading is nearer the measured one (relative to the base's) is taken, so
    the measured yaw only picks the branch and its error does not enter the
    estimate; without it, or where the measured yaw is not finite, the
    solution nearer a straight joint is taken.

    The constraint is ``f(psi) = rho cos(psi - phi) + C = 0``; its slope at
    the solutions, ``sqrt(rho^2 - C^2)``, is the conditioning: a roll/pitch
    error ``e`` moves the solved heading by about ``e / conditioning``. It
    vanishes where the lower platform's x axis or the upper platform's tilted
    y axis is vertical, and where the two solutions merge (noise may then
    leave no exact solution). Below ``min_conditioning`` the measured heading
    is used instead (when ``yaw_hint`` and finite): the constraint no longer
    tells the heading better than the magnetometer does.

    Args:
        euler: ``(..., m, 3)`` ``[roll, pitch, yaw]``.
        yaw_hint: use the measured yaw to choose between the two solutions.
        min_conditioning: below it, fall back to the measured heading.
        branches_of_first: ``euler`` is ``(B, m, 3)`` and every row takes the
            first row's choices (solution per joint, fallback or not). For a
            batch of small perturbations of one reading (the estimator's
            finite differences): the choice is a comparison that a step of
            1e-7 rad cannot honestly flip, and made once it leaves no
            recurrence over the joints for the batch.

    Returns:
        ``(R, conditioning)``: ``(..., m, 3, 3)`` attitudes with the base's yaw
        set to 0, and ``(..., m-1)`` per-joint conditioning in ``[0, 1]``.
    """
    e = np.asarray(euler, dtype=float)
    hint = e[..., 2] - e[..., :1, 2]
    use_hint = np.isfinite(hint) & yaw_hint
    # Platform j is Rz(psi_j) Ry(p_j) Rx(r_j) with the base's psi_0 = 0: its tilt-only attitude P_j = Ry Rx has
    # columns (cp, 0, -sp), (sp sr, cr, cp sr), (sp cr, -sr, cp cr) and rows (cp, sp sr, sp cr), (0, cr, -sr), ...
    cr, sr = np.cos(e[..., 0]), np.sin(e[..., 0])
    cp, sp = np.cos(e[..., 1]), np.sin(e[..., 1])
    m = e.shape[-2]
    psi = np.zeros(e.shape[:-1])
    cond = np.empty((*e.shape[:-2], max(m - 1, 0)))
    if m >= 2:
        # Joint j (lower platform j-1): the constraint's terms in the lower platform's world x axis u = Rz(psi_{j-1}) a
        # (a = P_{j-1}'s first column) and the upper one's y axis before its yaw, v = P_j's second column: A = u.v
        # in the plane and B = (u x v).z turn with psi_{j-1}, (A, B) = Rot(psi_{j-1}) (g, -h) with g = a0 v0 + a1 v1,
        # h = a0 v1 - a1 v0; C = a2 v2 does not. So rho = |(g, h)|, delta and the conditioning are the joint's own,
        # and the two solutions are psi_{j-1} + atan2(-h, g) +- delta: each heading is the last plus a turn of two.
        lo, up = slice(None, -1), slice(1, None)
        g = cp[..., lo] * sp[..., up] * sr[..., up]
        h = cp[..., lo] * cr[..., up]
        C = -sp[..., lo] * cp[..., up] * sr[..., up]
        rho = np.hypot(g, h)
        delta = np.arccos(np.clip(-C / np.maximum(rho, 1e-12), -1.0, 1.0))
        phi = np.arctan2(-h, g)
        turns = np.stack([phi + delta, phi - delta])  # (2, ..., m-1): psi_j - psi_{j-1} of each solution
        cond[...] = np.sqrt(np.maximum(rho**2 - C**2, 0.0))
        # Without a hint the solution nearer a straight joint: the larger trace(R_{j-1}^T R_j) = trace(Rz(turn) N),
        # N = P_j P_{j-1}^T: cos(turn) (N00 + N11) + sin(turn) (N01 - N10) + N22, from the rows of P.
        n00_n11 = cp[..., up] * cp[..., lo] + sp[..., up] * sr[..., up] * sp[..., lo] * sr[..., lo]
        n00_n11 += sp[..., up] * cr[..., up] * sp[..., lo] * cr[..., lo] + cr[..., up] * cr[..., lo]
        n00_n11 += sr[..., up] * sr[..., lo]
        n01_n10 = sp[..., up] * sr[..., up] * cr[..., lo] - sp[..., up] * cr[..., up] * sr[..., lo]
        n01_n10 -= cr[..., up] * sp[..., lo] * sr[..., lo] - sr[..., up] * sp[..., lo] * cr[..., lo]
        trace = np.cos(turns) * n00_n11 + np.sin(turns) * n01_n10
        second_straighter = trace[1] > trace[0]
        straightest = np.where(second_straighter, turns[1], turns[0])
        hinted = use_hint[..., up]
        if not hinted.any():
            psi[..., up] = np.cumsum(straightest, axis=-1)
        elif branches_of_first:
            if e.ndim != 3:
                raise ValueError(f"branches_of_first needs (B, m, 3) attitudes, got shape {e.shape}")
            second, fallback = _first_row_branches(
                turns[:, 0], second_straighter[0], hinted[0], hint[0, 1:], cond[0] < min_conditioning
            )
            chosen = np.where(second, turns[1], turns[0])  # (B, m-1)
            # psi_j: the last fallback's measured heading (0 at the base) plus the turns since it
            total = np.concatenate([np.zeros((e.shape[0], 1)), np.cumsum(chosen, axis=-1)], axis=-1)
            restart = np.maximum.accumulate(np.where(np.concatenate(([True], fallback)), np.arange(m), 0))
            start = np.where(restart > 0, np.where(hinted, hint[..., up], 0.0)[:, np.maximum(restart - 1, 0)], 0.0)
            psi[...] = start + total - total[:, restart]
        else:
            # With a hint the solution whose heading is nearer the measured one (the larger cosine of the
            # difference): that depends on the heading so far, a recurrence over the joints.
            fallback = (cond < min_conditioning) & hinted
            hints = np.where(hinted, hint[..., up], 0.0)
            last = psi[..., 0]
            for j in range(m - 1):
                cand = last + turns[..., j]
                closeness = np.cos(cand - hints[..., j])
                near = np.where(closeness[1] > closeness[0], cand[1], cand[0])
                step = np.where(hinted[..., j], near, last + straightest[..., j])
                last = psi[..., j + 1] = np.where(fallback[..., j], hints[..., j], step)
    return _zyx_matrix(cr, sr, cp, sp, np.cos(psi), np.sin(psi)), cond  # Rz(psi) Ry(p) Rx(r)


def _first_row_branches(
    turns: FloatArray,
    second_straighter: NDArray[np.bool_],
    hinted: NDArray[np.bool_],
    hints: FloatArray,
    weak: NDArray[np.bool_],
) -> tuple[NDArray[np.bool_], NDArray[np.bool_]]:
    """The hinted recurrence of :func:`solve_headings` for one row: per joint, whether the second solution is taken
    (``turns[1]``) and whether the heading falls back to the measured one."""
    n = turns.shape[-1]
    second = np.zeros(n, dtype=bool)
    fallback = weak & hinted
    last = 0.0
    for j in range(n):
        t0, t1 = float(turns[0, j]), float(turns[1, j])
        if fallback[j]:
            last = float(hints[j])
            continue
        if hinted[j]:
            second[j] = math.cos(last + t1 - hints[j]) > math.cos(last + t0 - hints[j])
        else:
            second[j] = bool(second_straighter[j])
        last += t1 if second[j] else t0
    return second, fallback


def _euler_rates_of_body_turns(euler: FloatArray, axis: NDArray[np.intp]) -> FloatArray:
    """``(b, 3)`` rates of ``[roll, pitch, yaw]`` per unit turn of each attitude ``Rz Ry Rx`` about its own axis
    ``axis[b]`` (``R Rot_k(a)``): the inverse of the body rates ``w = (r' - y' sp, p' cr + y' cp sr,
    -p' sr + y' cp cr)``. Infinite at pitch +-90 deg, where roll and yaw are one."""
    r, p = euler[:, 0], euler[:, 1]
    sr, cr, tp, secp = np.sin(r), np.cos(r), np.tan(p), 1.0 / np.cos(p)
    rates = np.empty((euler.shape[0], 3, 3))  # [b, body axis, Euler angle]
    rates[:, 0] = (1.0, 0.0, 0.0)
    rates[:, 1, 0], rates[:, 1, 1], rates[:, 1, 2] = sr * tp, cr, sr * secp
    rates[:, 2, 0], rates[:, 2, 1], rates[:, 2, 2] = cr * tp, -sr, cr * secp
    return rates[np.arange(axis.size), axis]


def _align(a: FloatArray, b: FloatArray) -> FloatArray:
    """``(k, 3, 3)`` smallest rotations taking unit vectors ``a[k]`` onto ``b``."""
    a = a / np.linalg.norm(a, axis=-1, keepdims=True)
    b = b / np.linalg.norm(b)
    axis = np.cross(a, b)
    s = np.linalg.norm(axis, axis=-1)
    ang = np.arctan2(s, a @ b)
    safe = np.where(s > 1e-15, s, 1.0)[:, None]
    return rotvec_to_matrix(np.where(s[:, None] > 1e-15, axis / safe * ang[:, None], 0.0))


# ---------------------------------------------------------------------------------------------------------------------
# Estimator

_FD_STEP = 1e-7  # finite-difference step of the covariance (rad)


@dataclass(frozen=True)
class RigidModuleConfig:
    """Validated settings of the estimator (see :data:`SCHEMA` for meanings)."""

    n_modules: int = 4
    d1: float = 0.040
    d2: float = 0.040
    heading_mode: str = "roll_pitch"
    tool_offset: tuple[float, ...] = (0.0, 0.0, 0.03, 0.0, 0.0, 0.0)
    calibration_bias: tuple[float, ...] = ()
    heading_min_conditioning: float = 0.1
    roll_pitch_stddev_deg: float = 0.05
    yaw_stddev_deg: float = 1.0
    heading_disturbance_deg: float = 3.5
    mounting_stddev_deg: float = 0.5
    covariance: bool = True
    stale_timeout: float = 0.5
    twist_warn_deg: float = 3.0
    base_frame: str = "base_link"
    radius: float = 0.035

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> RigidModuleConfig:
        """Build from a (partial) parameter mapping, validated by :data:`SCHEMA`."""
        p = SCHEMA.validate(params)
        n = p["n_modules"]
        bias = p["calibration_bias"]
        if bias and len(bias) != 3 * (n + 1):
            raise ConfigError(
                f"parameter 'calibration_bias' has {len(bias)} values: expected 3 per platform, "
                f"{3 * (n + 1)} for n_modules={n}"
            )
        return cls(
            n_modules=n, d1=p["d1"], d2=p["d2"], heading_mode=p["heading_mode"],
            tool_offset=tuple(p["tool_offset"]), calibration_bias=tuple(bias),
            heading_min_conditioning=p["heading_min_conditioning"],
            roll_pitch_stddev_deg=p["roll_pitch_stddev_deg"], yaw_stddev_deg=p["yaw_stddev_deg"],
            heading_disturbance_deg=p["heading_disturbance_deg"],
            mounting_stddev_deg=p["mounting_stddev_deg"],
            covariance=p["covariance"], stale_timeout=p["stale_timeout"], twist_warn_deg=p["twist_warn_deg"],
            base_frame=p["base_frame"], radius=p["radius"],
        )  # fmt: skip


@dataclass
class RigidModuleEstimate:
    """One estimate.

    Attributes:
        shape: frames ``platform_0 .. platform_n, end_effector`` in the base frame.
        theta: ``(n, 2)`` joint angles ``theta_x, theta_y`` (rad).
        twist: ``(n,)`` twist residual about the joint's z (rad); 0 for a perfect joint.
        conditioning: ``(n,)`` heading conditioning (roll_pitch mode, see :func:`solve_headings`; 1 in full mode).
        tip_covariance: ``(6, 6)`` end-effector covariance, ``[x y z rx ry rz]``, or ``None``.
        theta_covariance: ``(2n, 2n)`` covariance of the joint angles, or ``None``.
    """

    shape: ShapeEstimate
    theta: FloatArray
    twist: FloatArray
    conditioning: FloatArray
    tip_covariance: FloatArray | None
    theta_covariance: FloatArray | None = None


@dataclass(frozen=True)
class _Columns:
    """The covariance's inputs for one case (see :meth:`RigidModuleEstimator._columns`)."""

    inputs: list[tuple[int, int]]  # (platform, angle) of each reading's input column
    platform: NDArray[np.intp]
    angle: NDArray[np.intp]  # the angle's index among the coloured batches' angles (roll, pitch[, yaw])
    upper: NDArray[np.bool_]  # the platform is the upper one of a joint (i >= 1)
    lower: NDArray[np.bool_]  # ... and the lower one of the next (i < n)
    body: NDArray[np.intp]  # platform of each mounting turn
    body_axis: NDArray[np.intp]  # its axis
    body_columns: NDArray[np.intp]  # (b, 3) the input column of that platform's roll, pitch, yaw (the last: none)
    sigma: FloatArray  # of every input, then of every mounting turn
    above: NDArray[np.bool_]  # (F, 2n) frame f moves with joint angle j


@dataclass
class RigidModuleEstimator:
    """Stateful wrapper: calibration, missing/stale sensors, diagnostics.

    ``update`` is deterministic given its inputs and the held state (the last
    good reading of every platform), so a replayed bag reproduces a live run.
    """

    config: RigidModuleConfig = field(default_factory=RigidModuleConfig)

    def __post_init__(self) -> None:
        n = self.config.n_modules
        self.n_platforms = n + 1
        self.frame_ids = [f"platform_{i}" for i in range(n + 1)] + ["end_effector"]
        if self.config.calibration_bias:
            self.bias = np.asarray(self.config.calibration_bias, dtype=float).reshape(n + 1, 3)
        else:
            self.bias = np.zeros((n + 1, 3))
        self._correction = rotvec_to_matrix(self.bias)
        t = self.config.tool_offset
        self.tool = np.eye(4)
        self.tool[:3, :3] = euler_zyx_to_matrix(np.array(t[3:6]))
        self.tool[:3, 3] = t[:3]
        self._column_cache: dict[tuple[bool, bool], _Columns] = {}
        self._last = np.full((n + 1, 3), np.nan)
        # unit quaternions stored by push_quats, made Euler angles once, when the readings are next used
        self._last_q = np.full((n + 1, 4), np.nan)
        self._pending = np.zeros(n + 1, dtype=bool)
        self._last_ns = np.full(n + 1, -1, dtype=np.int64)

    # -- inputs -------------------------------------------------------------------------------------------------------

    def index_of(self, frame_id: str) -> int | None:
        """Platform index of a sensor frame id (``...platform_<i>``), or ``None``."""
        tail = frame_id.rsplit("platform_", 1)
        if len(tail) != 2 or not tail[1].isdigit():
            return None
        i = int(tail[1])
        return i if i < self.n_platforms else None

    def push(self, sample: ImuSample) -> bool:
        """Store one sensor sample (by its frame id); return ``False`` if it was not usable."""
        i = self.index_of(sample.frame_id)
        if i is None or sample.orientation is None:
            return False
        q = np.asarray(sample.orientation, dtype=float)
        norm = float(np.linalg.norm(q))
        if not np.isfinite(norm) or norm < 0.5:
            return False
        self._last[i] = matrix_to_euler_zyx(quat_to_matrix(q / norm))
        self._pending[i] = False
        self._last_ns[i] = sample.stamp_ns
        return True

    def push_euler(self, index: int, euler: ArrayLike, stamp_ns: int) -> None:
        """Store one platform's ``[roll, pitch, yaw]`` (rad).

        Raises:
            ValueError: index out of range or non-finite angles.
        """
        if not 0 <= index < self.n_platforms:
            raise ValueError(f"platform index {index} out of range 0..{self.n_platforms - 1}")
        e = np.asarray(euler, dtype=float)
        if e.shape != (3,) or not np.all(np.isfinite(e)):
            raise ValueError(f"platform {index}: attitude {e!r} is not 3 finite angles")
        self._last[index] = e
        self._pending[index] = False
        self._last_ns[index] = stamp_ns

    def push_eulers(self, indices: ArrayLike, eulers: ArrayLike, stamp_ns: int) -> None:
        """:meth:`push_euler` of several platforms read at one ``stamp_ns`` (rows in order: the last of a repeated
        index is kept).

        Raises:
            ValueError: an index out of range or non-finite angles.
        """
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        e = np.asarray(eulers, dtype=float).reshape(-1, 3)
        if idx.size != e.shape[0]:
            raise ValueError(f"{idx.size} platform indices for {e.shape[0]} attitudes")
        if idx.size and (idx.min() < 0 or idx.max() >= self.n_platforms):
            raise ValueError(f"platform indices {idx.tolist()} out of range 0..{self.n_platforms - 1}")
        if not np.all(np.isfinite(e)):
            raise ValueError("attitudes are not all finite angles")
        self._last[idx] = e
        self._pending[idx] = False
        self._last_ns[idx] = stamp_ns

    def push_quats(self, indices: ArrayLike, quats: ArrayLike, stamp_ns: int) -> None:
        """:meth:`push_eulers` of unit ``[x, y, z, w]`` quaternions, made angles (:func:`quats_to_euler_zyx`, the
        same bits as :meth:`push`'s) only when the readings are next used: a sensor read at 100 Hz for estimates at
        20 Hz is converted once per estimate, not once per reading.

        Raises:
            ValueError: an index out of range or non-finite quaternions.
        """
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        q = np.asarray(quats, dtype=float).reshape(-1, 4)
        if idx.size != q.shape[0]:
            raise ValueError(f"{idx.size} platform indices for {q.shape[0]} quaternions")
        if idx.size and (idx.min() < 0 or idx.max() >= self.n_platforms):
            raise ValueError(f"platform indices {idx.tolist()} out of range 0..{self.n_platforms - 1}")
        if not np.all(np.isfinite(q)):
            raise ValueError("quaternions are not all finite")
        self._last_q[idx] = q
        self._pending[idx] = True
        self._last_ns[idx] = stamp_ns

    def _convert_pending(self) -> None:
        if self._pending.any():
            self._last[self._pending] = quats_to_euler_zyx(self._last_q[self._pending])
            self._pending[:] = False

    # -- calibration ------------------------------------------------------------------------------------------------

    def calibrate(self, readings: ArrayLike | None = None) -> FloatArray:
        """Rods calibration (all platforms held parallel to the base); return the corrections (rotation vectors).

        Args:
            readings: ``(n+1, 3)`` attitudes read on the rods (e.g. averaged over the
                hold); ``None`` uses the last reading held for each platform.

        Raises:
            ValueError: a platform has no reading, or ``readings`` has the wrong shape.
        """
        self._convert_pending()
        r = self._last if readings is None else np.asarray(readings, dtype=float)
        if r.shape != (self.n_platforms, 3):
            raise ValueError(f"calibration readings of shape {r.shape}: expected ({self.n_platforms}, 3)")
        missing = [i for i in range(self.n_platforms) if not np.all(np.isfinite(r[i]))]
        if missing:
            raise ValueError(f"cannot calibrate: no reading from platform(s) {missing}")
        R = euler_zyx_to_matrix(r)
        if self.config.heading_mode == "full":
            C = np.swapaxes(R[0], -1, -2)[None] @ R
        else:
            g = R[:, 2, :]  # gravity direction (world z) in each sensor frame: row 2 of R
            C = _align(g, g[0])
        self._correction = C
        self.bias = matrix_to_rotvec(C)
        return self.bias.copy()

    # -- estimation -------------------------------------------------------------------------------------------------

    def _inputs(self) -> tuple[FloatArray, list[DiagnosticStatus], int]:
        """Corrected attitudes with missing platforms bridged, the per-sensor statuses, and the count of bad ones."""
        self._convert_pending()
        have = np.all(np.isfinite(self._last), axis=1)
        e = self._last.copy()
        if have.any() and self.bias.any():
            R = euler_zyx_to_matrix(self._last[have]) @ np.swapaxes(self._correction[have], -1, -2)
            e[have] = matrix_to_euler_zyx(R)
        statuses = []
        bad = 0
        for i in range(self.n_platforms):
            if not have[i]:
                bad += 1
                # Bridge: copy the nearest earlier (else later) platform, i.e. assume its joint straight.
                src = next((k for k in range(i - 1, -1, -1) if have[k]), None)
                if src is None:
                    src = next((k for k in range(i + 1, self.n_platforms) if have[k]), None)
                e[i] = e[src] if src is not None else 0.0
                statuses.append(
                    DiagnosticStatus(
                        f"rigid_module/platform_{i}", DiagnosticLevel.ERROR,
                        "no reading yet; joint assumed straight",
                    )
                )  # fmt: skip
        return e, statuses, bad

    def estimate(self, stamp_ns: int) -> RigidModuleEstimate:
        """The shape from the held readings at ``stamp_ns`` (stale sensors reported, last reading held)."""
        cfg = self.config
        e, statuses, _ = self._inputs()
        # Independent error sources per sensor, each propagated by finite differences through the whole chain:
        # the reading's white noise and the heading disturbance (perturbations of its roll, pitch, yaw), and the
        # residual mounting error after the rods calibration (a turn of the platform frame about its own axes,
        # which moves roll and pitch once the platform tilts). In roll_pitch mode yaw matters only where the
        # heading falls back to it.
        P = self.n_platforms
        h = _FD_STEP
        axes = (0, 1) if cfg.heading_mode == "roll_pitch" else (0, 1, 2)
        # A joint's angles depend on its two platforms' readings only (the heading turn of a joint is its own), so
        # turning every other platform's angle at once leaves each joint one turned platform: two batches of
        # chains per angle give every derivative. Not where a heading falls back to the magnetometer's (it then
        # depends on every turn since the last such joint): there, one chain per reading.
        coloured = [(c, k) for c in (0, 1) for k in axes] if cfg.covariance else []
        batch = np.repeat(e[None], 1 + len(coloured), axis=0)
        parity = np.arange(P) % 2
        for b, (c, k) in enumerate(coloured):
            batch[1 + b, parity == c, k] += h
        poses, theta, twist, cond = self._forward(batch)
        shape_poses = poses[0]
        tip_cov = None
        pos_cov = None
        theta_cov = None
        if cfg.covariance:
            dense = False
            if cfg.heading_mode == "roll_pitch":
                hinted = np.isfinite(e[1:, 2] - e[0, 2])
                dense = bool(np.any((cond[0] < cfg.heading_min_conditioning) & hinted))  # a magnetometer heading
            cols = self._columns(dense, bool(self.bias.any()))
            n = cfg.n_modules
            if dense:
                dth = self._dense_joint_derivatives(e, cols.inputs, theta[0])
            else:
                d = ((theta[1:] - theta[0]) / h).reshape(2, len(axes), n, 2)  # [colour, angle, joint, x/y]
                ii, kk, up, lo = cols.platform, cols.angle, cols.upper, cols.lower
                dth = np.zeros((ii.size, n, 2))
                dth[up, ii[up] - 1] = d[ii[up] % 2, kk[up], ii[up] - 1]  # the reading's platform is joint i-1's upper
                dth[lo, ii[lo]] = d[ii[lo] % 2, kk[lo], ii[lo]]  # and joint i's lower one
                dth = dth.reshape(ii.size, 2 * n)
            if cols.body.size:  # each platform turned about its own axis k: its Euler angles' rates
                # a reading's angle without a column of its own (roll_pitch mode: its yaw) does not enter the shape
                chain = np.zeros((cols.body.size, len(cols.inputs) + 1))  # the last column collects those; cut
                chain[np.arange(cols.body.size)[:, None], cols.body_columns] = _euler_rates_of_body_turns(
                    e[cols.body], cols.body_axis
                )
                dth = np.concatenate([dth, chain[:, :-1] @ dth])
            # geometric Jacobian: joint j turns every frame above it about its axis through the joint's centre
            lower = shape_poses[:n, :3, :3]
            centre = shape_poses[:n, :3, 3] + cfg.d1 * lower[:, :, 2]
            tx = theta[0, :, 0][:, None]
            joint_axes = np.stack([lower[:, :, 0], lower[:, :, 1] * np.cos(tx) + lower[:, :, 2] * np.sin(tx)], 1)
            joint_axes = joint_axes.reshape(2 * n, 3)
            rel = shape_poses[:, None, :3, 3] - np.repeat(centre, 2, axis=0)[None]  # (F, 2n, 3)
            a = joint_axes[None]
            jac = np.stack(
                [a[..., 1] * rel[..., 2] - a[..., 2] * rel[..., 1], a[..., 2] * rel[..., 0] - a[..., 0] * rel[..., 2],
                 a[..., 0] * rel[..., 1] - a[..., 1] * rel[..., 0]], axis=1,
            ) * cols.above[:, None]  # (F, 3, 2n): axis x (frame - centre) where the frame is above the joint
            Jth = dth.T * cols.sigma  # (2n, m): every input scaled by its sigma
            Jp = jac @ Jth  # (F, 3, m)
            pos_cov = Jp @ np.swapaxes(Jp, -1, -2)
            Jt = np.concatenate([Jp[-1], joint_axes.T @ Jth])  # (6, m): the end effector's position and rotation
            tip_cov = Jt @ Jt.T
            theta_cov = Jth @ Jth.T
        # Diagnostics
        ages = (stamp_ns - self._last_ns) / 1e9
        for i in range(self.n_platforms):
            if self._last_ns[i] < 0:
                continue
            stale = ages[i] > cfg.stale_timeout
            statuses.append(
                DiagnosticStatus(
                    f"rigid_module/platform_{i}",
                    DiagnosticLevel.WARN if stale else DiagnosticLevel.OK,
                    f"stale ({ages[i]:.2f} s), last reading held" if stale else "ok",
                    values={"age_s": f"{ages[i]:.3f}"},
                )
            )
        tw = np.degrees(np.abs(twist[0]))
        worst = int(np.argmax(tw)) if tw.size else 0
        level = DiagnosticLevel.WARN if tw.size and tw[worst] > cfg.twist_warn_deg else DiagnosticLevel.OK
        fallback = int(np.sum(cond[0] < cfg.heading_min_conditioning)) if cfg.heading_mode == "roll_pitch" else 0
        if fallback:
            level = DiagnosticLevel.WARN
        statuses.append(
            DiagnosticStatus(
                "rigid_module/joints",
                level,
                (f"max twist residual {tw[worst]:.2f} deg at module {worst + 1}" if tw.size else "no modules")
                + (f"; {fallback} heading(s) from the magnetometer (ill-conditioned joints)" if fallback else ""),
                values={
                    "heading_mode": cfg.heading_mode,
                    "twist_deg": " ".join(f"{v:.3f}" for v in tw),
                    "heading_conditioning_min": f"{float(np.min(cond[0])):.3f}" if cond[0].size else "1",
                    "headings_from_magnetometer": str(fallback),
                },
            )
        )
        backbone = self._backbone(shape_poses)
        shape = ShapeEstimate(
            stamp_ns=int(stamp_ns),
            parent_frame=cfg.base_frame,
            frame_ids=list(self.frame_ids),
            poses=shape_poses,
            position_covariance=pos_cov,
            backbone=backbone,
            radius=cfg.radius,
            length=float(np.sum(np.linalg.norm(np.diff(backbone, axis=0), axis=1))),
            diagnostics=statuses,
        )
        return RigidModuleEstimate(shape, theta[0], twist[0], cond[0], tip_cov, theta_cov)

    def update(self, samples: Sequence[ImuSample], stamp_ns: int) -> RigidModuleEstimate:
        """Push samples (any subset of the platforms) and estimate at ``stamp_ns``."""
        for s in samples:
            self.push(s)
        return self.estimate(stamp_ns)

    def _columns(self, dense: bool, calibrated: bool) -> _Columns:
        """The inputs of the covariance (made once per case): each reading's angles that enter the shape, then each
        platform's mounting turns, with their sigmas.

        The sensor's errors, independent per sensor: the reading's white noise and the heading disturbance (its
        roll, pitch, yaw), and the mounting error left after the rods calibration (a turn of the platform frame
        about its own axes, which moves roll and pitch once the platform tilts). Mounting error left, about the
        platform's x, y, z: without a rods calibration, the mounting misalignment itself; after one, the attitude
        noise of the readings it used about x and y, and about z either the mounting yaw (roll_pitch: the
        calibration aligns gravity only) or, in full mode, the two heading disturbances (the sensor's and the base
        sensor's) frozen into it. In roll_pitch mode yaw enters only where a heading falls back to it (``dense``).
        """
        key = (dense, calibrated)
        found = self._column_cache.get(key)
        if found is not None:
            return found
        cfg, P = self.config, self.n_platforms
        yaw_sig = float(np.hypot(cfg.yaw_stddev_deg, cfg.heading_disturbance_deg))
        sig = np.radians([cfg.roll_pitch_stddev_deg, cfg.roll_pitch_stddev_deg, yaw_sig])
        if not calibrated:
            sig_cal = np.radians([cfg.mounting_stddev_deg] * 3)
        else:
            full = cfg.heading_mode == "full"
            z_cal = np.sqrt(2.0) * cfg.heading_disturbance_deg if full else cfg.mounting_stddev_deg
            sig_cal = np.radians([cfg.roll_pitch_stddev_deg, cfg.roll_pitch_stddev_deg, z_cal])
        axes = (0, 1) if cfg.heading_mode == "roll_pitch" else (0, 1, 2)
        inputs = [(i, k) for i in range(P) for k in axes] + ([(i, 2) for i in range(P)] if dense else [])
        body = [(i, k) for i in range(P) for k in range(3) if sig_cal[k] > 0]
        col_of = np.full((P, 3), len(inputs))  # the collecting column of chain (see estimate)
        col_of[tuple(np.array(inputs).T)] = np.arange(len(inputs))
        ii = np.array([i for i, _ in inputs], dtype=np.intp)
        bi = np.array([i for i, _ in body], dtype=np.intp)
        found = self._column_cache[key] = _Columns(
            inputs=inputs,
            platform=ii,
            angle=np.array([min(k, len(axes) - 1) for _, k in inputs], dtype=np.intp),
            upper=ii >= 1,
            lower=ii < cfg.n_modules,
            body=bi,
            body_axis=np.array([k for _, k in body], dtype=np.intp),
            body_columns=col_of[bi] if body else np.empty((0, 3), dtype=np.intp),
            sigma=np.array([sig[k] for _, k in inputs] + [sig_cal[k] for _, k in body]),
            above=np.arange(P + 1)[:, None] > np.arange(2 * cfg.n_modules)[None] // 2,  # frame f above joint j
        )
        return found

    def _dense_joint_derivatives(self, e: FloatArray, inputs: list[tuple[int, int]], theta: FloatArray) -> FloatArray:
        """``(len(inputs), 2n)`` joint-angle derivatives, one chain per reading's angle (a heading from the
        magnetometer makes a joint depend on every turn below it)."""
        h = _FD_STEP
        batch = np.repeat(e[None], len(inputs), axis=0)
        batch[np.arange(len(inputs)), [i for i, _ in inputs], [k for _, k in inputs]] += h
        _, th, _, _ = self._forward(batch)
        return (th - theta).reshape(len(inputs), -1) / h

    def _forward(self, e: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """Batched ``(B, n+1, 3)`` attitudes -> poses ``(B, n+2, 4, 4)``, theta ``(B, n, 2)``, twist, conditioning."""
        cfg = self.config
        if cfg.heading_mode == "roll_pitch":
            R, cond = solve_headings(e, min_conditioning=cfg.heading_min_conditioning, branches_of_first=True)
        else:
            R = euler_zyx_to_matrix(e)
            cond = np.ones((e.shape[0], cfg.n_modules))
        ang = joint_angles(relative_rotations(R, "body"))
        theta = ang[..., :2]
        T = chain_transforms(module_transforms(theta, cfg.d1, cfg.d2))
        B = e.shape[0]
        poses = np.empty((B, self.n_platforms + 1, 4, 4))
        poses[:, 0] = _EYE4
        poses[:, 1 : self.n_platforms] = T
        poses[:, -1] = T[:, -1] @ self.tool
        return poses, theta, ang[..., 2], cond

    def _backbone(self, poses: FloatArray) -> FloatArray:
        """Base, then per module: joint centre and upper platform; then the end effector."""
        n = self.n_platforms
        pts = np.empty((2 * n, 3))
        pts[0] = poses[0, :3, 3]
        pts[1 : 2 * n - 1 : 2] = poses[: n - 1, :3, 3] + poses[: n - 1, :3, 2] * self.config.d1  # joint centres
        pts[2 : 2 * n - 1 : 2] = poses[1:n, :3, 3]  # upper platforms
        pts[-1] = poses[-1, :3, 3]
        return pts
