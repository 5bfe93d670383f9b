"""Builders and readers for ToF frames, backbone samples and point clouds (prior map, reconstruction, anomalies)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shape_sensing.geometry import FloatArray, matrix_to_quat
from shape_sensing.messages.common import header, pose_msg, pose_to_matrix, stamp_from_msg
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import MessageFactory, default_factory, published_type

__all__ = [
    "point_cloud2_msg",
    "point_cloud2_to_arrays",
    "shape_samples_from_msg",
    "shape_samples_msg",
    "tof_frame_from_msg",
    "tof_frame_msg",
]

_FLOAT32 = 7  # sensor_msgs/PointField.FLOAT32


def _f(factory: MessageFactory | None) -> MessageFactory:
    return factory if factory is not None else default_factory()


@published_type("shape_sensing/msg/TofFrame")
def tof_frame_msg(
    stamp_ns: int,
    frame_id: str,
    distance: FloatArray,
    status: NDArray[np.uint8],
    *,
    zones_per_side: int = 8,
    field_of_view: float = float(np.deg2rad(45.0)),
    min_range: float = 0.025,
    max_range: float = 4.0,
    stream_count: int = 0,
    temperature: float = 25.0,
    distance_sigma: FloatArray | None = None,
    factory: MessageFactory | None = None,
) -> Any:
    """shape_sensing/TofFrame of one sensor (distances along the boresight, NaN where no target)."""
    z = zones_per_side**2
    d = np.asarray(distance, dtype=np.float32).reshape(-1)
    st = np.asarray(status, dtype=np.uint8).reshape(-1)
    if d.size != z or st.size != z:
        raise MessageError(f"ToF frame needs {z} distances and status codes, got {d.size} and {st.size}")
    sig = np.zeros(z, np.float32) if distance_sigma is None else np.asarray(distance_sigma, np.float32).reshape(z)
    return _f(factory).make(
        "shape_sensing/msg/TofFrame",
        header=header(stamp_ns, frame_id, factory),
        zones_per_side=int(zones_per_side),
        field_of_view=float(field_of_view),
        min_range=float(min_range),
        max_range=float(max_range),
        stream_count=int(stream_count),
        temperature=float(temperature),
        distance=d,
        distance_sigma=sig,
        target_status=st,
        signal_per_spad=np.zeros(z, np.float32),
        ambient_per_spad=np.zeros(z, np.float32),
        targets_detected=(np.isfinite(d)).astype(np.uint8),
    )


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
