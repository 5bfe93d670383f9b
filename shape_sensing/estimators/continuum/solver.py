"""Gauss-Newton on the block-banded system of the continuum estimator.

:func:`build_factors` evaluates every factor of a :class:`GridState` (priors,
base prior, measurements, an optional marginal prior from a sliding window);
:func:`assemble` accumulates ``H = J^T J`` and ``g = J^T r`` directly into
LAPACK lower-banded storage, with Cauchy weights by iteratively reweighted
least squares; :func:`solve_banded` factorises it with a banded Cholesky.
Variables are time-major by default (half bandwidth ``18 (N + 2)``: no factor
couples nodes more than ``N + 1`` apart), so a batch costs ``O(K N^3)``, linear
in the number of slices ``K``. A short window can instead be ordered
arc-length-major (:func:`arc_major_order`, half bandwidth ``18 (K + 2)``), which
makes its cost linear in ``N``. Linear in ``N`` for the batch is out of reach of
any exact direct solve: the nodes form a ``K x N`` grid graph, whose Cholesky
fill is at best ``O(K N log N)`` with ``O(K N^2)`` flops (nested dissection of
``K / N`` squares); the band here costs ``O(K N^3)``. :func:`gauss_newton`
iterates: each step adds the second-order terms that factors supply
(:func:`newton_step`; the coupled along-s prior's bilinear velocity row, whose
curvature is as large as ``J^T J`` on a bent, fast-moving robot), falls back to
``J^T J`` where that is not positive definite, and is kept downhill on the
cost by a backtracking line search (:func:`backtrack`). The dense reference
used by the benchmark is :func:`dense_normal_equations`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import LinAlgError, cho_solve_banded, cholesky_banded

from shape_sensing.estimators.continuum import factors as fac
from shape_sensing.estimators.continuum import lie
from shape_sensing.estimators.continuum.errors import ContinuumError
from shape_sensing.estimators.continuum.model import DOF, GridState, Measurements, Weights
from shape_sensing.estimators.continuum.tof import strain_factor, tof_factor
from shape_sensing.geometry import FloatArray

__all__ = [
    "DECREMENT_TOL",
    "GNResult",
    "MarginalPrior",
    "along",
    "arc_major_order",
    "assemble",
    "assemble_dense",
    "assign_measurements",
    "backtrack",
    "banded_matvec",
    "banded_to_dense",
    "blas_single_thread",
    "build_factors",
    "dense_normal_equations",
    "factors_cost",
    "gauss_newton",
    "linearise",
    "newton_step",
    "solve_banded",
    "solve_banded_factor",
    "step_converged",
    "unique_pairs",
]

_log = logging.getLogger(__name__)
IntArray = NDArray[np.int64]
_CONTROLLER: Any = None


def blas_single_thread() -> Any:
    """Context limiting BLAS/LAPACK to one thread.

    The banded factorisations here are small; thread hand-offs cost more than
    they gain, and on a loaded machine far more (measured 100x on 2 shared cores).

    threadpoolctl does the limiting where it is installed (``pip install .`` and the pinned venvs have it;
    Debian/Ubuntu ship ``python3-threadpoolctl`` but rosdep has no key for it, so a ROS 2 install may lack it).
    Without it this is a no-op, logged once: set ``OPENBLAS_NUM_THREADS=1`` (or ``OMP_NUM_THREADS=1``) in the
    node's environment instead.
    """
    global _CONTROLLER
    if _CONTROLLER is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _log.info(
                "threadpoolctl is not installed: BLAS threads are not limited to one "
                "(set OPENBLAS_NUM_THREADS=1 for the continuum estimator on a loaded machine)"
            )
            _CONTROLLER = False
        else:
            _CONTROLLER = ThreadpoolController()
    if _CONTROLLER is False:
        return contextlib.nullcontext()
    return _CONTROLLER.limit(limits=1, user_api="blas")


@dataclass
class MarginalPrior:
    """A Gaussian on the first ``n`` nodes of a state, left by marginalising older slices.

    Its cost is ``g^T d + d^T H d / 2`` with ``d`` the 18-per-node local
    difference between the state and the linearisation point (``log(Tbar^-1 T)``
    for poses).

    Attributes:
        T: ``(n, 4, 4)`` linearisation poses.
        eps: ``(n, 6)`` linearisation strains.
        varpi: ``(n, 6)`` linearisation velocities.
        H: ``(18 n, 18 n)`` information.
        g: ``(18 n,)`` gradient at the linearisation point.
    """

    T: FloatArray
    eps: FloatArray
    varpi: FloatArray
    H: FloatArray
    g: FloatArray


@dataclass
class AssignedMeasurements:
    """Measurements mapped to grid cells (flat node pairs and interpolation fractions)."""

    pose_ia: IntArray
    pose_ib: IntArray
    pose_u: FloatArray
    pose_dt: FloatArray
    pose_mat: FloatArray
    gyro_ia: IntArray
    gyro_ib: IntArray
    gyro_u: FloatArray
    gyro_w: FloatArray
    skipped: int = 0
    pose_st: (
        tuple[tuple[IntArray, IntArray, IntArray, IntArray], FloatArray, FloatArray, FloatArray, FloatArray, FloatArray]
        | None
    ) = None
    gyro_st: tuple[tuple[IntArray, IntArray, IntArray, IntArray], FloatArray, FloatArray, FloatArray] | None = None
    #: ToF frames' cells ``(nodes, ut, dt, us, h)`` (one per distinct time and ring), and per point its
    #: frame, ring-frame coordinates and sigma
    tof_cells: (
        tuple[tuple[IntArray, IntArray, IntArray, IntArray], FloatArray, FloatArray, FloatArray, FloatArray] | None
    ) = None
    tof_frame: IntArray | None = None
    tof_q: FloatArray | None = None
    tof_sigma: FloatArray | None = None
    tof_map: Any = None
    #: the ToF points' map candidates kept between evaluations of these points (association reused, see
    #: :class:`~.tof.TofAssociation`); ``None``: the map is queried at every evaluation
    tof_assoc: Any = None
    #: strain readings ``(nodes, ut, us, k, W)``
    strain: (
        tuple[tuple[IntArray, IntArray, IntArray, IntArray], FloatArray, FloatArray, FloatArray, FloatArray] | None
    ) = None


def _node_of(s_nodes: FloatArray, s: FloatArray, what: str) -> tuple[IntArray, FloatArray, NDArray[np.bool_]]:
    """Node index, fraction towards the next node, and whether the arc length is on the node."""
    tol = 1e-6 * max(1.0, float(s_nodes[-1]))
    if np.any(s < s_nodes[0] - tol) or np.any(s > s_nodes[-1] + tol):
        bad = float(s[(s < s_nodes[0] - tol) | (s > s_nodes[-1] + tol)][0])
        raise ContinuumError(f"{what} at arc length {bad} is outside the nodes [{s_nodes[0]}, {s_nodes[-1]}]")
    nearest = np.argmin(np.abs(s[:, None] - s_nodes[None, :]), axis=1) if s.size else np.zeros(0, dtype=np.int64)
    on = np.abs(s_nodes[nearest] - s) <= tol
    n = np.where(on, nearest, np.clip(np.searchsorted(s_nodes, s, side="right") - 1, 0, s_nodes.size - 2))
    den = s_nodes[np.minimum(n + 1, s_nodes.size - 1)] - s_nodes[n]
    u = np.where(on, 0.0, (s - s_nodes[n]) / np.where(den > 0, den, 1.0))
    return n.astype(np.int64), u, on


def assign_measurements(state: GridState, meas: Measurements, first_interval: int = 0) -> AssignedMeasurements:
    """Map measurements with ``t[first_interval] <= t <= t[-1]`` to (interval, fraction) cells.

    A measurement at ``t_k <= tau < t_k+1`` belongs to interval ``k``; one at
    the last slice time to the last interval with ``u = 1``. Measurements
    outside the span are counted in ``skipped``.

    Raises:
        ContinuumError: a measurement's arc length is not on a node.
    """
    t, N = state.t, state.N
    if state.K < 2:
        raise ContinuumError(f"need at least 2 time slices to attach measurements, have {state.K}")

    def cells(tau: FloatArray) -> tuple[NDArray[np.bool_], IntArray, FloatArray, FloatArray]:
        ok = (tau >= t[first_interval]) & (tau <= t[-1])
        k = np.clip(np.searchsorted(t, tau[ok], side="right") - 1, first_interval, state.K - 2)
        dt = t[k + 1] - t[k]
        u = np.clip((tau[ok] - t[k]) / dt, 0.0, 1.0)
        return ok, k.astype(np.int64), u, dt

    okp, kp, up, dtp = cells(meas.pose_t)
    np_, usp, onp = _node_of(state.s, meas.pose_s[okp], "pose measurement")
    okg, kg, ug, _ = cells(meas.gyro_t)
    ng, usg, ong = _node_of(state.s, meas.gyro_s[okg], "gyro reading")
    skipped = int((~okp).sum() + (~okg).sum())
    pose_mat = meas.pose_mat[okp]
    gyro_w = meas.gyro_w[okg]

    def quad(k: IntArray, n: IntArray) -> tuple[IntArray, IntArray, IntArray, IntArray]:
        return (k * N + n, (k + 1) * N + n, k * N + n + 1, (k + 1) * N + n + 1)

    pose_st = None
    if np.any(~onp):
        o = ~onp
        h = state.s[np_[o] + 1] - state.s[np_[o]]
        pose_st = (quad(kp[o], np_[o]), up[o], dtp[o], usp[o], h, pose_mat[o])
    gyro_st = None
    if np.any(~ong):
        o = ~ong
        gyro_st = (quad(kg[o], ng[o]), ug[o], usg[o], gyro_w[o])
    tof_cells = tof_frame = tof_q = tof_sigma = None
    okq, kq, uq, _ = cells(meas.tof_t)
    if meas.tof_map is not None and okq.any():
        sq = meas.tof_s[okq]
        # frames: the distinct (time, arc length) pairs, in that order (within the span, a time has one cell)
        first, tof_frame = unique_pairs(meas.tof_t[okq], sq)
        kf = kq[first]
        nf, usf = _between_nodes(state.s, sq[first], "ToF point")
        hf = state.s[nf + 1] - state.s[nf]
        tof_cells = (quad(kf, nf), uq[first], t[kf + 1] - t[kf], usf, hf)
        tof_q = meas.tof_q[okq]
        tof_sigma = meas.tof_sigma[okq]
    skipped += int((~okq).sum()) if meas.tof_map is not None else 0
    strain = None
    oks, ks, us_t, _ = cells(meas.strain_t)
    if oks.any():
        ns, uss = _between_nodes(state.s, meas.strain_s[oks], "strain reading")
        strain = (quad(ks, ns), us_t, uss, meas.strain_k[oks], meas.strain_w[oks])
    skipped += int((~oks).sum())
    return AssignedMeasurements(
        kp[onp] * N + np_[onp],
        (kp[onp] + 1) * N + np_[onp],
        up[onp],
        dtp[onp],
        pose_mat[onp],
        kg[ong] * N + ng[ong],
        (kg[ong] + 1) * N + ng[ong],
        ug[ong],
        gyro_w[ong],
        skipped,
        pose_st,
        gyro_st,
        tof_cells,
        tof_frame,
        tof_q,
        tof_sigma,
        meas.tof_map,
        strain=strain,
    )


def unique_pairs(a: FloatArray, b: FloatArray) -> tuple[IntArray, IntArray]:
    """The distinct pairs ``(a, b)`` sorted by ``a`` then ``b``: the index of a first occurrence of each, and
    each element's pair number (as ``np.unique(np.column_stack([a, b]), axis=0, return_inverse=True)``, which
    sorts rows as a structured view and costs several times more)."""
    if a.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.lexsort((b, a))
    sa, sb = a[order], b[order]
    new = np.r_[True, (sa[1:] != sa[:-1]) | (sb[1:] != sb[:-1])]
    inverse = np.empty(a.size, dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    return order[new].astype(np.int64), inverse


def _between_nodes(s_nodes: FloatArray, s: FloatArray, what: str) -> tuple[IntArray, FloatArray]:
    """Node ``n`` (at most ``N - 2``) and fraction towards ``n + 1`` of each arc length (1 at the last node)."""
    _node_of(s_nodes, s, what)  # range check
    n = np.clip(np.searchsorted(s_nodes, s, side="right") - 1, 0, s_nodes.size - 2).astype(np.int64)
    u = np.clip((s - s_nodes[n]) / (s_nodes[n + 1] - s_nodes[n]), 0.0, 1.0)
    return n, u


def _grid_pairs(K: int, N: int, slices: range) -> tuple[IntArray, IntArray, IntArray, IntArray]:
    ks = np.asarray(list(slices), dtype=np.int64)
    n = np.arange(N - 1, dtype=np.int64)
    sa = (ks[:, None] * N + n[None, :]).reshape(-1)
    kt = np.arange(K - 1, dtype=np.int64)
    nn = np.arange(N, dtype=np.int64)
    ta = (kt[:, None] * N + nn[None, :]).reshape(-1)
    return sa, sa + 1, ta, ta + N


def build_factors(
    state: GridState,
    w: Weights,
    meas: AssignedMeasurements | None,
    *,
    slice_factors: range | None = None,
    base_slices: range | None = None,
) -> list[fac.FactorBatch]:
    """Evaluate every factor of ``state``.

    Args:
        state: the estimate.
        w: weights.
        meas: measurements assigned to this state's cells, or ``None``.
        slice_factors: slices that get the along-s priors (default: all).
        base_slices: slices that get the base prior (default: all if
            ``w.fixed_base`` else only slice 0).
    """
    K, N = state.K, state.N
    T = state.T.reshape(-1, 4, 4)
    eps = state.eps.reshape(-1, 6)
    varpi = state.varpi.reshape(-1, 6)
    pf = w.prior_factor
    mf = w.measurement_factor
    slices = range(K) if slice_factors is None else slice_factors
    sa, sb, ta, tb = _grid_pairs(K, N, slices)
    hs = np.tile(np.diff(state.s), len(slices))
    dts = np.repeat(np.diff(state.t), N)
    out: list[fac.FactorBatch] = []
    if sa.size:
        out.append(fac.space_prior(T, eps, varpi, sa, sb, hs, pf * w.Q2, pf * w.Q3))
    if ta.size:
        out.append(fac.time_prior(T, varpi, ta, tb, dts, pf * w.Q1))
        out.append(fac.strain_walk(eps, ta, tb, dts, pf * w.Q3))
    for b in out:
        b.cauchy = w.cauchy_prior
        if b.name == "space_prior" and w.cauchy_space is not None:
            b.cauchy = w.cauchy_space
    if base_slices is None:
        base_slices = range(K) if w.fixed_base else range(min(K, 1))
    bi = np.asarray(list(base_slices), dtype=np.int64) * N
    if bi.size:
        out.append(fac.base_prior(T, eps, varpi, bi, w.T0, w.epsilon0, w.varpi0, pf * w.P0, w.cauchy_prior))
    if meas is not None:
        if meas.pose_ia.size:
            out.append(
                fac.pose_factor(
                    T,
                    varpi,
                    meas.pose_ia,
                    meas.pose_ib,
                    meas.pose_u,
                    meas.pose_dt,
                    meas.pose_mat,
                    mf * w.R_pose,
                    w.cauchy_pose,
                )
            )
        if meas.pose_st is not None:
            q, ut, dt_, us, h, Tm = meas.pose_st
            out.append(fac.pose_factor_st(T, eps, varpi, q, ut, dt_, us, h, Tm, mf * w.R_pose, w.cauchy_pose))
        if meas.gyro_st is not None:
            q, ut, us, gw = meas.gyro_st
            kq = q[0] // N
            dtq = state.t[kq + 1] - state.t[kq]
            out.append(fac.gyro_factor_st(T, varpi, q, ut, dtq, us, gw, mf * w.R_gyro, w.cauchy_gyro))
        if meas.tof_cells is not None and meas.tof_map is not None:
            out.append(
                tof_factor(
                    T,
                    eps,
                    varpi,
                    meas.tof_cells,
                    meas.tof_frame,  # type: ignore[arg-type]
                    meas.tof_q,  # type: ignore[arg-type]
                    meas.tof_sigma,  # type: ignore[arg-type]
                    meas.tof_map,
                    sigma_extra=w.tof_sigma_extra,
                    cauchy=w.cauchy_tof,
                    gate=w.tof_gate,
                    assoc=meas.tof_assoc,
                )
            )
        if meas.strain is not None:
            q, ut, us, km, Wm = meas.strain
            out.append(strain_factor(eps, q, ut, us, km, Wm / np.sqrt(mf)))
        if meas.gyro_ia.size:
            kg = meas.gyro_ia // N
            out.append(
                fac.gyro_factor(
                    T,
                    varpi,
                    meas.gyro_ia,
                    meas.gyro_ib,
                    meas.gyro_u,
                    state.t[kg + 1] - state.t[kg],
                    meas.gyro_w,
                    mf * w.R_gyro,
                    w.cauchy_gyro,
                )
            )
    return out


def _prior_terms(state: GridState, prior: MarginalPrior) -> tuple[FloatArray, FloatArray, float]:
    """Hessian, gradient and cost of a marginal prior at ``state`` (on its first nodes)."""
    n = prior.T.shape[0]
    T = state.T.reshape(-1, 4, 4)[:n]
    dT = lie.log(lie.inv(prior.T) @ T)
    d = np.concatenate(
        [dT, state.eps.reshape(-1, 6)[:n] - prior.eps, state.varpi.reshape(-1, 6)[:n] - prior.varpi], axis=1
    )
    J = np.zeros((n, DOF, DOF))
    J[:, :6, :6] = lie.jr_inv(dT)
    J[:, 6:, 6:] = np.eye(12)
    dv = d.reshape(-1)
    grad = prior.g + prior.H @ dv
    cost = float(prior.g @ dv + 0.5 * dv @ prior.H @ dv)
    H4 = prior.H.reshape(n, DOF, n, DOF)
    HJ = np.einsum("aibk,bkl->aibl", H4, J)
    JHJ = np.einsum("aij,aibl->ajbl", J, HJ).reshape(n * DOF, n * DOF)
    gJ = np.einsum("aij,ai->aj", J, grad.reshape(n, DOF)).reshape(-1)
    return JHJ, gJ, cost


def _weights(b: fac.FactorBatch) -> FloatArray:
    if b.cauchy is None:
        return np.ones(b.size)
    sq = np.einsum("md,md->m", b.r, b.r)
    return np.asarray(1.0 / (1.0 + sq / b.cauchy**2))


def _robust_curvature(J: FloatArray, r: FloatArray, wgt: FloatArray, c: float, exact: bool = False) -> FloatArray:
    """The Cauchy loss's own curvature that IRLS's ``w J^T J`` leaves out, for factors inside the loss's bend.

    A factor's cost ``c^2/2 log(1 + |r|^2/c^2)`` has the Hessian ``J^T (w I - 2 w^2/c^2 r r^T) J`` (plus the
    residual's own curvature), ``w = 1/(1 + |r|^2/c^2)``: along ``r`` the curvature is ``w (1 - s)/(1 + s)``,
    ``s = |r|^2/c^2``, below IRLS's ``w``, and negative beyond ``s = 1``. IRLS overstates it, so its steps are
    too short and it converges only linearly (the batch crawled to the 50-iteration cap on robot-2 trials with a
    Cauchy along-s prior, the cost falling by a constant amount per iteration). The rank-one term is returned
    for factors with ``s < 1`` only, where the factor's Hessian stays positive semidefinite; beyond, the IRLS
    weight is kept. Two stronger variants were measured and left out: the term for every factor (clamped at zero
    curvature along ``r`` beyond the bend) from the first iteration gave steps of metres into a worse minimum;
    the same clamp only once the iterations crawl fixed more runs but ended some in worse minima than the
    former solver (slow_free_space s1b0.1r1c1: cost 331.6 at the cap against 311.9 converged).

    With ``exact`` the term is returned for every factor: with it ``w J^T J`` becomes the loss's exact Hessian
    (indefinite beyond the bend), the model :func:`_lm_step` uses.
    """
    sq = np.einsum("md,md->m", r, r)
    beta = 2.0 * wgt**2 / c**2 if exact else np.where(sq < c**2, 2.0 * wgt**2 / c**2, 0.0)
    v = np.einsum("mdi,md->mi", J, r)
    return np.asarray(-beta[:, None, None] * v[:, :, None] * v[:, None, :])


def _cost(b: fac.FactorBatch) -> float:
    if b.cost is not None:
        return b.cost
    sq = np.einsum("md,md->m", b.r, b.r)
    if b.cauchy is None:
        return float(0.5 * sq.sum())
    return float(0.5 * b.cauchy**2 * np.log1p(sq / b.cauchy**2).sum())


_PATTERNS: dict[tuple[int, tuple[int, ...], bytes], tuple[IntArray, NDArray[np.bool_]]] = {}
_PATTERN_BUDGET = 64 * 2**20  # bytes of cached index patterns
_pattern_bytes = 0


def _lower_pattern(var: IntArray, nvar: int) -> tuple[IntArray, NDArray[np.bool_]]:
    """Banded flat indices of the lower-triangle entries of the blocks ``var x var`` (cached: a window repeats them)."""
    key = (nvar, var.shape, var.tobytes())
    hit = _PATTERNS.get(key)
    if hit is not None:
        return hit
    rows = var[:, :, None]
    cols = var[:, None, :]
    diff = rows - cols
    keep = diff >= 0
    out = ((diff * nvar + cols)[keep], keep)
    global _pattern_bytes
    size = out[0].nbytes + out[1].nbytes
    if _pattern_bytes + size > _PATTERN_BUDGET:
        _PATTERNS.clear()
        _pattern_bytes = 0
    if size <= _PATTERN_BUDGET // 4:
        _PATTERNS[key] = out
        _pattern_bytes += size
    return out


def arc_major_order(K: int, N: int) -> IntArray:
    """Position in the system of each flat (time-major) node ``k N + n`` when ordered arc-length-major (``n K + k``).

    In this order a factor coupling neighbouring nodes in time or along s spans
    at most ``K + 1`` positions, so the half bandwidth ``18 (K + 2)`` does not
    depend on ``N`` (a window has few slices): the banded Cholesky costs
    ``O(N K^3)``, linear in ``N``.
    """
    k, n = np.divmod(np.arange(K * N, dtype=np.int64), N)
    return n * K + k


def assemble(
    n_nodes: int,
    N: int,
    batches: list[fac.FactorBatch],
    extra: tuple[FloatArray, FloatArray] | None = None,
    order: IntArray | None = None,
    second_order: bool = False,
    robust_curvature: bool = False,
    exact_robust: bool = False,
) -> tuple[FloatArray, FloatArray, float]:
    """Accumulate ``H`` (lower banded) and ``g`` over factor batches.

    Args:
        n_nodes: number of nodes (variables ``18 n_nodes``).
        N: nodes per slice (sets the smallest bandwidth in time-major order).
        batches: whitened factors.
        extra: a dense ``(H, g)`` on the first variables (a marginal prior; time-major order only).
        order: position in the system of each flat node (default: the flat, time-major order),
            e.g. :func:`arc_major_order`; ``ab`` and ``g`` are then in that order.
        second_order: add the factors' known second-order terms (:attr:`~.factors.FactorBatch.second`)
            to ``J^T J``: a better step, but ``H`` may then be indefinite far from the optimum.
        robust_curvature: (with ``second_order``) add the Cauchy loss's own curvature of the factors inside its
            bend (:func:`_robust_curvature`); with ``exact_robust`` of every factor, which makes ``H`` the exact
            Hessian of the robust cost (indefinite where residuals lie beyond the bend).

    Returns:
        ``ab`` (lower-banded ``H``, as many rows as the widest factor needs), ``g`` and the robust cost.
    """
    nvar = DOF * n_nodes
    if order is not None and extra is not None:
        raise ContinuumError("a dense marginal prior needs the time-major order")
    cost = 0.0
    # Factors on the same node arrays (the time prior and the strain walk) are stacked into one block row each,
    # robust weights folded in as sqrt(w): fewer, larger products and fewer entries to scatter.
    groups: dict[tuple[int, ...], tuple[list[IntArray], list[FloatArray], list[FloatArray], list[FloatArray]]] = {}
    infos: list[tuple[list[IntArray], FloatArray, FloatArray]] = []
    for b in batches:
        if b.size == 0:
            continue
        cost += _cost(b)
        if b.info is not None:
            infos.append((list(b.nodes) if order is None else [order[n] for n in b.nodes], *b.info))
            continue
        J = np.concatenate(b.jac, axis=2)  # (M, d, 18 S)
        r = b.r
        S2 = b.second if second_order else None
        if b.cauchy is not None:
            wgt = _weights(b)
            if second_order and robust_curvature:
                rc = _robust_curvature(J, r, wgt, b.cauchy, exact_robust)
                S2 = rc if S2 is None else S2 * wgt[:, None, None] + rc
                wgt_applied = True
            else:
                wgt_applied = False
            sw = np.sqrt(wgt)
            J = J * sw[:, None, None]
            r = r * sw[:, None]
            if S2 is not None and not wgt_applied:
                S2 = S2 * wgt[:, None, None]
        key = tuple(id(n) for n in b.nodes)
        hit = groups.get(key)
        if hit is None:
            groups[key] = (list(b.nodes), [J], [r], [] if S2 is None else [S2])
        else:
            hit[1].append(J)
            hit[2].append(r)
            if S2 is not None:
                hit[3].append(S2)
    stacked = []
    for nodes, Js, rs, Ss in groups.values():
        if order is not None:
            nodes = [order[n] for n in nodes]
        J = Js[0] if len(Js) == 1 else np.concatenate(Js, axis=1)
        r = rs[0] if len(rs) == 1 else np.concatenate(rs, axis=1)
        stacked.append((nodes, J, r, sum(Ss[1:], Ss[0]) if Ss else None))
    off = 0 if order is not None else (N if extra is None else max(N, extra[1].size // DOF - 1))
    for nodes, _, _, _ in [*stacked, *((n, None, None, None) for n, _, _ in infos)]:
        if len(nodes) > 1:
            st = np.stack(nodes)
            off = max(off, int((st.max(axis=0) - st.min(axis=0)).max()))
    bw = DOF * (off + 1)
    flat: list[IntArray] = []
    vals: list[FloatArray] = []
    gidx: list[IntArray] = []
    gval: list[FloatArray] = []
    p = np.arange(DOF)
    for nodes, J, r, S2 in stacked:
        var = np.concatenate([n[:, None] * DOF + p[None, :] for n in nodes], axis=1)  # (M, 18 S)
        Jt = np.swapaxes(J, 1, 2)
        blk = Jt @ J
        if S2 is not None:
            blk = blk + S2
        gidx.append(var.reshape(-1))
        gval.append((Jt @ r[:, :, None]).reshape(-1))
        fl, keep = _lower_pattern(var, nvar)
        flat.append(fl)
        vals.append(blk[keep])
    for nodes, A, bv in infos:
        var = np.concatenate([n[:, None] * DOF + p[None, :] for n in nodes], axis=1)
        gidx.append(var.reshape(-1))
        gval.append(bv.reshape(-1))
        fl, keep = _lower_pattern(var, nvar)
        flat.append(fl)
        vals.append(A[keep])
    if extra is not None:
        He, ge = extra
        m = ge.size
        gidx.append(np.arange(m))
        gval.append(ge)
        rows, cols = np.tril_indices(m)
        flat.append((rows - cols) * nvar + cols)
        vals.append(He[rows, cols])
    g = np.bincount(np.concatenate(gidx), weights=np.concatenate(gval), minlength=nvar) if gidx else np.zeros(nvar)
    allf = np.concatenate(flat) if flat else np.zeros(0, dtype=np.int64)
    if allf.size and allf.max() >= bw * nvar:
        raise ContinuumError("a factor couples nodes farther apart than the band allows")
    ab = np.bincount(allf, weights=np.concatenate(vals) if vals else None, minlength=bw * nvar).reshape(bw, nvar)
    return np.asarray(ab, dtype=np.float64), np.asarray(g, dtype=np.float64), cost


def assemble_dense(
    n_nodes: int, batches: list[fac.FactorBatch], extra: tuple[FloatArray, FloatArray] | None = None
) -> tuple[FloatArray, FloatArray]:
    """Dense ``H`` and ``g`` of a few nodes (used to marginalise one slice; not for the full problem)."""
    nvar = DOF * n_nodes
    flat: list[IntArray] = []
    vals: list[FloatArray] = []
    gidx: list[IntArray] = []
    gval: list[FloatArray] = []
    p = np.arange(DOF)
    for b in batches:
        if b.size == 0:
            continue
        var = np.concatenate([n[:, None] * DOF + p[None, :] for n in b.nodes], axis=1)
        flat.append((var[:, :, None] * nvar + var[:, None, :]).reshape(-1))
        gidx.append(var.reshape(-1))
        if b.info is not None:
            vals.append(b.info[0].reshape(-1))
            gval.append(b.info[1].reshape(-1))
            continue
        wgt = _weights(b)
        J = np.concatenate(b.jac, axis=2)
        Jt = np.swapaxes(J, 1, 2) * wgt[:, None, None]
        vals.append((Jt @ J).reshape(-1))
        gval.append((Jt @ b.r[:, :, None]).reshape(-1))
    H: FloatArray = np.bincount(np.concatenate(flat), np.concatenate(vals), minlength=nvar * nvar).astype(np.float64)
    H = H.reshape(nvar, nvar)
    g: FloatArray = np.bincount(np.concatenate(gidx), np.concatenate(gval), minlength=nvar).astype(np.float64)
    if extra is not None:
        He, ge = extra
        m = ge.size
        H[:m, :m] += He
        g[:m] += ge
    return H, g


def solve_banded(ab: FloatArray, g: FloatArray, damping: float = 0.0) -> FloatArray:
    """Solve ``H dx = -g`` by banded Cholesky (adds ``damping`` to the diagonal; retries damped if not PD)."""
    return solve_banded_factor(ab, g, damping)[0]


def solve_banded_factor(ab: FloatArray, g: FloatArray, damping: float = 0.0) -> tuple[FloatArray, FloatArray | None]:
    """:func:`solve_banded`, also returning the lower banded Cholesky factor of ``H`` itself.

    The factor (LAPACK lower band storage, ``L[j + d, j] = cb[d, j]``) is ``None`` when the solve had to
    damp the system: it would then be the factor of a different matrix. Pass it to
    :func:`~.covariance.node_covariances` to take covariances without factorising ``H`` again.
    """
    lam = damping
    for _ in range(8):
        a = ab.copy()
        if lam > 0:
            a[0] += lam * np.maximum(ab[0], 1e-12)
        try:
            cb = cholesky_banded(a, lower=True, check_finite=False, overwrite_ab=True)
            dx = np.asarray(cho_solve_banded((cb, True), -g, check_finite=False))
            return dx, (cb if lam == 0 else None)
        except LinAlgError:
            lam = max(1e-9, lam * 100)
            _log.debug("system not positive definite, damping %g", lam)
    raise ContinuumError("Gauss-Newton system is not positive definite even with damping")


def newton_step(
    n_nodes: int,
    N: int,
    batches: list[fac.FactorBatch],
    extra: tuple[FloatArray, FloatArray] | None = None,
    order: IntArray | None = None,
    *,
    second_order: bool = True,
    dense: bool = False,
    robust_curvature: bool = False,
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray | None]:
    """Assemble and solve one step: ``(ab, g, dx, factor)`` (factor ``None`` when damped or dense).

    With ``second_order`` the factors' known second-order terms join ``J^T J`` (a Newton step where the
    factors know their curvature); if that matrix is not positive definite, as can happen far from the
    optimum, the step falls back to plain Gauss-Newton, so ``dx`` is always a descent direction.
    """
    if second_order and any(b.second is not None or (robust_curvature and b.cauchy is not None) for b in batches):
        ab, g, _ = assemble(n_nodes, N, batches, extra, order, second_order=True, robust_curvature=robust_curvature)
        if dense:
            try:
                np.linalg.cholesky(banded_to_dense(ab))
                return ab, g, dense_normal_equations(ab, g), None
            except np.linalg.LinAlgError:
                pass
        else:
            try:
                cb = cholesky_banded(ab, lower=True, check_finite=False)
                return ab, g, np.asarray(cho_solve_banded((cb, True), -g, check_finite=False)), cb
            except LinAlgError:
                _log.debug("second-order system not positive definite: Gauss-Newton step")
    ab, g, _ = assemble(n_nodes, N, batches, extra, order)
    if dense:
        return ab, g, dense_normal_equations(ab, g), None
    dx, cb = solve_banded_factor(ab, g)
    return ab, g, dx, cb


def banded_to_dense(ab: FloatArray) -> FloatArray:
    """Dense symmetric matrix from lower-banded storage."""
    bw, n = ab.shape
    d, j = np.nonzero(np.ones((bw, n), dtype=bool))
    ok = j + d < n
    d, j = d[ok], j[ok]
    H = np.zeros((n, n))
    H[j + d, j] = ab[d, j]
    H[j, j + d] = ab[d, j]
    return H


def dense_normal_equations(ab: FloatArray, g: FloatArray) -> FloatArray:
    """Reference dense solve of ``H dx = -g`` (for benchmarks only)."""
    return np.asarray(np.linalg.solve(banded_to_dense(ab), -g))


#: Default of the second stopping test: the step's squared length in the metric of the normal matrix
#: ``H`` (``dx^T H dx = -g^T dx``, the Newton decrement squared). Below 1e-4, the step moved every
#: linear function ``u^T x`` of the state by less than 1 % of its (Laplace) posterior standard deviation
#: ``sqrt(u^T H^-1 u)`` (Cauchy-Schwarz in the ``H`` metric): statistically, nothing is left to gain.
#: It ends the long linear tails Gauss-Newton shows on these problems, where the largest step entry
#: (mixing metres, radians and rates) keeps shrinking by a constant factor. The metric is the model's
#: own: scaling the priors (``prior_factor``) or robust weights scale it too, so the 1 % is relative to
#: the model's stated uncertainty, not to the true one.
DECREMENT_TOL = 1e-4


def step_converged(dx: FloatArray, g: FloatArray, tol: float, decrement_tol: float | None) -> bool:
    """Whether a Gauss-Newton step ``dx`` (solving ``H dx = -g``) is small enough to stop."""
    if float(np.abs(dx).max()) < tol:
        return True
    return decrement_tol is not None and float(-(g @ dx)) < decrement_tol


@dataclass
class GNResult:
    """Outcome of :func:`gauss_newton`."""

    state: GridState
    iterations: int
    converged: bool
    cost: float
    costs: list[float] = field(default_factory=list)
    ab: FloatArray | None = None
    #: why it stopped: "converged", "no descent" (no step along the last direction lowered the cost) or
    #: "iteration cap"
    stop: str = "converged"
    #: steps lengthened by the line search's extrapolation (see :func:`backtrack`)
    expanded: int = 0


def gauss_newton(
    state: GridState,
    w: Weights,
    meas: AssignedMeasurements | None,
    *,
    prior: MarginalPrior | None = None,
    max_iterations: int = 20,
    tol: float = 1e-6,
    dense: bool = False,
    slice_factors: range | None = None,
    base_slices: range | None = None,
    decrement_tol: float | None = DECREMENT_TOL,
    second_order: bool = True,
    progress: Callable[[int], None] | None = None,
    robust_curvature: bool = False,
    extrapolate: bool = False,
    trust_region: bool = True,
) -> GNResult:
    """Iterate Gauss-Newton (IRLS for robust factors) from ``state`` (``progress(iteration)`` after each).

    Each step is :func:`newton_step` (``second_order``: with the factors' known
    second-order terms where that system is positive definite) followed by
    :func:`backtrack` on the cost. Stops when the step's largest entry falls
    below ``tol``, or when its squared length in the metric of the system
    matrix, ``dx^T H dx``, falls below ``decrement_tol`` (see
    :data:`DECREMENT_TOL`; ``None`` turns that test off); a converged or last
    step is taken whole. With ``dense`` the system is solved densely (the
    benchmark's reference). ``ab`` of the result is the last system matrix:
    its inverse is the Laplace covariance.

    Where it crawls (robot-2 trials with a Cauchy along-s prior: the former solver left 40 of 216 runs at the
    50-iteration cap, the cost falling by a near-constant amount per iteration, and needs up to 400 on some), the
    cause is the Cauchy loss: beyond its bend the loss's curvature is negative, which IRLS's ``w J^T J`` states
    as positive, so along the step the cost is up to 70 times flatter than the system says (measured by finite
    differences on ``slow_free_space``). With ``trust_region`` (the default) the iterations are the former
    solver's until both (a) a full step has lowered the cost by more than ``EXPAND_GAIN`` times the model's
    prediction (the crawl) and (b) the set of robust factors beyond the bend has settled (a step moves at most
    ``SETTLED`` of them across it). From then on each iteration is :func:`_lm_step`: Levenberg-Marquardt on the
    exact robust Hessian (:func:`_robust_curvature` with ``exact``), damped in the metric of the system matrix
    itself. The stopping tests and the result's ``ab`` stay those of the system matrix, so "converged" means
    what it meant; where no damping lowers the cost, that system's step with the line search is taken. Started
    earlier, while the bend's set still changes, the same iteration ran into other local minima than the former
    solver's (fast_contact s0.01b0.01r1c1: 982.54 against 982.73); started once it has settled it reaches the
    former solver's own minimum (to its stopping accuracy) in fewer iterations.

    Five of the 216 benchmark runs still end at the 50-iteration cap (slow_free_space s0.1b0.1r1c1, s0.1b0.1r4c1,
    s0.001b0.1r4c1, s0.01b0.01r1c3, s0.01b0.01r4c3; none with the weights ``eval-continuum`` uses, which converge in
    at most 40). Given more, they converge after 118, 239, 108 and 362 iterations, except s0.01b0.01r1c3, whose cost
    still falls after 600 (4381 at 50, 3794 at 600) with the estimate changing in slices 222-244 of 301 only. On
    s0.1b0.1r1c1 every Levenberg-Marquardt iteration takes a step (``lam`` 0.08-1.6: the exact Hessian is indefinite
    along the steps, ``dx^T H dx / dx^T M dx`` down to -0.3), 0-3 of some 250 factors cross the bend per step and
    consecutive steps are often nearly parallel (cosine 0.9-0.99). Along a step the cost follows the residuals
    linearised with the Cauchy loss kept exact to 1e-3 up to 8 times the step, while the quadratic model is off by
    half at the step itself: the valley is the loss's, not the kinematics'. Measured ways down it faster all changed
    the minimum of runs that converge today, because two of them (slow_free_space s0.01b0.01r1c1 at 925.94,
    s0.1b0.01r1c1 at 815.05, where the former solver also ends, after 85 and 143 iterations) sit beside lower minima
    (918.00, 814.89; a test keeps the first): lengthening steps with a gain ratio of 0.9 or more by doublings up to
    8 times (s0.1b0.1r1c1 in 73 iterations, s0.001b0.1r4c1 in 89), and up to 2 or 8 further Levenberg-Marquardt
    steps per iteration on that linearised robust model (s0.1b0.1r1c1 in 52 or 25). Only steps lengthened when
    nearly parallel to the previous one (cosine above 0.95) kept every minimum, but they saved 4 % of the iterations
    of the 103 of 216 runs that reach the trust region (2087 to 2010, 3 % more CPU) and left all five at the cap; a
    faster decrease of ``lam`` (by up to 10 instead of 3 per step) was slower.

    Two further switches, off by default, are an earlier attempt kept for the ToF localisation
    (:data:`~.tof_localise.TOF_SOLVER`), whose figures were taken with them: ``extrapolate`` lets the line
    search lengthen a full step whose decrease shows the cost is much flatter along it than the model says
    (:func:`backtrack`), and ``robust_curvature`` then (from the first such step on) adds the Cauchy loss's own
    curvature of the factors inside its bend to the system (:func:`_robust_curvature`). They fix some crawls but
    leave others at the cap, and lead some solves into other minima than the former solver's
    (slow_free_space s0.01b0.1r1c1: 475.1 after 146 iterations against the former solver's 476.07 after 52).
    Every step, in every mode, is accepted only on a decrease of the true (robust, re-matched) cost.
    """
    with blas_single_thread():
        return _gauss_newton(
            state, w, meas, prior, max_iterations, tol, dense, slice_factors, base_slices, decrement_tol, second_order,
            progress, robust_curvature, extrapolate, trust_region,
        )  # fmt: skip


def _gauss_newton(
    state: GridState,
    w: Weights,
    meas: AssignedMeasurements | None,
    prior: MarginalPrior | None,
    max_iterations: int,
    tol: float,
    dense: bool,
    slice_factors: range | None,
    base_slices: range | None,
    decrement_tol: float | None,
    second_order: bool,
    progress: Callable[[int], None] | None = None,
    robust_curvature: bool = False,
    extrapolate: bool = False,
    trust_region: bool = False,
) -> GNResult:
    costs: list[float] = []
    n_nodes = state.K * state.N
    converged = False
    it = 0
    ab: FloatArray | None = None

    def evaluate(st: GridState) -> tuple[float, Linearisation]:
        return linearise(st, w, meas, prior=prior, slice_factors=slice_factors, base_slices=base_slices)

    cost, (batches, extra) = evaluate(state)
    stop = "iteration cap"
    expanded = 0
    # the Cauchy curvature joins the system (robust_curvature) and the trust region takes over (trust_region) only
    # once a full step has shown the crawl (a decrease well beyond the model's prediction), the latter also only
    # once the set of factors beyond the bend has settled: until then every step is the former solver's
    crawling = False
    lam = LM_INITIAL
    beyond = _beyond_bend(batches)
    settled = False
    while it < max_iterations:
        it += 1
        if progress is not None:
            progress(it)
        # the last step is taken unchecked: plain Gauss-Newton there, which cannot overshoot the way a
        # Newton step from far away can
        newton = second_order and it < max_iterations
        ab, g, dx, _ = newton_step(
            n_nodes, state.N, batches, extra, second_order=newton, dense=dense,
            robust_curvature=robust_curvature and crawling,
        )  # fmt: skip
        costs.append(cost)
        if step_converged(dx, g, tol, decrement_tol):
            state = state.retract(dx)
            converged = True
            stop = "converged"
            break
        lm = trust_region and crawling and settled and second_order and not dense and beyond.size > 0
        if it == max_iterations and not lm:
            state = state.retract(dx)
            break
        if lm:
            H, _, _ = assemble(
                n_nodes, state.N, batches, extra, second_order=True, robust_curvature=True, exact_robust=True
            )
            out = _lm_step(state, H, ab, g, cost, lam, evaluate)
            if out is not None:
                state, cost, (batches, extra), lam = out
                beyond = _beyond_bend(batches)
                continue
            lam = LM_INITIAL
        moved, c, payload, alpha = backtrack(along(state, dx), float(g @ dx), cost, evaluate, extrapolate=extrapolate)
        if alpha == 0.0:  # no step along dx lowers the cost: stay at the last linearisation
            stop = "no descent"
            break
        expanded += int(alpha > 1.0)
        crawling |= alpha >= 1.0 and cost - c > EXPAND_GAIN * 0.5 * -float(g @ dx)
        state, cost, (batches, extra) = moved, c, payload
        now = _beyond_bend(batches)
        if now.shape == beyond.shape:
            settled |= int((now != beyond).sum()) <= SETTLED * now.size
        beyond = now
    return GNResult(state, it, converged, costs[-1] if costs else 0.0, costs, ab, stop, expanded)


#: :func:`_lm_step`: the damping a crawling solve starts from (in units of the system matrix), the gain ratio a
#: step needs to be taken, the damping a rejected undamped step restarts from, below which damping is dropped,
#: and the most trials per linearisation.
LM_INITIAL = 1.0
LM_ACCEPT = 1e-4
LM_RESTART = 1e-4
LM_FLOOR = 1e-7
LM_TRIALS = 12


#: The iterations count as settled (the set of robust factors beyond the Cauchy bend stable) once a step changes
#: the side of at most this fraction of them.
SETTLED = 0.01


def _beyond_bend(batches: list[fac.FactorBatch]) -> NDArray[np.bool_]:
    """Which robust factors (in batch order) have their residual beyond the Cauchy bend, ``|r| > c``."""
    out = [np.einsum("md,md->m", b.r, b.r) > b.cauchy**2 for b in batches if b.cauchy is not None and b.size]
    return np.concatenate(out) if out else np.zeros(0, dtype=bool)


def banded_matvec(ab: FloatArray, v: FloatArray) -> FloatArray:
    """``H v`` for a symmetric ``H`` in LAPACK lower banded storage (``H[j + d, j] = ab[d, j]``)."""
    bw, n = ab.shape
    y = ab[0] * v
    for d in range(1, bw):
        y[d:] += ab[d, : n - d] * v[: n - d]
        y[: n - d] += ab[d, : n - d] * v[d:]
    return y


def _lm_step(
    state: GridState,
    H: FloatArray,
    M: FloatArray,
    g: FloatArray,
    cost: float,
    lam: float,
    evaluate: Callable[[GridState], tuple[float, Linearisation]],
) -> tuple[GridState, float, Linearisation, float] | None:
    """One Levenberg-Marquardt iteration on the exact robust Hessian ``H``, damped in the metric ``M``.

    Solves ``(H + lam M) dx = -g`` (``H`` and ``M`` lower banded, ``M`` the positive definite system matrix of
    :func:`newton_step`, which exceeds ``H`` by the positive semidefinite Cauchy terms wherever both hold the same
    second-order terms; the step falls back to plain Gauss-Newton where they are not positive definite): a trust
    region ``dx^T M dx <= Delta^2`` in the Laplace metric, from the pure Newton step on the exact Hessian
    (``lam = 0``) to a short step along ``-M^-1 g`` (large ``lam``). The step is taken when the cost falls by at
    least ``LM_ACCEPT`` times what the quadratic model on ``H`` predicts; ``lam`` is then scaled by Nielsen's
    ``max(1/3, 1 - (2 rho - 1)^3)`` (``rho`` the gain ratio), and on a rejection (or a system that is not
    positive definite) doubled with a growing factor, up to ``LM_TRIALS`` tries.

    Returns:
        The new state, its cost and linearisation and the next ``lam``; ``None`` when no try lowered the cost.
    """
    nu = 2.0
    width = M.shape[0]
    for _ in range(LM_TRIALS):
        a = H.copy() if H.shape[0] >= width else np.zeros((width, H.shape[1]))
        if H.shape[0] < width:
            a[: H.shape[0]] = H
        a[:width] += lam * M
        try:
            cb = cholesky_banded(a, lower=True, check_finite=False, overwrite_ab=True)
        except LinAlgError:
            lam, nu = max(LM_RESTART, lam * nu), 2.0 * nu
            continue
        dx = np.asarray(cho_solve_banded((cb, True), -g, check_finite=False))
        pred = -float(g @ dx) - 0.5 * float(dx @ banded_matvec(H, dx))
        cand = state.retract(dx)
        c, payload = evaluate(cand)
        rho = (cost - c) / pred if pred > 0 else -1.0
        _log.debug("LM lam %g predicted %g actual %g", lam, pred, cost - c)
        if rho > LM_ACCEPT:
            lam *= max(1.0 / 3.0, 1.0 - (2.0 * rho - 1.0) ** 3)
            return cand, c, payload, (0.0 if lam < LM_FLOOR else lam)
        lam, nu = max(LM_RESTART, lam * nu), 2.0 * nu
    return None


#: Sufficient decrease of :func:`backtrack` (Armijo's constant) and its most halvings of a step.
ARMIJO = 1e-4
MAX_HALVINGS = 10
#: :func:`backtrack`'s extrapolation: a full step is lengthened when its decrease exceeds this multiple of the
#: quadratic model's prediction, by doublings up to this factor.
EXPAND_GAIN = 1.5
MAX_EXPANSION = 64.0

_P = TypeVar("_P")
_X = TypeVar("_X")


def along(state: GridState, dx: FloatArray) -> Callable[[float], GridState]:
    """The states ``alpha -> state.retract(alpha dx)`` on a step (for :func:`backtrack`)."""
    return lambda alpha: state.retract(alpha * dx)


#: The factors evaluated at a state, and a dense marginal prior's ``(H, g)`` on its first nodes (or ``None``).
Linearisation = tuple[list[fac.FactorBatch], tuple[FloatArray, FloatArray] | None]


def linearise(
    state: GridState,
    w: Weights,
    meas: AssignedMeasurements | None,
    *,
    prior: MarginalPrior | None = None,
    extra_factors: list[fac.FactorBatch] | None = None,
    slice_factors: range | None = None,
    base_slices: range | None = None,
) -> tuple[float, Linearisation]:
    """Every factor of ``state`` (plus ``extra_factors``, e.g. a chain marginal prior) and the cost there."""
    batches = build_factors(state, w, meas, slice_factors=slice_factors, base_slices=base_slices)
    batches += extra_factors or []
    if prior is None:
        return factors_cost(batches), (batches, None)
    Hp, gp, pc = _prior_terms(state, prior)
    return factors_cost(batches) + pc, (batches, (Hp, gp))


def factors_cost(batches: list[fac.FactorBatch]) -> float:
    """Cost (robust where a factor has a loss) of evaluated factors: what :func:`assemble` returns."""
    return float(sum(_cost(b) for b in batches if b.size))


def backtrack(
    move: Callable[[float], _X],
    slope: float,
    cost: float,
    evaluate: Callable[[_X], tuple[float, _P]],
    *,
    extrapolate: bool = False,
) -> tuple[_X, float, _P, float]:
    """Backtracking line search: ``move(alpha)`` for the first ``alpha = 1, 1/2, ...`` that decreases the cost.

    Takes the first ``alpha`` with ``cost(alpha) <= cost + ARMIJO alpha slope`` (Armijo) among ``1, 1/2,
    ..., 2^-MAX_HALVINGS``. ``slope = g^T dx`` is the directional derivative of the cost along the step; a
    Gauss-Newton or positive-definite Newton step has ``slope < 0``, so a short enough step decreases the
    cost. ``evaluate`` returns the cost at a state and whatever it built to get it (the factors), returned
    for the accepted state so that the next linearisation reuses it: a full step costs nothing extra.

    With ``extrapolate``, a full step that lowers the cost by more than ``EXPAND_GAIN`` times the quadratic
    model's prediction ``-slope / 2`` (exact for a Newton step ``H dx = -g``: the cost is then at most half as
    curved along the step as the model says, as where IRLS weights overstate a robust loss's curvature) is
    lengthened: ``alpha = 2, 4, ...`` (at most ``MAX_EXPANSION``) as long as each lowers the cost further; the
    lowest is taken. Where the model is right (near a minimum, a step's decrease is its prediction) nothing is
    tried beyond ``alpha = 1``, so a solve that converged with full steps takes the same steps.

    Returns:
        The accepted state, its cost, what ``evaluate`` built there, and ``alpha``; ``alpha = 0`` (and the
        last state tried) when no step length satisfied the condition: the caller keeps its state.
    """
    alpha = 1.0
    if extrapolate and slope < 0:
        cand = move(1.0)
        c, payload = evaluate(cand)
        if cost - c > EXPAND_GAIN * 0.5 * -slope:
            best = (cand, c, payload, 1.0)
            a = 2.0
            while a <= MAX_EXPANSION:
                nxt = move(a)
                cn, pn = evaluate(nxt)
                if not cn < best[1]:
                    break
                best = (nxt, cn, pn, a)
                a *= 2.0
            return best
        if c <= cost + ARMIJO * slope + 1e-12 * max(1.0, abs(cost)):
            return cand, c, payload, 1.0
        alpha = 0.5
    # near the optimum the change of the cost drowns in its rounding: a step that does not raise the cost by
    # more than that passes (else converging iterations would stop at a step that merely ties)
    rounding = 1e-12 * max(1.0, abs(cost))
    for _ in range(MAX_HALVINGS + (1 if alpha == 1.0 else 0)):
        cand = move(alpha)
        c, payload = evaluate(cand)
        if c <= cost + ARMIJO * alpha * slope + rounding:
            return cand, c, payload, alpha
        alpha *= 0.5
    return cand, c, payload, 0.0
