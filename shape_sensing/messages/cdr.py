"""ROS 2 CDR bytes of an estimate's shape messages, written straight from arrays (bags only).

:class:`~shape_sensing.pipelines.vine_imu.ShapeMessages` builds message
objects (TF, path, tip pose, diagnostics, markers) and a bag writer then
serialises them field by field; for a bulk replay of thousands of estimates
that is most of the time. :class:`ShapeCdr` writes the same bytes directly:
the numbers come from the same functions the builders call, in the same way,
and are laid out as ROS 2 CDR (XCDR1, little endian, encapsulation ``00 01 00
00``): every primitive aligned to its size counted from the end of the
4-byte encapsulation header, strings as a ``uint32`` length including the
terminating NUL, then the UTF-8 bytes and the NUL; sequences as a ``uint32``
count, then the elements. Arrays of fixed-layout elements (path poses,
marker points) are laid out with numpy as one block.

The layout is written for the message definitions it was checked against
(:data:`LAYOUT_TYPES` as in the Jazzy definitions); :func:`supported` tells
whether a typestore's definitions are those, and callers fall back to the
message builders and ``serialize_cdr`` when they are not. Tests compare the
bytes with ``serialize_cdr`` of the built messages.
"""

from __future__ import annotations

import copy
import struct
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from shape_sensing.geometry import make_transform, matrix_to_quat
from shape_sensing.messages.common import UNOBSERVED_VARIANCE, positive_definite
from shape_sensing.messages.errors import MessageError
from shape_sensing.types import DiagnosticStatus, ShapeEstimate
from shape_sensing.viz import covariance_ellipsoid, tube_index, tube_mesh_indexed, tube_vertices

if TYPE_CHECKING:
    from shape_sensing.pipelines.common import DiagnosticsThrottle

__all__ = ["LAYOUT_TYPES", "ShapeCdr", "joint_state_cdr", "supported"]

NS_PER_S = 1_000_000_000
_ENCAPSULATION = b"\x00\x01\x00\x00"  # CDR_LE
_ZEROS = bytes(8)
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_TIME = struct.Struct("<iI")
_3I = struct.Struct("<iii")
_4F = struct.Struct("<4f")

#: Every type whose layout this module writes (directly or nested).
LAYOUT_TYPES = (
    "builtin_interfaces/msg/Time",
    "builtin_interfaces/msg/Duration",
    "std_msgs/msg/Header",
    "std_msgs/msg/ColorRGBA",
    "geometry_msgs/msg/Point",
    "geometry_msgs/msg/Quaternion",
    "geometry_msgs/msg/Vector3",
    "geometry_msgs/msg/Pose",
    "geometry_msgs/msg/PoseStamped",
    "geometry_msgs/msg/PoseWithCovariance",
    "geometry_msgs/msg/PoseWithCovarianceStamped",
    "geometry_msgs/msg/Transform",
    "geometry_msgs/msg/TransformStamped",
    "sensor_msgs/msg/JointState",
    "tf2_msgs/msg/TFMessage",
    "nav_msgs/msg/Path",
    "diagnostic_msgs/msg/KeyValue",
    "diagnostic_msgs/msg/DiagnosticStatus",
    "diagnostic_msgs/msg/DiagnosticArray",
    "sensor_msgs/msg/CompressedImage",
    "visualization_msgs/msg/UVCoordinate",
    "visualization_msgs/msg/MeshFile",
    "visualization_msgs/msg/Marker",
    "visualization_msgs/msg/MarkerArray",
)


def _signature(typestore: Any) -> tuple[Any, ...] | None:
    try:
        return tuple((t, tuple((name, repr(desc)) for name, desc in typestore.fielddefs[t][1])) for t in LAYOUT_TYPES)
    except KeyError:
        return None


_REFERENCE: list[tuple[Any, ...] | None] = []


def supported(typestore: Any) -> bool:
    """Whether ``typestore`` defines :data:`LAYOUT_TYPES` as the Jazzy definitions this module writes."""
    if not _REFERENCE:
        from shape_sensing.messages.factory import default_factory

        _REFERENCE.append(_signature(default_factory("jazzy").typestore))
    sig = _signature(typestore)
    return sig is not None and sig == _REFERENCE[0]


class _Cdr:
    """A CDR (little endian) byte buffer; alignment counts from the end of the encapsulation header."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray(_ENCAPSULATION)

    def align(self, n: int) -> None:
        pad = -(len(self.buf) - 4) % n
        if pad:
            self.buf += _ZEROS[:pad]

    def u32(self, v: int) -> None:
        self.align(4)
        self.buf += _U32.pack(v)

    def time(self, stamp_ns: int) -> None:
        stamp_ns = int(stamp_ns)
        if stamp_ns < 0:
            raise MessageError(f"stamp {stamp_ns} ns is negative; ROS 2 Time needs stamps >= 0")
        if stamp_ns // NS_PER_S > 2**31 - 1:
            raise MessageError(f"stamp {stamp_ns} ns is past what ROS 2 Time holds (int32 seconds)")
        self.align(4)
        self.buf += _TIME.pack(stamp_ns // NS_PER_S, stamp_ns % NS_PER_S)

    def string(self, s: str) -> None:
        b = s.encode()
        self.align(4)
        self.buf += _U32.pack(len(b) + 1)
        self.buf += b
        self.buf.append(0)

    def f64(self, values: np.ndarray) -> None:
        """float64 values (already float64, C order)."""
        self.align(8)
        self.buf += values.tobytes()

    def header(self, stamp_ns: int, frame_id: str) -> None:
        self.time(stamp_ns)
        self.string(frame_id)

    def rows(self, head: bytes, values: np.ndarray) -> None:
        """A sequence's elements, each ``head`` (4-aligned fields) then the float64 ``values`` row (8-aligned).

        Only the first element may start at 4 mod 8; from the second on every element starts 8-aligned
        (it follows float64s and starts with 4-aligned fields), so all of them have one layout: one block.
        """
        n = len(values)
        if not n:
            return
        self.align(4)
        self.buf += head
        self.f64(values[0])
        if n == 1:
            return
        pad = -len(head) % 8
        width = len(head) + pad
        block = np.zeros((n - 1, width + 8 * values.shape[1]), dtype=np.uint8)
        block[:, : len(head)] = np.frombuffer(head, np.uint8)
        block[:, width:] = np.ascontiguousarray(values[1:], dtype="<f8").view(np.uint8).reshape(n - 1, -1)
        self.buf += block.tobytes()

    def bytes(self) -> bytes:
        return bytes(self.buf)


def _header_bytes(stamp_ns: int, frame_id: str) -> bytes:
    """A Header's bytes when it starts 4-aligned (its fields need no more)."""
    c = _Cdr()
    c.header(stamp_ns, frame_id)
    return bytes(c.buf[4:])


class ShapeCdr:
    """CDR bytes of the messages :class:`~shape_sensing.pipelines.vine_imu.ShapeMessages` builds.

    Args:
        marker_rate: body marker rate, Hz (markers by estimate stamps, as ``ShapeMessages``).
        diagnostics: status throttle, as ``ShapeMessages``'s (default: 1 Hz, the core's names).
    """

    def __init__(
        self, marker_rate: float = 5.0, diagnostics: DiagnosticsThrottle | None = None, *, views: bool = False
    ) -> None:
        from shape_sensing.pipelines.common import DiagnosticsThrottle, RateThrottle

        self.markers = RateThrottle(marker_rate)
        self.diagnostics = diagnostics or DiagnosticsThrottle()
        # build_many: the TF, path and tip messages made for a block as views of the block's bytes (consumed
        # before the next block is made), not copied out as bytes each
        self.views = views

    def build(
        self, shape: ShapeEstimate, _numbers: _Numbers | None = None
    ) -> list[tuple[str, str, bytes | memoryview]]:
        """``(topic, type, CDR bytes)`` of one estimate, the topics and order of ``ShapeMessages.build``."""
        stamp = shape.stamp_ns
        frame = shape.parent_frame
        nb = _numbers or _single_numbers(shape) or _Numbers(None, None, None, None)
        tip = nb.tip
        if tip is None:  # the tip's covariance made here only where the numbers did not carry it (its eigh twice)
            cov6 = np.zeros((6, 6))
            cov6[3:, 3:] = np.eye(3) * UNOBSERVED_VARIANCE  # orientation not estimated, as ShapeMessages marks it
            if shape.position_covariance is not None:
                cov6[:3, :3] = positive_definite(shape.position_covariance[-1])
            tip = tip_cdr(stamp, frame, shape.tip_pose, cov6)
        out = [
            ("/tf", "tf2_msgs/msg/TFMessage", nb.tf if nb.tf is not None else tf_cdr(shape)),
            ("shape/path", "nav_msgs/msg/Path",
             nb.path if nb.path is not None else path_cdr(stamp, frame, shape.backbone)),
            ("shape/tip", "geometry_msgs/msg/PoseWithCovarianceStamped", tip),
        ]  # fmt: skip
        statuses = self.diagnostics.add(stamp, shape.diagnostics)
        if statuses is not None:
            out.append(("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray", diagnostics_cdr(stamp, statuses)))
        if self.markers.ready(stamp):
            marker = markers_cdr(shape, body=nb.body, tip_covariance=nb.tip_covariance)
            out.append(("shape/markers", "visualization_msgs/msg/MarkerArray", marker))
        return out

    def build_many(self, shapes: list[ShapeEstimate]) -> Iterator[list[tuple[str, str, bytes | memoryview]]]:
        """:meth:`build` of every estimate, in order, with the numbers of estimates of one size made at once.

        Quaternions and path frames are computed for a block of estimates with the same number of frames and
        backbone points by the same elementwise operations as for one (each row's numbers do not depend on the
        others), so the bytes are those of :meth:`build`.
        """
        for start in range(0, len(shapes), _BLOCK):
            block = shapes[start : start + _BLOCK]
            numbers = _block_numbers(block, self.views)
            # which of them get markers (a copy of the throttle, so the real one decides the same in build)
            probe = copy.copy(self.markers)
            marked = [k for k, s in enumerate(block) if probe.ready(s.stamp_ns)]
            for k, body in _block_bodies(block, marked).items():
                numbers[k] = numbers[k]._replace(body=body)
            for k, ellipsoid in _block_ellipsoids(block, marked).items():
                numbers[k] = numbers[k]._replace(tip_covariance=ellipsoid)
            for shape, nb in zip(block, numbers, strict=True):
                yield self.build(shape, nb)


class _Numbers(NamedTuple):
    """Bytes of one estimate's TF, path and tip messages made for a block (``None``: make them one by one)."""

    tf: bytes | memoryview | None
    path: bytes | memoryview | None
    tip: bytes | memoryview | None
    body: np.ndarray | None = None  # the body marker's tube vertices
    tip_covariance: tuple[np.ndarray, np.ndarray] | None = None  # its ellipsoid's scale and 7 pose values


def _block_bodies(shapes: list[ShapeEstimate], which: list[int]) -> dict[int, np.ndarray]:
    """Tube vertices of the body markers of ``shapes[k]`` for ``k`` in ``which``, polylines of one length and
    radius at once (:func:`~shape_sensing.viz.tube_vertices`: each with the bits it would get alone)."""
    from shape_sensing.messages.common import _decimate

    groups: dict[tuple[int, float], list[int]] = {}
    for k in which:
        bb = np.asarray(shapes[k].backbone)
        if bb.ndim == 2 and bb.shape[1] == 3 and len(bb) >= 2:
            groups.setdefault((len(bb), float(shapes[k].radius)), []).append(k)
    out = {}
    for (_, radius), members in groups.items():
        points = np.stack([_decimate(np.asarray(shapes[k].backbone, dtype=float), 48) for k in members])
        for k, v in zip(members, tube_vertices(points, radius, 8), strict=True):
            out[k] = v
    return out


def _block_ellipsoids(
    shapes: list[ShapeEstimate], which: list[int], n_sigma: float = 2.0
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Scale and pose values of the tip covariance markers of ``shapes[k]`` for ``k`` in ``which``: the
    ellipsoids one by one (as :func:`markers_cdr`), their quaternions in one :func:`matrix_to_quat` (elementwise:
    the bits of one alone)."""
    members = [k for k in which if shapes[k].position_covariance is not None]
    if not members:
        return {}
    found = [covariance_ellipsoid(shapes[k].position_covariance[-1], n_sigma) for k in members]  # type: ignore[index]
    quats = matrix_to_quat(np.stack([R for _, R in found]))
    out = {}
    for k, (scale, _), q in zip(members, found, quats, strict=True):
        p = shapes[k].poses[-1, :3, 3]
        values = np.array([float(p[0]), float(p[1]), float(p[2]), float(q[0]), float(q[1]), float(q[2]), float(q[3])])
        out[k] = (scale, values)
    return out


_BLOCK = 512  # estimates whose messages are made at once


def _block_numbers(shapes: list[ShapeEstimate], views: bool = False) -> list[_Numbers]:
    """TF, path and tip bytes of the estimates of a block that share one layout (sizes and frame ids).

    For each layout the message is written once with zero numbers (:func:`_layouts`), recording where each
    stamp and each float64 row goes; every estimate's copy then gets its stamps and rows with numpy.
    ``views``: each message as a memoryview of its row of the block (no copy), else as bytes.
    """
    from shape_sensing.messages.common import _path_values

    out: list[_Numbers] = [_Numbers(None, None, None)] * len(shapes)
    groups: dict[tuple[Any, ...], list[int]] = {}
    for k, s in enumerate(shapes):
        bb = np.asarray(s.backbone)
        stamp = int(s.stamp_ns)
        if (
            len(s.frame_ids) == len(s.poses)
            and bb.ndim == 2
            and bb.shape[1] == 3
            and len(bb) >= 2
            and stamp >= 0
            and stamp // NS_PER_S <= 2**31 - 1
        ):
            groups.setdefault((s.parent_frame, tuple(s.frame_ids), len(bb)), []).append(k)
    for (parent, children, p), members in groups.items():
        if len(members) < 2:
            continue
        g, n = len(members), len(children)
        layouts = _layouts(parent, children, p)
        poses = np.stack([np.asarray(shapes[k].poses, dtype=float) for k in members])  # (G, n, 4, 4)
        tf = np.empty((g, n, 7))
        tf[:, :, :3] = poses[:, :, :3, 3]
        tf[:, :, 3:] = matrix_to_quat(poses.reshape(-1, 4, 4)[:, :3, :3]).reshape(g, n, 4)
        path = _path_values(np.stack([np.asarray(shapes[k].backbone, dtype=float) for k in members]))
        tip_T = poses[:, -1]
        tip = np.zeros((g, 7 + 36))
        tip[:, :3] = tip_T[:, :3, 3]
        tip[:, 3:7] = matrix_to_quat(tip_T[:, :3, :3])
        cov6 = np.zeros((g, 6, 6))
        cov6[:, 3:, 3:] = np.eye(3) * UNOBSERVED_VARIANCE
        for j, k in enumerate(members):
            pc = shapes[k].position_covariance
            if pc is not None:
                cov6[j, :3, :3] = positive_definite(pc[-1])
        tip[:, 7:] = cov6.reshape(g, 36)
        stamps = np.array([int(shapes[k].stamp_ns) for k in members], dtype=np.int64)
        time = np.empty((g, 2), dtype="<u4")
        time[:, 0] = (stamps // NS_PER_S).astype(np.uint32)  # int32 seconds >= 0: same bytes as uint32
        time[:, 1] = (stamps % NS_PER_S).astype(np.uint32)
        time_bytes = time.view(np.uint8)  # (G, 8)
        made = []
        for (template, stamp_at, value_at), values in zip(layouts, (tf, path, tip[:, None, :]), strict=True):
            block = np.tile(np.frombuffer(template, np.uint8), (g, 1))
            _scatter(block, stamp_at, np.broadcast_to(time_bytes[:, None, :], (g, len(stamp_at), 8)))
            _scatter(block, value_at, np.ascontiguousarray(values, dtype="<f8").view(np.uint8))
            made.append(block)
        if views:
            rows = [[memoryview(row) for row in block] for block in made]
        else:
            rows = [[row.tobytes() for row in block] for block in made]
        for j, k in enumerate(members):
            out[k] = _Numbers(rows[0][j], rows[1][j], rows[2][j])
    return out


def _single_numbers(shape: ShapeEstimate) -> _Numbers | None:
    """:func:`_block_numbers` of one estimate (a live node's): its layout's templates (:func:`_layouts`, cached per
    layout) copied and filled by two index writes each, the numbers computed as the block computes them (so the
    same bits); ``None`` where the block path does not apply (it then goes field by field)."""
    if not single_layout_fits(shape):
        return None
    cov6 = np.zeros((6, 6))
    cov6[3:, 3:] = np.eye(3) * UNOBSERVED_VARIANCE
    if shape.position_covariance is not None:
        cov6[:3, :3] = positive_definite(shape.position_covariance[-1])
    tf, path, tip = single_shape_cdr(shape, cov6)
    return _Numbers(tf, path, tip)


def single_layout_fits(shape: ShapeEstimate) -> bool:
    """Whether :func:`single_shape_cdr` applies: frames and poses agree, a backbone of 3-D points (at least two),
    a stamp ROS 2 Time holds."""
    bb = np.asarray(shape.backbone)
    stamp = int(shape.stamp_ns)
    n = len(shape.frame_ids)
    return bool(n == len(shape.poses) and n and bb.ndim == 2 and bb.shape[1] == 3 and len(bb) >= 2
                and stamp >= 0 and stamp // NS_PER_S <= 2**31 - 1)  # fmt: skip


def single_shape_cdr(shape: ShapeEstimate, tip_covariance: np.ndarray, frame_prefix: str = "") -> list[bytes]:
    """The TF (:func:`tf_cdr`), backbone path (:func:`path_cdr`) and tip (:func:`tip_cdr`, with
    ``tip_covariance``) messages of one estimate: its layout's templates (cached per layout) copied and filled by
    two index writes each, the same bytes. For an estimate :func:`single_layout_fits`."""
    from shape_sensing.messages.common import _path_values

    stamp = int(shape.stamp_ns)
    bb = np.asarray(shape.backbone, dtype=float)
    parent = frame_prefix + shape.parent_frame
    children = tuple(frame_prefix + f for f in shape.frame_ids) if frame_prefix else tuple(shape.frame_ids)
    layouts = _single_layouts(parent, children, len(bb))
    poses = np.asarray(shape.poses, dtype=float)
    tf = np.empty((len(children), 7))
    tf[:, :3] = poses[:, :3, 3]
    tf[:, 3:] = matrix_to_quat(poses[:, :3, :3])
    tip = np.empty(7 + 36)
    tip[:3] = poses[-1, :3, 3]
    tip[3:7] = matrix_to_quat(poses[-1, :3, :3])
    tip[7:] = np.asarray(tip_covariance, dtype=float).reshape(36)
    time_bytes = np.array([stamp // NS_PER_S, stamp % NS_PER_S], dtype="<u4").view(np.uint8)
    made = []
    for (template, stamp_idx, value_idx), values in zip(layouts, (tf, _path_values(bb), tip[None, :]), strict=True):
        buf = bytearray(template)
        u8 = np.frombuffer(buf, np.uint8)
        u8[stamp_idx] = np.tile(time_bytes, stamp_idx.size // 8)
        u8[value_idx] = np.ascontiguousarray(values, dtype="<f8").view(np.uint8).reshape(-1)
        made.append(bytes(buf))
    return made


_SINGLE: dict[tuple[str, tuple[str, ...], int], list[tuple[bytes, np.ndarray, np.ndarray]]] = {}


def _single_layouts(parent: str, children: tuple[str, ...], p: int) -> list[tuple[bytes, np.ndarray, np.ndarray]]:
    """:func:`_layouts` with every stamp's and every row's byte indices spelt out (for one estimate's writes)."""
    key = (parent, children, p)
    found = _SINGLE.get(key)
    if found is None:
        found = []
        rows = (7, 7, 7 + 36)  # float64 per row: TF's and the path's poses, the tip's pose and covariance
        for (template, stamp_at, value_at), row in zip(_layouts(parent, children, p), rows, strict=True):
            width = 8 * row
            stamp_idx = (np.asarray(stamp_at, dtype=np.int64)[:, None] + np.arange(8)).reshape(-1)
            value_idx = (np.asarray(value_at, dtype=np.int64)[:, None] + np.arange(width)).reshape(-1)
            found.append((template, stamp_idx, value_idx))
        if len(_SINGLE) > 256:
            _SINGLE.clear()
        _SINGLE[key] = found
    return found


def _scatter(block: np.ndarray, at: np.ndarray, items: np.ndarray) -> None:
    """``block[:, at[i] : at[i] + w] = items[:, i]`` for every ``i`` (``items``: ``(G, n, w)`` bytes).

    The offsets come in runs of one stride (a message's repeated elements); each run is one strided copy.
    """
    n, w = items.shape[1], items.shape[2]
    if not n:
        return
    at = np.asarray(at, dtype=np.int64)
    cut = np.flatnonzero(np.diff(np.diff(at)) != 0) + 1 if n > 2 else np.zeros(0, dtype=np.int64)
    starts = [0, *(cut + 1).tolist()] if n > 2 else [0]
    for k, a in enumerate(starts):
        b = starts[k + 1] if k + 1 < len(starts) else n
        stride = int(at[a + 1] - at[a]) if b - a > 1 else w
        if stride < w:  # overlapping items (no such layout): one at a time
            for i in range(a, b):
                block[:, at[i] : at[i] + w] = items[:, i]
            continue
        view = np.lib.stride_tricks.as_strided(
            block[:, int(at[a]) :], shape=(len(block), b - a, w), strides=(block.strides[0], stride, 1)
        )
        view[...] = items[:, a:b]


_LAYOUTS: dict[tuple[str, tuple[str, ...], int], list[tuple[bytes, np.ndarray, np.ndarray]]] = {}


def _layouts(parent: str, children: tuple[str, ...], p: int) -> list[tuple[bytes, np.ndarray, np.ndarray]]:
    """``(template, stamp offsets, float64-row offsets)`` of the TF, path (``p`` poses) and tip messages."""
    key = (parent, children, p)
    found = _LAYOUTS.get(key)
    if found is not None:
        return found
    head = _header_bytes(0, parent)
    tf, tf_stamps, tf_rows = _Cdr(), [], []
    tf.u32(len(children))
    for child in children:  # as tf_cdr
        tf.align(4)
        tf_stamps.append(len(tf.buf))
        tf.buf += head
        tf.string(child)
        tf.align(8)
        tf_rows.append(len(tf.buf))
        tf.buf += bytes(56)
    path = _Cdr()
    path_stamps, path_rows = [len(path.buf)], []
    path.header(0, parent)
    path.u32(p)
    for _ in range(p):  # as rows()
        path.align(4)
        path_stamps.append(len(path.buf))
        path.buf += head
        path.align(8)
        path_rows.append(len(path.buf))
        path.buf += bytes(56)
    tip = _Cdr()
    tip.header(0, parent)
    tip.align(8)
    tip_row = len(tip.buf)
    tip.buf += bytes(8 * 43)
    found = [
        (tf.bytes(), np.array(tf_stamps), np.array(tf_rows)),
        (path.bytes(), np.array(path_stamps), np.array(path_rows)),
        (tip.bytes(), np.array([4]), np.array([tip_row])),
    ]
    if len(_LAYOUTS) > 256:
        _LAYOUTS.clear()
    _LAYOUTS[key] = found
    return found


def tf_cdr(shape: ShapeEstimate, frame_prefix: str = "", values: np.ndarray | None = None) -> bytes:
    """tf2_msgs/TFMessage of :func:`~shape_sensing.messages.common.shape_transforms` (as ``tf_message``)."""
    c = _Cdr()
    n = len(shape.frame_ids)
    c.u32(n)
    if not n:
        return c.bytes()
    if values is None:
        mats = np.stack(list(shape.poses[:n])).astype(float, copy=False)
        values = np.empty((n, 7))
        values[:, :3] = mats[:, :3, 3]
        values[:, 3:] = matrix_to_quat(mats[:, :3, :3])
    head = _header_bytes(shape.stamp_ns, frame_prefix + shape.parent_frame)
    for child, row in zip(shape.frame_ids, values, strict=True):
        c.align(4)
        c.buf += head
        c.string(frame_prefix + child)
        c.f64(row)
    return c.bytes()


def path_cdr(stamp_ns: int, frame_id: str, poses: np.ndarray, values: np.ndarray | None = None) -> bytes:
    """nav_msgs/Path of :func:`~shape_sensing.messages.common.path_msg` (same arguments)."""
    from shape_sensing.messages.common import _path_values

    if values is None:
        poses = np.asarray(poses, dtype=float)
        if poses.ndim == 2 and poses.shape[1] == 3:
            values = _path_values(poses)
        else:
            values = np.empty((len(poses), 7))
            values[:, :3] = poses[:, :3, 3]
            values[:, 3:] = matrix_to_quat(poses[:, :3, :3]) if len(poses) else np.zeros((0, 4))
    c = _Cdr()
    c.header(stamp_ns, frame_id)
    c.u32(len(values))
    c.rows(_header_bytes(stamp_ns, frame_id), values)
    return c.bytes()


def tip_cdr(
    stamp_ns: int, frame_id: str, T: np.ndarray, covariance: np.ndarray, values: np.ndarray | None = None
) -> bytes:
    """geometry_msgs/PoseWithCovarianceStamped of ``pose_with_covariance_stamped`` (6x6 covariance)."""
    cov = np.asarray(covariance, dtype=float)
    if cov.shape != (6, 6):
        raise MessageError(f"pose covariance must be 6x6, got shape {cov.shape}")
    c = _Cdr()
    c.header(stamp_ns, frame_id)
    c.f64(_pose_values(np.asarray(T, dtype=float)) if values is None else np.ascontiguousarray(values))
    c.f64(np.ascontiguousarray(cov.reshape(36), dtype=np.float64))
    return c.bytes()


def _pose_values(T: np.ndarray, quat: np.ndarray | None = None) -> np.ndarray:
    """The 7 float64 of ``pose_msg(T, quat=quat)``: position, then ``[x, y, z, w]``."""
    q = matrix_to_quat(T[:3, :3]) if quat is None else quat
    return np.array(
        [float(T[0, 3]), float(T[1, 3]), float(T[2, 3]), float(q[0]), float(q[1]), float(q[2]), float(q[3])]
    )


_JOINT_HEADS: dict[tuple[str, tuple[str, ...]], bytes] = {}


def joint_state_cdr(stamp_ns: int, frame_id: str, names: Iterable[str], positions: np.ndarray) -> bytes:
    """sensor_msgs/JointState of ``hyper_redundant.joint_state_msg`` (positions only; velocity, effort empty)."""
    names = tuple(names)
    pos = np.ascontiguousarray(np.asarray(positions, dtype=float).reshape(-1), dtype="<f8")
    if len(names) != len(pos):
        raise MessageError(f"JointState: {len(names)} names but {len(pos)} positions")
    c = _Cdr()
    c.time(stamp_ns)
    head = _JOINT_HEADS.get((frame_id, names))
    if head is None:  # the frame and the names, the same every message of a node: written once
        h = _Cdr()
        h.time(0)
        h.string(frame_id)
        h.u32(len(names))
        for name in names:
            h.string(name)
        if len(_JOINT_HEADS) > 64:
            _JOINT_HEADS.clear()
        head = _JOINT_HEADS[(frame_id, names)] = bytes(h.buf[len(c.buf) :])
    c.buf += head
    c.u32(len(pos))
    if len(pos):
        c.f64(pos)
    c.u32(0)  # velocity
    c.u32(0)  # effort
    return c.bytes()


def diagnostics_cdr(stamp_ns: int, statuses: Iterable[DiagnosticStatus]) -> bytes:
    """diagnostic_msgs/DiagnosticArray of ``diagnostic_array``."""
    statuses = list(statuses)
    c = _Cdr()
    c.header(stamp_ns, "")
    c.u32(len(statuses))
    for s in statuses:
        c.buf.append(int(s.level) & 0xFF)  # byte: no alignment
        c.string(s.name)
        c.string(s.message)
        c.string(s.hardware_id)
        c.u32(len(s.values))
        for k, v in s.values.items():
            c.string(k)
            c.string(str(v))
    return c.bytes()


_EYE4 = np.eye(4)
_UNIT_QUAT = np.array([0.0, 0.0, 0.0, 1.0])
_IDENTITY_POSE = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.0]).tobytes()  # _pose_values(_EYE4, _UNIT_QUAT)
_TUBE_INDEX: dict[int, np.ndarray] = {}  # tube_index(n, 8) by n (read only)


def markers_cdr(
    shape: ShapeEstimate,
    *,
    ns: str = "shape",
    frame_prefix: str = "",
    rgba: tuple[float, float, float, float] = (0.1, 0.6, 0.9, 0.6),
    n_sigma: float = 2.0,
    body: np.ndarray | None = None,
    tip_covariance: tuple[np.ndarray, np.ndarray] | None = None,
) -> bytes:
    """visualization_msgs/MarkerArray of :func:`~shape_sensing.messages.common.shape_markers` (same defaults).

    ``body``: the tube's vertices when already made (:func:`~shape_sensing.viz.tube_vertices`);
    ``tip_covariance``: the covariance marker's scale and pose values when already made (``_block_ellipsoids``).
    """
    from shape_sensing.messages.common import (
        MARKER_LINE_STRIP,
        MARKER_SPHERE,
        MARKER_SPHERE_LIST,
        MARKER_TRIANGLE_LIST,
        _decimate,
    )

    head = _header_bytes(shape.stamp_ns, frame_prefix + shape.parent_frame)
    if body is None:
        vertices, corners = tube_mesh_indexed(_decimate(shape.backbone, 48), shape.radius, 8)
    else:
        n_rings = len(body) // 8
        if n_rings not in _TUBE_INDEX:
            _TUBE_INDEX[n_rings] = tube_index(n_rings, 8)
        vertices, corners = body, _TUBE_INDEX[n_rings]
    body_points = np.asarray(vertices, dtype=float).reshape(-1, 3)[corners]
    markers: list[tuple[Any, ...]] = [
        (f"{ns}/body", MARKER_TRIANGLE_LIST, None, (1.0, 1.0, 1.0), rgba, body_points),
        (f"{ns}/backbone", MARKER_LINE_STRIP, None, (0.005, 0.0, 0.0), (1.0, 1.0, 1.0, 1.0), shape.backbone),
        (f"{ns}/frames", MARKER_SPHERE_LIST, None, (0.02, 0.02, 0.02), (1.0, 0.5, 0.0, 1.0), shape.poses[:, :3, 3]),
    ]
    if shape.position_covariance is not None:
        if tip_covariance is None:
            scale, R = covariance_ellipsoid(shape.position_covariance[-1], n_sigma)
            pose_values = _pose_values(make_transform(R, shape.poses[-1, :3, 3]))
        else:
            scale, pose_values = tip_covariance
        markers.append((f"{ns}/tip_covariance", MARKER_SPHERE, pose_values, scale, (1.0, 0.2, 0.2, 0.35), None))
    c = _Cdr()
    c.u32(len(markers))
    for name, mtype, pose, scale, color, points in markers:
        c.align(4)
        c.buf += head
        c.string(name)
        c.align(4)
        c.buf += _3I.pack(0, mtype, 0)  # id, type, action
        if pose is None:
            c.align(8)
            c.buf += _IDENTITY_POSE
        else:
            c.f64(pose)
        c.f64(np.array([float(scale[0]), float(scale[1]), float(scale[2])]))
        c.buf += _4F.pack(*color)  # ColorRGBA float32, 4-aligned after float64s
        c.buf += _TIME.pack(0, 0)  # lifetime
        c.buf.append(0)  # frame_locked
        pts = np.zeros((0, 3)) if points is None else np.asarray(points, dtype=float).reshape(-1, 3)
        c.u32(len(pts))
        if len(pts):
            c.f64(np.ascontiguousarray(pts))  # Points: three float64 each, no padding between them
        c.buf += _MARKER_TAIL  # 4-aligned here (after a count or float64s)
    return c.bytes()


def _marker_tail() -> bytes:
    """A Marker's fields after its points, all empty, from a 4-aligned offset (none needs more alignment)."""
    c = _Cdr()
    c.u32(0)  # colors
    c.string("")  # texture_resource
    c.header(0, "")  # texture: CompressedImage header, format, data
    c.string("")
    c.u32(0)
    c.u32(0)  # uv_coordinates
    c.string("")  # text
    c.string("")  # mesh_resource
    c.string("")  # mesh_file: filename, data
    c.u32(0)
    c.buf.append(0)  # mesh_use_embedded_materials
    return bytes(c.buf[4:])


_MARKER_TAIL = _marker_tail()
