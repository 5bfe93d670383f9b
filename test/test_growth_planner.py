"""The growth planner core (node, demo), its config, the figure4 command and the growing demo's bag."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from shape_sensing.cli import main
from shape_sensing.cli.figure4 import PAPER, error_vs_k, figure4, format_table
from shape_sensing.config import ConfigError
from shape_sensing.demos.growing import run_demo
from shape_sensing.estimators.growth import direction_from_angles
from shape_sensing.io.bag import bag_topics, read_bag
from shape_sensing.planning.errors import PlanningError
from shape_sensing.planning.growth_planner import SCHEMA, GrowthPlanner, frames_along
from shape_sensing.schemas import schema_for

ROOT = Path(__file__).resolve().parents[1]


def _planner(**overrides):
    return GrowthPlanner(SCHEMA.load_yaml(ROOT / "config" / "growth_planner.yaml") | overrides)


def test_config_is_robot_a_and_plans_to_the_goal():
    planner = _planner()
    assert schema_for("growth_planner") is SCHEMA
    assert planner.model.bend_per_step == pytest.approx(math.radians(0.45), rel=1e-6)
    goal, direction = np.array([0.5, 0.3, -0.2]), direction_from_angles(2.0, 0.3)
    res = planner.plan(goal, direction)
    assert np.allclose(res.frames[0, :3, 3], 0.0) and np.allclose(res.frames[-1, :3, 3], goal, atol=1e-7)
    assert np.allclose(res.frames[-1, :3, 2], direction, atol=1e-7)
    assert res.execution.errors["position"] < 0.002  # closed loop by default
    planner.advance(res)
    assert np.allclose(planner.tip[:3, 3], res.execution.poses[-1][:3, 3])


def test_frames_along_are_orthonormal_and_follow_the_tangent():
    plan_frames = _planner(sample_step=0.01).plan([0.3, 0.1, 0.2], [0, 0, 1]).frames
    R = plan_frames[:, :3, :3]
    assert np.allclose(np.einsum("nji,njk->nik", R, R), np.eye(3), atol=1e-12)
    assert np.allclose(np.linalg.det(R), 1.0)
    steps = np.diff(plan_frames[:, :3, 3], axis=0)
    mid = 0.5 * (plan_frames[1:, :3, 2] + plan_frames[:-1, :3, 2])
    cos = np.einsum("ij,ij->i", steps, mid) / np.linalg.norm(steps, axis=1) / np.linalg.norm(mid, axis=1)
    assert np.all(cos > 0.999)
    assert frames_along(np.zeros((0, 3)), np.zeros((0, 3))).shape == (0, 4, 4)


@pytest.mark.parametrize(
    ("overrides", "error", "match"),
    [
        ({"radius": 0.05}, PlanningError, "min_radius"),  # tighter than the robot can bend: unreachable
        ({"step_length": 0.0}, PlanningError, "zero growth"),
        ({"start_direction": [0.0, 0.0, 0.0]}, ConfigError, "start_direction"),
        ({"radius": math.nan}, ConfigError, "radius"),
    ],
)
def test_bad_parameters_raise(overrides, error, match):
    with pytest.raises(error, match=match):
        _planner(**overrides)


@pytest.mark.parametrize(
    ("goal", "direction", "match"),
    [
        ([math.nan, 0.0, 0.0], [1, 0, 0], "goal position"),
        ([0.1, 0.0, 0.0], [0, 0, 0], "non-zero"),
        ([50.0, 0.0, 0.0], [1, 0, 0], "max_length"),
    ],
)
def test_bad_goals_raise(goal, direction, match):
    with pytest.raises(PlanningError, match=match):
        _planner().plan(goal, direction)


def test_figure4_small_run_and_table():
    result = figure4(seed=1, pairs=4)
    assert set(result["groups"]) == {"4", "8", "16", "32"}
    for g in result["groups"].values():
        assert g["closed"]["position_norm"]["mean"] < g["open"]["position_norm"]["mean"]
    trend = error_vs_k(seed=1, pairs=2, k_values=(0.01, 0.3))
    assert trend[1]["open"]["mean"] > trend[0]["open"]["mean"]  # error grows with k
    text = format_table(result, trend)
    assert "0.0084 ± 0.0069" in text and f"{PAPER['heading_deg'][0]:.2f}" in text


def test_figure4_cli_json(capsys, tmp_path):
    assert main(["figure4", "--pairs", "2", "--k-pairs", "2", "--json", "--out", str(tmp_path)]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["figure4"]["pairs"] == 2 and len(payload["error_vs_k"]) == 6
    assert (tmp_path / "figure4.png").stat().st_size > 0
    assert main(["figure4", "--pairs", "1"]) == 2  # a clear error, no traceback


def test_growing_demo_bag_and_metrics(tmp_path):
    metrics = run_demo(tmp_path, duration=2.0, distance=4.0, seed=3, rate=20.0, progress=False, picture=True)
    assert metrics["closed_position_norm"] < 0.002 < metrics["open_position_norm"]
    assert (tmp_path / "growing.png").stat().st_size > 0
    topics = bag_topics(tmp_path / "growing.mcap")
    assert topics == {
        "/tf_static": "tf2_msgs/msg/TFMessage",
        "/growing/plan/path": "nav_msgs/msg/Path",
        "/growing/plan/markers": "visualization_msgs/msg/MarkerArray",
        "/tf": "tf2_msgs/msg/TFMessage",
        "/growing/body/path": "nav_msgs/msg/Path",
        "/growing/body/markers": "visualization_msgs/msg/MarkerArray",
    }
    tips = [m.msg.transforms[0] for m in read_bag(tmp_path / "growing.mcap", ["/tf"])]
    assert tips[0].child_frame_id == "growing_tip" and tips[0].header.frame_id == "growing_base"
    last = tips[-1].transform.translation
    assert metrics["closed_position_mm"] < 2.0
    plan = next(m.msg for m in read_bag(tmp_path / "growing.mcap", ["/growing/plan/path"]))
    goal = plan.poses[-1].pose.position
    assert math.dist((last.x, last.y, last.z), (goal.x, goal.y, goal.z)) * 1000 == pytest.approx(
        metrics["closed_position_mm"], abs=1e-6
    )


def test_growing_demo_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="--distance"):
        run_demo(tmp_path, distance=0.0, progress=False, picture=False)
    with pytest.raises(ValueError, match="--duration"):
        run_demo(tmp_path, duration=-1.0, progress=False, picture=False)


def test_growing_demo_cli_json(capsys, tmp_path):
    assert main(["demo", "growing", "--out", str(tmp_path), "--duration", "1", "--distance", "3", "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["bag"].endswith("growing.mcap") and metrics["steps"] > 0
    with pytest.raises(SystemExit) as exc:  # argparse refuses it and names the option
        main(["demo", "growing", "--out", str(tmp_path), "--rate", "0"])
    assert exc.value.code == 2
    assert "argument --rate" in capsys.readouterr().err
