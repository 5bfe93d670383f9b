"""Factors of the continuum estimator, each evaluated for a whole batch at once.

Every factor returns a :class:`FactorBatch`: whitened residuals ``r = W e``
(``W^T W = Sigma^-1``) and whitened Jacobians with respect to the 18-vector
perturbation ``[dT | d epsilon | d varpi]`` of each node it touches (poses
perturbed on the right, ``T exp(dT^)``).

Priors (see :mod:`shape_sensing.estimators.continuum.model` for the state):

* :func:`space_prior`: constant-strain Gaussian process along s between nodes
  ``n`` and ``n+1`` of a slice, coupled with the velocity by the rod's
  compatibility equation ``d varpi / ds = d eps / dt - ad(eps) varpi`` (the
  strain rate in time is white noise of density ``Q3``):
  ``e = [log(T_a^-1 T_b) - h eps_a; eps_b - eps_a; varpi_b - varpi_a + h ad(eps_a) varpi_a]``.
  Its covariance propagates the strain noise ``Q2`` into the velocity through
  ``V = ad(varpi_a)``, see :func:`space_prior_sqrt_info`, so its weight
  ``W = diag(W12, (h Q3)^-1/2) A^-1`` depends on the state. ``A`` is unit lower
  triangular, so ``det W`` does not: the negative log-likelihood is exactly
  ``|W(x) e(x)|^2 / 2`` and the factor is an ordinary least-squares term whose
  Jacobian includes the weight's derivative (``hold_weight`` leaves it out).
  Gauss-Newton therefore minimises one fixed cost, and a line search on that
  cost is valid. For a still robot (``varpi = 0``) it is the plain
  constant-strain process plus a random walk of velocity.
* :func:`time_prior`: constant-velocity (white-noise-on-acceleration) process
  in time per node, ``e = [log(T_a^-1 T_b) - dt varpi_a; varpi_b - varpi_a]``
  with ``Sigma = Q1 (x) [[dt^3/3, dt^2/2], [dt^2/2, dt]]``.
* :func:`strain_walk`: random walk of strain in time, ``Sigma = dt Q3``.
* :func:`base_prior`: unary prior of the base node towards ``(T0, eps0, varpi0)``.

Measurements:

* :func:`pose_factor`: ``e = log(T_meas^-1 T(tau))`` with ``T(tau)`` the
  cubic-Hermite (Gaussian-process mean) interpolation between the two time
  slices around the measurement, see :func:`hermite`.
* :func:`gyro_factor`: ``e = w_meas - omega(tau)``, ``omega`` the angular part
  of the Gaussian-process velocity at ``tau`` (:func:`hermite_rate`, the rate
  of the pose factor's interpolation): inside an interval it depends on the
  pose increment as well as on the end velocities, so a reading there measures
  how far the node turned. (Interpolating the velocity linearly between the
  slices, as before, left the turn of a node to the loose constant-velocity
  prior: on ``impulse_1`` the mid-robot orientation then fell 8 deg behind its
  gyroscope's integral during a 2.5 s bend.) An axis read as NaN is not
  measured (its row is zero).

In the priors the second row uses ``eps_b - eps_a`` where the exact
Gaussian-process local variable would use ``Jr^-1(xi) eps_b - eps_a``; both
vanish for a constant strain, and the simpler one has an exact Jacobian.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from shape_sensing.estimators.continuum import lie
from shape_sensing.estimators.continuum.model import DOF
from shape_sensing.geometry import FloatArray

__all__ = [
    "FactorBatch",
    "base_prior",
    "gp_sqrt_info",
    "gyro_factor",
    "gyro_factor_st",
    "hermite",
    "hermite_rate",
    "pose_factor",
    "pose_factor_st",
    "space_prior",
    "space_prior_sqrt_info",
    "strain_walk",
    "time_prior",
]

IntArray = NDArray[np.int64]


@dataclass
class FactorBatch:
    """A batch of ``M`` factors of one kind, whitened.

    Attributes:
        name: kind of factor.
        nodes: per touched node slot, ``(M,)`` node indices.
        jac: per slot, ``(M, d, 18)`` whitened Jacobians.
        r: ``(M, d)`` whitened residuals.
        cauchy: Cauchy scale for IRLS, or ``None`` for plain least squares.
        second: optional ``(M, 18 S, 18 S)`` second-order part of the Hessian, ``sum_k r_k d^2 r_k``
            over the slots' stacked coordinates (the terms Gauss-Newton's ``J^T J`` leaves out), where a
            factor knows them; see :func:`space_prior`.
        cost: the batch's cost when ``r`` does not carry it (``info`` factors); ``None``: from ``r``.
        info: ``(A (M, 18 S, 18 S), b (M, 18 S))``, the factors' ``J^T W J`` and ``J^T W r`` already summed
            (a factor standing for many scalar robust terms on the same nodes, see
            :func:`~shape_sensing.estimators.continuum.tof.tof_factor`); ``jac`` and ``r`` are then empty
            (``d = 0``) and the cost is in ``cost``.
    """

    name: str
    nodes: list[IntArray]
    jac: list[FloatArray]
    r: FloatArray
    cauchy: float | None = None
    second: FloatArray | None = None
    cost: float | None = None
    info: tuple[FloatArray, FloatArray] | None = None

    @property
    def size(self) -> int:
        """Number of factors."""
        return int(self.r.shape[0])

    def select(self, mask: NDArray[np.bool_]) -> FactorBatch:
        """The factors where ``mask`` is true."""
        return FactorBatch(
            self.name,
            [n[mask] for n in self.nodes],
            [J[mask] for J in self.jac],
            self.r[mask],
            self.cauchy,
            None if self.second is None else self.second[mask],
            None,
            None if self.info is None else (self.info[0][mask], self.info[1][mask]),
        )


def _sqrt_info(cov: FloatArray) -> FloatArray:
    """``W`` with ``W^T W = cov^-1`` for ``(..., d, d)`` covariances."""
    L = np.linalg.cholesky(cov)
    d = cov.shape[-1]
    return np.asarray(np.linalg.solve(L, np.broadcast_to(np.eye(d), cov.shape)))


def gp_sqrt_info(qc: FloatArray, h: FloatArray) -> FloatArray:
    """Square-root information ``(M, 12, 12)`` of the constant-rate GP over steps ``h`` (M,)."""
    h = np.asarray(h, dtype=np.float64).reshape(-1)
    key = (np.asarray(qc, dtype=np.float64).tobytes(), h.tobytes())
    hit = _GP_CACHE.get(key)
    if hit is not None:
        return hit
    hu, inverse = np.unique(h, return_inverse=True)
    out = _gp_sqrt_info_unique(np.asarray(qc, dtype=np.float64), hu)[inverse]
    if len(_GP_CACHE) > 64:
        _GP_CACHE.clear()
    _GP_CACHE[key] = out
    return out


_GP_CACHE: dict[tuple[bytes, bytes], FloatArray] = {}


def _gp_sqrt_info_unique(qc: FloatArray, h: FloatArray) -> FloatArray:
    Qc = np.diag(qc)
    cov = np.zeros((h.size, 12, 12))
    cov[:, :6, :6] = (h**3 / 3.0)[:, None, None] * Qc
    cov[:, :6, 6:] = (h**2 / 2.0)[:, None, None] * Qc
    cov[:, 6:, :6] = cov[:, :6, 6:]
    cov[:, 6:, 6:] = h[:, None, None] * Qc
    return _sqrt_info(cov)


def _whiten(W: FloatArray, e: FloatArray, jacs: list[FloatArray]) -> tuple[FloatArray, list[FloatArray]]:
    r = np.einsum("...ij,...j->...i", W, e)
    return r, [np.einsum("...ij,...jk->...ik", W, J) for J in jacs]


def _gp_pair(
    Ta: FloatArray, va: FloatArray, Tb: FloatArray, vb: FloatArray, h: FloatArray, col: int
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Error and Jacobians of the constant-rate GP between two nodes; ``col`` = 6 (strain) or 12 (velocity)."""
    M = Ta.shape[0]
    xi = lie.log(lie.inv(Ta) @ Tb)
    e = np.concatenate([xi - h[:, None] * va, vb - va], axis=1)
    Ja = np.zeros((M, 12, DOF))
    Jb = np.zeros((M, 12, DOF))
    Jli = lie.jl_inv(np.concatenate([xi, -xi]))  # [Jl^-1(xi); Jr^-1(xi)] in one batched call
    Ja[:, :6, :6] = -Jli[:M]
    Jb[:, :6, :6] = Jli[M:]
    eye = np.eye(6)
    Ja[:, :6, col : col + 6] = -h[:, None, None] * eye
    Ja[:, 6:, col : col + 6] = -eye
    Jb[:, 6:, col : col + 6] = eye
    return e, Ja, Jb


def space_prior_sqrt_info(varpi_a: FloatArray, h: FloatArray, Q2: FloatArray, Q3: FloatArray) -> FloatArray:
    """Square-root information ``(M, 18, 18)`` of :func:`space_prior` at velocities ``varpi_a`` ``(M, 6)``.

    Linearised along s, ``d/ds [xi; eps; varpi] = [eps; w2; ad(varpi_a) eps + w3]``
    (``w2 ~ Q2``, ``w3 ~ Q3`` white), so over a step ``h`` with ``V = ad(varpi_a)``::

        Sigma = [[h^3/3 Q2,   h^2/2 Q2,   h^3/3 Q2 V^T],
                 [h^2/2 Q2,   h Q2,       h^2/2 Q2 V^T],
                 [h^3/3 V Q2, h^2/2 V Q2, h Q3 + h^3/3 V Q2 V^T]]

    The velocity's noise is ``V n_xi + n3`` (``n_xi`` the pose row's noise,
    ``n3 ~ h Q3`` independent), so ``Sigma = A diag(Sigma_12, h Q3) A^T`` with
    ``A = [[I, 0, 0], [0, I, 0], [V, 0, I]]`` and
    ``W = diag(W_12, (h Q3)^-1/2) A^-1``: no 18 x 18 factorisation is needed.
    """
    h = np.asarray(h, dtype=np.float64).reshape(-1)
    W = np.zeros((h.size, 18, 18))
    W[:, :12, :12] = gp_sqrt_info(Q2, h)
    d = 1.0 / np.sqrt(h[:, None] * np.asarray(Q3, dtype=np.float64)[None, :])
    W[:, 12:, 12:] = d[:, :, None] * np.eye(6)
    W[:, 12:, :6] = -d[:, :, None] * lie.curly(varpi_a)
    return W


_AD_BASIS = lie.curly(np.eye(6))  # ad(E_i), i = 0..5


def space_prior(
    T: FloatArray,
    eps: FloatArray,
    varpi: FloatArray,
    ia: IntArray,
    ib: IntArray,
    h: FloatArray,
    Q2: FloatArray,
    Q3: FloatArray,
    W: FloatArray | None = None,
    hold_weight: bool = False,
) -> FactorBatch:
    """Constant-strain prior along s, coupled with the velocity, between flat nodes ``ia`` and ``ib``.

    Args:
        T: ``(nodes, 4, 4)`` flat poses.
        eps: ``(nodes, 6)`` flat strains.
        varpi: ``(nodes, 6)`` flat velocities.
        ia: first node of each factor ``(M,)``.
        ib: second node (next along s).
        h: ``(M,)`` arc-length steps.
        Q2: power spectral density (6) of the strain's change along s, already scaled.
        Q3: power spectral density (6) of the strain's change in time, already scaled.
        W: square-root information to use, held constant (default :func:`space_prior_sqrt_info` at this
            state, differentiated with the residual).
        hold_weight: leave the weight's own derivative out of the Jacobian, as if ``W`` were given.
    """
    M = ia.size
    xi = lie.log(lie.inv(T[ia]) @ T[ib])
    ea, va = eps[ia], varpi[ia]
    ad_e = lie.curly(ea)
    e = np.concatenate(
        [xi - h[:, None] * ea, eps[ib] - ea, varpi[ib] - va + h[:, None] * np.einsum("mij,mj->mi", ad_e, va)], axis=1
    )
    Ja = np.zeros((M, 18, DOF))
    Jb = np.zeros((M, 18, DOF))
    Jli = lie.jl_inv(np.concatenate([xi, -xi]))  # [Jl^-1(xi); Jr^-1(xi)] in one batched call
    eye = np.eye(6)
    hh = h[:, None, None]
    Ja[:, :6, :6] = -Jli[:M]
    Jb[:, :6, :6] = Jli[M:]
    Ja[:, :6, 6:12] = -hh * eye
    Ja[:, 6:12, 6:12] = -eye
    Jb[:, 6:12, 6:12] = eye
    Ja[:, 12:, 6:12] = -hh * lie.curly(va)  # d(ad(eps) varpi)/d eps = -ad(varpi)
    Ja[:, 12:, 12:] = hh * ad_e - eye
    Jb[:, 12:, 12:] = eye
    if W is not None:
        r, (Ja, Jb) = _whiten(W, e, [Ja, Jb])
        return FactorBatch("space_prior", [ia, ib], [Ja, Jb], r)
    # the structured whitening of space_prior_sqrt_info, without forming W
    W12 = gp_sqrt_info(Q2, h)
    d = 1.0 / np.sqrt(h[:, None] * np.asarray(Q3, dtype=np.float64)[None, :])
    V = lie.curly(va)
    out_r = np.empty_like(e)
    out_r[:, :12] = np.einsum("mij,mj->mi", W12, e[:, :12])
    out_r[:, 12:] = d * (e[:, 12:] - np.einsum("mij,mj->mi", V, e[:, :6]))
    jacs = []
    for J in (Ja, Jb):
        Jw = np.empty_like(J)
        Jw[:, :12] = W12 @ J[:, :12]
        Jw[:, 12:] = d[:, :, None] * (J[:, 12:] - V @ J[:, :6])
        jacs.append(Jw)
    if hold_weight:
        return FactorBatch("space_prior", [ia, ib], jacs, out_r)
    # the weight's own derivative: d(ad(varpi_a) e1)/d varpi_a = -ad(e1)
    jacs[0][:, 12:, 12:] += d[:, :, None] * lie.curly(e[:, :6])
    # With it, the velocity row is d (varpi_b - varpi_a + ad(xi) varpi_a): bilinear in varpi_a and xi.
    # Its second-order term, sum_k r_k d^2 r_k, is of the size of J^T J wherever the row's residual is
    # of order one; Gauss-Newton without it converges slowly or cycles on a robot that is bent and
    # moving fast (the log map's own curvature is left out, as usual).
    lam = d * out_r[:, 12:]
    B = np.einsum("mk,ikl->mil", lam, _AD_BASIS)  # B[i, l] = sum_k lam_k ad(E_i)[k, l]
    second = np.zeros((M, 2 * DOF, 2 * DOF))
    Sa = -B @ Ja[:, :6, :6]  # d^2 / d varpi_a d T_a
    Sb = -B @ Jb[:, :6, :6]
    second[:, 12:18, 0:6] = Sa
    second[:, 0:6, 12:18] = np.swapaxes(Sa, 1, 2)
    second[:, 12:18, DOF : DOF + 6] = Sb
    second[:, DOF : DOF + 6, 12:18] = np.swapaxes(Sb, 1, 2)
    return FactorBatch("space_prior", [ia, ib], jacs, out_r, second=second)


def time_prior(
    T: FloatArray, varpi: FloatArray, ia: IntArray, ib: IntArray, dt: FloatArray, Q1: FloatArray
) -> FactorBatch:
    """Constant-velocity prior in time between flat nodes ``ia`` (earlier) and ``ib`` (later), steps ``dt``."""
    e, Ja, Jb = _gp_pair(T[ia], varpi[ia], T[ib], varpi[ib], dt, 12)
    r, (Ja, Jb) = _whiten(gp_sqrt_info(Q1, dt), e, [Ja, Jb])
    return FactorBatch("time_prior", [ia, ib], [Ja, Jb], r)


def _walk(
    x: FloatArray, ia: IntArray, ib: IntArray, step: FloatArray, q: FloatArray, col: int, name: str
) -> FactorBatch:
    M = ia.size
    e = x[ib] - x[ia]
    W = 1.0 / np.sqrt(step[:, None] * q[None, :])  # (M, 6) diagonal
    Ja = np.zeros((M, 6, DOF))
    Jb = np.zeros((M, 6, DOF))
    idx = np.arange(6)
    Ja[:, idx, col + idx] = -W
    Jb[:, idx, col + idx] = W
    return FactorBatch(name, [ia, ib], [Ja, Jb], W * e)


def strain_walk(eps: FloatArray, ia: IntArray, ib: IntArray, dt: FloatArray, Q3: FloatArray) -> FactorBatch:
    """Random walk of strain in time between nodes ``ia`` and ``ib`` (``Sigma = dt Q3``)."""
    return _walk(eps, ia, ib, dt, Q3, 6, "strain_walk")


def base_prior(
    T: FloatArray,
    eps: FloatArray,
    varpi: FloatArray,
    i: IntArray,
    T0: FloatArray,
    eps0: FloatArray,
    varpi0: FloatArray,
    P0: FloatArray,
    cauchy: float | None = None,
) -> FactorBatch:
    """Unary prior of nodes ``i`` towards ``(T0, eps0, varpi0)`` with variances ``P0`` (18)."""
    M = i.size
    eT = lie.log(lie.inv(T0)[None] @ T[i])
    e = np.concatenate([eT, eps[i] - eps0, varpi[i] - varpi0], axis=1)
    J = np.zeros((M, DOF, DOF))
    J[:, :6, :6] = lie.jr_inv(eT)
    J[:, 6:, 6:] = np.eye(12)
    w = 1.0 / np.sqrt(P0)
    return FactorBatch("base_prior", [i], [w[None, :, None] * J], w[None, :] * e, cauchy)


def hermite(
    Ta: FloatArray, va: FloatArray, Tb: FloatArray, vb: FloatArray, u: FloatArray, h: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """Gaussian-process (cubic Hermite) interpolation of a pose between two nodes.

    With ``xi = log(Ta^-1 Tb)`` and ``x = u h`` the local variable is
    ``xi(u) = h01(u) xi + h h10(u) va + h h11(u) vb`` (``va``, ``vb`` the
    rates at the ends: velocity in time or strain along s) and
    ``T(u) = Ta exp(xi(u)^)``; it is exact for a constant rate.

    Returns:
        ``T(u)`` ``(M, 4, 4)`` and the Jacobians ``(M, 6, 6)`` of its right
        perturbation with respect to ``dTa``, ``dva``, ``dTb``, ``dvb``.
    """
    u = np.asarray(u, dtype=np.float64)
    a = 3.0 * u**2 - 2.0 * u**3
    b = h * (u**3 - 2.0 * u**2 + u)
    c = h * (u**3 - u**2)
    xi = lie.log(lie.inv(Ta) @ Tb)
    xu = a[:, None] * xi + b[:, None] * va + c[:, None] * vb
    E = lie.exp(xu)
    Tu = Ta @ E
    M = xi.shape[0]
    Jr_u = lie.jr(xu)
    Jli = lie.jl_inv(np.concatenate([xi, -xi]))  # [Jl^-1(xi); Jr^-1(xi)]
    J_Ta = lie.adj(lie.inv(E)) - a[:, None, None] * (Jr_u @ Jli[:M])
    J_Tb = a[:, None, None] * (Jr_u @ Jli[M:])
    J_va = b[:, None, None] * Jr_u
    J_vb = c[:, None, None] * Jr_u
    return Tu, J_Ta, J_va, J_Tb, J_vb


def pose_factor(
    T: FloatArray,
    varpi: FloatArray,
    ia: IntArray,
    ib: IntArray,
    u: FloatArray,
    dt: FloatArray,
    T_meas: FloatArray,
    R: FloatArray,
    cauchy: float | None = None,
) -> FactorBatch:
    """Pose measurements ``T_meas`` at fraction ``u`` of the way from node ``ia`` (time t_k) to ``ib`` (t_k+1).

    Args:
        T: flat poses.
        varpi: flat velocities.
        ia: node at the slice before the measurement.
        ib: same arc-length node at the next slice.
        u: ``(M,)`` in ``[0, 1]``.
        dt: ``(M,)`` slice spacing.
        T_meas: ``(M, 4, 4)`` measured poses.
        R: variances (6) of ``log(T_meas^-1 T)``.
        cauchy: Cauchy scale or ``None``.
    """
    M = ia.size
    Tu, J_Ta, J_va, J_Tb, J_vb = hermite(T[ia], varpi[ia], T[ib], varpi[ib], u, dt)
    e = lie.log(lie.inv(T_meas) @ Tu)
    Ji = lie.jr_inv(e)
    Ja = np.zeros((M, 6, DOF))
    Jb = np.zeros((M, 6, DOF))
    Ja[:, :, :6] = Ji @ J_Ta
    Ja[:, :, 12:] = Ji @ J_va
    Jb[:, :, :6] = Ji @ J_Tb
    Jb[:, :, 12:] = Ji @ J_vb
    w = 1.0 / np.sqrt(R)
    return FactorBatch("pose", [ia, ib], [w[None, :, None] * Ja, w[None, :, None] * Jb], w[None, :] * e, cauchy)


def hermite_rate(
    Ta: FloatArray, va: FloatArray, Tb: FloatArray, vb: FloatArray, u: FloatArray, h: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]:
    """Rate of the Gaussian-process (cubic Hermite) interpolation of :func:`hermite` at fraction ``u``.

    ``v(u) = d xi(u) / dx = 6 u (1 - u) / h xi + (1 - 4 u + 3 u^2) va + (3 u^2 - 2 u) vb``: ``va`` at
    ``u = 0``, ``vb`` at ``u = 1``, and exact for a constant rate (``xi = h v``, ``va = vb = v`` give ``v``).
    Between the ends it depends on the pose increment ``xi = log(Ta^-1 Tb)`` as well as on the end rates:
    a gyroscope reading inside an interval then measures how far the node turned, not only how fast
    its ends turn. The map from ``d xi / dx`` to the body rate, ``Jr(xi(u))``, is taken as identity, the
    same approximation :func:`hermite` makes for ``vb``; its error is second order in the turn per interval.

    Returns:
        ``v(u)`` ``(M, 6)`` and its Jacobians ``(M, 6, 6)`` with respect to ``dTa``, ``dva``, ``dTb``, ``dvb``.
    """
    u = np.asarray(u, dtype=np.float64)
    a = 6.0 * u * (1.0 - u) / h
    b = 1.0 - 4.0 * u + 3.0 * u**2
    c = 3.0 * u**2 - 2.0 * u
    xi = lie.log(lie.inv(Ta) @ Tb)
    v = a[:, None] * xi + b[:, None] * va + c[:, None] * vb
    M = xi.shape[0]
    Jli = lie.jl_inv(np.concatenate([xi, -xi]))  # [Jl^-1(xi); Jr^-1(xi)]
    eye = np.eye(6)[None]
    return v, -a[:, None, None] * Jli[:M], b[:, None, None] * eye, a[:, None, None] * Jli[M:], c[:, None, None] * eye


def gyro_factor(
    T: FloatArray,
    varpi: FloatArray,
    ia: IntArray,
    ib: IntArray,
    u: FloatArray,
    dt: FloatArray,
    w_meas: FloatArray,
    R: FloatArray,
    cauchy: float | None = None,
) -> FactorBatch:
    """Gyroscope readings ``w_meas`` ``(M, 3)`` at fraction ``u`` between nodes ``ia`` and ``ib`` (same s),
    against the angular part of the Gaussian-process velocity there (:func:`hermite_rate`)."""
    M = ia.size
    v, J_Ta, J_va, J_Tb, J_vb = hermite_rate(T[ia], varpi[ia], T[ib], varpi[ib], u, dt)
    w = _axis_weights(w_meas, R)
    e = w * np.nan_to_num(w_meas - v[:, 3:])
    Ja = np.zeros((M, 3, DOF))
    Jb = np.zeros((M, 3, DOF))
    Ja[:, :, :6] = -J_Ta[:, 3:]
    Ja[:, :, 12:] = -J_va[:, 3:]
    Jb[:, :, :6] = -J_Tb[:, 3:]
    Jb[:, :, 12:] = -J_vb[:, 3:]
    return FactorBatch("gyro", [ia, ib], [w[:, :, None] * Ja, w[:, :, None] * Jb], e, cauchy)


def _axis_weights(w_meas: FloatArray, R: FloatArray) -> FloatArray:
    """``(M, 3)`` whitening weights of gyroscope readings: ``R^-1/2``, and 0 on an axis whose reading is NaN
    (not measured: e.g. an axis at the sensor's range, which only says the rate was at least that)."""
    return np.where(np.isfinite(w_meas), 1.0 / np.sqrt(R)[None, :], 0.0)


def pose_st(
    T: FloatArray,
    eps: FloatArray,
    varpi: FloatArray,
    nodes: tuple[IntArray, IntArray, IntArray, IntArray],
    ut: FloatArray,
    dt: FloatArray,
    us: FloatArray,
    h: FloatArray,
) -> tuple[FloatArray, list[FloatArray]]:
    """Pose between nodes in time and s and its four ``(M, 6, 18)`` Jacobians (right perturbation) with respect to
    nodes ``(n, k)``, ``(n, k+1)``, ``(n+1, k)``, ``(n+1, k+1)``: the pose interpolated in time at the two
    surrounding arc-length nodes (constant-velocity GP mean, :func:`hermite`), their strains linearly in time,
    then along s between them (constant-strain GP mean). The pose measurements (:func:`pose_factor_st`) and the
    ToF points (:func:`~.tof.tof_factor`) share it."""
    n00, n01, n10, n11 = nodes
    M = n00.size
    # both arc-length nodes' interpolations in time in one batched call (fewer, larger array operations)
    na, nb = np.concatenate([n00, n10]), np.concatenate([n01, n11])
    uu, dd = np.concatenate([ut, ut]), np.concatenate([dt, dt])
    Tnm, P_T, P_v, Q_T, Q_v = hermite(T[na], varpi[na], T[nb], varpi[nb], uu, dd)
    Tn, A_T, A_v, B_T, B_v = Tnm[:M], P_T[:M], P_v[:M], Q_T[:M], Q_v[:M]
    Tm, C_T, C_v, D_T, D_v = Tnm[M:], P_T[M:], P_v[M:], Q_T[M:], Q_v[M:]
    en = (1.0 - ut)[:, None] * eps[n00] + ut[:, None] * eps[n01]
    em = (1.0 - ut)[:, None] * eps[n10] + ut[:, None] * eps[n11]
    Ts, S_Tn, S_en, S_Tm, S_em = hermite(Tn, en, Tm, em, us, h)
    jacs = []
    for JT, Je, PT, Pv, wt in (
        (S_Tn, S_en, A_T, A_v, 1.0 - ut),
        (S_Tn, S_en, B_T, B_v, ut),
        (S_Tm, S_em, C_T, C_v, 1.0 - ut),
        (S_Tm, S_em, D_T, D_v, ut),
    ):
        J = np.zeros((M, 6, DOF))
        J[:, :, :6] = JT @ PT
        J[:, :, 6:12] = wt[:, None, None] * Je
        J[:, :, 12:] = JT @ Pv
        jacs.append(J)
    return Ts, jacs


def pose_factor_st(
    T: FloatArray,
    eps: FloatArray,
    varpi: FloatArray,
    nodes: tuple[IntArray, IntArray, IntArray, IntArray],
    ut: FloatArray,
    dt: FloatArray,
    us: FloatArray,
    h: FloatArray,
    T_meas: FloatArray,
    R: FloatArray,
    cauchy: float | None = None,
) -> FactorBatch:
    """Pose measurements between arc-length nodes and between time slices, at the pose :func:`pose_st`
    interpolates.

    Args:
        T: flat poses.
        eps: flat strains.
        varpi: flat velocities.
        nodes: flat indices of ``(n, k)``, ``(n, k+1)``, ``(n+1, k)``, ``(n+1, k+1)``.
        ut: ``(M,)`` fraction in time.
        dt: ``(M,)`` slice spacing.
        us: ``(M,)`` fraction along s.
        h: ``(M,)`` node spacing.
        T_meas: ``(M, 4, 4)`` measured poses.
        R: variances (6).
        cauchy: Cauchy scale or ``None``.
    """
    Ts, pose_jacs = pose_st(T, eps, varpi, nodes, ut, dt, us, h)
    e = lie.log(lie.inv(T_meas) @ Ts)
    w = 1.0 / np.sqrt(R)
    WJi = w[None, :, None] * lie.jr_inv(e)  # whitened d e / d(right perturbation of Ts)
    return FactorBatch("pose_between_nodes", list(nodes), [WJi @ J for J in pose_jacs], w[None, :] * e, cauchy)


def gyro_factor_st(
    T: FloatArray,
    varpi: FloatArray,
    nodes: tuple[IntArray, IntArray, IntArray, IntArray],
    ut: FloatArray,
    dt: FloatArray,
    us: FloatArray,
    w_meas: FloatArray,
    R: FloatArray,
    cauchy: float | None = None,
) -> FactorBatch:
    """Gyroscope readings between arc-length nodes: the Gaussian-process angular velocity in time
    (:func:`hermite_rate`) at the two surrounding arc-length nodes, linear along s between them.

    Args:
        T: flat poses.
        varpi: flat velocities.
        nodes: flat indices of ``(n, k)``, ``(n, k+1)``, ``(n+1, k)``, ``(n+1, k+1)``.
        ut: ``(M,)`` fraction in time.
        dt: ``(M,)`` slice spacing.
        us: ``(M,)`` fraction along s.
        w_meas: ``(M, 3)`` readings.
        R: variances (3).
        cauchy: Cauchy scale or ``None``.
    """
    n00, n01, n10, n11 = nodes
    M = ut.size
    vn, A_T, A_v, B_T, B_v = hermite_rate(T[n00], varpi[n00], T[n01], varpi[n01], ut, dt)
    vm, C_T, C_v, D_T, D_v = hermite_rate(T[n10], varpi[n10], T[n11], varpi[n11], ut, dt)
    om = (1.0 - us)[:, None] * vn[:, 3:] + us[:, None] * vm[:, 3:]
    w = _axis_weights(w_meas, R)
    jacs = []
    for PT, Pv, c in ((A_T, A_v, 1.0 - us), (B_T, B_v, 1.0 - us), (C_T, C_v, us), (D_T, D_v, us)):
        J = np.zeros((M, 3, DOF))
        J[:, :, :6] = -c[:, None, None] * PT[:, 3:]
        J[:, :, 12:] = -c[:, None, None] * Pv[:, 3:]
        jacs.append(w[:, :, None] * J)
    return FactorBatch("gyro_between_nodes", list(nodes), jacs, w * np.nan_to_num(w_meas - om), cauchy)
