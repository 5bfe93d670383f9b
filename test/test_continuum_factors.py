"""Every continuum factor's Jacobian against central finite differences; SE(3) helpers against geometry.py."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from scipy.integrate import trapezoid

from shape_sensing import geometry
from shape_sensing.estimators.continuum import factors as fac
from shape_sensing.estimators.continuum import lie
from shape_sensing.estimators.continuum.model import DOF, GridState
from shape_sensing.estimators.continuum.solver import MarginalPrior, _prior_terms

RNG = np.random.default_rng(7)
M = 4  # nodes in the toy flat state


def _state() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    T = lie.exp(RNG.normal(scale=0.6, size=(M, 6)))
    eps = RNG.normal(size=(M, 6))
    varpi = RNG.normal(size=(M, 6))
    return T, eps, varpi


def _perturb(T: np.ndarray, eps: np.ndarray, varpi: np.ndarray, node: int, k: int, h: float):
    T, eps, varpi = T.copy(), eps.copy(), varpi.copy()
    d = np.zeros(DOF)
    d[k] = h
    T[node] = T[node] @ lie.exp(d[None, :6])[0]
    eps[node] += d[6:12]
    varpi[node] += d[12:]
    return T, eps, varpi


def _check(
    make: Callable[[np.ndarray, np.ndarray, np.ndarray], fac.FactorBatch],
    tol: float = 1e-6,
    state: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> None:
    T, eps, varpi = state if state is not None else _state()
    b = make(T, eps, varpi)
    h = 1e-6
    for slot, nodes in enumerate(b.nodes):
        for m in range(b.size):
            num = np.zeros((b.r.shape[1], DOF))
            for k in range(DOF):
                rp = make(*_perturb(T, eps, varpi, int(nodes[m]), k, h)).r[m]
                rm = make(*_perturb(T, eps, varpi, int(nodes[m]), k, -h)).r[m]
                num[:, k] = (rp - rm) / (2 * h)
            # A node may appear in two slots of the same factor only if ia == ib; not the case here.
            scale = max(1.0, np.abs(num).max())
            assert np.abs(num - b.jac[slot][m]).max() < tol * scale * 10, (b.name, slot, m)


IA = np.array([0, 2])
IB = np.array([1, 3])


Q2 = np.array([1.0, 2, 3, 4, 5, 6])
Q3 = np.array([0.5, 0.5, 0.5, 7.0, 7.0, 7.0])
H = np.array([0.1, 0.12])


def test_space_prior_jacobian() -> None:
    """Exact Jacobians: of ``W e`` with a given (constant) ``W``, and of ``W(x) e(x)`` with the weight's derivative."""
    state = _state()
    W = fac.space_prior_sqrt_info(state[2][IA], H, Q2, Q3)
    _check(lambda T, e, v: fac.space_prior(T, e, v, IA, IB, H, Q2, Q3, W=W), state=state)
    # finite differences recompute the velocity-dependent weight at every perturbed state
    _check(lambda T, e, v: fac.space_prior(T, e, v, IA, IB, H, Q2, Q3), state=state)


def test_space_prior_weight_derivative_is_not_negligible_here() -> None:
    """Holding the weight drops a term of the size of the pose residual: the full check above can fail."""
    T, eps, varpi = _state()
    full = fac.space_prior(T, eps, varpi, IA, IB, H, Q2, Q3)
    held = fac.space_prior(T, eps, varpi, IA, IB, H, Q2, Q3, hold_weight=True)
    assert np.allclose(full.r, held.r, rtol=0, atol=0)
    diff = np.abs(full.jac[0] - held.jac[0])
    assert diff[:, 12:, 12:].max() > 1e-3 * np.abs(full.jac[0]).max()
    assert diff[:, :12].max() == 0 and diff[:, :, :12].max() == 0
    assert np.array_equal(full.jac[1], held.jac[1])


def test_space_prior_weight_is_the_inverse_of_its_covariance() -> None:
    """W^T W against the covariance integrated numerically from the linearised process along s."""
    v = np.array([[0.3, -0.2, 0.1, 1.5, -0.7, 0.4]])
    h = 0.1
    W = fac.space_prior_sqrt_info(v, np.array([h]), Q2, Q3)[0]
    V = lie.curly(v)[0]
    Z, eye = np.zeros((6, 6)), np.eye(6)
    A = np.block([[Z, eye, Z], [Z, Z, Z], [Z, V, Z]])  # d/ds [xi; eps; varpi], strain noise drives varpi via V
    Lq = np.zeros((18, 18))
    Lq[6:12, 6:12] = np.diag(Q2)
    Lq[12:, 12:] = np.diag(Q3)
    taus = np.linspace(0.0, h, 2001)
    phis = [np.eye(18) + A * t + A @ A * t * t / 2 for t in taus]  # A^3 = 0: exact
    vals = np.array([P @ Lq @ P.T for P in phis])
    cov = trapezoid(vals, taus, axis=0)  # scipy.integrate: np.trapezoid needs numpy >= 2
    assert np.allclose(np.linalg.inv(W.T @ W), cov, rtol=1e-5, atol=1e-12)
    # a still robot gets the uncoupled process: the 12 x 12 constant-strain block and h Q3 on velocity
    W0 = fac.space_prior_sqrt_info(np.zeros((1, 6)), np.array([h]), Q2, Q3)[0]
    C0 = np.linalg.inv(W0.T @ W0)
    assert np.allclose(C0[12:, 12:], h * np.diag(Q3)) and np.allclose(C0[:12, 12:], 0.0, atol=1e-15)


def test_space_prior_velocity_row_follows_a_rigidly_moving_bent_robot() -> None:
    """Rod compatibility: a robot of constant strain moving rigidly has varpi(s) = Ad(exp(-s eps)) varpi(0),
    so d varpi/ds = -ad(eps) varpi. The coupled prior's velocity error is second order in h; a plain random
    walk of velocity along s (the uncoupled prior) leaves a first-order error."""
    eps = np.array([0.0, 0.0, 1.0, 4.0, -2.0, 0.5])
    v0 = np.array([0.05, -0.02, 0.0, 1.2, 0.4, -0.8])
    errs = {}
    for h in (0.02, 0.01):
        Tb = lie.exp(h * eps[None])
        T = np.stack([np.eye(4), Tb[0]])
        v = np.stack([v0, lie.adj(lie.inv(Tb))[0] @ v0])
        e = np.stack([eps, eps])
        W = np.eye(18)[None]
        r = fac.space_prior(T, e, v, np.array([0]), np.array([1]), np.array([h]), Q2, Q3, W=W).r[0]
        assert np.abs(r[:12]).max() < 1e-12  # constant strain: pose and strain rows vanish
        errs[h] = (np.linalg.norm(r[12:]), np.linalg.norm(v[1] - v[0]))
    coupled_ratio = errs[0.02][0] / errs[0.01][0]
    uncoupled_ratio = errs[0.02][1] / errs[0.01][1]
    assert 3.5 < coupled_ratio < 4.5 and 1.8 < uncoupled_ratio < 2.2
    assert errs[0.01][0] < 0.05 * errs[0.01][1]  # measured 0.023


def test_time_prior_jacobian() -> None:
    _check(lambda T, e, v: fac.time_prior(T, v, IA, IB, np.array([0.033, 0.05]), np.array([3.0, 3, 3, 80, 80, 80])))


def test_walk_jacobians() -> None:
    q = np.array([0.8, 0.8, 0.8, 1e3, 1e3, 1e3])
    _check(lambda T, e, v: fac.strain_walk(e, IA, IB, np.array([0.03, 0.03]), q))


def test_base_prior_jacobian() -> None:
    T0 = lie.exp(np.array([[0.01, 0.0, 0.02, 0.1, -0.2, 0.05]]))[0]
    P0 = np.linspace(1e-3, 1.0, 18)
    _check(
        lambda T, e, v: fac.base_prior(T, e, v, np.array([0, 3]), T0, np.array([0, 0, 1.0, 0, 0, 0]), np.zeros(6), P0)
    )


def test_pose_factor_jacobian_interpolated() -> None:
    Tm = lie.exp(RNG.normal(scale=0.5, size=(2, 6)))
    u = np.array([0.3, 0.85])
    dt = np.array([0.4, 0.25])
    _check(
        lambda T, e, v: fac.pose_factor(T, v, IA, IB, u, dt, Tm, np.array([1e-4, 1e-4, 1e-4, 1e-2, 1e-2, 1e-2]), 2.0)
    )


Q4 = (np.array([0]), np.array([1]), np.array([2]), np.array([3]))


def test_pose_factor_between_nodes_jacobian() -> None:
    Tm = lie.exp(RNG.normal(scale=0.5, size=(1, 6)))
    R = np.array([1e-4, 1e-4, 1e-4, 1e-2, 1e-2, 1e-2])
    ut, dt, us, h = np.array([0.35]), np.array([0.3]), np.array([0.6]), np.array([0.2])
    _check(lambda T, e, v: fac.pose_factor_st(T, e, v, Q4, ut, dt, us, h, Tm, R))


def test_gyro_factor_between_nodes_jacobian() -> None:
    w = RNG.normal(size=(1, 3))
    R = np.array([1e-3, 2e-3, 3e-3])
    _check(lambda T, e, v: fac.gyro_factor_st(T, v, Q4, np.array([0.3]), np.array([0.25]), np.array([0.8]), w, R))


def test_gyro_factor_jacobian() -> None:
    w = RNG.normal(size=(2, 3))
    R = np.array([1e-3, 2e-3, 3e-3])
    _check(lambda T, e, v: fac.gyro_factor(T, v, IA, IB, np.array([0.2, 0.7]), np.array([0.4, 0.25]), w, R))


def test_gyro_axis_read_as_nan_is_not_measured() -> None:
    """A NaN axis (e.g. saturated) contributes a zero row; the other axes are unchanged and their
    Jacobians still match finite differences."""
    w = RNG.normal(size=(2, 3))
    w_nan = w.copy()
    w_nan[0, 1] = np.nan
    R = np.array([1e-3, 2e-3, 3e-3])
    u, dt = np.array([0.2, 0.7]), np.array([0.4, 0.25])
    T, _eps, varpi = _state()
    full = fac.gyro_factor(T, varpi, IA, IB, u, dt, w, R)
    part = fac.gyro_factor(T, varpi, IA, IB, u, dt, w_nan, R)
    keep = np.ones((2, 3), dtype=bool)
    keep[0, 1] = False
    assert np.all(np.isfinite(part.r)) and part.r[0, 1] == 0.0 and np.array_equal(part.r[keep], full.r[keep])
    for Jp, Jf in zip(part.jac, full.jac, strict=True):
        assert np.all(Jp[0, 1] == 0.0) and np.array_equal(Jp[keep], Jf[keep])
    _check(lambda T, e, v: fac.gyro_factor(T, v, IA, IB, u, dt, w_nan, R))
    _check(lambda T, e, v: fac.gyro_factor_st(T, v, Q4, u[:1], dt[:1], np.array([0.8]), w_nan[:1], R))


def test_hermite_rate_is_the_rate_of_the_pose_interpolation() -> None:
    """The gyro factor's velocity is d/dt of the pose factor's interpolated local variable (central
    differences of ``log(Ta^-1 T(u))``), it equals the end velocities at u = 0 and 1, and a constant body
    velocity is reproduced exactly everywhere in the interval."""
    M = 4
    Ta = lie.exp(RNG.normal(scale=0.5, size=(M, 6)))
    Tb = Ta @ lie.exp(RNG.normal(scale=0.3, size=(M, 6)))
    va, vb = RNG.normal(size=(M, 6)), RNG.normal(size=(M, 6))
    h = np.array([0.2, 0.25, 0.3, 0.05])
    u = np.array([0.1, 0.35, 0.5, 0.9])
    d = 1e-6
    xi = [lie.log(lie.inv(Ta) @ fac.hermite(Ta, va, Tb, vb, u + sgn * d, h)[0]) for sgn in (1.0, -1.0)]
    rate = fac.hermite_rate(Ta, va, Tb, vb, u, h)[0]
    assert np.allclose(rate, (xi[0] - xi[1]) / (2 * d * h[:, None]), atol=1e-6)
    assert np.allclose(fac.hermite_rate(Ta, va, Tb, vb, np.zeros(M), h)[0], va, atol=1e-12)
    assert np.allclose(fac.hermite_rate(Ta, va, Tb, vb, np.ones(M), h)[0], vb, atol=1e-12)
    om = RNG.normal(size=(M, 6))
    Tc = Ta @ lie.exp(h[:, None] * om)
    for uu in (0.0, 0.2, 0.5, 0.77, 1.0):
        got = fac.hermite_rate(Ta, om, Tc, om, np.full(M, uu), h)[0]
        assert np.allclose(got, om, atol=1e-12)


def test_gyro_reading_inside_an_interval_measures_the_turn() -> None:
    """Two slices 0.1 s apart with the same end velocity: a reading at mid-interval is explained only if
    the node turned by the reading's integral (the linear velocity interpolation it replaced could not
    tell the turn at all)."""
    om = np.array([0.0, 0.0, 0.0, 0.3, -0.2, 0.5])
    Ta = np.eye(4)[None]
    dt = np.array([0.1])
    for turn, expect_zero in ((0.1 * om, True), (0.2 * om, False)):
        Tb = lie.exp(turn[None])
        T = np.concatenate([Ta, Tb])
        v = np.stack([om, om])
        b = fac.gyro_factor(T, v, np.array([0]), np.array([1]), np.array([0.5]), dt, om[None, 3:], np.ones(3))
        assert np.allclose(b.r, 0.0, atol=1e-12) == expect_zero


def test_marginal_prior_terms_match_finite_differences() -> None:
    N = 2
    T, eps, varpi = _state()
    st = GridState(
        np.array([0.0, 1.0]), np.array([0.0, 1.0]), T.reshape(2, N, 4, 4), eps.reshape(2, N, 6), varpi.reshape(2, N, 6)
    )
    A = RNG.normal(size=(36, 36))
    prior = MarginalPrior(
        lie.exp(RNG.normal(scale=0.1, size=(N, 6))) @ T[:N],
        eps[:N] + 0.1,
        varpi[:N] - 0.1,
        A @ A.T,
        RNG.normal(size=36),
    )
    _, g, _ = _prior_terms(st, prior)
    h = 1e-6
    num = np.zeros(36)
    for node in range(N):
        for k in range(DOF):
            cp = _prior_terms(
                GridState(
                    st.t, st.s, *[a.reshape(st.T.shape[:2] + a.shape[1:]) for a in _perturb(T, eps, varpi, node, k, h)]
                ),
                prior,
            )[2]
            cm = _prior_terms(
                GridState(
                    st.t, st.s, *[a.reshape(st.T.shape[:2] + a.shape[1:]) for a in _perturb(T, eps, varpi, node, k, -h)]
                ),
                prior,
            )[2]
            num[node * DOF + k] = (cp - cm) / (2 * h)
    assert np.allclose(num, g, rtol=1e-5, atol=1e-5 * np.abs(g).max())


def test_hermite_interpolation_exact_for_constant_rate() -> None:
    xi = np.array([[0.1, -0.2, 0.5, 0.8, -0.3, 0.4]])
    Ta = lie.exp(RNG.normal(size=(1, 6)))
    Tb = Ta @ lie.exp(xi)
    for u in (0.0, 0.25, 0.6, 1.0):
        Tu = fac.hermite(Ta, xi, Tb, xi, np.array([u]), np.array([1.0]))[0]
        assert np.allclose(Tu, Ta @ lie.exp(u * xi), atol=1e-12)


def test_lie_matches_geometry_and_jacobians() -> None:
    xi = RNG.normal(size=(20, 6))
    xi[0] *= 1e-8
    T = lie.exp(xi)
    assert np.allclose(T, geometry.se3_exp(xi), atol=1e-12)
    assert np.allclose(lie.log(T), xi, atol=1e-9) or np.allclose(lie.exp(lie.log(T)), T, atol=1e-12)
    assert np.allclose(lie.adj(T), geometry.adjoint(T), atol=1e-12)
    d = 1e-7 * RNG.normal(size=(20, 6))
    lhs = lie.exp(xi + d)
    assert np.abs(lhs - lie.exp(np.einsum("mij,mj->mi", lie.jl(xi), d)) @ T).max() < 1e-12
    assert np.abs(lhs - T @ lie.exp(np.einsum("mij,mj->mi", lie.jr(xi), d))).max() < 1e-12
    assert np.allclose(lie.jl(xi) @ lie.jl_inv(xi), np.eye(6), atol=1e-10)
    # log near pi falls back to scipy and stays consistent
    R = lie.exp(np.array([[0, 0, 0, np.pi - 1e-6, 0, 0]]))[:, :3, :3]
    assert np.allclose(np.abs(lie.so3_log(R)), [[np.pi - 1e-6, 0, 0]], atol=1e-6)


@pytest.mark.parametrize("cov", [np.diag([-1.0, 1, 1, 1, 1, 1])])
def test_gp_sqrt_info_rejects_bad_covariance(cov: np.ndarray) -> None:
    with pytest.raises(np.linalg.LinAlgError):
        fac.gp_sqrt_info(np.diag(cov), np.array([0.1]))


def test_space_prior_second_order_term_is_the_exact_mixed_curvature() -> None:
    """Rows of the velocity ``varpi_a``: the exact Hessian of the cost equals ``J^T J + second``.

    The velocity row is ``d (varpi_b - varpi_a + ad(xi) varpi_a)``: linear in the velocities, so every second
    derivative involving ``varpi_a`` needs only first derivatives of ``xi`` and the factor's term is exact
    there (elsewhere the log map's own curvature is left out). Checked against finite differences of the
    gradient ``J^T r``, the state moved on the manifold.
    """
    T, eps, varpi = _state()
    ia, ib = np.array([0]), np.array([1])
    h1 = H[:1]

    def grad(T: np.ndarray, e: np.ndarray, v: np.ndarray) -> np.ndarray:
        b = fac.space_prior(T, e, v, ia, ib, h1, Q2, Q3)
        J = np.concatenate(b.jac, axis=2)[0]
        return J.T @ b.r[0]

    b = fac.space_prior(T, eps, varpi, ia, ib, h1, Q2, Q3)
    assert b.second is not None
    J = np.concatenate(b.jac, axis=2)[0]
    model = J.T @ J + b.second[0]
    step = 1e-6
    exact = np.zeros((2 * DOF, 2 * DOF))
    for slot, node in enumerate((0, 1)):
        for k in range(DOF):
            gp = grad(*_perturb(T, eps, varpi, node, k, step))
            gm = grad(*_perturb(T, eps, varpi, node, k, -step))
            exact[:, slot * DOF + k] = (gp - gm) / (2 * step)
    rows = slice(12, 18)  # varpi_a
    scale = np.abs(exact[rows]).max()
    assert np.abs(exact[rows] - model[rows]).max() < 1e-6 * scale
    # and the term matters: Gauss-Newton's J^T J alone misses it by far more than the tolerance
    assert np.abs(exact[rows] - (J.T @ J)[rows]).max() > 1e-2 * scale
    # symmetric, and zero outside the (varpi_a, pose) blocks
    assert np.array_equal(b.second[0], b.second[0].T)
    mask = np.zeros((2 * DOF, 2 * DOF), dtype=bool)
    mask[12:18, 0:6] = mask[12:18, 18:24] = mask[0:6, 12:18] = mask[18:24, 12:18] = True
    assert not b.second[0][~mask].any()


def test_backtrack_halves_an_overshooting_step_until_the_cost_falls() -> None:
    """f(x) = x^4 from x = 1 along dx = -2 (lands on x = -1, no decrease): the half step reaches the minimum."""
    from shape_sensing.estimators.continuum.solver import ARMIJO, backtrack

    f = lambda x: (x**4, "built")  # noqa: E731
    slope = 4.0 * -2.0  # f'(1) dx
    x, c, payload, alpha = backtrack(lambda a: 1.0 - 2.0 * a, slope, 1.0, f)
    assert (x, c, payload, alpha) == (0.0, 0.0, "built", 0.5)
    # a step that decreases enough is taken whole
    x, c, _, alpha = backtrack(lambda a: 1.0 - 0.5 * a, 4.0 * -0.5, 1.0, f)
    assert alpha == 1.0 and c <= 1.0 + ARMIJO * -2.0
    # an uphill direction: no step length lowers the cost, alpha 0 tells the caller to stay
    _, _, _, alpha = backtrack(lambda a: 1.0 + a, 4.0, 1.0, f)
    assert alpha == 0.0
    # a step that ties the cost to within its rounding passes (converging iterations end on such steps)
    _, _, _, alpha = backtrack(lambda a: 1.0, -1e-20, 1.0, f)
    assert alpha == 1.0


def test_space_prior_structured_whitening_equals_the_explicit_weight() -> None:
    T, eps, varpi = _state()
    a = fac.space_prior(T, eps, varpi, IA, IB, H, Q2, Q3, hold_weight=True)
    b = fac.space_prior(T, eps, varpi, IA, IB, H, Q2, Q3, W=fac.space_prior_sqrt_info(varpi[IA], H, Q2, Q3))
    assert np.allclose(a.r, b.r, rtol=1e-12, atol=1e-12)
    for Ja, Jb in zip(a.jac, b.jac, strict=True):
        assert np.allclose(Ja, Jb, rtol=1e-12, atol=1e-9)


def test_step_converged_by_largest_entry_or_by_the_step_length_in_the_h_metric() -> None:
    """dx^T H dx = -g^T dx for the Gauss-Newton step; either test may stop, the second only if enabled."""
    from shape_sensing.estimators.continuum.solver import step_converged

    rng = np.random.default_rng(3)
    A = rng.normal(size=(12, 12))
    Hm = A @ A.T + 12 * np.eye(12)
    dx = np.full(12, 1e-3)  # every entry above tol = 1e-5
    g = -Hm @ dx
    dec = float(dx @ Hm @ dx)
    assert not step_converged(dx, g, 1e-5, None)
    assert not step_converged(dx, g, 1e-5, 0.5 * dec)
    assert step_converged(dx, g, 1e-5, 2.0 * dec)
    assert step_converged(dx * 1e-3, g * 1e-3, 1e-5, None)  # largest entry 1e-6 < tol
    # invariant to a shared permutation of g and dx (the window solves in arc-length-major order)
    p = rng.permutation(12)
    assert step_converged(dx[p], g[p], 1e-5, 2.0 * dec) and not step_converged(dx[p], g[p], 1e-5, 0.5 * dec)


def test_assembly_stacks_shared_node_factors_without_changing_the_system() -> None:
    """assemble() stacks batches on the same node arrays (robust weights folded in as sqrt(w)); the banded
    system equals the dense one built factor by factor, in time-major and in arc-length-major order."""
    from shape_sensing.estimators.continuum.model import Weights, straight_state
    from shape_sensing.estimators.continuum.solver import (
        arc_major_order,
        assemble,
        assemble_dense,
        banded_to_dense,
        build_factors,
    )

    w = Weights(
        P0=[1e-6] * 6 + [1e-2] * 6 + [1.0] * 6,
        Q1=[1.0] * 3 + [10.0] * 3,
        Q2=[0.1] * 3 + [10.0] * 3,
        Q3=[0.1] * 3 + [10.0] * 3,
        R_pose=[1e-6] * 3 + [1e-4] * 3,
        R_gyro=[1e-4] * 3,
        cauchy_space=0.5,
    )
    K, N = 3, 4
    st = straight_state(np.array([0.0, 0.05, 0.1]), np.linspace(0.0, 0.3, N), w.T0, w.epsilon0)
    rng = np.random.default_rng(5)
    st = st.retract(rng.normal(scale=0.2, size=K * N * DOF))
    batches = build_factors(st, w, None)
    names = [b.name for b in batches]
    assert "time_prior" in names and "strain_walk" in names and any(b.cauchy for b in batches)
    ab, g, cost = assemble(K * N, N, batches)
    H, gd = assemble_dense(K * N, batches)  # independent: every factor scattered densely, no stacking
    assert np.allclose(banded_to_dense(ab), H, rtol=1e-10, atol=1e-9 * np.abs(H).max())
    assert np.allclose(g, gd, rtol=1e-10, atol=1e-9 * np.abs(gd).max())
    sq = [np.einsum("md,md->m", b.r, b.r) for b in batches]
    expected = sum(
        float(0.5 * s.sum()) if b.cauchy is None else float(0.5 * b.cauchy**2 * np.log1p(s / b.cauchy**2).sum())
        for b, s in zip(batches, sq, strict=True)
    )
    assert cost == pytest.approx(expected, rel=1e-12)
    order = arc_major_order(K, N)
    ab2, g2, _ = assemble(K * N, N, batches, order=order)
    pos = (order[:, None] * DOF + np.arange(DOF)[None, :]).reshape(-1)
    assert np.allclose(banded_to_dense(ab2)[np.ix_(pos, pos)], H, rtol=1e-10, atol=1e-9 * np.abs(H).max())
    assert np.allclose(g2[pos], g, rtol=1e-10, atol=1e-12)
