"""Fixed-lag sliding-window continuum estimator with Schur-complement marginalisation.

The window holds the newest ``size`` time slices. Each :meth:`SlidingWindow.step`
adds a slice ``1/rate`` after the newest (initialised by constant-velocity
extrapolation), attaches the measurements that arrived since, and runs a few
Gauss-Newton iterations on the window (banded, with the marginal prior on its
oldest slice; when iterating, with the factors' known second-order terms and
each step but the last kept downhill by a line search, see
:func:`~shape_sensing.estimators.continuum.solver.newton_step` and
:func:`~shape_sensing.estimators.continuum.solver.backtrack`). When the
window is over size, its oldest slice is marginalised at the step's last
linearisation from the factors touching it (its along-s priors, the time priors
to the next slice, the measurements between them, the previous marginal prior).
The oldest slice is then final: it is the fixed-lag smoother output,
``(size - 1) / rate`` seconds behind the newest data.

Two marginalisations (``marginal=``):

* ``"chain"`` (default): the marginal prior is the Markov-in-s projection
  of the exact marginal (see :mod:`~shape_sensing.estimators.continuum.marginal`),
  which couples only neighbouring nodes, and the window's variables are
  ordered arc-length-major whenever that band (half bandwidth
  ``18 (p (size + 1) + 1)`` for a prior of Markov order ``p = band``,
  independent of ``N``) is narrower than the time-major one (``18 (N + 2)``):
  every step costs ``O(N)``.
* ``"exact"``: the Schur complement of the oldest slice's ``18 N`` block,
  a dense ``18 N x 18 N`` prior on the next slice (a dense Cholesky), with
  the window ordered time-major: every step costs ``O(N^3)``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import cho_factor, cho_solve

from shape_sensing.estimators.continuum import lie
from shape_sensing.estimators.continuum.covariance import INFLATION_HALF_WIDTH, node_covariances, slice_residuals
from shape_sensing.estimators.continuum.errors import ContinuumError
from shape_sensing.estimators.continuum.factors import FactorBatch
from shape_sensing.estimators.continuum.marginal import ChainPrior, chain_prior_factor, marginalize_chain
from shape_sensing.estimators.continuum.model import DOF, GridState, Measurements, Weights, straight_state
from shape_sensing.estimators.continuum.solver import (
    DECREMENT_TOL,
    AssignedMeasurements,
    Linearisation,
    MarginalPrior,
    along,
    arc_major_order,
    assemble,
    assemble_dense,
    assign_measurements,
    backtrack,
    blas_single_thread,
    linearise,
    newton_step,
    step_converged,
)
from shape_sensing.estimators.continuum.tof import TofAssociation
from shape_sensing.geometry import FloatArray

__all__ = ["SlidingWindow", "StepInfo", "per_frame_budget"]

#: finalised slices whose residual levels make the reference of the residual inflation (a minute at 10 Hz)
INFLATION_HISTORY = 600

_log = logging.getLogger(__name__)


@dataclass
class StepInfo:
    """What one window step did."""

    t: float
    iterations: int
    converged: bool
    cost: float
    finalized: list[float] = field(default_factory=list)
    #: largest entry of the last update applied to the slice finalised by this step (``None`` if none was)
    final_update: float | None = None


def per_frame_budget(frame: NDArray[np.int64], budget: int) -> NDArray[np.bool_]:
    """Which points to keep so that no frame has more than ``budget``: of a frame's ``n`` points (in their
    order, which is the frame's zone order), ``min(n, budget)`` spread evenly (the ``i``-th kept where
    ``floor(i budget / n)`` steps up)."""
    frame = np.asarray(frame, dtype=np.int64)
    if frame.size == 0 or budget <= 0:
        return np.ones(frame.size, dtype=bool)
    order = np.argsort(frame, kind="stable")
    fs = frame[order]
    starts = np.flatnonzero(np.r_[True, fs[1:] != fs[:-1]])
    counts = np.diff(np.r_[starts, fs.size])
    n = np.repeat(counts, counts)
    rank = np.arange(fs.size) - np.repeat(starts, counts)
    keep_sorted = (n <= budget) | ((rank + 1) * budget // n > rank * budget // n)
    keep = np.empty(frame.size, dtype=bool)
    keep[order] = keep_sorted
    return keep


class SlidingWindow:
    """Online fixed-lag smoother.

    Args:
        weights: noise model.
        s_nodes: arc lengths of the nodes.
        rate: time slices per second.
        t0: time of the first slice.
        size: slices in the window (lag = ``(size - 1) / rate``).
        iterations: Gauss-Newton iterations per step (at most).
        tol: convergence threshold on the largest step entry.
        decrement_tol: or on the step's squared length in the metric of the normal matrix
            (:data:`~shape_sensing.estimators.continuum.solver.DECREMENT_TOL`; ``None``: off).
        init: optional ``(T (N,4,4), eps (N,6), varpi (N,6))`` of the first slice; straight at rest otherwise.
        covariance: keep the Laplace covariance (6x6, right perturbation) of the tip pose of every finalised slice
            (from the step's last system: with the second-order terms if the step converged before its last
            allowed iteration, Gauss-Newton's ``J^T J`` otherwise).
        marginal: ``"chain"`` (banded, linear in the number of nodes) or ``"exact"`` (dense Schur complement).
        band: Markov order along s of the chain marginal prior (nodes coupled at most this far apart).
        second_order: add the factors' known second-order terms to the step's system when
            ``iterations > 1``, where a line search checks each step (Gauss-Newton's ``J^T J`` alone when
            ``False``, at one iteration per step, or where that system is not positive definite). The
            marginal prior is always built from ``J^T J`` (positive semidefinite).
        covariance_nodes: with ``covariance``, also keep the pose covariances of these nodes (indices along s)
            of every finalised slice in :attr:`final_node_cov` (e.g. the ToF rings, for the scene reconstruction).
        reuse_association: keep the ToF points' map candidates between the evaluations of a step and query the
            map again only for points that moved beyond their candidates' slack (:class:`~.tof.TofAssociation`:
            the nearest map point is the same as a fresh query's); ``False`` queries it at every evaluation.
        tof_points_per_frame: at most this many ToF points of each frame enter the solve (spread evenly over
            the frame's valid zones, in zone order); 0: all.
    """

    def __init__(
        self,
        weights: Weights,
        s_nodes: FloatArray,
        rate: float,
        t0: float,
        *,
        size: int = 4,
        iterations: int = 3,
        tol: float = 1e-5,
        decrement_tol: float | None = DECREMENT_TOL,
        init: tuple[FloatArray, FloatArray, FloatArray] | None = None,
        covariance: bool = False,
        marginal: str = "chain",
        band: int = 1,
        second_order: bool = True,
        covariance_nodes: list[int] | None = None,
        reuse_association: bool = True,
        tof_points_per_frame: int = 0,
    ) -> None:
        s_nodes = np.asarray(s_nodes, dtype=np.float64)
        if s_nodes.ndim != 1 or s_nodes.size < 2 or np.any(np.diff(s_nodes) <= 0):
            raise ContinuumError(f"arc-length nodes must be >= 2 increasing values, got {s_nodes.tolist()}")
        if size < 2:
            raise ContinuumError(f"window size must be >= 2 slices, got {size}")
        if not rate > 0:
            raise ContinuumError(f"time-node rate must be > 0, got {rate}")
        if iterations < 1:
            raise ContinuumError(f"iterations must be >= 1, got {iterations}")
        if marginal not in ("chain", "exact"):
            raise ContinuumError(f"marginal must be 'chain' or 'exact', got {marginal!r}")
        if band < 1:
            raise ContinuumError(f"marginal band must be >= 1, got {band}")
        if tof_points_per_frame < 0:
            raise ContinuumError(f"ToF points per frame must be >= 0 (0: all), got {tof_points_per_frame}")
        self.reuse_association = bool(reuse_association)
        self.tof_points_per_frame = int(tof_points_per_frame)
        #: ToF points looked up in the map and points whose candidates were reused, over all steps
        self.tof_queried = 0
        self.tof_reused = 0
        self.marginal = marginal
        self.band = int(band)
        self.weights = weights
        self.rate = float(rate)
        self.size = int(size)
        self.iterations = int(iterations)
        self.tol = tol
        self.decrement_tol = decrement_tol
        self.second_order = second_order
        st = straight_state(np.array([t0]), s_nodes, weights.T0, weights.epsilon0)
        if init is not None:
            st.T[0], st.eps[0], st.varpi[0] = init
        self.state: GridState = st
        self.prior: MarginalPrior | ChainPrior | None = None
        self.buffer = Measurements()
        self.first_slice_index = 0  # global index of the window's oldest slice
        self.final_t: list[float] = []
        self.final_T: list[FloatArray] = []
        self.final_eps: list[FloatArray] = []
        self.final_varpi: list[FloatArray] = []
        self.final_cov: list[FloatArray] = []
        #: per finalised slice, the factor its covariances are to be scaled by where the measurements disagree with the
        #: model more than usual (:meth:`_inflation`); ``final_cov`` and ``final_node_cov`` are the Laplace ones alone
        self.final_inflation: list[float] = []
        self._residuals: list[tuple[float, float]] = []
        self._levels: list[float] = []
        self.covariance_nodes = [int(n) for n in (covariance_nodes or [])]
        if any(not 0 <= n < s_nodes.size for n in self.covariance_nodes):
            raise ContinuumError(f"covariance nodes {self.covariance_nodes} must be in [0, {s_nodes.size})")
        #: per finalised slice, ``(len(covariance_nodes), 6, 6)`` pose covariances of those nodes
        self.final_node_cov: list[FloatArray] = []
        self.covariance = covariance
        self.steps = 0
        self.converged_steps = 0
        self.total_iterations = 0
        #: per finalised slice, the largest entry of the last Gauss-Newton update it received
        self.final_updates: list[float] = []

    @property
    def t_newest(self) -> float:
        """Time of the newest slice."""
        return float(self.state.t[-1])

    def _base_slices(self, K: int) -> range:
        if self.weights.fixed_base:
            return range(K)
        return range(1) if self.first_slice_index == 0 else range(0)

    def add_measurements(self, meas: Measurements) -> None:
        """Queue measurements (those older than the window's oldest slice are dropped)."""
        t_old = float(self.state.t[0])
        self.buffer = Measurements.concat([self.buffer, meas.between(t_old, np.inf, include_end=True)])

    def step(self, meas: Measurements | None = None) -> StepInfo:
        """Add the next slice, attach queued measurements up to it, solve, and marginalise if over size."""
        if meas is not None:
            self.add_measurements(meas)
        dt = 1.0 / self.rate
        st = self.state
        t_new = float(st.t[-1]) + dt
        T_new = st.T[-1] @ lie.exp(dt * st.varpi[-1])
        self.state = GridState(
            np.append(st.t, t_new),
            st.s,
            np.concatenate([st.T, T_new[None]]),
            np.concatenate([st.eps, st.eps[-1:]]),
            np.concatenate([st.varpi, st.varpi[-1:]]),
        )
        t0 = float(self.state.t[0])
        am = assign_measurements(self.state, self.buffer.between(t0, t_new, include_end=True))
        if self.tof_points_per_frame and am.tof_frame is not None:
            keep = per_frame_budget(am.tof_frame, self.tof_points_per_frame)
            if not keep.all():
                am.tof_frame, am.tof_q, am.tof_sigma = am.tof_frame[keep], am.tof_q[keep], am.tof_sigma[keep]  # type: ignore[index]
        assoc = TofAssociation() if self.reuse_association and am.tof_frame is not None else None
        am.tof_assoc = assoc
        with blas_single_thread():
            info = self._solve(am, t_new)
        if assoc is not None:
            self.tof_queried += assoc.queried
            self.tof_reused += assoc.reused
        return info

    def _solve(self, am: AssignedMeasurements, t_new: float) -> StepInfo:
        """Gauss-Newton on the window; the last linearisation also yields the marginal prior if over size."""
        state = self.state
        N = state.N
        base = self._base_slices(state.K)
        marginalize = self.size < state.K
        chain = self.marginal == "chain"
        # arc-length-major when it gives the narrower band: a factor then spans at most max(p K, K + 1)
        # positions (the prior couples nodes p apart), against N + 1 time-major
        order = arc_major_order(state.K, N) if chain and max(self.band * state.K, state.K + 1) < N + 1 else None
        converged = False
        it = 0
        new_prior: MarginalPrior | ChainPrior | None = None
        final_update: float | None = None
        tip = N - 1 if order is None else int(order[N - 1])

        def evaluate(st: GridState) -> tuple[float, Linearisation]:
            if isinstance(self.prior, ChainPrior):
                nodes0 = np.arange(N, dtype=np.int64)
                chain_f = [chain_prior_factor(st.T[0], st.eps[0], st.varpi[0], nodes0, self.prior)]
                return linearise(st, self.weights, am, extra_factors=chain_f, base_slices=base)
            return linearise(st, self.weights, am, prior=self.prior, base_slices=base)

        # a step with the second-order terms is only taken where a line search can check it: at one
        # iteration per step, far from the optimum (a new, extrapolated slice), it can overshoot where
        # Gauss-Newton's J^T J does not (fast_contact, published weights: 7.0 against 4.5 deg)
        second_order = self.second_order and self.iterations > 1
        cost, (batches, extra) = evaluate(state)
        while it < self.iterations:
            it += 1
            # the last allowed step is taken unchecked: plain Gauss-Newton there
            newton = second_order and it < self.iterations
            ab, g, dx, cb = newton_step(state.K * N, N, batches, extra, order, second_order=newton)
            converged = step_converged(dx, g, self.tol, self.decrement_tol)
            if order is not None:
                dx = dx.reshape(-1, DOF)[order].reshape(-1)
            if converged or it == self.iterations:
                if marginalize:
                    final_update = float(np.abs(dx[: N * DOF]).max())
                    new_prior = self._finish(state, batches, extra, ab, cb, tip)
                state = state.retract(dx)
                break
            # more iterations to come: keep each one downhill (the gradient is in the system's order)
            gf = g if order is None else g.reshape(-1, DOF)[order].reshape(-1)
            moved, c, payload, alpha = backtrack(along(state, dx), float(gf @ dx), cost, evaluate)
            if alpha == 0.0:  # no step lowers the cost: this linearisation is the step's last
                if marginalize:
                    final_update = 0.0
                    new_prior = self._finish(state, batches, extra, ab, cb, tip)
                break
            state, cost, (batches, extra) = moved, c, payload
        self.state = state
        self.steps += 1
        self.converged_steps += int(converged)
        self.total_iterations += it
        info = StepInfo(t_new, it, converged, cost, final_update=final_update)
        if new_prior is not None and final_update is not None:
            info.finalized.append(self._drop_oldest(new_prior))
            self.final_updates.append(final_update)
        return info

    def _finish(
        self,
        state: GridState,
        batches: list[FactorBatch],
        extra: tuple[FloatArray, FloatArray] | None,
        ab: FloatArray,
        cb: FloatArray | None,
        tip: int,
    ) -> MarginalPrior | ChainPrior:
        """At a step's last linearisation: the marginal prior of the oldest slice, and its tip covariance."""
        prior = self._chain(state, batches) if self.marginal == "chain" else self._schur(state, batches, extra)
        if self.covariance:
            self.final_cov.append(node_covariances(ab, [tip], slice(0, 6), factor=cb)[0])
            self.final_inflation.append(self._inflation(state, batches))
            if self.covariance_nodes:
                # slice 0's node n sits at position n (time-major) or n K (arc-length-major, where tip = (N-1) K)
                arc_major = tip != state.N - 1
                at = [n * state.K if arc_major else n for n in self.covariance_nodes]
                self.final_node_cov.append(node_covariances(ab, at, slice(0, 6), factor=cb))
        return prior

    def _inflation(self, state: GridState, batches: list[FactorBatch]) -> float:
        """The residual inflation of the slice being finalised (see
        :func:`~shape_sensing.estimators.continuum.covariance.residual_inflation`), causal: its measurement residuals
        with those of the :data:`~.covariance.INFLATION_HALF_WIDTH` finalised slices before it and the as many
        window slices after it, over the median of that level over the last :data:`INFLATION_HISTORY` finalised
        slices."""
        total, count = slice_residuals(batches, state.K, state.N)
        half = INFLATION_HALF_WIDTH
        self._residuals.append((float(total[0]), float(count[0])))
        before = self._residuals[-half - 1 :]
        t = sum(x for x, _ in before) + float(total[1 : half + 1].sum())
        c = sum(n for _, n in before) + float(count[1 : half + 1].sum())
        if len(self._residuals) > INFLATION_HISTORY:
            del self._residuals[0]
        if c <= 0:
            return 1.0
        level = t / c
        self._levels.append(level)
        if len(self._levels) > INFLATION_HISTORY:
            del self._levels[0]
        ref = float(np.median(self._levels))
        return max(level / ref, 1.0) if ref > 0 else 1.0

    @staticmethod
    def _touching(N: int, batches: list[FactorBatch]) -> list[FactorBatch]:
        """The factors touching slice 0 (flat nodes below ``N``)."""
        touching = []
        for b in batches:
            mask = np.zeros(b.size, dtype=bool)
            for n in b.nodes:
                mask |= n < N
            if mask.any():
                touching.append(b.select(mask))
        return touching

    def _chain(self, state: GridState, batches: list[FactorBatch]) -> ChainPrior:
        """Chain (Markov-in-s) prior on slice 1 from the factors touching slice 0, in ``O(N)``."""
        N = state.N
        ab, g, _ = assemble(2 * N, N, self._touching(N, batches), order=arc_major_order(2, N))
        return marginalize_chain(ab, g, state.T[1], state.eps[1], state.varpi[1], self.band)

    def _schur(
        self, state: GridState, batches: list[FactorBatch], extra: tuple[FloatArray, FloatArray] | None
    ) -> MarginalPrior:
        """Marginal prior on slice 1 from the factors touching slice 0 (Schur complement of slice 0's block)."""
        N = state.N
        H, g = assemble_dense(2 * N, self._touching(N, batches), extra)
        m = N * DOF
        Hmm, Hmr, Hrr = H[:m, :m], H[:m, m:], H[m:, m:]
        cf = cho_factor(Hmm, lower=True, check_finite=False)
        X = cho_solve(cf, np.column_stack([Hmr, g[:m]]), check_finite=False)
        Hn = Hrr - Hmr.T @ X[:, :m]
        gn = g[m:] - Hmr.T @ X[:, m]
        return MarginalPrior(state.T[1].copy(), state.eps[1].copy(), state.varpi[1].copy(), 0.5 * (Hn + Hn.T), gn)

    def _drop_oldest(self, prior: MarginalPrior | ChainPrior) -> float:
        st = self.state
        t0, t1 = float(st.t[0]), float(st.t[1])
        self.prior = prior
        self.final_t.append(t0)
        self.final_T.append(st.T[0].copy())
        self.final_eps.append(st.eps[0].copy())
        self.final_varpi.append(st.varpi[0].copy())
        self.state = GridState(st.t[1:].copy(), st.s, st.T[1:].copy(), st.eps[1:].copy(), st.varpi[1:].copy())
        self.buffer = self.buffer.between(t1, np.inf, include_end=True)
        self.first_slice_index += 1
        return t0

    def finalized(self, include_window: bool = False) -> GridState:
        """The slices already marginalised (fixed-lag output), optionally followed by the current window."""
        t = list(self.final_t)
        T = list(self.final_T)
        e = list(self.final_eps)
        v = list(self.final_varpi)
        if include_window:
            t += list(self.state.t)
            T += list(self.state.T)
            e += list(self.state.eps)
            v += list(self.state.varpi)
        if not t:
            raise ContinuumError("no slice finalised yet")
        return GridState(np.asarray(t), self.state.s.copy(), np.asarray(T), np.asarray(e), np.asarray(v))

    def run(self, meas: Measurements, t_end: float, progress: Callable[[int, int], None] | None = None) -> GridState:
        """Offline replay: feed ``meas`` slice by slice up to ``t_end``; return all slices (marginalised + window).

        Each step receives the measurements in ``[t_newest, t_new)``, so a
        measurement exactly at ``t_end`` is not used. ``progress(done, total)`` after each step.
        """
        dt = 1.0 / self.rate
        n = int(np.ceil((t_end - self.t_newest) / dt - 1e-9))
        for k in range(n):
            t_new = self.t_newest + dt
            self.step(meas.between(self.t_newest, t_new))
            if progress is not None:
                progress(k + 1, n)
        return self.finalized(include_window=True)
