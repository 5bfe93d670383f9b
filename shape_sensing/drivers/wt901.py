"""WitMotion WT901 serial protocol: frame parser with resynchronisation, decoder, configuration commands.

Protocol facts, each checked against WitMotion's own documents:

* WT901 datasheet v20-0702, 5.1 "Output Data Format" (frame layout, scales,
  checksum) and 5.2.8 "Return Content" (RSW bits);
* HWT905-TTL datasheet v20-0707 (same WitMotion TTL protocol), 5.2.9 "Return
  Rate" and 5.2.10 "Baud Rate" (RRATE and BAUD codes);
* WT901BLECL datasheet v20-0707, 6.1.2.2 "Quaternion Output" (``Q = raw/32768``);
* WitMotion "WIT Standard Communication Protocol" (unlock, save, register
  numbers) and the CALSW values of WitMotion's standard-protocol SDK register
  header (``CALGYROACC = 0x01``, ``CALREFANGLE = 0x08``).

* Every output frame is 11 bytes: ``0x55``, a type byte, 8 data bytes holding
  four signed 16-bit little-endian values, and a checksum that is the low byte
  of the sum of the first 10 bytes.
* Types used here: ``0x50`` time, ``0x51`` acceleration (``raw/32768*16 g``,
  4th value temperature ``/100`` degC), ``0x52`` angular velocity
  (``raw/32768*2000`` deg/s, 4th value temperature), ``0x53`` angle
  (roll about X, pitch about Y, yaw about Z, ``raw/32768*180`` deg, 4th value
  firmware version), ``0x54`` magnetic field (raw counts, 4th value
  temperature), ``0x59`` quaternion (``Q0..Q3 = raw/32768``; Q0 is taken as
  the scalar part, the usual ``w, x, y, z`` order -- the documents above do
  not say it outright, so compare with the 0x53 angles on a real sensor).
* The attitude is a z-y-x Euler sequence: ``R = Rz(yaw) Ry(pitch) Rx(roll)``.
* Commands are 5 bytes ``0xFF 0xAA REG DATAL DATAH``. Unlock ``FF AA 69 88 B5``
  must precede changes (the sensor re-locks after 10 s); save
  ``FF AA 00 00 00``. Registers: ``0x00`` SAVE, ``0x01`` CALSW (0 normal,
  1 accelerometer calibration, 8 set angle reference), ``0x02`` RSW output
  content (bit 0 time, 1 acc, 2 gyro, 3 angle, 4 mag, ..., 9 quaternion;
  default ``0x001E``), ``0x03`` RRATE (code 1..11 = 0.2, 0.5, 1, 2, 5, 10,
  20, 50, 100, 125, 200 Hz), ``0x04`` BAUD (code 1..9 = 4800 ... 921600).

The parser never raises on bad bytes: garbage, bad checksums and truncated
frames are counted and skipped, and the parser resynchronises on the next
``0x55`` whose frame checksums.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np
from scipy.spatial.transform import Rotation

from shape_sensing.drivers.errors import DriverConfigError
from shape_sensing.geometry import FloatArray
from shape_sensing.types import ImuSample

__all__ = [
    "BAUD_CODES",
    "FRAME_LEN",
    "HEADER",
    "RATE_CODES",
    "ROLL_PITCH_STDDEV_RAD",
    "SAVE",
    "STANDARD_GRAVITY",
    "UNLOCK",
    "YAW_STDDEV_RAD",
    "CalibrationMode",
    "FrameType",
    "ParserStats",
    "Register",
    "Wt901Assembler",
    "Wt901Frame",
    "Wt901Parser",
    "checksum",
    "command",
    "configuration_sequence",
    "encode_frame",
    "euler_to_quat",
    "output_content_mask",
    "quat_to_euler",
]

HEADER = 0x55
FRAME_LEN = 11
STANDARD_GRAVITY = 9.80665
UNLOCK = bytes([0xFF, 0xAA, 0x69, 0x88, 0xB5])
SAVE = bytes([0xFF, 0xAA, 0x00, 0x00, 0x00])
# Stated accuracy of the WT901 attitude (seed 003 and the WT901 datasheet): 0.05 deg roll/pitch, 1 deg yaw.
ROLL_PITCH_STDDEV_RAD = math.radians(0.05)
YAW_STDDEV_RAD = math.radians(1.0)

_INT16X4 = struct.Struct("<4h")


class FrameType(IntEnum):
    """Output frame types (second byte)."""

    TIME = 0x50
    ACCEL = 0x51
    GYRO = 0x52
    ANGLE = 0x53
    MAG = 0x54
    QUATERNION = 0x59


class Register(IntEnum):
    """Configuration registers used by this driver."""

    SAVE = 0x00
    CALSW = 0x01
    RSW = 0x02
    RRATE = 0x03
    BAUD = 0x04


class CalibrationMode(IntEnum):
    """Values of the CALSW register."""

    NORMAL = 0x00
    ACCELEROMETER = 0x01
    ANGLE_REFERENCE = 0x08


# RSW bit per output frame type.
_RSW_BIT = {
    FrameType.TIME: 0,
    FrameType.ACCEL: 1,
    FrameType.GYRO: 2,
    FrameType.ANGLE: 3,
    FrameType.MAG: 4,
    FrameType.QUATERNION: 9,
}
RATE_CODES: dict[float, int] = {
    0.2: 0x01, 0.5: 0x02, 1.0: 0x03, 2.0: 0x04, 5.0: 0x05, 10.0: 0x06,
    20.0: 0x07, 50.0: 0x08, 100.0: 0x09, 125.0: 0x0A, 200.0: 0x0B,
}  # fmt: skip
BAUD_CODES: dict[int, int] = {
    4800: 0x01, 9600: 0x02, 19200: 0x03, 38400: 0x04, 57600: 0x05,
    115200: 0x06, 230400: 0x07, 460800: 0x08, 921600: 0x09,
}  # fmt: skip
_KNOWN_TYPES = frozenset(int(t) for t in FrameType)
# Every WitMotion output frame type is 0x50-0x5F (time .. quaternion, GPS, pressure, ...).
_TYPE_MIN, _TYPE_MAX = 0x50, 0x5F
_TAKE, _SPURIOUS, _WAIT = 0, 1, 2  # Wt901Parser._overlap verdicts


def checksum(data: bytes | bytearray | memoryview) -> int:
    """Low byte of the sum of the first 10 bytes of a frame."""
    return sum(data[:10]) & 0xFF


def encode_frame(frame_type: int, values: Iterable[int]) -> bytes:
    """Build an 11-byte frame from its type and four int16 values.

    Raises:
        DriverConfigError: not four values, or a value outside int16.
    """
    vals = [int(v) for v in values]
    if len(vals) != 4:
        raise DriverConfigError(f"a WT901 frame carries 4 int16 values, got {len(vals)}")
    if any(v < -32768 or v > 32767 for v in vals):
        raise DriverConfigError(f"WT901 frame values {vals} outside int16 [-32768, 32767]")
    body = bytes([HEADER, frame_type & 0xFF]) + _INT16X4.pack(*vals)
    return body + bytes([checksum(body)])


def command(register: int, value: int) -> bytes:
    """A 5-byte write command ``FF AA REG DATAL DATAH``.

    Raises:
        DriverConfigError: register or value out of range.
    """
    if not 0 <= register <= 0xFF:
        raise DriverConfigError(f"register {register!r}: expected 0..255")
    if not 0 <= value <= 0xFFFF:
        raise DriverConfigError(f"register 0x{register:02X} value {value!r}: expected 0..65535")
    return bytes([0xFF, 0xAA, register, value & 0xFF, (value >> 8) & 0xFF])


def output_content_mask(types: Iterable[int | str]) -> int:
    """RSW value enabling exactly the given frame types (``FrameType`` or names like ``"angle"``)."""
    mask = 0
    for t in types:
        try:
            ft = FrameType[t.upper()] if isinstance(t, str) else FrameType(t)
        except (KeyError, ValueError):
            raise DriverConfigError(
                f"output content {t!r}: expected one of {[f.name.lower() for f in FrameType]}"
            ) from None
        mask |= 1 << _RSW_BIT[ft]
    return mask


def configuration_sequence(
    *,
    output: Iterable[int | str] | None = None,
    rate_hz: float | None = None,
    baud: int | None = None,
    calibration: CalibrationMode | None = None,
    save: bool = True,
) -> list[bytes]:
    """Commands that configure a WT901: unlock, the requested writes, then save.

    Args:
        output: frame types to output (RSW).
        rate_hz: output rate, one of :data:`RATE_CODES`.
        baud: serial baud rate, one of :data:`BAUD_CODES`.
        calibration: a CALSW mode (e.g. ``ANGLE_REFERENCE`` with the sensor held level).
        save: append the save command.

    Raises:
        DriverConfigError: a rate or baud the sensor does not offer.
    """
    cmds = [UNLOCK]
    if output is not None:
        cmds.append(command(Register.RSW, output_content_mask(output)))
    if rate_hz is not None:
        code = RATE_CODES.get(float(rate_hz))
        if code is None:
            raise DriverConfigError(f"output rate {rate_hz!r} Hz: expected one of {sorted(RATE_CODES)}")
        cmds.append(command(Register.RRATE, code))
    if baud is not None:
        bcode = BAUD_CODES.get(int(baud))
        if bcode is None:
            raise DriverConfigError(f"baud {baud!r}: expected one of {sorted(BAUD_CODES)}")
        cmds.append(command(Register.BAUD, bcode))
    if calibration is not None:
        cmds.append(command(Register.CALSW, int(CalibrationMode(calibration))))
    if save:
        cmds.append(SAVE)
    return cmds


@dataclass(frozen=True)
class Wt901Frame:
    """One checked frame: its type and four raw int16 values."""

    type: int
    raw: tuple[int, int, int, int]

    def scaled(self) -> FloatArray:
        """The first three values in SI units (m/s^2, rad/s, rad, raw counts) or the quaternion ``[x, y, z, w]``."""
        r = self.raw
        if self.type == FrameType.ACCEL:
            return np.array(r[:3], dtype=float) * (16.0 * STANDARD_GRAVITY / 32768.0)
        if self.type == FrameType.GYRO:
            return np.array(r[:3], dtype=float) * math.radians(2000.0 / 32768.0)
        if self.type == FrameType.ANGLE:
            return np.array(r[:3], dtype=float) * (math.pi / 32768.0)
        if self.type == FrameType.QUATERNION:
            return np.array([r[1], r[2], r[3], r[0]], dtype=float) / 32768.0
        return np.array(r[:3], dtype=float)

    @property
    def temperature_c(self) -> float | None:
        """Temperature (degC) carried by accel, gyro and mag frames."""
        if self.type in (FrameType.ACCEL, FrameType.GYRO, FrameType.MAG):
            return self.raw[3] / 100.0
        return None


@dataclass
class ParserStats:
    """Counters of a parser (reported in diagnostics)."""

    frames: int = 0
    bad_checksum: int = 0
    ignored_type: int = 0
    skipped_bytes: int = 0

    def as_dict(self) -> dict[str, str]:
        """String values for diagnostics."""
        return {k: str(v) for k, v in self.__dict__.items()}


@dataclass
class Wt901Parser:
    """Incremental parser of a WT901 byte stream.

    Feed it bytes as they arrive (any split); it returns the complete, checked
    frames. A byte that does not start a checksummed frame is skipped (counted
    in ``skipped_bytes``); a ``0x55`` followed by a bad checksum counts one
    ``bad_checksum`` and the search resumes at the next byte, so a frame whose
    start was lost never hides the following one. A ``0x55`` whose next byte
    is not a frame type (0x50-0x5F) is skipped the same way. Frames of types
    outside :class:`FrameType` (pressure, GPS, ...) pass the checksum and are
    counted in ``ignored_type``, unless a frame of a known type starts inside
    them: then the candidate was a stray ``0x55`` whose bytes happened to
    checksum, and it is skipped so that the real frame is not lost (see
    :meth:`_overlap`).
    """

    stats: ParserStats = field(default_factory=ParserStats)
    _buf: bytearray = field(default_factory=bytearray)

    def feed(self, data: bytes | bytearray | memoryview) -> list[Wt901Frame]:
        """Append bytes and return the frames completed by them."""
        buf = self._buf
        buf += data
        out: list[Wt901Frame] = []
        i = 0
        n = len(buf)
        stats = self.stats
        unpack = _INT16X4.unpack_from
        while True:
            if i < n and buf[i] != HEADER:
                j = buf.find(HEADER, i)
                if j < 0:
                    stats.skipped_bytes += n - i
                    i = n
                    break
                stats.skipped_bytes += j - i
                i = j
            if n - i < FRAME_LEN:
                break
            ftype = buf[i + 1]
            if not _TYPE_MIN <= ftype <= _TYPE_MAX:  # no WT901 frame has this type byte: a stray 0x55
                stats.skipped_bytes += 1
                i += 1
                continue
            if (sum(buf[i : i + 10]) & 0xFF) != buf[i + 10]:
                stats.bad_checksum += 1
                stats.skipped_bytes += 1
                i += 1
                continue
            verdict = self._overlap(buf, i, n, ftype in _KNOWN_TYPES)
            if verdict == _WAIT:
                break
            if verdict == _SPURIOUS:
                stats.skipped_bytes += 1
                i += 1
                continue
            if ftype in _KNOWN_TYPES:
                out.append(Wt901Frame(ftype, unpack(buf, i + 2)))
                stats.frames += 1
            else:
                stats.ignored_type += 1
            i += FRAME_LEN
        del buf[:i]
        return out

    @staticmethod
    def _overlap(buf: bytearray, i: int, n: int, known: bool) -> int:
        """Whether the checksummed candidate at ``i`` hides a real frame starting inside it.

        A stray ``0x55`` and the next 10 bytes pass the 8-bit checksum about once in 256 tries; taken
        as a frame it would swallow the header of the real frame that follows. So a candidate is
        checked against every ``0x55`` inside it that starts a checksummed frame of a known type:

        * an unknown-type candidate (which would only be counted and dropped) yields to it, and waits
          for more bytes while such a frame is still incomplete (it delays no output);
        * a known-type candidate is taken at once, unless the bytes already there tell the two apart:
          the inner frame is followed by a header and the candidate is not (frames come back to back).
        """
        j = buf.find(HEADER, i + 1, i + FRAME_LEN)
        while j >= 0:
            if n - j < FRAME_LEN:
                if not known:
                    return _WAIT
            elif buf[j + 1] in _KNOWN_TYPES and (sum(buf[j : j + 10]) & 0xFF) == buf[j + 10]:
                if not known:
                    return _SPURIOUS
                if n > j + FRAME_LEN and buf[j + FRAME_LEN] == HEADER and buf[i + FRAME_LEN] != HEADER:
                    return _SPURIOUS
            j = buf.find(HEADER, j + 1, i + FRAME_LEN)
        return _TAKE

    @property
    def pending(self) -> int:
        """Bytes held back waiting for the rest of a frame."""
        return len(self._buf)


def euler_to_quat(roll: float, pitch: float, yaw: float) -> FloatArray:
    """``[x, y, z, w]`` of ``Rz(yaw) Ry(pitch) Rx(roll)`` (the WT901's z-y-x attitude)."""
    return np.asarray(Rotation.from_euler("ZYX", [yaw, pitch, roll]).as_quat(), dtype=float)


def quat_to_euler(q: FloatArray) -> FloatArray:
    """``(..., 4)`` quaternions ``[x, y, z, w]`` to ``(..., 3)`` ``[roll, pitch, yaw]`` (z-y-x)."""
    q = np.asarray(q, dtype=float)
    zyx = Rotation.from_quat(q.reshape(-1, 4)).as_euler("ZYX")
    return zyx[:, ::-1].reshape(*q.shape[:-1], 3)


@dataclass
class Wt901Assembler:
    """Merge one sensor's frames into :class:`ImuSample` readings.

    A sample is emitted when the orientation frame arrives (the angle frame, or
    the quaternion frame with ``orientation_source="quaternion"``); it carries
    the latest acceleration and angular velocity. The orientation covariance is
    the sensor's stated accuracy (``diag(0.05 deg, 0.05 deg, 1 deg)^2`` about
    x, y, z).

    Args:
        frame_id: frame of the samples.
        orientation_source: ``"angle"`` (0x53) or ``"quaternion"`` (0x59).
    """

    frame_id: str
    orientation_source: str = "angle"
    accel: FloatArray = field(default_factory=lambda: np.zeros(3))
    gyro: FloatArray = field(default_factory=lambda: np.zeros(3))
    euler: FloatArray | None = None
    temperature_c: float | None = None

    def __post_init__(self) -> None:
        if self.orientation_source not in ("angle", "quaternion"):
            raise DriverConfigError(f"orientation_source {self.orientation_source!r}: expected 'angle' or 'quaternion'")
        self._trigger = FrameType.ANGLE if self.orientation_source == "angle" else FrameType.QUATERNION

    def push(self, frame: Wt901Frame, stamp_ns: int) -> ImuSample | None:
        """Take one frame; return a sample when it completes one."""
        t = frame.type
        if t == FrameType.ACCEL:
            self.accel = frame.scaled()
            self.temperature_c = frame.temperature_c
        elif t == FrameType.GYRO:
            self.gyro = frame.scaled()
        elif t == FrameType.ANGLE:
            self.euler = frame.scaled()
        if t != self._trigger:
            return None
        if t == FrameType.ANGLE:
            assert self.euler is not None
            q = euler_to_quat(*self.euler)
        else:
            q = frame.scaled()
            norm = float(np.linalg.norm(q))
            if not 0.9 < norm < 1.1:
                return None  # a corrupted quaternion that passed the checksum: skip, never publish
            q = q / norm
            self.euler = quat_to_euler(q)
        cov = np.diag([ROLL_PITCH_STDDEV_RAD**2, ROLL_PITCH_STDDEV_RAD**2, YAW_STDDEV_RAD**2])
        return ImuSample(
            stamp_ns=stamp_ns,
            frame_id=self.frame_id,
            orientation=q,
            angular_velocity=self.gyro.copy(),
            linear_acceleration=self.accel.copy(),
            orientation_covariance=cov,
        )
