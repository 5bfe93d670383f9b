"""The ToF continuum estimator's Laplace covariance against the kinematic simulator's truth: a guard on a small
Monte Carlo (two short runs of scene S0), not the measurement (``benchmarks/bench_consistency.py``).

The mean ring NEES (position in the world frame and rotation in the body frame, 3 DoF each) must lie in a wide
band, ``[LOW, HIGH]``; the same errors scored with the covariance divided or multiplied by 100 must leave it, so
the band is one a covariance wrong by that much fails.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import chi2

from shape_sensing.demos.consistency_tof import TofNeesRun, ring_nees, tof_continuum_run

pytestmark = pytest.mark.slow

LOW, HIGH = 0.3, 15.0


@pytest.fixture(scope="module")
def runs() -> list[TofNeesRun]:
    return [tof_continuum_run(seed, "S0", 3.0) for seed in range(2)]


def test_ring_nees_of_exact_gaussian_errors_is_chi_square() -> None:
    # independent check of the scoring: errors drawn from the covariance give chi-square(3) (mean 3)
    rng = np.random.default_rng(0)
    A = rng.standard_normal((4000, 3, 3))
    P = A @ np.swapaxes(A, 1, 2) + 0.1 * np.eye(3)
    e = np.einsum("nij,nj->ni", np.linalg.cholesky(P), rng.standard_normal((4000, 3)))
    v = ring_nees(e, P)
    assert float(v.mean()) == pytest.approx(3.0, abs=0.2)
    assert float(np.mean(v < chi2.ppf(0.5, 3))) == pytest.approx(0.5, abs=0.03)


def test_runs_differ_by_their_noise_draws(runs: list[TofNeesRun]) -> None:
    assert runs[0].samples == runs[1].samples > 0
    assert not np.allclose(runs[0].e_pos, runs[1].e_pos)


def test_ring_nees_in_a_wide_band(runs: list[TofNeesRun]) -> None:
    pos = float(np.mean([r.position_nees for r in runs]))
    rot = float(np.mean([r.rotation_nees for r in runs]))
    assert LOW <= pos <= HIGH, [r.position_nees for r in runs]
    assert LOW <= rot <= HIGH, [r.rotation_nees for r in runs]


@pytest.mark.parametrize("scale", [0.01, 100.0])
def test_a_covariance_wrong_by_100_leaves_the_band(runs: list[TofNeesRun], scale: float) -> None:
    pos = float(np.mean([ring_nees(r.e_pos, scale * r.P_pos).mean() for r in runs]))
    rot = float(np.mean([ring_nees(r.e_rot, scale * r.P_rot).mean() for r in runs]))
    assert not LOW <= pos <= HIGH, pos
    assert not LOW <= rot <= HIGH, rot
