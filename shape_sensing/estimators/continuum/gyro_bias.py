"""The gyroscopes' constant biases estimated jointly with the batch (variable projection).

Seed 001 takes each gyroscope's bias as constant and equal to the mean of an initial still period. That mean
is itself a measurement: with ``n`` readings of white noise ``sigma`` it is off by ``sigma / sqrt(n)`` per
axis (0.9 mrad/s for 120 readings of 0.01 rad/s), and a bias held fixed at it turns that error into an
orientation drift of ``t sigma / sqrt(n)``, which the gyro factor (weighted as white noise only) then holds
against every other sensor. Where the ToF points fix a ring's orientation the drift is pulled back only partly;
where they do not (roll about the backbone far from any feature) it stays.

The joint model keeps the seed's assumptions (constant bias, robot still during the still period) and adds the
bias ``b`` of each gyroscope to the unknowns:

* the still period's readings are split, as for any Gaussian sample, into their mean ``b0`` and the deviations
  from it, which are independent: the mean is a prior ``b ~ N(b0, sigma^2 / n)``, the deviations stay the
  gyro factors of the still period (readings minus ``b0``: the robot turns by their noise only);
* every reading after the still period measures ``omega + b``: its factor is ``w - b - omega(x)``.

The cost is quadratic in ``b`` (the gyro factor is linear in it), so ``b`` is found by Newton on the reduced
cost ``min_x J(x, b)`` (variable projection): at the batch's optimum ``x*(b)`` the reduced gradient is the
gyro factors' and the prior's gradient in ``b`` alone, and the reduced Hessian is the Schur complement
``H_bb - H_bx H_xx^-1 H_xb`` with ``H_xx`` the batch's final banded Gauss-Newton system. A step moves the
bias and the state together (``dx = -H_xx^-1 H_xb db``) and the batch is solved again from there. The
posterior covariance of ``b`` is the inverse of that Schur complement.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import cho_solve_banded, cholesky_banded

from shape_sensing.estimators.continuum import factors as fac
from shape_sensing.estimators.continuum.errors import ContinuumError
from shape_sensing.estimators.continuum.model import DOF, GridState, Measurements
from shape_sensing.estimators.continuum.solver import assign_measurements, blas_single_thread
from shape_sensing.geometry import FloatArray

__all__ = ["BiasStep", "apply_correction", "bias_newton_step", "still_mean_prior"]


@dataclass
class BiasStep:
    """One Newton step on the gyroscopes' bias corrections.

    Attributes:
        sensors: ``(G,)`` arc lengths of the gyroscopes, the order of ``delta`` and ``cov``.
        delta: ``(G, 3)`` step of the bias correction (rad/s), to add to the current correction.
        dx: ``(18 K N,)`` the matching step of the state (``-H_xx^-1 H_xb delta``).
        cov: ``(3 G, 3 G)`` posterior covariance of the biases (inverse reduced Hessian).
        gradient: ``(3 G,)`` reduced gradient before the step.
        sensitivity: ``(18 K N, 3 G)`` how the batch's optimum moves with the biases (``-H_xx^-1 H_xb``): the
            state's covariance with the biases unknown is ``H_xx^-1 + sensitivity cov sensitivity^T``.
    """

    sensors: FloatArray
    delta: FloatArray
    dx: FloatArray
    cov: FloatArray
    gradient: FloatArray
    sensitivity: FloatArray


def still_mean_prior(t: FloatArray, s: FloatArray, t_still: float, sigma: float, sensors: FloatArray) -> FloatArray:
    """``(G,)`` prior variances (per axis) of each still-period mean: ``sigma^2 / n`` for ``n`` readings.

    Raises:
        ContinuumError: a gyroscope has no reading before ``t_still``.
    """
    out = np.empty(len(sensors))
    for i, sv in enumerate(sensors):
        n = int(np.count_nonzero((s == sv) & (t < t_still)))
        if n == 0:
            raise ContinuumError(f"gyroscope at s = {sv} m has no reading before t = {t_still} s to average a bias")
        out[i] = sigma**2 / n
    return out


def bias_newton_step(
    state: GridState,
    ab: FloatArray,
    meas: Measurements,
    R_gyro: FloatArray,
    t_still: float,
    correction: FloatArray,
    prior_var: FloatArray,
    sensors: FloatArray,
    factor: FloatArray | None = None,
) -> BiasStep:
    """A Newton step on the reduced cost in the bias corrections (see the module docstring).

    Args:
        state: the batch's estimate for the current corrections (its optimum over the state).
        ab: the batch's final lower-banded Gauss-Newton system (``H_xx``), time-major as the batch orders it.
        meas: the measurements the batch used: gyro readings with the still-period bias ``b0`` and the current
            ``correction`` already subtracted from every reading after ``t_still``.
        R_gyro: gyroscope variances (3).
        t_still: end of the still period: readings before it do not depend on the correction.
        correction: ``(G, 3)`` current bias corrections ``b - b0`` (rad/s).
        prior_var: ``(G,)`` per-axis prior variance of each correction (:func:`still_mean_prior`).
        sensors: ``(G,)`` arc lengths of the gyroscopes.
        factor: the banded Cholesky factor of ``ab`` if already computed.
    """
    sensors = np.asarray(sensors, dtype=np.float64)
    G = sensors.size
    nvar = ab.shape[1]
    if nvar != DOF * state.K * state.N:
        raise ContinuumError(f"system has {nvar} variables, the state {DOF * state.K * state.N}")
    sel = (meas.gyro_t >= t_still) & (meas.gyro_t >= state.t[0]) & (meas.gyro_t <= state.t[-1])
    sub = Measurements(gyro_t=meas.gyro_t[sel], gyro_s=meas.gyro_s[sel], gyro_w=meas.gyro_w[sel])
    am = assign_measurements(state, sub)
    if am.gyro_st is not None or am.gyro_ia.size != int(sel.sum()):
        raise ContinuumError("gyroscopes must sit on arc-length nodes for the joint bias")
    which = np.searchsorted(sensors, sub.gyro_s)
    if np.any(which >= G) or np.any(sensors[np.clip(which, 0, G - 1)] != sub.gyro_s):
        raise ContinuumError("a gyro reading's arc length is not among the sensors")
    N = state.N
    dt = state.t[am.gyro_ib // N] - state.t[am.gyro_ia // N]
    flatT = state.T.reshape(-1, 4, 4)
    flatv = state.varpi.reshape(-1, 6)
    b = fac.gyro_factor(flatT, flatv, am.gyro_ia, am.gyro_ib, am.gyro_u, dt, am.gyro_w, R_gyro)
    w = fac._axis_weights(am.gyro_w, R_gyro)  # (M, 3): d r / d b = -diag(w)
    # gradient and Hessian in b: the whitened residual r = w (w_meas - b - omega), dr/db = -diag(w)
    g = np.zeros((G, 3))
    Hbb = np.zeros((G, 3))
    np.add.at(g, which, -w * b.r)
    np.add.at(Hbb, which, w * w)
    Hbb = Hbb + 1.0 / prior_var[:, None]
    g = g + correction / prior_var[:, None]
    # H_xb = sum J_x^T J_b: J_b = -diag(w), so column (sensor, axis) gets -w_axis * J_x[:, axis, :]
    Hxb = np.zeros((nvar, 3 * G))
    for node_idx, J in zip(b.nodes, b.jac, strict=True):  # J (M, 3, DOF), whitened
        contrib = -w[:, :, None] * J  # (M, 3, DOF): row axis a of reading m, times d r_a / d b_a
        rows = node_idx[:, None] * DOF + np.arange(DOF)[None, :]  # (M, DOF)
        cols = which[:, None] * 3 + np.arange(3)[None, :]  # (M, 3)
        np.add.at(Hxb, (rows[:, None, :], cols[:, :, None]), contrib)
    with blas_single_thread():
        cb = factor if factor is not None else cholesky_banded(ab, lower=True, check_finite=False)
        AinvB = np.asarray(cho_solve_banded((cb, True), Hxb, check_finite=False))
    S = np.diag(Hbb.reshape(-1)) - Hxb.T @ AinvB
    S = 0.5 * (S + S.T)
    try:
        cov = np.linalg.inv(S)
    except np.linalg.LinAlgError as exc:
        raise ContinuumError("reduced bias Hessian is singular") from exc
    delta = -(cov @ g.reshape(-1))
    dx = -(AinvB @ delta)
    return BiasStep(sensors, delta.reshape(G, 3), dx, cov, g.reshape(-1), -AinvB)


def apply_correction(
    gyro_t: FloatArray, gyro_s: FloatArray, gyro_w: FloatArray, t_still: float, sensors: FloatArray, corr: FloatArray
) -> FloatArray:
    """Readings with each sensor's bias correction ``corr`` ``(G, 3)`` subtracted after ``t_still``."""
    idx: NDArray[np.int64] = np.searchsorted(np.asarray(sensors), gyro_s).astype(np.int64)
    out = np.array(gyro_w, dtype=np.float64, copy=True)
    late = gyro_t >= t_still
    out[late] -= corr[idx[late]]
    return out
