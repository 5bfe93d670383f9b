"""Core data types shared by drivers, estimators, simulators and the message layer.

These are plain dataclasses over numpy arrays, free of ROS. The message layer
(:mod:`shape_sensing.messages`) is the only place that turns them into ROS 2
messages and back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from shape_sensing.geometry import FloatArray

__all__ = [
    "DeferredValues",
    "DiagnosticLevel",
    "DiagnosticStatus",
    "ImuSample",
    "ShapeEstimate",
    "TransformStamped",
]


@dataclass
class ImuSample:
    """One IMU reading, REP-103/145 conventions.

    Attributes:
        stamp_ns: time of the read, integer nanoseconds.
        frame_id: the sensor frame.
        orientation: ``[x, y, z, w]`` of the sensor frame in its world frame,
            or ``None`` when the sensor gives no orientation.
        angular_velocity: rad/s in the sensor frame.
        linear_acceleration: m/s^2 in the sensor frame (gravity included).
        orientation_covariance: 3x3 (rad^2) about the world-fixed x, y, z axes;
            ``None`` means unknown (published as all zeros).
        angular_velocity_covariance: 3x3 ((rad/s)^2) or ``None`` (unknown).
        linear_acceleration_covariance: 3x3 ((m/s^2)^2) or ``None`` (unknown).
    """

    stamp_ns: int
    frame_id: str
    orientation: FloatArray | None
    angular_velocity: FloatArray = field(default_factory=lambda: np.zeros(3))
    linear_acceleration: FloatArray = field(default_factory=lambda: np.zeros(3))
    orientation_covariance: FloatArray | None = None
    angular_velocity_covariance: FloatArray | None = None
    linear_acceleration_covariance: FloatArray | None = None


@dataclass
class TransformStamped:
    """A rigid transform ``T_parent_child`` at a time."""

    stamp_ns: int
    parent: str
    child: str
    matrix: FloatArray


class DiagnosticLevel(IntEnum):
    """Levels of diagnostic_msgs/DiagnosticStatus."""

    OK = 0
    WARN = 1
    ERROR = 2
    STALE = 3


class DeferredValues(MutableMapping[str, str]):
    """Key/value pairs of a status made on first use by ``make`` (then a plain dict inside).

    An estimator that updates at 30 Hz makes 30 statuses a second, and ``/diagnostics`` publishes about one:
    the values (formatted numbers) of the others are never read, so they are not made.
    """

    __slots__ = ("_make", "_values")

    def __init__(self, make: Callable[[], dict[str, str]]) -> None:
        self._make: Callable[[], dict[str, str]] | None = make
        self._values: dict[str, str] | None = None

    def _get(self) -> dict[str, str]:
        if self._values is None:
            assert self._make is not None
            self._values, self._make = dict(self._make()), None
        return self._values

    def __getitem__(self, key: str) -> str:
        return self._get()[key]

    def __setitem__(self, key: str, value: str) -> None:
        self._get()[key] = value

    def __delitem__(self, key: str) -> None:
        del self._get()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())

    def __repr__(self) -> str:
        return repr(self._get())


@dataclass
class DiagnosticStatus:
    """A ROS-free diagnostic_msgs/DiagnosticStatus (``values`` a dict, or :class:`DeferredValues`)."""

    name: str
    level: DiagnosticLevel
    message: str
    hardware_id: str = ""
    values: MutableMapping[str, str] = field(default_factory=dict)


@dataclass
class ShapeEstimate:
    """A continuum robot's estimated shape at one time.

    Attributes:
        stamp_ns: stamp of the data the estimate came from.
        parent_frame: the frame all poses are given in (the robot base).
        frame_ids: one child frame per pose (sensors, then the tip, ...).
        poses: ``(N, 4, 4)`` transforms ``T_parent_frame``.
        position_covariance: ``(N, 3, 3)`` position covariance of each frame in
            the parent frame (m^2), or ``None`` if the method gives none.
        backbone: ``(M, 3)`` points along the centreline, base to tip, for
            paths and body markers.
        radius: body radius (m) for markers.
        length: length of the estimated backbone (m).
        diagnostics: health of the estimate and of its inputs.
    """

    stamp_ns: int
    parent_frame: str
    frame_ids: list[str]
    poses: FloatArray
    position_covariance: FloatArray | None
    backbone: FloatArray
    radius: float
    length: float
    diagnostics: list[DiagnosticStatus] = field(default_factory=list)

    @property
    def tip_pose(self) -> FloatArray:
        """The last frame's pose (the tip by convention)."""
        return self.poses[-1]
