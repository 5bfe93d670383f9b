"""shape-sensing reanalyse: scores agree with replay's, a named reference scores like truth, drift rates are
recovered from a recording with known drift, bad inputs fail clearly."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from shape_sensing.cli import main
from shape_sensing.cli.reanalyse import parse_subsets, reanalyse
from shape_sensing.cli.replay import replay_bag
from shape_sensing.demos.vine_imu import run_demo
from shape_sensing.io.bag import BagWriter, read_bag
from shape_sensing.messages import common as msgs
from shape_sensing.types import ImuSample


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reanalyse")
    run_demo(out, scenario="passive", duration=3.0, seed=2, progress=False, picture=False)
    return out / "vine-imu.mcap"


def test_every_k_scores_equal_replay_with_that_subset(demo: Path, tmp_path: Path) -> None:
    # the estimator's defaults on both sides (bag_parameters=False: not the parameters recorded in the bag)
    result = reanalyse(demo, subsets=["every-k=1,3"], progress=False, bag_parameters=False)
    rows = {r["subset"]: r for r in result["spacing"]}
    assert result["scored_against"] == "/vine/truth/tip"
    for k in (1, 3):
        cfg = tmp_path / f"k{k}.yaml"
        topics = ", ".join(f"imu_{i:02d}/data" for i in range(18))
        cfg.write_text(f"hinge_arc_estimator:\n  ros__parameters:\n    imu_topics: [{topics}]\n    every_k: {k}\n")
        metrics = replay_bag(demo, tmp_path / f"k{k}.mcap", argparse.Namespace(namespace="/vine"), config=cfg)
        assert metrics is not None
        assert rows[f"every-k={k}"]["scored"] == metrics["estimates_scored"]
        assert rows[f"every-k={k}"]["tip_error_mean_m"] == pytest.approx(metrics["tip_error_mean_m"], rel=1e-12)
        assert rows[f"every-k={k}"]["tip_error_max_m"] == pytest.approx(metrics["tip_error_max_m"], rel=1e-12)
    assert rows["every-k=3"]["sensors_used"] == 6 and rows["every-k=3"]["spacing_m"] == pytest.approx(0.306)


def test_named_reference_topic_scores_like_truth(demo: Path, tmp_path: Path) -> None:
    bag = tmp_path / "mocap.mcap"
    with BagWriter(bag) as w:
        for m in read_bag(demo):
            if m.topic == "/vine/truth/tip":
                w.write_raw("/mocap/tip", m.msgtype, m.raw, m.stamp_ns)  # the same poses under another name
            elif not m.topic.startswith("/vine/truth"):
                w.copy(m)
    # the copy has no recorded parameters: the defaults on both sides
    truth = reanalyse(demo, subsets=["every-k=2"], progress=False, bag_parameters=False)
    ref = reanalyse(bag, subsets=["every-k=2"], reference="/mocap/tip", progress=False, bag_parameters=False)
    assert ref["scored_against"] == "/mocap/tip" and ref["drift"] is None  # no truth/sensors, no straight windows
    assert ref["spacing"][0]["tip_error_mean_m"] == truth["spacing"][0]["tip_error_mean_m"]
    assert ref["spacing"][0]["scored"] == truth["spacing"][0]["scored"] > 50


def test_drift_rates_recovered_from_straight_windows(tmp_path: Path) -> None:
    """A straight robot whose IMUs drift at known rates about fixed axes: the fitted rates are those rates."""
    n, rate_hz, seconds = 6, 20.0, 90.0
    rng = np.random.default_rng(3)
    rates = rng.uniform(0.5, 3.0, n)  # deg/min
    axes = rng.normal(size=(n, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    mounts = Rotation.from_rotvec(rng.normal(0, 0.1, (n, 3)))
    bag = tmp_path / "straight.mcap"
    with BagWriter(bag) as w:
        for k in range(int(seconds * rate_hz)):
            t = k / rate_hz
            stamp = round(t * 1e9)
            drift = Rotation.from_rotvec(axes * np.deg2rad(rates * t / 60.0)[:, None])
            q = (drift * mounts).as_quat()
            for i in range(n):
                sample = ImuSample(stamp, f"vine_imu_{i:02d}", q[i])
                w.write(f"/vine/imu_{i:02d}/data", msgs.imu_to_msg(sample, w.factory), stamp)
    out = reanalyse(bag, subsets=["every-k=1"], straight=["0:90"], progress=False)
    assert out["scored_against"] is None and out["spacing"][0]["scored"] == 0
    drift = out["drift"]
    assert drift["source"] == "straight windows"
    fitted = np.array([s["drift_deg_per_min"] for s in drift["sensors"]])
    # The base frame is fixed at the capture, so each backbone frame turns by the sensor's own drift since then:
    # an angle growing at exactly its rate.
    assert fitted == pytest.approx(rates, abs=1e-6)
    # every estimate but the flush tick (past 90 s) is in the window
    assert all(s["samples"] >= out["spacing"][0]["estimates"] - 1 for s in drift["sensors"])


def test_subset_parsing() -> None:
    assert [s.label for s in parse_subsets(None, 18)] == [f"every-k={k}" for k in range(1, 7)]
    assert [s.every_k for s in parse_subsets(["every-k=2,5"], 18)] == [2, 5]
    assert parse_subsets(["17,0,4"], 18)[0].sensors == (0, 4, 17)
    with pytest.raises(ValueError, match=r"sensor\(s\) \[18, 20\] do not exist; the recording has IMUs 0..17"):
        parse_subsets(["0,18,20"], 18)
    with pytest.raises(ValueError, match="expected every-k=A..B"):
        parse_subsets(["every-k=4..2"], 18)
    with pytest.raises(ValueError, match="expected every-k=A..B, every-k=A,B,... or a comma list"):
        parse_subsets(["all"], 18)


def test_cli_writes_tables_and_plots_and_fails_clearly(
    demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "ra"
    assert main(["reanalyse", str(demo), "--out", str(out), "--subsets", "every-k=1..2", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert [r["subset"] for r in printed["spacing"]] == ["every-k=1", "every-k=2"]
    assert json.loads((out / "reanalysis.json").read_text())["spacing"] == printed["spacing"]
    assert all(Path(p).stat().st_size > 5000 for p in printed["plots"]) and len(printed["plots"]) == 3
    assert main(["reanalyse", str(demo), "--out", str(out), "--subsets", "0,5,40"]) == 2
    assert "sensor(s) [40] do not exist" in capsys.readouterr().err
    assert main(["reanalyse", str(demo), "--out", str(out), "--reference", "/mocap/tip"]) == 2
    assert "--reference /mocap/tip: no such topic" in capsys.readouterr().err
    assert main(["reanalyse", str(demo), "--out", str(out), "--reference", "/vine/truth/path"]) == 2
    assert "is nav_msgs/msg/Path; expected geometry_msgs/msg/PoseStamped" in capsys.readouterr().err
    empty = tmp_path / "empty.mcap"
    with BagWriter(empty) as w:
        w.write("/chatter", msgs.header(0, "x"), 0)
    assert main(["reanalyse", str(empty), "--out", str(out)]) == 2
    assert "holds no vine IMU topics" in capsys.readouterr().err
