"""Message builders and readers of the hyper-redundant robot: joint states and stamped poses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from shape_sensing.geometry import FloatArray
from shape_sensing.messages.common import header, pose_msg, pose_to_matrix, stamp_from_msg
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import MessageFactory, default_factory, published_type

__all__ = ["joint_names", "joint_state_from_msg", "joint_state_msg", "pose_stamped_msg", "pose_stamped_to_matrix"]


def _f(factory: MessageFactory | None) -> MessageFactory:
    return factory if factory is not None else default_factory()


def joint_names(n_modules: int, prefix: str = "") -> list[str]:
    """``module_<j>_theta_x``, ``module_<j>_theta_y`` for j = 1..n (the universal joints' two axes)."""
    return [f"{prefix}module_{j}_theta_{ax}" for j in range(1, n_modules + 1) for ax in ("x", "y")]


@published_type("sensor_msgs/msg/JointState")
def joint_state_msg(
    stamp_ns: int,
    names: Sequence[str],
    positions: FloatArray,
    factory: MessageFactory | None = None,
    *,
    frame_id: str = "",
) -> Any:
    """sensor_msgs/JointState with positions only (rad); velocity and effort left empty.

    Raises:
        MessageError: names and positions differ in length.
    """
    pos = np.asarray(positions, dtype=float).reshape(-1)
    if len(names) != len(pos):
        raise MessageError(f"JointState: {len(names)} names but {len(pos)} positions")
    return _f(factory).make(
        "sensor_msgs/msg/JointState",
        header=header(stamp_ns, frame_id, factory),
        name=list(names),
        position=pos,
        velocity=np.zeros(0),
        effort=np.zeros(0),
    )


def joint_state_from_msg(msg: Any) -> tuple[int, list[str], FloatArray]:
    """``(stamp_ns, names, positions)`` of a sensor_msgs/JointState."""
    return stamp_from_msg(msg), [str(n) for n in msg.name], np.asarray(msg.position, dtype=float)


@published_type("geometry_msgs/msg/PoseStamped")
def pose_stamped_msg(stamp_ns: int, frame_id: str, T: FloatArray, factory: MessageFactory | None = None) -> Any:
    """geometry_msgs/PoseStamped from a 4x4 transform."""
    return _f(factory).make(
        "geometry_msgs/msg/PoseStamped", header=header(stamp_ns, frame_id, factory), pose=pose_msg(T, factory)
    )


def pose_stamped_to_matrix(msg: Any) -> tuple[int, FloatArray]:
    """``(stamp_ns, T)`` of a geometry_msgs/PoseStamped."""
    return stamp_from_msg(msg), pose_to_matrix(msg.pose)
