"""Behaviour of the continuum estimator on synthetic robots with known truth."""

from __future__ import annotations

import numpy as np
import pytest

from shape_sensing.estimators.continuum import lie
from shape_sensing.estimators.continuum.covariance import node_covariances
from shape_sensing.estimators.continuum.errors import ContinuumError
from shape_sensing.estimators.continuum.estimator import BatchEstimator, time_grid
from shape_sensing.estimators.continuum.model import GridState, Measurements, Weights, straight_state
from shape_sensing.estimators.continuum.query import query_poses
from shape_sensing.estimators.continuum.solver import assign_measurements, gauss_newton
from shape_sensing.estimators.continuum.synthetic import (
    bending_strain,
    constant_strain,
    sample_grid,
    sample_measurements,
)
from shape_sensing.estimators.continuum.window import SlidingWindow

S = np.linspace(0.0, 0.4, 5)
#: Stated tolerances of the sliding window against the batch (marginal, band, m, rad, strain): exact marginal
#: prior, and the banded chain prior of Markov order 1 (the default) and 2 along s (measured: 1.9e-4 m /
#: 4.0e-3 rad / 3.3e-2 and 1.0e-5 m / 2.2e-4 rad / 2.6e-3).
WINDOW_TOL = [("exact", 1, 1e-4, 1e-4, 1e-3), ("chain", 1, 5e-4, 1e-2, 5e-2), ("chain", 2, 5e-5, 1e-3, 1e-2)]


def _weights(**kw: object) -> Weights:
    base = dict(
        P0=[1e-8] * 6 + [1e-2, 1e-2, 1e-2, 1e2, 1e2, 1e-4] + [1e-2] * 6,
        Q1=[1.0, 1, 1, 10, 10, 10],
        Q2=[1e-2, 1e-2, 1e-2, 10, 10, 10],
        Q3=[1e-2, 1e-2, 1e-2, 10, 10, 10],
        R_pose=[1e-6] * 3 + [1e-4] * 3,
        R_gyro=[1e-4] * 3,
    )
    base.update(kw)
    return Weights(**base)  # type: ignore[arg-type]


def _angle(T: np.ndarray) -> np.ndarray:
    return np.linalg.norm(lie.so3_log(T[..., :3, :3]), axis=-1)


def test_prior_alone_straightens_a_perturbed_robot() -> None:
    w = _weights()
    t = time_grid(0.0, 0.5, 20)
    truth = straight_state(t, S, w.T0, w.epsilon0)
    rng = np.random.default_rng(1)
    init = truth.retract(0.05 * rng.standard_normal(truth.K * truth.N * 18))
    res = gauss_newton(init, w, None, max_iterations=30, tol=1e-10, decrement_tol=None)
    assert res.converged
    assert np.abs(res.state.T - truth.T).max() < 1e-9
    assert np.abs(res.state.eps - truth.eps).max() < 1e-9
    assert np.abs(res.state.varpi).max() < 1e-9
    # positions lie on the z axis at their arc lengths
    assert np.allclose(res.state.T[..., :3, 3], np.stack([0 * S, 0 * S, S], axis=1)[None], atol=1e-9)


def test_constant_strain_recovered_exactly_from_perfect_poses() -> None:
    eps_true = np.array([0.0, 0.0, 1.0, 2.5, -1.5, 0.0])
    w = _weights(P0=[1e-10] * 6 + [1e6] * 5 + [1e-4] + [1e-2] * 6, R_pose=[1e-12] * 6)
    fn = constant_strain(eps_true)
    pt = np.linspace(0.0, 1.0, 37)
    meas = sample_measurements(fn, pt, [0.2, 0.4], np.zeros(0), [])
    est = BatchEstimator(w, S, 10, tol=1e-12, max_iterations=40)
    res = est.solve(meas, 0.0, 1.0)
    truth = sample_grid(fn, res.state.t, S)
    assert res.converged
    assert np.abs(res.state.T - truth.T).max() < 1e-7
    assert np.abs(res.state.eps - eps_true).max() < 1e-5  # the base strain prior (variance 1e6) pulls ~1e-6
    # between nodes too
    Tq = query_poses(res.state, np.array([0.33, 0.71]), np.array([0.05, 0.37]))
    Tt = sample_grid(fn, np.array([0.0]), np.array([0.05, 0.37])).T[0]
    assert np.abs(Tq - Tt).max() < 1e-7


def test_sensors_between_nodes_are_interpolated_exactly() -> None:
    """Perfect poses and gyro readings at arc lengths between nodes, off the time grid: constant strain recovered."""
    eps_true = np.array([0.0, 0.0, 1.0, 2.0, -1.0, 0.0])
    w = _weights(P0=[1e-10] * 6 + [1e6] * 5 + [1e-4] + [1e-2] * 6, R_pose=[1e-12] * 6)
    fn = constant_strain(eps_true)
    pt = np.linspace(0.0, 1.0, 23) * 0.999 + 0.0004
    meas = sample_measurements(fn, pt, [0.17, 0.33], pt, [0.25, 0.4])
    res = BatchEstimator(w, S, 10, tol=1e-12, max_iterations=40).solve(meas, 0.0, 1.0)
    am = assign_measurements(res.state, meas)
    assert am.pose_st is not None and am.gyro_st is not None and am.pose_ia.size == 0
    truth = sample_grid(fn, res.state.t, S)
    assert res.converged
    assert np.abs(res.state.T - truth.T).max() < 1e-6
    assert np.abs(res.state.varpi).max() < 1e-6


def test_gyro_only_drift_is_bounded_by_the_prior() -> None:
    """A biased tip gyro (0.05 rad/s) on a robot at rest whose prior holds its shape (base strain held at
    every slice, little bending change along s): integration drifts without bound, the estimate levels off
    at a turn the prior sets (0.184 rad over 16 s, 0.189 over 64 s, against 0.8 and 3.2 integrated).

    With a prior that does not hold the shape (a strain random walk in time and nothing else) the estimate
    follows the biased gyro, as the posterior of a model without a bias state should: the drift is then
    bounded only in rate. (The old linear velocity interpolation looked bounded there because it let a
    node's pose stand still while its velocity matched the gyro.)"""
    w = _weights(
        P0=[1e-8] * 6 + [1e-2, 1e-2, 1e-2, 1e-3, 1e-3, 1e-4] + [1e-2] * 6,
        Q2=[1e-2] * 6,
        Q3=[1e-3] * 3 + [1e-1] * 3,
    )
    bias = np.array([0.05, 0.0, 0.0])
    fn = constant_strain(np.array([0, 0, 1.0, 0, 0, 0]))
    drift = []
    for span in (16.0, 64.0):
        gt = np.arange(0.0, span, 1 / 40)
        meas = sample_measurements(fn, np.zeros(0), [], gt, [0.4], gyro_bias=bias)
        res = BatchEstimator(w, S, 10, tol=1e-8, decrement_tol=None).solve(meas, 0.0, span)
        drift.append(_angle(res.state.T[:, -1]).max())
    assert drift[1] < 1.05 * drift[0]  # four times longer, (almost) no further drift
    assert drift[1] < 0.1 * 0.05 * 64.0
    # and the Laplace covariance of the tip stays bounded as well (prior-limited)
    half = res.state.K // 2
    cov = node_covariances(res.ab, [half * S.size + S.size - 1, (res.state.K - 1) * S.size + S.size - 1], slice(3, 6))
    assert np.all(np.linalg.eigvalsh(cov) < 1.0)


def _moving_problem() -> tuple[Weights, Measurements, object]:
    w = _weights(R_pose=[1e-6] * 3 + [1e-4] * 3, R_gyro=[1e-4] * 3)
    fn = bending_strain(amplitude=2.0, frequency=0.5)
    rng = np.random.default_rng(3)
    pt = np.arange(0.0, 1.0, 1 / 47) + 0.003
    gt = np.arange(0.0, 1.0, 1 / 29) + 0.011
    meas = sample_measurements(fn, pt, [0.0, 0.4], gt, [0.2, 0.4], pose_sigma=(1e-3, 1e-2), gyro_sigma=1e-2, rng=rng)
    return w, meas, fn


def test_batch_tracks_a_moving_robot() -> None:
    w, meas, fn = _moving_problem()
    res = BatchEstimator(w, S, 20).solve(meas, 0.0, 1.0)
    truth = sample_grid(fn, res.state.t, S)
    err = np.linalg.norm(res.state.T[..., :3, 3] - truth.T[..., :3, 3], axis=-1)
    assert err.max() < 5e-3


@pytest.mark.parametrize(("marginal", "band", "tol_pos", "tol_rot", "tol_eps"), WINDOW_TOL)
def test_sliding_window_equals_batch_on_short_trajectory(
    marginal: str, band: int, tol_pos: float, tol_rot: float, tol_eps: float
) -> None:
    """The window's newest slices equal the batch solution over the same data.

    Exact marginalisation: within 1e-4 (m, rad). The banded chain marginal
    prior (linear in N) drops long-range couplings along s: within the looser
    tolerances of ``WINDOW_TOL``.
    """
    w, meas, _ = _moving_problem()
    rate, span = 20.0, 0.8
    t1 = span
    batch = BatchEstimator(w, S, rate, tol=1e-10, decrement_tol=None).solve(meas.between(0.0, t1), 0.0, t1)
    win = SlidingWindow(
        w, S, rate, 0.0, size=4, iterations=10, tol=1e-10, decrement_tol=None, marginal=marginal, band=band
    )
    out = win.run(meas, t1)
    assert out.K == batch.state.K and np.allclose(out.t, batch.state.t)
    newest = slice(-win.size, None)
    d = lie.log(lie.inv(batch.state.T[newest].reshape(-1, 4, 4)) @ out.T[newest].reshape(-1, 4, 4))
    assert np.abs(d[:, :3]).max() < tol_pos and np.abs(d[:, 3:]).max() < tol_rot
    assert np.abs(out.eps[newest] - batch.state.eps[newest]).max() < tol_eps
    # the fixed-lag outputs (older slices) are close too, though the batch also used later data
    d_old = lie.log(lie.inv(batch.state.T[: -win.size].reshape(-1, 4, 4)) @ out.T[: -win.size].reshape(-1, 4, 4))
    assert np.abs(d_old[:, :3]).max() < 2e-3


def test_window_reports_iterations_convergence_and_how_far_finalised_slices_still_moved() -> None:
    """Iterated to convergence, every step meets the tolerance and a finalised slice has stopped moving;
    at one iteration per step no step can confirm convergence and the finalised slices still move."""
    w, meas, _ = _moving_problem()
    rate = 20.0
    runs = {}
    for iterations in (1, 30):
        win = SlidingWindow(w, S, rate, 0.0, size=4, iterations=iterations, tol=1e-8, decrement_tol=None)
        infos = [win.step(meas.between(win.t_newest, win.t_newest + 1 / rate)) for _ in range(12)]
        assert win.total_iterations == sum(i.iterations for i in infos)
        finals = [i.final_update for i in infos if i.finalized]
        assert finals == win.final_updates and len(finals) == len(win.final_t) == 12 - (win.size - 1)
        assert all(i.final_update is None for i in infos if not i.finalized)
        runs[iterations] = win
    conv, one = runs[30], runs[1]
    assert conv.converged_steps == conv.steps == 12 and conv.total_iterations > 2 * 12
    assert max(conv.final_updates) < 1e-8
    assert one.converged_steps == 0 and one.total_iterations == 12
    assert min(one.final_updates) > 1e-3  # still moving when finalised: one iteration is an approximation
    # and the two outputs are close on this gentle trajectory
    a, b = one.finalized(), conv.finalized()
    assert np.abs(a.T[..., :3, 3] - b.T[..., :3, 3]).max() < 1e-4  # measured 2.0e-5 m


def test_window_takes_second_order_steps_only_when_it_iterates() -> None:
    """At one iteration per step (no line search to check a step) the window is plain Gauss-Newton;
    iterating, its steps use the coupled prior's curvature and reach the same optimum as without it."""
    w, meas, _ = _moving_problem()
    rate = 20.0
    out = {}
    for iterations in (1, 30):
        for second in (True, False):
            win = SlidingWindow(w, S, rate, 0.0, size=4, iterations=iterations, tol=1e-10, second_order=second)
            win.run(meas, 0.6)
            out[iterations, second] = (win.finalized(), win.total_iterations)
    assert np.array_equal(out[1, True][0].T, out[1, False][0].T)
    a, b = out[30, True][0], out[30, False][0]
    assert np.abs(a.T[..., :3, 3] - b.T[..., :3, 3]).max() < 1e-5
    assert out[30, True][1] <= out[30, False][1]


def test_gauss_newton_takes_its_last_allowed_step_as_plain_gauss_newton() -> None:
    """A Newton step is only taken where the line search checks it: a single iteration is Gauss-Newton's."""
    w, meas, _ = _moving_problem()
    st = straight_state(time_grid(0.0, 0.3, 20.0), S, w.T0, w.epsilon0)
    am = assign_measurements(st, meas.between(0.0, 0.3))
    one = gauss_newton(st, w, am, max_iterations=1)
    plain = gauss_newton(st, w, am, max_iterations=1, second_order=False)
    assert np.array_equal(one.state.T, plain.state.T) and np.array_equal(one.state.varpi, plain.state.varpi)
    many = gauss_newton(st, w, am, max_iterations=30)
    assert many.converged and many.costs[-1] < one.costs[0]


def test_window_with_marginalisation_matches_batch_when_window_holds_everything() -> None:
    w, meas, _ = _moving_problem()
    rate, t1 = 20.0, 0.3
    batch = BatchEstimator(w, S, rate, tol=1e-11, decrement_tol=None).solve(meas.between(0.0, t1), 0.0, t1)
    win = SlidingWindow(w, S, rate, 0.0, size=50, iterations=10, tol=1e-11, decrement_tol=None)
    out = win.run(meas, t1)
    assert np.abs(out.T - batch.state.T).max() < 1e-8


def test_extensible_robot_stretch_is_estimated() -> None:
    fn = bending_strain(amplitude=1.0, frequency=0.5, stretch=0.5, stretch_rate=0.8)
    w = _weights(P0=[1e-8] * 6 + [1e-2, 1e-2, 1e6, 1e2, 1e2, 1e-4] + [1e-2] * 6, Q3=[1.0] * 6)
    pt = np.arange(0.0, 1.0, 1 / 40)
    meas = sample_measurements(fn, pt, [0.2, 0.4], np.zeros(0), [], pose_sigma=(1e-4, 1e-3))
    res = BatchEstimator(w, S, 20).solve(meas, 0.0, 1.0)
    truth = sample_grid(fn, res.state.t, S)
    assert np.abs(res.state.eps[..., 2] - truth.eps[..., 2]).max() < 0.05
    assert np.abs(res.state.T[:, -1, :3, 3] - truth.T[:, -1, :3, 3]).max() < 2e-3


def test_bad_inputs_name_the_problem() -> None:
    with pytest.raises(ContinuumError, match="weight Q1 must have 6 entries"):
        _weights(Q1=[1.0] * 5)
    with pytest.raises(ContinuumError, match="weight R_gyro must hold finite variances > 0"):
        _weights(R_gyro=[1.0, 0.0, 1.0])
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ContinuumError, match="cauchy_space must be > 0 or None"):
            _weights(cauchy_space=bad)
    with pytest.raises(ContinuumError, match="arc-length nodes must be >= 2 increasing"):
        BatchEstimator(_weights(), np.array([0.0, 0.2, 0.1]), 10)
    with pytest.raises(ContinuumError, match="window size must be >= 2"):
        SlidingWindow(_weights(), S, 10, 0.0, size=1)
    st = straight_state(np.array([0.0, 0.1]), S, np.eye(4), np.array([0, 0, 1.0, 0, 0, 0]))
    m = Measurements(gyro_t=np.array([0.05]), gyro_s=np.array([0.45]), gyro_w=np.zeros((1, 3)))
    with pytest.raises(ContinuumError, match=r"gyro reading at arc length 0.45 is outside the nodes \[0.0, 0.4\]"):
        assign_measurements(st, m)
    with pytest.raises(ContinuumError, match="time 0.5 outside the estimate's span"):
        query_poses(st, np.array([0.5]), np.array([0.1]))
    with pytest.raises(ContinuumError, match="end time 0.0 must be after start time 1.0"):
        time_grid(1.0, 0.0, 10)


def test_measurements_outside_span_are_counted_not_used() -> None:
    st: GridState = straight_state(np.array([0.0, 0.1]), S, np.eye(4), np.array([0, 0, 1.0, 0, 0, 0]))
    m = Measurements(gyro_t=np.array([-1.0, 0.05, 3.0]), gyro_s=np.array([0.4, 0.4, 0.4]), gyro_w=np.zeros((3, 3)))
    am = assign_measurements(st, m)
    assert am.skipped == 2 and am.gyro_ia.size == 1


def test_cauchy_loss_rejects_an_outlier_pose() -> None:
    """One tip pose 5 cm off: least squares is pulled towards it, the Cauchy loss (IRLS) barely moves."""
    fn = constant_strain(np.array([0.0, 0.0, 1.0, 1.0, 0.0, 0.0]))
    pt = np.arange(0.0, 1.0, 1 / 40) + 0.004
    meas = sample_measurements(fn, pt, [0.4], np.zeros(0), [])
    bad = 20
    meas.pose_mat[bad] = meas.pose_mat[bad].copy()
    meas.pose_mat[bad][:3, 3] += [0.05, 0.0, 0.0]
    truth_tip = sample_grid(fn, np.array([0.0]), S).T[0, -1, :3, 3]
    errs = {}
    for name, c in (("ls", None), ("cauchy", 1.0)):
        w = _weights(R_pose=[1e-6] * 3 + [1e-4] * 3, cauchy_pose=c)
        res = BatchEstimator(w, S, 20).solve(meas, 0.0, 1.0)
        tip = query_poses(res.state, meas.pose_t[bad : bad + 1], np.array([0.4]))[0, :3, 3]
        errs[name] = float(np.linalg.norm(tip - truth_tip))
    assert errs["ls"] > 5e-3
    assert errs["cauchy"] < 0.1 * errs["ls"]


def test_laplace_covariance_equals_dense_inverse() -> None:
    w, meas, _ = _moving_problem()
    res = BatchEstimator(w, S, 10).solve(meas.between(0.0, 0.5), 0.0, 0.5)
    assert res.ab is not None
    from shape_sensing.estimators.continuum.solver import banded_to_dense

    Hinv = np.linalg.inv(banded_to_dense(res.ab))
    nodes = [0, 7, res.state.K * S.size - 1]
    cov = node_covariances(res.ab, nodes)
    for i, n in enumerate(nodes):
        assert np.allclose(cov[i], Hinv[18 * n : 18 * n + 18, 18 * n : 18 * n + 18], rtol=1e-8, atol=1e-14)


def test_laplace_covariance_from_a_given_factor_and_of_late_nodes_only() -> None:
    """The factor from the solve gives the same covariances; late nodes use only the trailing rows of it."""
    from scipy.linalg import cholesky_banded

    from shape_sensing.estimators.continuum.solver import banded_to_dense, solve_banded_factor

    w, meas, _ = _moving_problem()
    res = BatchEstimator(w, S, 10).solve(meas.between(0.0, 0.5), 0.0, 0.5)
    assert res.ab is not None
    Hinv = np.linalg.inv(banded_to_dense(res.ab))
    g = np.ones(res.ab.shape[1])
    dx, cb = solve_banded_factor(res.ab, g)
    assert cb is not None
    assert np.allclose(dx, -Hinv @ g, rtol=1e-8, atol=1e-12)
    last = res.state.K * S.size - 1
    for nodes in ([last - 1, last], [last // 2, last // 2 + 3], [last // 3]):  # E zero above their first row
        cov = node_covariances(res.ab, nodes, slice(3, 6), factor=cb)
        for i, n in enumerate(nodes):
            want = Hinv[18 * n + 3 : 18 * n + 6, 18 * n + 3 : 18 * n + 6]
            assert np.allclose(cov[i], want, rtol=1e-8, atol=1e-14)
    with pytest.raises(ContinuumError, match="Cholesky factor has"):
        node_covariances(res.ab, nodes, factor=cholesky_banded(res.ab[:, :-18], lower=True))


def test_solve_banded_factor_gives_no_factor_of_a_damped_system() -> None:
    """A singular system is solved damped; that factor is not H's and is not returned."""
    from shape_sensing.estimators.continuum.solver import solve_banded_factor

    ab = np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0]])  # singular: solved with a little damping
    dx, cb = solve_banded_factor(ab, np.ones(3))
    assert cb is None
    assert np.all(np.isfinite(dx)) and abs(dx[0] + 1.0) < 1e-6 and abs(dx[2] + 1.0) < 1e-6  # H dx = -g there


def test_cauchy_on_the_space_prior_recovers_a_two_segment_robot() -> None:
    """A strain step at s = 0.2 (two constant-curvature segments), seen only through base and tip poses.

    Least squares on the along-s prior smears the step over the robot (mm errors in between); a Cauchy loss on
    that prior alone lets one interval take the step and recovers both segments (analytic truth).
    """
    e1 = np.array([0.0, 0.0, 1.0, 0.0, 0.0, 0.0])
    e2 = np.array([0.0, 0.0, 1.0, 6.0, 0.0, 0.0])

    def pose(s: float) -> np.ndarray:
        return lie.exp(s * e1) if s <= 0.2 else lie.exp(0.2 * e1) @ lie.exp((s - 0.2) * e2)

    truth = np.stack([pose(s) for s in S])
    pt = np.arange(0.0, 1.0, 1 / 40) + 0.004
    ps = [0.0, 0.4]
    meas = Measurements(
        np.repeat(pt, 2), np.tile(ps, pt.size), np.stack([pose(s) for _ in pt for s in ps]),
        np.zeros(0), np.zeros(0), np.zeros((0, 3)),
    )  # fmt: skip
    inextensible = [1e-8] * 6 + [1e-6] * 3 + [1e2, 1e2, 1e-4] + [1e-2] * 6
    err, eps = {}, {}
    for name, c in (("ls", None), ("cauchy", 0.3)):
        w = _weights(Q2=[1e-6] * 3 + [10.0] * 3, P0=inextensible, cauchy_space=c)
        res = BatchEstimator(w, S, 10, max_iterations=50).solve(meas, 0.0, 1.0)
        assert res.converged
        k = res.state.K // 2
        err[name] = np.linalg.norm(res.state.T[k, :, :3, 3] - truth[:, :3, 3], axis=1)
        eps[name] = res.state.eps[k]
    assert err["ls"].max() > 2e-3
    assert err["cauchy"].max() < 1e-4
    assert np.abs(eps["cauchy"][:2] - e1).max() < 0.05 and np.abs(eps["cauchy"][3:] - e2).max() < 0.05
    # only the along-s prior gets the loss
    w = _weights(cauchy_space=0.3)
    st = straight_state(np.array([0.0, 0.1]), S, w.T0, w.epsilon0)
    from shape_sensing.estimators.continuum.solver import build_factors

    assert {b.name: b.cauchy for b in build_factors(st, w, None)} == {
        "space_prior": 0.3,
        "time_prior": None,
        "strain_walk": None,
        "base_prior": None,
    }
