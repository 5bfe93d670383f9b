"""Joint gyroscope bias (variable projection on the batch): against finite differences of the reduced cost and
against a synthetic robot whose orientation is pinned by pose measurements."""

from __future__ import annotations

import numpy as np
import pytest

from shape_sensing.estimators.continuum.errors import ContinuumError
from shape_sensing.estimators.continuum.estimator import BatchEstimator
from shape_sensing.estimators.continuum.gyro_bias import apply_correction, bias_newton_step, still_mean_prior
from shape_sensing.estimators.continuum.model import Measurements, Weights
from shape_sensing.estimators.continuum.solver import GNResult
from shape_sensing.estimators.continuum.synthetic import sample_measurements

S = np.array([0.0, 0.2, 0.4])
STILL = 0.4
SIGMA = 0.01
SPAN = 2.0


def _weights() -> Weights:
    return Weights(
        P0=np.array([1e-8] * 6 + [1e-2, 1e-2, 1e-2, 1e2, 1e2, 1e-4] + [1e-2] * 6),
        Q1=np.array([1.0, 1, 1, 10, 10, 10]),
        Q2=np.array([1e-2, 1e-2, 1e-2, 10, 10, 10]),
        Q3=np.array([1e-2, 1e-2, 1e-2, 10, 10, 10]),
        R_pose=np.array([1e-6] * 3 + [1e-5] * 3),
        R_gyro=np.full(3, SIGMA**2),
    )


def _strain(t: np.ndarray) -> np.ndarray:
    """Still until ``STILL``, then bending about x and y."""
    t = np.atleast_1d(np.asarray(t, dtype=np.float64))
    tau = np.clip(t - STILL, 0.0, None)
    out = np.zeros((t.size, 6))
    out[:, 2] = 1.0
    out[:, 3] = 1.5 * np.sin(2 * np.pi * 0.4 * tau)
    out[:, 4] = 1.0 * (1 - np.cos(2 * np.pi * 0.3 * tau))
    return out


def _problem(bias: np.ndarray, pose_rate: float) -> tuple[Measurements, Measurements]:
    """Pose measurements of the tip (``pose_rate`` per second) and the tip gyro with ``bias`` and noise."""
    rng = np.random.default_rng(5)
    pt = np.arange(0.0, SPAN, 1 / pose_rate) + 0.004
    gt = np.arange(0.0, SPAN, 1 / 100)
    meas = sample_measurements(
        _strain, pt, [0.4], gt, [0.4], pose_sigma=(1e-3, 3e-3), gyro_sigma=SIGMA, gyro_bias=bias, rng=rng
    )
    return meas, Measurements(gyro_t=meas.gyro_t, gyro_s=meas.gyro_s, gyro_w=meas.gyro_w.copy())


def _still_corrected(meas: Measurements, b0: np.ndarray) -> Measurements:
    out = Measurements(meas.pose_t, meas.pose_s, meas.pose_mat, meas.gyro_t, meas.gyro_s, meas.gyro_w - b0[None, :])
    return out


def test_reduced_gradient_and_hessian_match_finite_differences_of_the_batch_optimum() -> None:
    """The step's gradient is d/dc of min_x J(x, c) + c^2/(2 v) (envelope theorem) and the inverse of its
    covariance is the second derivative: both against central differences of re-solved batches."""
    meas, _ = _problem(np.array([0.02, -0.01, 0.015]), pose_rate=10.0)
    b0 = np.array([0.02, -0.01, 0.015]) + np.array([0.004, -0.003, 0.005])
    base = _still_corrected(meas, b0)
    sensors = np.array([0.4])
    pv = still_mean_prior(meas.gyro_t, meas.gyro_s, STILL, SIGMA, sensors)
    est = BatchEstimator(_weights(), S, 10, tol=1e-12, decrement_tol=None, max_iterations=40)

    def reduced(c: np.ndarray) -> tuple[float, tuple[GNResult, Measurements]]:
        gw = apply_correction(base.gyro_t, base.gyro_s, base.gyro_w, STILL, sensors, c[None, :])
        m = Measurements(base.pose_t, base.pose_s, base.pose_mat, base.gyro_t, base.gyro_s, gw)
        res = est.solve(m, 0.0, SPAN)
        assert res.converged and res.ab is not None
        return res.cost + 0.5 * float(c @ c) / pv[0], (res, m)

    c0 = np.array([0.001, 0.002, -0.001])
    _, (res0, m0) = reduced(c0)
    assert res0.ab is not None
    step = bias_newton_step(res0.state, res0.ab, m0, _weights().R_gyro, STILL, c0[None, :], pv, sensors)
    h = 2e-4
    grad = np.zeros(3)
    hess = np.zeros((3, 3))
    fp = []
    for i in range(3):
        e = np.zeros(3)
        e[i] = h
        f_plus, f_minus = reduced(c0 + e)[0], reduced(c0 - e)[0]
        grad[i] = (f_plus - f_minus) / (2 * h)
        fp.append((f_plus, f_minus))
    f0 = reduced(c0)[0]
    for i in range(3):
        hess[i, i] = (fp[i][0] - 2 * f0 + fp[i][1]) / h**2
    np.testing.assert_allclose(step.gradient, grad, rtol=2e-3, atol=1e-3 * np.abs(grad).max())
    H = np.linalg.inv(step.cov)
    np.testing.assert_allclose(np.diag(H), np.diag(hess), rtol=2e-2)
    # the reduced information is at least the prior's (the readings after the still period add to it)
    assert np.all(np.diag(H) >= 1 / pv[0] * (1 - 1e-9))


def test_joint_bias_improves_on_the_still_mean_where_poses_pin_the_orientation() -> None:
    """A short still period (20 readings) leaves the still mean off by up to 1.7 sigma/sqrt(n); with the tip's
    orientation measured to 0.1 mrad the joint estimate lands within 3 posterior standard deviations of the
    true bias, closer than the still mean, with a posterior far tighter than the still-mean prior, and a
    further step is negligible (converged)."""
    b_true = np.array([0.02, -0.01, 0.015])
    rng = np.random.default_rng(5)
    pt = np.arange(0.0, SPAN, 0.1) + 0.004
    gt = np.arange(0.0, SPAN, 1 / 100)
    meas = sample_measurements(
        _strain, pt, [0.4], gt, [0.4], pose_sigma=(1e-4, 1e-4), gyro_sigma=SIGMA, gyro_bias=b_true, rng=rng
    )
    w = Weights(**{**_weights().__dict__, "R_pose": np.array([1e-8] * 6)})
    still = 0.2
    sensors = np.array([0.4])
    pv = still_mean_prior(meas.gyro_t, meas.gyro_s, still, SIGMA, sensors)
    assert pv[0] == pytest.approx(SIGMA**2 / 20)
    b0 = meas.gyro_w[meas.gyro_t < still].mean(axis=0)
    m = _still_corrected(meas, b0)
    raw = m.gyro_w
    est = BatchEstimator(w, S, 10, tol=1e-10, decrement_tol=None, max_iterations=40)
    res = est.solve(m, 0.0, SPAN)
    corr = np.zeros((1, 3))
    for _ in range(2):
        assert res.ab is not None
        step = bias_newton_step(res.state, res.ab, m, w.R_gyro, still, corr, pv, sensors)
        corr = corr + step.delta
        m.gyro_w = apply_correction(m.gyro_t, m.gyro_s, raw, still, sensors, corr)
        res = est.solve(m, 0.0, SPAN, init=res.state.retract(step.dx))
    sd = np.sqrt(np.diag(step.cov))
    err_joint = b0 + corr[0] - b_true
    err_still = b0 - b_true
    assert np.all(np.abs(err_joint) < 3 * sd), (err_joint, sd)
    assert np.linalg.norm(err_joint) < 0.5 * np.linalg.norm(err_still), (err_joint, err_still)
    assert np.all(sd < 0.5 * np.sqrt(pv[0]))
    assert res.ab is not None
    last = bias_newton_step(res.state, res.ab, m, w.R_gyro, still, corr, pv, sensors)
    assert np.all(np.abs(last.delta[0]) < 0.05 * sd)


def test_without_other_information_the_bias_stays_at_its_prior() -> None:
    """No pose measurements after the still period: nothing but the gyro sees the turn, so the reduced
    Hessian is the prior's alone and the step is zero (the state absorbs any bias change)."""
    meas, _ = _problem(np.zeros(3), pose_rate=10.0)
    keep = meas.pose_t < STILL
    m = Measurements(meas.pose_t[keep], meas.pose_s[keep], meas.pose_mat[keep], meas.gyro_t, meas.gyro_s, meas.gyro_w)
    sensors = np.array([0.4])
    pv = still_mean_prior(m.gyro_t, m.gyro_s, STILL, SIGMA, sensors)
    w = _weights()
    res = BatchEstimator(w, S, 10, tol=1e-10, decrement_tol=None, max_iterations=40).solve(m, 0.0, SPAN)
    assert res.ab is not None
    step = bias_newton_step(res.state, res.ab, m, w.R_gyro, STILL, np.zeros((1, 3)), pv, sensors)
    sd = np.sqrt(np.diag(step.cov))
    # the prior's variance, up to what the loose motion prior adds
    assert np.all(sd > 0.8 * np.sqrt(pv[0]))
    assert np.all(sd <= np.sqrt(pv[0]) * (1 + 1e-9))


def test_bad_inputs_name_the_problem() -> None:
    with pytest.raises(ContinuumError, match="no reading before t = 0.1 s"):
        still_mean_prior(np.array([0.2, 0.3]), np.array([0.4, 0.4]), 0.1, SIGMA, np.array([0.4]))
    meas, _ = _problem(np.zeros(3), pose_rate=10.0)
    w = _weights()
    res = BatchEstimator(w, S, 10, max_iterations=5).solve(meas, 0.0, SPAN)
    pv = np.array([1e-6])
    assert res.ab is not None
    with pytest.raises(ContinuumError, match="system has"):
        bias_newton_step(res.state, res.ab[:, :-18], meas, w.R_gyro, STILL, np.zeros((1, 3)), pv, np.array([0.4]))
    with pytest.raises(ContinuumError, match="not among the sensors"):
        bias_newton_step(res.state, res.ab, meas, w.R_gyro, STILL, np.zeros((1, 3)), pv, np.array([0.2]))


def test_a_gyroscope_between_nodes_is_refused_by_the_step_and_localise_keeps_the_still_means() -> None:
    """The joint bias needs each gyroscope on an arc-length node (the rings are nodes in the localisation)."""
    meas, _ = _problem(np.zeros(3), pose_rate=10.0)
    w = _weights()
    res = BatchEstimator(w, S, 10, max_iterations=5).solve(meas, 0.0, SPAN)
    assert res.ab is not None
    between = Measurements(gyro_t=meas.gyro_t, gyro_s=np.full(meas.gyro_t.size, 0.3), gyro_w=meas.gyro_w)
    with pytest.raises(ContinuumError, match="sit on arc-length nodes"):
        bias_newton_step(
            res.state, res.ab, between, w.R_gyro, STILL, np.zeros((1, 3)), np.array([1e-6]), np.array([0.3])
        )
