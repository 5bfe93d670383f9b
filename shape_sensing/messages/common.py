"""Builders and readers for the standard messages every part of the package uses.

Every builder takes core types (see :mod:`shape_sensing.types`) and an optional
``factory`` (defaults to the rosbags-backed Jazzy factory); nodes pass the
rclpy-backed one. Readers take any message object with the ROS 2 field names
(rosbags or rclpy) and return core types.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from shape_sensing.geometry import FloatArray, make_transform, matrix_to_quat, quat_to_matrix
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import MessageFactory, default_factory, published_type
from shape_sensing.types import DiagnosticLevel, DiagnosticStatus, ImuSample, ShapeEstimate, TransformStamped
from shape_sensing.viz import covariance_ellipsoid, tube_mesh_indexed

__all__ = [
    "UNOBSERVED_VARIANCE",
    "VARIANCE_FLOOR",
    "diagnostic_array",
    "diagnostics_from_msg",
    "header",
    "imu_from_cdr",
    "imu_from_msg",
    "imu_orientation_from_cdr",
    "imu_orientation_from_msg",
    "imu_to_msg",
    "path_msg",
    "pose_msg",
    "pose_to_matrix",
    "pose_with_covariance_stamped",
    "positive_definite",
    "shape_markers",
    "stamp_from_msg",
    "tf_message",
    "time_msg",
    "transforms_from_tf",
]

NS_PER_S = 1_000_000_000
#: Variance (rad^2 or m^2) on the diagonal of a covariance block that is not observed, e.g. the vine tip pose's
#: orientation, which the hinge-arc estimator does not estimate: a sigma of 1000 rad, so the block carries no
#: information, while the matrix stays positive definite as robot_localization, nav2 and RViz expect (a negative
#: "unknown" mark such as REP-145's -1 for sensor_msgs/Imu makes a PoseWithCovariance indefinite, and RViz then
#: warns "Negative eigenvalue found" for every message).
UNOBSERVED_VARIANCE = 1.0e6
#: Smallest variance (m^2: a sigma of 1 micrometre) a published position covariance keeps along any axis: an
#: estimate with no spread along an axis (the vine's straight body along its length) is rank-deficient, and
#: rounding then leaves an eigenvalue of about -1e-28, which RViz rejects ("Negative eigenvalue found").
VARIANCE_FLOOR = 1.0e-12


def positive_definite(cov: FloatArray, floor: float = VARIANCE_FLOOR) -> FloatArray:
    """A covariance (..., 3, 3) made symmetric with every eigenvalue at least ``floor`` (what consumers that
    take its eigen-decomposition or Cholesky factor, RViz and robot_localization, accept); a change of at most
    ``floor`` from a positive semidefinite input."""
    c = np.asarray(cov, dtype=float)
    c = 0.5 * (c + np.swapaxes(c, -1, -2))
    w, v = np.linalg.eigh(c)
    if np.all(w >= 2 * floor):
        return c
    out = (v * np.maximum(w, floor)[..., None, :]) @ np.swapaxes(v, -1, -2)
    return 0.5 * (out + np.swapaxes(out, -1, -2))


def _f(factory: MessageFactory | None) -> MessageFactory:
    return factory if factory is not None else default_factory()


def time_msg(stamp_ns: int, factory: MessageFactory | None = None) -> Any:
    """builtin_interfaces/Time from integer nanoseconds."""
    stamp_ns = int(stamp_ns)
    if stamp_ns < 0:
        raise MessageError(f"stamp {stamp_ns} ns is negative; ROS 2 Time needs stamps >= 0")
    if stamp_ns // NS_PER_S > 2**31 - 1:
        raise MessageError(f"stamp {stamp_ns} ns is past what ROS 2 Time holds (int32 seconds)")
    return _f(factory).make("builtin_interfaces/msg/Time", sec=stamp_ns // NS_PER_S, nanosec=stamp_ns % NS_PER_S)


def stamp_from_msg(msg: Any) -> int:
    """Integer nanoseconds from a builtin_interfaces/Time (or a message with a header)."""
    stamp = msg.header.stamp if hasattr(msg, "header") else msg
    return int(stamp.sec) * NS_PER_S + int(stamp.nanosec)


@published_type("std_msgs/msg/Header")
def header(stamp_ns: int, frame_id: str, factory: MessageFactory | None = None) -> Any:
    """std_msgs/Header."""
    return _f(factory).make("std_msgs/msg/Header", stamp=time_msg(stamp_ns, factory), frame_id=frame_id)


def _vec3(
    v: Sequence[float] | FloatArray, factory: MessageFactory | None, typename: str = "geometry_msgs/msg/Vector3"
) -> Any:
    # Every field is given, so the class is called directly (the hot path of paths and markers).
    return _f(factory).cls(typename)(x=float(v[0]), y=float(v[1]), z=float(v[2]))


def _points(points: FloatArray, factory: MessageFactory | None, typename: str = "geometry_msgs/msg/Point") -> list[Any]:
    """One message per row of ``(N, 3)`` points; ``tolist`` gives the same floats as ``float()`` per element."""
    cls = _f(factory).cls(typename)
    return [cls(x=x, y=y, z=z) for x, y, z in np.asarray(points, dtype=float).reshape(-1, 3).tolist()]


def _poses(positions: FloatArray, quats: FloatArray, factory: MessageFactory | None) -> list[Any]:
    """geometry_msgs/Pose per row of ``(N, 3)`` positions and ``(N, 4)`` quaternions (every field given)."""
    f = _f(factory)
    pose, point = f.cls("geometry_msgs/msg/Pose"), f.cls("geometry_msgs/msg/Point")
    quat = f.cls("geometry_msgs/msg/Quaternion")
    return [
        pose(position=point(x=x, y=y, z=z), orientation=quat(x=qx, y=qy, z=qz, w=qw))
        for (x, y, z), (qx, qy, qz, qw) in zip(
            np.asarray(positions, dtype=float).tolist(), np.asarray(quats, dtype=float).tolist(), strict=True
        )
    ]


def _quat(q: Sequence[float] | FloatArray, factory: MessageFactory | None) -> Any:
    cls = _f(factory).cls("geometry_msgs/msg/Quaternion")
    return cls(x=float(q[0]), y=float(q[1]), z=float(q[2]), w=float(q[3]))


def _cov9(cov: FloatArray | None, *, unknown: float = 0.0) -> FloatArray:
    if cov is None:
        out = np.zeros(9)
        out[0] = unknown
        return out
    cov = np.asarray(cov, dtype=float)
    if cov.shape != (3, 3):
        raise MessageError(f"covariance must be 3x3, got shape {cov.shape}")
    return cov.reshape(9)


@published_type("geometry_msgs/msg/Pose")
def pose_msg(T: FloatArray, factory: MessageFactory | None = None, quat: FloatArray | None = None) -> Any:
    """geometry_msgs/Pose from a 4x4 transform (``quat`` if its quaternion is already known)."""
    T = np.asarray(T, dtype=float)
    q = matrix_to_quat(T[:3, :3]) if quat is None else quat
    return _f(factory).make(
        "geometry_msgs/msg/Pose",
        position=_vec3(T[:3, 3], factory, "geometry_msgs/msg/Point"),
        orientation=_quat(q, factory),
    )


def pose_to_matrix(pose: Any) -> FloatArray:
    """4x4 transform from a geometry_msgs/Pose or Transform."""
    pos = pose.position if hasattr(pose, "position") else pose.translation
    rot = pose.orientation if hasattr(pose, "orientation") else pose.rotation
    q = np.array([rot.x, rot.y, rot.z, rot.w], dtype=float)
    return make_transform(quat_to_matrix(q), [pos.x, pos.y, pos.z])


@published_type("sensor_msgs/msg/Imu")
def imu_to_msg(sample: ImuSample, factory: MessageFactory | None = None) -> Any:
    """sensor_msgs/Imu from an :class:`ImuSample`.

    An absent orientation is published per REP-145/sensor_msgs: covariance
    element 0 set to -1. Unknown covariances are all zeros.
    """
    if sample.orientation is None:
        q = np.array([0.0, 0.0, 0.0, 1.0])
        ocov = _cov9(None, unknown=-1.0)
    else:
        q = np.asarray(sample.orientation, dtype=float)
        ocov = _cov9(sample.orientation_covariance)
    return _f(factory).make(
        "sensor_msgs/msg/Imu",
        header=header(sample.stamp_ns, sample.frame_id, factory),
        orientation=_quat(q, factory),
        orientation_covariance=ocov,
        angular_velocity=_vec3(sample.angular_velocity, factory),
        angular_velocity_covariance=_cov9(sample.angular_velocity_covariance),
        linear_acceleration=_vec3(sample.linear_acceleration, factory),
        linear_acceleration_covariance=_cov9(sample.linear_acceleration_covariance),
    )


def imu_from_msg(msg: Any) -> ImuSample:
    """An :class:`ImuSample` from a sensor_msgs/Imu (either backend).

    Raises:
        MessageError: the orientation is present but not a finite non-zero quaternion.
    """
    ocov = np.asarray(msg.orientation_covariance, dtype=float).reshape(3, 3)
    has_orientation = ocov[0, 0] != -1.0
    q = np.array([msg.orientation.x, msg.orientation.y, msg.orientation.z, msg.orientation.w], dtype=float)
    if has_orientation:
        q = _unit_quat(q, msg.header.frame_id)

    def cov(values: Any) -> FloatArray | None:
        c = np.asarray(values, dtype=float).reshape(3, 3)
        return None if not c.any() else c

    return ImuSample(
        stamp_ns=stamp_from_msg(msg),
        frame_id=str(msg.header.frame_id),
        orientation=q if has_orientation else None,
        angular_velocity=np.array([msg.angular_velocity.x, msg.angular_velocity.y, msg.angular_velocity.z]),
        linear_acceleration=np.array([msg.linear_acceleration.x, msg.linear_acceleration.y, msg.linear_acceleration.z]),
        orientation_covariance=cov(msg.orientation_covariance) if has_orientation else None,
        angular_velocity_covariance=cov(msg.angular_velocity_covariance),
        linear_acceleration_covariance=cov(msg.linear_acceleration_covariance),
    )


_IMU_TAIL = struct.Struct("<37d")  # orientation 4, cov 9, angular velocity 3, cov 9, linear acceleration 3, cov 9
_STAMP = struct.Struct("<iII")
_F8 = np.dtype("<f8")


#: How far from 1 the norm of a message's orientation may be. Drivers send unit quaternions (a BNO055's 2^14 and a
#: WT901's 2^15 quantisation are off by < 1e-3, a float32 copy by 1e-7); a norm further off is a corrupted reading
#: (a torn read, bytes of another register), never a rotation to normalise.
UNIT_QUATERNION_TOLERANCE = 0.05


def _unit_quat(q: FloatArray, frame_id: object) -> FloatArray:
    """``q / |q|``, with the norm from one ``dot`` (as ``np.linalg.norm`` computes it).

    Raises:
        MessageError: not a finite quaternion of norm within :data:`UNIT_QUATERNION_TOLERANCE` of 1.
    """
    sq = float(q @ q)
    norm = math.sqrt(sq) if sq >= 0.0 else math.nan  # NaN stays NaN
    if not (math.isfinite(norm) and abs(norm - 1.0) <= UNIT_QUATERNION_TOLERANCE):
        raise MessageError(
            f"sensor_msgs/Imu from {str(frame_id)!r} has orientation {q.tolist()} (norm {norm:.3g}); "
            "expected a unit quaternion"
        )
    return q / norm


def _imu_cdr_layout(buf: bytes) -> tuple[int, int, int]:
    """``(stamp_ns, frame id length incl. NUL, offset of the 37 doubles)`` of sensor_msgs/Imu CDR bytes."""
    if len(buf) < 20 or buf[0:2] != b"\x00\x01":
        raise MessageError("sensor_msgs/Imu bytes are not little-endian CDR (encapsulation 0x0001)")
    sec, nanosec, n = _STAMP.unpack_from(buf, 4)
    pos = 16 + n
    pos = 4 + -(-(pos - 4) // 8) * 8  # float64 alignment, counted after the encapsulation header
    if n == 0 or pos + _IMU_TAIL.size > len(buf):
        raise MessageError(f"sensor_msgs/Imu bytes are truncated ({len(buf)} bytes)")
    return sec * NS_PER_S + nanosec, n, pos


def imu_orientation_from_cdr(raw: bytes | memoryview) -> tuple[int, FloatArray | None]:
    """``(stamp_ns, unit orientation or None)`` straight from sensor_msgs/Imu CDR bytes.

    What a shape estimator needs of a reading, without building an
    :class:`ImuSample`: the same stamp and the same normalised quaternion as
    :func:`imu_from_cdr` (same operations, so the same bits).

    Raises:
        MessageError: not little-endian plain CDR, too short, or a bad orientation.
    """
    buf = raw if isinstance(raw, bytes) else bytes(raw)
    stamp, n, pos = _imu_cdr_layout(buf)
    v = np.frombuffer(buf, _F8, 5, pos)
    if v[4] == -1.0:
        return stamp, None
    return stamp, _unit_quat(v[:4].copy(), buf[16 : 16 + n - 1].decode("utf-8", errors="replace"))


def imu_orientation_from_msg(msg: Any) -> tuple[int, FloatArray | None]:
    """``(stamp_ns, unit orientation or None)`` of a sensor_msgs/Imu (either backend).

    Same stamp and normalised quaternion as :func:`imu_from_msg`, without the
    rest of the :class:`ImuSample` (the per-message path of the shape nodes).

    Raises:
        MessageError: the orientation is present but not a finite non-zero quaternion.
    """
    stamp = msg.header.stamp
    stamp_ns = int(stamp.sec) * NS_PER_S + int(stamp.nanosec)
    if msg.orientation_covariance[0] == -1.0:
        return stamp_ns, None
    o = msg.orientation
    return stamp_ns, _unit_quat(np.array([o.x, o.y, o.z, o.w], dtype=float), msg.header.frame_id)


def imu_from_cdr(raw: bytes | memoryview) -> ImuSample:
    """An :class:`ImuSample` straight from the CDR bytes of a sensor_msgs/Imu.

    The layout of sensor_msgs/Imu is fixed but for the frame id, so the
    fields are read in one call instead of building message objects (the
    replay hot path). Same result as ``imu_from_msg`` on the decoded message.

    Raises:
        MessageError: not little-endian plain CDR, or too short for an Imu.
    """
    buf = raw if isinstance(raw, bytes) else bytes(raw)
    stamp, n, pos = _imu_cdr_layout(buf)
    frame_id = buf[16 : 16 + n - 1].decode("utf-8", errors="replace")
    v = np.frombuffer(buf, _F8, 37, pos).copy()
    has_orientation = v[4] != -1.0
    q = _unit_quat(v[0:4], frame_id) if has_orientation else v[0:4]

    def cov(values: FloatArray) -> FloatArray | None:
        return None if not values.any() else values.reshape(3, 3)

    return ImuSample(
        stamp_ns=stamp,
        frame_id=frame_id,
        orientation=q if has_orientation else None,
        angular_velocity=v[13:16],
        linear_acceleration=v[25:28],
        orientation_covariance=cov(v[4:13]) if has_orientation else None,
        angular_velocity_covariance=cov(v[16:25]),
        linear_acceleration_covariance=cov(v[28:37]),
    )


@published_type("geometry_msgs/msg/TransformStamped")
def transform_stamped(
    tf: TransformStamped, factory: MessageFactory | None = None, quat: FloatArray | None = None
) -> Any:
    """geometry_msgs/TransformStamped (``quat``: the rotation's quaternion, if already known)."""
    T = np.asarray(tf.matrix, dtype=float)
    q = matrix_to_quat(T[:3, :3]) if quat is None else quat
    return _f(factory).make(
        "geometry_msgs/msg/TransformStamped",
        header=header(tf.stamp_ns, tf.parent, factory),
        child_frame_id=tf.child,
        transform=_f(factory).make(
            "geometry_msgs/msg/Transform",
            translation=_vec3(T[:3, 3], factory),
            rotation=_quat(q, factory),
        ),
    )


@published_type("tf2_msgs/msg/TFMessage")
def tf_message(transforms: Iterable[TransformStamped], factory: MessageFactory | None = None) -> Any:
    """tf2_msgs/TFMessage from transforms."""
    tfs = list(transforms)
    f = _f(factory)
    if not tfs:
        return f.make("tf2_msgs/msg/TFMessage", transforms=[])
    mats = np.stack([t.matrix for t in tfs]).astype(float, copy=False)
    quats = matrix_to_quat(mats[:, :3, :3]).tolist()
    trans = mats[:, :3, 3].tolist()
    # Every field is given, so the classes are called directly; transforms with the same stamp and parent
    # share one header (same bytes on the wire).
    stamped, transform = f.cls("geometry_msgs/msg/TransformStamped"), f.cls("geometry_msgs/msg/Transform")
    vec, quat = f.cls("geometry_msgs/msg/Vector3"), f.cls("geometry_msgs/msg/Quaternion")
    headers: dict[tuple[int, str], Any] = {}
    out = []
    for t, (x, y, z), (qx, qy, qz, qw) in zip(tfs, trans, quats, strict=True):
        key = (int(t.stamp_ns), t.parent)
        hdr = headers.get(key)
        if hdr is None:
            hdr = headers[key] = header(t.stamp_ns, t.parent, factory)
        out.append(
            stamped(
                header=hdr,
                child_frame_id=t.child,
                transform=transform(translation=vec(x=x, y=y, z=z), rotation=quat(x=qx, y=qy, z=qz, w=qw)),
            )
        )
    return f.make("tf2_msgs/msg/TFMessage", transforms=out)


def transforms_from_tf(msg: Any) -> list[TransformStamped]:
    """Core transforms from a tf2_msgs/TFMessage."""
    return [
        TransformStamped(
            stamp_ns=stamp_from_msg(t),
            parent=str(t.header.frame_id),
            child=str(t.child_frame_id),
            matrix=pose_to_matrix(t.transform),
        )
        for t in msg.transforms
    ]


def shape_transforms(shape: ShapeEstimate, frame_prefix: str = "") -> list[TransformStamped]:
    """One transform per estimated frame, from the shape's parent frame."""
    return [
        TransformStamped(shape.stamp_ns, frame_prefix + shape.parent_frame, frame_prefix + child, pose)
        for child, pose in zip(shape.frame_ids, shape.poses, strict=True)
    ]


@published_type("nav_msgs/msg/Path")
def path_msg(stamp_ns: int, frame_id: str, poses: FloatArray, factory: MessageFactory | None = None) -> Any:
    """nav_msgs/Path from ``(N, 4, 4)`` transforms or ``(N, 3)`` points.

    Points get orientations whose z axis follows the polyline's tangent.
    """
    poses = np.asarray(poses, dtype=float)
    hdr = header(stamp_ns, frame_id, factory)
    if poses.ndim == 2 and poses.shape[1] == 3:
        values = _path_values(poses)
        positions, quats = values[:, :3], values[:, 3:]
    else:
        positions = poses[:, :3, 3]
        quats = matrix_to_quat(poses[:, :3, :3]) if len(poses) else np.zeros((0, 4))
    f = _f(factory)
    cls = f.cls("geometry_msgs/msg/PoseStamped")
    stamped = [cls(header=hdr, pose=p) for p in _poses(positions, quats, factory)]
    return f.make("nav_msgs/msg/Path", header=hdr, poses=stamped)


def _poses_along(points: FloatArray) -> FloatArray:
    """Frames at points with z along the local tangent (minimal rotation from +z).

    ``(..., N, 3)`` points to ``(..., N, 4, 4)`` frames: polylines of one length are done at once, by
    elementwise operations only (no matrix products), so a polyline's frames do not depend on the batch.
    """
    points = np.asarray(points, dtype=float)
    n = points.shape[-2]
    out = np.zeros((*points.shape[:-1], 4, 4))
    out[..., 0, 0] = out[..., 1, 1] = out[..., 2, 2] = out[..., 3, 3] = 1.0
    out[..., :3, 3] = points
    if n < 2:
        return out
    t = np.gradient(points, axis=-2)
    sq = t * t
    norm = np.sqrt(sq[..., 0] + sq[..., 1] + sq[..., 2])
    t = np.where(norm[..., None] > 1e-12, t / np.maximum(norm, 1e-12)[..., None], [0.0, 0.0, 1.0])
    # Rotation taking z to t: axis z x t = (-t_y, t_x, 0), Rodrigues with sin = |z x t|, cos = t_z:
    # R = I + K + K^2 / (1 + c) with K the cross-product matrix of the axis, written out entry by entry.
    a, b, c = t[..., 0], t[..., 1], t[..., 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(1.0 + c > 1e-9, 1.0 / (1.0 + c), 0.0)
    fa = f * a
    fab = -(fa * b)
    R = out[..., :3, :3]
    R[..., 0, 0] = 1.0 - fa * a
    R[..., 0, 1] = fab
    R[..., 0, 2] = a
    R[..., 1, 0] = fab
    R[..., 1, 1] = 1.0 - f * b * b
    R[..., 1, 2] = b
    R[..., 2, 0] = -a
    R[..., 2, 1] = -b
    R[..., 2, 2] = 1.0 - f * (a * a + b * b)
    R[1.0 + c <= 1e-9] = np.diag([1.0, -1.0, -1.0])  # tangent along -z
    return out


def _path_values(points: FloatArray) -> FloatArray:
    """Positions and ``[x, y, z, w]`` quaternions ``(..., N, 7)`` of :func:`_poses_along`'s frames.

    The quaternion of the minimal rotation taking z to the unit tangent ``t`` is ``(z x t, 1 + z . t)``
    normalised, ``(-t_y, t_x, 0, 1 + t_z) / |.|`` (``w > 0``, scipy's canonical sign); a tangent along -z
    gets ``(1, 0, 0, 0)``, the half turn about x of ``_poses_along``. Elementwise, so polylines of one length
    done at once get the bits each gets alone.
    """
    points = np.asarray(points, dtype=float)
    out = np.zeros((*points.shape[:-1], 7))
    out[..., :3] = points
    out[..., 6] = 1.0
    if points.shape[-2] < 2:
        return out
    t = np.gradient(points, axis=-2)
    sq = t * t
    norm = np.sqrt(sq[..., 0] + sq[..., 1] + sq[..., 2])
    t = np.where(norm[..., None] > 1e-12, t / np.maximum(norm, 1e-12)[..., None], [0.0, 0.0, 1.0])
    a, b = t[..., 0], t[..., 1]
    w = 1.0 + t[..., 2]
    flipped = ~(w > 1e-9)
    q_norm = np.sqrt(b * b + a * a + w * w)
    q_norm[flipped] = 1.0
    out[..., 3] = -b / q_norm
    out[..., 4] = a / q_norm
    out[..., 5] = 0.0
    out[..., 6] = w / q_norm
    out[..., 3:][flipped] = [1.0, 0.0, 0.0, 0.0]
    return out


@published_type("geometry_msgs/msg/PoseWithCovarianceStamped")
def pose_with_covariance_stamped(
    stamp_ns: int,
    frame_id: str,
    T: FloatArray,
    covariance: FloatArray | None = None,
    factory: MessageFactory | None = None,
) -> Any:
    """geometry_msgs/PoseWithCovarianceStamped; covariance 6x6 in [x y z rx ry rz] order."""
    cov = np.zeros((6, 6)) if covariance is None else np.asarray(covariance, dtype=float)
    if cov.shape != (6, 6):
        raise MessageError(f"pose covariance must be 6x6, got shape {cov.shape}")
    f = _f(factory)
    return f.make(
        "geometry_msgs/msg/PoseWithCovarianceStamped",
        header=header(stamp_ns, frame_id, factory),
        pose=f.make("geometry_msgs/msg/PoseWithCovariance", pose=pose_msg(T, factory), covariance=cov.reshape(36)),
    )


def _color(rgba: Sequence[float], factory: MessageFactory | None) -> Any:
    return _f(factory).make("std_msgs/msg/ColorRGBA", r=rgba[0], g=rgba[1], b=rgba[2], a=rgba[3])


def _marker(
    factory: MessageFactory | None,
    hdr: Any,
    ns: str,
    marker_id: int,
    mtype: int,
    *,
    points: FloatArray | None = None,
    point_msgs: list[Any] | None = None,
    pose: FloatArray | None = None,
    scale: Sequence[float] | FloatArray = (1.0, 1.0, 1.0),
    rgba: Sequence[float] = (1.0, 1.0, 1.0, 1.0),
    text: str = "",
) -> Any:
    f = _f(factory)
    pts = point_msgs if point_msgs is not None else [] if points is None else _points(points, factory)
    return f.make(
        "visualization_msgs/msg/Marker",
        header=hdr,
        ns=ns,
        id=marker_id,
        type=mtype,
        action=0,
        pose=pose_msg(_EYE4, factory, _UNIT_QUAT) if pose is None else pose_msg(pose, factory),
        scale=_vec3(scale, factory),
        color=_color(rgba, factory),
        lifetime=f.make("builtin_interfaces/msg/Duration", sec=0, nanosec=0),
        frame_locked=False,
        points=pts,
        text=text,
    )


_EYE4 = np.eye(4)
_UNIT_QUAT = np.array([0.0, 0.0, 0.0, 1.0])  # what matrix_to_quat gives for the identity
MARKER_LINE_STRIP = 4
MARKER_SPHERE = 2
MARKER_SPHERE_LIST = 7
MARKER_TRIANGLE_LIST = 11


def _decimate(points: FloatArray, max_points: int) -> FloatArray:
    """At most ``max_points`` of a polyline, ends kept."""
    if len(points) <= max_points:
        return points
    idx = np.unique(np.linspace(0, len(points) - 1, max_points).round().astype(int))
    return points[idx]


@published_type("visualization_msgs/msg/MarkerArray")
def shape_markers(
    shape: ShapeEstimate,
    *,
    ns: str = "shape",
    frame_prefix: str = "",
    rgba: Sequence[float] = (0.1, 0.6, 0.9, 0.6),
    n_sigma: float = 2.0,
    factory: MessageFactory | None = None,
) -> Any:
    """MarkerArray of a shape: body tube, backbone line, frame spheres, tip covariance ellipsoid."""
    hdr = header(shape.stamp_ns, frame_prefix + shape.parent_frame, factory)
    vertices, corners = tube_mesh_indexed(_decimate(shape.backbone, 48), shape.radius, 8)
    vertex_msgs = _points(vertices, factory)
    body = [vertex_msgs[i] for i in corners.tolist()]  # six corners share each vertex: one message per vertex
    markers = [
        _marker(factory, hdr, f"{ns}/body", 0, MARKER_TRIANGLE_LIST, point_msgs=body, rgba=rgba),
        _marker(
            factory, hdr, f"{ns}/backbone", 0, MARKER_LINE_STRIP, points=shape.backbone,
            scale=(0.005, 0.0, 0.0), rgba=(1.0, 1.0, 1.0, 1.0),
        ),
        _marker(
            factory, hdr, f"{ns}/frames", 0, MARKER_SPHERE_LIST, points=shape.poses[:, :3, 3],
            scale=(0.02, 0.02, 0.02), rgba=(1.0, 0.5, 0.0, 1.0),
        ),
    ]  # fmt: skip
    if shape.position_covariance is not None:
        scale, R = covariance_ellipsoid(shape.position_covariance[-1], n_sigma)
        markers.append(
            _marker(
                factory, hdr, f"{ns}/tip_covariance", 0, MARKER_SPHERE,
                pose=make_transform(R, shape.poses[-1, :3, 3]), scale=scale, rgba=(1.0, 0.2, 0.2, 0.35),
            )
        )  # fmt: skip
    return _f(factory).make("visualization_msgs/msg/MarkerArray", markers=markers)


@published_type("diagnostic_msgs/msg/DiagnosticArray")
def diagnostic_array(stamp_ns: int, statuses: Iterable[DiagnosticStatus], factory: MessageFactory | None = None) -> Any:
    """diagnostic_msgs/DiagnosticArray."""
    f = _f(factory)
    return f.make(
        "diagnostic_msgs/msg/DiagnosticArray",
        header=header(stamp_ns, "", factory),
        status=[
            f.make(
                "diagnostic_msgs/msg/DiagnosticStatus",
                level=int(s.level),
                name=s.name,
                message=s.message,
                hardware_id=s.hardware_id,
                values=[f.make("diagnostic_msgs/msg/KeyValue", key=k, value=str(v)) for k, v in s.values.items()],
            )
            for s in statuses
        ],
    )


def diagnostics_from_msg(msg: Any) -> list[DiagnosticStatus]:
    """Core statuses from a diagnostic_msgs/DiagnosticArray."""
    return [
        DiagnosticStatus(
            name=str(s.name),
            level=DiagnosticLevel(s.level[0] if isinstance(s.level, bytes) else int(s.level)),
            message=str(s.message),
            hardware_id=str(s.hardware_id),
            values={str(kv.key): str(kv.value) for kv in s.values},
        )
        for s in msg.status
    ]
