"""Discrete execution of action triples, the errors of Eq. 26-28, open and closed loop against the paper."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shape_sensing.estimators.growth import chain, direction_from_angles, tip_frame, tip_step
from shape_sensing.planning.dubins3d import Action
from shape_sensing.planning.errors import PlanningError
from shape_sensing.planning.executor import StepModel, execute, pose_errors, run_actions

R = 0.10
# Robot A of the seed paper: g = 0.0043 cm/s, phi = 0.025 deg/s, one layer every t = 18 s.
ROBOT_A = StepModel.from_rates(0.0043e-2, math.radians(0.025), 18.0)


def _random_pairs(n, k, seed):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        th = rng.uniform(-math.pi, math.pi, 2)
        ga = rng.uniform(-math.pi / 3, math.pi / 3, 2)
        u = rng.normal(size=3)
        pe = k * R * u / np.linalg.norm(u)
        yield tip_frame(np.zeros(3), th[0], ga[0]), pe, direction_from_angles(th[1], ga[1])


def test_robot_a_parameters():
    assert ROBOT_A.step_length == pytest.approx(0.000774)  # g t = 0.077 cm
    assert ROBOT_A.bend_per_step == pytest.approx(math.radians(0.45))  # 0.45 deg per layer
    assert ROBOT_A.k(R) == pytest.approx(0.00774)


def test_discrete_steps_are_the_chain_of_eq_4():
    model = StepModel(0.001, bend_per_step=0.01)
    acts = [Action(0.3, 0.0, 0.0104, "L"), Action(0.0, 0.0, 0.0051, "S")]
    poses, n = run_actions(acts, np.eye(4), model, R, keep_steps=True)
    assert n == 10 + 5
    steps = [tip_step(0.3, 0.001, 0.01)] * 10 + [tip_step(0.0, 0.001, 0.0)] * 5
    assert np.allclose(poses, chain(np.stack(steps)), atol=1e-12)
    coarse, _ = run_actions(acts, np.eye(4), model, R)
    assert np.allclose(coarse[-1], poses[-1], atol=1e-12)


def test_pose_errors_eq_26_to_28():
    T = tip_frame([0.01, 0.0, 0.0], math.radians(359.0), math.radians(2.0))
    e = pose_errors(T, [0, 0, 0], direction_from_angles(math.radians(1.0), math.radians(-1.0)), 2.0)
    assert e["position"] == pytest.approx(0.01)
    assert e["position_norm"] == pytest.approx(0.005)
    assert e["heading_deg"] == pytest.approx(2.0)  # wrapped across 0
    assert e["pitch_deg"] == pytest.approx(3.0)


def test_errors_vanish_as_steps_shrink():
    T0, pe, ve = next(_random_pairs(1, 8, 11))
    coarse = execute(T0, pe, ve, R, StepModel(0.01)).errors["position_norm"]
    fine = execute(T0, pe, ve, R, StepModel(1e-6)).errors["position_norm"]
    assert fine < 1e-5 < coarse


def test_open_loop_reproduces_the_paper_and_closed_loop_beats_it():
    # Paper (robot A, 8 Rc ... 32 Rc): position error means 0.0084 +- 0.0069 to 0.0198 +- 0.0105.
    open_, closed = [], []
    for T0, pe, ve in _random_pairs(12, 8, 5):
        open_.append(execute(T0, pe, ve, R, ROBOT_A).errors)
        closed.append(execute(T0, pe, ve, R, ROBOT_A, closed_loop=True).errors)
    mean_open = np.mean([e["position_norm"] for e in open_])
    assert 0.0084 - 0.0069 <= mean_open <= 0.0198 + 0.0105
    assert np.mean([e["position_norm"] for e in closed]) <= 0.002
    assert np.mean([e["heading_deg"] for e in closed]) <= 0.5
    assert np.mean([e["pitch_deg"] for e in closed]) <= 0.5


def test_closed_loop_reaches_the_goal_within_a_step():
    model = StepModel(0.002)
    for T0, pe, ve in _random_pairs(5, 4, 9):
        res = execute(T0, pe, ve, R, model, closed_loop=True, keep_steps=True)
        assert res.errors["position"] < 3 * model.step_length
        assert res.errors["direction_deg"] < 3 * math.degrees(model.step_length / R)
        # Steps: consecutive poses one step apart, the tangent turning at most one step's bend.
        d = np.linalg.norm(np.diff(res.poses[:, :3, 3], axis=0), axis=1)
        assert np.all(d <= model.step_length * (1 + 1e-9))
        turn = np.arccos(np.clip(np.einsum("ij,ij->i", res.poses[1:, :3, 2], res.poses[:-1, :3, 2]), -1, 1))
        assert np.all(turn <= model.step_length / R + 1e-9)


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: StepModel(0.0), "zero growth"),
        (lambda: StepModel(math.nan), "step_length"),
        (lambda: StepModel(0.001, bend_per_step=-0.1), "bend_per_step"),
        (lambda: StepModel.from_rates(0.0, 0.01, 18.0), "growth_rate"),
        (lambda: execute(np.eye(4), [math.nan, 0, 0], [0, 0, 1], R, StepModel(0.001)), "goal position"),
        (lambda: execute(np.eye(4), [0, 0, 1], [0, 0, 0], R, StepModel(0.001)), "goal direction"),
        (lambda: execute(np.eye(4), [0, 0, 1], [0, 0, 1], -R, StepModel(0.001)), "radius"),
        (lambda: execute(np.full((4, 4), math.nan), [0, 0, 1], [0, 0, 1], R, StepModel(0.001)), "start frame"),
        (
            lambda: execute(np.eye(4), [0, 0, 1], [0, 0, 1], R, StepModel(0.001), closed_loop=True, max_chunk=1e-5),
            "max_chunk",
        ),
    ],
)
def test_bad_inputs_raise(make, match):
    with pytest.raises(PlanningError, match=match):
        make()


def test_closed_loop_to_a_goal_behind_the_waypoint_grows_no_detour():
    # The goal is closer than Eq. 13's waypoint distance: the plan turns back to it from beyond it.
    T0 = tip_frame(np.zeros(3), 0.0, 0.0)
    pe, ve = np.array([0.02, 0.01, 0.0]), direction_from_angles(2.0, 0.5)
    res = execute(T0, pe, ve, R, ROBOT_A, closed_loop=True)
    assert res.plan.case == "waypoint_beyond_goal"
    assert res.grown <= 1.05 * res.plan.length
    assert res.errors["position"] < 0.005 and res.errors["direction_deg"] < 1.0


def test_closed_loop_growth_is_bounded_even_with_a_loose_margin():
    # A margin that lets every re-plan through would loop; growth stops at 2 l + 2 pi Rc (plus the last piece).
    T0 = tip_frame(np.zeros(3), 0.0, 0.0)
    pe, ve = np.array([0.02, 0.01, 0.0]), direction_from_angles(2.0, 0.5)
    res = execute(T0, pe, ve, R, ROBOT_A, closed_loop=True, replan_margin=10.0)
    assert res.grown <= 2 * res.plan.length + 2 * math.pi * R + 0.25 * R + ROBOT_A.step_length
    with pytest.raises(PlanningError, match="replan_margin"):
        execute(T0, pe, ve, R, ROBOT_A, closed_loop=True, replan_margin=-1.0)
