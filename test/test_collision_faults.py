"""Vine collisions under the faults a real cap meets: burst contact loss, heading drift, a straight body.

The simulator's new faults are checked against their own definitions (the burst fraction and length,
the drift per metre, the body straight from its last pivot); the estimator's pivot hypotheses against
the same course with and without a forced loss of contact; the drift estimate against the
simulator's true drift and against an analytic line fit.
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from shape_sensing.cli import main as cli_main
from shape_sensing.demos.vine_collision import _params, fault_case, score_core
from shape_sensing.drivers.contact_cap import ContactCap
from shape_sensing.estimators.collision_pivot import (
    EVENT_CONTACT_END,
    EVENT_CONTACT_START,
    EVENT_PIVOT_CANDIDATE,
    EVENT_PIVOT_FIXED,
    EVENT_PIVOT_WITHDRAWN,
    IMPROVEMENTS,
    CollisionPivotConfig,
    CollisionPivotEstimator,
    CollisionSample,
)
from shape_sensing.estimators.heading_drift import HeadingDriftEstimator, fit_heading_drift
from shape_sensing.sim.vine_collision import (
    Course,
    SensorFaults,
    VineCollisionSim,
    single_course,
    straight_course,
    three_course,
)

BIAS_AWARE = ("model_pressure_drop", "dropouts_missing", "pivot_events")

# -- simulator ------------------------------------------------------------------


def test_bursts_cover_the_asked_fraction_of_the_contact_time() -> None:
    faults = SensorFaults(burst_fraction=0.15)
    contact = burst = 0
    lengths: list[int] = []
    run = 0
    for seed in range(6):
        for s in VineCollisionSim(three_course(), faults, seed=seed).run():
            contact += s.in_contact
            burst += s.burst
            if s.burst:
                run += 1
            elif run:
                lengths.append(run)
                run = 0
    assert 0.11 < burst / contact < 0.19
    mean_s = np.mean(lengths) / 50.0
    # exponential about 0.3 s clipped to [0.1, 1] s: mean 0.1 + 0.3 (e^{-1/3} - e^{-10/3}) = 0.304 s (a burst cut
    # short by the end of a contact is shorter)
    assert 0.22 < mean_s < 0.34
    assert max(lengths) / 50.0 <= 1.0 + 1e-9


def test_a_burst_silences_switches_and_force_and_no_burst_leaves_the_nominal_run_unchanged() -> None:
    with_bursts = list(VineCollisionSim(three_course(), SensorFaults(burst_fraction=0.3), seed=1).run())
    inside = [s for s in with_bursts if s.burst]
    assert inside and all(s.cap_mask == 0 and s.dropout and abs(s.force_measured) < 0.3 for s in inside)
    a = list(VineCollisionSim(three_course(), SensorFaults(), seed=1).run())
    b = list(VineCollisionSim(three_course(), SensorFaults(burst_fraction=0.0, burst_duration=0.7), seed=1).run())
    assert not any(s.burst for s in a)
    assert [s.force_measured for s in a] == [s.force_measured for s in b]


def test_body_is_straight_from_its_last_pivot_and_the_heading_drifts_per_metre() -> None:
    faults = SensorFaults.clean()
    faults.heading_drift_per_metre = math.radians(2.0)
    faults.burst_fraction = 0.15
    sim = VineCollisionSim(three_course(), faults, seed=3)
    for s in sim.run():
        d = s.tip - s.pivot
        # the tip is the body's free length away from the last pivot, along the (true) heading
        assert np.linalg.norm(d) == pytest.approx(s.length - s.pivot_length, abs=1e-9)
        if np.linalg.norm(d) > 1e-6:
            assert math.atan2(d[1], d[0]) == pytest.approx(s.heading, abs=1e-9)
        assert s.heading_measured - s.heading == pytest.approx(sim.true_drift * s.length, abs=1e-12)
    assert sim.true_drift == pytest.approx(math.radians(2.0))  # clean: no spread


def test_bad_burst_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="burst_fraction"):
        SensorFaults(burst_fraction=1.0)
    with pytest.raises(ValueError, match="burst durations"):
        SensorFaults(burst_min=0.5, burst_max=0.2)


# -- pivot hypotheses -------------------------------------------------------------


def _with_gap(course: Course, gap_s: float, config: CollisionPivotConfig,
              at: float = 0.5) -> tuple[float, list[int], CollisionPivotEstimator]:  # fmt: skip
    """Clean course; switches and force silenced for ``gap_s`` centred at ``at`` of its (only) contact."""
    truth = list(VineCollisionSim(course, SensorFaults.clean()).run())
    contact = [i for i, s in enumerate(truth) if s.in_contact]
    mid = round(contact[0] + at * (contact[-1] - contact[0]))
    lo, hi = mid - round(gap_s * 25), mid + round(gap_s * 25)
    cap, est = ContactCap(), CollisionPivotEstimator(config)
    worst, kinds = 0.0, []
    for i, s in enumerate(truth):
        ns = 10**9 + round(s.t * 1e9)
        blank = lo <= i < hi
        r = cap.update(ns, 0 if blank else s.cap_mask)
        o = est.update(CollisionSample(ns, s.length_measured, s.pressure_measured, 0.0 if blank else s.force_measured,
                                       r.contact_angle, r.in_contact, r.in_contact and not r.held,
                                       s.heading_measured))  # fmt: skip
        worst = max(worst, math.dist(o.tip, s.tip))
        kinds += [e.kind for e in o.events]
    return worst, kinds, est


def test_a_contact_gap_opens_a_candidate_that_renewed_contact_with_the_same_wall_merges_back() -> None:
    course = single_course(150.0, 0.55)
    clean, kinds0, _ = _with_gap(course, 0.0, CollisionPivotConfig(pressure_drop_per_metre=0.0))
    for gap in (1.2, 5.0):  # 3.6 and 15 cm of growth unseen, against contact_gap = 2 cm
        worst, kinds, est = _with_gap(course, gap, CollisionPivotConfig(pressure_drop_per_metre=0.0))
        old, _k, old_est = _with_gap(course, gap, CollisionPivotConfig(pressure_drop_per_metre=0.0,
                                                                       improvements=BIAS_AWARE))  # fmt: skip
        # the contact: start, gap -> end + candidate, renewed on the same wall -> withdrawn; then the wall's end
        assert kinds[:4] == [EVENT_CONTACT_START, EVENT_CONTACT_END, EVENT_PIVOT_CANDIDATE, EVENT_PIVOT_WITHDRAWN]
        assert kinds[4:] == kinds0[1:] == [EVENT_CONTACT_END, EVENT_PIVOT_CANDIDATE, EVENT_PIVOT_FIXED]
        assert est.counts["merged"] == 1 and len(est.recon.pivots) == 2  # the base and the wall's corner
        assert len(old_est.recon.pivots) == 3  # before: a false pivot on the wall, kept
        assert worst < clean + 0.01 and old > 0.1  # cm-level instead of 10-16 cm
        assert worst < 0.2 * old


def test_a_pivot_fixed_by_mistake_is_withdrawn_when_the_collision_puts_the_pivot_behind_it() -> None:
    # turning never noticed (heading noise set huge) and a short confirmation: the candidate is fixed wrongly
    # during the gap; the renewed contact's force puts the pivot behind it, so it is withdrawn (no clamp)
    cfg = CollisionPivotConfig(pressure_drop_per_metre=0.0, heading_noise=1.0, confirm_length=0.03)
    worst, kinds, est = _with_gap(single_course(150.0, 0.55), 2.0, cfg, at=0.3)
    clamped, _k, _e = _with_gap(single_course(150.0, 0.55), 2.0, CollisionPivotConfig(
        pressure_drop_per_metre=0.0, heading_noise=1.0, confirm_length=0.03,
        improvements=(*BIAS_AWARE, "drift_online")), at=0.3)  # fmt: skip
    assert EVENT_PIVOT_WITHDRAWN in kinds and est.counts["withdrawn"] == 1
    assert kinds.index(EVENT_PIVOT_FIXED) < kinds.index(EVENT_PIVOT_WITHDRAWN)
    assert len(est.recon.pivots) == 2
    # after the withdrawal the tip follows the held pivot again: the error at the end of the course is small
    assert worst < clamped


def test_three_walls_confirm_each_candidate_and_merge_none() -> None:
    m = score_core(three_course(), SensorFaults.clean(), 0, {"improved": CollisionPivotConfig(
        pressure_drop_per_metre=0.0, heading_drift_per_metre=0.0)})["improved"]  # fmt: skip
    assert m["counts"]["pivots"] == 3 and m["counts"]["merged"] == 0 and m["counts"]["withdrawn"] == 0
    assert m["tip_error_max_pct_of_length"] < 0.5


# -- heading drift ------------------------------------------------------------------


def test_line_fit_recovers_a_known_slope_with_the_analytic_sigma() -> None:
    rng = np.random.default_rng(4)
    lengths = np.linspace(0.1, 1.6, 800)
    noise = math.radians(0.5)
    headings = 0.3 + 0.04 * lengths + noise * rng.standard_normal(len(lengths))
    fit = fit_heading_drift(lengths.tolist(), headings.tolist(), noise)
    sxx = float(np.sum((lengths - lengths.mean()) ** 2))
    assert fit.sigma == pytest.approx(noise / math.sqrt(sxx), rel=0.1)
    assert abs(fit.drift_per_metre - 0.04) < 3 * fit.sigma
    assert fit.straight and fit.heading_at_zero == pytest.approx(0.3, abs=0.01)
    assert np.polyfit(lengths, headings, 1)[0] == pytest.approx(fit.drift_per_metre, rel=1e-9)
    bent = fit_heading_drift(lengths.tolist(), (headings + 0.5 * np.sin(4 * lengths)).tolist(), noise)
    assert not bent.straight
    # across +-pi: unwrapped
    wrapped = ((headings + math.pi - 0.31 + math.pi) % (2 * math.pi) - math.pi).tolist()
    assert fit_heading_drift(lengths.tolist(), wrapped, noise).drift_per_metre == pytest.approx(
        fit.drift_per_metre, rel=1e-6)  # fmt: skip
    with pytest.raises(ValueError, match="three"):
        fit_heading_drift([0.0, 1.0], [0.0, 0.1])
    with pytest.raises(ValueError, match="finite"):
        fit_heading_drift([0.0, 1.0, math.nan], [0.0, 0.1, 0.2])
    with pytest.raises(ValueError, match="never changed"):
        fit_heading_drift([1.0, 1.0, 1.0], [0.0, 0.1, 0.2])


def test_online_drift_combines_the_prior_and_straight_stretches_and_skips_turning_ones() -> None:
    est = HeadingDriftEstimator(prior=0.0, prior_sigma=math.radians(3.0), heading_noise=0.01)
    for k in range(300):  # a straight stretch of 0.6 m at 0.05 rad/m
        est.add(0.002 * k, 0.05 * 0.002 * k, True)
    est.add(0.6, 0.0, False)
    b, var = est.estimate
    assert est.stretches_used == 1 and abs(b - 0.05) < 3 * math.sqrt(var) and math.sqrt(var) < 0.005
    for k in range(100):  # turning about a pivot while reported free: not straight, left out
        est.add(0.7 + 0.002 * k, 0.5 * math.sin(10 * 0.002 * k), True)
    est.add(1.0, 0.0, False)
    assert est.stretches_rejected == 1 and est.estimate[0] == pytest.approx(b)
    fixed = HeadingDriftEstimator(prior=0.02, prior_sigma=0.0)
    fixed.add(0.0, 0.0, True)
    assert fixed.estimate == (0.02, 0.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_online_drift_matches_the_simulators_true_drift(seed: int) -> None:
    faults, known = fault_case("all")
    assert not known
    m = score_core(three_course(), faults, seed, {"improved": CollisionPivotConfig(**_params(faults, False))})
    r = m["improved"]
    err = r["heading_drift_deg_per_m"] - r["true_heading_drift_deg_per_m"]
    assert abs(err) < max(3 * r["heading_drift_sigma_deg_per_m"], 0.05)
    assert r["heading_drift_sigma_deg_per_m"] < 0.2


# -- targets ------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["bursts", "drift", "all"])
def test_improved_filter_meets_the_target_and_is_never_worse_than_the_paper(case: str) -> None:
    faults, known = fault_case(case)
    params = _params(faults, known)
    filters = {"paper": CollisionPivotConfig(**params, filter="paper"), "improved": CollisionPivotConfig(**params)}
    for seed in range(2):
        m = score_core(three_course(), faults, seed, filters)
        assert m["improved"]["tip_error_max_pct_of_length"] <= 2.5
        assert m["improved"]["tip_error_max_pct_of_length"] <= m["paper"]["tip_error_max_pct_of_length"]


def test_ablation_names_every_improvement() -> None:
    from shape_sensing.demos.vine_collision import ABLATION

    used = set(itertools.chain.from_iterable(subset for _label, subset in ABLATION))
    assert used == set(IMPROVEMENTS)


# -- calibration command --------------------------------------------------------------


def test_calibrate_heading_drift_recovers_the_simulated_drift_from_a_straight_growth_bag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "straight"
    assert cli_main(["demo", "vine-collision", "--course", "straight", "--out", str(out), "--seed", "5",
                     "--json"]) == 0  # fmt: skip
    capsys.readouterr()
    true_drift = VineCollisionSim(straight_course(), SensorFaults(), seed=5).true_drift
    assert cli_main(["calibrate-heading-drift", str(out / "vine-collision.mcap"), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert abs(r["heading_drift_per_metre"] - true_drift) < 3 * r["sigma_per_metre"]
    assert r["straight"] and r["growth_m"] > 1.4 and r["paired"] > 1000
    # a bend is not a calibration: the three-obstacle course's cap heading turns at each wall
    bent = tmp_path / "three"
    assert cli_main(["demo", "vine-collision", "--out", str(bent), "--duration", "40", "--json"]) == 0
    capsys.readouterr()
    assert cli_main(["calibrate-heading-drift", str(bent / "vine-collision.mcap")]) == 1
    assert "not straight" in capsys.readouterr().err
    assert cli_main(["calibrate-heading-drift", str(out / "vine-collision.mcap"), "--namespace", "/other"]) == 2
    assert "0 messages on /other/base/length" in capsys.readouterr().err
    assert cli_main(["calibrate-heading-drift", str(tmp_path / "missing.mcap")]) == 2
