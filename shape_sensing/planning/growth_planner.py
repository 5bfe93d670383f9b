"""The growth planner behind the ``growth_planner`` node and ``shape-sensing demo growing``.

A goal pose (position, and an orientation whose z axis is the growth
direction at the goal) is planned from the tip's pose with the 3D planner
(:func:`~shape_sensing.planning.dubins3d.plan_3d`); the plan is sampled into
tip frames for ``nav_msgs/Path``, turned into action triples, and its
execution with the robot's discrete steps is predicted (open or closed loop),
giving the tip pose the robot will actually reach and the errors of Eq. 26-28.

Bad goals and parameters raise :class:`~shape_sensing.planning.errors.PlanningError`
(or :class:`~shape_sensing.config.ConfigError` for the schema) naming what was wrong:
a non-finite goal, a zero orientation, a radius below the robot's minimum
bending radius (Eq. 7: unreachable), zero growth per step, a goal farther
than the robot can grow.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from shape_sensing.config import Param, Schema
from shape_sensing.geometry import FloatArray
from shape_sensing.planning.dubins3d import Action, Plan3D, action_triples, plan_3d
from shape_sensing.planning.errors import PlanningError
from shape_sensing.planning.executor import ExecutionResult, StepModel, execute

__all__ = ["SCHEMA", "GrowthPlan", "GrowthPlanner", "frames_along", "goal_in_frame", "pose_to_goal"]

SCHEMA = Schema(
    "growth_planner",
    (
        Param("radius", float, 0.10, "planning turning radius Rc (at least min_radius)", min=1e-6, unit="m"),
        Param(
            "min_radius", float, 0.0982, "robot's minimum bending radius Rmin (Eq. 7); tighter plans are refused",
            min=0.0, unit="m",
        ),
        Param("step_length", float, 0.000774, "growth per deposition step g*t", min=0.0, unit="m"),
        Param(
            "bend_per_step", float, 0.0, "bend per arc step phi*t; 0 bends at exactly radius", min=0.0, max=math.pi,
            unit="rad",
        ),
        Param("max_length", float, 10.0, "longest path the robot can grow", min=0.0, unit="m"),
        Param("sample_step", float, 0.005, "spacing of the nav_msgs/Path poses", min=1e-6, unit="m"),
        Param("closed_loop", bool, True, "predict the execution with closed-loop re-planning"),
        Param("start_position", "float[]", [0.0, 0.0, 0.0], "tip position when a request gives no start", unit="m"),
        Param(
            "start_direction", "float[]", [1.0, 0.0, 0.0], "tip growth direction when a request gives no start",
            check=lambda v: None if len(v) == 3 and any(v) else "three values, not all zero",
        ),
        Param("plan_frame", str, "growth_base", "frame of the plans (goals in another frame are refused)"),
        Param("tip_frame", str, "growth_tip", "frame of the predicted tip"),
        Param("frame_prefix", str, "", "prefix of every frame name (two robots in one TF tree)"),
        Param("marker_width", float, 0.004, "line width of the plan markers", min=1e-6, unit="m"),
    ),
    description="3D Dubins planner for tip-growing robots (seed 002)",
)  # fmt: skip


def frames_along(positions: ArrayLike, tangents: ArrayLike) -> FloatArray:
    """Tip frames ``(N, 4, 4)`` at ``positions`` with z along ``tangents`` and no twist between samples.

    The first frame's x axis is the world axis least aligned with the tangent,
    made perpendicular; later frames are parallel-transported (minimal
    rotation from one tangent to the next).
    """
    p = np.asarray(positions, dtype=float)
    t = np.asarray(tangents, dtype=float)
    t = t / np.linalg.norm(t, axis=1, keepdims=True)
    out = np.tile(np.eye(4), (len(p), 1, 1))
    out[:, :3, 3] = p
    if len(p) == 0:
        return out
    axis = np.eye(3)[int(np.argmin(np.abs(t[0])))]
    x = axis - (axis @ t[0]) * t[0]
    x /= np.linalg.norm(x)
    for i in range(len(p)):
        if i:
            x = x - (x @ t[i]) * t[i]
            x /= np.linalg.norm(x)
        out[i, :3, 0] = x
        out[i, :3, 1] = np.cross(t[i], x)
        out[i, :3, 2] = t[i]
    return out


@dataclass
class GrowthPlan:
    """One planned goal.

    Attributes:
        plan: the 3D plan.
        actions: its action triples from the start frame.
        frames: tip frames along the plan every ``sample_step`` (for nav_msgs/Path).
        execution: the predicted discrete execution (its ``poses`` every segment or step).
        planning_time_s: wall time of :func:`plan_3d`.
    """

    plan: Plan3D
    actions: list[Action]
    frames: FloatArray
    execution: ExecutionResult
    planning_time_s: float


class GrowthPlanner:
    """Plans goals for one robot from validated :data:`SCHEMA` parameters.

    Raises:
        PlanningError: unreachable parameters (radius below ``min_radius``) or zero growth per step.
    """

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.params = SCHEMA.validate(params)
        p = self.params
        if p["radius"] < p["min_radius"]:
            raise PlanningError(
                f"radius = {p['radius']} m is below the robot's minimum bending radius min_radius = "
                f"{p['min_radius']} m (Eq. 7): expected radius >= min_radius, such paths are unreachable"
            )
        self.model = StepModel(p["step_length"], p["bend_per_step"] or None)
        self.tip = self.start_frame(p["start_position"], p["start_direction"])

    @property
    def frame(self) -> str:
        """The (prefixed) frame plans are given in."""
        return str(self.params["frame_prefix"] + self.params["plan_frame"])

    @staticmethod
    def start_frame(position: ArrayLike, direction: ArrayLike) -> FloatArray:
        """A tip frame at ``position`` growing along ``direction``."""
        d = np.asarray(direction, dtype=float).reshape(-1)
        p = np.asarray(position, dtype=float).reshape(-1)
        if d.shape != (3,) or p.shape != (3,) or not (np.all(np.isfinite(d)) and np.all(np.isfinite(p))):
            raise PlanningError(f"start position {p.tolist()} / direction {d.tolist()}: expected finite 3-vectors")
        if np.linalg.norm(d) < 1e-12:
            raise PlanningError(f"start direction = {d.tolist()}: expected a non-zero direction")
        return frames_along(p[None], d[None])[0]

    def plan(self, goal_position: ArrayLike, goal_direction: ArrayLike, start: ArrayLike | None = None) -> GrowthPlan:
        """Plan from ``start`` (a ``4x4`` tip frame; default the current tip) to the goal.

        Raises:
            PlanningError: a bad goal or start, or a path longer than ``max_length``.
        """
        import time

        T0 = self.tip if start is None else np.asarray(start, dtype=float)
        if T0.shape != (4, 4) or not np.all(np.isfinite(T0)):
            raise PlanningError(f"start frame has shape {T0.shape}: expected a finite 4x4 transform")
        p = self.params
        t0 = time.perf_counter()
        plan = plan_3d(T0[:3, 3], T0[:3, 2], goal_position, goal_direction, p["radius"], max_length=p["max_length"])
        elapsed = time.perf_counter() - t0
        pos, tan = plan.sample(p["sample_step"])
        frames = frames_along(pos, tan)
        actions = action_triples(plan, T0)
        execution = execute(
            T0, goal_position, goal_direction, p["radius"], self.model, closed_loop=p["closed_loop"], keep_steps=True
        )
        return GrowthPlan(plan, actions, frames, execution, elapsed)

    def advance(self, result: GrowthPlan) -> None:
        """Take the predicted tip pose of ``result`` as the current tip (the robot grew there)."""
        self.tip = result.execution.poses[-1].copy()


def pose_to_goal(matrix: ArrayLike) -> tuple[FloatArray, FloatArray]:
    """Goal position and growth direction (the pose's z axis) from a ``4x4`` pose."""
    T = np.asarray(matrix, dtype=float)
    if T.shape != (4, 4) or not np.all(np.isfinite(T)):
        raise PlanningError(f"goal pose is not a finite 4x4 transform: {T.tolist()!r}")
    return T[:3, 3].copy(), T[:3, 2].copy()


def goal_in_frame(
    T_plan_goalframe: ArrayLike, position: ArrayLike, direction: ArrayLike
) -> tuple[FloatArray, FloatArray]:
    """A goal (position, growth direction) given in another frame, expressed in the plan frame.

    Args:
        T_plan_goalframe: ``4x4`` pose of the goal's frame in the plan frame (what
            tf2's ``lookup_transform(plan_frame, goal_frame)`` gives).
        position, direction: the goal in its own frame.
    """
    T = np.asarray(T_plan_goalframe, dtype=float)
    if T.shape != (4, 4) or not np.all(np.isfinite(T)):
        raise PlanningError(f"transform to the plan frame is not a finite 4x4 transform: {T.tolist()!r}")
    R = T[:3, :3]
    return R @ np.asarray(position, dtype=float) + T[:3, 3], R @ np.asarray(direction, dtype=float)
