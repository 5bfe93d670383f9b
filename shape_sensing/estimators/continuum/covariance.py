"""Laplace covariance of the estimate: blocks of ``H^-1`` from the banded Cholesky factor."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import cho_solve_banded, cholesky_banded

from shape_sensing.estimators.continuum.errors import ContinuumError
from shape_sensing.estimators.continuum.model import DOF
from shape_sensing.estimators.continuum.solver import blas_single_thread
from shape_sensing.geometry import FloatArray

__all__ = ["node_covariances", "pose_position_covariance"]


def node_covariances(ab: FloatArray, nodes: list[int] | NDArray[np.int64], dims: slice = slice(0, DOF)) -> FloatArray:
    """Marginal covariances of some nodes under the Laplace approximation.

    Args:
        ab: lower-banded Gauss-Newton information (from :func:`~.solver.assemble`).
        nodes: flat node indices.
        dims: which of the 18 node coordinates (default all; ``slice(0, 6)`` for the pose).

    Returns:
        ``(len(nodes), d, d)`` covariances of the right perturbation (pose) and
        of strain/velocity, in the node's own coordinates.
    """
    nvar = ab.shape[1]
    idx = np.asarray(nodes, dtype=np.int64)
    if idx.size and (idx.min() < 0 or (idx.max() + 1) * DOF > nvar):
        raise ContinuumError(f"node indices {idx.tolist()} outside the {nvar // DOF} nodes of the system")
    d = np.arange(DOF)[dims]
    cols = (idx[:, None] * DOF + d[None, :]).reshape(-1)
    E = np.zeros((nvar, cols.size))
    E[cols, np.arange(cols.size)] = 1.0
    with blas_single_thread():
        cb = cholesky_banded(ab, lower=True, check_finite=False)
        X = cho_solve_banded((cb, True), E, check_finite=False)
    k = d.size
    out = np.empty((idx.size, k, k))
    for i in range(idx.size):
        out[i] = X[cols[i * k : (i + 1) * k], i * k : (i + 1) * k]
    return 0.5 * (out + np.swapaxes(out, 1, 2))


def pose_position_covariance(T: FloatArray, cov6: FloatArray) -> FloatArray:
    """Position covariance (base frame, 3x3) of ``T exp(d^)`` with ``d ~ N(0, cov6)`` (first order).

    The position moves by ``R (d_rho - ...)``; to first order ``dp = R d_rho``
    for the ``[rho; phi]`` right perturbation at the node.
    """
    R = T[..., :3, :3]
    return np.asarray(R @ cov6[..., :3, :3] @ np.swapaxes(R, -1, -2))
