"""Hinge-arc estimator against analytic shapes, Monte Carlo and its own documented rules."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from shape_sensing.estimators.hinge_arc import (
    SCHEMA,
    HingeArcConfig,
    HingeArcEstimator,
    NotOffsetError,
    _skew,
    segment_displacements,
)
from shape_sensing.types import DiagnosticLevel

D = 0.129
L = 0.102


def _estimator(n: int = 6, **params: object) -> HingeArcEstimator:
    p = SCHEMA.defaults() | {"imu_topics": [f"imu_{i}/data" for i in range(n)], "spacing": L, "diameter": D}
    p |= params
    cfg = HingeArcConfig.from_params(p)
    return HingeArcEstimator(cfg, [f"imu_{i}" for i in range(n)])


def _quats(angles: np.ndarray, axis: tuple[float, float, float] = (1.0, 0.0, 0.0)) -> np.ndarray:
    """World orientations of sensors whose backbone frames are rotated by ``angles`` about ``axis``."""
    return Rotation.from_rotvec(np.outer(angles, axis)).as_quat()


def _offset(est: HingeArcEstimator) -> None:
    est.capture_offset(_quats(np.zeros(est.n)), np.ones(est.n, dtype=bool), 0)


def test_straight_robot() -> None:
    est = _estimator(6, tip_offset=0.05)
    _offset(est)
    shape = est.update(_quats(np.zeros(6)), np.ones(6, dtype=bool), 0)
    sensors = shape.poses[:-1, :3, 3]
    assert np.allclose(sensors[:, 2], L * np.arange(6))
    assert np.allclose(sensors[:, 0], D / 2) and np.allclose(sensors[:, 1], 0)
    assert np.allclose(shape.tip_pose[:3, 3], [0, 0, 5 * L + 0.05])
    assert shape.diagnostics[0].level == DiagnosticLevel.OK


EXACT = {"orientation_noise_deg": 0.0, "drift_deg_per_min": 0.0}  # readings taken as exact: no bend debiased


def test_one_known_bend_matches_hand_geometry() -> None:
    theta = 0.5  # < L/D = 0.79
    angles = np.array([0, 0, theta, theta])  # bend between sensors 1 and 2
    est = _estimator(4, **EXACT)
    _offset(est)
    shape = est.update(_quats(angles), np.ones(4, dtype=bool), 0)
    # By hand, in the y-z plane (rotation about +x turns the tangent z towards -y):
    l_run = (L - D * theta) / 2
    r = D / 2
    p1 = np.array([0.0, L])  # (y, z) of the centreline at sensor 1
    p_arc_end = p1 + [0, l_run] + [-r * (1 - np.cos(theta)), r * np.sin(theta)]
    tangent = np.array([-np.sin(theta), np.cos(theta)])
    p2 = p_arc_end + l_run * tangent
    p3 = p2 + L * tangent
    centre = shape.backbone
    # sensor 2 sits on the wall, D/2 along its x axis, which a bend about x leaves at +x
    assert np.allclose(shape.poses[2, :3, 3], [D / 2, *p2], atol=1e-12)
    assert np.allclose(shape.tip_pose[1:3, 3], p3, atol=1e-12)
    # the centreline between sensors 1 and 2 is L - D*theta/2 long
    seg = centre[(centre[:, 2] >= L - 1e-12)]
    assert np.isclose(centre[-1, 1], p3[0])
    assert np.isclose(np.sum(np.linalg.norm(np.diff(seg, axis=0), axis=1)), (L - D * theta / 2) + L, rtol=2e-3)


@pytest.mark.parametrize("theta", [0.2, 0.6, 1.0, 1.4])
def test_centreline_length_formula_and_continuity_past_L_over_D(theta: float) -> None:
    rel = Rotation.from_rotvec([[theta, 0, 0]]).as_matrix()
    _d, th, r_c = segment_displacements(rel, np.array([L]), D)
    assert np.isclose(th[0], theta)
    # arc length of the model's centreline: 2 l + r_c theta
    l_run = max(L - D * theta, 0) / 2
    assert np.isclose(2 * l_run + r_c[0] * theta, L - D * theta / 2)
    if theta > L / D:
        assert np.isclose(r_c[0], L / theta - D / 2)


def test_continuous_at_L_over_D_and_pivot_beyond_2L_over_D() -> None:
    t0 = L / D
    rel = Rotation.from_rotvec([[t0 - 1e-9, 0, 0], [t0 + 1e-9, 0, 0]]).as_matrix()
    d, _, _ = segment_displacements(rel, np.array([L, L]), D)
    assert np.allclose(d[0], d[1], atol=1e-8)
    rel = Rotation.from_rotvec([[2 * L / D + 0.1, 0, 0]]).as_matrix()
    d, _, r_c = segment_displacements(rel, np.array([L]), D)
    assert r_c[0] == 0 and np.allclose(d, 0)


def test_over_bend_is_reported() -> None:
    est = _estimator(3)
    _offset(est)
    shape = est.update(_quats(np.array([0, 0, 1.2])), np.ones(3, dtype=bool), 0)
    assert shape.diagnostics[0].level == DiagnosticLevel.WARN
    assert "past L/D" in shape.diagnostics[0].message
    assert shape.diagnostics[0].values["segments_past_L_over_D"] == "1"


def _arc_error(n_segments: int, total_material: float, kappa: float) -> float:
    """Tip error of the model against its own continuum limit, an exact circle."""
    spacing = total_material / n_segments
    est = _estimator(n_segments + 1, spacing=spacing, **EXACT)
    _offset(est)
    sigma = spacing * np.arange(n_segments + 1)
    shape = est.update(_quats(kappa * sigma), np.ones(n_segments + 1, dtype=bool), 0)
    # Continuum limit: heading kappa per unit material, centreline (1 - kappa D / 2) per unit material.
    big_theta = kappa * total_material
    radius = (1 - kappa * D / 2) / kappa
    tip = np.array([-radius * (1 - np.cos(big_theta)), radius * np.sin(big_theta)])
    return float(np.linalg.norm(shape.tip_pose[1:3, 3] - tip))


def test_constant_curvature_error_shrinks_with_spacing() -> None:
    errors = np.array([_arc_error(n, 1.2, 2.0) for n in (3, 6, 12, 24, 48)])
    # Second order in the spacing: halving L quarters the error.
    ratios = errors[:-1] / errors[1:]
    assert np.all((ratios > 3.5) & (ratios < 4.5)), ratios
    assert errors[-1] < 2e-4


def test_noise_does_not_shorten_a_straight_robot_by_its_full_rectified_size() -> None:
    """Noisy readings of a straight robot: every segment's measured bend is the size of two noisy axes, so its
    centreline shortening ``D theta / 2`` is never negative. The estimator's ``theta^2 / sqrt(theta^2 + n)`` with
    ``n`` the stated variance of the bend's square: on average ``E[u / sqrt(u + 1)]`` (``u`` exponential with mean 1,
    integrated here) of the noise's std per segment, against ``E[sqrt(u)] = sqrt(pi) / 2`` taken as measured."""
    from scipy.integrate import quad

    n, draws, sigma_deg = 18, 400, 0.5
    rng = np.random.default_rng(7)
    sigma = np.deg2rad(sigma_deg)
    est = _estimator(n, orientation_noise_deg=sigma_deg, drift_deg_per_min=0.0)

    def noisy() -> np.ndarray:
        return Rotation.from_rotvec(rng.normal(0.0, sigma, (n, 3))).as_quat()

    short = []
    for _ in range(draws):
        est.capture_offset(noisy(), np.ones(n, dtype=bool), 0)
        short.append((n - 1) * L - est.update(noisy(), np.ones(n, dtype=bool), 0).length)
    # a reading and its offset capture: 2 sigma^2 per axis; the relative rotation twice that; the bend two axes
    std = np.sqrt(8.0) * sigma
    debiased, _ = quad(lambda u: u / np.sqrt(u + 1.0) * np.exp(-u), 0.0, np.inf)
    expected = (n - 1) * (D / 2) * std * debiased
    raw = (n - 1) * (D / 2) * std * np.sqrt(np.pi) / 2
    assert np.mean(short) == pytest.approx(expected, rel=0.1), (np.mean(short), expected, raw)
    assert np.mean(short) < 0.75 * raw


def test_tip_covariance_of_a_noisy_straight_robot_is_consistent() -> None:
    """What the shortening keeps of the noise bias (about 17 mm at the tip here, all segments short the same way) is
    in the covariance as a bias along the chain: the tip's NEES over independent noisy captures and readings is
    about 3 (11.9 without that term), and along the robot about 1 (10.2 without)."""
    from scipy.stats import chi2

    n, draws, sigma_deg = 18, 400, 0.5
    rng = np.random.default_rng(7)
    sigma = np.deg2rad(sigma_deg)
    est = _estimator(n, orientation_noise_deg=sigma_deg, drift_deg_per_min=0.0)
    nees, along = [], []
    for _ in range(draws):
        est.capture_offset(Rotation.from_rotvec(rng.normal(0.0, sigma, (n, 3))).as_quat(), np.ones(n, dtype=bool), 0)
        shape = est.update(Rotation.from_rotvec(rng.normal(0.0, sigma, (n, 3))).as_quat(), np.ones(n, dtype=bool), 0)
        e = shape.tip_pose[:3, 3] - [0.0, 0.0, (n - 1) * L + est.config.tip_offset]
        P = shape.position_covariance[-1]
        nees.append(e @ np.linalg.solve(P, e))
        along.append(e[2] ** 2 / P[2, 2])
    # the 99.9 % band of the mean of 400 chi-square(3), widened by a quarter on each side (the bias is a model)
    lo, hi = chi2.ppf([0.0005, 0.9995], 3 * draws) / draws
    assert 0.75 * lo <= np.mean(nees) <= 1.25 * hi, np.mean(nees)
    assert 0.5 <= np.mean(along) <= 2.0, np.mean(along)


def test_offsetting_removes_arbitrary_mounting_rotations() -> None:
    rng = np.random.default_rng(3)
    n = 8
    angles = np.linspace(0, 1.5, n)
    bent = Rotation.from_rotvec(np.outer(angles, [0.6, 0.8, 0]))
    mounts = Rotation.from_rotvec(rng.normal(0, 0.5, (n, 3)))
    world = Rotation.from_rotvec(rng.normal(0, 1.0, 3))  # the IMUs' shared world frame vs the base
    ref = _estimator(n)
    _offset(ref)
    expected = ref.update(bent.as_quat(), np.ones(n, dtype=bool), 0)
    # The first IMU's mounting is the one known (nominal) value; the others are captured.
    est = _estimator(n, first_mount_rpy=mounts[0].as_euler("xyz").tolist())
    est.capture_offset((world * mounts).as_quat(), np.ones(n, dtype=bool), 0)
    got = est.update((world * bent * mounts).as_quat(), np.ones(n, dtype=bool), 0)
    assert np.allclose(got.backbone, expected.backbone, atol=1e-9)
    assert np.allclose(got.tip_pose, expected.tip_pose, atol=1e-9)
    assert np.allclose(est.mountings(), mounts.as_matrix(), atol=1e-9)
    # sensor frames carry their mounting: rotation = backbone rotation * M_i
    assert np.allclose(got.poses[3, :3, :3], (bent[3] * mounts[3]).as_matrix(), atol=1e-9)


def test_missing_sensor_is_bridged_and_reported() -> None:
    n = 7
    angles = np.array([0, 0.1, 0.25, 0.3, 0.5, 0.55, 0.6])
    est = _estimator(n)
    _offset(est)
    valid = np.ones(n, dtype=bool)
    valid[3] = False
    got = est.update(_quats(angles), valid, 0)
    # Reference: an estimator that never had sensor 3, with the merged 2L segment.
    keep = [0, 1, 2, 4, 5, 6]
    ref = _estimator(6, sensor_positions=(L * np.array(keep)).tolist())
    _offset(ref)
    expected = ref.update(_quats(angles[keep]), np.ones(6, dtype=bool), 0)
    assert np.allclose(got.tip_pose, expected.tip_pose, atol=1e-12)
    assert "imu_3" not in got.frame_ids
    assert got.diagnostics[0].level == DiagnosticLevel.WARN and "imu_3" in got.diagnostics[0].message


def test_subsets_every_k_and_explicit_list_agree() -> None:
    angles = np.linspace(0, 1.0, 9)
    a = _estimator(9, every_k=2)
    b = _estimator(9, use_sensors=[0, 2, 4, 6, 8])
    for e in (a, b):
        _offset(e)
    sa = a.update(_quats(angles), np.ones(9, dtype=bool), 0)
    sb = b.update(_quats(angles), np.ones(9, dtype=bool), 0)
    assert sa.frame_ids == sb.frame_ids == ["imu_0", "imu_2", "imu_4", "imu_6", "imu_8", "vine_imu_tip"]
    assert np.allclose(sa.poses, sb.poses)
    assert sa.diagnostics[0].level == DiagnosticLevel.OK  # unselected sensors are not "missing"
    # the body still ends at the last IMU: straight on from the last used one when that is the last
    straight = _estimator(9, every_k=4)
    _offset(straight)
    s0 = straight.update(_quats(np.zeros(9)), np.ones(9, dtype=bool), 0)
    assert np.allclose(s0.tip_pose[:3, 3], [0, 0, 8 * L])
    s3 = _estimator(9, every_k=3)  # uses 0, 3, 6: the tip is 2 L beyond sensor 6
    _offset(s3)
    assert np.allclose(s3.update(_quats(np.zeros(9)), np.ones(9, dtype=bool), 0).tip_pose[:3, 3], [0, 0, 8 * L])


def test_partial_growth_uses_everted_sensors_and_a_partial_last_segment() -> None:
    n = 6
    angles = np.array([0, 0.2, 0.4, 0.6, 0.0, 0.0])
    quats = _quats(angles)
    quats[4:] = Rotation.from_rotvec([[2.0, 1.0, 0.0], [0.0, 3.0, 0.0]]).as_quat()  # garbage inside the body
    est = _estimator(n)
    _offset(est)
    length = 3 * L + 0.04  # sensors 0..3 out, 4 cm of the next segment
    got = est.update(quats, np.ones(n, dtype=bool), 0, length=length)
    assert got.frame_ids[:-1] == ["imu_0", "imu_1", "imu_2", "imu_3"]
    tangent = Rotation.from_rotvec([0.6, 0, 0]).apply([0, 0, 1])
    centre3 = got.poses[3, :3, 3] - Rotation.from_rotvec([0.6, 0, 0]).apply([D / 2, 0, 0])
    assert np.allclose(got.tip_pose[:3, 3], centre3 + 0.04 * tangent, atol=1e-12)


def test_before_offset_and_capture_errors() -> None:
    est = _estimator(3)
    with pytest.raises(NotOffsetError, match="straight reference"):
        est.update(_quats(np.zeros(3)), np.ones(3, dtype=bool), 0)
    with pytest.raises(ValueError, match="no sensor has a valid reading"):
        est.capture_offset(_quats(np.zeros(3)), np.zeros(3, dtype=bool), 0)


def test_config_errors() -> None:
    with pytest.raises(ValueError, match="'sensor_positions' has 2 values: expected one per IMU topic"):
        _estimator(3, sensor_positions=[0.0, 0.1])
    with pytest.raises(ValueError, match="expected strictly increasing"):
        _estimator(3, sensor_positions=[0.0, 0.2, 0.1])
    with pytest.raises(ValueError, match=r"'use_sensors' = \[0, 5\]: indices \[5\] >= 3 sensors"):
        _estimator(3, use_sensors=[0, 5])
    with pytest.raises(ValueError, match="parameter 'imu_topics'.*values must be unique"):
        SCHEMA.validate({"imu_topics": ["a", "a"]})


def test_covariance_matches_monte_carlo() -> None:
    n = 10
    sigma = np.deg2rad(1.0)
    angles = np.linspace(0, 1.2, n)
    # the readings' term alone (the model-error, mounting and heading-reference terms have their own Monte Carlo,
    # test_hinge_arc_consistency.py, against the simulator)
    est = _estimator(n, orientation_noise_deg=1.0, drift_deg_per_min=0.0, curvature_variation_factor=0.0,
                     first_mount_stddev_deg=0.0, heading_reference_stddev_deg=0.0)  # fmt: skip
    _offset(est)
    base = Rotation.from_rotvec(np.outer(angles, [1, 0, 0]))
    predicted = est.update(base.as_quat(), np.ones(n, dtype=bool), 0).position_covariance
    assert predicted is not None
    rng = np.random.default_rng(0)
    tips = []
    mids = []
    for _ in range(3000):
        # the model's error: each backbone frame off by a small world rotation of variance 2 sigma^2
        noise = Rotation.from_rotvec(rng.normal(0, sigma * np.sqrt(2), (n, 3)))
        shape = est.update((noise * base).as_quat(), np.ones(n, dtype=bool), 0)
        tips.append(shape.tip_pose[:3, 3])
        mids.append(shape.poses[4, :3, 3])
    # First order against Monte Carlo at the tip and at a middle sensor: every principal spread within 15 %
    # and the whole matrix within 15 % (Frobenius).
    for samples, pred in ((tips, predicted[-1]), (mids, predicted[4])):
        emp = np.cov(np.asarray(samples).T)
        w_emp, w_pred = np.linalg.eigvalsh(emp), np.linalg.eigvalsh(pred)
        assert np.allclose(np.sqrt(w_pred), np.sqrt(w_emp), rtol=0.15), (w_pred, w_emp)
        assert np.linalg.norm(pred - emp) < 0.15 * np.linalg.norm(emp)


def test_uncertainty_grows_with_time_since_offset() -> None:
    # the readings' terms alone (the mounting and the model's are constant in time): per axis 2 (0.5 deg)^2 at
    # the offset, and (1.33 deg/min * 2 min)^2 / 3 more two minutes later (the drift's size, about an unknown
    # axis), 5.7 times as much; the covariance, linear in it but for the shortening's bias, grows with it
    est = _estimator(5, drift_deg_per_min=1.33, first_mount_stddev_deg=0.0, heading_reference_stddev_deg=0.0,
                     curvature_variation_factor=0.0)  # fmt: skip
    _offset(est)
    q = _quats(np.linspace(0, 0.5, 5))
    c0 = est.update(q, np.ones(5, dtype=bool), 0).position_covariance
    c1 = est.update(q, np.ones(5, dtype=bool), 120_000_000_000).position_covariance
    assert c0 is not None and c1 is not None
    ratio = np.trace(c1[-1]) / np.trace(c0[-1])
    assert 4.0 < ratio < 7.0, ratio


def test_twist_residual_is_reported_and_does_not_move_the_centreline() -> None:
    n = 4
    bend = Rotation.from_rotvec(np.outer([0, 0, 0.4, 0.4], [1, 0, 0]))
    twist = Rotation.from_rotvec(np.outer([0, 0, 0, 0.3], [0, 0, 1]))
    est = _estimator(n)
    _offset(est)
    plain = est.update(bend.as_quat(), np.ones(n, dtype=bool), 0)
    twisted = est.update((bend * twist).as_quat(), np.ones(n, dtype=bool), 0)
    assert np.allclose(plain.backbone, twisted.backbone)
    assert float(twisted.diagnostics[0].values["max_twist_residual_deg"]) == pytest.approx(np.degrees(0.3), abs=0.01)


def test_skew_is_the_exact_cross_product_matrix() -> None:
    rng = np.random.default_rng(5)
    v = rng.normal(size=(40, 3)) * rng.choice([1e-9, 1.0, 1e9], size=(40, 1))
    w = rng.normal(size=(40, 3))
    S = _skew(v)
    scale = np.linalg.norm(v, axis=1) * np.linalg.norm(w, axis=1)
    assert np.all(np.abs(np.einsum("kij,kj->ki", S, w) - np.cross(v, w)) <= 1e-15 * scale[:, None])
    # entries are the components themselves, exactly
    assert np.array_equal(S, -np.swapaxes(S, 1, 2)) and not S[:, [0, 1, 2], [0, 1, 2]].any()
    assert np.array_equal(np.stack([S[:, 2, 1], S[:, 0, 2], S[:, 1, 0]], axis=1), v)


def test_straight_robot_with_first_sensor_at_base_reports_no_bend_past_l_over_d() -> None:
    """With ``first_sensor: 0`` the base-to-sensor-0 segment has zero length: noise there is not a bend.

    Today's bug: ``over_at = 0 / D = 0``, so 0.05 deg of noise on sensor 0 made every estimate WARN.
    """
    est = _estimator(6, first_sensor=0.0)
    _offset(est)
    rng = np.random.default_rng(3)
    noise = Rotation.from_rotvec(rng.normal(0.0, np.deg2rad(0.05), (6, 3)))
    shape = est.update((noise * Rotation.from_quat(_quats(np.zeros(6)))).as_quat(), np.ones(6, dtype=bool), 0)
    diag = shape.diagnostics[0]
    assert diag.values["segments_past_L_over_D"] == "0"
    assert diag.level == DiagnosticLevel.OK, diag.message
    # A real bend past L/D between two spaced sensors still warns.
    angles = np.array([0, 0, 1.2, 1.2, 1.2, 1.2])  # 1.2 rad > L/D = 0.79
    shape = est.update(_quats(angles), np.ones(6, dtype=bool), 0)
    assert shape.diagnostics[0].values["segments_past_L_over_D"] == "1"
    assert shape.diagnostics[0].level == DiagnosticLevel.WARN


@pytest.mark.parametrize("params", [{"every_k": 50}, {"every_k": 40}, {"every_k": 18}, {"use_sensors": [0]}])
def test_subsets_that_see_no_bend_are_refused(params: dict[str, object]) -> None:
    """18 IMUs, the first at the base: a subset holding only sensor 0 estimates a straight line whatever happens."""
    p = SCHEMA.defaults() | {"imu_topics": [f"imu_{i}/data" for i in range(18)]} | params
    with pytest.raises(ValueError, match=r"expected at least one used IMU beyond the base"):
        HingeArcConfig.from_params(p)
    # Just inside the limit still works: sensors 0 and 17.
    cfg = HingeArcConfig.from_params(SCHEMA.defaults() | {"imu_topics": p["imu_topics"], "every_k": 17})
    assert np.flatnonzero(cfg.used).tolist() == [0, 17]


def test_demo_with_an_unusable_subset_exits_non_zero(tmp_path, capsys) -> None:
    from shape_sensing.cli import main

    assert main(["demo", "vine-imu", "--every-k", "40", "--duration", "1", "--out", str(tmp_path)]) == 2
    assert "'every_k' = 40" in capsys.readouterr().err
    assert not (tmp_path / "vine-imu.mcap").exists()


@pytest.mark.parametrize(("every_k", "first_sensor"), [(1, 0.0), (3, 0.05), (5, 0.0)])
def test_update_many_gives_the_bits_of_one_update_per_tick(every_k: int, first_sensor: float) -> None:
    # Ticks with sensors missing (none at all at one tick), unnormalised quaternions, lengths and none, and
    # a straight reference from arbitrary mountings: every tick's numbers must equal a lone update's.
    n, T = 12, 120
    est = _estimator(n, every_k=every_k, first_sensor=first_sensor, tip_offset=0.03)
    est.capture_offset(Rotation.random(n, random_state=1).as_quat(), np.ones(n, dtype=bool), 5)
    rng = np.random.default_rng(every_k)
    q = Rotation.from_rotvec(rng.normal(0, 0.6, (T * n, 3))).as_quat().reshape(T, n, 4)
    q *= rng.uniform(0.7, 1.3, (T, n, 1))
    valid = rng.random((T, n)) > 0.15
    valid[7] = False
    lengths = np.where(rng.random(T) > 0.5, rng.uniform(0.0, 1.4, T), np.nan)
    stamps = 10**9 + 33_000_000 * np.arange(T)
    many = est.update_many(q, valid, stamps, lengths)
    assert len({len(s.frame_ids) for s in many}) > 3  # several groups of ticks
    for t in range(T):
        one = est.update(q[t], valid[t], int(stamps[t]), None if np.isnan(lengths[t]) else float(lengths[t]))
        for name in ("poses", "position_covariance", "backbone"):
            a, b = getattr(many[t], name), getattr(one, name)
            assert a.shape == b.shape and a.tobytes() == b.tobytes(), (t, name)
        assert (many[t].length, many[t].stamp_ns, many[t].frame_ids) == (one.length, one.stamp_ns, one.frame_ids)
        assert many[t].diagnostics == one.diagnostics


def test_3x3_products_of_a_stack_are_the_bits_of_each_product_alone() -> None:
    # The kernel's products go through numpy's plain matmul loop (no BLAS) whatever the stack's size and the
    # operands' layout (contiguous, transposed, broadcast): a big stack gives every matrix the bits it gets alone.
    from shape_sensing.estimators.hinge_arc import _mat_vec, _mm, _rows_times

    rng = np.random.default_rng(17)
    A, B = rng.normal(size=(2, 700, 6, 3, 3))
    v = rng.normal(size=(700, 6, 3))
    W = rng.normal(size=(3, 3))
    for a, b in ((A, B), (A.swapaxes(-1, -2), B), (W, B), (A, B[0].swapaxes(-1, -2))):
        many = _mm(a, b)
        assert np.allclose(many, np.matmul(a, b), rtol=0, atol=1e-14)
        for t in (0, 1, 350, 699):
            one = _mm(a[t : t + 1] if a.ndim == 4 else a, b[t : t + 1] if b.ndim == 4 else b)
            assert one.tobytes() == many[t : t + 1].tobytes(), t
    mv = _mat_vec(A, v, np.empty((700, 6, 3)))
    rows = _rows_times(v, B)
    assert np.allclose(mv, np.einsum("...ij,...j->...i", A, v), rtol=0, atol=1e-14)
    assert np.allclose(rows, np.einsum("...j,...ji->...i", v, B), rtol=0, atol=1e-14)
    for t in (0, 411):
        assert _mat_vec(A[t : t + 1], v[t : t + 1], np.empty((1, 6, 3))).tobytes() == mv[t : t + 1].tobytes()
        assert _rows_times(v[t : t + 1], B[t : t + 1]).tobytes() == rows[t : t + 1].tobytes()


def test_quaternion_matrices_match_scipy() -> None:
    from shape_sensing.estimators.hinge_arc import quats_to_matrices

    q = Rotation.random(500, random_state=3).as_quat() * np.random.default_rng(3).uniform(0.5, 2.0, (500, 1))
    assert np.allclose(quats_to_matrices(q), Rotation.from_quat(q).as_matrix(), atol=1e-15, rtol=0)
    assert quats_to_matrices(np.zeros((0, 4))).shape == (0, 3, 3)


def test_sensor_and_backbone_frames_from_quaternion_products_match_scipy() -> None:
    """W^T R(q) and W^T R(q) M^T made in one product from q's products equal the matrix products to rounding."""
    from shape_sensing.estimators.hinge_arc import _frame_coefficients

    rng = np.random.default_rng(8)
    W = Rotation.random(random_state=4).as_matrix()
    M = Rotation.random(6, random_state=5).as_matrix()
    q = Rotation.random(6, random_state=6).as_quat() * rng.uniform(0.5, 2.0, (6, 1))  # not normalised
    coef = _frame_coefficients(W.T, np.swapaxes(M, 1, 2))
    prods = (q[:, :, None] * q[:, None, :]).reshape(6, 1, 16)
    r = np.matmul(prods, coef)[:, 0, :]
    frames = (r[:, :18] / r[:, 18:]).reshape(6, 2, 3, 3)
    R = Rotation.from_quat(q).as_matrix()
    assert np.allclose(frames[:, 0], W.T @ R, atol=2e-15, rtol=0)
    assert np.allclose(frames[:, 1], W.T @ R @ np.swapaxes(M, 1, 2), atol=2e-15, rtol=0)


def test_curvature_variation_term_matches_a_step_in_curvature_anywhere_along_a_segment() -> None:
    # A continuous body (integrated here, not by the estimator) whose curvature steps from k0 to k0 + dk at a point
    # u of the way along its third segment, u uniform: against the hinge, the tip moves across by the curvature's
    # first moment about the segment's middle, u (1 - u) L^2 dk / 2, whose mean square over u is L^4 dk^2 / 120.
    # The term charges (c L^2)^2 (d-^2 + d+^2) to the stepped segment and its two neighbours, 4/3 dk^2 (c L^2)^2
    # on average: c = 1 / sqrt(160) must give that mean square. Small bends (under 2 deg a segment) and a thin
    # wall keep the hinge's other errors small, and those (its chord length, the shortening) lie along the tip's
    # tangent: the errors are compared across it, where the term is.
    n, k0, dk = 7, 0.0, 0.3
    est = _estimator(n, diameter=1e-3, first_sensor=0.0, orientation_noise_deg=0.0, drift_deg_per_min=0.0,
                     first_mount_stddev_deg=0.0, heading_reference_stddev_deg=0.0,
                     curvature_variation_factor=1.0 / np.sqrt(160.0))  # fmt: skip
    _offset(est)
    s = np.linspace(0.0, (n - 1) * L, 6001)
    errors, predicted = [], []
    for u in np.linspace(0.0, 1.0, 101)[1:-1]:
        kappa = k0 + dk * (s >= (2 + u) * L)
        theta = np.concatenate([[0.0], np.cumsum(0.5 * (kappa[1:] + kappa[:-1]) * np.diff(s))])
        th_mid = 0.5 * (theta[1:] + theta[:-1])
        tip = np.array([0.0, -np.sum(np.sin(th_mid) * np.diff(s)), np.sum(np.cos(th_mid) * np.diff(s))])
        shape = est.update(_quats(np.interp(np.arange(n) * L, s, theta)), np.ones(n, dtype=bool), 0)
        assert shape.position_covariance is not None
        e = shape.poses[-1, :3, 3] - tip
        tangent = shape.poses[-1, :3, 2]
        errors.append(e - tangent * (e @ tangent))
        predicted.append(np.trace(shape.position_covariance[-1]))
    e = np.asarray(errors)
    mean_square = float(np.mean(np.sum(e * e, axis=1)))
    assert mean_square == pytest.approx(L**4 * dk**2 / 120.0, rel=0.1)  # the geometry is what the term assumes
    assert float(np.mean(predicted)) == pytest.approx(mean_square, rel=0.1)
    # and a constant curvature, which the hinge puts right, is charged almost nothing
    flat = est.update(_quats(np.arange(n) * L * k0), np.ones(n, dtype=bool), 0).position_covariance
    assert flat is not None and np.trace(flat[-1]) < 1e-6 * mean_square


def test_along_tangent_ratio_is_the_step_in_curvatures_second_order_move() -> None:
    # A segment that turns by theta with mean curvature theta / L: a step dk at a uniformly random point u moves
    # its next node, against the constant curvature of the same turn, across by int Delta dx and along the middle
    # tangent by (theta / L) int x Delta dx (Delta the turn's deviation, x from the middle; second order). The
    # constant of the along term is the rms ratio of the two over u, per radian of turn, integrated here on a fine
    # grid of the body (not the estimator's formula).
    from shape_sensing.estimators.hinge_arc import _ALONG_PER_TURN

    x = np.linspace(-0.5, 0.5, 4001)  # L = 1
    across, along = [], []
    for u in np.linspace(0.0, 1.0, 401)[1:-1]:
        dev = (x >= u - 0.5) - (1.0 - u)  # the step's curvature, less its mean
        turn = np.concatenate([[0.0], np.cumsum(0.5 * (dev[1:] + dev[:-1]) * np.diff(x))])
        across.append(np.sum(0.5 * (turn[1:] + turn[:-1]) * np.diff(x)))
        along.append(np.sum(0.5 * (x[1:] * turn[1:] + x[:-1] * turn[:-1]) * np.diff(x)))
    ratio = np.sqrt(np.mean(np.square(along))) / np.sqrt(np.mean(np.square(across)))
    assert ratio == pytest.approx(_ALONG_PER_TURN, rel=0.02)
    # the across moment's rms is the step term's L^2 dk / sqrt(120) (as the test above relies on)
    assert np.sqrt(np.mean(np.square(across))) == pytest.approx(1.0 / np.sqrt(120.0), rel=0.02)
