"""Growth planner messages: CDR round trips against the real definitions, goal reading, bad goals."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shape_sensing.estimators.growth import direction_from_angles, tip_frame
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import default_factory
from shape_sensing.messages.growth import goal_from_pose_stamped, plan_markers, pose_stamped_msg
from shape_sensing.planning.dubins3d import plan_3d


def _round_trip(msg, typename, distro="jazzy"):
    f = default_factory(distro)
    raw = f.typestore.serialize_cdr(msg, typename)
    return f.typestore.deserialize_cdr(raw, typename)


@pytest.mark.parametrize("distro", ["humble", "jazzy"])
def test_plan_markers_round_trip(distro):
    plan = plan_3d([0, 0, 0], [1, 0, 0], [0.4, 0.3, 0.2], direction_from_angles(1.0, 0.5), 0.1)
    executed = np.linspace([0, 0, 0], [0.4, 0.3, 0.2], 20)
    msg = plan_markers(123, "growing_base", plan, step=0.01, executed=executed, factory=default_factory(distro))
    back = _round_trip(msg, "visualization_msgs/msg/MarkerArray", distro)
    ns = [m.ns for m in back.markers]
    assert ns.count("plan/segments") == len(plan.segments)
    assert {"plan/start", "plan/goal", "plan/waypoint", "plan/executed", "plan/label"} <= set(ns)
    for m, orig in zip(back.markers, msg.markers, strict=True):
        assert m.header.frame_id == "growing_base" and m.header.stamp.nanosec == 123
        assert m.type == orig.type and len(m.points) == len(orig.points)
    # Segment lines start at the segment's start and lie on it: arcs red, straights blue.
    for m, seg in zip(back.markers[: len(plan.segments)], plan.segments, strict=True):
        p0 = m.points[0]
        assert np.allclose([p0.x, p0.y, p0.z], seg.position)
        assert (m.color.r > m.color.b) == (seg.kind != "S")
    goal = next(m for m in back.markers if m.ns == "plan/goal")
    head = np.array([goal.points[1].x, goal.points[1].y, goal.points[1].z])
    tail = np.array([goal.points[0].x, goal.points[0].y, goal.points[0].z])
    assert np.allclose((head - tail) / np.linalg.norm(head - tail), plan.goal[1])


def test_goal_pose_round_trip_gives_the_z_axis():
    T = tip_frame([0.1, -0.2, 0.3], 0.7, -0.4)
    back = _round_trip(pose_stamped_msg(5_000_000_001, "growing_base", T), "geometry_msgs/msg/PoseStamped")
    stamp, frame, pos, direction = goal_from_pose_stamped(back)
    assert stamp == 5_000_000_001 and frame == "growing_base"
    assert np.allclose(pos, [0.1, -0.2, 0.3])
    assert np.allclose(direction, direction_from_angles(0.7, -0.4))


@pytest.mark.parametrize(
    ("position", "quat", "match"),
    [
        ((math.nan, 0.0, 0.0), (0.0, 0.0, 0.0, 1.0), "position"),
        ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0), "orientation"),
        ((0.0, 0.0, 0.0), (math.inf, 0.0, 0.0, 1.0), "orientation"),
    ],
)
def test_bad_goal_messages_raise(position, quat, match):
    f = default_factory()
    msg = f.make(
        "geometry_msgs/msg/PoseStamped",
        pose=f.make(
            "geometry_msgs/msg/Pose",
            position=f.make("geometry_msgs/msg/Point", x=position[0], y=position[1], z=position[2]),
            orientation=f.make("geometry_msgs/msg/Quaternion", x=quat[0], y=quat[1], z=quat[2], w=quat[3]),
        ),
    )
    with pytest.raises(MessageError, match=match):
        goal_from_pose_stamped(msg)


def test_plan_label_has_no_spaces_for_rviz() -> None:
    """RViz 2 draws a text marker's space about 1 m wide whatever the text's scale: the label goes line by line."""
    plan = plan_3d([0, 0, 0], [1, 0, 0], [0.4, 0.3, 0.2], direction_from_angles(1.0, 0.5), 0.1)
    msg = plan_markers(0, "growing_base", plan, step=0.01, factory=default_factory())
    (label,) = [m.text for m in msg.markers if m.ns == "plan/label"]
    assert " " not in label and label.count("\n") == 2 and f"{plan.length:.3f}m" in label
