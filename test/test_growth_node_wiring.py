"""The growth_planner node's wiring without ROS 2: a stand-in node object and stand-in rclpy modules.

Checks the plumbing around the tested core: parameters from the schema, the publishers, the GetPlan service
and the goal_pose subscription (plans chain from the predicted tip), bad goals refused with an empty plan.
"""

from __future__ import annotations

import math
import types
from typing import Any

import numpy as np
import pytest
from ros_stand_ins import FakeNode, install

from shape_sensing.estimators.growth import tip_frame
from shape_sensing.messages.factory import default_factory
from shape_sensing.messages.growth import pose_stamped_msg


@pytest.fixture
def ros_stand_ins(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, "shape_sensing.nodes.growth_planner", {"nav_msgs": {}, "nav_msgs.srv": {"GetPlan": object}})


def _node(overrides: dict[str, Any]) -> FakeNode:
    node = FakeNode("growth_planner", overrides)
    node.now_ns = 7_000_000_000
    return node


def _goal(position, theta, gamma, frame="growing_base"):
    return pose_stamped_msg(0, frame, tip_frame(position, theta, gamma))


def test_service_and_goal_topic(ros_stand_ins: None) -> None:
    from shape_sensing.nodes.growth_planner import TOPICS, GrowthPlannerNode

    node = _node({"plan_frame": "growing_base", "start_direction": [0.0, 0.0, 1.0]})
    app = GrowthPlannerNode(node)
    assert set(node.publishers) == set(TOPICS)
    assert all(p.qos["reliability"] == "reliable" for p in node.publishers.values())
    assert set(node.services) == {"plan"} and set(node.subscriptions) == {"goal_pose"}
    f = default_factory()
    no_start = f.make("geometry_msgs/msg/PoseStamped")  # all-zero orientation: plan from the current tip
    request = types.SimpleNamespace(start=no_start, goal=_goal([0.3, 0.2, 0.4], 1.0, 0.2))
    response = node.services["plan"](request, types.SimpleNamespace(plan=None))
    last = response.plan.poses[-1].pose.position
    assert response.plan.header.frame_id == "growing_base"
    assert np.allclose([last.x, last.y, last.z], [0.3, 0.2, 0.4], atol=1e-7)
    assert response.plan.header.stamp.sec == 7  # no goal stamp: the node's clock
    assert len(node.publishers["plan/markers"].sent) == 1
    # The topic chains goals from the predicted tip.
    node.subscriptions["goal_pose"][1](_goal([0.5, 0.0, 0.0], 0.0, 0.0))
    first_tip = app.planner.tip.copy()
    assert np.linalg.norm(first_tip[:3, 3] - [0.5, 0.0, 0.0]) < 0.002
    node.subscriptions["goal_pose"][1](_goal([0.5, 0.5, 0.0], math.pi / 2, 0.0))
    path = node.publishers["plan/path"].sent[-1]
    start = path.poses[0].pose.position
    assert np.allclose([start.x, start.y, start.z], first_tip[:3, 3])


def test_bad_goals_get_an_empty_plan_and_a_reason(ros_stand_ins: None) -> None:
    from shape_sensing.nodes.growth_planner import GrowthPlannerNode

    node = _node({"plan_frame": "growing_base", "max_length": 1.0})
    GrowthPlannerNode(node)
    f = default_factory()
    for goal, reason in (
        (_goal([0.3, 0.0, 0.0], 0.0, 0.0, frame="world"), "goal frame 'world'"),
        (_goal([5.0, 0.0, 0.0], 0.0, 0.0), "max_length"),
        (f.make("geometry_msgs/msg/PoseStamped"), "orientation"),  # all-zero quaternion
    ):
        request = types.SimpleNamespace(start=f.make("geometry_msgs/msg/PoseStamped"), goal=goal)
        response = node.services["plan"](request, types.SimpleNamespace(plan=None))
        assert len(response.plan.poses) == 0
        assert reason in node.logger.lines[-1]


def test_unreachable_parameters_are_a_config_error(ros_stand_ins: None) -> None:
    from shape_sensing.config import ConfigError
    from shape_sensing.nodes.growth_planner import GrowthPlannerNode

    with pytest.raises(ConfigError, match="min_radius"):
        GrowthPlannerNode(_node({"radius": 0.05}))
    with pytest.raises(ConfigError, match="zero growth"):
        GrowthPlannerNode(_node({"step_length": 0.0}))


def test_unstamped_goal_gets_one_stamp_for_topics_and_response(ros_stand_ins: None) -> None:
    from shape_sensing.nodes.growth_planner import GrowthPlannerNode

    node = _node({"plan_frame": "growing_base"})
    readings = iter(range(7_000_000_000, 8_000_000_000, 1_000))  # the node clock moves on at every reading
    node.get_clock = lambda: types.SimpleNamespace(now=lambda: types.SimpleNamespace(nanoseconds=next(readings)))
    GrowthPlannerNode(node)
    no_start = default_factory().make("geometry_msgs/msg/PoseStamped")
    request = types.SimpleNamespace(start=no_start, goal=_goal([0.3, 0.2, 0.4], 1.0, 0.2))  # goal stamp 0
    response = node.services["plan"](request, types.SimpleNamespace(plan=None))

    def ns(header: Any) -> int:
        return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)

    stamps = {ns(response.plan.header)}
    for topic in ("plan/path", "plan/predicted_path", "plan/predicted_tip"):
        stamps.add(ns(node.publishers[topic].sent[-1].header))
    stamps |= {ns(m.header) for m in node.publishers["plan/markers"].sent[-1].markers}
    assert len(stamps) == 1 and 7_000_000_000 <= stamps.pop() < 8_000_000_000


def test_goal_in_world_is_transformed_with_tf2(ros_stand_ins: None) -> None:
    """A goal stamped in ``world`` plans like the same goal expressed in the plan frame (tf2's transform)."""
    import numpy as np
    from ros_stand_ins import StandInTfBuffer

    from shape_sensing.geometry import make_transform, rotvec_to_matrix
    from shape_sensing.messages.common import transform_stamped
    from shape_sensing.nodes.growth_planner import GrowthPlannerNode
    from shape_sensing.types import TransformStamped

    node = _node({"plan_frame": "growing_base"})
    GrowthPlannerNode(node)
    # the plan frame sits in the world 1 m along x, turned 90 deg about z: T_world_base
    T_world_base = make_transform(rotvec_to_matrix([0.0, 0.0, np.pi / 2]), [1.0, 0.0, 0.0])
    T_base_world = np.linalg.inv(T_world_base)
    f = default_factory()
    (buffer,) = StandInTfBuffer.instances
    buffer.transforms[("growing_base", "world")] = transform_stamped(
        TransformStamped(0, "growing_base", "world", T_base_world), f
    )
    goal_base = tip_frame([0.4, 0.3, 0.1], 0.3, 0.2)
    plans = []
    for frame, T in (("growing_base", goal_base), ("world", T_world_base @ goal_base)):
        request = types.SimpleNamespace(
            start=f.make("geometry_msgs/msg/PoseStamped"), goal=pose_stamped_msg(0, frame, T)
        )
        plans.append(node.services["plan"](request, types.SimpleNamespace(plan=None)).plan)
    assert len(plans[0].poses) > 10
    assert len(plans[1].poses) == len(plans[0].poses)
    end = [
        np.array([p.poses[-1].pose.position.x, p.poses[-1].pose.position.y, p.poses[-1].pose.position.z]) for p in plans
    ]
    np.testing.assert_allclose(end[1], end[0], atol=1e-9)
    np.testing.assert_allclose(end[0], goal_base[:3, 3], atol=1e-6)
