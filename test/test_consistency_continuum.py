"""Regression guard on the continuum estimator's Laplace tip covariance: a small Monte Carlo on a synthetic robot.

Truth is the synthetic robot's tip; the measurements carry exactly the noise the weights state. Today the covariance
is conservative there (NEES about 0.14 where 3 is consistent: the broad motion prior); the band is wide on purpose,
a guard against a covariance that collapses or explodes, not the measurement (``benchmarks/bench_consistency.py``).
"""

from __future__ import annotations

import numpy as np

from shape_sensing.demos.consistency_continuum import continuum_nees


def test_laplace_tip_nees_stays_in_a_wide_band() -> None:
    runs = continuum_nees(2, seed0=50)
    assert 0.02 < float(np.mean(runs)) < 30.0, runs


def test_tip_nees_grows_when_the_measurements_are_noisier_than_stated() -> None:
    # same seeds, noise 4x what the weights state: the error grows about 4x, the covariance not at all, so the NEES
    # grows by about 16 (at least 5 allowing for the prior's share of the error)
    stated = np.mean(continuum_nees(2, seed0=50))
    noisier = np.mean(continuum_nees(2, seed0=50, noise_scale=4.0))
    assert noisier > 5.0 * stated, (stated, noisier)
