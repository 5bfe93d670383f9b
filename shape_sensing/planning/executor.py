"""Run action triples with discrete growth steps; the errors of Eq. 26-28.

A growing robot adds material in discrete steps: each step grows
``step_length = g * t`` and, on an arc, bends by ``bend_per_step = phi * t``
(Eq. 4 with constant ``alpha``). A segment of length ``S`` is grown in
``round(S / step_length)`` steps, so the executed segment misses the planned
one by up to half a step in length and half a step's bend in angle; with a
``bend_per_step`` that does not match the plan's radius (the robot's real
``g / phi`` differs from the radius planned with), every arc also over- or
under-turns. These errors accumulate along the path (open loop).

Closed loop (beyond the paper): the rest of the path is re-planned from the
tip pose actually reached after every executed piece (a segment, or at most
``max_chunk`` of it):

* The first plane's leg is re-planned as a planar Dubins path to the waypoint
  pose (the tip stays in that plane, and a Dubins tail is itself a Dubins
  path, so an unperturbed re-plan is exactly the rest of the old one).
* At the waypoint the rest is re-planned in 3D (:func:`plan_3d`, new planes
  through the pose reached; unless that is longer than the old second leg by
  more than ``replan_margin``, as for a goal behind the waypoint, where the
  old leg is followed in its plane and errors across it stay), and again on long straights towards the goal
  whenever the tip is off the leg's plane by more than half a step (or its
  direction by a quarter of a step's bend), so errors across the plane are
  corrected as well. Such a re-plan can change the path's shape (new planes,
  new waypoint) within ``replan_margin`` of the old length.
* A re-plan longer than the old remainder by more than ``replan_margin`` (a
  loop forced by a tiny miss at the end of an arc) is not taken; the old path
  continues, and the rounding of its pieces is carried over, not repeated.
* The bend actually achieved per arc step is measured from the tip tangent
  before and after each arc piece; re-plans use the radius it implies, so a
  robot whose ``g / phi`` differs from the planning radius is corrected.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from shape_sensing.estimators.growth import angles_from_direction, tip_step
from shape_sensing.geometry import FloatArray
from shape_sensing.planning.dubins2d import DubinsPath2D, shortest_path
from shape_sensing.planning.dubins3d import Action, Plan3D, Vec, action_triples, plan_3d
from shape_sensing.planning.errors import PlanningError

__all__ = [
    "HEADING_UNDEFINED_DEG",
    "RC",
    "ROBOT_A",
    "ExecutionResult",
    "StepModel",
    "describe_errors",
    "execute",
    "pose_errors",
    "run_actions",
]


@dataclass(frozen=True)
class StepModel:
    """Discrete growth of a robot.

    Args:
        step_length: growth per step ``g * t`` (m), > 0.
        bend_per_step: bend per step on arcs ``phi * t`` (rad); ``None`` bends
            at exactly the plan's radius (``step_length / radius``).
    """

    step_length: float
    bend_per_step: float | None = None

    def __post_init__(self) -> None:
        if not (isinstance(self.step_length, (int, float)) and math.isfinite(self.step_length)):
            raise PlanningError(f"step_length = {self.step_length!r}: expected a finite growth per step (m)")
        if self.step_length <= 0.0:
            raise PlanningError(
                f"step_length = {self.step_length!r}: expected a growth per step > 0 (zero growth never reaches a goal)"
            )
        b = self.bend_per_step
        if b is not None and not (math.isfinite(b) and b > 0.0):
            raise PlanningError(f"bend_per_step = {b!r}: expected a finite angle > 0 (rad) or None")

    @classmethod
    def from_rates(cls, growth_rate: float, bend_rate: float | None, step_time: float) -> StepModel:
        """From the seed paper's ``g`` (m/s), ``phi`` (rad/s) and deposition time ``t`` (s)."""
        for name, v in (("growth_rate", growth_rate), ("step_time", step_time)):
            if not (math.isfinite(v) and v > 0.0):
                raise PlanningError(f"{name} = {v!r}: expected a finite value > 0")
        return cls(growth_rate * step_time, None if bend_rate is None else bend_rate * step_time)

    def bend(self, radius: float) -> float:
        """Bend per arc step for a plan of ``radius``."""
        return self.step_length / radius if self.bend_per_step is None else self.bend_per_step

    def k(self, radius: float) -> float:
        """The seed paper's ``k = g t / Rc``."""
        return self.step_length / radius


def run_actions(
    actions: Sequence[Action], start_frame: ArrayLike, model: StepModel, radius: float, *, keep_steps: bool = False
) -> tuple[FloatArray, int]:
    """Apply action triples with discrete steps.

    Returns:
        The tip poses (``(M + 1, 4, 4)``: after every step if ``keep_steps``,
        else after every action) and the number of steps grown.
    """
    T = np.asarray(start_frame, dtype=float)
    poses = [T]
    bend = model.bend(radius)
    n_total = 0
    for a in actions:
        n = round(a.length / model.step_length)
        if n == 0:
            continue
        phi = bend if a.kind != "S" else 0.0
        if keep_steps:
            k = np.arange(1, n + 1, dtype=float)
            seg = T @ tip_step(a.alpha, k * model.step_length, k * phi)
            poses.extend(seg)
            T = seg[-1]
        else:
            # n equal steps of Eq. 4 compose exactly into one arc of n times the growth and bend.
            T = T @ tip_step(a.alpha, n * model.step_length, n * phi)
            poses.append(T)
        n_total += n
    return np.stack(poses), n_total


def pose_errors(
    tip: ArrayLike, goal_position: ArrayLike, goal_direction: ArrayLike, path_length: float
) -> dict[str, float]:
    """Errors of Eq. 26-28 between a reached tip pose (``4x4``) and the goal.

    Returns:
        ``position`` (m), ``position_norm`` (Eq. 26, over ``path_length``),
        ``heading_deg`` (Eq. 27), ``pitch_deg`` (Eq. 28) and ``direction_deg``
        (angle between the directions, well defined also near vertical).
    """
    T = np.asarray(tip, dtype=float)
    pe = np.asarray(goal_position, dtype=float)
    ve = np.asarray(goal_direction, dtype=float)
    ve = ve / np.linalg.norm(ve)
    pos = float(np.linalg.norm(T[:3, 3] - pe))
    th_t, ga_t = angles_from_direction(T[:3, 2])
    th_e, ga_e = angles_from_direction(ve)
    dth = abs(math.remainder(float(th_t) - float(th_e), 2.0 * math.pi))
    cosang = float(np.clip(T[:3, 2] @ ve / np.linalg.norm(T[:3, 2]), -1.0, 1.0))
    return {
        "position": pos,
        "position_norm": pos / path_length if path_length > 0 else math.inf,
        "heading_deg": math.degrees(dth),
        "pitch_deg": math.degrees(abs(float(ga_t) - float(ga_e))),
        "direction_deg": math.degrees(math.acos(cosang)),
    }


HEADING_UNDEFINED_DEG = 5.0  # goal directions this close to vertical have no meaningful heading (Eq. 27)

#: the seed paper's robot A (Figure 4): per-step length and angle noise rates, and its curvature radius RC (m)
RC = 0.10
ROBOT_A = StepModel.from_rates(0.0043e-2, math.radians(0.025), 18.0)


def describe_errors(errors: dict[str, float], goal_direction: ArrayLike) -> str:
    """One line of a predicted tip's errors: position, direction, and Eq. 27-28's heading and pitch.

    Eq. 27's heading is the difference of azimuths: for a goal direction near
    vertical (within :data:`HEADING_UNDEFINED_DEG`) the azimuth is ill-defined,
    and a tip a fraction of a degree off vertical can show any heading up to
    180 deg (a chained goal along +z logged 138.6 deg with the tip 0.2 deg off).
    There the heading is reported as undefined and the direction error (the
    angle between the directions, always defined) carries the information.
    """
    v = np.asarray(goal_direction, dtype=float)
    v = v / np.linalg.norm(v)
    off_vertical = math.degrees(math.acos(float(np.clip(abs(v[2]), 0.0, 1.0))))
    heading = (
        f"heading {errors['heading_deg']:.2f} deg"
        if off_vertical > HEADING_UNDEFINED_DEG
        else f"heading undefined (goal direction {off_vertical:.1f} deg from vertical)"
    )
    return (
        f"position {errors['position'] * 1000:.2f} mm, direction {errors['direction_deg']:.2f} deg, "
        f"{heading}, pitch {errors['pitch_deg']:.2f} deg"
    )


@dataclass
class ExecutionResult:
    """Outcome of one execution.

    Attributes:
        poses: tip poses (after every step or every segment, see ``keep_steps``).
        plan: the first plan (its length is Eq. 26's ``l``).
        errors: :func:`pose_errors` of the final tip pose.
        steps: number of growth steps.
        grown: length grown (m).
        replans: re-plans taken (closed loop).
    """

    poses: FloatArray
    plan: Plan3D
    errors: dict[str, float]
    steps: int
    grown: float
    replans: int = 0
    segment_ends: list[int] = field(default_factory=list)


def execute(
    start_frame: ArrayLike,
    goal_position: ArrayLike,
    goal_direction: ArrayLike,
    radius: float,
    model: StepModel,
    *,
    closed_loop: bool = False,
    keep_steps: bool = False,
    replan_margin: float | None = None,
    max_chunk: float | None = None,
    max_segments: int = 10_000,
) -> ExecutionResult:
    """Plan from ``start_frame`` to the goal and grow there with discrete steps.

    Args:
        start_frame: ``4x4`` tip pose (z axis = growth direction).
        goal_position, goal_direction: the goal pose.
        radius: planning radius ``Rc`` (m).
        model: the robot's discrete growth.
        closed_loop: re-plan from the reached pose after every segment.
        keep_steps: keep every step's pose (for pictures and bags).
        replan_margin: how much longer (m) than the old remainder a re-plan may
            be and still be taken (default ``radius``).
        max_segments: safety bound on executed pieces in closed loop; growth also stops beyond
            twice the first plan's length plus one turn (``2 l + 2 pi Rc``).

    Raises:
        PlanningError: bad goal (non-finite, zero direction), bad radius.
    """
    T = np.asarray(start_frame, dtype=float)
    if T.shape != (4, 4) or not np.all(np.isfinite(T)):
        raise PlanningError(f"start frame has shape {T.shape}: expected a finite 4x4 transform")
    plan = plan_3d(T[:3, 3], T[:3, 2], goal_position, goal_direction, radius)
    half = 0.5 * model.step_length
    actions = action_triples(plan, T, min_length=half)
    if not closed_loop:
        poses, steps = run_actions(actions, T, model, radius, keep_steps=keep_steps)
        return ExecutionResult(
            poses, plan, pose_errors(poses[-1], goal_position, goal_direction, plan.length), steps,
            steps * model.step_length,
        )  # fmt: skip
    return _closed_loop(
        T, plan, goal_position, goal_direction, radius, model, keep_steps, replan_margin, max_chunk, max_segments
    )


def _plane_pose(T: FloatArray, frame: tuple[Vec, Vec, Vec]) -> tuple[float, float, float]:
    o, ex, ey = (np.asarray(v) for v in frame)
    d = T[:3, 3] - o
    t = T[:3, 2]
    return float(d @ ex), float(d @ ey), math.atan2(float(t @ ey), float(t @ ex))


def _closed_loop(
    T: FloatArray,
    plan: Plan3D,
    goal_position: ArrayLike,
    goal_direction: ArrayLike,
    radius: float,
    model: StepModel,
    keep_steps: bool,
    replan_margin: float | None,
    max_chunk: float | None,
    max_segments: int,
) -> ExecutionResult:
    step = model.step_length
    half = 0.5 * step
    margin = 0.5 * radius if replan_margin is None else float(replan_margin)
    chunk = max(0.25 * radius, step) if max_chunk is None else float(max_chunk)
    if not (math.isfinite(chunk) and chunk >= step):
        raise PlanningError(f"max_chunk = {max_chunk!r}: expected at least one step ({step:.6g} m)")
    if not (math.isfinite(margin) and margin >= 0.0):
        raise PlanningError(f"replan_margin = {replan_margin!r}: expected a finite value >= 0 (m)")
    all_poses = [T[None]]
    steps = 0
    replans = 0
    segments = 0
    ends: list[int] = []
    # Bend actually achieved per arc step, measured from the tip's tangent: the radius re-plans use.
    turned, arc_steps = 0.0, 0
    r_now = radius
    # The path is followed as planar legs, each re-planned in its own plane after every piece (a Dubins tail
    # is a Dubins path, so an unperturbed re-plan is the rest of the old one). A leg's plane contains the
    # tip when the leg starts and pieces bend only within it, so the projection loses nothing on the first
    # leg. At the waypoint the rest is re-planned once in 3D (new planes through the pose reached).
    legs: list[tuple[tuple[Vec, Vec, Vec], Vec, DubinsPath2D]] = [(plan.frames[0], plan.normals[0], plan.paths[0])]
    planned_3d = False
    # Safety bound: re-plans that keep growing without arriving (never seen with the default margin) stop here.
    max_growth = 2.0 * plan.length + 2.0 * math.pi * radius
    while legs and segments < max_segments and steps * step <= max_growth:
        frame, normal, path = legs.pop(0)
        target = path.end
        offset = carry = 0.0
        fresh_needed = False
        for _ in range(4 * max_segments):
            if segments >= max_segments or steps * step > max_growth:
                break
            if fresh_needed and path.length - offset >= half:
                fresh = shortest_path(_plane_pose(T, frame), target, r_now)
                # A re-plan much longer than the rest is a loop forced by a tiny miss: keep the old path then.
                if fresh.length <= path.length - offset + margin:
                    path, offset, carry = fresh, 0.0, 0.0
                    replans += 1
            fresh_needed = False
            if path.length - offset < half:
                break
            bounds = (0.0, path.lengths[0], path.lengths[0] + path.lengths[1], path.length)
            i = 0
            while i < 2 and offset >= bounds[i + 1] - 1e-12:
                i += 1
            kind = path.word[i]
            piece = min(bounds[i + 1] - offset, chunk)
            n = round((piece + carry) / step)
            if n == 0:
                # Under half a step: carried over to the next piece of this path, not re-planned back.
                offset += piece
                carry += piece
                continue
            carry += piece - n * step
            t = T[:3, 2].copy()
            if kind == "S":
                act = Action(0.0, 0.0, n * step, "S")
            else:
                nv = np.asarray(normal)
                b = np.cross(nv, t) if kind == "L" else np.cross(t, nv)
                act = Action(math.atan2(float(b @ T[:3, 1]), float(b @ T[:3, 0])), n * step / r_now, n * step, kind)
            seg_poses, nsteps = run_actions([act], T, model, radius, keep_steps=keep_steps)
            all_poses.append(seg_poses[1:])
            steps += nsteps
            T = seg_poses[-1]
            ends.append(steps)
            offset += piece
            segments += 1
            fresh_needed = True
            nv = np.asarray(normal)
            off_plane = abs(float((T[:3, 3] - np.asarray(frame[0])) @ nv)) > half or abs(float(T[:3, 2] @ nv)) > (
                0.25 * step / r_now
            )
            if kind == "S" and planned_3d and path.length - offset > 3.0 * r_now and off_plane:
                # A long straight to the goal, off the leg's plane by more than half a step (or its direction by
                # a quarter of a step's bend): re-plan in 3D so that errors across the plane get corrected too.
                fresh3 = plan_3d(T[:3, 3], T[:3, 2], goal_position, goal_direction, r_now)
                if fresh3.length <= path.length - offset + margin:
                    replans += 1
                    legs = [(fresh3.frames[k], fresh3.normals[k], fresh3.paths[k]) for k in (0, 1)]
                    break
            if kind != "S":
                turned += math.acos(max(-1.0, min(1.0, float(t @ T[:3, 2]))))
                arc_steps += nsteps
                r_est = step * arc_steps / turned if turned > 0.0 else radius
                if arc_steps >= 10 and 0.5 * radius <= r_est <= 2.0 * radius:
                    r_now = r_est
        if not planned_3d:
            planned_3d = True
            fresh3 = plan_3d(T[:3, 3], T[:3, 2], goal_position, goal_direction, r_now)
            # Not taken when much longer than the old second leg (a goal behind the waypoint: the new
            # waypoint would be 2 Rc out again); the old leg is then followed in its plane.
            if fresh3.length <= plan.paths[1].length + margin:
                replans += 1
                legs = [(fresh3.frames[k], fresh3.normals[k], fresh3.paths[k]) for k in (0, 1)]
            else:
                legs = [(plan.frames[1], plan.normals[1], plan.paths[1])]
    poses = np.concatenate(all_poses)
    return ExecutionResult(
        poses, plan, pose_errors(T, goal_position, goal_direction, plan.length), steps,
        steps * step, replans, ends,
    )  # fmt: skip
