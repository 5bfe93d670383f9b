"""Rigid-module estimator against an independent chain built with scipy's Rotation (seed 003, Eq. 5-6)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from shape_sensing.config import ConfigError
from shape_sensing.estimators.rigid_module import (
    SCHEMA,
    RigidModuleConfig,
    RigidModuleEstimator,
    joint_angles,
    relative_rotations,
    solve_headings,
)
from shape_sensing.types import DiagnosticLevel

D1, D2 = 0.04, 0.05


def independent_chain(theta: np.ndarray, base: Rotation, tool: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """World attitudes as z-y-x Euler angles, and platform + tool poses in the base frame, by plain loops."""
    eulers = [base.as_euler("ZYX")[::-1]]
    att = base
    poses = [np.eye(4)]
    T = np.eye(4)
    for tx, ty in theta:
        joint = Rotation.from_rotvec([tx, 0, 0]) * Rotation.from_rotvec([0, ty, 0])
        up = np.eye(4)
        up[2, 3] = D1
        rot = np.eye(4)
        rot[:3, :3] = joint.as_matrix()
        down = np.eye(4)
        down[2, 3] = D2
        T = T @ up @ rot @ down
        poses.append(T.copy())
        att = att * joint
        eulers.append(att.as_euler("ZYX")[::-1])
    poses.append(T @ tool)
    return np.asarray(eulers), np.asarray(poses)


def _estimator(n: int, mode: str, **kw: object) -> RigidModuleEstimator:
    params = {"n_modules": n, "d1": D1, "d2": D2, "heading_mode": mode, "tool_offset": [0.01, 0.0, 0.03, 0.0, 0.2, 0.0]}
    return RigidModuleEstimator(RigidModuleConfig.from_params(params | kw))


def _tool() -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = Rotation.from_euler("ZYX", [0.0, 0.2, 0.0]).as_matrix()
    T[:3, 3] = [0.01, 0.0, 0.03]
    return T


@pytest.mark.parametrize("mode", ["full", "roll_pitch"])
@pytest.mark.parametrize("n", [4, 20])
def test_forward_kinematics_exact_without_noise(mode: str, n: int) -> None:
    rng = np.random.default_rng(n)
    theta = rng.uniform(-0.6, 0.6, (n, 2))
    base = Rotation.from_euler("ZYX", [1.1, 0.15, -0.1])
    eulers, poses = independent_chain(theta, base, _tool())
    est = _estimator(n, mode)
    for i, e in enumerate(eulers):
        est.push_euler(i, e, 1000)
    r = est.estimate(1000)
    np.testing.assert_allclose(r.theta, theta, atol=1e-9)
    np.testing.assert_allclose(r.shape.poses, poses, atol=1e-9)
    np.testing.assert_allclose(r.twist, 0.0, atol=1e-9)
    assert r.shape.frame_ids[0] == "platform_0" and r.shape.frame_ids[-1] == "end_effector"


def test_world_frame_formula_differs_once_bent() -> None:
    # Two joints bent: the paper's R_j R_{j-1}^T is a world-frame increment; the joint angles are body-frame.
    theta = np.array([[0.5, 0.0], [0.0, 0.4]])
    eulers, _ = independent_chain(theta, Rotation.identity(), np.eye(4))
    R = Rotation.from_euler("ZYX", eulers[:, ::-1]).as_matrix()
    body = joint_angles(relative_rotations(R, "body"))
    world = joint_angles(relative_rotations(R, "world"))
    np.testing.assert_allclose(body[:, :2], theta, atol=1e-12)
    np.testing.assert_allclose(body[:, 2], 0.0, atol=1e-12)
    # First module: the lower platform is the level base, both agree.
    np.testing.assert_allclose(world[0], body[0], atol=1e-12)
    # Second module: the world-frame increment tilts the y axis by the first joint's 0.5 rad.
    assert abs(world[1, 0] - theta[1, 0]) > 0.05 or abs(world[1, 2]) > 0.05
    assert np.degrees(np.abs(world[1] - body[1]).max()) > 5.0
    with pytest.raises(ValueError, match="frame 'sideways'"):
        relative_rotations(R, "sideways")


def test_twist_is_reported_never_dropped() -> None:
    theta = np.array([[0.2, -0.1], [0.3, 0.2], [-0.1, 0.1], [0.0, 0.25]])
    eulers, _ = independent_chain(theta, Rotation.identity(), np.eye(4))
    R = Rotation.from_euler("ZYX", eulers[:, ::-1])
    # A 6 deg twist inside module 3 (play in the joint): platforms 3 and 4 turn with it.
    kink = Rotation.from_rotvec([0, 0, math.radians(6)])
    twisted = [R[0], R[1], R[2], R[3] * kink]
    twisted.append(twisted[3] * (R[3].inv() * R[4]))
    est = _estimator(4, "full", twist_warn_deg=3.0)
    for i, r in enumerate(twisted):
        est.push_euler(i, r.as_euler("ZYX")[::-1], 0)
    out = est.estimate(0)
    np.testing.assert_allclose(np.degrees(out.twist), [0, 0, 6, 0], atol=1e-9)
    joints = next(d for d in out.shape.diagnostics if d.name == "rigid_module/joints")
    assert joints.level == DiagnosticLevel.WARN and "module 3" in joints.message


def _mounted(eulers: np.ndarray, mounts: Rotation) -> np.ndarray:
    """Readings of sensors mounted with misalignment ``mounts[i]``: ``R_sensor = R_platform M_i``."""
    return (Rotation.from_euler("ZYX", eulers[:, ::-1]) * mounts).as_euler("ZYX")[:, ::-1]


@pytest.mark.parametrize("mode", ["full", "roll_pitch"])
def test_rods_calibration_removes_mounting_at_any_tilt(mode: str) -> None:
    rng = np.random.default_rng(1)
    # Curled chain: platforms tilted far from level, where an Euler-angle subtraction would be wrong.
    theta = np.array([[0.6, -0.5], [0.7, 0.4], [-0.6, 0.7], [0.5, 0.6]])
    rv = np.radians(rng.normal(0, 1.0, (5, 3)))
    rv[0] = 0.0  # the base sensor is the reference: its own mounting is not observable from the rods
    if mode == "roll_pitch":
        rv[:, 2] = 0.0  # a mounting turn about gravity on the rods is not observable from roll/pitch either
    mounts = Rotation.from_rotvec(rv)
    straight, _ = independent_chain(np.zeros((4, 2)), Rotation.from_euler("ZYX", [0.3, 0, 0]), _tool())
    bent, poses = independent_chain(theta, Rotation.from_euler("ZYX", [0.3, 0, 0]), _tool())
    est = _estimator(4, mode)
    est.calibrate(_mounted(straight, mounts))
    raw = _estimator(4, mode)
    for i, e in enumerate(_mounted(bent, mounts)):
        est.push_euler(i, e, 1)
        raw.push_euler(i, e, 1)
    np.testing.assert_allclose(est.estimate(1).shape.poses, poses, atol=1e-9)
    assert np.abs(raw.estimate(1).shape.poses[-1, :3, 3] - poses[-1, :3, 3]).max() > 1e-3
    # The correction survives a round trip through the calibration_bias parameter.
    again = _estimator(4, mode, calibration_bias=[float(v) for v in est.bias.reshape(-1)])
    for i, e in enumerate(_mounted(bent, mounts)):
        again.push_euler(i, e, 1)
    np.testing.assert_allclose(again.estimate(1).shape.poses, poses, atol=1e-9)


def test_missing_and_stale_sensors_degrade_with_diagnostics() -> None:
    eulers, _ = independent_chain(np.full((4, 2), 0.1), Rotation.identity(), np.eye(4))
    est = _estimator(4, "roll_pitch", stale_timeout=0.1)
    for i in (0, 1, 3, 4):
        est.push_euler(i, eulers[i], 0 if i != 4 else 1_000_000_000)
    out = est.estimate(1_000_000_000)
    status = {d.name: d.level for d in out.shape.diagnostics}
    assert status["rigid_module/platform_2"] == DiagnosticLevel.ERROR  # never seen: bridged straight
    assert status["rigid_module/platform_0"] == DiagnosticLevel.WARN  # 1 s old: held, stale
    assert status["rigid_module/platform_4"] == DiagnosticLevel.OK
    assert np.all(np.isfinite(out.shape.poses))


def test_covariance_matches_monte_carlo() -> None:
    n = 4
    theta = np.array([[0.3, -0.2], [0.2, 0.3], [-0.25, 0.1], [0.15, 0.2]])
    eulers, _ = independent_chain(theta, Rotation.from_euler("ZYX", [0.5, 0.05, 0.02]), np.eye(4))
    for mode in ("full", "roll_pitch"):
        # The readings' white noise alone (no mounting error, no heading disturbance): what the draws below hold.
        est = _estimator(n, mode, mounting_stddev_deg=0.0, heading_disturbance_deg=0.0)
        for i, e in enumerate(eulers):
            est.push_euler(i, e, 0)
        P = est.estimate(0).tip_covariance
        assert P is not None
        mc = _estimator(n, mode, covariance=False)
        rng = np.random.default_rng(7)
        sig = np.radians([0.05, 0.05, 1.0])
        tips = []
        for _ in range(400):
            for i, e in enumerate(eulers):
                mc.push_euler(i, e + rng.normal(0, 1, 3) * sig, 0)
            tips.append(mc.estimate(0).shape.poses[-1, :3, 3])
        C = np.cov(np.asarray(tips).T)
        np.testing.assert_allclose(np.sqrt(np.diag(C)), np.sqrt(np.diag(P[:3, :3])), rtol=0.2)


def _brute_force_covariances(est: RigidModuleEstimator, eulers: np.ndarray, sig_read: np.ndarray,
                             sig_mount: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Frame position, end-effector pose and joint covariances by central differences of whole estimates: one pair
    per reading's angle and per platform's mounting turn (the sensor turned about its own axis, by scipy).
    ``eulers``: the readings as the estimator uses them (its mounting correction removed)."""
    h = 1e-6
    cfg = est.config
    ref = RigidModuleEstimator(RigidModuleConfig(**{**cfg.__dict__, "covariance": False, "calibration_bias": ()}))

    def run(e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        for i, row in enumerate(e):
            ref.push_euler(i, row, 0)
        out = ref.estimate(0)
        return out.shape.poses, out.theta.reshape(-1)

    cols, sigmas = [], []
    for i in range(len(eulers)):
        for k in range(3):
            pair = []
            for sign in (1.0, -1.0):
                e = eulers.copy()
                e[i, k] += sign * h
                pair.append(run(e))
            cols.append(pair)
            sigmas.append(sig_read[k])
        for k in range(3):
            pair = []
            for sign in (1.0, -1.0):
                e = eulers.copy()
                turned = Rotation.from_euler("ZYX", eulers[i, ::-1]) * Rotation.from_rotvec(np.eye(3)[k] * sign * h)
                e[i] = turned.as_euler("ZYX")[::-1]
                pair.append(run(e))
            cols.append(pair)
            sigmas.append(sig_mount[k])
    dpos = np.stack([(a[0][:, :3, 3] - b[0][:, :3, 3]) / (2 * h) for a, b in cols], -1)  # (F, 3, m)
    drot = np.stack([
        (Rotation.from_matrix(a[0][-1, :3, :3]) * Rotation.from_matrix(b[0][-1, :3, :3]).inv()).as_rotvec() / (2 * h)
        for a, b in cols
    ], -1)  # fmt: skip
    dth = np.stack([(a[1] - b[1]) / (2 * h) for a, b in cols], -1)
    w = np.asarray(sigmas)
    Jp, Jt, Jth = dpos * w, np.concatenate([dpos[-1], drot]) * w, dth * w
    return Jp @ np.swapaxes(Jp, -1, -2), Jt @ Jt.T, Jth @ Jth.T


@pytest.mark.parametrize(
    ("mode", "calibrated", "base"),
    [("roll_pitch", False, 0.05), ("roll_pitch", True, 0.3), ("full", False, 0.3), ("full", True, 0.05),
     ("roll_pitch", False, math.radians(85))],  # the last: headings from the magnetometer (ill-conditioned)
)  # fmt: skip
def test_covariance_equals_the_whole_chain_differentiated(mode: str, calibrated: bool, base: float) -> None:
    """The estimator's covariance (the joint angles' derivatives from two batches per angle, the frames' by the
    chain's geometric Jacobian, the mounting turns by Euler rates) against central differences of whole estimates,
    input by input."""
    n = 7
    rng = np.random.default_rng(11)
    theta = rng.uniform(-0.5, 0.5, (n, 2))
    eulers, _ = independent_chain(theta, Rotation.from_euler("ZYX", [0.4, base, 0.1]), np.eye(4))
    bias = rng.normal(0, 0.01, 3 * (n + 1)).tolist() if calibrated else []
    est = _estimator(n, mode, calibration_bias=bias)
    for i, e in enumerate(eulers):
        est.push_euler(i, e, 0)
    out = est.estimate(0)
    if base > 1.0:
        assert (out.conditioning < 0.1).any()
    cfg = est.config
    yaw = math.hypot(cfg.yaw_stddev_deg, cfg.heading_disturbance_deg)
    sig_read = np.radians([cfg.roll_pitch_stddev_deg, cfg.roll_pitch_stddev_deg, yaw])
    if calibrated:
        z = math.sqrt(2) * cfg.heading_disturbance_deg if mode == "full" else cfg.mounting_stddev_deg
        sig_mount = np.radians([cfg.roll_pitch_stddev_deg, cfg.roll_pitch_stddev_deg, z])
    else:
        sig_mount = np.radians([cfg.mounting_stddev_deg] * 3)
    # the estimator removes the mounting correction from the readings: difference what it estimates from
    e_used, _, _ = est._inputs()
    pos, tip, th = _brute_force_covariances(est, e_used, sig_read, sig_mount)
    scale = np.max(np.abs(tip))
    np.testing.assert_allclose(out.shape.position_covariance, pos, rtol=1e-4, atol=1e-6 * scale)
    np.testing.assert_allclose(out.tip_covariance, tip, rtol=1e-4, atol=1e-6 * scale)
    np.testing.assert_allclose(out.theta_covariance, th, rtol=1e-4, atol=1e-6 * np.max(np.abs(th)))


def test_heading_solution_and_conditioning() -> None:
    theta = np.array([[1.2, 0.0], [0.0, 0.3]])  # first joint tilts the next platform far over
    eulers, _ = independent_chain(theta, Rotation.identity(), np.eye(4))
    R, cond = solve_headings(eulers)
    np.testing.assert_allclose(joint_angles(relative_rotations(R))[:, :2], theta, atol=1e-9)
    # Conditioning = horizontal length of the upper platform's y axis where the lower x axis is horizontal: the
    # tilt of 1.2 rad about x leaves cos(1.2) at both joints (Ry(0.3) keeps that y axis); a straight chain has 1.
    # (The two are equal analytically; which is larger in the last bit differs between numpy versions.)
    np.testing.assert_allclose(cond, [np.cos(1.2), np.cos(1.2)], rtol=1e-12)
    _, cond_straight = solve_headings(independent_chain(np.zeros((2, 2)), Rotation.identity(), np.eye(4))[0])
    np.testing.assert_allclose(cond_straight, [1.0, 1.0], rtol=1e-12)


def _headings_joint_by_joint(euler: np.ndarray, yaw_hint: bool, min_conditioning: float) -> np.ndarray:
    """The heading solve written out per chain and joint with scipy's rotations: each joint's two solutions of
    ``rho cos(psi - phi) + C = 0`` (lower x axis u, upper tilted y axis v), the one nearer the hinted heading, else
    the one nearer a straight joint (largest trace of the relative rotation); the hint where ill-conditioned."""
    out = np.empty((*euler.shape[:-1], 3, 3))
    for b in range(euler.shape[0]):
        e = euler[b]
        tilt = [Rotation.from_euler("ZYX", [0.0, p, r]).as_matrix() for r, p, _ in e]
        R = [tilt[0]]
        for j in range(1, len(e)):
            u, v = R[-1][:, 0], tilt[j][:, 1]
            A, B, C = u[0] * v[0] + u[1] * v[1], u[1] * v[0] - u[0] * v[1], u[2] * v[2]
            rho, phi = math.hypot(A, B), math.atan2(B, A)
            delta = math.acos(min(1.0, max(-1.0, -C / max(rho, 1e-12))))
            hint = e[j, 2] - e[0, 2]
            hinted = yaw_hint and math.isfinite(hint)
            best = None
            for psi in (phi + delta, phi - delta):
                Rj = Rotation.from_euler("z", psi).as_matrix() @ tilt[j]
                score = -abs((psi - hint + math.pi) % (2 * math.pi) - math.pi) if hinted else np.trace(R[-1].T @ Rj)
                if best is None or score > best[0]:
                    best = (score, Rj)
            if hinted and math.sqrt(max(rho * rho - C * C, 0.0)) < min_conditioning:
                best = (0.0, Rotation.from_euler("z", hint).as_matrix() @ tilt[j])
            R.append(best[1])
        out[b] = R
    return out


@pytest.mark.parametrize("yaw_hint", [True, False])
def test_headings_equal_the_joint_by_joint_solve(yaw_hint: bool) -> None:
    """The vectorised solve (each heading the last plus one of two turns) against the constraint solved joint by
    joint: random chains of 21 platforms, tilts up to about 60 deg, headings anywhere, some magnetometers without a
    reading (NaN yaw: the straightest solution there), and the fallback to the hint where ill-conditioned."""
    rng = np.random.default_rng(7)
    e = rng.normal(0.0, 0.5, (12, 21, 3))
    e[..., 2] = rng.uniform(-np.pi, np.pi, (12, 21))
    e[rng.random((12, 21)) < 0.15, 2] = np.nan
    for min_conditioning in (0.0, 0.4):
        R, _ = solve_headings(e, yaw_hint=yaw_hint, min_conditioning=min_conditioning)
        want = _headings_joint_by_joint(e, yaw_hint, min_conditioning)
        np.testing.assert_allclose(R, want, atol=1e-12)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"n_modules": 0}, "'n_modules' = 0"),
        ({"tool_offset": [0, 0, 0.1]}, "'tool_offset'.*expected 6 values"),
        ({"heading_mode": "magnetic"}, "'heading_mode' = 'magnetic'"),
        ({"n_modules": 4, "calibration_bias": [0.0] * 6}, "'calibration_bias' has 6 values.*15"),
        ({"d1": -0.1}, "'d1' = -0.1"),
        ({"n_modules": 4, "bogus": 1}, r"unknown parameter\(s\) \['bogus'\]"),
    ],
)
def test_bad_config_is_named(params: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        RigidModuleConfig.from_params(params)


def test_bad_input_is_named() -> None:
    est = _estimator(4, "full")
    with pytest.raises(ValueError, match="platform index 5 out of range"):
        est.push_euler(5, [0, 0, 0], 0)
    with pytest.raises(ValueError, match="not 3 finite angles"):
        est.push_euler(1, [0, float("nan"), 0], 0)
    with pytest.raises(ValueError, match=r"no reading from platform\(s\) \[0, 1, 2, 3, 4\]"):
        est.calibrate()
    with pytest.raises(ValueError, match="expected \\(5, 3\\)"):
        est.calibrate(np.zeros((4, 3)))
    assert SCHEMA.node == "rigid_module_estimator"


def test_roll_pitch_mode_ignores_disturbed_yaw_value() -> None:
    # Magnetic disturbance of up to 8 deg on every yaw: roll_pitch mode stays exact (yaw only picks the branch).
    n = 20
    rng = np.random.default_rng(n)
    theta = rng.uniform(-0.6, 0.6, (n, 2))
    eulers, poses = independent_chain(theta, Rotation.from_euler("ZYX", [0.4, 0.1, 0.0]), _tool())
    disturbed = eulers.copy()
    disturbed[:, 2] += np.radians(rng.uniform(-8, 8, n + 1))
    est = _estimator(n, "roll_pitch", heading_min_conditioning=0.0)  # the constraint everywhere
    for i, e in enumerate(disturbed):
        est.push_euler(i, e, 0)
    out = est.estimate(0)
    np.testing.assert_allclose(out.theta, theta, atol=1e-9)
    np.testing.assert_allclose(out.shape.poses, poses, atol=1e-9)
    # Without the hint, roll and pitch alone admit a second, straighter solution at some joint.
    R_free, _ = solve_headings(disturbed, yaw_hint=False)
    free = joint_angles(relative_rotations(R_free))[:, :2]
    assert np.abs(free - theta).max() > 0.1


def test_ill_conditioned_heading_falls_back_to_the_magnetometer() -> None:
    # Base pitched 85 deg: module 1's first axis (the base x axis) is nearly vertical, so a turn about it
    # hardly changes any tilt and the joint constraint cannot fix platform 1's heading.
    theta = np.array([[0.3, 0.2], [0.1, -0.2], [0.2, 0.1], [-0.1, 0.3]])
    eulers, poses = independent_chain(theta, Rotation.from_euler("ZYX", [0.2, math.radians(85), 0.0]), _tool())
    est = _estimator(4, "roll_pitch")
    for i, e in enumerate(eulers):
        est.push_euler(i, e, 0)
    out = est.estimate(0)
    low = int((out.conditioning < 0.1).sum())
    assert out.conditioning[0] < 0.1 and low >= 1
    np.testing.assert_allclose(out.shape.poses, poses, atol=1e-9)  # the measured heading is exact here
    joints = next(d for d in out.shape.diagnostics if d.name == "rigid_module/joints")
    assert joints.level == DiagnosticLevel.WARN and joints.values["headings_from_magnetometer"] == str(low)
    # With the pure constraint the same readings still solve (noise-free), but a disturbed heading would not
    # matter there; with noise it is the conditioning that decides (see solve_headings).
    pure = _estimator(4, "roll_pitch", heading_min_conditioning=0.0)
    for i, e in enumerate(eulers):
        pure.push_euler(i, e, 0)
    np.testing.assert_allclose(pure.estimate(0).shape.poses, poses, atol=1e-7)


def test_quat_to_euler_gives_the_matrix_paths_bits() -> None:
    """The per-message shortcut equals matrix_to_euler_zyx(quat_to_matrix(q)) bit for bit (kept reference)."""
    from shape_sensing.estimators.rigid_module import matrix_to_euler_zyx, quat_to_euler_zyx
    from shape_sensing.geometry import quat_to_matrix

    rng = np.random.default_rng(11)
    qs = rng.normal(size=(5000, 4))
    qs *= rng.uniform(0.6, 1.4, (5000, 1)) / np.linalg.norm(qs, axis=1, keepdims=True)
    half = np.linspace(-np.pi, np.pi, 40)
    qs[:40] = np.column_stack([np.zeros(40), np.sin(half), np.zeros(40), np.cos(half)])  # pitch through +-90 deg
    for q in qs:
        assert quat_to_euler_zyx(q).tobytes() == matrix_to_euler_zyx(quat_to_matrix(q)).tobytes()
