"""Geometry helpers against independent references (scipy's expm, finite differences)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import expm
from scipy.spatial.transform import Rotation

from shape_sensing import geometry as g

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("scale", [1e-9, 1e-3, 0.5, 3.0])
def test_se3_exp_matches_matrix_exponential(scale: float) -> None:
    for _ in range(20):
        xi = RNG.normal(size=6) * scale
        assert np.allclose(g.se3_exp(xi), expm(g.hat(xi)), atol=1e-12)


def test_se3_log_inverts_exp() -> None:
    xi = RNG.normal(size=(50, 6))
    xi[:, 3:] *= 0.9  # keep rotation angles below pi
    assert np.allclose(g.se3_log(g.se3_exp(xi)), xi, atol=1e-10)


def test_left_jacobian_is_derivative_of_exp() -> None:
    phi = np.array([0.3, -0.7, 1.1])
    eps = 1e-7
    J = g.left_jacobian_so3(phi)
    R = g.so3_exp(phi)
    for i in range(3):
        d = np.zeros(3)
        d[i] = eps
        # exp(phi + d) = exp(J d) exp(phi) to first order
        left = g.so3_log(g.so3_exp(phi + d) @ R.T) / eps
        assert np.allclose(left, J[:, i], atol=1e-6)


def test_inverse_compose_and_points() -> None:
    R = Rotation.random(10, random_state=1).as_matrix()
    T = g.make_transform(R, RNG.normal(size=(10, 3)))
    assert np.allclose(g.compose(T, g.inverse(T)), np.eye(4), atol=1e-12)
    p = RNG.normal(size=(5, 3))
    assert np.allclose(g.transform_points(g.inverse(T[0]), g.transform_points(T[0], p)), p)


def test_adjoint_moves_twists_between_frames() -> None:
    T = g.se3_exp(RNG.normal(size=6))
    xi = RNG.normal(size=6) * 0.1
    assert np.allclose(T @ g.se3_exp(xi) @ g.inverse(T), g.se3_exp(g.adjoint(T) @ xi), atol=1e-12)


def test_quaternion_helpers_agree_with_scipy_and_are_canonical() -> None:
    rot = Rotation.random(20, random_state=3)
    q = g.matrix_to_quat(rot.as_matrix())
    assert np.all(q[:, 3] >= 0)
    assert np.allclose(g.quat_to_matrix(q), rot.as_matrix())
    assert np.allclose(g.rotation_angle(rot.as_matrix()), rot.magnitude())


def test_bad_inputs_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="zero or non-finite"):
        g.quat_to_matrix([0.0, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="3- or 6-vector"):
        g.hat([1.0, 2.0])
