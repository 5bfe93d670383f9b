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


def test_one_matrix_gives_the_bits_of_a_stack() -> None:
    """A single 3x3 matrix goes through a Python-float path: the same bits as the same matrix in a stack (the bulk
    CDR of a block of estimates must equal the messages built one by one), over random rotations, every half turn
    (each branch of the largest diagonal), ties, w = 0, slightly off-orthonormal matrices and -0.0 entries; a
    non-finite matrix takes the stack's path."""
    rng = np.random.default_rng(5)
    cases = list(Rotation.random(3000, random_state=7).as_matrix())
    for axis in [*np.eye(3), np.ones(3) / np.sqrt(3.0), np.array([1.0, -1.0, 0.0]) / np.sqrt(2.0)]:
        cases += [Rotation.from_rotvec(np.pi * axis).as_matrix(), Rotation.from_rotvec(-np.pi * axis).as_matrix()]
    cases += [np.eye(3), np.diag([1.0, -1.0, -1.0]), np.diag([-1.0, 1.0, -1.0]), np.diag([-1.0, -1.0, 1.0])]
    cases += [c + rng.normal(0.0, 1e-3, (3, 3)) for c in cases[:300]]
    cases.append(np.where(np.eye(3) > 0, 1.0, -0.0))
    for R in cases:
        one, stack = g.matrix_to_quat(R), g.matrix_to_quat(R[None])[0]
        assert one.shape == (4,) and np.array_equal(one.view(np.uint64), stack.view(np.uint64)), R
    nan = np.full((3, 3), np.nan)
    assert g._matrix_to_quat_one(nan) is None
    np.testing.assert_array_equal(g.matrix_to_quat(nan), g.matrix_to_quat(nan[None])[0])


def test_bad_inputs_raise_clear_errors() -> None:
    with pytest.raises(ValueError, match="zero or non-finite"):
        g.quat_to_matrix([0.0, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="3- or 6-vector"):
        g.hat([1.0, 2.0])


# -- the distro's scipy (Debian 12: 1.10; Ubuntu 24.04: 1.11) -------------------------------------------------------
class Scipy110Rotation:
    """scipy 1.10's ``Rotation`` where it differs from the newest: ``as_quat()`` takes no argument (``canonical=``
    is new in 1.11) and ``from_*`` refuse an empty stack ("Invalid shape in axis 0: 0.", as 1.10 and 1.11 do).
    Wraps the installed ``Rotation``; the real 1.10 runs the whole suite in the ROS stage of .ci/run."""

    def __init__(self, rot: Rotation) -> None:
        self._rot = rot

    @staticmethod
    def _refuse_empty(values: object, width: int) -> None:
        arr = np.asarray(values, dtype=float)
        if arr.ndim > 1 and arr.shape[0] == 0:
            raise ValueError("Invalid shape in axis 0: 0.")
        if arr.shape[-1:] != (width,) and arr.shape[-2:] != (3, 3):
            raise ValueError(f"bad shape {arr.shape}")

    @classmethod
    def from_quat(cls, q: object) -> Scipy110Rotation:
        cls._refuse_empty(q, 4)
        return cls(Rotation.from_quat(q))

    @classmethod
    def from_matrix(cls, m: object) -> Scipy110Rotation:
        cls._refuse_empty(m, 3)
        return cls(Rotation.from_matrix(m))

    @classmethod
    def from_rotvec(cls, v: object) -> Scipy110Rotation:
        cls._refuse_empty(v, 3)
        return cls(Rotation.from_rotvec(v))

    def as_quat(self) -> np.ndarray:
        return self._rot.as_quat()

    def as_matrix(self) -> np.ndarray:
        return self._rot.as_matrix()

    def as_rotvec(self) -> np.ndarray:
        return self._rot.as_rotvec()


@pytest.fixture
def scipy_110(monkeypatch: pytest.MonkeyPatch) -> None:
    from shape_sensing.estimators import hinge_arc
    from shape_sensing.estimators.continuum import lie

    for module in (g, lie, hinge_arc):
        monkeypatch.setattr(module, "Rotation", Scipy110Rotation)


def test_scipy_110_stand_in_refuses_what_scipy_110_refuses() -> None:
    with pytest.raises(TypeError):
        Scipy110Rotation.from_rotvec([[0.1, 0.0, 0.0]]).as_quat(canonical=True)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="Invalid shape in axis 0: 0"):
        Scipy110Rotation.from_rotvec(np.zeros((0, 3)))


def test_canonical_quat_picks_scipys_sign_including_w_zero() -> None:
    """scipy >= 1.11's ``as_quat(canonical=True)`` is the reference: random rotations and every w = 0 tie."""
    rot = Rotation.random(200, random_state=11)
    cases = [rot.as_quat(), -rot.as_quat()]
    ties = np.array([[1, 0, 0, 0], [-1, 0, 0, 0], [0, -1, 0, 0], [0, 0, -1, 0], [-0.6, 0.8, 0, 0], [0, -0.6, 0.8, 0],
                     [0, 0.6, -0.8, 0], [0.6, -0.8, 0, 0]], dtype=float)
    cases.append(ties)
    for q in cases:
        mine = g.canonical_quat(q)
        assert np.array_equal(np.abs(mine), np.abs(q))  # a sign flip per row, nothing else
        if "canonical" in (Rotation.as_quat.__doc__ or ""):  # scipy >= 1.11
            ref = Rotation.from_quat(q)
            np.testing.assert_array_equal(g.canonical_quat(ref.as_quat()), ref.as_quat(canonical=True))
    expected_ties = np.array([[1, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0.6, -0.8, 0, 0],
                              [0, 0.6, -0.8, 0], [0, 0.6, -0.8, 0], [0.6, -0.8, 0, 0]], dtype=float)
    np.testing.assert_array_equal(g.canonical_quat(ties), expected_ties)
    assert g.canonical_quat(np.zeros((0, 4))).shape == (0, 4)


def test_quaternions_and_empty_stacks_on_the_scipy_110_api(scipy_110: None) -> None:
    rot = Rotation.random(50, random_state=5)
    q = g.matrix_to_quat(rot.as_matrix())
    assert np.all(q[:, 3] >= 0)
    np.testing.assert_allclose(Rotation.from_quat(q).as_matrix(), rot.as_matrix(), atol=1e-12)
    assert g.matrix_to_quat(np.eye(3)).shape == (4,)
    assert g.rotvec_to_matrix(np.zeros((0, 3))).shape == (0, 3, 3)
    assert g.quat_to_matrix(np.zeros((0, 4))).shape == (0, 3, 3)
    assert g.matrix_to_quat(np.zeros((0, 3, 3))).shape == (0, 4)
    assert g.matrix_to_rotvec(np.zeros((0, 3, 3))).shape == (0, 3)


def test_continuum_exp_of_no_twists_on_the_scipy_110_api(scipy_110: None) -> None:
    from shape_sensing.estimators.continuum import lie

    assert lie.exp(np.zeros((0, 6))).shape == (0, 4, 4)
    xi = RNG.normal(size=(4, 6)) * 0.3
    np.testing.assert_allclose(lie.exp(xi), np.array([expm(g.hat(x)) for x in xi]), atol=1e-12)


def test_hinge_arc_quaternions_of_no_sensors_on_the_scipy_110_api(scipy_110: None) -> None:
    from shape_sensing.estimators import hinge_arc

    assert hinge_arc.quats_to_matrices(np.zeros((0, 4))).shape == (0, 3, 3)


def test_vine_simulator_quaternions_on_the_scipy_110_api(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator's IMU quaternions come out canonical with scipy 1.10's ``as_quat()`` (no ``canonical=``)."""
    from shape_sensing.sim import vine

    original = Rotation.as_quat
    calls = []

    def as_quat_110(self: Rotation) -> np.ndarray:
        calls.append(1)
        return original(self)

    try:
        Rotation.as_quat = original  # type: ignore[method-assign]
    except TypeError:  # an extension type in older scipy, whose as_quat is the old API itself
        calls.append(1)
    else:
        monkeypatch.setattr(Rotation, "as_quat", as_quat_110)
    samples = vine.VineSimulator(vine.VineSimConfig()).imu_samples(1.0)
    assert calls and len(samples) == vine.VineSimConfig().n_sensors
    quats = np.array([s.orientation for s in samples])
    assert np.all(quats[:, 3] >= 0)
    np.testing.assert_allclose(np.linalg.norm(quats, axis=1), 1.0, atol=1e-12)
