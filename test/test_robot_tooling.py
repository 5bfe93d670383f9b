"""RViz configs for every robot's launch file, recording and world placement on the hyper-redundant launch files,
and calibrate-bno055 telling the user which motions each calibration level still needs."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_launch_static import rviz_problems, rviz_topics

from shape_sensing.cli import main
from shape_sensing.cli.calibrate_bno055 import MOTIONS, motions_needed

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("launch", "rviz", "fixed", "wanted"),
    [
        (
            "continuum_estimator.launch.xml",
            "continuum_estimator.rviz",
            "continuum_base",
            {"/continuum/shape/markers", "/continuum/shape/path", "/continuum/shape/tip"},
        ),
        (
            "growth_planner.launch.xml",
            "growth_planner.rviz",
            "growing_base",
            {
                "/growing/plan/markers",
                "/growing/plan/path",
                "/growing/plan/predicted_path",
                "/growing/plan/predicted_tip",
            },
        ),
    ],
)
def test_launch_files_start_rviz_with_their_config(launch: str, rviz: str, fixed: str, wanted: set[str]) -> None:
    import yaml

    path = ROOT / "rviz" / rviz
    assert rviz_problems(path) == []
    assert yaml.safe_load(path.read_text())["Visualization Manager"]["Global Options"]["Fixed Frame"] == fixed
    shown = set().union(*rviz_topics(path).values())
    assert wanted <= shown and "rviz_default_plugins/TF" in rviz_topics(path)
    node = next(n for n in ET.parse(ROOT / "launch" / launch).getroot().iter("node") if n.get("exec") == "rviz2")
    assert f"rviz/{rviz}" in node.get("args", "")


@pytest.mark.parametrize("launch", ["hyper_redundant.launch.xml", "hyper_redundant_sim.launch.xml"])
def test_hyper_redundant_launch_files_record_and_place_the_base(launch: str) -> None:
    path = ROOT / "launch" / launch
    root = ET.parse(path).getroot()
    args = {a.get("name"): a.get("default") for a in root.findall("arg")}
    assert args["record"] == "false"
    (cmd,) = [e.get("cmd", "") for e in root.iter("executable") if "bag record" in e.get("cmd", "")]
    assert next(e for e in root.iter("executable") if "bag record" in e.get("cmd", "")).get("if") == "$(var record)"
    words = cmd.replace("$(var namespace)", args["namespace"]).split()
    assert words[:5] == ["ros2", "bag", "record", "-s", "mcap"]
    topics = set(words[5:])
    assert {"/tf", "/tf_static", "/diagnostics"} <= topics
    assert {f"/hyper_redundant/{t}" for t in ("shape/path", "shape/end_effector", "imu/platform_0")} <= topics
    static = [n for n in root.iter("node") if n.get("exec") == "static_transform_publisher"]
    placement = static[0].get("args", "").replace("$(var world_frame)", args["world_frame"])
    placement = placement.replace("$(var frame_prefix)", args["frame_prefix"])
    assert len(static) == 1 and "--frame-id world --child-frame-id base_link" in placement
    assert static[0].get("if") == "$(var world_tf)" and args["world_tf"] == "true"


def test_motions_per_calibration_level() -> None:
    """Datasheet 3.11: gyroscope still, accelerometer 6 still poses, magnetometer figure-eights; system last."""
    assert motions_needed((0, 0, 0, 0))[0].startswith("gyr 0/3: hold the robot still")
    assert [m.split(":")[0] for m in motions_needed((0, 3, 1, 2))] == ["acc 1/3", "mag 2/3"]
    assert "6 different poses" in MOTIONS["acc"] and "figure-eight" in MOTIONS["mag"]
    assert motions_needed((2, 3, 3, 3)) == [f"sys 2/3: {MOTIONS['sys']}"]
    assert motions_needed((3, 3, 3, 3)) == []


def test_calibrate_prints_the_motions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate-bno055", "--simulate", "--out", str(tmp_path / "c.yaml"), "--timeout", "10"]) == 0
    out = capsys.readouterr().out
    assert "hold the robot still" in out and "-> next: " in out and "figure-eights" in out
