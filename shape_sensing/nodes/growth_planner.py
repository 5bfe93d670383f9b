"""``growth_planner`` node: goal poses -> 3D Dubins plans for a tip-growing robot (seed 002).

Thin rclpy layer over :class:`shape_sensing.planning.growth_planner.GrowthPlanner`.

Service:
    ``plan`` (nav_msgs/srv/GetPlan): plan from ``request.start`` (or, when its
    orientation is all zeros, from the current tip) to ``request.goal``; the
    goal's z axis is the growth direction wanted there. The response carries
    the planned nav_msgs/Path (empty, with a logged reason, for a bad goal).

Subscribes (reliable):
    ``goal_pose`` (geometry_msgs/PoseStamped, e.g. RViz's goal tool): plan from
    the current tip; the predicted tip pose then becomes the current tip, so
    goals chain like the robot's growth.

Publishes (reliable), for every plan:
    ``plan/path`` (nav_msgs/Path, the planned path's tip frames),
    ``plan/predicted_path`` (nav_msgs/Path, the tip after each predicted growth step),
    ``plan/predicted_tip`` (geometry_msgs/PoseStamped), ``plan/markers``
    (visualization_msgs/MarkerArray: arcs red, straights blue, start and goal arrows).
    All in ``frame_prefix + plan_frame``. A goal or start stamped in another
    frame (e.g. ``world``) is transformed into the plan frame with tf2 (the
    latest transform received; the lookup does not wait); a frame tf2 cannot
    connect is refused with the reason logged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from shape_sensing.config import ConfigError
from shape_sensing.messages import common as msgs
from shape_sensing.messages import growth as gmsgs
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import MessageFactory
from shape_sensing.nodes._common import declare_schema, reliable_qos, run
from shape_sensing.planning.errors import PlanningError
from shape_sensing.planning.executor import describe_errors
from shape_sensing.planning.growth_planner import SCHEMA, GrowthPlan, GrowthPlanner, goal_in_frame

__all__ = ["NODE_NAME", "GrowthPlannerNode", "main"]

NODE_NAME = "growth_planner"
TOPICS = {
    "plan/path": "nav_msgs/msg/Path",
    "plan/predicted_path": "nav_msgs/msg/Path",
    "plan/predicted_tip": "geometry_msgs/msg/PoseStamped",
    "plan/markers": "visualization_msgs/msg/MarkerArray",
}


class GrowthPlannerNode:
    """Wires a :class:`GrowthPlanner` to an rclpy node.

    Raises:
        ConfigError: a bad parameter, or unreachable parameters (radius below min_radius, zero growth).
    """

    def __init__(self, node: Any) -> None:
        from nav_msgs.srv import GetPlan

        self.node = node
        self.params = declare_schema(node, SCHEMA)
        try:
            self.planner = GrowthPlanner(self.params)
        except PlanningError as exc:
            raise ConfigError(f"node {node.get_name()}: {exc}") from exc
        self.factory = MessageFactory("rclpy")
        self.publishers = {
            topic: node.create_publisher(self.factory.cls(typename), topic, reliable_qos())
            for topic, typename in TOPICS.items()
        }
        self.goal_sub = node.create_subscription(
            self.factory.cls("geometry_msgs/msg/PoseStamped"), "goal_pose", self._on_goal, reliable_qos()
        )
        self.service = node.create_service(GetPlan, "plan", self._on_plan)
        from tf2_ros import Buffer, TransformListener

        self.tf_buffer = Buffer()
        # Fed by this node's own executor: a lookup never blocks a callback (the latest transform is used).
        self.tf_listener = TransformListener(self.tf_buffer, node, spin_thread=False)
        p = self.params
        node.get_logger().info(
            f"planning in {self.planner.frame} with radius {p['radius']} m (Rmin {p['min_radius']} m), "
            f"step {p['step_length'] * 1000:.3g} mm, {'closed' if p['closed_loop'] else 'open'}-loop prediction"
        )

    def _in_plan_frame(
        self, what: str, frame: str, position: np.ndarray, direction: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """``position``, ``direction`` given in ``frame``, in the plan frame (tf2, latest transform)."""
        if not frame or frame == self.planner.frame:
            return position, direction
        from rclpy.time import Time

        try:
            tf = self.tf_buffer.lookup_transform(self.planner.frame, frame, Time())
        except Exception as exc:  # tf2 raises LookupException, ConnectivityException, ExtrapolationException, ...
            raise PlanningError(
                f"{what} frame {frame!r}: no transform to the plan frame {self.planner.frame!r} ({exc})"
            ) from exc
        T = msgs.pose_to_matrix(tf.transform)
        return goal_in_frame(T, position, direction)

    def _stamp(self, msg_stamp_ns: int) -> int:
        return msg_stamp_ns if msg_stamp_ns > 0 else int(self.node.get_clock().now().nanoseconds)

    def _plan(self, goal_msg: Any, start: np.ndarray | None) -> tuple[int, GrowthPlan] | None:
        log = self.node.get_logger()
        try:
            stamp, frame, position, direction = gmsgs.goal_from_pose_stamped(goal_msg)
            position, direction = self._in_plan_frame("goal", frame, position, direction)
            result = self.planner.plan(position, direction, start)
        except (MessageError, PlanningError) as exc:
            log.error(f"goal refused: {exc}")
            return None
        errors = result.execution.errors
        log.info(
            f"{result.plan.word} ({result.plan.case}), {result.plan.length:.3f} m, planned in "
            f"{result.planning_time_s * 1e3:.2f} ms; predicted tip error: {describe_errors(errors, direction)}"
        )
        stamp_ns = self._stamp(stamp)  # once: the topics and the service's Path carry the same stamp
        self.publish(stamp_ns, result)
        return stamp_ns, result

    def publish(self, stamp_ns: int, result: GrowthPlan) -> None:
        """Publish the plan's path, predicted path and tip, and markers."""
        f, frame, p = self.factory, self.planner.frame, self.params
        predicted = result.execution.poses
        self.publishers["plan/path"].publish(msgs.path_msg(stamp_ns, frame, result.frames, f))
        thinned = predicted[:: max(1, len(predicted) // 500)]  # at most ~500 poses per Path
        self.publishers["plan/predicted_path"].publish(msgs.path_msg(stamp_ns, frame, thinned, f))
        self.publishers["plan/predicted_tip"].publish(gmsgs.pose_stamped_msg(stamp_ns, frame, predicted[-1], f))
        self.publishers["plan/markers"].publish(
            gmsgs.plan_markers(stamp_ns, frame, result.plan, step=p["sample_step"], width=p["marker_width"],
                               executed=predicted[:, :3, 3], factory=f)
        )  # fmt: skip

    def _on_goal(self, msg: Any) -> None:
        out = self._plan(msg, None)
        if out is not None:
            self.planner.advance(out[1])

    def _on_plan(self, request: Any, response: Any) -> Any:
        start = None
        q = request.start.pose.orientation
        if any(float(v) != 0.0 for v in (q.x, q.y, q.z, q.w)):
            try:
                _, frame, position, direction = gmsgs.goal_from_pose_stamped(request.start)
                position, direction = self._in_plan_frame("start", frame, position, direction)
                start = self.planner.start_frame(position, direction)
            except (MessageError, PlanningError) as exc:
                self.node.get_logger().error(f"start refused: {exc}")
                response.plan = msgs.path_msg(self._stamp(0), self.planner.frame, np.zeros((0, 4, 4)), self.factory)
                return response
        out = self._plan(request.goal, start)
        if out is None:
            response.plan = msgs.path_msg(self._stamp(0), self.planner.frame, np.zeros((0, 4, 4)), self.factory)
        else:
            response.plan = msgs.path_msg(out[0], self.planner.frame, out[1].frames, self.factory)
        return response


def main(args: Sequence[str] | None = None) -> int:
    """Console-script entry: run the node until shut down; non-zero exit on a bad configuration."""
    return run(NODE_NAME, GrowthPlannerNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
