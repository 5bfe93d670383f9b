"""Messages of the sensor rings: ``shape_sensing/TofFrame`` and ``sensor_msgs/PointCloud2`` of the valid zones.

:func:`zone_directions` and :func:`zone_points` are the geometry (ROS-free):
zone (row, col) of an N x N frame covers angles ``ax`` (col, along +x) and
``ay`` (row, along +y) in N equal steps of the field of view; a zone's point
is ``distance * [tan(ax), tan(ay), 1]`` since the chip reports the distance
along the boresight (as ``msg/TofFrame.msg`` says).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from shape_sensing.drivers.vl53l5cx import FIELD_OF_VIEW_RAD, TofReading
from shape_sensing.geometry import FloatArray
from shape_sensing.messages.common import _marker, header
from shape_sensing.messages.factory import MessageFactory, default_factory, published_type

__all__ = [
    "POINT_FIELDS",
    "fov_edges",
    "fov_markers",
    "tof_frame_msg",
    "tof_points_msg",
    "zone_angles",
    "zone_directions",
    "zone_points",
]

# x, y, z (float32, m), sigma (float32, m), status (float32 code), row-major like the frame.
POINT_FIELDS = (("x", 0), ("y", 4), ("z", 8), ("sigma", 12), ("status", 16))
_POINT_STEP = 20
_FLOAT32 = 7  # sensor_msgs/PointField FLOAT32


def _f(factory: MessageFactory | None) -> MessageFactory:
    return factory if factory is not None else default_factory()


def zone_angles(zones_per_side: int, fov: float = FIELD_OF_VIEW_RAD) -> tuple[FloatArray, FloatArray]:
    """Centre angles ``(ax, ay)`` of every zone, row-major (``zones_per_side ** 2`` each)."""
    n = int(zones_per_side)
    centres = ((np.arange(n) + 0.5) / n - 0.5) * fov
    ay, ax = np.meshgrid(centres, centres, indexing="ij")
    return ax.ravel(), ay.ravel()


def zone_directions(zones_per_side: int, fov: float = FIELD_OF_VIEW_RAD) -> FloatArray:
    """``(N*N, 3)`` vectors ``[tan(ax), tan(ay), 1]`` (z = 1: multiply by the boresight distance)."""
    ax, ay = zone_angles(zones_per_side, fov)
    return np.column_stack([np.tan(ax), np.tan(ay), np.ones_like(ax)])


def zone_points(distance_m: FloatArray, zones_per_side: int, fov: float = FIELD_OF_VIEW_RAD) -> FloatArray:
    """Points (sensor frame, m) of boresight distances (NaN distances give NaN points)."""
    return zone_directions(zones_per_side, fov) * np.asarray(distance_m, float)[:, None]


def _valid_distances(reading: TofReading, min_range: float, max_range: float) -> FloatArray:
    d = reading.distance_mm / 1000.0
    ok = reading.valid() & (d >= min_range) & (d <= max_range)
    return np.where(ok, d, np.nan)


@published_type("shape_sensing/msg/TofFrame")
def tof_frame_msg(
    reading: TofReading,
    frame_id: str,
    *,
    min_range: float = 0.025,
    max_range: float = 4.0,
    fov: float = FIELD_OF_VIEW_RAD,
    factory: MessageFactory | None = None,
) -> Any:
    """The frame as the chip reported it; distance NaN where the zone has no target (status kept as reported)."""
    f = _f(factory)
    d = reading.distance_mm / 1000.0
    d = np.where(reading.nb_target_detected > 0, d, np.nan)
    return f.make(
        "shape_sensing/msg/TofFrame",
        header=header(reading.stamp_ns, frame_id, f),
        zones_per_side=reading.zones_per_side,
        field_of_view=float(fov),
        min_range=float(min_range),
        max_range=float(max_range),
        stream_count=int(reading.stream_count),
        temperature=float(reading.silicon_temp_degc),
        distance=d.astype(np.float32),
        distance_sigma=(reading.range_sigma_mm / 1000.0).astype(np.float32),
        target_status=reading.target_status.astype(np.uint8),
        signal_per_spad=reading.signal_per_spad.astype(np.float32),
        ambient_per_spad=reading.ambient_per_spad.astype(np.float32),
        targets_detected=reading.nb_target_detected.astype(np.uint8),
    )


@published_type("sensor_msgs/msg/PointCloud2")
def tof_points_msg(
    reading: TofReading,
    frame_id: str,
    *,
    min_range: float = 0.025,
    max_range: float = 4.0,
    fov: float = FIELD_OF_VIEW_RAD,
    factory: MessageFactory | None = None,
) -> Any:
    """Valid zones (status 5 or 9, a target, within the range limits) as points in the sensor frame."""
    f = _f(factory)
    d = _valid_distances(reading, min_range, max_range)
    pts = zone_points(d, reading.zones_per_side, fov)
    keep = np.isfinite(d)
    rows = np.zeros(int(keep.sum()), dtype=[("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("sigma", "<f4"),
                                            ("status", "<f4")])  # fmt: skip
    rows["x"], rows["y"], rows["z"] = pts[keep, 0], pts[keep, 1], pts[keep, 2]
    rows["sigma"] = reading.range_sigma_mm[keep] / 1000.0
    rows["status"] = reading.target_status[keep]
    fields = [
        f.make("sensor_msgs/msg/PointField", name=n, offset=o, datatype=_FLOAT32, count=1) for n, o in POINT_FIELDS
    ]
    return f.make(
        "sensor_msgs/msg/PointCloud2",
        header=header(reading.stamp_ns, frame_id, f),
        height=1,
        width=len(rows),
        fields=fields,
        is_bigendian=False,
        point_step=_POINT_STEP,
        row_step=_POINT_STEP * len(rows),
        data=np.frombuffer(rows.tobytes(), np.uint8).copy(),
        is_dense=True,
    )


MARKER_LINE_LIST = 5


def fov_edges(length: float, fov: float = FIELD_OF_VIEW_RAD) -> FloatArray:
    """``(16, 3)`` segment end points (pairs) of the square field-of-view pyramid, ``length`` along the boresight."""
    h = math.tan(fov / 2) * length
    c = np.array([[-h, -h, length], [h, -h, length], [h, h, length], [-h, h, length]])
    o = np.zeros(3)
    segs = [p for k in range(4) for p in (o, c[k])] + [p for k in range(4) for p in (c[k], c[(k + 1) % 4])]
    return np.array(segs)


@published_type("visualization_msgs/msg/MarkerArray")
def fov_markers(
    frame_ids: list[str],
    stamp_ns: int = 0,
    *,
    length: float = 0.3,
    fov: float = FIELD_OF_VIEW_RAD,
    rgba: tuple[float, float, float, float] = (0.1, 0.8, 0.2, 0.8),
    factory: MessageFactory | None = None,
) -> Any:
    """One line-list pyramid per sensor frame (drawn in that frame, so TF places it)."""
    f = _f(factory)
    edges = fov_edges(length, fov)
    markers = [
        _marker(
            f, header(stamp_ns, fid, f), "tof_fov", i, MARKER_LINE_LIST, points=edges, scale=(0.004, 0, 0), rgba=rgba
        )
        for i, fid in enumerate(frame_ids)
    ]
    return f.make("visualization_msgs/msg/MarkerArray", markers=markers)
