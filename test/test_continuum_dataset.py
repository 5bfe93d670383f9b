"""space_time_continuum reader: hand-built files, every error branch, and (if present) the real dataset."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from shape_sensing.estimators.continuum import lie
from shape_sensing.io.errors import DatasetError
from shape_sensing.io.space_time_dataset import load_trial, read_robot_config, read_sensor_csv, read_trial_config

DATASET = Path(__file__).resolve().parents[1].parent / "shared" / "datasets" / "space_time_continuum"

ROBOT = {
    "weights": {
        "P0": [1e-4] * 18,
        "Q1": [1.0] * 6,
        "Q2": [1.0] * 6,
        "Q3": [1.0] * 6,
        "prior_factor": 0.5,
        "R_pose": [1e-5] * 6,
        "R_gyro": [1e-6] * 3,
        "measurement_factor": 1,
    },
    "topology": {"N": 3, "K_per_second": 30, "length": 0.2},
}
TRIAL = {"data": {"folder_path": "assets/data/t1/", "aurora": True, "gyro": False, "start_time": 0, "end_time": 0.1}}


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _dataset(tmp: Path, robot: dict | None = None) -> Path:
    _write(tmp / "config/robot/r.json", "// a comment\n" + json.dumps(robot or ROBOT))
    _write(tmp / "config/trial/t1.json", json.dumps(TRIAL))
    _write(
        tmp / "data/t1/aurora1.csv", "sensor type:,aurora\nt,s,data\n0.0,0.2,0,0,0.2,0,0,0\n0.05,0.2,0,0,0.2,0,0,0.1\n"
    )
    _write(tmp / "data/t1/gyro_ee.csv", "sensor type:,gyro\nt,s,data\n0.01,0.2,0.1,0.2,0.3\n")
    return tmp


def test_reads_hand_built_dataset(tmp_path: Path) -> None:
    tr = load_trial(_dataset(tmp_path), "t1")
    assert tr.robot.name == "r" and tr.robot.N == 3 and tr.robot.prior_factor == 0.5
    assert tr.config.use_gyro is False and np.allclose(tr.config.epsilon0, [0, 0, 1, 0, 0, 0])
    a = tr.streams["aurora1"]
    assert a.kind == "aurora" and a.values.shape == (2, 6) and a.values[1, 5] == 0.1
    assert tr.streams["gyro_ee"].values.tolist() == [[0.1, 0.2, 0.3]]


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("", "empty file"),
        ("sensortype,aurora\nh\n", r"expected 'sensor type:,<kind>'"),
        ("sensor type:,lidar\nh\n", "unknown sensor type 'lidar'"),
        ("sensor type:,gyro\n", "missing header line 2"),
        ("sensor type:,gyro\nh\n0.0,0.2,1,2\n", r":3: 4 columns, expected 5"),
        ("sensor type:,gyro\nh\n0.0,0.2,1,2,x\n", r":3: non-numeric value 'x'"),
        ("sensor type:,gyro\nh\n0.0,0.2,1,2,nan\n", r"no valid data rows after the header \(1 rows with a non-finite"),
        ("sensor type:,gyro\nh\n\n", "no valid data rows"),
        ("sensor type:,gyro\nh\n0.0,0.2,1,2\n0.1,0.2,1,2,3\n", r":3: 4 columns, expected 5"),
    ],
)
def test_malformed_csv(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(DatasetError, match=match):
        read_sensor_csv(_write(tmp_path / "bad.csv", text))


def test_bad_frames_are_skipped_and_counted_and_common_csv_quirks_accepted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A dropout row (nan) and a truncated last line are bad frames; a BOM and trailing commas are fine."""
    text = (
        "\ufeffsensor type:,gyro\r\ntime (s),arclength (m),data\r\n"
        "0.0,0.2,0.1,0.2,0.3,\r\n0.1,0.2,nan,0.2,0.3,\r\n0.2,0.2,0.4,0.5,0.6,\r\n0.3,0.2,0.7"
    )
    with caplog.at_level("WARNING"):
        st = read_sensor_csv(_write(tmp_path / "g.csv", text))
    assert st.kind == "gyro" and st.t.tolist() == [0.0, 0.2] and st.skipped == 2
    assert st.values.tolist() == [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]
    assert "2 bad rows skipped" in caplog.text and "first at line 4" in caplog.text
    assert st.window(0.1, 1.0).skipped == 2
    # a last line cut inside a value, after trailing commas
    cut = "sensor type:,gyro\nh\n0.0,0.2,0.1,0.2,0.3,\n0.1,0.2,0.4,0.5,1e"
    assert read_sensor_csv(_write(tmp_path / "c.csv", cut)).skipped == 1
    with pytest.raises(DatasetError, match=r":4: non-numeric value 'x'"):  # not at the end: corrupt, refused
        read_sensor_csv(_write(tmp_path / "x.csv", "sensor type:,gyro\nh\n0,0.2,1,2,3\n1,0.2,x,2,3\n2,0.2,1,2,3\n"))


def test_unsupported_topology_switches_are_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    robot = _bad_robot()
    robot["topology"]["lock_first_pose"] = True
    robot["topology"]["time_nodes_on_measurements"] = True
    cfg = read_robot_config(_write(tmp_path / "r.json", json.dumps(robot)))
    assert cfg.unsupported == ("lock_first_pose", "time_nodes_on_measurements")
    assert read_robot_config(_write(tmp_path / "ok.json", json.dumps(_bad_robot()))).unsupported == ()
    # loading a trial of that robot says so, once
    root = _dataset(tmp_path / "ds", robot)
    with caplog.at_level("WARNING"):
        load_trial(root, "t1")
        load_trial(root, "t1")
    text = "lock_first_pose, time_nodes_on_measurements set, which this estimator does not implement"
    assert caplog.text.count(text) == 1


def test_missing_csv(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="cannot read sensor file"):
        read_sensor_csv(tmp_path / "nope.csv")


def _bad_robot(**changes: object) -> dict:
    r = json.loads(json.dumps(ROBOT))
    for key, val in changes.items():
        sec, k = key.split("__")
        if val is None:
            del r[sec][k]
        else:
            r[sec][k] = val
    return r


@pytest.mark.parametrize(
    ("robot", "match"),
    [
        (_bad_robot(weights__Q1=[1.0] * 5), r"weights.Q1 must be a list of 6 numbers"),
        (_bad_robot(weights__R_gyro=[1.0, -1.0, 1.0]), r"weights.R_gyro must hold variances > 0"),
        (_bad_robot(weights__P0=None), r"missing key weights.'P0'"),
        (_bad_robot(topology__N=2.5), r"topology.N must be an integer"),
        (_bad_robot(topology__length="long"), r"topology.length must be a number"),
        (_bad_robot(weights__prior_factor=0), r"weights.prior_factor must be > 0.0"),
    ],
)
def test_bad_robot_config(tmp_path: Path, robot: dict, match: str) -> None:
    with pytest.raises(DatasetError, match=match):
        read_robot_config(_write(tmp_path / "r.json", json.dumps(robot)))


def test_bad_json_and_trial(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"r.json:1: invalid JSON"):
        read_robot_config(_write(tmp_path / "r.json", "{weights: 1}"))
    bad = {"data": {"start_time": 5, "end_time": 1}}
    with pytest.raises(DatasetError, match=r"end_time \(1.0\) must be after data.start_time \(5.0\)"):
        read_trial_config(_write(tmp_path / "t.json", json.dumps(bad)))
    bad = {"data": {"start_time": 0, "end_time": 1}, "initial_condition": {"T0": [2] * 16}}
    with pytest.raises(DatasetError, match="T0 is not a rigid transform"):
        read_trial_config(_write(tmp_path / "t.json", json.dumps(bad)))


def test_load_trial_errors(tmp_path: Path) -> None:
    root = _dataset(tmp_path)
    with pytest.raises(DatasetError, match=r"unknown trial 'zz'; known: \['t1'\]"):
        load_trial(root, "zz")
    with pytest.raises(DatasetError, match="not a space_time_continuum dataset"):
        load_trial(tmp_path / "data", "t1")
    with pytest.raises(DatasetError, match="unknown robot 'r9'"):
        load_trial(root, "t1", robot="r9")
    robot = _bad_robot(topology__length=0.1)  # shorter than its sensors
    _write(tmp_path / "config/robot/r.json", json.dumps(robot))
    short = "cannot tell the robot: largest sensor arc length 0.2 m fits robot configs none"
    with pytest.raises(DatasetError, match=short):
        load_trial(root, "t1")
    # no sensor at the tip: the only robot long enough carries them
    _write(tmp_path / "config/robot/r.json", json.dumps(_bad_robot(topology__length=0.5)))
    assert load_trial(root, "t1").robot.name == "r"
    _write(tmp_path / "config/robot/r2.json", json.dumps(_bad_robot(topology__length=0.6)))
    with pytest.raises(DatasetError, match=r"fits robot configs \['r', 'r2'\].*--robot NAME"):
        load_trial(root, "t1")
    assert load_trial(root, "t1", robot="r2").robot.length == 0.6


@pytest.mark.skipif(not DATASET.is_dir(), reason="shared dataset not present")
def test_real_dataset_conventions() -> None:
    tr = load_trial(DATASET, "slow_free_space")
    assert tr.robot.name == "robot2" and tr.robot.N == 5 and abs(tr.robot.length - 0.466) < 1e-12
    assert sorted(tr.streams) == [
        "aurora0",
        "aurora1",
        "gyro_ee",
        "gyro_mid",
        "vicon0",
        "vicon1",
        "vicon2",
        "vicon3",
        "vicon4",
    ]
    # README: the Vicon marker at s = 0 is within a few mm and ~1 deg of identity (no alignment needed)
    v0 = tr.streams["vicon0"].window(19, 29)
    T = lie.exp(v0.values)
    assert np.linalg.norm(T[:, :3, 3], axis=1).max() < 8e-3
    assert np.degrees(np.linalg.norm(lie.so3_log(T[:, :3, :3]), axis=1)).max() < 2.5
    # the tip Vicon is never farther from the base than the backbone is long (chord <= arc)
    tip = lie.exp(tr.streams["vicon4"].window(19, 29).values)
    assert np.all(np.linalg.norm(tip[:, :3, 3], axis=1) < 0.466 + 0.01)
    assert load_trial(DATASET, "extensible").robot.name == "robot1"


def _dataset_root() -> Path | None:
    """The shared dataset, from this checkout or a worktree of it (any parent's shared/datasets)."""
    rel = Path("shared") / "datasets" / "space_time_continuum"
    for root in (DATASET, *(p / rel for p in Path(__file__).resolve().parents)):
        if root.is_dir():
            return root
    return None


def test_trial_missing_the_sensor_files_its_config_enables_is_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """``gyro: true`` with no gyro file used to be scored without gyroscopes, silently; now it is said (a warning,
    since the published ``extensible`` trial itself sets ``gyro: true`` without any gyroscope)."""
    import logging

    root = _dataset_root()
    if root is None:
        pytest.skip("shared dataset not present")
    (tmp_path / "config").symlink_to(root / "config")
    folder = tmp_path / "data" / "fast_contact"
    folder.mkdir(parents=True)
    for f in (root / "data" / "fast_contact").glob("*.csv"):
        if not f.name.startswith("gyro"):
            (folder / f.name).symlink_to(f)
    with caplog.at_level(logging.WARNING):
        trial = load_trial(tmp_path, "fast_contact")
    assert trial.of_kind("gyro") == []
    assert "sets data.gyro: true but there is no gyro*.csv file" in caplog.text
