"""Interpolating an estimate at any ``(t, s)``: Gaussian-process mean in time, then along s."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from shape_sensing.estimators.continuum.errors import ContinuumError
from shape_sensing.estimators.continuum.factors import hermite
from shape_sensing.estimators.continuum.model import GridState
from shape_sensing.geometry import FloatArray

__all__ = ["query_poses", "slice_at"]


def _cell(grid: FloatArray, x: FloatArray, what: str) -> tuple[NDArray[np.int64], FloatArray]:
    if np.any(x < grid[0] - 1e-9) or np.any(x > grid[-1] + 1e-9):
        bad = x[(x < grid[0] - 1e-9) | (x > grid[-1] + 1e-9)][0]
        raise ContinuumError(f"{what} {bad} outside the estimate's span [{grid[0]}, {grid[-1]}]")
    if grid.size == 1:
        return np.zeros(x.size, dtype=np.int64), np.zeros(x.size)
    k = np.clip(np.searchsorted(grid, x, side="right") - 1, 0, grid.size - 2)
    u = np.clip((x - grid[k]) / (grid[k + 1] - grid[k]), 0.0, 1.0)
    return k.astype(np.int64), u


def slice_at(state: GridState, t: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Poses ``(M, N, 4, 4)``, strains and velocities ``(M, N, 6)`` of every node at times ``t`` ``(M,)``.

    Poses follow the constant-velocity GP mean between the two surrounding
    slices; strain and velocity are interpolated linearly.
    """
    t = np.atleast_1d(np.asarray(t, dtype=np.float64))
    k, u = _cell(state.t, t, "time")
    N = state.N
    if state.K == 1:
        return state.T[k], state.eps[k], state.varpi[k]
    M = t.size
    kk = np.repeat(k, N)
    nn = np.tile(np.arange(N), M)
    uu = np.repeat(u, N)
    dt = state.t[kk + 1] - state.t[kk]
    Tu = hermite(state.T[kk, nn], state.varpi[kk, nn], state.T[kk + 1, nn], state.varpi[kk + 1, nn], uu, dt)[0]
    eps = (1 - u)[:, None, None] * state.eps[k] + u[:, None, None] * state.eps[k + 1]
    varpi = (1 - u)[:, None, None] * state.varpi[k] + u[:, None, None] * state.varpi[k + 1]
    return Tu.reshape(M, N, 4, 4), eps, varpi


def query_poses(state: GridState, t: FloatArray, s: FloatArray) -> FloatArray:
    """Poses ``(M, 4, 4)`` at times ``t`` and arc lengths ``s`` (both ``(M,)``).

    Raises:
        ContinuumError: a query outside the estimate's time or arc-length span.
    """
    t = np.atleast_1d(np.asarray(t, dtype=np.float64))
    s = np.atleast_1d(np.asarray(s, dtype=np.float64))
    if t.shape != s.shape:
        raise ContinuumError(f"t and s must have the same shape, got {t.shape} and {s.shape}")
    n, us = _cell(state.s, s, "arc length")
    Ts, eps, _ = slice_at(state, t)
    m = np.arange(t.size)
    if state.N == 1:
        return np.asarray(Ts[m, 0])
    h = state.s[n + 1] - state.s[n]
    return hermite(Ts[m, n], eps[m, n], Ts[m, n + 1], eps[m, n + 1], us, h)[0]
