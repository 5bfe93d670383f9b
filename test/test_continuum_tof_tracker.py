"""The continuum tracker (the node's core) on the simulated ToF robot: gyro bias from a still start, strain,
scene reconstruction and anomalies per finalised slice, and the messages that carry them."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from shape_sensing.config import load_node_params
from shape_sensing.messages.factory import MessageFactory
from shape_sensing.pipelines.continuum_tracker import SCHEMA, ContinuumMessages, ContinuumTracker
from shape_sensing.sim.tof_continuum import SimConfig, SimRun, simulate
from shape_sensing.sim.tof_scene import compressor_scene

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "config" / "continuum_tof.yaml"
START = 10**18  # ns: stamps as a robot's clock gives them


def _params(**over: Any) -> dict[str, Any]:
    p = load_node_params(CONFIG, SCHEMA)
    p.update(over)
    return p


def _feed(tr: ContinuumTracker, sim: SimRun, p: dict[str, Any], *, tof: bool = True, strain: bool = True,
          gyro_late_ns: int = 0) -> list:  # fmt: skip
    """Every reading of ``sim`` in time order into ``tr`` (the gyroscopes' stamps ``gyro_late_ns`` late); returns
    ``(estimate, reconstruction)`` pairs."""
    names = {t.split("/")[-1]: i for i, t in enumerate(p["tof_topics"])}
    rings = list(p["gyro_arc_lengths"])
    ev: list[tuple[float, int, tuple[Any, ...]]] = []
    if tof:
        for i in range(sim.tof_t.size):
            m = sim.mounts[int(sim.tof_mount[i])]
            ev.append((sim.tof_t[i], 0, ("tof", names[m.name], sim.tof_distance[i], sim.tof_status[i])))
    for t, s, w in zip(sim.gyro_t, sim.gyro_s, sim.gyro_w, strict=True):
        ev.append((t, 1, ("gyro", rings.index(float(s)), w)))
    if strain:
        for t in np.unique(sim.strain_t):
            sel = sim.strain_t == t
            ev.append((t, 2, ("strain", sim.strain_s[sel], sim.strain_theta[sel], sim.strain_kappa[sel])))
    ev.sort(key=lambda e: (e[0], e[1]))
    out = []
    for t, _, e in ev:
        ns = START + round(t * 1e9)
        if e[0] == "tof":
            new = tr.push_tof(e[1], ns, e[2], e[3])
        elif e[0] == "gyro":
            new = tr.push_gyro(e[1], ns + gyro_late_ns, e[2])
        else:
            new = tr.push_strain(ns, e[1], e[2], e[3])
        first = len(tr.window.final_t) - len(new) if tr.window is not None else 0
        out += [(est, tr.pop_reconstruction(first + j)) for j, est in enumerate(new)]
    return out


def test_gyro_bias_from_the_still_start_is_the_simulated_bias(caplog: pytest.LogCaptureFixture) -> None:
    """Five ring gyroscopes with the simulator's constant bias (0.02 rad/s per axis, random) and 0.01 rad/s noise:
    the bias averaged over the first second (the robot is still) is the simulated one within 5 standard errors
    (0.01 / sqrt(120) rad/s); a tracker joining late stops averaging when the robot turns; a gyroscope silent
    during the still start keeps a zero bias and is named in a warning."""
    sim = simulate(compressor_scene("S0"), cfg=SimConfig(duration=2.0, seed=5, strain_rate=5.0))
    p = _params(tof_topics=[], tof_arc_lengths=[], tof_azimuths=[], tof_forward=[], map_file="", strain_topic="",
                gyro_bias_duration=1.0)  # fmt: skip
    tr = ContinuumTracker(p)
    pairs = _feed(tr, sim, p, tof=False, strain=False)
    assert tr.gyro_bias is not None and sorted(tr.gyro_bias) == [0, 1, 2, 3, 4]
    se = sim.config.gyro_sigma / np.sqrt(120)
    rings = p["gyro_arc_lengths"]
    for i, s in enumerate(rings):
        np.testing.assert_allclose(tr.gyro_bias[i], sim.gyro_bias[float(s)], atol=5 * se)
    assert pairs and min(e.stamp_ns for e, _ in pairs) >= START  # the grid starts at the first stamp
    assert tr.stats.gyro == sim.gyro_t.size
    # no bias: the readings are used as they are
    raw = ContinuumTracker(_params(**{**p, "gyro_bias_duration": 0.0}))
    assert raw.gyro_bias == {}
    # a tracker that joins 0.5 s late: its "first second" runs 0.5 s into the motion; the first reading that
    # turns (0.05 rad/s from the mean so far) ends the still start (measured 0.0034 rad/s worst axis, 0.076
    # without the test)
    late = sim.gyro_t >= 0.5
    joined = dataclasses.replace(sim, gyro_t=sim.gyro_t[late], gyro_s=sim.gyro_s[late], gyro_w=sim.gyro_w[late])
    worst = {}
    for thr in (0.05, 0.0):
        tr3 = ContinuumTracker({**p, "gyro_still_threshold": thr})
        _feed(tr3, joined, p, tof=False, strain=False)
        assert tr3.gyro_bias is not None
        worst[thr] = max(np.abs(tr3.gyro_bias[i] - sim.gyro_bias[float(s)]).max() for i, s in enumerate(rings))
    assert worst[0.05] < 0.01 < 0.03 < worst[0.0], worst
    # a gyroscope that gives nothing during the still start
    tr2 = ContinuumTracker(p)
    keep = sim.gyro_s != 0.9
    late = (sim.gyro_s == 0.9) & (sim.gyro_t >= 1.0)
    sim.gyro_t, sim.gyro_s, sim.gyro_w = (x[keep | late] for x in (sim.gyro_t, sim.gyro_s, sim.gyro_w))
    with caplog.at_level(logging.WARNING):
        _feed(tr2, sim, p, tof=False, strain=False)
    assert "/gyro/ring2" in caplog.text and "no bias removed" in caplog.text
    assert tr2.gyro_bias is not None and not np.any(tr2.gyro_bias.get(2, np.zeros(3)))


@pytest.fixture(scope="module")
def s1_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[SimRun, ContinuumTracker, list, Any]:
    from shape_sensing.io.maps import PriorMap, write_ply

    sim = simulate(compressor_scene("S1"), cfg=SimConfig(duration=2.5, seed=3))
    m = PriorMap.from_mesh(compressor_scene("S0").mesh(include_added=False), spacing=0.01)
    path = tmp_path_factory.mktemp("map") / "map.ply"
    write_ply(path, m.points, normals=m.normals)
    p = _params(map_file=str(path))
    tr = ContinuumTracker(p)
    return sim, tr, _feed(tr, sim, p), m


def test_reconstruction_and_anomalies_of_a_scene_with_an_added_object(s1_run: Any) -> None:
    """Scene S1 (a box on the duct wall that the S0 map lacks) through the tracker with ToF, gyros and strain:
    every finalised slice comes with the reconstruction of the ToF points up to the next slice; the points the
    tracker flags lie on the added object's surface (within 2 cm of it) and far from the prior map, the others
    on the map. Checked against the scene's geometry, not the Mahalanobis test itself."""
    from scipy.spatial import cKDTree

    sim, tr, pairs, prior = s1_run
    recs = [r for _, r in pairs if r is not None]
    assert len(recs) >= len(pairs) - 1 >= 10
    assert tr.stats.strain == np.unique(sim.strain_t).size
    pts = np.concatenate([r.points for r in recs])
    flag = np.concatenate([r.anomaly for r in recs])
    assert tr.stats.anomalies == flag.sum() > 20
    added = [p.mesh() for p in sim.scene.parts if p.added]
    surface = np.concatenate([np.asarray(mesh.sample(20000, seed=1)) for mesh in added])  # type: ignore[call-arg]
    d_added, _ = cKDTree(surface).query(pts[flag])
    d_map, _ = prior.nearest(pts)
    assert np.mean(d_added < 0.02) > 0.9, np.percentile(d_added, [50, 90])
    assert np.median(d_map[flag]) > 0.03 and np.median(d_map[~flag]) < 0.01
    # the covariances come from the window's ring nodes: larger than the point noise alone
    cov = np.concatenate([r.cov for r in recs])
    assert np.all(np.linalg.eigvalsh(cov)[:, 0] > 0)


def test_reconstruction_messages_round_trip(s1_run: Any) -> None:
    """The node's outputs of a slice (rosbags factory, CDR round trip): the reconstruction and the anomalies as
    PointCloud2 with float32 x y z, mahalanobis2, anomaly; the prior map with normals and planarity."""
    from shape_sensing.messages.tof import point_cloud2_to_arrays

    _, _, pairs, prior = s1_run
    f = MessageFactory("rosbags")
    build = ContinuumMessages(f)
    est, rec = next((e, r) for e, r in pairs if r is not None and r.anomaly.any())
    msgs = dict(build.build(est, None, rec))
    store = f.typestore
    for topic, n in (("tof/reconstruction", rec.points.shape[0]), ("tof/anomalies", int(rec.anomaly.sum()))):
        m = msgs[topic]
        back = store.deserialize_cdr(store.serialize_cdr(m, m.__msgtype__), m.__msgtype__)
        arr = point_cloud2_to_arrays(back)
        assert back.header.frame_id == "continuum_base" and back.header.stamp.sec == est.stamp_ns // 10**9
        assert [fd.name for fd in back.fields] == ["x", "y", "z", "mahalanobis2", "anomaly"] and arr["x"].size == n
    arr = point_cloud2_to_arrays(msgs["tof/reconstruction"])
    np.testing.assert_allclose(np.column_stack([arr["x"], arr["y"], arr["z"]]), rec.points, atol=1e-6)
    np.testing.assert_allclose(arr["mahalanobis2"], rec.mahalanobis2, rtol=1e-6)
    np.testing.assert_array_equal(arr["anomaly"] == 1.0, rec.anomaly)
    assert np.all(point_cloud2_to_arrays(msgs["tof/anomalies"])["anomaly"] == 1.0)
    topic, m = build.prior_map(7, "continuum_base", prior)
    back = point_cloud2_to_arrays(store.deserialize_cdr(store.serialize_cdr(m, m.__msgtype__), m.__msgtype__))
    assert topic == "tof/prior_map" and back["x"].size == len(prior)
    np.testing.assert_allclose(np.column_stack([back["normal_x"], back["normal_y"], back["normal_z"]]),
                               prior.normals, atol=1e-6)  # fmt: skip
    np.testing.assert_allclose(back["planarity"], prior.planarity, atol=1e-6)


def test_strain_message_round_trip_and_bad_readings() -> None:
    """shape_sensing/StrainArray through CDR (rosbags factory), the legacy Float64MultiArray triplets, and the
    tracker leaving out invalid or non-finite gauges (a reading with none left is counted as bad)."""
    from shape_sensing.messages.errors import MessageError
    from shape_sensing.messages.strain import strain_array_msg, strain_from_float64_multiarray, strain_from_msg

    f = MessageFactory("rosbags")
    s, th, ka = np.array([0.015, 0.045]), np.array([0.3, -2.0]), np.array([1.25, 0.5])
    m = strain_array_msg(START + 5, "continuum_base", s, th, ka, np.array([True, False]), f)
    back = f.typestore.deserialize_cdr(f.typestore.serialize_cdr(m, m.__msgtype__), m.__msgtype__)
    stamp, s2, th2, ka2, ok = strain_from_msg(back)
    assert stamp == START + 5 and back.header.frame_id == "continuum_base" and ok.tolist() == [True, False]
    np.testing.assert_array_equal(np.concatenate([s2, th2, ka2]), np.concatenate([s, th, ka]))
    assert strain_from_msg(strain_array_msg(0, "b", s, th, ka, factory=f))[4].tolist() == [True, True]
    legacy = strain_from_float64_multiarray(np.column_stack([s, th, ka]).reshape(-1))
    np.testing.assert_array_equal(np.concatenate(legacy), np.concatenate([s, th, ka]))
    with pytest.raises(MessageError, match="not \\[s, theta, kappa\\] triplets"):
        strain_from_float64_multiarray(np.zeros(4))
    with pytest.raises(MessageError, match="2 arc lengths, 1 bending angles"):
        strain_array_msg(0, "b", s, th[:1], ka, factory=f)
    p = _params(tof_topics=[], tof_arc_lengths=[], tof_azimuths=[], tof_forward=[], map_file="",
                gyro_bias_duration=0.0)  # fmt: skip
    tr = ContinuumTracker(p)
    tr.push_strain(START, s, th, ka, np.array([True, False]))
    tr.push_strain(START, s, np.array([np.nan, 0.1]), ka)  # one gauge left
    assert tr.stats.strain == 2 and tr.stats.skipped_bad == 0
    tr.push_strain(START, s, th, ka, np.array([False, False]))
    tr.push_strain(START, np.array([2.0]), th[:1], ka[:1])  # beyond the 1.5 m robot
    tr.push_strain(START, s, th[:1], ka)  # lengths differ
    assert tr.stats.strain == 2 and tr.stats.skipped_bad == 3


def test_a_calibrated_gyro_clock_offset_takes_the_late_stamps_back() -> None:
    """The gyroscopes stamped 30 ms late: with ``gyro_time_offset`` 0.03 the tracker estimates what it estimates from
    the readings stamped on time (to the rounding of a reading that falls on a slice boundary), without it something
    else."""
    p = _params(tof_topics=[], tof_arc_lengths=[], tof_azimuths=[], tof_forward=[], map_file="", strain_topic="",
                gyro_bias_duration=1.0)  # fmt: skip
    sim = simulate(compressor_scene("S0"), cfg=SimConfig(duration=2.0, seed=5, strain_rate=5.0))
    ref = _feed(ContinuumTracker(p), sim, p, tof=False, strain=False)
    fixed = _feed(ContinuumTracker({**p, "gyro_time_offset": 0.03}), sim, p, tof=False, strain=False,
                  gyro_late_ns=30_000_000)  # fmt: skip
    raw = _feed(ContinuumTracker(p), sim, p, tof=False, strain=False, gyro_late_ns=30_000_000)
    n = min(len(ref), len(fixed), len(raw))
    assert n > 5
    assert [e.stamp_ns for e, _ in ref[:n]] == [e.stamp_ns for e, _ in fixed[:n]]
    tips = [np.array([e.poses[-1, :3, :3] for e, _ in run[:n]]) for run in (ref, fixed, raw)]
    off_fixed, off_raw = np.abs(tips[1] - tips[0]).max(), np.abs(tips[2] - tips[0]).max()
    assert off_fixed < 0.05 * off_raw, (off_fixed, off_raw)
