"""3D two-plane planner (Eq. 9-25): ends at the goal, respects the curvature bound, degenerate cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shape_sensing.estimators.growth import direction_from_angles, tip_frame
from shape_sensing.planning.dubins2d import shortest_path
from shape_sensing.planning.dubins3d import action_triples, execute_exact, plan_3d, waypoint_distance
from shape_sensing.planning.errors import PlanningError

R = 0.1


def _frame_for(p, v):
    th, ga = math.atan2(v[1], v[0]), math.asin(max(-1.0, min(1.0, v[2] / np.linalg.norm(v))))
    return tip_frame(p, th, ga)


def _check_plan(ps, vs, pe, ve, r=R):
    """Plan, then check: actions end at the goal, samples start/end right, curvature <= 1/r."""
    vs = np.asarray(vs, float) / np.linalg.norm(vs)
    ve = np.asarray(ve, float) / np.linalg.norm(ve)
    plan = plan_3d(ps, vs, pe, ve, r)
    T0 = _frame_for(ps, vs)
    poses = execute_exact(action_triples(plan, T0), T0)
    assert np.linalg.norm(poses[-1][:3, 3] - pe) < 1e-7
    assert np.linalg.norm(poses[-1][:3, 2] - ve) < 1e-7
    pos, tan = plan.sample(r / 50)
    assert np.allclose(pos[0], ps) and np.allclose(pos[-1], pe, atol=1e-7)
    assert np.allclose(tan[0], vs) and np.allclose(tan[-1], ve, atol=1e-7)
    # Curvature bound: between samples a chord c of an arc of radius r turns the tangent by 2 asin(c / 2r).
    chord = np.linalg.norm(np.diff(pos, axis=0), axis=1)
    turn = np.arccos(np.clip(np.sum(tan[1:] * tan[:-1], axis=1), -1.0, 1.0))
    assert np.all(turn <= 2.0 * np.arcsin(np.minimum(1.0, chord / (2.0 * r))) * (1 + 1e-6) + 1e-6)
    # Length: the sum of the sub-paths, at least the straight-line distance.
    assert plan.length >= np.linalg.norm(np.asarray(pe) - ps) - 1e-12
    return plan


def test_random_queries_end_at_the_goal_within_the_curvature_bound():
    rng = np.random.default_rng(7)
    for _ in range(60):
        ps = rng.normal(size=3) * 0.2
        pe = ps + rng.normal(size=3) * rng.choice([0.05, 0.3, 2.0])
        th = rng.uniform(-math.pi, math.pi, 2)
        ga = rng.uniform(-1.5, 1.5, 2)
        plan = _check_plan(ps, direction_from_angles(th[0], ga[0]), pe, direction_from_angles(th[1], ga[1]))
        assert plan.case in ("general", "waypoint_beyond_goal")


def test_planes_follow_eq_9_to_14():
    ps, pe = np.zeros(3), np.array([0.5, 0.2, -0.1])
    vs, ve = direction_from_angles(0.3, 0.4), direction_from_angles(-1.0, -0.2)
    plan = plan_3d(ps, vs, pe, ve, R)
    vse = pe / np.linalg.norm(pe)
    ns, ne = (np.array(n) for n in plan.normals)
    assert abs(ns @ vs) < 1e-12 and abs(ns @ vse) < 1e-12  # Ts contains vs and the line
    assert abs(ne @ ve) < 1e-12 and abs(ne @ vse) < 1e-12  # Te contains ve and the line
    rho = math.acos(vs @ vse)
    y = R * math.sin(rho) + math.sqrt(4 * R**2 - (R * math.cos(rho) + R) ** 2)
    assert np.allclose(plan.waypoint, ps + vse * y, atol=1e-8)  # Eq. 12-13 (eps = 1e-9 R)


def test_waypoint_distance_limits():
    assert waypoint_distance(0.0, 1.0) == pytest.approx(0.0)  # goal straight ahead
    assert waypoint_distance(math.pi, 1.0) == pytest.approx(2.0)  # goal behind: beyond the U-turn circle
    assert waypoint_distance(math.pi / 2, 1.0) == pytest.approx(1.0 + math.sqrt(3.0))


def test_planar_query_is_no_shorter_than_the_planar_optimum():
    # Everything in the x-y plane: both planes are that plane; two Dubins legs through Pt can't beat one.
    ps, pe = np.zeros(3), np.array([0.4, -0.3, 0.0])
    vs, ve = direction_from_angles(0.5, 0.0), direction_from_angles(2.0, 0.0)
    plan = _check_plan(ps, vs, pe, ve)
    assert abs(abs(plan.normals[0][2]) - 1.0) < 1e-12 and abs(abs(plan.normals[1][2]) - 1.0) < 1e-12
    direct = shortest_path((0.0, 0.0, 0.5), (0.4, -0.3, 2.0), R)
    assert plan.length >= direct.length - 1e-12


@pytest.mark.parametrize(
    ("name", "vs", "pe", "ve", "case"),
    [
        ("goal ahead", (1, 0, 0), (0.5, 0, 0), (0, 1, 0), "start_aligned"),
        ("goal behind", (1, 0, 0), (-0.5, 0, 0), (0, 0, 1), "start_aligned"),
        ("goal direction along the line", (0, 1, 0), (0.5, 0.0, 0.0), (1, 0, 0), "goal_aligned"),
        ("collinear, same direction", (1, 0, 0), (0.5, 0, 0), (1, 0, 0), "collinear"),
        ("collinear, opposite", (1, 0, 0), (0.5, 0, 0), (-1, 0, 0), "collinear"),
        ("coincident positions", (1, 0, 0), (0.0, 0.0, 0.0), (0, 0, -1), "coincident"),
        ("closer than Eq. 13", (-1, 0.2, 0.1), (0.05, 0.0, 0.0), (0, 0, 1), "waypoint_beyond_goal"),
    ],
)
def test_degenerate_cases(name, vs, pe, ve, case):
    ps = np.zeros(3)
    plan = _check_plan(ps, vs, np.asarray(pe, float), ve)
    assert plan.case == case, name
    if name == "collinear, same direction":
        assert plan.length == pytest.approx(0.5, abs=1e-8)  # a straight line
    if case == "waypoint_beyond_goal":
        assert np.linalg.norm(plan.waypoint) > np.linalg.norm(pe)


def test_actions_bend_within_each_segment_plane():
    # Eq. 25's choice: the bend direction lies in the segment's plane, towards the turn's centre.
    ps, pe = np.zeros(3), np.array([0.3, 0.2, -0.25])
    vs, ve = direction_from_angles(0.2, 0.3), direction_from_angles(2.5, -0.4)
    plan = plan_3d(ps, vs, pe, ve, R)
    T = _frame_for(ps, vs)
    segs = [s for s in plan.segments if s.length > 0.0]
    acts = action_triples(plan, T)
    assert len(acts) == len(segs)
    frames = execute_exact(acts, T)
    for seg, act, F in zip(segs, acts, frames[:-1], strict=True):
        assert act.kind == seg.kind and act.length == pytest.approx(seg.length)
        if seg.kind == "S":
            assert act.beta == 0.0
            continue
        assert act.beta == pytest.approx(seg.length / R)
        b = math.cos(act.alpha) * F[:3, 0] + math.sin(act.alpha) * F[:3, 1]
        n, t = np.array(seg.normal), F[:3, 2]
        assert abs(b @ n) < 1e-9 and abs(b @ t) < 1e-9
        assert b @ np.cross(n, t) == pytest.approx(1.0 if seg.kind == "L" else -1.0)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"goal_position": [math.nan, 0, 0]}, "goal position"),
        ({"goal_position": [1, 0]}, "goal position"),
        ({"goal_direction": [0, 0, 0]}, "non-zero"),
        ({"start_direction": [math.inf, 0, 0]}, "start direction"),
        ({"radius": 0.0}, "radius"),
        ({"radius": math.nan}, "radius"),
        ({"max_length": 0.1}, "max_length"),
    ],
)
def test_bad_goals_raise(kwargs, match):
    args = {
        "start_position": [0, 0, 0], "start_direction": [1, 0, 0],
        "goal_position": [1, 1, 0], "goal_direction": [0, 1, 0], "radius": R,
    }  # fmt: skip
    args.update(kwargs)
    with pytest.raises(PlanningError, match=match):
        plan_3d(**args)


def test_action_triples_reject_a_start_frame_off_the_plan():
    plan = plan_3d([0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], R)
    with pytest.raises(PlanningError, match="start frame"):
        action_triples(plan, np.eye(4))
