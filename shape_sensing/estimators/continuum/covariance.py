"""Laplace covariance of the estimate: blocks of ``H^-1`` from the banded Cholesky factor."""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import cholesky_banded
from scipy.linalg.lapack import dtbtrs

from shape_sensing.estimators.continuum.errors import ContinuumError
from shape_sensing.estimators.continuum.model import DOF
from shape_sensing.estimators.continuum.solver import blas_single_thread
from shape_sensing.geometry import FloatArray

__all__ = [
    "MEASUREMENT_FACTORS",
    "node_covariances",
    "pose_position_covariance",
    "residual_inflation",
    "slice_residuals",
]


def node_covariances(
    ab: FloatArray,
    nodes: list[int] | NDArray[np.int64],
    dims: slice = slice(0, DOF),
    *,
    factor: FloatArray | None = None,
) -> FloatArray:
    """Marginal covariances of some nodes under the Laplace approximation.

    With ``H = L L^T``, the covariance between columns ``E_i`` and ``E_j`` is
    ``(L^-1 E_i)^T (L^-1 E_j)``: one forward substitution, and as ``L`` is lower
    triangular and the ``E`` are zero above their first row ``r0``, only on the
    trailing part ``L[r0:, r0:]``. Nodes late in the ordering (a window's tip
    nodes in arc-length-major order) cost a few rows, not the whole system.

    Args:
        ab: lower-banded Gauss-Newton information (from :func:`~.solver.assemble`).
        nodes: flat node indices.
        dims: which of the 18 node coordinates (default all; ``slice(0, 6)`` for the pose).
        factor: the banded Cholesky factor of ``ab`` if already computed
            (:func:`~.solver.solve_banded_factor`); factorised here otherwise.

    Returns:
        ``(len(nodes), d, d)`` covariances of the right perturbation (pose) and
        of strain/velocity, in the node's own coordinates.
    """
    nvar = ab.shape[1]
    idx = np.asarray(nodes, dtype=np.int64)
    if idx.size and (idx.min() < 0 or (idx.max() + 1) * DOF > nvar):
        raise ContinuumError(f"node indices {idx.tolist()} outside the {nvar // DOF} nodes of the system")
    if factor is not None and factor.shape[1] != nvar:
        raise ContinuumError(f"Cholesky factor has {factor.shape[1]} columns, the system {nvar}")
    d = np.arange(DOF)[dims]
    k = d.size
    out = np.empty((idx.size, k, k))
    if idx.size == 0:
        return out
    cols = (idx[:, None] * DOF + d[None, :]).reshape(-1)
    r0 = int(cols.min())
    E = np.zeros((nvar - r0, cols.size))
    E[cols - r0, np.arange(cols.size)] = 1.0
    with blas_single_thread():
        cb = factor if factor is not None else cholesky_banded(ab, lower=True, check_finite=False)
        Y, info = dtbtrs(cb[:, r0:], E, uplo="L")
    if info != 0:
        raise ContinuumError("information matrix is singular: no Laplace covariance")
    for i in range(idx.size):
        Yi = Y[:, i * k : (i + 1) * k]
        out[i] = Yi.T @ Yi
    return out


def pose_position_covariance(T: FloatArray, cov6: FloatArray) -> FloatArray:
    """Position covariance (base frame, 3x3) of ``T exp(d^)`` with ``d ~ N(0, cov6)`` (first order).

    The position moves by ``R (d_rho - ...)``; to first order ``dp = R d_rho``
    for the ``[rho; phi]`` right perturbation at the node.
    """
    R = T[..., :3, :3]
    return np.asarray(R @ cov6[..., :3, :3] @ np.swapaxes(R, -1, -2))


#: the factors that carry measurements (their whitened residuals judge how well the model explains the data)
MEASUREMENT_FACTORS = ("pose", "gyro", "pose_between_nodes", "gyro_between_nodes")
#: slices on each side of a slice whose residuals judge it (a contact of a few tenths of a second at 30-60 Hz)
INFLATION_HALF_WIDTH = 2


def slice_residuals(batches: list[Any], n_slices: int, nodes_per_slice: int) -> tuple[FloatArray, FloatArray]:
    """Per time slice, the sum of the squared whitened residuals of the measurement factors on it and their number of
    scalar residuals (a factor belongs to the slice of its first node)."""
    total = np.zeros(n_slices)
    count = np.zeros(n_slices)
    for b in batches:
        if b.name not in MEASUREMENT_FACTORS or b.r.size == 0:
            continue
        k = np.asarray(b.nodes[0]) // nodes_per_slice
        np.add.at(total, k, np.nansum(b.r**2, axis=1))
        np.add.at(count, k, b.r.shape[1])
    return total, count


def residual_inflation(
    batches: list[Any], n_slices: int, nodes_per_slice: int, half: int = INFLATION_HALF_WIDTH,
    reference: float | None = None,
) -> FloatArray:  # fmt: skip
    """Per time slice, how much the Laplace covariance understates the error where the measurements disagree with
    the model more than they usually do: an unmodelled contact force, a burst of sensor noise.

    The rule: the mean squared whitened residual of the measurement factors (:data:`MEASUREMENT_FACTORS`) on the
    slices ``k - half .. k + half``, divided by ``reference`` (default: its median over all slices, the level of the
    run's ordinary residuals, so weights stated conservatively or tightly do not by themselves inflate), floored at 1.
    The covariance of slice ``k`` is to be multiplied by it: the local a-posteriori variance factor of least squares,
    relative to the run's own. A slice without measurements nearby gets 1.

    Args:
        batches: the factors at the estimate (:func:`~.solver.build_factors`).
        n_slices: time slices ``K`` of the estimate; ``nodes_per_slice``: its ``N``.
        half: slices on each side.
        reference: the ordinary level of the local mean squared residual (``None``: the median here).
    """
    total, count = slice_residuals(batches, n_slices, nodes_per_slice)
    kernel = np.ones(2 * half + 1)
    summed = np.convolve(count, kernel, "same")
    local = np.convolve(total, kernel, "same") / np.maximum(summed, 1.0)
    has = summed > 0
    if not has.any():
        return np.ones(n_slices)
    ref = float(np.median(local[has])) if reference is None else float(reference)
    if not ref > 0:
        return np.ones(n_slices)
    return np.where(has, np.maximum(local / ref, 1.0), 1.0)
