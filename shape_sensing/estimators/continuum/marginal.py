"""Marginalising a time slice while keeping the window's system banded: the Markov-in-s (chain) prior.

Marginalising the oldest slice of a window exactly (Schur complement of its
``18 N`` block) leaves a Gaussian on the next slice whose information is dense
in ``N``: the oldest slice's nodes are chained along s, so eliminating them
couples every pair of the next slice's nodes. A dense ``18 N x 18 N`` prior
costs ``O(N^3)`` per step and fills the window's band.

:func:`marginalize_chain` keeps the cost linear in ``N`` with one documented
approximation. Over the two oldest slices, ordered arc-length-major
(``[node n at slice 0, node n at slice 1]``, 36 variables per arc-length
node), the factors touching slice 0 form a block-banded system; grouped by
``p`` consecutive nodes it is block tridiagonal. A block LDL^T factorisation of
it gives, in ``O(N p^2)``:

* the exact mean ``mu`` of slice 1 under those factors, and
* the exact covariance blocks ``Cov(x_i, x_j)``, ``|i - j| <= p``, of slice 1's
  nodes (selected inversion: only the block tridiagonal of the inverse is
  formed).

The prior kept is the Gaussian that is Markov of order ``p`` along s with
exactly those marginals of every ``p + 1`` consecutive nodes:
``q(x) = prod_n q(x_n | x_n-p, ..., x_n-1)``, written as ``N`` whitened
factors ``W_n (x_n - mu_n - A_n (x_c - mu_c))`` (``x_c`` the up to ``p``
preceding nodes, ``A_n = Cov(x_n, x_c) Cov(x_c)^-1``, ``W_n^T W_n`` the inverse
of the conditional covariance). Among all Gaussians whose information couples
only nodes at most ``p`` apart along s it is the closest to the exact marginal
in KL divergence (``KL(exact || q)``, the maximum-entropy band extension); it
is positive definite by construction, equals the exact marginal when
``N <= p + 1`` and whenever the exact marginal is itself Markov of order
``p``, and keeps the mean and every node's covariance exact. What it drops is
the exact marginal's conditional dependence between nodes more than ``p``
apart given the nodes between them. ``p = 1`` is a chain.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import LinAlgError, cho_solve_banded, cholesky_banded
from scipy.linalg.lapack import dtrtri

from shape_sensing.estimators.continuum import lie
from shape_sensing.estimators.continuum.errors import ContinuumError
from shape_sensing.estimators.continuum.factors import FactorBatch, IntArray
from shape_sensing.estimators.continuum.model import DOF
from shape_sensing.geometry import FloatArray

__all__ = [
    "ChainPrior",
    "banded_block_ldl",
    "block_ldl",
    "block_tridiagonal",
    "chain_prior_factor",
    "marginalize_chain",
    "selected_inverse",
    "solve_ldl",
]


@dataclass
class ChainPrior:
    """A Gaussian on the ``n`` nodes of one slice, Markov of order ``p`` along s, in local coordinates.

    The local difference is ``d = [log(Tbar^-1 T), eps - epsbar, varpi - varpibar]`` per node.

    Attributes:
        T: ``(n, 4, 4)`` linearisation poses.
        eps: ``(n, 6)`` linearisation strains.
        varpi: ``(n, 6)`` linearisation velocities.
        mu: ``(n, 18)`` mean of ``d``.
        A: ``(n, 18, 18 p)`` regression of ``d_n - mu_n`` on the ``p`` preceding nodes' ``d - mu``
            (oldest first; zero columns where a node has fewer than ``p`` predecessors).
        W: ``(n, 18, 18)`` square-root information of each node's conditional residual.
    """

    T: FloatArray
    eps: FloatArray
    varpi: FloatArray
    mu: FloatArray
    A: FloatArray
    W: FloatArray

    @property
    def band(self) -> int:
        """Markov order ``p`` along s."""
        return int(self.A.shape[2] // DOF)

    def information(self) -> FloatArray:
        """Dense information ``(18 n, 18 n)`` of ``d`` (for tests and inspection)."""
        n, p = self.mu.shape[0], self.band
        L = np.zeros((n * DOF, n * DOF))
        for i in range(n):
            r = slice(i * DOF, (i + 1) * DOF)
            L[r, r] = self.W[i]
            for j in range(p):
                c = i - p + j
                if c >= 0:
                    L[r, c * DOF : (c + 1) * DOF] = -self.W[i] @ self.A[i][:, j * DOF : (j + 1) * DOF]
        return L.T @ L


def _sqrt_info_of(cov: FloatArray, what: str) -> FloatArray:
    """``W`` with ``W^T W = cov^-1``."""
    try:
        L = np.linalg.cholesky(0.5 * (cov + np.swapaxes(cov, -1, -2)))
    except np.linalg.LinAlgError as exc:
        raise ContinuumError(f"marginal covariance of {what} is not positive definite") from exc
    d = cov.shape[-1]
    return np.asarray(np.linalg.solve(L, np.broadcast_to(np.eye(d), cov.shape)))


def chain_prior_factor(
    T: FloatArray, eps: FloatArray, varpi: FloatArray, nodes: NDArray[np.int64], prior: ChainPrior
) -> FactorBatch:
    """The chain prior as whitened factors on flat nodes ``nodes`` (``(n,)``: the slice's nodes in s order).

    Factor ``i`` touches the up to ``p`` nodes before ``i`` and node ``i``
    (``p + 1`` slots; a slot before node 0 repeats node 0 with a zero Jacobian).
    """
    idx = np.asarray(nodes, dtype=np.int64)
    n, p = idx.size, prior.band
    if prior.mu.shape[0] != n:
        raise ContinuumError(f"chain prior holds {prior.mu.shape[0]} nodes, the slice has {n}")
    dT = lie.log(lie.inv(prior.T) @ T[idx])
    d = np.concatenate([dT, eps[idx] - prior.eps, varpi[idx] - prior.varpi], axis=1) - prior.mu
    Jd = np.zeros((n, DOF, DOF))
    Jd[:, :6, :6] = lie.jr_inv(dT)
    Jd[:, 6:, 6:] = np.eye(12)
    ar = np.arange(n)
    ctx = ar[:, None] - p + np.arange(p)[None, :]  # (n, p) preceding nodes, oldest first
    valid = ctx >= 0
    ctx = np.maximum(ctx, 0)
    WA = (prior.W @ prior.A).reshape(n, DOF, p, DOF)  # zero blocks where invalid
    r = np.einsum("mij,mj->mi", prior.W, d) - np.einsum("mipj,mpj->mi", WA, d[ctx])
    jacs = [np.where(valid[:, j, None, None], -WA[:, :, j, :] @ Jd[ctx[:, j]], 0.0) for j in range(p)]
    jacs.append(prior.W @ Jd)
    return FactorBatch("chain_prior", [idx[ctx[:, j]] for j in range(p)] + [idx], jacs, r)


@lru_cache(maxsize=16)
def _block_index(b: int, m: int) -> tuple[IntArray, IntArray, IntArray, NDArray[np.bool_]]:
    """Gather indices of :func:`_blocks` for ``m`` blocks of ``b`` (a window repeats the same shapes)."""
    p, q = np.meshgrid(np.arange(b), np.arange(b), indexing="ij")
    cols = np.arange(m)[:, None, None] * b + q[None]
    lower = p >= q
    out = (np.where(lower, p - q, 0)[None], (b + p - q)[None], cols, lower)
    for a in out:
        a.setflags(write=False)  # shared by every call
    return out


def _blocks(ab: FloatArray, b: int) -> tuple[FloatArray, NDArray[np.bool_], FloatArray]:
    """Lower triangles of the diagonal blocks, their validity mask, and the sub-diagonal blocks of banded storage."""
    bw, nvar = ab.shape
    m = nvar // b
    if m * b != nvar:
        raise ContinuumError(f"{nvar} variables do not split into blocks of {b}")
    if bw > 2 * b:
        raise ContinuumError(f"band of {bw} rows is wider than block tridiagonal with blocks of {b}")
    abp = np.zeros((2 * b, nvar))
    abp[:bw] = ab
    drow, erow, cols, lower = _block_index(b, m)
    D = np.where(lower[None], abp[drow, cols], 0.0)
    E = abp[erow, cols[:-1]]  # rows of block n+1, columns of block n
    return D, lower, E


def block_tridiagonal(ab: FloatArray, b: int) -> tuple[FloatArray, FloatArray]:
    """Diagonal ``(m, b, b)`` and sub-diagonal ``(m - 1, b, b)`` blocks of a lower-banded symmetric matrix.

    Raises:
        ContinuumError: the band is wider than block tridiagonal with blocks of ``b``.
    """
    D, lower, E = _blocks(ab, b)
    D = D + np.swapaxes(np.where(lower, D, 0.0) * ~np.eye(b, dtype=bool)[None], 1, 2)
    return D, E


def banded_block_ldl(ab: FloatArray, g: FloatArray, b: int) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Block LDL^T of a block-tridiagonal SPD matrix from LAPACK's banded Cholesky, and the solution of ``H x = g``.

    The same factorisation as :func:`block_ldl` (the Cholesky factor of a
    block-tridiagonal matrix is block bidiagonal), with one LAPACK call instead
    of a Python loop of small ones.

    Returns:
        Inverse pivots ``P^-1`` ``(m, b, b)``, unit lower factor blocks ``L`` ``(m - 1, b, b)`` and ``x``.

    Raises:
        ContinuumError: not positive definite, or the band is too wide.
    """
    bw = ab.shape[0]
    abp = np.zeros((max(bw, 2 * b), ab.shape[1]))
    abp[:bw] = ab
    try:
        cb = cholesky_banded(abp, lower=True, check_finite=False)
    except LinAlgError as exc:
        raise ContinuumError("the factors of the marginalised slice are not positive definite") from exc
    x = np.asarray(cho_solve_banded((cb, True), g, check_finite=False))
    Ld, _, Lo = _blocks(cb[: 2 * b], b)
    # inverses of the lower-triangular diagonal blocks (LAPACK trtri: a third of a general inverse's time)
    Ldinv = np.empty_like(Ld)
    for n in range(Ld.shape[0]):
        Ldinv[n], info = dtrtri(Ld[n], lower=1)
        if info != 0:
            raise ContinuumError("the factors of the marginalised slice are not positive definite")
    return np.swapaxes(Ldinv, 1, 2) @ Ldinv, Lo @ Ldinv[:-1], x


def selected_inverse(piv: FloatArray, L: FloatArray, *, inverted: bool = False) -> tuple[FloatArray, FloatArray]:
    """Block tridiagonal of ``H^-1`` from a block LDL^T (``O(m b^3)``).

    Args:
        piv: pivots ``P`` ``(m, b, b)`` of :func:`block_ldl`, or their inverses if ``inverted``.
        L: unit lower factor's sub-diagonal blocks ``(m - 1, b, b)``.
        inverted: ``piv`` already holds ``P^-1`` (as from :func:`banded_block_ldl`).

    Returns:
        ``S`` (``(m, b, b)``, ``H^-1[n, n]``) and ``Sl`` (``(m - 1, b, b)``, ``H^-1[n+1, n]``).
    """
    m = piv.shape[0]
    S = np.empty_like(piv)
    Sl = np.empty_like(L)
    Dinv = piv if inverted else np.linalg.inv(piv)
    S[m - 1] = Dinv[m - 1]
    for n in range(m - 2, -1, -1):
        Sl[n] = -S[n + 1] @ L[n]
        S[n] = Dinv[n] - L[n].T @ Sl[n]
    return 0.5 * (S + np.swapaxes(S, 1, 2)), Sl


def block_ldl(D: FloatArray, E: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Block LDL^T ``H = L P L^T`` of a block-tridiagonal SPD matrix.

    Args:
        D: ``(m, b, b)`` diagonal blocks.
        E: ``(m - 1, b, b)`` sub-diagonal blocks (``H[n+1, n]``).

    Returns:
        Pivots ``P`` ``(m, b, b)`` and the unit lower factor's sub-diagonal blocks ``L`` ``(m - 1, b, b)``.

    Raises:
        ContinuumError: a pivot is not positive definite.
    """
    m = D.shape[0]
    piv = np.empty_like(D)
    L = np.empty_like(E)
    piv[0] = D[0]
    for n in range(m - 1):
        try:
            cf = np.linalg.cholesky(piv[n])
        except np.linalg.LinAlgError as exc:
            raise ContinuumError("the factors of the marginalised slice are not positive definite") from exc
        # L_n = E_n P_n^-1 via the Cholesky factor
        Y = np.linalg.solve(cf, E[n].T)
        L[n] = np.linalg.solve(cf.T, Y).T
        piv[n + 1] = D[n + 1] - L[n] @ E[n].T
    return piv, L


def solve_ldl(piv: FloatArray, L: FloatArray, rhs: FloatArray) -> FloatArray:
    """Solve ``L P L^T x = rhs`` (``rhs`` ``(m, b)``) with the factors of :func:`block_ldl`."""
    m = piv.shape[0]
    z = rhs.copy()
    for n in range(1, m):
        z[n] -= L[n - 1] @ z[n - 1]
    x = np.empty_like(z)
    x[m - 1] = np.linalg.solve(piv[m - 1], z[m - 1])
    for n in range(m - 2, -1, -1):
        x[n] = np.linalg.solve(piv[n], z[n]) - L[n].T @ x[n + 1]
    return x


def marginalize_chain(
    ab: FloatArray, g: FloatArray, T: FloatArray, eps: FloatArray, varpi: FloatArray, band: int = 1
) -> ChainPrior:
    """Markov-in-s prior on slice 1 from the factors touching slice 0, assembled over two slices arc-length-major.

    Args:
        ab: lower-banded information over the two oldest slices in the order
            ``[node 0 slice 0, node 0 slice 1, node 1 slice 0, ...]``; no factor
            may couple arc-length nodes more than ``band`` apart.
        g: gradient in the same order.
        T: ``(N, 4, 4)`` slice-1 poses at the linearisation point.
        eps: ``(N, 6)`` slice-1 strains.
        varpi: ``(N, 6)`` slice-1 velocities.
        band: Markov order ``p`` along s of the prior kept (``1``: a chain).

    Raises:
        ContinuumError: ``band < 1``, or the factors are not positive definite.
    """
    if band < 1:
        raise ContinuumError(f"marginal band must be >= 1, got {band}")
    p = int(band)
    nb = 2 * DOF
    N = T.shape[0]
    m = -(-N // p)  # groups of p arc-length nodes: block tridiagonal
    b = nb * p
    nvar = m * b
    abp = np.zeros((max(ab.shape[0], 1), nvar))
    abp[:, : ab.shape[1]] = ab
    abp[0, ab.shape[1] :] = 1.0  # padding nodes: decoupled, unit information
    gp = np.zeros(nvar)
    gp[: g.size] = g
    pinv, L, x = banded_block_ldl(abp, -gp, b)
    S, Sl = selected_inverse(pinv, L, inverted=True)
    x = x.reshape(-1, nb)[:N]
    mu = x[:, DOF:]

    def cov(i: int, j: int) -> FloatArray:
        gi, gj = i // p, j // p
        oi, oj = (i % p) * nb + DOF, (j % p) * nb + DOF
        if gi == gj:
            return S[gi][oi : oi + DOF, oj : oj + DOF]
        if gi == gj + 1:
            return Sl[gj][oi : oi + DOF, oj : oj + DOF]
        return Sl[gi][oj : oj + DOF, oi : oi + DOF].T

    Sc = np.broadcast_to(np.eye(p * DOF), (N, p * DOF, p * DOF)).copy()
    Sxc = np.zeros((N, DOF, p * DOF))
    Snn = np.empty((N, DOF, DOF))
    for n in range(N):
        Snn[n] = cov(n, n)
        for a in range(p):
            ca = n - p + a
            if ca < 0:
                continue
            Sxc[n, :, a * DOF : (a + 1) * DOF] = cov(n, ca)
            for c in range(p):
                cc = n - p + c
                if cc >= 0:
                    Sc[n, a * DOF : (a + 1) * DOF, c * DOF : (c + 1) * DOF] = cov(ca, cc)
    A = np.swapaxes(np.linalg.solve(Sc, np.swapaxes(Sxc, 1, 2)), 1, 2)
    Q = Snn - A @ np.swapaxes(Sxc, 1, 2)
    W = _sqrt_info_of(Q, "a node given the nodes before it")
    return ChainPrior(T.copy(), eps.copy(), varpi.copy(), mu.copy(), A, W)
