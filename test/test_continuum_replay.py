"""Continuum bags: recorded inputs re-estimated by ``shape-sensing replay`` equal the live tracker's output."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from shape_sensing.cli import main as cli_main
from shape_sensing.cli.replay import replay_bag, select_pipeline
from shape_sensing.estimators.continuum.synthetic import bending_strain, sample_measurements
from shape_sensing.io.bag import BagWriter, bag_topics, read_bag
from shape_sensing.messages import common as mc
from shape_sensing.pipelines.continuum_tracker import ContinuumTracker
from shape_sensing.types import ImuSample

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT.parent / "shared" / "datasets" / "space_time_continuum"
needs_data = pytest.mark.skipif(not DATASET.is_dir(), reason="shared dataset not present")

PARAMS = {
    "gyro_topics": ["gyro_mid/data", "gyro_tip/data"],
    "gyro_arc_lengths": [0.2, 0.4],
    "pose_topics": ["base_pose", "tip_pose"],
    "pose_arc_lengths": [0.0, 0.4],
    "length": 0.4,
    "nodes": 5,
    "rate": 20.0,
}


def _record(path: Path) -> list[tuple[str, int, np.ndarray]]:
    """A bag of a bending robot's gyro and pose-sensor inputs, as the node subscribes to them."""
    fn = bending_strain(amplitude=2.0, frequency=0.5)
    rng = np.random.default_rng(5)
    pt = np.arange(0.0, 1.0, 1 / 47) + 0.003
    gt = np.arange(0.0, 1.0, 1 / 29) + 0.011
    meas = sample_measurements(fn, pt, [0.0, 0.4], gt, [0.2, 0.4], pose_sigma=(1e-3, 1e-2), gyro_sigma=1e-2, rng=rng)
    events: list[tuple[str, int, np.ndarray]] = []
    for t, s, T in zip(meas.pose_t, meas.pose_s, meas.pose_mat, strict=True):
        events.append(("base_pose" if s == 0.0 else "tip_pose", round((5.0 + t) * 1e9), T))
    for t, s, w in zip(meas.gyro_t, meas.gyro_s, meas.gyro_w, strict=True):
        events.append(("gyro_mid/data" if s == 0.2 else "gyro_tip/data", round((5.0 + t) * 1e9), w))
    events.sort(key=lambda e: e[1])
    with BagWriter(path) as bag:
        for topic, stamp, v in events:
            if topic.startswith("gyro"):
                msg = mc.imu_to_msg(ImuSample(stamp, topic.split("/")[0], None, angular_velocity=v))
            else:
                msg = mc.pose_with_covariance_stamped(stamp, "continuum_base", v)
            bag.write(f"/continuum/{topic}", msg, stamp, qos="sensor")
        # an estimate already in the bag is re-estimated, not copied
        bag.write("/continuum/shape/tip", mc.pose_with_covariance_stamped(0, "x", np.eye(4)), events[0][1])
    return events


def _tips(path: Path) -> dict[int, np.ndarray]:
    return {
        mc.stamp_from_msg(bm.msg): mc.pose_to_matrix(bm.msg.pose.pose)
        for bm in read_bag(path)
        if bm.topic == "/continuum/shape/tip"
    }


def test_replay_of_recorded_inputs_equals_the_live_tracker(tmp_path: Path) -> None:
    events = _record(tmp_path / "rec")
    config = tmp_path / "params.yaml"
    config.write_text(yaml.safe_dump({"/**/continuum_estimator": {"ros__parameters": PARAMS}}))
    assert select_pipeline(bag_topics(tmp_path / "rec")).NAME == "continuum"
    assert replay_bag(tmp_path / "rec", tmp_path / "out.mcap", argparse.Namespace(), config=config) is None
    # the same samples pushed into the tracker the node runs
    tracker = ContinuumTracker(PARAMS)
    live = {}
    for topic, stamp, v in events:
        if topic.startswith("gyro"):
            new = tracker.push_gyro(PARAMS["gyro_topics"].index(topic), stamp, v)
        else:
            new = tracker.push_pose(PARAMS["pose_topics"].index(topic), stamp, v)
        live.update({e.stamp_ns: e.tip_pose for e in new})
    replayed = _tips(tmp_path / "out.mcap")
    assert len(live) > 10 and replayed.keys() == live.keys()
    assert max(np.abs(replayed[k] - live[k]).max() for k in live) < 1e-9
    out_topics = bag_topics(tmp_path / "out.mcap")
    for t in ("/tf", "/continuum/shape/path", "/continuum/shape/markers", "/continuum/gyro_mid/data"):
        assert t in out_topics
    assert sum(1 for bm in read_bag(tmp_path / "out.mcap") if bm.topic == "/continuum/tip_pose") == sum(
        1 for e in events if e[0] == "tip_pose"
    )


def test_default_parameter_file_is_the_package_one() -> None:
    from shape_sensing.pipelines.continuum import default_config

    found = default_config()
    assert found is not None and found.name == "continuum_estimator.yaml" and found.is_file()
    assert yaml.safe_load(found.read_text())["/**/continuum_estimator"]["ros__parameters"]["nodes"] == 5


def test_pipeline_is_recognised_from_pose_or_gyro_inputs_alone() -> None:
    imu, pose = "sensor_msgs/msg/Imu", "geometry_msgs/msg/PoseWithCovarianceStamped"
    assert select_pipeline({"/continuum/gyro_mid/data": imu}).NAME == "continuum"
    assert select_pipeline({"/continuum/tip_pose": pose, "/continuum/shape/tip": pose}).NAME == "continuum"
    # the other robot kinds' bags stay theirs (their estimates are PoseWithCovarianceStamped under shape/)
    assert select_pipeline({"/vine/imu_00/data": imu, "/vine/shape/tip": pose}).NAME == "vine-imu"
    hr = {"/hyper_redundant/imu/platform_0": imu, "/hyper_redundant/shape/end_effector": pose}
    assert select_pipeline(hr).NAME == "hyper-redundant"


def test_replay_refuses_a_bag_without_the_configured_topics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    _record(tmp_path / "rec")
    # a parameter file that leaves a sensor of the bag out: replayed, with a warning that names it
    one = dict(PARAMS, pose_topics=["tip_pose"], pose_arc_lengths=[0.4])
    config = tmp_path / "one.yaml"
    config.write_text(yaml.safe_dump(one))
    with caplog.at_level("WARNING"):
        replay_bag(tmp_path / "rec", tmp_path / "one.mcap", argparse.Namespace(), config=config)
    assert "do not use: /continuum/base_pose;" in caplog.text
    other = dict(PARAMS, pose_topics=["a_pose", "b_pose"], gyro_topics=["a/data", "b/data"])
    config = tmp_path / "params.yaml"
    config.write_text(yaml.safe_dump(other))
    args = ["replay", str(tmp_path / "rec"), "--out", str(tmp_path / "out.mcap"), "--config", str(config)]
    assert cli_main(args) == 2
    assert "none of the configured topics" in capsys.readouterr().err
    assert not (tmp_path / "out.mcap").exists()  # no half-written output left behind
    # a failed replay over an existing output (--overwrite) leaves the old one as it was
    good = tmp_path / "good.mcap"
    assert replay_bag(tmp_path / "rec", good, argparse.Namespace(), config=tmp_path / "one.yaml") is None
    before = good.read_bytes()
    bad = ["replay", str(tmp_path / "rec"), "--out", str(good), "--config", str(config), "--overwrite"]
    assert cli_main(bad) == 2
    assert good.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    args[-1] = str(tmp_path / "missing.yaml")
    assert cli_main(args) == 2
    assert "missing.yaml" in capsys.readouterr().err


@needs_data
def test_eval_bag_and_parameter_file_replay_to_the_window_estimate(tmp_path: Path, capsys) -> None:
    """eval-continuum writes the trial's inputs and the node's parameters; replaying them re-estimates the window."""
    base = ["eval-continuum", str(DATASET), "impulse_1", "--estimator", "window", "--duration", "1.0", "--json"]
    assert cli_main([*base, "--iterations", "3", "--out", str(tmp_path)]) == 0
    metrics = json.loads(capsys.readouterr().out)
    bag, params = Path(metrics["bag"]), Path(metrics["params"])
    node = yaml.safe_load(params.read_text())["/**/continuum_estimator"]["ros__parameters"]
    assert node["iterations"] == 3 and node["window_size"] == 4 and node["marginal"] == "chain"
    assert node["pose_arc_lengths"] == [0.0, 0.466] and node["nodes"] == 5
    topics = bag_topics(bag)
    assert topics["/continuum/gyro_mid/data"] == "sensor_msgs/msg/Imu"
    assert topics["/continuum/tip_pose"] == "geometry_msgs/msg/PoseWithCovarianceStamped"
    out = tmp_path / "re.mcap"
    assert cli_main(["replay", str(bag), "--config", str(params), "--out", str(out), "--json"]) == 0
    capsys.readouterr()
    a, b = _tips(bag), _tips(out)
    ka = np.array(sorted(a))
    # the replayed grid starts at the first sample (0.36 ms after the trial start): match the nearest slice
    d = [np.linalg.norm(a[ka[np.abs(ka - k).argmin()]][:3, 3] - T[:3, 3]) for k, T in b.items()]
    assert len(d) > 20 and max(d) < 5e-4  # measured 4e-5 m


def test_choosing_a_pipeline_and_building_the_replay_options_load_only_the_chosen_one() -> None:
    """The replay command imports the pipeline it runs and no other (their estimators cost ~0.5 s to load)."""
    code = (
        "import argparse, sys\n"
        "from shape_sensing.cli import replay\n"
        "replay.add_arguments(argparse.ArgumentParser())\n"
        "names = lambda: sorted(m for m in sys.modules if m.startswith('shape_sensing.pipelines.'))\n"
        "print(names())\n"
        "replay.select_pipeline({'/vine/imu_00/data': 'sensor_msgs/msg/Imu'})\n"
        "print(names())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "['shape_sensing.pipelines.contracts']"
    assert (
        out[1]
        == "['shape_sensing.pipelines.common', 'shape_sensing.pipelines.contracts', 'shape_sensing.pipelines.vine_imu']"
    )


def test_a_forced_pipeline_must_exist() -> None:
    with pytest.raises(ValueError, match="unknown pipeline 'snake'"):
        select_pipeline({}, "snake")
    with pytest.raises(ValueError, match="no pipeline recognises the bag's topics \\(no topics\\)"):
        select_pipeline({})
