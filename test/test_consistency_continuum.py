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


def test_residual_inflation_restores_consistency_through_an_unexplained_burst() -> None:
    """An episode the model does not explain (0.3 s of measurements 5 times noisier than the weights state, as a
    contact force the model lacks) makes the Laplace covariance far too small there: the tip NEES over the burst is
    50-110 (consistent: 3). Scaled by the local a-posteriori variance factor (``residual_inflation``), it comes back
    near 3; on runs without a burst the rule changes the covariance by a few per cent."""
    kw = {"pose_s": (0.0, 0.4), "gyro_s": (0.2,), "seed0": 60}
    raw = np.mean(continuum_nees(2, noise_scale=5.0, burst=(0.4, 0.7), **kw))
    inflated = np.mean(continuum_nees(2, noise_scale=5.0, burst=(0.4, 0.7), inflate=True, **kw))
    assert raw > 25.0 and 0.5 < inflated < 12.0, (raw, inflated)
    clean = np.mean(continuum_nees(2, **kw))
    clean_inflated = np.mean(continuum_nees(2, inflate=True, **kw))
    assert 0.85 * clean < clean_inflated <= clean, (clean, clean_inflated)
