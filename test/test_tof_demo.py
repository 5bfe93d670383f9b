"""The ToF continuum demo end to end: a short simulated run reaches the seed's accuracy, its bag opens with an
independent reader and scores the same through eval-tof; bad inputs (no truth, empty map, map in another frame,
all zones invalid, NaN ranges, a ring lost) end in clear errors or a degraded but finite estimate."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from shape_sensing.cli import main
from shape_sensing.cli.eval_tof import evaluate, reestimate
from shape_sensing.demos.tof_continuum import run_demo, sensor_data
from shape_sensing.estimators.continuum.tof_localise import (
    LocaliseConfig,
    LocaliseResult,
    localise,
    reconstruct,
    ring_errors,
    summarise_errors,
)
from shape_sensing.io.bag import BagWriter
from shape_sensing.io.errors import BagError
from shape_sensing.io.maps import PriorMap, write_ply
from shape_sensing.sim.tof_continuum import SimConfig, SimRun, simulate
from shape_sensing.sim.tof_scene import compressor_scene

DURATION = 2.0  # 1 s still (gyro bias), 1 s of motion


@pytest.fixture(scope="module")
def s0_map() -> PriorMap:
    return PriorMap.from_mesh(compressor_scene("S0").mesh(include_added=False), spacing=0.01)


@pytest.fixture(scope="module")
def demo_out(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out = tmp_path_factory.mktemp("tofdemo")
    return out, run_demo(out, scene="S3", duration=DURATION, picture=False)


def test_short_run_reaches_the_seeds_accuracy(demo_out: tuple[Path, dict]) -> None:
    out, m = demo_out
    # seed 001 Table II, S3 with strain: 0.78 cm and 0.96 deg MAE
    assert m["trans_mae_cm"] < 0.78 and m["rot_mae_deg"] < 0.96, m
    assert m["stop"] in ("converged", "no descent") and m["tof_points"] > 10_000 and m["tof_matched_fraction"] > 0.9
    # the unmodelled objects of S3 are found: seed 001 Eq. 12 against the simulator's labels
    assert m["points_on_added_objects"] > 100 and m["anomaly_precision"] > 0.9 and m["anomaly_recall"] > 0.9
    for name in ("tof-continuum.mcap", "prior_map.ply", "reconstruction.ply", "anomalies.ply", "metrics.json"):
        assert (out / name).is_file()


def test_bag_opens_with_an_independent_reader_and_scores_the_same(demo_out: tuple[Path, dict]) -> None:
    out, m = demo_out
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    counts: dict[str, int] = {}
    with (out / "tof-continuum.mcap").open("rb") as fh:
        reader = make_reader(fh, decoder_factories=[DecoderFactory()])
        for _, channel, _, msg in reader.iter_decoded_messages(topics=["/tof/tof_2_1", "/truth/shape", "/anomalies"]):
            counts[channel.topic] = counts.get(channel.topic, 0) + 1
            if channel.topic == "/tof/tof_2_1":
                assert msg.zones_per_side == 8 and len(msg.distance) == 64
    assert counts["/tof/tof_2_1"] == pytest.approx(DURATION * 15, abs=1)
    assert counts["/truth/shape"] == pytest.approx(DURATION * 30, abs=1) and counts["/anomalies"] == 1
    ev = evaluate(out)
    for key in ("trans_mae_cm", "rot_mae_deg", "trans_rmse_cm", "rot_rmse_deg"):
        assert ev[key] == pytest.approx(m[key], abs=2e-3)  # float32-free path: poses are float64 in the bag
    assert main(["eval-tof", str(out), "--json"]) == 0
    # estimating again from the bag's own sensor data and the written map replays the run
    again = reestimate(out, out / "prior_map.ply")
    assert again["tof_points"] == m["tof_points"] and again["tof_matched_fraction"] > 0.9
    assert again["trans_mae_cm"] == pytest.approx(m["trans_mae_cm"], rel=0.1)
    assert again["rot_mae_deg"] == pytest.approx(m["rot_mae_deg"], rel=0.1)


def test_bag_without_truth_and_empty_map_fail_clearly(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with BagWriter(tmp_path / "empty.mcap") as w:
        from shape_sensing.messages.tof import shape_samples_msg

        w.write("/estimate/shape", shape_samples_msg(1, "base", "x", np.array([0.3]), np.eye(4)[None]), 1)
    with pytest.raises(BagError, match="no ground truth"):
        evaluate(tmp_path / "empty.mcap")
    assert main(["eval-tof", str(tmp_path / "empty.mcap")]) == 2
    assert "no ground truth on /truth/shape" in capsys.readouterr().err
    write_ply(tmp_path / "empty.ply", np.zeros((0, 3)))
    rc = main(["demo", "tof-continuum", "--map", str(tmp_path / "empty.ply"), "--out", str(tmp_path / "o"), "--json"])
    assert rc == 2 and "map is empty" in capsys.readouterr().err


def _errors(res: LocaliseResult, run: SimRun) -> dict[str, float]:
    dp, ang = ring_errors(res.state, run.truth_t, run.truth_s[1:], run.truth_pose[:, 1:])
    return summarise_errors(dp, ang)


def test_degraded_inputs_give_finite_estimates(s0_map: PriorMap, caplog: pytest.LogCaptureFixture) -> None:
    run = simulate(compressor_scene("S0"), cfg=SimConfig(duration=DURATION))
    data = sensor_data(run)
    # NaN ranges everywhere and every status invalid: no ToF point survives, gyro and strain carry the estimate
    bad = dataclasses.replace(
        data, tof_distance=np.full_like(data.tof_distance, np.nan), tof_status=np.full_like(data.tof_status, 255)
    )
    res = localise(bad, s0_map, LocaliseConfig())
    assert res.stats.tof_points == 0 and res.stats.tof_invalid == data.tof_distance.size
    e_none = _errors(res, run)
    assert np.isfinite(e_none["trans_mae_cm"]) and e_none["trans_mae_cm"] < 5.0
    # a ring lost (its three ToF sensors and its gyro): the others still localise it
    lost = [i for i, m in enumerate(data.mounts) if m.s == 0.9]
    keep_f = ~np.isin(data.tof_mount, lost)
    keep_g = data.gyro_s != 0.9
    lost_data = dataclasses.replace(
        data,
        tof_t=data.tof_t[keep_f],
        tof_mount=data.tof_mount[keep_f],
        tof_distance=data.tof_distance[keep_f],
        tof_status=data.tof_status[keep_f],
        gyro_t=data.gyro_t[keep_g],
        gyro_s=data.gyro_s[keep_g],
        gyro_w=data.gyro_w[keep_g],
    )
    res = localise(lost_data, s0_map, LocaliseConfig())
    e_lost = _errors(res, run)
    assert e_lost["trans_mae_cm"] < 0.78 and e_lost["rot_mae_deg"] < 0.96, e_lost
    assert res.tof_matched_fraction > 0.9
    # a map in another frame (2 m off): nothing matches within the gate, and a warning says so, both from the
    # reconstruction and from the localisation itself (whose estimate then rests on gyro and strain alone)
    shifted = PriorMap(s0_map.points + np.array([2.0, 0.0, 0.0]))
    with caplog.at_level("WARNING"):
        rec = reconstruct(res.state, res.meas, shifted)
    assert rec.matched_fraction < 0.05 and "base frame" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING"):
        off = localise(lost_data, shifted, LocaliseConfig())
    assert off.tof_matched_fraction < 0.05 and "base frame" in caplog.text


def test_online_tracker_takes_tof_frames(tmp_path: Path, s0_map: PriorMap) -> None:
    """The continuum_estimator's core: ToF frames, gyros and the map from parameters, estimates stamped in order."""
    from shape_sensing.config import ConfigError
    from shape_sensing.pipelines.continuum_tracker import ContinuumTracker

    run = simulate(compressor_scene("S0"), cfg=SimConfig(duration=1.5))
    s0_map.save_ply(tmp_path / "map.ply")
    mounts = run.mounts[:-1]  # the radial ones
    azimuths = [float(np.degrees(np.arctan2(m.T_ring_sensor[1, 3], m.T_ring_sensor[0, 3]))) for m in mounts]
    params = {
        "length": 1.5,
        "nodes": 16,
        "rate": 10.0,
        "window_size": 3,
        "gyro_topics": [f"g{i}" for i in range(5)],
        "gyro_arc_lengths": [0.3, 0.6, 0.9, 1.2, 1.5],
        "pose_topics": [],
        "pose_arc_lengths": [],
        "tof_topics": [m.name for m in mounts],
        "tof_arc_lengths": [m.s for m in mounts],
        "tof_azimuths": azimuths,
        "map_file": str(tmp_path / "map.ply"),
        "P0": [1e-8] * 6 + [1e-6] * 3 + [1e-2, 1e-2, 1e-6] + [1e-4] * 6,
    }
    tr = ContinuumTracker(params)
    for i, m in enumerate(mounts):  # the parameters rebuild the simulator's mountings
        np.testing.assert_allclose(tr.tof_mounts[i].T_ring_sensor, m.T_ring_sensor, atol=1e-12)
    events = [(t, 0, i) for i, t in enumerate(run.tof_t) if run.tof_mount[i] < len(mounts)]
    events += [(t, 1, i) for i, t in enumerate(run.gyro_t)]
    out = []
    for t, kind, i in sorted(events):
        if kind == 0:
            out += tr.push_tof(int(run.tof_mount[i]), round(t * 1e9), run.tof_distance[i], run.tof_status[i])
        else:
            ring = [0.3, 0.6, 0.9, 1.2, 1.5].index(float(run.gyro_s[i]))
            out += tr.push_gyro(ring, round(t * 1e9), run.gyro_w[i])
    assert tr.stats.tof_frames > 300 and tr.stats.tof_zones_invalid > 0 and len(out) >= 10
    assert tr.push_tof(0, 10**9, np.zeros(10)) == [] and tr.stats.skipped_bad == 1  # a malformed frame
    # while the robot is still, the estimate stays on the straight robot
    assert np.abs(out[3].poses[-1, :3, 3] - [0, 0, 1.5]).max() < 0.01
    with pytest.raises(ConfigError, match="map_file"):
        ContinuumTracker({**params, "map_file": ""})
    with pytest.raises(ConfigError, match="map_file: .*does not exist"):
        ContinuumTracker({**params, "map_file": str(tmp_path / "nope.pcd")})


def test_demo_bag_replays_through_the_node_pipeline_with_strain_and_reconstruction(
    demo_out: tuple[Path, dict], tmp_path: Path
) -> None:
    """``shape-sensing replay`` of the demo bag with config/continuum_tof.yaml (the launch file's parameters) and
    the written map: the node's estimates, the reconstruction and anomaly clouds of every finalised slice and the
    latched map come out; strain is read as shape_sensing/StrainArray, and the same readings written the old way
    (std_msgs/Float64MultiArray triplets) give the same sensor data."""
    import yaml

    from shape_sensing.io.bag import read_bag
    from shape_sensing.pipelines.tof_recording import STRAIN_TOPIC, sensor_data_from_bag

    out, _ = demo_out
    root = Path(__file__).resolve().parents[1]
    (section,) = yaml.safe_load((root / "config" / "continuum_tof.yaml").read_text()).values()
    # the replay reads the bag from its first message: the still start is known, the bias taken from it
    params = {**section["ros__parameters"], "map_file": str(out / "prior_map.ply"), "gyro_bias_duration": 1.0}
    config = tmp_path / "params.yaml"
    config.write_text(yaml.safe_dump({"/**/continuum_estimator": {"ros__parameters": params}}))
    assert main(["replay", str(out / "tof-continuum.mcap"), "--out", str(tmp_path / "re.mcap"),
                 "--config", str(config), "--json"]) == 0  # fmt: skip
    counts: dict[str, int] = {}
    types: dict[str, str] = {}
    for bm in read_bag(tmp_path / "re.mcap"):
        counts[bm.topic] = counts.get(bm.topic, 0) + 1
        types[bm.topic] = bm.msgtype
    # 2 s: 1 s still start (no estimate until the bias is known), slices at 10 Hz, window of 4
    assert counts["/continuum/shape/tip"] >= 5 and counts["/continuum/tof/prior_map"] == 1
    assert counts["/continuum/tof/reconstruction"] == counts["/continuum/tof/anomalies"] >= 5
    assert types["/continuum/tof/reconstruction"] == "sensor_msgs/msg/PointCloud2"
    assert types[STRAIN_TOPIC] == "shape_sensing/msg/StrainArray" and counts[STRAIN_TOPIC] == DURATION * 20
    # the same strain written as the legacy Float64MultiArray
    legacy = tmp_path / "legacy.mcap"
    with BagWriter(legacy) as w:
        for bm in read_bag(out / "tof-continuum.mcap"):
            if bm.topic == STRAIN_TOPIC:
                data = np.column_stack([bm.msg.arc_length, bm.msg.bending_angle, bm.msg.curvature]).reshape(-1)
                w.write(STRAIN_TOPIC, w.factory.make("std_msgs/msg/Float64MultiArray", data=data), bm.stamp_ns)
            elif bm.topic == "/tof_rig":
                w.write(bm.topic, bm.msg, bm.stamp_ns, qos="static")
    new, old = sensor_data_from_bag(out / "tof-continuum.mcap"), sensor_data_from_bag(legacy)
    for key in ("strain_t", "strain_s", "strain_theta", "strain_kappa"):
        np.testing.assert_array_equal(getattr(new, key), getattr(old, key))


def test_every_tof_frame_is_placed_in_the_robot_base_frame(demo_out: tuple[Path, dict]) -> None:
    """Played into RViz, each TofFrame's sensor frame reaches continuum_base: ring -> sensor on /tf_static and the
    estimated base -> ring on /tf at the estimate's stamps (the tree had no base -> ring transform)."""
    from shape_sensing.io.bag import read_bag
    from shape_sensing.messages.tof import shape_samples_from_msg

    out, _ = demo_out
    parent: dict[str, str] = {}
    dynamic: dict[int, dict[str, np.ndarray]] = {}
    estimates: dict[int, np.ndarray] = {}
    sensors: set[str] = set()
    for m in read_bag(out / "tof-continuum.mcap", ["/tf_static", "/tf", "/estimate/shape", "/tof/tof_2_1"]):
        if m.topic in ("/tf_static", "/tf"):
            for tr in m.msg.transforms:
                parent[tr.child_frame_id] = tr.header.frame_id
                if m.topic == "/tf":
                    p = tr.transform.translation
                    dynamic.setdefault(m.stamp_ns, {})[tr.child_frame_id] = np.array([p.x, p.y, p.z])
        elif m.topic == "/estimate/shape":
            stamp, _, T = shape_samples_from_msg(m.msg)
            estimates[stamp] = T
        else:
            sensors.add(m.msg.header.frame_id)
    names = {n for n in parent if n.startswith("tof_")}
    assert names and sensors and sensors <= names
    for name in names:
        chain = [name]
        while chain[-1] in parent:
            chain.append(parent[chain[-1]])
        assert "continuum_base" in chain, chain
    # the base -> ring transforms are the estimate's ring poses at the same stamps
    stamp = sorted(dynamic)[len(dynamic) // 2]
    rings = sorted(dynamic[stamp])
    assert rings == [f"ring_{i}" for i in range(len(rings))] and stamp in estimates
    for i, name in enumerate(rings):
        np.testing.assert_allclose(dynamic[stamp][name], estimates[stamp][i + 1, :3, 3], atol=1e-9)
