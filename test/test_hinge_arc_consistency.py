"""The hinge-arc tip covariance against the simulator's truth: a small Monte Carlo as a guard against regressions.

The measurement is ``benchmarks/bench_consistency.py`` (10 runs per case). Here three runs per case: the mean NEES
must lie in a band four times wider than the 95 % band of three chi-square(3) means on the consistent side and as
wide again on the other (``[0.2, 12]``); before the model error, mounting and heading-reference terms it was 16-370
per run, and an estimate with the covariance dropped to the readings' alone must fail it.
"""

from __future__ import annotations

import numpy as np
import pytest

from shape_sensing.demos.consistency import hinge_arc_run, nees_band

LOW, HIGH = 0.2, 12.0


def test_band_is_the_chi_square_band_of_the_mean() -> None:
    lo, hi = nees_band(10)
    # the mean of 10 chi-square(3) draws is chi-square(30)/10: 95 % between 16.791/10 and 46.979/10 (tables)
    assert lo == pytest.approx(1.6791, abs=1e-3) and hi == pytest.approx(4.6979, abs=1e-3)


@pytest.mark.parametrize(("scenario", "placement", "drop"), [
    ("passive", True, ()),
    ("growth", True, ()),
    ("passive", False, (5, 6, 7)),
])  # fmt: skip
def test_tip_nees_in_a_wide_band(scenario: str, placement: bool, drop: tuple[int, ...]) -> None:
    nees = [hinge_arc_run(seed, scenario, 20.0, placement=placement, drop=drop).nees for seed in range(3)]
    assert LOW <= float(np.mean(nees)) <= HIGH, nees


def test_the_guard_fails_without_the_model_terms() -> None:
    # the covariance of the readings alone (no model error, no mounting or heading reference): far outside
    off = {"bend_location_stddev": 0.0, "first_mount_stddev_deg": 0.0, "heading_reference_stddev_deg": 0.0}
    nees = [hinge_arc_run(seed, "passive", 20.0, placement=False, params=off).nees for seed in range(3)]
    assert float(np.mean(nees)) > HIGH
