"""``shape_sensing/ImuArray``: one sweep of several IMUs in one message (every field of sensor_msgs/Imu per sensor).

A driver reading many IMUs in one sweep (the BNO055 chain, the WT901 bus, the simulators) publishes the
sweep with :func:`imu_array_msg`; :func:`imu_sweep_from_msg` reads it back into arrays without a Python
loop over sensors or fields, and :func:`imu_samples_from_sweep` splits it into per-sensor
:class:`~shape_sensing.types.ImuSample` (what the per-sensor sensor_msgs/Imu topics carry). A round trip
through sensor_msgs/Imu and through ImuArray gives the same samples.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shape_sensing.geometry import FloatArray
from shape_sensing.messages.common import UNIT_QUATERNION_TOLERANCE, header, stamp_from_msg
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import MessageFactory, default_factory, published_type
from shape_sensing.types import ImuSample

__all__ = [
    "IMU_ARRAY_TYPE",
    "CdrEncodingError",
    "ImuSweep",
    "ImuSweepFrames",
    "imu_array_msg",
    "imu_samples_from_sweep",
    "imu_sweep_from_cdr",
    "imu_sweep_from_msg",
]

IMU_ARRAY_TYPE = "shape_sensing/msg/ImuArray"
NS_PER_S = 1_000_000_000
_ZERO9 = np.zeros(9)
_ABSENT9 = np.array([-1.0, 0, 0, 0, 0, 0, 0, 0, 0])


@dataclass
class ImuSweep:
    """The readings of one ImuArray, one row per sensor (sensor_msgs/Imu conventions)."""

    stamp_ns: int  # the sweep's stamp (header)
    frame_id: str  # the sweep's frame (header)
    frame_ids: list[str]
    stamps_ns: NDArray[np.int64]  # (n,)
    orientation: FloatArray  # (n, 4) x y z w as sent (not normalised)
    orientation_covariance: FloatArray  # (n, 9); [:, 0] == -1: no orientation
    angular_velocity: FloatArray  # (n, 3)
    angular_velocity_covariance: FloatArray  # (n, 9)
    linear_acceleration: FloatArray  # (n, 3)
    linear_acceleration_covariance: FloatArray  # (n, 9)

    @property
    def n(self) -> int:
        return int(self.stamps_ns.size)

    def unit_orientations(self) -> tuple[FloatArray, NDArray[np.bool_]]:
        """``(quats (n, 4) normalised, usable (n,))``: usable where provided, finite and of norm within
        :data:`~shape_sensing.messages.common.UNIT_QUATERNION_TOLERANCE` of 1 (a norm further off is a corrupted
        reading, refused as :func:`~shape_sensing.messages.common.imu_orientation_from_msg` refuses it).

        The same normalisation as :func:`~shape_sensing.messages.common.imu_orientation_from_msg` (``q / sqrt(q.q)``).
        """
        q = self.orientation
        with np.errstate(invalid="ignore", over="ignore"):
            norm = np.sqrt(np.einsum("ij,ij->i", q, q))
        provided = self.orientation_covariance[:, 0] != -1.0
        usable = provided & (np.abs(norm - 1.0) <= UNIT_QUATERNION_TOLERANCE)  # False for a NaN or infinite norm
        safe = np.where(usable, norm, 1.0)
        return q / safe[:, None], usable


    def provided_orientations(self) -> tuple[FloatArray, NDArray[np.bool_]]:
        """``(quats (n, 4), provided (n,))``: the orientations normalised (:meth:`unit_orientations`), NaN rows where
        a sensor sent none (covariance ``[0] == -1``).

        Raises:
            MessageError: a provided orientation is not a finite quaternion of norm near 1 (naming the sensor): the
                sweep is corrupted, as :func:`imu_samples_from_sweep` refuses it.
        """
        q = self.orientation
        provided = self.orientation_covariance[:, 0] != -1.0
        with np.errstate(invalid="ignore", over="ignore"):
            norm = np.sqrt(np.einsum("ij,ij->i", q, q))  # the operations of unit_orientations, fewer steps
            usable = np.abs(norm - 1.0) <= UNIT_QUATERNION_TOLERANCE  # False for a NaN or infinite norm
            if not usable[provided].all():
                i = int(np.flatnonzero(provided & ~usable)[0])
                raise MessageError(
                    f"shape_sensing/ImuArray sensor {i} ({self.frame_ids[i]!r}) has orientation "
                    f"{self.orientation[i].tolist()}; expected a unit quaternion"
                )
            return q / np.where(provided, norm, np.nan)[:, None], provided


def _rows(value: Any, n: int, width: int, name: str) -> FloatArray:
    a = np.asarray(value, dtype=np.float64)
    if a.size != n * width:
        raise MessageError(f"shape_sensing/ImuArray: {name} has {a.size} values for {n} sensors (expected {n * width})")
    return a.reshape(n, width)


def _cov_rows(covs: Sequence[FloatArray | None], fill: FloatArray) -> FloatArray:
    return np.array([fill if c is None else np.asarray(c, dtype=float).reshape(9) for c in covs], dtype=float).reshape(
        -1, 9
    )


@published_type(IMU_ARRAY_TYPE)
def imu_array_msg(
    stamp_ns: int, frame_id: str, samples: Sequence[ImuSample], factory: MessageFactory | None = None
) -> Any:
    """shape_sensing/ImuArray of ``samples`` (sensor i = ``samples[i]``), stamped ``stamp_ns`` in ``frame_id``.

    Per sensor the fields of :func:`~shape_sensing.messages.common.imu_to_msg`: an absent orientation is
    sent as (0, 0, 0, 1) with covariance element 0 = -1; an unknown covariance as zeros.
    """
    f = factory if factory is not None else default_factory()
    stamps = np.array([s.stamp_ns for s in samples], dtype=np.int64)
    q = np.array(
        [(0.0, 0.0, 0.0, 1.0) if s.orientation is None else s.orientation for s in samples], dtype=float
    ).reshape(-1, 4)
    ocov = np.array(
        [_ABSENT9 if s.orientation is None else _cov_rows([s.orientation_covariance], _ZERO9)[0] for s in samples],
        dtype=float,
    ).reshape(-1, 9)
    return f.make(
        IMU_ARRAY_TYPE,
        header=header(stamp_ns, frame_id, f),
        frame_id=[s.frame_id for s in samples],
        stamp_sec=(stamps // NS_PER_S).astype(np.int32),
        stamp_nanosec=(stamps % NS_PER_S).astype(np.uint32),
        orientation=q.reshape(-1),
        orientation_covariance=ocov.reshape(-1),
        angular_velocity=np.array([s.angular_velocity for s in samples], dtype=float).reshape(-1),
        angular_velocity_covariance=_cov_rows([s.angular_velocity_covariance for s in samples], _ZERO9).reshape(-1),
        linear_acceleration=np.array([s.linear_acceleration for s in samples], dtype=float).reshape(-1),
        linear_acceleration_covariance=_cov_rows([s.linear_acceleration_covariance for s in samples], _ZERO9).reshape(
            -1
        ),
    )


def imu_sweep_from_msg(msg: Any) -> ImuSweep:
    """The readings of a shape_sensing/ImuArray (either backend), as arrays.

    Raises:
        MessageError: the arrays do not hold the same number of sensors.
    """
    sec = np.asarray(msg.stamp_sec, dtype=np.int64)
    nsec = np.asarray(msg.stamp_nanosec, dtype=np.int64)
    n = int(sec.size)
    frame_ids = [str(x) for x in msg.frame_id]
    if nsec.size != n or len(frame_ids) != n:
        raise MessageError(
            f"shape_sensing/ImuArray: {n} stamp_sec, {nsec.size} stamp_nanosec and {len(frame_ids)} frame ids"
        )
    return ImuSweep(
        stamp_ns=stamp_from_msg(msg),
        frame_id=str(msg.header.frame_id),
        frame_ids=frame_ids,
        stamps_ns=sec * NS_PER_S + nsec,
        orientation=_rows(msg.orientation, n, 4, "orientation"),
        orientation_covariance=_rows(msg.orientation_covariance, n, 9, "orientation_covariance"),
        angular_velocity=_rows(msg.angular_velocity, n, 3, "angular_velocity"),
        angular_velocity_covariance=_rows(msg.angular_velocity_covariance, n, 9, "angular_velocity_covariance"),
        linear_acceleration=_rows(msg.linear_acceleration, n, 3, "linear_acceleration"),
        linear_acceleration_covariance=_rows(
            msg.linear_acceleration_covariance, n, 9, "linear_acceleration_covariance"
        ),
    )


_U32 = struct.Struct("<I")
_STAMP = struct.Struct("<iI")
_FLOAT_FIELDS = (
    ("orientation", 4),
    ("orientation_covariance", 9),
    ("angular_velocity", 3),
    ("angular_velocity_covariance", 9),
    ("linear_acceleration", 3),
    ("linear_acceleration_covariance", 9),
)


class CdrEncodingError(MessageError):
    """Bytes in another encoding than little-endian plain CDR (XCDR1): a decoder of that encoding may read them."""


@dataclass
class ImuSweepFrames:
    """The per-sensor frame ids of a stream's last sweep as :func:`imu_sweep_from_cdr` read them, and their bytes."""

    start: int = -1
    block: bytes = b""
    ids: tuple[str, ...] = ()


class _CdrReader:
    """Little-endian plain CDR (XCDR1, as rmw's serialise ROS 2 messages), alignment counted after the 4-byte
    encapsulation header; every read checked against the buffer's end."""

    def __init__(self, buf: bytearray) -> None:
        if len(buf) < 4 or buf[0:2] != b"\x00\x01":
            raise CdrEncodingError(
                "shape_sensing/ImuArray bytes are not little-endian plain CDR (encapsulation 0x0001)"
            )
        self.buf = buf
        self.pos = 4

    def _take(self, size: int, align: int, what: str) -> int:
        pos = 4 + -(-(self.pos - 4) // align) * align
        if pos + size > len(self.buf):
            raise MessageError(f"shape_sensing/ImuArray bytes end inside {what} ({len(self.buf)} bytes)")
        self.pos = pos + size
        return pos

    def u32(self, what: str) -> int:
        return int(_U32.unpack_from(self.buf, self._take(4, 4, what))[0])

    def string(self, what: str) -> str:
        n = self.u32(what)
        if n == 0:
            raise MessageError(f"shape_sensing/ImuArray: {what} has length 0 (a CDR string carries its NUL)")
        pos = self._take(n, 1, what)
        return self.buf[pos : pos + n - 1].decode("utf-8", errors="replace")

    def array(self, dtype: str, width: int, n: int, what: str) -> np.ndarray:
        count = self.u32(what)
        if count != n * width:
            raise MessageError(
                f"shape_sensing/ImuArray: {what} has {count} values for {n} sensors (expected {n * width})"
            )
        size = np.dtype(dtype).itemsize
        if not count:  # nothing written, not even the alignment of an element
            return np.empty(0, dtype=dtype)
        return np.frombuffer(self.buf, dtype, count, self._take(count * size, size, what))


def imu_sweep_from_cdr(raw: bytes | memoryview, frames: ImuSweepFrames | None = None) -> ImuSweep:
    """The readings of a shape_sensing/ImuArray straight from its CDR bytes (a raw subscription, a bag record):
    the same :class:`ImuSweep` as :func:`imu_sweep_from_msg` of the decoded message, without building one.

    Args:
        raw: the serialised message.
        frames: the per-sensor frame ids of the stream's last sweep, kept there (a stream repeats them: their
            bytes are compared instead of read again).

    Raises:
        MessageError: not little-endian plain CDR, truncated, or arrays that do not hold the same number of sensors.
    """
    r = _CdrReader(bytearray(raw))  # a copy the arrays are views of: writable, as those of a decoded message
    sec, nanosec = _STAMP.unpack_from(r.buf, r._take(8, 4, "the header's stamp"))
    frame_id = r.string("the header's frame id")
    start = r.pos
    if frames is not None and frames.start == start and r.buf.startswith(frames.block, start):
        r.pos = start + len(frames.block)
        frame_ids = list(frames.ids)
    else:
        n = r.u32("frame_id")
        frame_ids = [r.string(f"frame_id[{i}]") for i in range(n)]
        if frames is not None:
            frames.start, frames.block, frames.ids = start, bytes(r.buf[start : r.pos]), tuple(frame_ids)
    n = len(frame_ids)
    stamps = r.array("<i4", 1, n, "stamp_sec").astype(np.int64) * NS_PER_S
    stamps += r.array("<u4", 1, n, "stamp_nanosec")
    rows = {name: r.array("<f8", width, n, name).reshape(n, width) for name, width in _FLOAT_FIELDS}
    return ImuSweep(
        stamp_ns=int(sec) * NS_PER_S + int(nanosec),
        frame_id=frame_id,
        frame_ids=frame_ids,
        stamps_ns=stamps,
        **rows,
    )


def imu_samples_from_sweep(sweep: ImuSweep) -> list[ImuSample]:
    """Per-sensor :class:`ImuSample` of a sweep, as :func:`~shape_sensing.messages.common.imu_from_msg` reads
    each sensor's sensor_msgs/Imu (orientation normalised; ``None`` where absent; all-zero covariances ``None``).

    Raises:
        MessageError: a provided orientation is not a finite quaternion of norm >= 0.5 (naming the sensor).
    """
    quats, provided = sweep.provided_orientations()

    def cov(row: FloatArray) -> FloatArray | None:
        return row.reshape(3, 3).copy() if row.any() else None

    return [
        ImuSample(
            stamp_ns=int(sweep.stamps_ns[i]),
            frame_id=sweep.frame_ids[i],
            orientation=quats[i].copy() if provided[i] else None,
            angular_velocity=sweep.angular_velocity[i].copy(),
            linear_acceleration=sweep.linear_acceleration[i].copy(),
            orientation_covariance=cov(sweep.orientation_covariance[i]) if provided[i] else None,
            angular_velocity_covariance=cov(sweep.angular_velocity_covariance[i]),
            linear_acceleration_covariance=cov(sweep.linear_acceleration_covariance[i]),
        )
        for i in range(sweep.n)
    ]
