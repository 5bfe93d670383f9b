"""Regression guard on the collision-pivot filter's covariance: a small Monte Carlo on the collision simulator.

Truth is the simulator's pivot length and tip; every fault is on. The band is wide on purpose (a guard, not the
measurement: ``benchmarks/bench_consistency.py`` measures it over more runs).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from shape_sensing.demos.consistency_collision import CUMULATIVE_TERMS, collision_nees, nees_band


@pytest.fixture(scope="module")
def improved() -> dict:
    return collision_nees(2, seed0=100, filters=("improved",))["improved"]


def test_band_is_the_chi_square_mean_band() -> None:
    lo, hi = nees_band(1, 3)
    assert lo == pytest.approx(0.2158, abs=1e-3) and hi == pytest.approx(9.348, abs=1e-3)  # chi2(3) quantiles
    lo, hi = nees_band(400, 2)
    assert lo < 2.0 < hi and hi - lo < 0.6  # the mean of many chi2(2) draws concentrates at 2


def test_improved_pivot_and_tip_nees_stay_in_a_wide_band(improved: dict) -> None:
    pivot = float(np.mean(improved["pivot"]))
    tip = float(np.mean(improved["tip"]["+".join(CUMULATIVE_TERMS[-1])]))
    # consistent: 1 (pivot) and 2 (tip); a covariance 10x too small or too large leaves these
    assert 0.05 < pivot < 10.0, pivot
    assert 0.2 < tip < 20.0, tip


def test_tip_covariance_without_heading_noise_is_overconfident(improved: dict) -> None:
    # the heading's noise swinging the free length is the largest term: leaving it out must show
    partial = improved["tip"]["+".join(CUMULATIVE_TERMS[1])]  # length and pivot only (rank-deficient in free growth)
    full = improved["tip"]["+".join(CUMULATIVE_TERMS[-1])]
    assert all(math.isinf(p) or p > 20 * f for p, f in zip(partial, full, strict=True))
