"""The MuJoCo simulator of the ToF continuum robot: the physics against beam theory and the tendon statics,
contact against the duct, the ray casts against the exact primitives the prior map comes from, the ground truth
against an independent forward kinematics, the gyros against the truth's motion, and a MuJoCo bag through the
estimator and eval-tof."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from shape_sensing.cli import main
from shape_sensing.cli.eval_tof import evaluate
from shape_sensing.demos import tof_continuum as demo
from shape_sensing.estimators.continuum import lie
from shape_sensing.estimators.continuum.tof import zone_directions
from shape_sensing.pipelines.tof_recording import sensor_data_from_bag
from shape_sensing.sim import tof_mujoco as tm
from shape_sensing.sim.tof_continuum import RobotSpec, SimConfig, _fit_scale, robot_poses
from shape_sensing.sim.tof_scene import Box, Primitive, Scene, compressor_scene

# make test and CI install mujoco (requirements.txt, the Jazzy-stack and ROS stages too); a bare install without the
# [sim] extra skips these tests, each one (not the module at import, which ROS's pytest plugins refuse)
pytestmark = pytest.mark.skipif(not tm.available(), reason="the MuJoCo simulator needs mujoco (the [sim] extra)")

EMPTY = Scene("empty", [])


@pytest.fixture(scope="module")
def mujoco() -> ModuleType:
    import mujoco as mj

    return mj


def _static(rm: tm.RobotModel, ctrl: np.ndarray, seconds: float = 1.0) -> object:
    import mujoco

    """Hold the base at the origin with tendon controls ``ctrl`` for ``seconds``; the final MjData."""
    d = mujoco.MjData(rm.model)
    d.mocap_pos[0] = 0.0
    d.ctrl[:] = ctrl
    for _ in range(round(seconds / rm.model.opt.timestep)):
        mujoco.mj_step(rm.model, d)
    mujoco.mj_forward(rm.model, d)
    return d


def test_cantilever_sags_as_beam_theory(mujoco: ModuleType) -> None:
    """Held horizontally under gravity, the tip sags by the Euler-Bernoulli cantilever's w L^4 / 8 EI plus the
    rings' point loads P a^2 (3 L - a) / 6 EI (small deflection: 3 % of the length)."""
    phys = tm.PhysicsSpec(insertion=0.0)
    rm = tm.build_model(EMPTY, phys=phys)
    d = _static(rm, -phys.pretension * np.ones(rm.model.nu), 1.5)
    L, EI, g = 1.5, phys.bending_stiffness, 9.81
    a = np.asarray(RobotSpec().ring_s)
    want = phys.linear_density * g * L**4 / (8 * EI) + np.sum(phys.ring_mass * g * a**2 * (3 * L - a) / (6 * EI))
    tip = tm.body_poses_at(rm, d, np.array([L]))[0]
    assert tip[1, 3] < 0 and -tip[1, 3] == pytest.approx(want, rel=0.05)  # down along gravity (-y)
    assert abs(tip[0, 3]) < 1e-6 and tip[2, 3] == pytest.approx(L, abs=0.002)  # no sideways motion, inextensible


def test_tendon_pull_bends_its_segment_toward_it(mujoco: ModuleType) -> None:
    """Without gravity, one tendon of segment 1 pulled: segment 1 takes the constant curvature T r / EI toward
    the tendon, the segments beyond stay straight; the feed-forward tensions give the commanded curvatures."""
    phys = tm.PhysicsSpec(gravity=(0.0, 0.0, 0.0), insertion=0.0)
    rm = tm.build_model(EMPTY, phys=phys)
    ctrl = np.zeros(rm.model.nu)
    ctrl[0] = -60.0  # tendon 0 of segment 0 (at phi = 0: the link's +x side)
    d = _static(rm, ctrl, 0.5)
    q = np.stack([d.qpos[a : a + 4] for a in rm.joint_qpos])
    kappa = tm._quat_rotvec(q) / phys.link_length
    # the tendon's last site is mid-link at 0.48 m (the link through 0.5 m reaches past it): it bends the joints
    # up to 0.465 m; the joint at 0.495 m belongs to segment 2's tendons
    seg0 = rm.joint_s < 0.48
    want = 60.0 * phys.tendon_radius / phys.bending_stiffness
    # moment T r (-sin 0, cos 0) = about +y: the backbone turns toward +x, where the tendon runs
    np.testing.assert_allclose(kappa[seg0, 1], want, rtol=0.05)
    assert np.abs(kappa[seg0, 0]).max() < 0.02 * want and np.abs(kappa[~seg0]).max() < 0.02 * want
    end = tm.body_poses_at(rm, d, np.array([0.48]))[0]
    assert end[0, 3] == pytest.approx((1 - np.cos(want * 0.48)) / want, rel=0.05)  # constant-curvature arc
    # feed-forward of three commanded segment curvatures through all nine tendons
    cmd = np.array([[0.5, -0.3], [-0.2, 0.4], [0.6, 0.1]])
    d = _static(rm, -tm.tendon_tensions(cmd, rm).ravel(), 0.7)
    q = np.stack([d.qpos[a : a + 4] for a in rm.joint_qpos])
    kappa = tm._quat_rotvec(q)[:, :2] / phys.link_length
    seg = np.minimum((rm.joint_s / 0.5).astype(int), 2)
    for j in range(3):
        inner = (seg == j) & (np.abs(rm.joint_s - 0.5 * j - 0.25) < 0.2)  # away from the segment ends
        # within 10 %: the feed-forward is linear, the bent chain under hundreds of newtons of tendon tension is not
        # quite (measured: 6 % more curvature in segment 1)
        np.testing.assert_allclose(kappa[inner].mean(axis=0), cmd[j], atol=0.1 * np.abs(cmd[j]).max())


def test_contact_keeps_the_robot_inside_the_duct() -> None:
    """Commanded to bend beyond the bore (the kinematic shape would cross the wall), the robot is stopped by the
    blades and the wall: contacts happen and nothing penetrates more than MuJoCo's soft-contact depth."""
    cfg = SimConfig(duration=2.5, still=0.3, trajectory=1, max_radius=0.45)
    phys = tm.PhysicsSpec(insertion=0.0, insert_time=0.0, settle_time=0.3)
    robot = RobotSpec()
    scale = _fit_scale(cfg, robot)
    from shape_sensing.sim.tof_continuum import segment_curvatures

    t = np.linspace(0, cfg.duration, 60)
    free = robot_poses(segment_curvatures(t, 1, 3, cfg.still, scale), np.linspace(0, 1.5, 31), 1.5)
    assert np.hypot(free[..., 0, 3], free[..., 1, 3]).max() > 0.44  # without the scene it would be outside
    run = tm.simulate(compressor_scene("S0"), robot, cfg, phys)
    assert run.contact_steps > 50 and run.parts_touched
    assert run.max_penetration < 0.003  # MuJoCo's soft contacts: millimetres (measured 1.8), the blades are 8 mm
    ring_r = np.hypot(run.truth_pose[:, 1:, 0, 3], run.truth_pose[:, 1:, 1, 3])
    assert ring_r.max() + phys.ring_geom_radius <= 0.42 + 0.003  # the ring discs stay within the bore


def test_ray_casts_agree_with_the_primitives_of_the_prior_map(mujoco: ModuleType) -> None:
    """Every zone of every sensor on a bent robot: MuJoCo's ray cast on the geoms equals the exact ray casting on
    the scene primitives the map is sampled from (the wall is the mesh's 128-gon: <= 0.13 mm from the cylinder)."""
    scene = compressor_scene("S9")  # added objects and removed blades
    rm = tm.build_model(scene, phys=tm.PhysicsSpec(insertion=0.0))
    d = mujoco.MjData(rm.model)
    rng = np.random.default_rng(3)
    for a in rm.joint_qpos:  # a random smooth bend
        d.qpos[a : a + 4] = [1.0, *(0.004 * rng.standard_normal(3))]
        d.qpos[a : a + 4] /= np.linalg.norm(d.qpos[a : a + 4])
    mujoco.mj_forward(rm.model, d)
    n = 0
    for m in RobotSpec().mounts():
        T = tm.body_poses_at(rm, d, np.array([m.s]))[0] @ m.T_ring_sensor
        u = zone_directions(8, m.fov) @ T[:3, :3].T
        lam, part = tm.cast_zones(rm, d, T[:3, 3], u)
        ref, ref_part = scene.cast(np.repeat(T[None, :3, 3], 64, axis=0), u)
        fin = np.isfinite(ref)
        np.testing.assert_array_equal(np.isfinite(lam), fin)
        np.testing.assert_allclose(lam[fin], ref[fin], atol=2e-4)
        assert np.mean(part[fin] == ref_part[fin]) > 0.95  # (a zone on a blade's edge may see either part)
        n += int(fin.sum())
    assert n > 900


def test_truth_and_strain_are_the_link_chain(mujoco: ModuleType) -> None:
    """The truth poses at arc lengths and the strain readings come from the links: chaining the joint rotations
    (an independent forward kinematics) gives the same poses; rings sit mid-link, strain sites on joints."""
    rm = tm.build_model(EMPTY, phys=tm.PhysicsSpec(insertion=0.0))
    d = mujoco.MjData(rm.model)
    rng = np.random.default_rng(5)
    for a in rm.joint_qpos:
        d.qpos[a : a + 4] = [1.0, *(0.05 * rng.standard_normal(3))]
        d.qpos[a : a + 4] /= np.linalg.norm(d.qpos[a : a + 4])
    mujoco.mj_forward(rm.model, d)
    chain = tm.kinematic_reference(rm, d)
    sim = tm.body_poses_at(rm, d, rm.link_start)
    np.testing.assert_allclose(sim, chain, atol=1e-9)
    rings = np.asarray(RobotSpec().ring_s)
    T_r = tm.body_poses_at(rm, d, rings)
    for k, s in enumerate(rings):
        i, off = rm.link_at(s)
        assert off == pytest.approx(0.5 * rm.link_len[i]) or s == pytest.approx(1.5)
        site = rm.ring_sites[k]
        np.testing.assert_allclose(T_r[k, :3, 3], d.site_xpos[site], atol=1e-12)
        np.testing.assert_allclose(T_r[k, :3, :3].ravel(), d.site_xmat[site], atol=1e-12)
    # consecutive link origins a link length apart (the base stub and the tip link are half links)
    np.testing.assert_allclose(np.linalg.norm(np.diff(sim[:, :3, 3], axis=0), axis=1), rm.link_len[:-1], atol=1e-12)
    # strain sites (every 3 cm from 1.5 cm) are joints, and each reading is that joint's rotation over a link
    np.testing.assert_allclose(RobotSpec().strain_s(), rm.joint_s, atol=1e-12)


def test_run_gyros_follow_the_truth_and_rates_match_the_kinematic_simulator() -> None:
    from shape_sensing.sim.tof_continuum import simulate

    cfg = SimConfig(duration=2.5, still=0.5, max_radius=tm.MAX_RADIUS)
    run = tm.simulate(compressor_scene("S0"), cfg=cfg, phys=tm.PhysicsSpec(insertion=0.1, insert_time=0.3))
    assert run.contact_steps == 0 and run.max_penetration == 0.0  # the gentle trajectory stays clear
    kin = simulate(compressor_scene("S0"), cfg=cfg)  # the same stamps, sensors and arc lengths
    for name in ("tof_t", "tof_mount", "gyro_t", "gyro_s", "strain_t", "strain_s", "truth_t", "truth_s"):
        np.testing.assert_allclose(getattr(run, name), getattr(kin, name), atol=1e-9, err_msg=name)
    assert np.array_equal(run.truth_pose[:, 0], np.broadcast_to(np.eye(4), run.truth_pose[:, 0].shape))
    valid = run.tof_status == 5
    assert valid.mean() > 0.9 and np.all(run.tof_part[valid] >= 0)
    # gyro (bias removed) against the truth's body rates at ring 3, from 30 Hz finite differences
    T = run.truth_pose[:, 3]
    w_true = lie.log(lie.inv(T[:-1]) @ T[1:])[:, 3:] * 30.0
    tm_mid = 0.5 * (run.truth_t[:-1] + run.truth_t[1:])
    sel = run.gyro_s == 0.9
    g = run.gyro_w[sel] - run.gyro_bias[0.9]
    g_mid = np.stack([np.interp(tm_mid, run.gyro_t[sel], g[:, c]) for c in range(3)], axis=1)
    moving = tm_mid > 1.0
    assert np.sqrt(np.mean(w_true[moving] ** 2)) > 0.05
    assert np.sqrt(np.mean((g_mid[moving] - w_true[moving]) ** 2)) < 0.015  # the noise is 0.01 rad/s
    # strain readings against the truth's bend between rings 2 and 3 (0.6 to 0.9 m): the integrated curvature
    k = np.argmin(np.abs(run.strain_t - 2.0))
    sel = (run.strain_t == run.strain_t[k]) & (run.strain_s > 0.6) & (run.strain_s < 0.9)
    th = run.strain_theta[sel]
    kk = run.strain_kappa[sel][:, None] * np.column_stack([-np.sin(th), np.cos(th)])
    j = int(np.argmin(np.abs(run.truth_t - 2.0)))
    R = run.truth_pose[j, 2, :3, :3].T @ run.truth_pose[j, 3, :3, :3]
    bend = lie.so3_log(R[None])[0][:2]
    assert np.linalg.norm(kk.sum(axis=0) * 0.03 - bend) < 0.01 + 0.05 * np.linalg.norm(bend)


def test_mujoco_bag_through_the_estimator_and_eval_tof(tmp_path: Path) -> None:
    """A MuJoCo run written by the demo: the same topics as the kinematic simulator's bag, eval-tof scores it as
    the demo did, and the estimator localises the physical robot (S3: unmodelled objects, touched nothing)."""
    from mcap.reader import make_reader

    m = demo.run_demo(tmp_path, scene="S3", duration=2.0, picture=False, sim="mujoco")
    assert m["simulator"] == "mujoco" and m["max_penetration_mm"] == 0.0
    with (tmp_path / "tof-continuum.mcap").open("rb") as fh:
        topics = {c.topic for c in make_reader(fh).get_summary().channels.values()}
    want = {f"/tof/tof_{i}_{j}" for i in range(5) for j in range(3)} | {"/tof/tof_tip", "/strain", "/truth/shape"}
    want |= {f"/gyro/ring{i}" for i in range(5)} | {"/estimate/shape", "/tof_rig", "/tf_static", "/anomalies"}
    assert want <= topics
    ev = evaluate(tmp_path)
    for key in ("trans_mae_cm", "rot_mae_deg", "trans_rmse_cm", "rot_rmse_deg"):
        assert ev[key] == pytest.approx(m[key], abs=2e-3)
    print(f"MuJoCo S3, 2 s: {m['trans_mae_cm']} cm, {m['rot_mae_deg']} deg")
    assert m["trans_mae_cm"] < 0.78 and m["rot_mae_deg"] < 0.96  # the seed's Table II, S3 with strain
    assert m["points_on_added_objects"] > 100 and m["anomaly_recall"] > 0.5
    # re-read through the estimator's bag reader: the sensor streams are the run's
    data = sensor_data_from_bag(tmp_path / "tof-continuum.mcap")
    assert data.tof_t.size == 16 * 30 and data.strain_s.size == 40 * 50 and data.gyro_t.size == 5 * 240


class _Torus(Primitive):
    pass


def test_bad_inputs_name_what_was_wrong(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError, match="link_length 0.04 m must divide"):
        tm.build_model(EMPTY, phys=tm.PhysicsSpec(link_length=0.04))
    with pytest.raises(ValueError, match="bending_stiffness must be a positive number, got -1"):
        tm.build_model(EMPTY, phys=tm.PhysicsSpec(bending_stiffness=-1.0))
    with pytest.raises(ValueError, match="tendon_radius 0.03 m must be inside"):
        tm.build_model(EMPTY, phys=tm.PhysicsSpec(tendon_radius=0.03))
    with pytest.raises(TypeError, match="scene part 'ring': no MuJoCo geometry for a _Torus"):
        tm.build_model(Scene("x", [_Torus("ring")]))
    with pytest.raises(ValueError, match="gyro rate 100.0 Hz does not divide the simulation rate 720 Hz"):
        tm.simulate(EMPTY, cfg=SimConfig(duration=1.5, gyro_rate=100.0))
    with pytest.raises(ValueError, match="duration 1.0 s must exceed the still period"):
        tm.simulate(EMPTY, cfg=SimConfig(duration=1.0))
    with pytest.raises(ValueError, match="simulator 'bullet' unknown"):
        demo.resolve_simulator("bullet")
    monkeypatch.setattr(tm, "available", lambda: False)
    assert demo.resolve_simulator("auto") == "kinematic"
    monkeypatch.setattr(demo, "run_demo", lambda *a, **k: {"simulator": k["sim"]})
    assert main(["demo", "tof-continuum", "--json"]) == 0
    err = capsys.readouterr()
    assert "mujoco is not installed" in err.err and '"simulator": "kinematic"' in err.out
    with pytest.raises(ImportError, match="--sim mujoco needs the mujoco package"):
        demo.resolve_simulator("mujoco")
    with pytest.raises(SystemExit, match="2"):
        main(["demo", "tof-continuum", "--sim", "bullet"])
    assert "argument --sim: invalid choice: 'bullet'" in capsys.readouterr().err


def test_scene_geoms_are_physical_for_added_objects_only_where_the_scene_has_them() -> None:
    """S1-S3 objects are geoms the robot can touch; S4-S6 blades are gone from the physics as from the scene."""
    names = {p.name for p in compressor_scene("S9").parts}
    rm = tm.build_model(compressor_scene("S9"))
    parts = {compressor_scene("S9").parts[i].name for i in set(rm.geom_part[rm.geom_part >= 0].tolist())}
    assert parts == names and "box_wall" in parts and "blade_2_0" not in parts
    wall = Box("floor", pose=np.eye(4), extents=(1.0, 1.0, 1.0))
    assert tm.scene_geoms_xml(Scene("b", [wall])).count("<geom") == 1
