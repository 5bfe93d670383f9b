"""Synthetic continuum robots with known poses, strains and velocities (for tests and benchmarks).

The robot has a strain that is constant along s and varies in time:
``epsilon(t) = [0, 0, stretch(t), kx(t), ky(t), 0]`` and ``T(s, t) = T0 exp(s epsilon(t)^)``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from shape_sensing.estimators.continuum import lie
from shape_sensing.estimators.continuum.model import GridState, Measurements
from shape_sensing.geometry import FloatArray

__all__ = ["bending_strain", "constant_strain", "sample_grid", "sample_measurements"]

StrainFn = Callable[[FloatArray], FloatArray]


def constant_strain(eps: FloatArray) -> StrainFn:
    """A strain that never changes."""
    e = np.asarray(eps, dtype=np.float64)
    return lambda t: np.broadcast_to(e, (np.size(t), 6)).copy()


def bending_strain(
    amplitude: float = 2.0, frequency: float = 0.5, stretch: float = 1.0, stretch_rate: float = 0.0
) -> StrainFn:
    """Curvature swinging ``amplitude sin(2 pi f t)`` about x and ``cos`` about y (1/m); optional stretch rate."""

    def fn(t: FloatArray) -> FloatArray:
        t = np.atleast_1d(np.asarray(t, dtype=np.float64))
        out = np.zeros((t.size, 6))
        out[:, 2] = stretch + stretch_rate * t
        out[:, 3] = amplitude * np.sin(2 * np.pi * frequency * t)
        out[:, 4] = 0.5 * amplitude * (1 - np.cos(2 * np.pi * frequency * t))
        return out

    return fn


def _poses(fn: StrainFn, t: FloatArray, s: FloatArray, T0: FloatArray) -> FloatArray:
    eps = fn(t)
    xi = s[None, :, None] * eps[:, None, :]
    return np.asarray(T0 @ lie.exp(xi.reshape(-1, 6)).reshape(t.size, s.size, 4, 4))


def _velocity(fn: StrainFn, t: FloatArray, s: FloatArray, T0: FloatArray, h: float = 1e-6) -> FloatArray:
    Ta = _poses(fn, t - h, s, T0).reshape(-1, 4, 4)
    Tb = _poses(fn, t + h, s, T0).reshape(-1, 4, 4)
    return np.asarray(lie.log(lie.inv(Ta) @ Tb).reshape(t.size, s.size, 6) / (2 * h))


def sample_grid(fn: StrainFn, t: FloatArray, s: FloatArray, T0: FloatArray | None = None) -> GridState:
    """The true state on a grid."""
    T0 = np.eye(4) if T0 is None else np.asarray(T0)
    t = np.asarray(t, dtype=np.float64)
    s = np.asarray(s, dtype=np.float64)
    eps = np.broadcast_to(fn(t)[:, None, :], (t.size, s.size, 6)).copy()
    return GridState(t, s, _poses(fn, t, s, T0), eps, _velocity(fn, t, s, T0))


def sample_measurements(
    fn: StrainFn,
    pose_t: FloatArray,
    pose_s: list[float],
    gyro_t: FloatArray,
    gyro_s: list[float],
    *,
    pose_sigma: tuple[float, float] = (0.0, 0.0),
    gyro_sigma: float = 0.0,
    gyro_bias: FloatArray | None = None,
    rng: np.random.Generator | None = None,
    T0: FloatArray | None = None,
) -> Measurements:
    """Pose measurements at ``pose_s`` and gyro readings at ``gyro_s``, optionally noisy (position m, angle rad)."""
    rng = rng or np.random.default_rng(0)
    T0 = np.eye(4) if T0 is None else np.asarray(T0)
    pt = np.asarray(pose_t, dtype=np.float64)
    gt = np.asarray(gyro_t, dtype=np.float64)
    ps_arr = np.asarray(pose_s, dtype=np.float64)
    gs_arr = np.asarray(gyro_s, dtype=np.float64)
    PT = _poses(fn, pt, ps_arr, T0).reshape(-1, 4, 4)
    if pose_sigma != (0.0, 0.0):
        noise = np.concatenate(
            [
                pose_sigma[0] * rng.standard_normal((PT.shape[0], 3)),
                pose_sigma[1] * rng.standard_normal((PT.shape[0], 3)),
            ],
            axis=1,
        )
        PT = PT @ lie.exp(noise)
    W = _velocity(fn, gt, gs_arr, T0)[..., 3:].reshape(-1, 3)
    W = W + gyro_sigma * rng.standard_normal(W.shape)
    if gyro_bias is not None:
        W = W + np.asarray(gyro_bias)[None, :]
    return Measurements(
        np.repeat(pt, ps_arr.size),
        np.tile(ps_arr, pt.size),
        PT,
        np.repeat(gt, gs_arr.size),
        np.tile(gs_arr, gt.size),
        W,
    )
