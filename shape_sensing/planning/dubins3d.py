"""3D paths for tip-growing robots from two planar Dubins paths (seed paper Eq. 9-25).

The start pose ``(Ps, vs)`` and goal pose ``(Pe, ve)`` (position, unit growth
direction) are joined through a waypoint ``Pt`` on the line ``Ps -> Pe``:

1. ``vse = (Pe - Ps) / |Pe - Ps|`` (Eq. 11). Plane ``Ts`` contains ``vs`` and
   ``vse``, normal ``ns = vse x vs / |.|`` (Eq. 9); plane ``Te`` contains ``ve``
   and ``vse``, normal ``ne = vse x ve / |.|`` (Eq. 10). Both contain the line.
2. ``Pt = Ps + y vse`` with ``y = R sin(rho) + sqrt((2R)^2 - (R cos(rho) + R)^2) + eps``
   and ``rho`` the angle between ``vs`` and ``vse`` (Eq. 12-14).
3. On ``Ts`` (frame ``[vs, ns x vs, ns]`` at ``Ps``, Eq. 15-18) a 2D Dubins path
   from heading 0 to ``(Pt, vse)``; on ``Te`` (frame ``[vse, ne x vse, ne]`` at
   ``Pt``, Eq. 19-22) one from ``(Pt, vse)`` to ``(Pe, ve)``.
4. Each segment becomes an action triple ``<alpha, beta, S>`` for Eq. 4
   (see :func:`action_triples`).

Where this differs from the paper's text, and why:

* The target headings of the two sub-problems (Eq. 23-24) are computed with
  ``atan2`` of the projections on the plane's axes, not ``acos``: ``acos``
  drops the sign, and with the frames of Eq. 17/21 the waypoint heading on
  ``Ts`` is in fact ``-rho``.
* The deposition angle (Eq. 25 and the choice between ``pi/2 + delta`` and
  ``3 pi/2 + delta``) is computed directly: the bending direction is
  ``n x t`` for a left turn and ``t x n`` for a right turn, and ``alpha`` is
  its angle in the tip's x-y plane (``atan2``, sign-safe, the same choice).

Degenerate cases (each documented in :attr:`Plan3D.case` and tested):

* ``"general"``: both normals exist.
* ``"start_aligned"``: ``vs`` is parallel to ``vse`` (the goal straight ahead,
  or straight behind): Eq. 9 is undefined; ``Ts`` takes ``Te``'s normal (any
  plane through the line contains ``vs``), making the path planar where it can.
* ``"goal_aligned"``: ``ve`` parallel to ``vse``: ``Te`` takes ``Ts``'s normal.
* ``"collinear"``: both parallel: one plane through the line, normal chosen
  perpendicular to ``vse`` along the world axis least aligned with it.
* ``"coincident"``: ``Ps = Pe``: ``vse`` is undefined; ``vse = vs`` is used
  (``rho = 0``, so ``Pt = Ps``), leaving one planar turn onto ``ve``.
* ``"waypoint_beyond_goal"``: the goal is closer than Eq. 13's ``y``, so
  ``Pt`` lies past ``Pe`` on the line; the ``Te`` path then turns back to the
  goal. The path stays feasible (every segment at radius ``R`` or straight),
  only longer than a direct one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from shape_sensing.estimators.growth import tip_step
from shape_sensing.geometry import FloatArray
from shape_sensing.planning.dubins2d import DubinsPath2D, shortest_path
from shape_sensing.planning.errors import PlanningError

__all__ = ["Action", "Plan3D", "Segment3D", "action_triples", "plan_3d", "waypoint_distance"]

_PARALLEL_TOL = 1e-9

Vec = tuple[float, float, float]


def _cross(a: Vec, b: Vec) -> Vec:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _dot(a: Vec, b: Vec) -> float:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _norm(a: Vec) -> float:
    return math.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2])


def _scale(a: Vec, k: float) -> Vec:
    return (a[0] * k, a[1] * k, a[2] * k)


def _vec(name: str, value: ArrayLike, *, unit: bool) -> Vec:
    try:
        arr = np.asarray(value, dtype=float).reshape(-1)
    except (TypeError, ValueError):
        raise PlanningError(f"{name} = {value!r}: expected three numbers") from None
    if arr.shape != (3,) or not np.all(np.isfinite(arr)):
        raise PlanningError(f"{name} = {np.asarray(value).tolist()!r}: expected three finite numbers")
    v = (float(arr[0]), float(arr[1]), float(arr[2]))
    if unit:
        n = _norm(v)
        if n < 1e-12:
            raise PlanningError(f"{name} = {list(v)!r}: expected a non-zero direction")
        v = _scale(v, 1.0 / n)
    return v


def waypoint_distance(rho: float, radius: float, eps: float = 0.0) -> float:
    """Distance ``y`` from ``Ps`` to the waypoint ``Pt`` along ``vse`` (Eq. 13)."""
    r = radius
    inner = (2.0 * r) ** 2 - (r * math.cos(rho) + r) ** 2
    return r * math.sin(rho) + math.sqrt(max(inner, 0.0)) + eps


@dataclass(frozen=True)
class Segment3D:
    """One segment of a 3D path.

    Attributes:
        kind: ``"L"`` (arc turning about ``+normal``), ``"R"`` (about ``-normal``) or ``"S"``.
        length: arc length.
        position: start position.
        direction: start unit tangent.
        normal: unit normal of the segment's plane.
    """

    kind: str
    length: float
    position: Vec
    direction: Vec
    normal: Vec


@dataclass(frozen=True)
class Action:
    """An action triple ``<alpha, beta, S>`` (Eq. 4 inputs for one segment).

    Attributes:
        alpha: bending direction in the tip's x-y plane (rad; 0 for straights).
        beta: arc angle (rad; 0 for straights).
        length: arc length ``S``.
        kind: the segment's letter (``L``, ``R``, ``S``).
    """

    alpha: float
    beta: float
    length: float
    kind: str


@dataclass(frozen=True)
class Plan3D:
    """A 3D path from two planar Dubins paths.

    Attributes:
        start, goal: ``(position, unit direction)``.
        radius: turning radius of every arc.
        waypoint: ``Pt``.
        normals: ``(ns, ne)`` of planes ``Ts`` and ``Te``.
        frames: the 2D frames ``(origin, x axis, y axis)`` of ``Ts`` and ``Te``.
        paths: the 2D Dubins paths on ``Ts`` and ``Te``.
        case: which degenerate case applied (see the module docstring).
    """

    start: tuple[Vec, Vec]
    goal: tuple[Vec, Vec]
    radius: float
    waypoint: Vec
    normals: tuple[Vec, Vec]
    frames: tuple[tuple[Vec, Vec, Vec], tuple[Vec, Vec, Vec]]
    paths: tuple[DubinsPath2D, DubinsPath2D]
    case: str
    segments: list[Segment3D] = field(default_factory=list)

    @property
    def length(self) -> float:
        """Total path length."""
        return self.paths[0].length + self.paths[1].length

    @property
    def word(self) -> str:
        """The six letters of the two sub-paths."""
        return self.paths[0].word + self.paths[1].word

    def sample(self, step: float) -> tuple[FloatArray, FloatArray]:
        """Positions and unit tangents ``(N, 3)`` every ``step`` along the path (ends included)."""
        pos_parts = []
        dir_parts = []
        for k, (path, (o, ex, ey)) in enumerate(zip(self.paths, self.frames, strict=True)):
            q = path.sample(step) if path.length > 0.0 else path.pose_at([0.0])
            if k == 1:
                q = q[1:]  # the waypoint is already the end of the first part
            origin, X, Y = np.array(o), np.array(ex), np.array(ey)
            pos_parts.append(origin + q[:, :1] * X + q[:, 1:2] * Y)
            dir_parts.append(np.cos(q[:, 2:3]) * X + np.sin(q[:, 2:3]) * Y)
        return np.concatenate(pos_parts), np.concatenate(dir_parts)


def _perpendicular(v: Vec) -> Vec:
    i = min(range(3), key=lambda k: abs(v[k]))
    axis = [0.0, 0.0, 0.0]
    axis[i] = 1.0
    c = _cross(v, (axis[0], axis[1], axis[2]))
    return _scale(c, 1.0 / _norm(c))


def _to_plane(p: Vec, o: Vec, ex: Vec, ey: Vec) -> tuple[float, float]:
    d = (p[0] - o[0], p[1] - o[1], p[2] - o[2])
    return _dot(d, ex), _dot(d, ey)


def plan_3d(
    start_position: ArrayLike,
    start_direction: ArrayLike,
    goal_position: ArrayLike,
    goal_direction: ArrayLike,
    radius: float,
    *,
    eps: float | None = None,
    max_length: float | None = None,
) -> Plan3D:
    """Plan a 3D bounded-curvature path (Eq. 9-24) from a start pose to a goal pose.

    Args:
        start_position, goal_position: 3-vectors (m).
        start_direction, goal_direction: growth directions (normalised here).
        radius: turning radius ``Rc`` (m), > 0; at least the robot's Rmin.
        eps: Eq. 13's small margin (default ``1e-9 * radius``).
        max_length: longest path the robot can grow; longer plans raise.

    Raises:
        PlanningError: a non-finite or zero-length input, a bad radius, or a
            path longer than ``max_length``.
    """
    ps = _vec("start position", start_position, unit=False)
    vs = _vec("start direction", start_direction, unit=True)
    pe = _vec("goal position", goal_position, unit=False)
    ve = _vec("goal direction", goal_direction, unit=True)
    try:
        r = float(radius)
    except (TypeError, ValueError):
        raise PlanningError(f"radius = {radius!r}: expected a number > 0") from None
    if not (math.isfinite(r) and r > 0.0):
        raise PlanningError(f"radius = {radius!r}: expected a finite value > 0")
    e = 1e-9 * r if eps is None else float(eps)
    if not (math.isfinite(e) and e >= 0.0):
        raise PlanningError(f"eps = {eps!r}: expected a finite value >= 0")

    dse = (pe[0] - ps[0], pe[1] - ps[1], pe[2] - ps[2])
    dist = _norm(dse)
    coincident = dist <= 1e-12 * max(r, 1.0)
    vse = vs if coincident else _scale(dse, 1.0 / dist)

    cs, ce = _cross(vse, vs), _cross(vse, ve)
    ncs, nce = _norm(cs), _norm(ce)
    s_ok, e_ok = ncs > _PARALLEL_TOL, nce > _PARALLEL_TOL
    if s_ok and e_ok:
        ns, ne, case = _scale(cs, 1.0 / ncs), _scale(ce, 1.0 / nce), "general"
    elif e_ok:
        ne = _scale(ce, 1.0 / nce)
        ns, case = ne, "start_aligned"
    elif s_ok:
        ns = _scale(cs, 1.0 / ncs)
        ne, case = ns, "goal_aligned"
    else:
        ns = ne = _perpendicular(vse)
        case = "collinear"
    if coincident:
        case = "coincident"

    rho = math.acos(max(-1.0, min(1.0, _dot(vs, vse))))
    y = waypoint_distance(rho, r, e)
    if not coincident and y > dist:
        case = "waypoint_beyond_goal"
    pt = (ps[0] + vse[0] * y, ps[1] + vse[1] * y, ps[2] + vse[2] * y)

    ys = _cross(ns, vs)
    ye = _cross(ne, vse)
    frame_s = (ps, vs, ys)
    frame_e = (pt, vse, ye)
    bx, by = _to_plane(pt, *frame_s)
    heading_t = math.atan2(_dot(vse, ys), _dot(vse, vs))
    dx, dy = _to_plane(pe, *frame_e)
    heading_e = math.atan2(_dot(ve, ye), _dot(ve, vse))
    path_s = shortest_path((0.0, 0.0, 0.0), (bx, by, heading_t), r)
    path_e = shortest_path((0.0, 0.0, 0.0), (dx, dy, heading_e), r)
    total = path_s.length + path_e.length
    if max_length is not None and total > max_length:
        raise PlanningError(
            f"goal needs a {total:.6g} m path (radius {r:.6g} m): expected at most max_length = {max_length:.6g} m"
        )

    segments: list[Segment3D] = []
    for path, (o, ex, ey), n in ((path_s, frame_s, ns), (path_e, frame_e, ne)):
        for kind, length, (x, yy, h) in zip(path.word, path.lengths, path.segment_starts()[:3], strict=True):
            ch, sh = math.cos(h), math.sin(h)
            pos = (o[0] + x * ex[0] + yy * ey[0], o[1] + x * ex[1] + yy * ey[1], o[2] + x * ex[2] + yy * ey[2])
            d = (ch * ex[0] + sh * ey[0], ch * ex[1] + sh * ey[1], ch * ex[2] + sh * ey[2])
            segments.append(Segment3D(kind, length, pos, d, n))
    return Plan3D(
        start=(ps, vs),
        goal=(pe, ve),
        radius=r,
        waypoint=pt,
        normals=(ns, ne),
        frames=(frame_s, frame_e),
        paths=(path_s, path_e),
        case=case,
        segments=segments,
    )


def action_triples(plan: Plan3D, start_frame: ArrayLike, *, min_length: float = 0.0) -> list[Action]:
    """The action triples ``<alpha, beta, S>`` of a plan for a tip starting at ``start_frame``.

    ``alpha`` depends on the tip's roll, so it is found by walking the plan
    with Eq. 4 from ``start_frame`` (a ``4x4`` pose whose z axis is the start
    direction). Segments shorter than ``min_length`` are dropped.

    Raises:
        PlanningError: ``start_frame``'s z axis is not the plan's start direction.
    """
    T = np.array(start_frame, dtype=float)
    if T.shape != (4, 4) or not np.all(np.isfinite(T)):
        raise PlanningError(f"start frame has shape {T.shape}: expected a finite 4x4 transform")
    vs = plan.start[1]
    if _dot((float(T[0, 2]), float(T[1, 2]), float(T[2, 2])), vs) < 1.0 - 1e-6:
        raise PlanningError(f"start frame z axis {T[:3, 2].tolist()} is not the plan's start direction {list(vs)}")
    out: list[Action] = []
    r = plan.radius
    for seg in plan.segments:
        if seg.length <= min_length:
            continue
        if seg.kind == "S":
            act = Action(0.0, 0.0, seg.length, "S")
        else:
            x = (float(T[0, 0]), float(T[1, 0]), float(T[2, 0]))
            yv = (float(T[0, 1]), float(T[1, 1]), float(T[2, 1]))
            t = (float(T[0, 2]), float(T[1, 2]), float(T[2, 2]))
            b = _cross(seg.normal, t) if seg.kind == "L" else _cross(t, seg.normal)
            act = Action(math.atan2(_dot(b, yv), _dot(b, x)), seg.length / r, seg.length, seg.kind)
        out.append(act)
        T = T @ tip_step(act.alpha, act.length, act.beta)
    return out


def execute_exact(actions: Sequence[Action], start_frame: ArrayLike) -> FloatArray:
    """Tip poses ``(N + 1, 4, 4)`` after each action applied exactly (continuous growth)."""
    out = [np.asarray(start_frame, dtype=float)]
    for a in actions:
        out.append(out[-1] @ tip_step(a.alpha, a.length, a.beta))
    return np.stack(out)
