"""Collision localisation (seed 004): cap, buckling model, the paper's filter and PathRecon, the simulator."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from shape_sensing.config import ConfigError
from shape_sensing.demos.vine_collision import score_core
from shape_sensing.drivers.contact_cap import (
    CapHeading,
    ContactCap,
    contact_angle_from_cap,
    heading_from_quaternion,
    switch_angles,
)
from shape_sensing.estimators.collision_pivot import (
    SCHEMA,
    CollisionPivotConfig,
    CollisionPivotEstimator,
    CollisionSample,
    PaperPivotFilter,
    PathRecon,
    buckling_max_contact_angle,
    free_length,
    transverse_force,
)
from shape_sensing.pipelines.vine_collision import CollisionTracker
from shape_sensing.sim.bno055_sim import SimBNO055
from shape_sensing.sim.i2c_bus import SimI2CBus
from shape_sensing.sim.tca9548a_sim import SimTCA9548A
from shape_sensing.sim.vine_collision import SensorFaults, VineCollisionSim, single_course, three_course

# -- contact cap ------------------------------------------------------------------


def test_switches_are_ten_degrees_apart_and_the_angle_is_their_mean() -> None:
    a = switch_angles(19, math.pi)
    assert np.allclose(np.degrees(np.diff(a)), 10.0) and a[9] == pytest.approx(0.0)
    cap = ContactCap(19, math.pi, hold_time=0.15)
    r = cap.update(0, (1 << 11) | (1 << 12))  # switches at +20 and +30 deg
    assert r.in_contact and not r.held and math.degrees(r.contact_angle) == pytest.approx(25.0)
    assert math.degrees(contact_angle_from_cap(r.contact_angle)) == pytest.approx(65.0)


def test_the_hold_bridges_a_brief_loss_only() -> None:
    cap = ContactCap(19, math.pi, hold_time=0.15)
    first = cap.update(0, 1 << 3)
    held = cap.update(100_000_000, 0)
    assert held.in_contact and held.held and held.contact_angle == first.contact_angle
    assert held.held_for == pytest.approx(0.1)
    lost = cap.update(160_000_000, 0)
    assert not lost.in_contact and not lost.held
    cap.update(200_000_000, 1 << 25)  # a bit above n_switches: wiring fault, ignored
    assert cap.stray_bits == 1
    with pytest.raises(ConfigError, match="parameter 'hold_time' = -1"):
        ContactCap(19, math.pi, hold_time=-1)
    with pytest.raises(ConfigError, match="parameter 'sensing_arc'"):
        switch_angles(19, 0.0)


def test_heading_is_the_yaw_of_the_bno055_read_through_the_driver() -> None:
    bus = SimI2CBus()
    mux = SimTCA9548A(0x71, "cap mux")
    bus.host.attach(mux)
    chip = SimBNO055(0x28, "cap")
    mux.channels[5].attach(chip)
    reader = CapHeading(bus, 0x28, sleep=bus.sleep, mux_address=0x71, mux_channel=5)
    for yaw in (-2.5, -0.3, 0.0, 0.7, 3.0):
        q = Rotation.from_euler("ZYX", [yaw, 0.05, -0.02]).as_quat()
        chip.set_motion(q)
        _, _, heading = reader.read()
        assert heading == pytest.approx(Rotation.from_quat(q).as_euler("ZYX")[0], abs=3e-4)
        assert heading_from_quaternion(q) == pytest.approx(yaw, abs=1e-9)
        bus.write_byte(0x71, 0x00)  # someone closed the mux: the next read selects it again


# -- model equations ----------------------------------------------------------------


def test_eq1_reproduces_the_papers_slenderness_bound() -> None:
    # Sec. III-C: for 170 deg obstacles (contact angle 80 deg) R/L_free must be 0.08 or lower, i.e.
    # L_free >= 43.75 cm for R = 3.5 cm; the default friction (0.095) is the one that makes this exact.
    assert math.degrees(buckling_max_contact_angle(0.4375, 0.035, 0.095)) == pytest.approx(80.0, abs=0.05)
    assert math.degrees(buckling_max_contact_angle(0.35, 0.035, 0.095)) < 80.0  # 35 cm: violated
    # frictionless: theta_max = 90 deg - atan(R / L)
    assert buckling_max_contact_angle(1.0, 0.1, 0.0) == pytest.approx(math.pi / 2 - math.atan(0.1))
    assert buckling_max_contact_angle(0.001, 0.035, 0.5) == 0.0


def test_eq3_and_eq7_invert_the_moment_balance() -> None:
    p, r, l_free, theta = 12_000.0, 0.035, 0.62, math.radians(55)
    f_tr = math.pi * p * r**3 / l_free  # Eq. 2
    f_n = f_tr / math.cos(theta)
    assert transverse_force(f_n, theta) == pytest.approx(f_tr)
    assert free_length(p, r, transverse_force(f_n, theta)) == pytest.approx(l_free)
    assert free_length(p, r, 0.0) == math.inf


def _reference_kf(zs: list[float], dt: float, eps: float, k1: float, k2: float) -> list[float]:
    """Eq. 8-9 with numpy matrices, straight from the paper (predictor form, C = I)."""
    A = np.array([[1.0, dt], [0.0, eps]])
    Rv = np.diag([k1, k2])
    x, P = np.zeros(2), Rv.copy()
    zh: list[float] = []
    dh: list[float] = []
    out, prev = [], None
    for z in zs:
        d = 0.0 if prev is None else (z - prev) / dt
        prev = z
        zh, dh = (zh + [z])[-10:], (dh + [d])[-10:]
        Rw = np.diag([max(np.var(zh, ddof=1) if len(zh) > 1 else 0.0, 1e-6),
                      max(np.var(dh, ddof=1) if len(dh) > 1 else 0.0, 1e-6)])  # fmt: skip
        L = A @ P @ np.linalg.inv(Rw + P)
        x = A @ x + L @ (np.array([z, d]) - x)
        P = (A - L) @ P @ (A - L).T + Rv + L @ Rw @ L.T
        out.append(x[0])
    return out


def test_paper_filter_matches_a_matrix_implementation_of_eq8() -> None:
    rng = np.random.default_rng(0)
    zs = list(55.0 + rng.normal(0, 3.0, 200))  # cm
    kf = PaperPivotFilter(eps=0.1, k1=0.1, k2=1.0, unit=1.0)
    ours = [kf.update(z, 0.02)[0] for z in zs]
    assert np.allclose(ours, _reference_kf(zs, 0.02, 0.1, 0.1, 1.0), rtol=1e-9, atol=1e-9)
    assert np.std(ours[50:]) < 0.5 * np.std(zs[50:])  # it smooths


def _reference_pathrecon(lf, lt, th, c) -> np.ndarray:
    """Algorithm 1 as printed (offline, with the look-ahead at isContact[i+1]); axes as in the module."""
    p_prev, l_prev = np.zeros(2), 0.0
    v_prev = np.array([math.cos(th[0]), math.sin(th[0])])
    out = []
    for i in range(len(lt)):
        v = np.array([math.cos(th[i]), math.sin(th[i])])
        if c[i]:
            tip = p_prev + (lt[i] - lf[i] - l_prev) * v_prev + lf[i] * v
            if i <= len(lt) - 2 and not c[i + 1]:
                p_prev, l_prev = tip, lt[i]
        else:
            tip = p_prev + (lt[i] - l_prev) * v
            v_prev = v
        out.append(tip)
    return np.asarray(out)


def test_online_pathrecon_equals_algorithm_1() -> None:
    rng = np.random.default_rng(2)
    n = 400
    lt = np.cumsum(rng.uniform(0.001, 0.01, n))
    c = (np.sin(np.arange(n) / 23.0) > 0.3) & (rng.random(n) > 0.1)
    lf = np.where(c, lt * rng.uniform(0.3, 0.9, n), 0.0)
    th = np.cumsum(rng.normal(0, 0.02, n))
    recon = PathRecon()
    ours = np.array([recon.step(lt[i], lf[i], th[i], bool(c[i]))[0] for i in range(n)])
    assert np.allclose(ours, _reference_pathrecon(lf, lt, th, c), atol=1e-12)


# -- simulator ------------------------------------------------------------------


def test_simulator_geometry_follows_the_pivot_kinematics() -> None:
    course = single_course(150.0, 0.55)
    sim = VineCollisionSim(course, SensorFaults.clean(), rate=50.0)
    samples = list(sim.run())
    contact = [s for s in samples if s.in_contact]
    assert contact, "the tip never touched the obstacle"
    first = contact[0]
    assert math.degrees(first.contact_angle) == pytest.approx(60.0, abs=1.0)  # 150 - 90 deg at first touch
    assert first.pivot_length == pytest.approx(0.5)  # the pivot post
    for s in contact[::10]:
        assert np.linalg.norm(s.tip - s.pivot) == pytest.approx(s.length - s.pivot_length, abs=1e-9)
        assert abs(s.cap_angle) == pytest.approx(math.pi / 2 - s.contact_angle, abs=1e-9)
    assert all(b.contact_angle <= a.contact_angle + 1e-9 for a, b in itertools.pairwise(contact))  # turns into it
    after = samples[-1]
    assert not after.in_contact and len(after.body) == 4  # base, post, exit corner, tip


def test_three_course_pivots_about_the_previous_corner() -> None:
    samples = list(VineCollisionSim(three_course(), SensorFaults.clean()).run())
    starts = [s for a, s in itertools.pairwise(samples) if s.in_contact and not a.in_contact]
    assert len(starts) == 3
    assert starts[0].pivot_length == 0.0  # about the base
    assert starts[1].pivot_length > 1.0 and starts[2].pivot_length > starts[1].pivot_length
    assert all(s.buckling_met for s in samples)


# -- estimators ------------------------------------------------------------------


def _filters(faults: SensorFaults) -> dict[str, CollisionPivotConfig]:
    base = CollisionPivotConfig(pressure_drop_per_metre=faults.pressure_drop_per_metre,
                                heading_drift_per_metre=faults.heading_drift_per_metre)  # fmt: skip
    return {"paper": CollisionPivotConfig(**{**base.__dict__, "filter": "paper"}), "improved": base}


def test_clean_data_localises_the_tip_to_a_fraction_of_a_percent() -> None:
    m = score_core(three_course(), SensorFaults.clean(), 0, _filters(SensorFaults.clean()))
    assert m["improved"]["tip_error_max_pct_of_length"] < 0.5
    assert abs(m["improved"]["pivot_error_mean_cm"]) < 2.0
    assert m["paper"]["tip_error_max_pct_of_length"] < 1.5


def test_paper_biases_appear_and_the_improved_filter_removes_them() -> None:
    faults = SensorFaults()
    m = score_core(three_course(), faults, 0, _filters(faults))
    # the paper's finding: the pivot is underestimated (tip pressure below the sensed one, contact dropouts)
    assert m["paper"]["pivot_error_mean_cm"] < -5.0
    assert m["paper"]["tip_error_max_pct_of_length"] < 5.0  # its reported bound still holds
    assert m["improved"]["tip_error_max_pct_of_length"] <= 0.5 * m["paper"]["tip_error_max_pct_of_length"]
    assert abs(m["improved"]["pivot_error_mean_cm"]) < 0.5 * abs(m["paper"]["pivot_error_mean_cm"])


def test_buckling_violation_is_counted_and_reported() -> None:
    # 170 deg at 35 cm: L_free below 43.75 cm, the paper's own bound
    course = single_course(170.0, 0.35)
    sim = VineCollisionSim(course, SensorFaults.clean())
    assert not all(s.buckling_met for s in sim.run())
    tracker = CollisionTracker({"heading_drift_per_metre": 0.0, "pressure_drop_per_metre": 0.0})
    cap = ContactCap()
    for s in VineCollisionSim(course, SensorFaults.clean()).run():
        ns = 10**9 + round(s.t * 1e9)
        r = cap.update(ns, s.cap_mask)
        tracker.push_cap(ns, r.in_contact, r.in_contact and not r.held, r.contact_angle)
        tracker.push_pressure(ns, s.pressure_measured)
        tracker.push_force(ns, s.force_measured)
        tracker.push_heading(ns, s.heading_measured)
        tracker.push_length(ns, s.length_measured)
    est = tracker.estimators["collision"]
    assert est.counts["buckling_violations"] > 0
    diag = tracker.diagnostics("collision", tracker.last_length_ns)
    assert diag[1].level == 1 and "violated the transverse buckling condition" in diag[1].message


def test_stale_force_is_a_missing_measurement_and_is_reported() -> None:
    tracker = CollisionTracker({})
    tracker.push_pressure(0, 10_000.0)
    tracker.push_heading(0, 0.0)
    tracker.push_cap(0, True, True, 0.3)
    tracker.push_force(0, 2.0)
    tracker.push_length(10_000_000, 1.0)
    n0 = tracker.estimators["collision"].counts["measurements"]
    tracker.push_cap(900_000_000, True, True, 0.3)  # cap fresh, force last seen at 0: stale after 0.25 s
    tracker.push_pressure(900_000_000, 10_000.0)
    out = tracker.push_length(900_000_000, 1.01)["collision"]
    assert tracker.estimators["collision"].counts["measurements"] == n0 and not out.measurement_used
    diag = tracker.diagnostics("collision", 900_000_000)
    assert diag[0].level == 1 and "wrench" in diag[0].message and diag[0].values["wrench_stale_steps"] == "1"
    assert tracker.push_length(800_000_000, 1.02) == {} and tracker.out_of_order == 1
    assert tracker.push_length(950_000_000, float("nan")) == {} and tracker.bad_samples == 1


def test_bad_estimator_config_names_the_parameter() -> None:
    with pytest.raises(ConfigError, match=r"parameter 'filter' = 'kalman': expected string in \['paper', 'improved'\]"):
        SCHEMA.validate({"filter": "kalman"})
    with pytest.raises(ConfigError, match=r"parameter 'eps' = 0.0"):
        SCHEMA.validate({"eps": 0.0})
    with pytest.raises(ConfigError, match="parameter 'moving_average'"):
        SCHEMA.validate({"moving_average": 0})
    with pytest.raises(ConfigError, match=r"improvements \['magic'\]"):
        CollisionPivotEstimator(CollisionPivotConfig(improvements=("magic",)))


def test_estimator_outputs_events_for_contact_and_pivots() -> None:
    est = CollisionPivotEstimator(CollisionPivotConfig())
    kinds = []
    for k in range(60):
        live = 10 <= k < 30
        s = CollisionSample(k * 20_000_000, 0.5 + 0.01 * k, 10_000.0, 4.0 if live else 0.0, 0.5, live, live, 0.1)
        kinds += [e.kind for e in est.update(s).events]
    assert kinds == [0, 1, 3, 2]  # contact start, contact end with a candidate pivot, the pivot fixed
    assert est.pivot_index == 1


def test_paper_filter_underestimates_farther_pivots_more_as_the_paper_found() -> None:
    # Sec. IV-B: a systematic underestimation of the pivot, larger for pivots placed farther away
    faults = SensorFaults()
    filters = _filters(faults)
    near, far = [], []
    for k, angle in enumerate((130.0, 150.0, 170.0)):
        near.append(score_core(single_course(angle, 0.35), faults, k, filters))
        far.append(score_core(single_course(angle, 0.75), faults, 10 + k, filters))
    paper_near = np.mean([m["paper"]["pivot_error_mean_cm"] for m in near])
    paper_far = np.mean([m["paper"]["pivot_error_mean_cm"] for m in far])
    assert paper_near < -2.0 and paper_far < paper_near - 3.0
    improved = [abs(m["improved"]["pivot_error_mean_cm"]) for m in near + far]
    assert max(improved) < 5.0 and np.mean(improved) < 0.3 * abs(paper_far)
