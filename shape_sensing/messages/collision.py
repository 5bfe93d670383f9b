"""Messages of the collision-localised vine robot (seed 004): base station, contact cap, force, pivot estimates.

Builders take core types and an optional ``factory`` (the rosbags-backed Jazzy factory by default;
nodes pass the rclpy one). Readers turn received messages back into core values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from shape_sensing.drivers.base_station import BaseStationReading, ParserStats
from shape_sensing.drivers.contact_cap import CapReading
from shape_sensing.estimators.collision_pivot import PivotEvent, PivotOutput
from shape_sensing.geometry import FloatArray
from shape_sensing.messages.common import _marker, header, pose_msg
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import MessageFactory, default_factory, published_type

__all__ = [
    "base_station_state_msg",
    "cap_state_from_msg",
    "collision_markers",
    "contact_cap_state_msg",
    "contact_event_msg",
    "fluid_pressure_msg",
    "obstacle_markers",
    "pivot_estimate_msg",
    "planar_pose",
    "wrench_from_msg",
    "wrench_stamped_msg",
]


def _f(factory: MessageFactory | None) -> MessageFactory:
    return factory if factory is not None else default_factory()


def planar_pose(x: float, y: float, heading: float) -> FloatArray:
    """A 4x4 pose in the plane: position ``(x, y, 0)``, yaw ``heading`` about z."""
    c, s = math.cos(heading), math.sin(heading)
    T = np.eye(4)
    T[:2, :2] = [[c, -s], [s, c]]
    T[0, 3], T[1, 3] = x, y
    return T


def _duration(ns: int, factory: MessageFactory | None) -> Any:
    ns = int(ns)
    return _f(factory).make("builtin_interfaces/msg/Duration", sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)


def _point(xy: Sequence[float], factory: MessageFactory | None) -> Any:
    return _f(factory).make("geometry_msgs/msg/Point", x=float(xy[0]), y=float(xy[1]), z=0.0)


@published_type("shape_sensing/msg/BaseStationState")
def base_station_state_msg(
    reading: BaseStationReading, stats: ParserStats, frame_id: str, factory: MessageFactory | None = None
) -> Any:
    """shape_sensing/BaseStationState of one frame, with the parser's counters."""
    f = _f(factory)
    return f.make(
        "shape_sensing/msg/BaseStationState",
        header=header(reading.stamp_ns, frame_id, factory),
        sequence=reading.sequence,
        frames_dropped=stats.dropped,
        frames_rejected=stats.crc_errors,
        device_time=_duration(reading.device_time_ns, factory),
        encoder_counts=reading.encoder_counts,
        length=reading.length,
        pressure=reading.pressure,
        pressure_setpoint=reading.pressure_setpoint,
        start_switch=reading.start_switch,
        cap_switches=reading.cap_switches,
    )


@published_type("sensor_msgs/msg/FluidPressure")
def fluid_pressure_msg(
    stamp_ns: int, frame_id: str, pressure: float, variance: float = 0.0, factory: MessageFactory | None = None
) -> Any:
    """sensor_msgs/FluidPressure (Pa; ``variance`` 0 = unknown)."""
    return _f(factory).make(
        "sensor_msgs/msg/FluidPressure",
        header=header(stamp_ns, frame_id, factory),
        fluid_pressure=float(pressure),
        variance=float(variance),
    )


@published_type("shape_sensing/msg/ContactCapState")
def contact_cap_state_msg(
    reading: CapReading, n_switches: int, frame_id: str, factory: MessageFactory | None = None
) -> Any:
    """shape_sensing/ContactCapState of one cap reading."""
    return _f(factory).make(
        "shape_sensing/msg/ContactCapState",
        header=header(reading.stamp_ns, frame_id, factory),
        n_switches=n_switches,
        switch_mask=reading.switch_mask,
        in_contact=reading.in_contact,
        held=reading.held,
        contact_angle=reading.contact_angle,
        held_for=reading.held_for,
    )


def cap_state_from_msg(msg: Any) -> tuple[bool, bool, float]:
    """``(in_contact, live, contact_angle)`` of a ContactCapState (live: a switch is pressed now)."""
    in_contact = bool(msg.in_contact)
    return in_contact, in_contact and not bool(msg.held), float(msg.contact_angle)


@published_type("geometry_msgs/msg/WrenchStamped")
def wrench_stamped_msg(
    stamp_ns: int, frame_id: str, force: Sequence[float] | FloatArray, torque: Sequence[float] | FloatArray,
    factory: MessageFactory | None = None,
) -> Any:  # fmt: skip
    """geometry_msgs/WrenchStamped (N, N m)."""
    f = _f(factory)
    fx, fy, fz = (float(v) for v in force)
    tx, ty, tz = (float(v) for v in torque)
    return f.make(
        "geometry_msgs/msg/WrenchStamped",
        header=header(stamp_ns, frame_id, factory),
        wrench=f.make(
            "geometry_msgs/msg/Wrench",
            force=f.make("geometry_msgs/msg/Vector3", x=fx, y=fy, z=fz),
            torque=f.make("geometry_msgs/msg/Vector3", x=tx, y=ty, z=tz),
        ),
    )


def wrench_from_msg(msg: Any, axis: str = "z") -> float:
    """The normal force of a WrenchStamped: one force component, or the norm (``axis='norm'``).

    Raises:
        MessageError: an unknown axis.
    """
    fv = msg.wrench.force
    if axis == "norm":
        return math.sqrt(fv.x * fv.x + fv.y * fv.y + fv.z * fv.z)
    if axis not in ("x", "y", "z"):
        raise MessageError(f"force axis {axis!r}: expected 'x', 'y', 'z' or 'norm'")
    return float(getattr(fv, axis))


@published_type("shape_sensing/msg/PivotEstimate")
def pivot_estimate_msg(out: PivotOutput, frame_id: str, factory: MessageFactory | None = None) -> Any:
    """shape_sensing/PivotEstimate of one estimator step."""
    f = _f(factory)
    return f.make(
        "shape_sensing/msg/PivotEstimate",
        header=header(out.stamp_ns, frame_id, factory),
        pivot_index=out.pivot_index,
        in_contact=out.in_contact,
        buckling_condition_met=out.buckling_condition_met,
        total_length=out.total_length,
        free_length=out.free_length_measured,
        pivot_length=out.pivot_length,
        pivot_length_rate=out.pivot_length_rate,
        covariance=np.asarray(out.covariance, dtype=float),
        pivot=_point(out.pivot, factory),
        tip=pose_msg(planar_pose(out.tip[0], out.tip[1], out.heading), factory),
    )


@published_type("shape_sensing/msg/ContactEvent")
def contact_event_msg(event: PivotEvent, frame_id: str, factory: MessageFactory | None = None) -> Any:
    """shape_sensing/ContactEvent."""
    return _f(factory).make(
        "shape_sensing/msg/ContactEvent",
        header=header(event.stamp_ns, frame_id, factory),
        kind=event.kind,
        pivot_index=event.pivot_index,
        position=_point(event.position, factory),
        arc_length=event.arc_length,
        contact_angle=event.contact_angle,
        normal_force=event.normal_force,
    )


_LINE_STRIP, _SPHERE_LIST, _SPHERE = 4, 7, 2


def _pts3(xy: FloatArray) -> FloatArray:
    xy = np.asarray(xy, dtype=float).reshape(-1, 2)
    return np.column_stack([xy, np.zeros(len(xy))])


@published_type("visualization_msgs/msg/MarkerArray")
def collision_markers(
    stamp_ns: int, frame_id: str, pivots: FloatArray, tip: Sequence[float], in_contact: bool, *, ns: str = "collision",
    radius: float = 0.035, factory: MessageFactory | None = None,
) -> Any:  # fmt: skip
    """The estimated body (fixed pivots, then the tip) as a line, the pivots as spheres, the tip coloured by contact."""
    hdr = header(stamp_ns, frame_id, factory)
    body = _pts3(np.vstack([np.asarray(pivots, dtype=float).reshape(-1, 2), np.asarray(tip, dtype=float)[:2]]))
    tip_pose = np.eye(4)
    tip_pose[:3, 3] = body[-1]
    markers = [
        _marker(factory, hdr, f"{ns}/body", 0, _LINE_STRIP, points=body, scale=(2 * radius, 0.0, 0.0),
                rgba=(0.2, 0.6, 1.0, 0.6)),
        _marker(factory, hdr, f"{ns}/pivots", 0, _SPHERE_LIST, points=body[:-1], scale=(0.04, 0.04, 0.04),
                rgba=(1.0, 0.5, 0.0, 1.0)),
        _marker(factory, hdr, f"{ns}/tip", 0, _SPHERE, pose=tip_pose, scale=(2 * radius,) * 3,
                rgba=(1.0, 0.1, 0.1, 0.9) if in_contact else (0.1, 0.9, 0.1, 0.9)),
    ]  # fmt: skip
    return _f(factory).make("visualization_msgs/msg/MarkerArray", markers=markers)


def obstacle_markers(
    stamp_ns: int, frame_id: str, obstacles: Sequence[FloatArray], factory: MessageFactory | None = None
) -> Any:
    """Closed outlines of polygon obstacles (the simulator's ground truth)."""
    hdr = header(stamp_ns, frame_id, factory)
    markers = [
        _marker(factory, hdr, "obstacles", i, _LINE_STRIP, points=_pts3(np.vstack([p, p[:1]])),
                scale=(0.01, 0.0, 0.0), rgba=(0.6, 0.6, 0.6, 1.0))
        for i, p in enumerate(obstacles)
    ]  # fmt: skip
    return _f(factory).make("visualization_msgs/msg/MarkerArray", markers=markers)
