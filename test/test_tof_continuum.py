"""ToF localisation on the continuum estimator (seed 001): Table I, Jacobians by finite differences, an analytic
localisation between known planes, strain conventions, and a short simulated run."""

from __future__ import annotations

import numpy as np
import pytest

from shape_sensing.estimators.continuum import lie
from shape_sensing.estimators.continuum.estimator import BatchEstimator
from shape_sensing.estimators.continuum.model import DOF, Measurements, Weights
from shape_sensing.estimators.continuum.synthetic import bending_strain, sample_grid
from shape_sensing.estimators.continuum.tof import (
    frame_points,
    ring_mounts,
    stationary_bias,
    strain_factor,
    strain_measurement,
    table_i_sigma,
    tof_factor,
    zone_directions,
)
from shape_sensing.io.maps import PriorMap
from shape_sensing.sim.tof_scene import Plane, Scene


def test_table_i_noise() -> None:
    d = np.array([0.02, 0.025, 0.3125, 0.6, 0.9, 1.2, 2.0, np.nan])
    want = [np.nan, 0.014 * 0.025, 0.013 * 0.3125, 0.012 * 0.6, 0.009 * 0.9, 0.006 * 1.2, 0.006 * 2.0, np.nan]
    np.testing.assert_allclose(table_i_sigma(d), want, rtol=1e-12)


def test_zone_points_are_boresight_distance_times_tangents() -> None:
    u = zone_directions(8, np.deg2rad(45.0))
    assert u.shape == (64, 3) and np.all(u[:, 2] == 1.0)
    # zone (row 0, col 0) is at -x, -y; the corner zone centres sit 7/16 of the field of view off axis
    np.testing.assert_allclose(u[0, :2], np.tan(-np.deg2rad(45.0) * 7 / 16))
    np.testing.assert_allclose(u[7, 0], np.tan(np.deg2rad(45.0) * 7 / 16))  # col 7: +x
    m = ring_mounts([0.3], 0.03)[0]
    d = np.full(64, 0.5)
    st = np.full(64, 5, dtype=np.uint8)
    st[3] = 3  # sigma too high
    d[5] = np.nan
    d[6] = 0.01  # below Table I's minimum
    q, sig, bad = frame_points(m, d, st)
    assert bad == 3 and q.shape == (61, 3) and np.all(np.isfinite(sig))
    # sensor 0 of ring 0 looks along the ring's +x from radius 0.03: boresight distance 0.5 -> x = 0.53
    np.testing.assert_allclose(q[:, 0], 0.53)


def _tilted_plane_map() -> PriorMap:
    g = np.linspace(-3, 3, 121)
    X, Y = np.meshgrid(g, g)
    P = np.column_stack([X.ravel(), Y.ravel(), 0.5 + 0 * X.ravel()])
    R = lie.exp(np.array([[0, 0, 0, 0.3, 0.2, 0.1]]))[0][:3, :3]
    return PriorMap(P @ R.T)


def test_tof_factor_jacobian_by_finite_differences() -> None:
    rng = np.random.default_rng(0)
    m = _tilted_plane_map()
    st = sample_grid(bending_strain(2.0), np.array([0, 0.1, 0.2]), np.array([0, 0.2, 0.4]))
    T, eps, varpi = st.T.reshape(-1, 4, 4), st.eps.reshape(-1, 6), st.varpi.reshape(-1, 6)
    nodes = (np.array([0, 1]), np.array([3, 4]), np.array([1, 2]), np.array([4, 5]))
    cells = (nodes, np.array([0.3, 0.7]), np.array([0.1, 0.1]), np.array([0.4, 1.0]), np.array([0.2, 0.2]))
    P = 200
    frame = rng.integers(0, 2, P)
    q = rng.normal(scale=0.3, size=(P, 3))
    sig = np.full(P, 0.01)

    def residuals(T: np.ndarray, eps: np.ndarray, varpi: np.ndarray) -> np.ndarray:
        out: list = []
        tof_factor(
            T,
            eps,
            varpi,
            cells,
            frame,
            q,
            sig,
            m,
            cauchy=None,
            gate=10.0,
            outlier_gate=None,
            anomaly_tau=None,
            details=out,
        )
        return np.asarray(out[0].r)

    b = tof_factor(T, eps, varpi, cells, frame, q, sig, m, cauchy=None, gate=10.0, outlier_gate=None, anomaly_tau=None)
    r0 = residuals(T, eps, varpi)
    assert r0.size == P and b.cost == pytest.approx(0.5 * float(r0 @ r0))
    n = T.shape[0]
    Jfd = np.zeros((P, n * DOF))
    h = 1e-6
    for i in range(n):
        for k in range(DOF):
            d = np.zeros(DOF)
            d[k] = h
            T2, e2, v2 = T.copy(), eps.copy(), varpi.copy()
            T2[i] = T[i] @ lie.exp(d[None, :6])[0]
            e2[i] += d[6:12]
            v2[i] += d[12:]
            Jfd[:, i * DOF + k] = (residuals(T2, e2, v2) - r0) / h
    # the summed (information-form) factor holds the per-point factors' J^T J and J^T r
    assert b.info is not None
    H = np.zeros((n * DOF, n * DOF))
    g = np.zeros(n * DOF)
    for f in range(b.size):
        var = np.concatenate([np.arange(DOF) + slot[f] * DOF for slot in b.nodes])
        H[np.ix_(var, var)] += b.info[0][f]
        g[var] += b.info[1][f]
    np.testing.assert_allclose(H, Jfd.T @ Jfd, atol=1e-6 * np.abs(H).max())
    np.testing.assert_allclose(g, Jfd.T @ r0, atol=1e-5 * np.abs(g).max())
    # Cauchy IRLS weights of Eq. 3: 1 / (1 + r^2)
    out: list = []
    tof_factor(
        T, eps, varpi, cells, frame, q, sig, m, cauchy=1.0, gate=10.0, outlier_gate=None, anomaly_tau=None, details=out
    )
    np.testing.assert_allclose(out[0].weight, 1.0 / (1.0 + r0**2))


def _box_scene() -> Scene:
    parts = []
    for axis, sign in ((0, 1), (0, -1), (1, 1), (1, -1)):
        T = np.eye(4)
        n = np.zeros(3)
        n[axis] = sign
        a = np.zeros(3)
        a[2] = 1.0
        T[:3, :3] = np.column_stack([a, np.cross(n, a), n])
        T[:3, 3] = 0.25 * n + np.array([0, 0, 0.5])
        parts.append(Plane(f"wall{axis}{sign}", pose=T, size=(3.0, 1.0)))
    T = np.eye(4)
    T[:3, 3] = [0, 0, 0.95]
    parts.append(Plane("end", pose=T, size=(1.0, 1.0)))
    # a few boxes break the duct's symmetries
    T = np.eye(4)
    T[:3, 3] = [0.22, 0.1, 0.45]
    parts.append(Plane("step", pose=lie.exp(np.array([[0.2, 0.1, 0.45, 0.0, 0.6, 0.3]]))[0], size=(0.1, 0.2)))
    return Scene("box", parts)


def test_straight_robot_between_known_planes_recovers_its_pose() -> None:
    """Noise-free zones of a straight 0.6 m robot in a square duct: the base, 3 cm and 2 deg off the prior's
    guess, is found from the ToF points alone (gyro and strain absent)."""
    scene = _box_scene()
    trimesh = pytest.importorskip("trimesh")
    mesh = trimesh.util.concatenate([p.mesh() for p in scene.parts])
    tof_map = PriorMap.from_mesh(mesh, spacing=0.01)
    mounts = ring_mounts([0.3, 0.6], 0.02, tip_forward=True)
    true_base = lie.exp(np.array([[0.02, -0.015, 0.03, 0.035, -0.02, 0.03]]))[0]
    meas = Measurements(tof_map=tof_map)
    qs, ss, sg = [], [], []
    for m in mounts:
        Ts = true_base @ lie.exp(np.array([[0, 0, m.s, 0, 0, 0]]))[0] @ m.T_ring_sensor
        u = zone_directions(8, m.fov) @ Ts[:3, :3].T
        lam, _ = scene.cast(np.repeat(Ts[None, :3, 3], 64, axis=0), u)
        q, sig, _ = frame_points(m, np.where(np.isfinite(lam), lam, np.nan))
        qs.append(q)
        sg.append(sig)
        ss.append(np.full(sig.size, m.s))
    q, sig, s = np.concatenate(qs), np.concatenate(sg), np.concatenate(ss)
    meas.tof_q = np.concatenate([q, q])
    meas.tof_sigma = np.concatenate([sig, sig])
    meas.tof_s = np.concatenate([s, s])
    meas.tof_t = np.repeat([0.0, 0.2], q.shape[0])
    w = Weights(
        P0=np.array([1.0] * 6 + [1e-8] * 6 + [1e-6] * 6),
        Q1=np.full(6, 1e-6),
        Q2=np.full(6, 1e-8),
        Q3=np.full(6, 1e-8),
        R_pose=np.ones(6),
        R_gyro=np.ones(3),
        tof_gate=0.2,
    )
    res = BatchEstimator(w, np.array([0.0, 0.15, 0.3, 0.45, 0.6]), 5.0, max_iterations=40).solve(meas, 0.0, 0.2)
    for k in range(res.state.K):
        for n, s_n in enumerate(res.state.s):
            want = true_base @ lie.exp(np.array([[0, 0, s_n, 0, 0, 0]]))[0]
            err = lie.log(lie.inv(want)[None] @ res.state.T[k, n][None])[0]
            assert np.linalg.norm(err[:3]) < 1e-3, (k, n, err)  # < 1 mm (map sampled every 1 cm)
            assert np.linalg.norm(err[3:]) < np.deg2rad(0.1), (k, n, err)


def test_strain_measurement_convention_and_factor() -> None:
    # bending towards +x (theta = 0) with curvature 2: dz/ds = (kappa, 0, 0) needs angular strain (0, 2, 0)
    k, W = strain_measurement(np.array([0.0]), np.array([2.0]), 0.015, 0.01)
    np.testing.assert_allclose(k, [[0.0, 2.0]], atol=1e-12)
    T = lie.exp(np.array([[0, 0, 1e-3, k[0, 0] * 1e-3, k[0, 1] * 1e-3, 0]]))[0]
    assert T[0, 3] > 0  # the backbone moves towards +x
    # whitening: along the bend 1 / sigma_kappa, across it 1 / sqrt((kappa sigma_theta)^2 + sigma_kappa^2)
    np.testing.assert_allclose(np.linalg.inv(W[0].T @ W[0]), np.diag([(2 * 0.015) ** 2 + 1e-4, 1e-4]), rtol=1e-9)
    # the factor is linear: its residual is its Jacobian times the strain
    eps = np.zeros((4, 6))
    eps[:, 3:5] = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0]])
    nodes = tuple(np.array([i]) for i in range(4))
    b = strain_factor(eps, nodes, np.array([0.25]), np.array([0.5]), np.zeros((1, 2)), np.eye(2)[None], folded=False)  # type: ignore[arg-type]
    want = 0.75 * 0.5 * eps[0, 3:5] + 0.25 * 0.5 * eps[1, 3:5] + 0.75 * 0.5 * eps[2, 3:5] + 0.25 * 0.5 * eps[3, 3:5]
    np.testing.assert_allclose(b.r[0], want)
    np.testing.assert_allclose(sum(J[0, :, 6:12] @ eps[i] for i, J in enumerate(b.jac)), want)


def test_stationary_bias() -> None:
    t = np.repeat(np.arange(0, 2, 0.01), 2)
    s = np.tile([0.3, 0.6], 200)
    w = np.where(s[:, None] == 0.3, [0.01, -0.02, 0.03], [0.0, 0.05, 0.0]) + np.where(t[:, None] > 1.0, 1.0, 0.0)
    b = stationary_bias(t, s, w, 1.0)
    np.testing.assert_allclose(b[0.3], [0.01, -0.02, 0.03])
    np.testing.assert_allclose(b[0.6], [0.0, 0.05, 0.0])
    from shape_sensing.estimators.continuum.errors import ContinuumError

    with pytest.raises(ContinuumError, match="no reading before"):
        stationary_bias(t + 5.0, s, w, 1.0)


def test_tof_messages_round_trip_through_cdr() -> None:
    import struct

    from shape_sensing.messages.factory import default_factory
    from shape_sensing.messages.tof import (
        point_cloud2_msg,
        point_cloud2_to_arrays,
        shape_samples_from_msg,
        shape_samples_msg,
        tof_frame_from_msg,
        tof_frame_msg,
    )

    f = default_factory()

    def cdr(msg: object, t: str) -> object:
        return f.typestore.deserialize_cdr(f.typestore.serialize_cdr(msg, t), t)

    d = np.linspace(0.1, 2.0, 64)
    d[5] = np.nan
    st = np.full(64, 5, np.uint8)
    st[5] = 255
    from shape_sensing.demos.tof_continuum import sim_reading

    msg = tof_frame_msg(sim_reading(7, d, st, 0), "tof_0_1")
    stamp, frame, d2, st2 = tof_frame_from_msg(cdr(msg, "shape_sensing/msg/TofFrame"))
    assert (stamp, frame) == (7, "tof_0_1") and np.array_equal(st2, st)
    np.testing.assert_allclose(d2, d.astype(np.float32), equal_nan=True)
    pts = np.random.default_rng(0).normal(size=(20, 3))
    m = cdr(point_cloud2_msg(9, "base", pts, {"m2": np.arange(20.0)}), "sensor_msgs/msg/PointCloud2")
    back = point_cloud2_to_arrays(m)
    np.testing.assert_allclose(np.column_stack([back["x"], back["y"], back["z"]]), pts, rtol=1e-6)
    # independent decoding of point 3 by the fields' offsets
    raw = bytes(np.asarray(m.data, dtype=np.uint8))
    off = {fd.name: fd.offset for fd in m.fields}
    assert struct.unpack_from("<f", raw, 3 * m.point_step + off["m2"])[0] == 3.0
    assert struct.unpack_from("<f", raw, 3 * m.point_step + off["y"])[0] == pytest.approx(pts[3, 1], rel=1e-6)
    T = lie.exp(np.array([[0.1, 0.2, 0.3, 0.4, -0.2, 0.1], [0, 0, 0.3, 0, 0, 0]]))
    _, s_back, T2 = shape_samples_from_msg(
        cdr(shape_samples_msg(3, "base", "x", np.array([0.0, 0.3]), T), "shape_sensing/msg/ShapeSamples")
    )
    np.testing.assert_allclose(T2, T, atol=1e-12)
    np.testing.assert_allclose(s_back, [0.0, 0.3])


def test_ring_mounts_match_the_ring_drivers_optical_frames() -> None:
    from shape_sensing.drivers.tof_ring import tof_mount

    mounts = ring_mounts([0.13, 0.30, 0.47], 0.038)
    for i, m in enumerate(mounts):
        ring, k = divmod(i, 3)
        np.testing.assert_allclose(m.T_ring_sensor, tof_mount(60.0 * ring + 120.0 * k, 0.038), atol=1e-12)


def _straight_robot_measurements(scene: Scene, tof_map: PriorMap, true_base: np.ndarray) -> tuple[Measurements, int]:
    """Noise-free zones of the 0.6 m straight robot of the test above, at two times, in ``scene``; and how many
    of one time's zones hit a part the map lacks."""
    mounts = ring_mounts([0.3, 0.6], 0.02, tip_forward=True)
    qs, ss, sg = [], [], []
    on_added = 0
    for m in mounts:
        Ts = true_base @ lie.exp(np.array([[0, 0, m.s, 0, 0, 0]]))[0] @ m.T_ring_sensor
        u = zone_directions(8, m.fov) @ Ts[:3, :3].T
        lam, part = scene.cast(np.repeat(Ts[None, :3, 3], 64, axis=0), u)
        on_added += int(np.sum(scene.added_mask()[part[part >= 0]]))
        q, sig, _ = frame_points(m, np.where(np.isfinite(lam), lam, np.nan))
        qs.append(q)
        sg.append(sig)
        ss.append(np.full(sig.size, m.s))
    q, sig, s = np.concatenate(qs), np.concatenate(sg), np.concatenate(ss)
    meas = Measurements(tof_map=tof_map)
    meas.tof_q = np.concatenate([q, q])
    meas.tof_sigma = np.concatenate([sig, sig])
    meas.tof_s = np.concatenate([s, s])
    meas.tof_t = np.repeat([0.0, 0.2], q.shape[0])
    return meas, on_added


def _base_error(meas: Measurements, true_base: np.ndarray) -> float:
    w = Weights(
        P0=np.array([1.0] * 6 + [1e-8] * 6 + [1e-6] * 6),
        Q1=np.full(6, 1e-6),
        Q2=np.full(6, 1e-8),
        Q3=np.full(6, 1e-8),
        R_pose=np.ones(6),
        R_gyro=np.ones(3),
        tof_gate=0.2,
    )
    res = BatchEstimator(w, np.array([0.0, 0.15, 0.3, 0.45, 0.6]), 5.0, max_iterations=40).solve(meas, 0.0, 0.2)
    errs = []
    for k in range(res.state.K):
        for n, s_n in enumerate(res.state.s):
            want = true_base @ lie.exp(np.array([[0, 0, s_n, 0, 0, 0]]))[0]
            errs.append(np.linalg.norm(lie.log(lie.inv(want)[None] @ res.state.T[k, n][None])[0][:3]))
    return float(np.max(errs))


def test_wall_of_unmodelled_points_does_not_pull_the_pose(monkeypatch: pytest.MonkeyPatch) -> None:
    """A panel 4 cm in front of the duct's +x wall, not in the map, fills a sensor's view: with the point-to-plane
    gate and the Eq. 12 rejection the pose is found as without the panel (< 1 mm, the map's sampling); with
    Eq. 1-3 alone (Cauchy by IRLS, 0.2 m gate) the panel's points, all 4 cm (about 15 sigma) off the wall they
    are matched to, pull the robot towards the wall by a few millimetres. The analytic answer is the true pose."""
    trimesh = pytest.importorskip("trimesh")
    scene = _box_scene()
    tof_map = PriorMap.from_mesh(trimesh.util.concatenate([p.mesh() for p in scene.parts]), spacing=0.01)
    T = np.eye(4)
    T[:3, :3] = np.column_stack([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]])
    T[:3, 3] = [0.21, 0.0, 0.3]
    panel = Plane("panel", pose=T, size=(0.5, 0.5), added=True)
    with_panel = Scene("box+panel", [*scene.parts, panel])
    true_base = lie.exp(np.array([[0.02, -0.015, 0.03, 0.035, -0.02, 0.03]]))[0]
    meas, on_panel = _straight_robot_measurements(with_panel, tof_map, true_base)
    assert on_panel >= 64  # at least a whole sensor's view is on the panel
    gated = _base_error(meas, true_base)
    assert gated < 1e-3, gated
    kw = tof_factor.__kwdefaults__
    assert kw is not None
    monkeypatch.setitem(kw, "outlier_gate", None)
    monkeypatch.setitem(kw, "anomaly_tau", None)
    legacy = _base_error(meas, true_base)
    print(
        f"panel zones {on_panel}, largest node error: gated {gated * 1e3:.3f} mm, Eq. 1-3 alone {legacy * 1e3:.3f} mm"
    )
    assert legacy > 2e-3, legacy  # the case can fail: without the gates the panel moves the estimate


def test_outlier_gate_truncates_the_cauchy_cost_and_widens_with_the_residual_scale() -> None:
    """Points beyond the gate weigh nothing and cost the Cauchy cost at the gate (continuous in the error); the
    gate is widened by 1.4826 median |r| when the residuals are large (a far-off estimate) and is nominal when
    they are small."""
    m = _tilted_plane_map()
    st = sample_grid(bending_strain(2.0), np.array([0, 0.1, 0.2]), np.array([0, 0.2, 0.4]))
    T, eps, varpi = st.T.reshape(-1, 4, 4), st.eps.reshape(-1, 6), st.varpi.reshape(-1, 6)
    nodes = (np.array([0, 1]), np.array([3, 4]), np.array([1, 2]), np.array([4, 5]))
    cells = (nodes, np.array([0.3, 0.7]), np.array([0.1, 0.1]), np.array([0.4, 1.0]), np.array([0.2, 0.2]))
    rng = np.random.default_rng(1)
    P = 300
    frame = rng.integers(0, 2, P)
    q = rng.normal(scale=0.3, size=(P, 3))
    for sigma in (0.01, 1.0):  # residuals of tens of sigma (the scale widens the gate), then well below one
        sig = np.full(P, sigma)
        free: list = []
        tof_factor(T, eps, varpi, cells, frame, q, sig, m, gate=10.0, outlier_gate=None, anomaly_tau=None, details=free)
        r = free[0].r
        scale = max(1.0, 1.4826 * float(np.median(np.abs(r))))
        assert (scale > 10) == (sigma == 0.01)
        k = 0.5 * float(np.max(np.abs(r))) / scale  # a gate that cuts the largest residuals
        out: list = []
        b = tof_factor(T, eps, varpi, cells, frame, q, sig, m, gate=10.0, outlier_gate=k, anomaly_tau=None, details=out)
        cut = np.abs(r) > k * scale
        assert 0 < cut.sum() < P
        np.testing.assert_array_equal(out[0].rejected, cut)
        assert np.all(out[0].weight[cut] == 0)
        np.testing.assert_allclose(out[0].weight[~cut], 1 / (1 + r[~cut] ** 2))
        rc = np.minimum(np.abs(r), k * scale)
        assert b.cost == pytest.approx(0.5 * np.sum(np.log1p(rc**2)))


def test_visible_match_skips_the_far_face_of_a_thin_part() -> None:
    """Points on the top face of an 8 mm plate sampled every 1 cm: the nearest map point is often on the bottom
    face (a point-to-plane error of a whole thickness); the visible match seldom is (4 candidates). On one convex
    surface (a sphere seen from outside) it is exactly the nearest map point."""
    trimesh = pytest.importorskip("trimesh")
    from shape_sensing.estimators.continuum.tof import visible_nearest

    plate = PriorMap.from_mesh(trimesh.creation.box(extents=(0.4, 0.4, 0.008)), spacing=0.01)
    rng = np.random.default_rng(3)
    p = np.column_stack([rng.uniform(-0.12, 0.12, (2000, 2)), np.full(2000, 0.004)])
    origin = p + np.array([0.05, -0.02, 0.3])  # the sensor above the plate
    _, i_near = plate.nearest(p)
    _, i_vis = visible_nearest(plate, p, origin)
    far_near = float(np.mean(plate.points[i_near, 2] < 0))
    far_vis = float(np.mean(plate.points[i_vis, 2] < 0))
    assert far_near > 0.2 and far_vis < 0.02, (far_near, far_vis)  # measured 0.32 and 0.0065
    ball = PriorMap.from_mesh(trimesh.creation.icosphere(subdivisions=4, radius=0.14), spacing=0.01)
    u = rng.normal(size=(2000, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    q = 0.14 * u
    d0, i0 = ball.nearest(q)
    d1, i1 = visible_nearest(ball, q, q + 0.3 * u)
    np.testing.assert_array_equal(i1, i0)
    np.testing.assert_array_equal(d1, d0)


def test_tof_residual_scale_measures_how_far_the_noise_model_overstates_the_points_noise() -> None:
    """Ranges with 2 mm noise along each ray, modelled as 4 mm: at the true pose the whitened point-to-plane
    residuals' robust scale is what the geometry gives independently (each residual is the range error times
    the cosine between ray and wall normal, times the planarity weight, over 4 mm): 0.27, well below 1.
    A wrong noise option names itself."""
    from scipy.spatial import cKDTree

    from shape_sensing.estimators.continuum.errors import ContinuumError
    from shape_sensing.estimators.continuum.model import straight_state
    from shape_sensing.estimators.continuum.tof_localise import LocaliseConfig, localise, tof_residual_scale

    trimesh = pytest.importorskip("trimesh")
    scene = _box_scene()
    tof_map = PriorMap.from_mesh(trimesh.util.concatenate([p.mesh() for p in scene.parts]), spacing=0.01)
    mounts = ring_mounts([0.3, 0.6], 0.02, tip_forward=True)
    rng = np.random.default_rng(11)
    sigma_true, sigma_model = 0.002, 0.004
    qs, ss, expect = [], [], []
    for m in mounts:
        Ts = lie.exp(np.array([[0, 0, m.s, 0, 0, 0]]))[0] @ m.T_ring_sensor
        u = zone_directions(8, m.fov) @ Ts[:3, :3].T
        lam, part = scene.cast(np.repeat(Ts[None, :3, 3], 64, axis=0), u)
        ok = np.isfinite(lam)
        noise = sigma_true * rng.standard_normal(64)
        # a range error dr along the unit ray moves the point by dr u_hat: lam is along the boresight
        dlam = noise / np.linalg.norm(u, axis=1)
        q, _, _ = frame_points(m, np.where(ok, lam + dlam, np.nan))
        qs.append(q)
        ss.append(np.full(q.shape[0], m.s))
        hit = Ts[:3, 3] + lam[ok, None] * u[ok]
        normal = np.stack([scene.parts[i].pose[:3, 2] for i in part[ok]])  # type: ignore[attr-defined]
        u_hat = u[ok] / np.linalg.norm(u[ok], axis=1)[:, None]
        alpha = tof_map.planarity[cKDTree(tof_map.points).query(hit)[1]]
        expect.append(alpha * np.abs(np.einsum("pi,pi->p", normal, u_hat)) * np.abs(noise[ok]) / sigma_model)
    q = np.concatenate(qs)
    meas = Measurements(tof_map=tof_map)
    meas.tof_q = np.concatenate([q, q])
    meas.tof_sigma = np.full(2 * q.shape[0], sigma_model)
    meas.tof_s = np.concatenate(ss * 2)
    meas.tof_t = np.repeat([0.0, 0.2], q.shape[0])
    w = Weights(
        P0=np.ones(18), Q1=np.ones(6), Q2=np.ones(6), Q3=np.ones(6), R_pose=np.ones(6), R_gyro=np.ones(3), tof_gate=0.2
    )
    state = straight_state(np.array([0.0, 0.2]), np.array([0.0, 0.15, 0.3, 0.45, 0.6]), np.eye(4), w.epsilon0)
    want = 1.4826 * float(np.median(np.concatenate(expect)))
    got = tof_residual_scale(state, meas, w)
    assert 0.2 < want < 0.5
    print(f"robust scale {got:.4f}, from the geometry {want:.4f}")
    assert got == pytest.approx(want, rel=0.1)
    with pytest.raises(ContinuumError, match="tof_noise must be 'fixed' or 'estimate', got 'auto'"):
        localise(None, tof_map, LocaliseConfig(tof_noise="auto"))  # type: ignore[arg-type]
