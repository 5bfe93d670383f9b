"""Message builders and readers of the growth planner: plan markers, goals from PoseStamped.

Markers follow the seed paper's Figure 5: arcs red, straights blue, the start
direction magenta, the goal direction black; the waypoint ``Pt`` is a sphere
and the predicted (discretely grown) tip path an orange line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from shape_sensing.geometry import FloatArray, quat_to_matrix
from shape_sensing.messages.common import header, pose_msg, stamp_from_msg
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import MessageFactory, default_factory, published_type
from shape_sensing.planning.dubins3d import Plan3D

__all__ = ["MARKER_NAMESPACES", "goal_from_pose_stamped", "plan_markers", "pose_stamped_msg"]

ARROW, LINE_STRIP, SPHERE, TEXT_VIEW_FACING = 0, 4, 2, 9
ARC_RGBA = (0.9, 0.1, 0.1, 1.0)
STRAIGHT_RGBA = (0.1, 0.3, 0.95, 1.0)
START_RGBA = (0.9, 0.0, 0.9, 1.0)
GOAL_RGBA = (1.0, 1.0, 1.0, 1.0)  # white: shows on RViz's dark background (black did not)
EXECUTED_RGBA = (1.0, 0.55, 0.0, 0.9)
MARKER_NAMESPACES = ("plan/segments", "plan/start", "plan/goal", "plan/waypoint", "plan/executed", "plan/label")


def _f(factory: MessageFactory | None) -> MessageFactory:
    return factory if factory is not None else default_factory()


def _point(p: Sequence[float] | FloatArray, f: MessageFactory) -> Any:
    return f.make("geometry_msgs/msg/Point", x=float(p[0]), y=float(p[1]), z=float(p[2]))


def _marker(
    f: MessageFactory,
    hdr: Any,
    ns: str,
    marker_id: int,
    mtype: int,
    *,
    points: Any = (),
    position: Sequence[float] | FloatArray = (0.0, 0.0, 0.0),
    scale: Sequence[float] = (1.0, 1.0, 1.0),
    rgba: Sequence[float] = (1.0, 1.0, 1.0, 1.0),
    text: str = "",
) -> Any:
    pose = np.eye(4)
    pose[:3, 3] = np.asarray(position, dtype=float)
    return f.make(
        "visualization_msgs/msg/Marker",
        header=hdr,
        ns=ns,
        id=marker_id,
        type=mtype,
        action=0,
        pose=pose_msg(pose, f),
        scale=f.make("geometry_msgs/msg/Vector3", x=float(scale[0]), y=float(scale[1]), z=float(scale[2])),
        color=f.make("std_msgs/msg/ColorRGBA", r=rgba[0], g=rgba[1], b=rgba[2], a=rgba[3]),
        lifetime=f.make("builtin_interfaces/msg/Duration", sec=0, nanosec=0),
        frame_locked=False,
        points=[_point(p, f) for p in points],
        text=text,
    )


@published_type("visualization_msgs/msg/MarkerArray")
def plan_markers(
    stamp_ns: int,
    frame_id: str,
    plan: Plan3D,
    *,
    step: float = 0.005,
    width: float = 0.004,
    executed: FloatArray | None = None,
    factory: MessageFactory | None = None,
) -> Any:
    """MarkerArray of a 3D plan: one line per segment, start/goal arrows, waypoint, predicted path, label.

    Args:
        stamp_ns: header stamp.
        frame_id: the plan's frame.
        plan: the plan.
        step: sampling step of the segment lines (m).
        width: line width (m); arrows and spheres scale with it.
        executed: ``(N, 3)`` predicted tip positions, or ``None``.
        factory: message factory (default: rosbags, Jazzy).
    """
    f = _f(factory)
    hdr = header(stamp_ns, frame_id, f)
    markers = []
    r = plan.radius
    for i, seg in enumerate(plan.segments):
        n = max(2, int(np.ceil(seg.length / step)) + 1)
        s = np.linspace(0.0, seg.length, n)
        p0, t0, nv = (np.asarray(v) for v in (seg.position, seg.direction, seg.normal))
        if seg.kind == "S":
            pts = p0 + s[:, None] * t0
        else:
            b = np.cross(nv, t0) if seg.kind == "L" else np.cross(t0, nv)
            a = s / r
            pts = p0 + r * np.sin(a)[:, None] * t0 + r * (1.0 - np.cos(a))[:, None] * b
        rgba = STRAIGHT_RGBA if seg.kind == "S" else ARC_RGBA
        markers.append(_marker(f, hdr, "plan/segments", i, LINE_STRIP, points=pts, scale=(width, 0, 0), rgba=rgba))
    arrow = max(0.5 * r, 10 * width)
    for ns, (pos, d), rgba in (("plan/start", plan.start, START_RGBA), ("plan/goal", plan.goal, GOAL_RGBA)):
        tail = np.asarray(pos)
        head = tail + arrow * np.asarray(d)
        markers.append(
            _marker(f, hdr, ns, 0, ARROW, points=[tail, head], scale=(2 * width, 4 * width, 6 * width), rgba=rgba)
        )
    markers.append(
        _marker(f, hdr, "plan/waypoint", 0, SPHERE, position=plan.waypoint, scale=(5 * width,) * 3, rgba=GOAL_RGBA)
    )
    if executed is not None and len(executed) >= 2:
        markers.append(
            _marker(f, hdr, "plan/executed", 0, LINE_STRIP, points=np.asarray(executed, dtype=float),
                    scale=(0.5 * width, 0, 0), rgba=EXECUTED_RGBA)
        )  # fmt: skip
    # one item per line, no spaces: RViz 2 (Jazzy) draws a text marker's space a fixed width from its default 1 m
    # character height, whatever the marker's scale, so "LSL  0.679 m" showed as pieces metres apart
    label = f"{plan.word}\n{plan.length:.3f}m\n({plan.case})"
    markers.append(
        _marker(f, hdr, "plan/label", 0, TEXT_VIEW_FACING, position=np.asarray(plan.goal[0]) + [0.0, 0.0, 3 * width],
                scale=(0, 0, 6 * width), rgba=GOAL_RGBA, text=label)
    )  # fmt: skip
    return f.make("visualization_msgs/msg/MarkerArray", markers=markers)


@published_type("geometry_msgs/msg/PoseStamped")
def pose_stamped_msg(stamp_ns: int, frame_id: str, T: FloatArray, factory: MessageFactory | None = None) -> Any:
    """geometry_msgs/PoseStamped from a ``4x4`` transform."""
    return _f(factory).make(
        "geometry_msgs/msg/PoseStamped", header=header(stamp_ns, frame_id, factory), pose=pose_msg(T, factory)
    )


def goal_from_pose_stamped(msg: Any) -> tuple[int, str, FloatArray, FloatArray]:
    """``(stamp_ns, frame_id, position, direction)`` of a goal PoseStamped; the direction is the pose's z axis.

    Raises:
        MessageError: a non-finite position, or an orientation that is not a non-zero finite quaternion.
    """
    p = msg.pose.position
    q = msg.pose.orientation
    pos = np.array([p.x, p.y, p.z], dtype=float)
    quat = np.array([q.x, q.y, q.z, q.w], dtype=float)
    frame = str(msg.header.frame_id)
    if not np.all(np.isfinite(pos)):
        raise MessageError(f"goal PoseStamped in {frame!r}: position {pos.tolist()} is not finite")
    norm = float(np.linalg.norm(quat))
    if not np.isfinite(norm) or norm < 1e-6:
        raise MessageError(
            f"goal PoseStamped in {frame!r}: orientation {quat.tolist()} is not a unit quaternion "
            "(its z axis gives the growth direction at the goal)"
        )
    R = quat_to_matrix(quat / norm)
    return stamp_from_msg(msg), frame, pos, R[:3, 2].copy()
