"""Convergence of the batch solver: the trust region on the exact Cauchy Hessian, the Cauchy loss's curvature and the
extrapolating line search.

The former solver (IRLS Gauss-Newton/Newton with a backtracking line search) is the same code with
``trust_region=False``; the tests compare the two on the same problems. ``PREVIOUS`` is the extrapolating line
search with the Cauchy curvature inside the bend, which the ToF localisation keeps.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from shape_sensing.estimators.continuum import lie
from shape_sensing.estimators.continuum import solver as sv
from shape_sensing.estimators.continuum.errors import ContinuumError
from shape_sensing.estimators.continuum.estimator import BatchEstimator
from shape_sensing.estimators.continuum.model import GridState, Weights, straight_state
from shape_sensing.estimators.continuum.solver import (
    _lm_step,
    _robust_curvature,
    assign_measurements,
    backtrack,
    banded_matvec,
    banded_to_dense,
    gauss_newton,
)
from shape_sensing.estimators.continuum.synthetic import bending_strain, sample_measurements

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT.parent / "shared" / "datasets" / "space_time_continuum"
needs_data = pytest.mark.skipif(not DATASET.is_dir(), reason="shared dataset not present")
OLD = {"trust_region": False}
PREVIOUS = {"robust_curvature": True, "extrapolate": True, "trust_region": False}

#: How far apart the two solvers' answers may be, and how far the new one may be from the exact minimum:
#: ``d^T H d`` in the metric of the Laplace information ``H``, 0.1 posterior standard deviations (every linear
#: function of the state then within 10 % of its posterior standard deviation, by Cauchy-Schwarz in ``H``).
#: Both solvers stop by ``dx^T H dx < DECREMENT_TOL``, 0.01 standard deviations, but in the metric of the
#: system each solves: IRLS's ``H`` overstates the curvature of robust factors, so the former solver stops
#: farther from the minimum than that. Measured: synthetic robot with a Cauchy along-s prior of scale 1, the
#: former answer 0.10 sd from the minimum, the new one 0.042, the two 0.060 apart; fast_contact (5 s,
#: s0.01b1r4c1) the new one 0.093 sd, the former one at its cap 0.77. Without robust along-s priors all are below
#: 0.02 sd. The tests also require the change to be no larger than the former answer's own distance to the
#: minimum, and the new answer to be closer to it.
SAME_ANSWER = 0.1**2
#: The former solver's own stopping error, measured: on the synthetic robot with a Cauchy along-s prior of scale 1
#: it stops 0.10 sd from the minimum (``d^T H d = 0.0103``) and the trust-region solver 0.025 sd (0.0006), so
#: their answers lie 0.125 sd apart: the same minimum, reached more closely. Comparisons with the former answer
#: allow this much.
FORMER_STOP = 0.15**2
#: Tight tolerances giving the minimum itself (the reference the answers are compared with).
TIGHT = {"tol": 1e-12, "decrement_tol": 1e-14}


def _banded_matvec(ab: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``H v`` for ``H`` in LAPACK lower banded storage (``H[j + d, j] = ab[d, j]``)."""
    bw, n = ab.shape
    y = ab[0] * v
    for d in range(1, bw):
        y[d:] += ab[d, : n - d] * v[: n - d]
        y[: n - d] += ab[d, : n - d] * v[d:]
    return y


def _difference(a: GridState, b: GridState) -> np.ndarray:
    """The 18-per-node local difference ``[log(Ta^-1 Tb), eps_b - eps_a, varpi_b - varpi_a]``, time-major."""
    Ta, Tb = a.T.reshape(-1, 4, 4), b.T.reshape(-1, 4, 4)
    d = np.concatenate(
        [lie.log(lie.inv(Ta) @ Tb), (b.eps - a.eps).reshape(-1, 6), (b.varpi - a.varpi).reshape(-1, 6)], axis=1
    )
    return d.reshape(-1)


def _h_distance(res_a: sv.GNResult, res_b: sv.GNResult) -> float:
    """``d^T H d`` of the two answers in the metric of the second's last system (its Laplace information)."""
    assert res_b.ab is not None
    d = _difference(res_a.state, res_b.state)
    return float(d @ _banded_matvec(res_b.ab, d))


def test_robust_curvature_is_the_cauchy_hessian_inside_the_bend() -> None:
    """For linear residuals r = A x + b the cost c^2/2 log(1 + |r|^2/c^2) has the Hessian w A^T A + the returned
    term (finite differences of its gradient), for residuals inside the bend (|r| < c); beyond, nothing is added."""
    rng = np.random.default_rng(4)
    c = 1.5
    A = rng.standard_normal((4, 7))
    b = rng.standard_normal(4)

    def grad(x: np.ndarray) -> np.ndarray:
        r = A @ x + b
        return (A.T @ r) / (1.0 + r @ r / c**2)

    for scale in (0.2, 0.7, 0.95):  # |r| / c inside the bend (A has full row rank: any r is reachable)
        u = rng.standard_normal(4)
        x = np.linalg.lstsq(A, scale * c * u / np.linalg.norm(u) - b, rcond=None)[0]
        r = A @ x + b
        assert abs(np.linalg.norm(r) - scale * c) < 1e-9
        w = 1.0 / (1.0 + r @ r / c**2)
        H = w * A.T @ A + _robust_curvature(A[None], r[None], np.array([w]), c)[0]
        h = 1e-6
        fd = np.column_stack([(grad(x + h * e) - grad(x - h * e)) / (2 * h) for e in np.eye(7)])
        np.testing.assert_allclose(H, fd, atol=1e-7, rtol=1e-6)
    far = np.full(4, 2.0 * c)  # beyond the bend: the IRLS weight alone
    assert not np.any(_robust_curvature(A[None], far[None], np.array([0.2]), c))


def test_exact_robust_curvature_is_the_cauchy_hessian_everywhere() -> None:
    """With ``exact`` the term makes w A^T A the Cauchy cost's full Hessian (finite differences of its gradient)
    inside and beyond the bend, where it has a negative eigenvalue along A^T r."""
    rng = np.random.default_rng(5)
    c = 0.8
    A = rng.standard_normal((3, 5))
    b = rng.standard_normal(3)

    def grad(x: np.ndarray) -> np.ndarray:
        r = A @ x + b
        return (A.T @ r) / (1.0 + r @ r / c**2)

    for scale in (0.3, 1.0, 1.7, 4.0):
        u = rng.standard_normal(3)
        x = np.linalg.lstsq(A, scale * c * u / np.linalg.norm(u) - b, rcond=None)[0]
        r = A @ x + b
        w = 1.0 / (1.0 + r @ r / c**2)
        H = w * A.T @ A + _robust_curvature(A[None], r[None], np.array([w]), c, exact=True)[0]
        h = 1e-6
        fd = np.column_stack([(grad(x + h * e) - grad(x - h * e)) / (2 * h) for e in np.eye(5)])
        np.testing.assert_allclose(H, fd, atol=1e-7, rtol=1e-6)
        if scale > 1.0:  # beyond the bend the loss curves down along A^T r
            v = A.T @ r
            assert v @ H @ v < 0


def test_banded_matvec_is_the_dense_product() -> None:
    rng = np.random.default_rng(6)
    ab = rng.standard_normal((4, 11))
    v = rng.standard_normal(11)
    np.testing.assert_allclose(banded_matvec(ab, v), banded_to_dense(ab) @ v, rtol=1e-12, atol=1e-12)


class _Vec:
    """A point of R^n with the ``retract`` the trust-region step calls."""

    def __init__(self, x: np.ndarray) -> None:
        self.x = x

    def retract(self, dx: np.ndarray) -> _Vec:
        return _Vec(self.x + dx)


def _dense_to_banded(A: np.ndarray) -> np.ndarray:
    n = A.shape[0]
    ab = np.zeros((n, n))
    for d in range(n):
        ab[d, : n - d] = np.diagonal(A, -d)
    return ab


def test_trust_region_step_on_a_quadratic_is_newtons_and_on_an_indefinite_model_still_descends() -> None:
    """On a quadratic cost whose Hessian is the model, the undamped step lands on the minimiser -A^-1 b and the
    damping is dropped (gain ratio 1); with damping it is the damped system's solution. With an indefinite model
    (as the exact Cauchy Hessian is beyond the bend) the step is damped until the system is positive definite and
    is taken only where the true cost falls; if no damping lowers the cost, nothing is taken."""
    rng = np.random.default_rng(7)
    Q = rng.standard_normal((6, 6))
    A = Q @ Q.T + 6 * np.eye(6)
    b = rng.standard_normal(6)

    def f(v: _Vec) -> tuple[float, list[object]]:
        return float(0.5 * v.x @ A @ v.x + b @ v.x), []

    x0 = _Vec(np.zeros(6))
    Hb = _dense_to_banded(A)
    out = _lm_step(x0, Hb, 2 * Hb, b, 0.0, 0.0, f)  # type: ignore[arg-type]
    assert out is not None
    np.testing.assert_allclose(out[0].x, -np.linalg.solve(A, b), rtol=1e-10)
    assert out[3] == 0.0
    out = _lm_step(x0, Hb, 2 * Hb, b, 0.0, 1.0, f)  # type: ignore[arg-type]
    assert out is not None
    np.testing.assert_allclose(out[0].x, -np.linalg.solve(3 * A, b), rtol=1e-10)
    # indefinite model of the same cost: the undamped system is not positive definite
    Hneg = A - 1.5 * np.linalg.eigvalsh(A).max() * np.outer(np.eye(6)[0], np.eye(6)[0])
    assert np.linalg.eigvalsh(Hneg).min() < 0
    out = _lm_step(x0, _dense_to_banded(Hneg), 2 * Hb, b, 0.0, 0.0, f)  # type: ignore[arg-type]
    assert out is not None and out[1] < 0.0 and out[3] > 0.0
    # a cost that rises in every direction from here: no step is taken
    assert _lm_step(x0, Hb, 2 * Hb, b, 0.0, 0.0, lambda v: (float(v.x @ v.x), [])) is None  # type: ignore[arg-type]


def test_batch_estimator_rejects_unknown_solver_options() -> None:
    w = Weights(P0=[1.0] * 18, Q1=[1.0] * 6, Q2=[1.0] * 6, Q3=[1.0] * 6, R_pose=[1.0] * 6, R_gyro=[1.0] * 3)
    with pytest.raises(ContinuumError, match=r"unknown solver option\(s\) \['damping'\]"):
        BatchEstimator(w, np.linspace(0.0, 0.4, 5), 10.0, solver={"damping": True})


def test_extrapolation_lengthens_only_steps_the_model_overstates() -> None:
    """A step whose cost falls as the quadratic model predicts is taken as it is, with one evaluation; one along
    which the cost is linear is doubled while the cost keeps falling; a too long step is still halved."""
    calls: list[float] = []

    def search(f: object, slope: float = -2.0) -> float:
        calls.clear()

        def evaluate(a: float) -> tuple[float, None]:
            calls.append(a)
            return f(a), None  # type: ignore[operator]

        return backtrack(lambda a: a, slope, 10.0, evaluate, extrapolate=True)[3]

    # the model's own quadratic: minimum at alpha = 1
    assert search(lambda a: 10.0 - 2.0 * a + a * a) == 1.0 and calls == [1.0]
    # linear down to alpha = 8, rising beyond: 1, 2, 4, 8, 16 tried, 8 taken
    assert search(lambda a: 10.0 - 2.0 * min(a, 8.0) + 3.0 * max(a - 8.0, 0.0)) == 8.0 and calls == [1, 2, 4, 8, 16]
    # never beyond MAX_EXPANSION
    assert search(lambda a: 10.0 - 2.0 * a) == sv.MAX_EXPANSION
    # overshooting: minimum at alpha = 0.25 -> halved as before
    assert search(lambda a: 10.0 - 2.0 * a + 4.0 * a * a) == 0.25
    # without extrapolation the same linear cost gives alpha = 1
    assert backtrack(lambda a: a, -2.0, 10.0, lambda a: (10.0 - 2.0 * a, None))[3] == 1.0


def _synthetic(cauchy_space: float | None) -> tuple[GridState, Weights, sv.AssignedMeasurements]:
    s = np.linspace(0.0, 0.4, 5)
    fn = bending_strain(amplitude=3.0, frequency=0.7)
    t = np.arange(0.0, 1.5, 1 / 60) + 0.003
    meas = sample_measurements(
        fn, t, [0.0, 0.4], t, [0.2, 0.4], pose_sigma=(1e-3, 1e-2), gyro_sigma=1e-2, rng=np.random.default_rng(2)
    )
    w = Weights(
        P0=[1e-8] * 6 + [1e-2, 1e-2, 1e-2, 1e2, 1e2, 1e-4] + [1e-2] * 6,
        Q1=[1.0, 1, 1, 10, 10, 10],
        Q2=[1e-4, 1e-4, 1e-4, 1.0, 1.0, 1.0],
        Q3=[1e-2, 1e-2, 1e-2, 10, 10, 10],
        R_pose=[1e-6] * 3 + [1e-4] * 3,
        R_gyro=[1e-4] * 3,
        cauchy_space=cauchy_space,
        cauchy_pose=1.0,
    )
    st = straight_state(np.linspace(0.0, 1.5, 16), s, w.T0, w.epsilon0)
    return st, w, assign_measurements(st, meas)


@pytest.mark.parametrize("cauchy_space", [None, 3.0, 1.0])
def test_where_the_former_solver_converges_the_answer_is_the_same(cauchy_space: float | None) -> None:
    """Synthetic bending robot, Cauchy pose factors (and along-s prior): both solvers converge within the cap, no
    slower with the new one; the new answer is within SAME_ANSWER of the minimum and closer to it than the former
    one, which is within FORMER_STOP of it and of the new answer (both solvers run to tight tolerances: the same
    minimum, to 1e-10)."""
    st, w, am = _synthetic(cauchy_space)
    old = gauss_newton(st, w, am, max_iterations=50, **OLD)  # type: ignore[arg-type]
    new = gauss_newton(st, w, am, max_iterations=50)
    ref = gauss_newton(st, w, am, max_iterations=200, **TIGHT)  # type: ignore[arg-type]
    assert old.converged and new.converged and ref.converged, (old.iterations, new.iterations, ref.iterations)
    assert new.iterations <= old.iterations
    assert _h_distance(old, new) < FORMER_STOP and _h_distance(old, ref) < FORMER_STOP
    assert _h_distance(new, ref) < min(_h_distance(old, ref), SAME_ANSWER)
    if cauchy_space == 3.0:  # the former solver, given the iterations, reaches the same minimum
        ref_old = gauss_newton(st, w, am, max_iterations=200, **TIGHT, **OLD)  # type: ignore[arg-type]
        assert ref_old.converged and _h_distance(ref_old, ref) < 1e-10


def _trial_problem(
    trial_name: str, member: str, seconds: float | None = None
) -> tuple[GridState, Weights, sv.AssignedMeasurements]:
    from shape_sensing.cli.eval_continuum import noise_family
    from shape_sensing.estimators.continuum.estimator import (
        BatchEstimator,
        measurements_from_trial,
        weights_from_trial,
    )
    from shape_sensing.io.space_time_dataset import load_trial

    trial = load_trial(DATASET, trial_name)
    tn = noise_family()[member]
    w = weights_from_trial(trial, tn)
    t0 = trial.config.start_time
    t_end = trial.config.end_time if seconds is None else t0 + seconds
    meas, _ = measurements_from_trial(trial, t0, t_end, tn)
    s = np.linspace(0.0, trial.robot.length, trial.robot.N)
    st = BatchEstimator(w, s, trial.robot.K_per_second).initial_state(t0, t_end)
    return st, w, assign_measurements(st, meas)


@needs_data
def test_recorded_trial_the_former_solver_left_at_its_cap_converges() -> None:
    """fast_contact, noise model s0.01b1r4c1 (Cauchy along-s prior of scale 1), first 5 s: the former solver
    stops at the 50-iteration cap (it needs 85), the new one converges within it, closer to the minimum (the
    new solver run to tight tolerances) and at a lower cost."""
    st, w, am = _trial_problem("fast_contact", "s0.01b1r4c1", 5.0)
    capped = gauss_newton(st, w, am, max_iterations=50, **OLD)  # type: ignore[arg-type]
    new = gauss_newton(st, w, am, max_iterations=50)
    assert not capped.converged and capped.stop == "iteration cap"
    assert new.converged and new.stop == "converged"
    ref = gauss_newton(new.state, w, am, max_iterations=50, **TIGHT)  # type: ignore[arg-type]
    assert ref.converged
    assert _h_distance(new, ref) < SAME_ANSWER and _h_distance(new, ref) < 0.1 * _h_distance(capped, ref)
    assert new.cost < capped.cost


@needs_data
def test_recorded_trial_where_the_former_solver_converged_the_answer_is_the_same() -> None:
    """slow_free_space, noise model s1b0.01r1c1, first 3 s: both converge (12 and 11 iterations measured), the
    answers within SAME_ANSWER."""
    st, w, am = _trial_problem("slow_free_space", "s1b0.01r1c1", 3.0)
    old = gauss_newton(st, w, am, max_iterations=50, **OLD)  # type: ignore[arg-type]
    new = gauss_newton(st, w, am, max_iterations=50)
    assert old.converged and new.converged
    assert new.iterations <= old.iterations
    assert _h_distance(old, new) < SAME_ANSWER


@needs_data
@pytest.mark.parametrize(
    ("member", "former_cap"),
    [
        # the former solver converges only after 52 iterations (so stops at the 50-iteration cap); the new one
        # within the cap (15 measured). The extrapolating solver of before (PREVIOUS) left this run at the cap,
        # on its way to another minimum (475.1 after 146 iterations).
        ("s0.01b0.1r1c1", 80),
        # the former solver converges after 85 iterations (cost 925.94), the new one within the cap (32
        # measured). A lower minimum lies beside it (918.00): longer steps down the valley (a line search
        # lengthening well-predicted steps, or further steps on the linearised robust model) went there.
        ("s0.01b0.01r1c1", 100),
    ],
)
def test_recorded_trial_the_former_solver_needs_over_50_iterations_converges_at_its_minimum(
    member: str, former_cap: int
) -> None:
    """slow_free_space, the whole trial: the new solver converges within the 50-iteration cap at the former
    solver's own minimum (run on to convergence), within SAME_ANSWER of it."""
    st, w, am = _trial_problem("slow_free_space", member)
    former = gauss_newton(st, w, am, max_iterations=former_cap, **OLD)  # type: ignore[arg-type]
    new = gauss_newton(st, w, am, max_iterations=50)
    assert former.converged and former.iterations > 50
    assert new.converged and new.iterations < 50
    assert _h_distance(former, new) < SAME_ANSWER
    assert abs(new.cost - former.cost) < 1e-5 * former.cost


@needs_data
def test_recorded_trial_the_trust_region_waits_for_the_bend_to_settle() -> None:
    """fast_contact, noise model s0.01b0.01r1c1, the whole trial: the former solver converges at its 50th
    iteration (cost 982.735); the new one converges in fewer, to the same minimum. Started at the first crawling
    step, before the set of factors beyond the bend had settled, the trust region went to another minimum
    (982.54), which these asserts would catch."""
    st, w, am = _trial_problem("fast_contact", "s0.01b0.01r1c1")
    former = gauss_newton(st, w, am, max_iterations=50, **OLD)  # type: ignore[arg-type]
    new = gauss_newton(st, w, am, max_iterations=50)
    assert former.converged and new.converged and new.iterations < former.iterations
    assert _h_distance(former, new) < SAME_ANSWER
    assert abs(new.cost - former.cost) < 2e-6 * former.cost
