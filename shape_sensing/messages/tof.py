"""Messages of the sensor rings: ``shape_sensing/TofFrame`` and ``sensor_msgs/PointCloud2`` of the valid zones.

:func:`zone_directions` and :func:`zone_points` are the chip's zone geometry, defined with the driver
(:mod:`shape_sensing.drivers.vl53l5cx`) and re-exported here: zone (row, col) of an N x N frame covers angles
``ax`` (col, along +x) and ``ay`` (row, along +y) in N equal steps of the field of view; a zone's point is
``distance * [tan(ax), tan(ay), 1]`` since the chip reports the distance along the boresight (as
``msg/TofFrame.msg`` says).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shape_sensing.drivers.vl53l5cx import FIELD_OF_VIEW_RAD, TofReading, zone_angles, zone_directions, zone_points
from shape_sensing.geometry import FloatArray, matrix_to_quat
from shape_sensing.messages.common import _marker, header, pose_msg, pose_to_matrix, stamp_from_msg
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import MessageFactory, default_factory, published_type

__all__ = [
    "POINT_FIELDS",
    "fov_edges",
    "fov_markers",
    "point_cloud2_msg",
    "point_cloud2_to_arrays",
    "prior_map_cloud_msg",
    "reconstruction_cloud_msg",
    "shape_samples_from_msg",
    "shape_samples_msg",
    "tof_frame_from_msg",
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


# -- localisation against a prior map (continuum ToF estimator): frames read back, backbone samples, clouds --


def tof_frame_from_msg(msg: Any) -> tuple[int, str, FloatArray, NDArray[np.uint8]]:
    """``(stamp_ns, frame_id, distance (Z,), status (Z,))`` of a TofFrame."""
    d = np.asarray(msg.distance, dtype=np.float64)
    st = np.asarray(bytearray(msg.target_status) if isinstance(msg.target_status, bytes) else msg.target_status)
    return stamp_from_msg(msg), str(msg.header.frame_id), d, st.astype(np.uint8)


@published_type("shape_sensing/msg/ShapeSamples")
def shape_samples_msg(
    stamp_ns: int,
    frame_id: str,
    estimator: str,
    arc_length: FloatArray,
    poses: FloatArray,
    covariance: FloatArray | None = None,
    factory: MessageFactory | None = None,
) -> Any:
    """shape_sensing/ShapeSamples: poses ``(N, 4, 4)`` at ``arc_length`` with optional ``(N, 6, 6)`` covariances
    (right perturbation ``[rho; phi]`` as the estimator keeps it, rotated into the base frame's x, y, z order)."""
    f = _f(factory)
    s = np.asarray(arc_length, dtype=np.float64).reshape(-1)
    T = np.asarray(poses, dtype=np.float64).reshape(-1, 4, 4)
    if s.size != T.shape[0]:
        raise MessageError(f"{s.size} arc lengths for {T.shape[0]} poses")
    items = []
    for i in range(s.size):
        cov = np.zeros(36)
        if covariance is None:
            cov[0] = -1.0
        else:
            R = T[i, :3, :3]
            G = np.zeros((6, 6))
            G[:3, :3] = R
            G[3:, 3:] = R
            cov = (G @ np.asarray(covariance[i]) @ G.T).reshape(36)
        items.append(
            f.make(
                "geometry_msgs/msg/PoseWithCovariance",
                pose=pose_msg(T[i], factory, matrix_to_quat(T[i, :3, :3])),
                covariance=cov,
            )
        )
    return f.make(
        "shape_sensing/msg/ShapeSamples",
        header=header(stamp_ns, frame_id, factory),
        estimator=estimator,
        arc_length=s,
        poses=items,
    )


def shape_samples_from_msg(msg: Any) -> tuple[int, FloatArray, FloatArray]:
    """``(stamp_ns, arc_length (N,), poses (N, 4, 4))`` of a ShapeSamples."""
    s = np.asarray(msg.arc_length, dtype=np.float64)
    T = np.stack([pose_to_matrix(p.pose) for p in msg.poses]) if len(msg.poses) else np.zeros((0, 4, 4))
    return stamp_from_msg(msg), s, T


@published_type("sensor_msgs/msg/PointCloud2")
def point_cloud2_msg(
    stamp_ns: int,
    frame_id: str,
    points: FloatArray,
    scalars: Mapping[str, FloatArray] | None = None,
    factory: MessageFactory | None = None,
) -> Any:
    """Unorganised sensor_msgs/PointCloud2 of float32 ``x y z`` and float32 scalar fields (little-endian)."""
    f = _f(factory)
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    names = ["x", "y", "z", *(scalars or {})]
    dt = np.dtype([(n, "<f4") for n in names])
    arr = np.zeros(pts.shape[0], dtype=dt)
    arr["x"], arr["y"], arr["z"] = pts.T
    for n, v in (scalars or {}).items():
        v = np.asarray(v, dtype=np.float64).reshape(-1)
        if v.size != pts.shape[0]:
            raise MessageError(f"point cloud field {n} has {v.size} values for {pts.shape[0]} points")
        arr[n] = v
    fields = [
        f.make("sensor_msgs/msg/PointField", name=n, offset=4 * i, datatype=_FLOAT32, count=1)
        for i, n in enumerate(names)
    ]
    return f.make(
        "sensor_msgs/msg/PointCloud2",
        header=header(stamp_ns, frame_id, factory),
        height=1,
        width=pts.shape[0],
        fields=fields,
        is_bigendian=False,
        point_step=dt.itemsize,
        row_step=dt.itemsize * pts.shape[0],
        data=np.frombuffer(arr.tobytes(), dtype=np.uint8),
        is_dense=True,
    )


def point_cloud2_to_arrays(msg: Any) -> dict[str, FloatArray]:
    """The float32 fields of a PointCloud2 as ``{name: (P,)}`` (any field order and point step)."""
    if msg.is_bigendian:
        raise MessageError("big-endian PointCloud2 not read here")
    n = int(msg.width) * int(msg.height)
    raw = np.asarray(msg.data, dtype=np.uint8).tobytes()
    out = {}
    for fd in msg.fields:
        if int(fd.datatype) != _FLOAT32:
            continue
        dt = np.dtype(
            {"names": [fd.name], "formats": ["<f4"], "offsets": [int(fd.offset)], "itemsize": int(msg.point_step)}
        )
        out[str(fd.name)] = np.frombuffer(raw, dtype=dt, count=n)[fd.name].astype(np.float64)
    return out


@published_type("sensor_msgs/msg/PointCloud2")
def reconstruction_cloud_msg(
    stamp_ns: int,
    frame_id: str,
    points: FloatArray,
    mahalanobis2: FloatArray,
    anomaly: NDArray[np.bool_],
    factory: MessageFactory | None = None,
) -> Any:
    """Scene reconstruction (seed 001, Eq. 10-12) as PointCloud2: float32 ``x y z``, ``mahalanobis2`` (the squared
    Mahalanobis distance of each point to the nearest prior-map point) and ``anomaly`` (1 flagged, 0 not)."""
    m2 = np.asarray(mahalanobis2, dtype=np.float64).reshape(-1)
    flag = np.asarray(anomaly, dtype=bool).reshape(-1)
    return point_cloud2_msg(
        stamp_ns, frame_id, points, {"mahalanobis2": m2, "anomaly": flag.astype(np.float64)}, factory
    )


@published_type("sensor_msgs/msg/PointCloud2")
def prior_map_cloud_msg(
    stamp_ns: int,
    frame_id: str,
    points: FloatArray,
    normals: FloatArray,
    planarity: FloatArray,
    factory: MessageFactory | None = None,
) -> Any:
    """A prior map as PointCloud2: float32 ``x y z``, ``normal_x normal_y normal_z`` and ``planarity``
    (``alpha = (s2 - s3) / s1`` of the neighbourhood PCA)."""
    n = np.asarray(normals, dtype=np.float64).reshape(-1, 3)
    return point_cloud2_msg(
        stamp_ns,
        frame_id,
        points,
        {"normal_x": n[:, 0], "normal_y": n[:, 1], "normal_z": n[:, 2], "planarity": planarity},
        factory,
    )
