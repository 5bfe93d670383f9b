"""Vine simulator: its physics and its stated sensor error model."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from shape_sensing.sim.vine import VineSimConfig, VineSimulator


def test_drift_rates_average_the_papers_figure() -> None:
    sim = VineSimulator(VineSimConfig(scenario="active", orientation_noise_deg=0.0, duration=600.0))
    # Active steering starts straight and eases in, so compare readings at t=0 and t=1 s to the truth:
    t = 60.0
    measured = Rotation.from_quat([s.orientation for s in sim.imu_samples(t)])
    true = sim.true_sensor_rotations(t)
    drift_deg = np.rad2deg((measured * true.inv()).magnitude())
    assert np.isclose(drift_deg.mean(), 1.33, rtol=1e-6)  # deg after one minute
    assert drift_deg.std() > 0.1  # sensor-dependent, as the paper observed


def test_orientation_noise_has_the_stated_std() -> None:
    cfg = VineSimConfig(scenario="passive", orientation_noise_deg=0.5, drift_deg_per_min=0.0, n_sensors=40)
    sim = VineSimulator(cfg)
    errs = []
    for k in range(50):
        measured = Rotation.from_quat([s.orientation for s in sim.imu_samples(0.01 * k)])
        errs.append((sim.true_sensor_rotations(0.01 * k).inv() * measured).as_rotvec())
    assert np.isclose(np.rad2deg(np.std(np.concatenate(errs))), 0.5, rtol=0.05)


def test_outer_wall_is_inextensible_for_constant_curvature() -> None:
    sim = VineSimulator(VineSimConfig(scenario="active", duration=10.0))
    truth = sim.truth(5.0)  # peak curvature 15 1/m
    kappa = 15.0
    seg = np.linalg.norm(np.diff(truth.backbone, axis=0), axis=1).sum()
    assert np.isclose(seg, truth.length / (1 + kappa * sim.config.diameter / 2), rtol=1e-3)
    # sensors sit D/2 from the centreline
    for T in truth.sensor_poses:
        d = np.min(np.linalg.norm(truth.backbone - T[:3, 3], axis=1))
        assert np.isclose(d, sim.config.diameter / 2, rtol=0.05)


def test_the_centreline_turns_at_its_curvature_over_its_own_length() -> None:
    """The same arc seen two ways: the centreline of the active scenario's constant bend (15 1/m of centreline)
    turns by 15 rad per metre of its own, polyline, length. Before, the turn was taken per metre of material and
    the length per metre of centreline, so the body turned 29.5 rad per metre of itself."""
    sim = VineSimulator(VineSimConfig(scenario="active", duration=10.0))
    pts = sim.truth(5.0).backbone[:, 1:]  # the bend plane (y, z)
    d = np.diff(pts, axis=0)
    heading = np.unwrap(np.arctan2(d[:, 0], d[:, 1]))
    turn = abs(heading[-1] - heading[0])
    length = np.linalg.norm(d, axis=1).sum() - np.linalg.norm(d[0]) / 2 - np.linalg.norm(d[-1]) / 2
    assert np.isclose(turn / length, 15.0, rtol=2e-3)


def test_a_bend_past_the_fully_buckled_inner_wall_is_refused() -> None:
    # the passive bend peaks at 7.5 1/m of material; a 0.3 m body can bend at most 1 / D = 3.3 1/m
    sim = VineSimulator(VineSimConfig(scenario="passive", duration=10.0, diameter=0.3))
    with pytest.raises(ValueError, match=r"passive: a bend of 7\.48 1/m of material is past the fully buckled"):
        sim.truth(10.0)


def test_growth_everts_sensors_progressively() -> None:
    sim = VineSimulator(VineSimConfig(scenario="growth", duration=30.0))
    assert np.isclose(sim.truth(0.0).length, 0.30)
    assert sim.truth(30.0).length >= 1.75  # 1.75 m, or just past the last IMU
    counts = [int(sim.truth(t).everted.sum()) for t in (0.0, 10.0, 20.0, 30.0)]
    assert counts == sorted(counts) and counts[0] == 3 and counts[-1] == 18


def test_passive_bend_reaches_ninety_degrees() -> None:
    sim = VineSimulator(VineSimConfig(scenario="passive", duration=10.0))
    tip = sim.truth(10.0).tip_pose
    assert np.isclose(np.degrees(np.arccos(tip[2, 2])), 90.0, atol=0.01)


def test_bad_scenario() -> None:
    with pytest.raises(ValueError, match="scenario 'flying' unknown"):
        VineSimulator(VineSimConfig(scenario="flying"))


def _curvature_and_torsion(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Frenet curvature and torsion of a polyline sampled evenly enough, by its arc length (finite differences)."""
    s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(p, axis=0), axis=1))])
    d1 = np.gradient(p, s, axis=0)
    d2 = np.gradient(d1, s, axis=0)
    d3 = np.gradient(d2, s, axis=0)
    c = np.cross(d1, d2)
    kappa = np.linalg.norm(c, axis=1) / np.linalg.norm(d1, axis=1) ** 3
    tau = np.einsum("ij,ij->i", c, d3) / np.maximum(np.einsum("ij,ij->i", c, c), 1e-30)
    return kappa, tau


def test_the_helix_has_its_stated_curvature_and_torsion_per_unit_of_centreline() -> None:
    # A bend of 5 1/m of material turning about the tangent once per metre of material, the frame not twisting:
    # per unit of centreline (1 - 5 D / 2 of it per unit of material) the curve is a helix of curvature
    # 5 / (1 - 5 D / 2) and torsion 2 pi / (1 - 5 D / 2) (a bend plane turning in a twist-free frame is the
    # Frenet torsion), measured here from the centreline's points alone.
    c = VineSimConfig(scenario="helix", duration=10.0)
    sim = VineSimulator(c)
    pts = sim.truth(c.duration).backbone
    kappa, tau = _curvature_and_torsion(pts)
    s = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(pts, axis=0), axis=1))])
    inner = (s > 0.3) & (s < s[-1] - 0.05)  # past the ramp at 10-20 cm, away from the differences' ends
    shrink = 1.0 - 5.0 * c.diameter / 2.0
    assert np.median(kappa[inner]) == pytest.approx(5.0 / shrink, rel=0.01)
    assert np.median(tau[inner]) == pytest.approx(2 * np.pi / shrink, rel=0.02)
    # and the sensors ride the body's frames: each one's tangent is the centreline's there, D/2 off it
    truth = sim.truth(c.duration)
    for pose in truth.sensor_poses[2:-1]:
        gap = np.linalg.norm(pts - (pose[:3, 3] - pose[:3, 0] * c.diameter / 2.0), axis=1)
        j = int(np.argmin(gap))
        assert gap[j] < 1e-9
        chord = pts[j + 1] - pts[j - 1]
        # within one integration step's turn (5 1/m * 4 mm = 1.15 deg): the steps either side may differ
        assert np.degrees(np.arccos(pose[:3, 2] @ chord / np.linalg.norm(chord))) < 1.15


def test_torsion_twists_the_sensor_line_about_the_tangent() -> None:
    # The body twists at 90 deg per metre of material at the end of the run: the relative rotation between two
    # sensors 1.02 m apart on the straight part before the bend turns about their common tangent by 0.92 rad.
    c = VineSimConfig(scenario="torsion", duration=10.0)
    sim = VineSimulator(c)
    frames = sim._true_backbone_rot(c.duration)
    rel = (frames[0].inv() * frames[9]).as_rotvec()  # sensors 0 and 9: 0.918 m of material, before the bend
    assert rel == pytest.approx([0.0, 0.0, np.deg2rad(90.0) * 9 * c.spacing], abs=1e-6)
