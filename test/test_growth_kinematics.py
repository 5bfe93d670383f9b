"""Tip-growth kinematics (Eq. 4-8) and the tip-growth motion model."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from shape_sensing.estimators.growth import (
    GrowthError,
    TipGrowthPredictor,
    angles_from_direction,
    chain,
    direction_from_angles,
    integrate_configuration,
    min_bending_radius,
    tip_frame,
    tip_step,
)
from shape_sensing.geometry import se3_exp


def test_rmin_of_the_seed_robot_is_9_82_cm():
    assert min_bending_radius(rt=2.2, L=4.8, rr=1.2) == pytest.approx(9.82, abs=1e-12)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((1.2, 4.8, 2.2), "rt = 1.2 must exceed rr"),
        ((2.2, math.nan, 1.2), "L = nan"),
        ((2.2, 4.8, -1.0), "rr = -1.0"),
        ((2.2, 0.1, 0.2), "Rmin"),  # L too short: a negative radius
    ],
)
def test_rmin_bad_designs_raise(args, match):
    with pytest.raises(GrowthError, match=match):
        min_bending_radius(*args)


def _factored(alpha, g, phi):
    """Eq. 4 as the printed product Rz(a) Trans(v) Ry(phi) Trans(-v) Rz(-a), with v = [g/phi, 0, 0]."""

    def rot(axis, angle):
        T = np.eye(4)
        T[:3, :3] = Rotation.from_euler(axis, angle).as_matrix()
        return T

    def trans(v):
        T = np.eye(4)
        T[:3, 3] = v
        return T

    v = np.array([g / phi, 0.0, 0.0])
    return rot("z", alpha) @ trans(v) @ rot("y", phi) @ trans(-v) @ rot("z", -alpha)


@pytest.mark.parametrize(
    ("alpha", "g", "phi"), [(0.0, 0.01, 0.1), (1.0, 0.02, -0.3), (-2.5, 0.5, 2.0), (3.0, 1.0, 1e-3)]
)
def test_tip_step_closed_form_equals_the_factored_product(alpha, g, phi):
    assert np.allclose(tip_step(alpha, g, phi), _factored(alpha, g, phi), atol=1e-12)


def test_tip_step_straight_and_broadcast():
    T = tip_step(0.7, 0.05, 0.0)
    expected = np.eye(4)
    expected[2, 3] = 0.05
    assert np.allclose(T, expected)
    batch = tip_step(np.array([0.0, 1.0, 2.0]), 0.01, np.array([0.1, 0.2, 0.3]))
    assert batch.shape == (3, 4, 4)
    assert np.allclose(batch[1], tip_step(1.0, 0.01, 0.2))


def test_chain_of_equal_steps_is_one_arc_on_the_circle():
    alpha, rc, n = 0.6, 0.1, 40
    phi = 0.02
    g = rc * phi
    frames = chain(np.repeat(tip_step(alpha, g, phi)[None], n, axis=0))
    assert np.allclose(frames[-1], tip_step(alpha, n * g, n * phi), atol=1e-12)  # Eq. 5 of equal steps
    centre = rc * np.array([math.cos(alpha), math.sin(alpha), 0.0])  # the ICR lies along alpha
    assert np.allclose(np.linalg.norm(frames[:, :3, 3] - centre, axis=1), rc, atol=1e-12)


def test_chain_rejects_bad_shapes():
    with pytest.raises(GrowthError, match="expected \\(N, 4, 4\\)"):
        chain(np.eye(4))


def test_angles_round_trip_and_tip_frame():
    th, ga = 2.0, -0.7
    v = direction_from_angles(th, ga)
    assert np.isclose(np.linalg.norm(v), 1.0)
    assert np.allclose(angles_from_direction(v), (th, ga))
    T = tip_frame([1, 2, 3], th, ga)
    assert np.allclose(T[:3, 2], v) and np.allclose(T[:3, 3], [1, 2, 3])
    assert np.allclose(T[:3, :3].T @ T[:3, :3], np.eye(3))


def test_configuration_space_circles_match_the_tip_steps():
    g, rmin, dt, n = 0.01, 0.1, 0.5, 40
    # Horizontal turn at the bound: a circle of radius Rmin in the x-y plane.
    kw = {"growth_rate": g, "dt": dt, "min_radius": rmin}
    states = integrate_configuration([0, 0, 0, 0, 0], np.tile([g / rmin, 0.0], (n, 1)), **kw)
    s = g * dt * np.arange(n + 1)
    assert np.allclose(states[:, 0], rmin * np.sin(s / rmin), atol=1e-9)
    assert np.allclose(states[:, 1], rmin * (1 - np.cos(s / rmin)), atol=1e-9)
    # The same arc from Eq. 4: a tip along +x (frame of heading 0, pitch 0) bending towards +y.
    T0 = tip_frame([0, 0, 0], 0.0, 0.0)
    alpha = math.atan2(T0[:3, 1] @ [0, 1, 0], T0[:3, 0] @ [0, 1, 0])
    Te = T0 @ tip_step(alpha, s[-1], s[-1] / rmin)
    assert np.allclose(Te[:3, 3], states[-1, :3], atol=1e-9)
    # Pitching up: a vertical circle.
    states = integrate_configuration([0, 0, 0, 1.0, 0], np.tile([0.0, g / rmin], (n, 1)), **kw)
    assert np.allclose(states[:, 4], s / rmin)
    assert np.allclose(states[:, 2], rmin * (1 - np.cos(s / rmin)), atol=1e-9)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"controls": [[0.2, 0.0]]}, "g / Rmin"),
        ({"controls": [[0.08, 0.08]]}, "g / Rmin"),  # each input within Eq. 8, the curvature beyond it
        ({"growth_rate": 0.0}, "growth_rate"),
        ({"state": [0, 0, math.nan, 0, 0]}, "state"),
        ({"controls": [0.0, 0.0]}, "controls"),
    ],
)
def test_configuration_bad_inputs_raise(kwargs, match):
    args = {"state": [0, 0, 0, 0, 0], "controls": [[0.0, 0.0]], "growth_rate": 0.01, "dt": 1.0, "min_radius": 0.1}
    args.update(kwargs)
    state, controls = args.pop("state"), args.pop("controls")
    with pytest.raises(GrowthError, match=match):
        integrate_configuration(state, controls, **args)


def test_predictor_steps_and_bounds():
    model = TipGrowthPredictor(min_radius=0.0982)
    assert np.allclose(model.predict(np.eye(4), 0.01)[:3, 3], [0, 0, 0.01])
    T = model.predict(np.eye(4), 0.05, alpha=0.3, curvature=5.0)
    assert np.allclose(T, tip_step(0.3, 0.05, 0.25))
    with pytest.raises(GrowthError, match="curvature"):
        model.predict(np.eye(4), 0.01, curvature=20.0)
    with pytest.raises(GrowthError, match="growth"):
        model.predict(np.eye(4), -0.01)
    with pytest.raises(GrowthError, match="pose"):
        model.predict(np.eye(3), 0.01)
    with pytest.raises(GrowthError, match="min_radius"):
        TipGrowthPredictor(min_radius=0.0)


def test_predictor_covariance_matches_monte_carlo():
    model = TipGrowthPredictor(min_radius=0.1, axial_std=0.0, bend_std=0.0)
    rng = np.random.default_rng(3)
    A = rng.normal(size=(6, 6)) * 1e-3
    P = A @ A.T
    S_growth, alpha, kappa = 0.2, 0.4, 4.0
    _, P1 = model.predict_with_covariance(np.eye(4), P, S_growth, alpha, kappa)
    # Sample right perturbations, push them through the step, read the perturbation after it.
    xi = rng.multivariate_normal(np.zeros(6), P, size=20000)
    S = model.step(S_growth, alpha, kappa)
    Sinv = np.linalg.inv(S)
    after = Sinv @ se3_exp(xi) @ S  # exp(xi') = S^-1 exp(xi) S
    pos = after[:, :3, 3]
    rot = Rotation.from_matrix(after[:, :3, :3]).as_rotvec()
    emp = np.cov(np.hstack([pos, rot]).T)
    scale = np.abs(P1).max()
    assert np.allclose(emp, P1, rtol=0.0, atol=0.05 * scale)  # first-order propagation, 20000 samples


def test_predictor_process_noise_grows_with_growth():
    model = TipGrowthPredictor(min_radius=0.1, axial_std=0.02, bend_std=0.01)
    _, P = model.predict_with_covariance(np.eye(4), np.zeros((6, 6)), 0.1)
    assert P[2, 2] == pytest.approx((0.02 * 0.1) ** 2)
    assert P[3, 3] == pytest.approx(0.01**2 * 0.1)
    with pytest.raises(GrowthError, match="covariance"):
        model.predict_with_covariance(np.eye(4), np.eye(3), 0.1)
