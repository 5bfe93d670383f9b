"""Chain (Markov-in-s) marginal prior against the exact dense Schur complement, and its window against the exact one."""

from __future__ import annotations

import numpy as np
import pytest

from shape_sensing.estimators.continuum import lie
from shape_sensing.estimators.continuum.errors import ContinuumError
from shape_sensing.estimators.continuum.marginal import (
    ChainPrior,
    block_ldl,
    block_tridiagonal,
    chain_prior_factor,
    marginalize_chain,
    selected_inverse,
)
from shape_sensing.estimators.continuum.model import DOF, Weights
from shape_sensing.estimators.continuum.solver import arc_major_order
from shape_sensing.estimators.continuum.synthetic import bending_strain, sample_measurements
from shape_sensing.estimators.continuum.window import SlidingWindow

RNG = np.random.default_rng(11)
B = 2 * DOF


def _block_tridiagonal_spd(m: int, reach: int = 1) -> np.ndarray:
    """Dense SPD matrix coupling 36-blocks at most ``reach`` apart: L L^T + I, L random block-banded lower."""
    L = np.zeros((m * B, m * B))
    for n in range(m):
        L[n * B : (n + 1) * B, n * B : (n + 1) * B] = np.tril(RNG.normal(size=(B, B)))
        for j in range(max(0, n - reach), n):
            L[n * B : (n + 1) * B, j * B : (j + 1) * B] = 0.5 * RNG.normal(size=(B, B))
    return L @ L.T + np.eye(m * B)


def _lower_banded(H: np.ndarray, bw: int) -> np.ndarray:
    n = H.shape[0]
    ab = np.zeros((bw, n))
    for d in range(bw):
        ab[d, : n - d] = np.diagonal(H, -d)
    return ab


def _exact_marginal(H: np.ndarray, g: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance of slice 1 (the second 18 of every 36-block) by the dense Schur complement."""
    s0 = np.concatenate([np.arange(n * B, n * B + DOF) for n in range(m)])
    s1 = s0 + DOF
    Hn = H[np.ix_(s1, s1)] - H[np.ix_(s1, s0)] @ np.linalg.solve(H[np.ix_(s0, s0)], H[np.ix_(s0, s1)])
    gn = g[s1] - H[np.ix_(s1, s0)] @ np.linalg.solve(H[np.ix_(s0, s0)], g[s0])
    return -np.linalg.solve(Hn, gn).reshape(m, DOF), np.linalg.inv(Hn)


def _chain(m: int, band: int = 1) -> tuple[ChainPrior, np.ndarray, np.ndarray]:
    H = _block_tridiagonal_spd(m, band)
    g = RNG.normal(size=m * B)
    T = lie.exp(RNG.normal(size=(m, 6)))
    ab = _lower_banded(H, (band + 1) * B)
    prior = marginalize_chain(ab, g, T, RNG.normal(size=(m, 6)), RNG.normal(size=(m, 6)), band)
    return prior, H, g


def test_block_tridiagonal_selected_inverse_equals_dense_inverse() -> None:
    m = 4
    H = _block_tridiagonal_spd(m)
    D, E = block_tridiagonal(_lower_banded(H, 2 * B - 5), B)  # a narrower band is padded
    Hb = np.zeros_like(H)
    for n in range(m):
        Hb[n * B : (n + 1) * B, n * B : (n + 1) * B] = D[n]
    for n in range(m - 1):
        Hb[(n + 1) * B : (n + 2) * B, n * B : (n + 1) * B] = E[n]
        Hb[n * B : (n + 1) * B, (n + 1) * B : (n + 2) * B] = E[n].T
    mask = _lower_banded(np.ones_like(H), 2 * B - 5)
    assert np.allclose(_lower_banded(Hb, 2 * B - 5) * (mask > 0), _lower_banded(H, 2 * B - 5))
    D, E = block_tridiagonal(_lower_banded(H, 2 * B), B)
    S, Sl = selected_inverse(*block_ldl(D, E))
    Hi = np.linalg.inv(H)
    for n in range(m):
        assert np.allclose(S[n], Hi[n * B : (n + 1) * B, n * B : (n + 1) * B], rtol=1e-9, atol=1e-12)
    for n in range(m - 1):
        assert np.allclose(Sl[n], Hi[(n + 1) * B : (n + 2) * B, n * B : (n + 1) * B], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(("m", "band"), [(2, 1), (3, 2), (4, 3)])
def test_chain_prior_is_exact_when_the_band_covers_the_slice(m: int, band: int) -> None:
    prior, H, g = _chain(m, band)
    mu, cov = _exact_marginal(H, g, m)
    assert np.allclose(prior.mu, mu, rtol=1e-9, atol=1e-12)
    assert np.allclose(prior.information(), np.linalg.inv(cov), rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("band", [1, 2])
def test_chain_prior_keeps_the_band_marginals_and_is_banded(band: int) -> None:
    """Markov order p: exact mean and every (p + 1)-node covariance; information couples nodes <= p apart."""
    m = 7
    prior, H, g = _chain(m, band)
    mu, cov = _exact_marginal(H, g, m)
    info = prior.information()
    assert np.all(np.linalg.eigvalsh(info) > 0)
    cq = np.linalg.inv(info)
    assert np.allclose(prior.mu, mu, rtol=1e-9, atol=1e-12)
    for n in range(m - band):
        clique = slice(n * DOF, (n + band + 1) * DOF)
        assert np.allclose(cq[clique, clique], cov[clique, clique], rtol=1e-6, atol=1e-9)
        for j in range(n + band + 1, m):
            assert np.abs(info[n * DOF : (n + 1) * DOF, j * DOF : (j + 1) * DOF]).max() == 0.0
    # the exact marginal's information is dense: the chain is an approximation there
    exact_info = np.linalg.inv(cov)
    far = exact_info[: DOF, (band + 1) * DOF : (band + 2) * DOF]
    assert np.abs(far).max() > 1e-6 * np.abs(exact_info).max()


def test_chain_prior_factor_jacobian_and_cost() -> None:
    """Whitened factors: cost = 0.5 (d - mu)^T Lambda (d - mu); Jacobians match central differences."""
    m = 4
    prior, _, _ = _chain(m, 2)
    T = prior.T @ lie.exp(RNG.normal(scale=0.2, size=(m, 6)))
    eps = prior.eps + RNG.normal(scale=0.1, size=(m, 6))
    varpi = prior.varpi + RNG.normal(scale=0.1, size=(m, 6))
    idx = np.arange(m, dtype=np.int64)
    b = chain_prior_factor(T, eps, varpi, idx, prior)
    d = np.concatenate([lie.log(lie.inv(prior.T) @ T), eps - prior.eps, varpi - prior.varpi], axis=1) - prior.mu
    assert np.isclose(0.5 * (b.r**2).sum(), 0.5 * d.reshape(-1) @ prior.information() @ d.reshape(-1))
    h = 1e-6
    for node in range(m):
        for k in range(DOF):
            dd = np.zeros(DOF)
            dd[k] = h
            out = []
            for sgn in (1, -1):
                Tp, ep, vp = T.copy(), eps.copy(), varpi.copy()
                Tp[node] = Tp[node] @ lie.exp(sgn * dd[None, :6])[0]
                ep[node] += sgn * dd[6:12]
                vp[node] += sgn * dd[12:]
                out.append(chain_prior_factor(Tp, ep, vp, idx, prior).r)
            num = (out[0] - out[1]) / (2 * h)
            ana = np.zeros_like(num)
            for slot, nodes in enumerate(b.nodes):
                ana[nodes == node] += b.jac[slot][nodes == node][:, :, k]
            assert np.abs(num - ana).max() < 1e-5 * max(1.0, np.abs(num).max())


def test_chain_prior_errors() -> None:
    prior, _, _ = _chain(2)
    with pytest.raises(ContinuumError, match="chain prior holds 2 nodes, the slice has 3"):
        chain_prior_factor(lie.exp(np.zeros((3, 6))), np.zeros((3, 6)), np.zeros((3, 6)), np.arange(3), prior)
    with pytest.raises(ContinuumError, match="wider than block tridiagonal"):
        block_tridiagonal(np.zeros((80, 72)), B)
    with pytest.raises(ContinuumError, match="not positive definite"):
        block_ldl(-np.eye(B)[None].repeat(2, axis=0), np.zeros((1, B, B)))
    with pytest.raises(ContinuumError, match="marginal must be 'chain' or 'exact', got 'dense'"):
        SlidingWindow(prior_weights(), np.linspace(0, 0.4, 3), 10.0, 0.0, marginal="dense")
    with pytest.raises(ContinuumError, match="marginal band must be >= 1, got 0"):
        SlidingWindow(prior_weights(), np.linspace(0, 0.4, 3), 10.0, 0.0, band=0)
    with pytest.raises(ContinuumError, match="marginal band must be >= 1, got 0"):
        marginalize_chain(np.zeros((72, 72)), np.zeros(72), np.zeros((2, 4, 4)), np.zeros((2, 6)), np.zeros((2, 6)), 0)


def prior_weights() -> Weights:
    return Weights(
        P0=[1e-8] * 6 + [1e-2, 1e-2, 1e-2, 1e2, 1e2, 1e-4] + [1e-2] * 6,
        Q1=[1.0, 1, 1, 10, 10, 10],
        Q2=[1e-2, 1e-2, 1e-2, 10, 10, 10],
        Q3=[1e-2, 1e-2, 1e-2, 10, 10, 10],
        R_pose=[1e-6] * 3 + [1e-4] * 3,
        R_gyro=[1e-4] * 3,
    )


def test_arc_major_order_is_a_permutation_with_narrow_band() -> None:
    K, N = 3, 7
    o = arc_major_order(K, N)
    assert sorted(o.tolist()) == list(range(K * N))
    k, n = np.divmod(np.arange(K * N), N)
    assert np.all(o == n * K + k)


@pytest.mark.parametrize(("nodes", "band"), [(2, 1), (5, 4), (8, 2)])
def test_window_chain_against_exact_marginal(nodes: int, band: int) -> None:
    """Band >= N - 1: chain == exact (to rounding). N = 8, band 2 (arc-length-major order): within 1 mm / 0.01 rad."""
    fn = bending_strain(amplitude=2.0, frequency=0.5)
    s = np.linspace(0.0, 0.4, nodes)
    rng = np.random.default_rng(3)
    meas = sample_measurements(
        fn,
        np.arange(0.0, 1.0, 1 / 40) + 0.004,
        [0.0, 0.4],
        np.arange(0.0, 1.0, 1 / 25) + 0.01,
        [0.4],
        pose_sigma=(1e-3, 1e-2),
        gyro_sigma=1e-2,
        rng=rng,
    )
    out = {}
    for marginal in ("exact", "chain"):
        win = SlidingWindow(prior_weights(), s, 20.0, 0.0, size=4, iterations=3, marginal=marginal, band=band)
        out[marginal] = win.run(meas, 0.8)
    d = lie.log(lie.inv(out["exact"].T.reshape(-1, 4, 4)) @ out["chain"].T.reshape(-1, 4, 4))
    if band >= nodes - 1:
        assert np.abs(d).max() < 1e-9
    else:
        assert np.abs(d[:, :3]).max() < 1e-3 and np.abs(d[:, 3:]).max() < 1e-2
