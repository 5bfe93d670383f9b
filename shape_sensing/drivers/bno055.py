"""Bosch BNO055 (BST-BNO055-DS000) on an smbus2-like bus: registers, modes, burst reads, calibration.

Facts used (datasheet, register map page 0):

* CHIP_ID 0x00 reads 0xA0; PAGE_ID 0x07.
* Data blocks, little-endian signed 16-bit per axis: ACC 0x08, MAG 0x0E,
  GYR 0x14, EUL 0x1A (heading, roll, pitch), QUA 0x20 (w, x, y, z), LIA 0x28,
  GRV 0x2E; TEMP 0x34 (signed 8 bit), CALIB_STAT 0x35 (SYS 7:6, GYR 5:4,
  ACC 3:2, MAG 1:0), SYS_STATUS 0x39, SYS_ERR 0x3A, UNIT_SEL 0x3B,
  OPR_MODE 0x3D, PWR_MODE 0x3E, SYS_TRIGGER 0x3F (bit 5 RST_SYS),
  AXIS_MAP_CONFIG 0x41, AXIS_MAP_SIGN 0x42.
* Calibration profile: 22 bytes at 0x55-0x6A (accel offset x/y/z, mag offset
  x/y/z, gyro offset x/y/z, accel radius, mag radius; int16 LE), writable
  only in CONFIGMODE.
* Scales: quaternion 2^14 LSB = 1; acceleration 100 LSB = 1 m/s^2 (1 LSB =
  1 mg in mg units); angular rate 16 LSB = 1 dps or 900 LSB = 1 rad/s;
  magnetic field 16 LSB = 1 uT; Euler 16 LSB = 1 deg or 900 LSB = 1 rad;
  temperature 1 LSB = 1 degC.
* UNIT_SEL bits: 0 accel (m/s^2 | mg), 1 gyro (dps | rps), 2 Euler (deg |
  rad), 4 temperature (C | F), 7 orientation format (Windows | Android).
* Mode switching: CONFIGMODE -> any mode 7 ms; any mode -> CONFIGMODE 19 ms.
  All writable registers except OPR_MODE change only in CONFIGMODE; in
  CONFIGMODE the fusion is halted and the outputs read zero.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Protocol

import numpy as np

from shape_sensing.drivers.errors import DriverConfigError, ProtocolError
from shape_sensing.geometry import FloatArray

__all__ = [
    "BNO055",
    "CALIBRATION_LENGTH",
    "CHIP_ID_VALUE",
    "FIELDS",
    "MODE_SWITCH_FROM_CONFIG_S",
    "MODE_SWITCH_TO_CONFIG_S",
    "UNITS_SI",
    "BlockRead",
    "CalibrationProfile",
    "CalibrationStatus",
    "Decoded",
    "Mode",
    "ReadPlan",
    "Reg",
    "decode_block",
    "plan_reads",
]


class Reg(IntEnum):
    """Page-0 register addresses."""

    CHIP_ID = 0x00
    PAGE_ID = 0x07
    ACC_DATA = 0x08
    MAG_DATA = 0x0E
    GYR_DATA = 0x14
    EUL_DATA = 0x1A
    QUA_DATA = 0x20
    LIA_DATA = 0x28
    GRV_DATA = 0x2E
    TEMP = 0x34
    CALIB_STAT = 0x35
    ST_RESULT = 0x36
    INT_STA = 0x37
    SYS_CLK_STATUS = 0x38
    SYS_STATUS = 0x39
    SYS_ERR = 0x3A
    UNIT_SEL = 0x3B
    OPR_MODE = 0x3D
    PWR_MODE = 0x3E
    SYS_TRIGGER = 0x3F
    AXIS_MAP_CONFIG = 0x41
    AXIS_MAP_SIGN = 0x42
    CALIB_DATA = 0x55


class Mode(IntEnum):
    """OPR_MODE values."""

    CONFIG = 0x00
    ACCONLY = 0x01
    MAGONLY = 0x02
    GYROONLY = 0x03
    ACCMAG = 0x04
    ACCGYRO = 0x05
    MAGGYRO = 0x06
    AMG = 0x07
    IMU = 0x08
    COMPASS = 0x09
    M4G = 0x0A
    NDOF_FMC_OFF = 0x0B
    NDOF = 0x0C


FUSION_MODES = frozenset({Mode.IMU, Mode.COMPASS, Mode.M4G, Mode.NDOF_FMC_OFF, Mode.NDOF})

CHIP_ID_VALUE = 0xA0
CALIBRATION_LENGTH = 22
RST_SYS = 0x20
MODE_SWITCH_FROM_CONFIG_S = 0.007
MODE_SWITCH_TO_CONFIG_S = 0.019
RESET_TIME_S = 0.65  # wait after RST_SYS before talking to the chip again (reset to normal mode, typical)
UNITS_SI = 0x06  # m/s^2, rad/s, rad, degC, Windows orientation format

QUAT_LSB = float(1 << 14)
ACCEL_LSB_SI = 100.0  # per m/s^2
ACCEL_LSB_MG = 1.0  # per mg
GYRO_LSB_DPS = 16.0
GYRO_LSB_RPS = 900.0
MAG_LSB_UT = 16.0
MG = 9.80665e-3  # m/s^2 per mg

# Published field -> (first register, bytes).
FIELDS: dict[str, tuple[int, int]] = {
    "linear_acceleration": (Reg.ACC_DATA, 6),  # gravity included (sensor_msgs/Imu convention)
    "magnetic_field": (Reg.MAG_DATA, 6),
    "angular_velocity": (Reg.GYR_DATA, 6),
    "euler": (Reg.EUL_DATA, 6),
    "orientation": (Reg.QUA_DATA, 8),
    "free_acceleration": (Reg.LIA_DATA, 6),
    "gravity": (Reg.GRV_DATA, 6),
    "temperature": (Reg.TEMP, 1),
    "calibration": (Reg.CALIB_STAT, 1),
    "system_status": (Reg.SYS_STATUS, 2),  # SYS_STATUS, SYS_ERR
    "mode": (Reg.OPR_MODE, 1),
}

# I2C cost model used to plan reads: a register-pointer read is
# S + addr(W) + reg + Sr + addr(R) + data + P = 3 bits + 3 bytes of 9 bits each, plus 9 bits per data byte.
READ_OVERHEAD_BITS = 3 + 3 * 9
BITS_PER_BYTE = 9
SMBUS_BLOCK_MAX = 32


class _Bus(Protocol):
    def read_byte_data(self, i2c_addr: int, register: int, force: bool | None = None) -> int: ...

    def write_byte_data(self, i2c_addr: int, register: int, value: int, force: bool | None = None) -> None: ...

    def read_i2c_block_data(
        self, i2c_addr: int, register: int, length: int, force: bool | None = None
    ) -> list[int]: ...

    def write_i2c_block_data(
        self, i2c_addr: int, register: int, data: Sequence[int], force: bool | None = None
    ) -> None: ...


@dataclass(frozen=True)
class BlockRead:
    """One burst read: ``length`` bytes from ``start``."""

    start: int
    length: int

    @property
    def wire_bits(self) -> int:
        """Bits on the wire for this read, start/ack/stop included."""
        return READ_OVERHEAD_BITS + BITS_PER_BYTE * self.length


@dataclass(frozen=True)
class ReadPlan:
    """Burst reads covering a set of fields, and where each field lands in them."""

    fields: tuple[str, ...]
    reads: tuple[BlockRead, ...]
    offsets: dict[str, tuple[int, int]] = field(default_factory=dict)  # field -> (read index, byte offset)

    @property
    def payload_bytes(self) -> int:
        """Bytes of the fields themselves."""
        return sum(FIELDS[f][1] for f in self.fields)

    @property
    def wire_bits(self) -> int:
        """Bits on the wire for all reads of the plan."""
        return sum(r.wire_bits for r in self.reads)


def plan_reads(fields: Iterable[str], *, max_block: int = SMBUS_BLOCK_MAX) -> ReadPlan:
    """Cover ``fields`` with the burst reads that cost the fewest bits on the wire.

    Fields are sorted by register; two neighbouring runs are merged when
    reading the gap between them costs fewer bits than a second read's
    overhead (30 bits), and the merged block stays within ``max_block`` bytes
    (the SMBus block limit). Dynamic programming over the runs gives the
    optimum.

    Raises:
        DriverConfigError: an unknown field name.
    """
    names = sorted(set(fields), key=lambda f: FIELDS[f][0] if f in FIELDS else -1)
    unknown = [f for f in names if f not in FIELDS]
    if unknown:
        raise DriverConfigError(f"unknown BNO055 field(s) {unknown}; expected some of {sorted(FIELDS)}")
    if not names:
        return ReadPlan((), ())
    spans = [(FIELDS[f][0], FIELDS[f][0] + FIELDS[f][1]) for f in names]
    n = len(spans)
    best = [0] * (n + 1)  # best[i]: cost of covering spans[:i]
    choice = [0] * (n + 1)
    for i in range(1, n + 1):
        best[i] = 1 << 60
        for j in range(i):  # one block covering spans[j:i]
            start, end = spans[j][0], max(e for _, e in spans[j:i])
            if end - start > max_block:
                continue
            cost = best[j] + READ_OVERHEAD_BITS + BITS_PER_BYTE * (end - start)
            if cost < best[i]:
                best[i], choice[i] = cost, j
    reads: list[BlockRead] = []
    offsets: dict[str, tuple[int, int]] = {}
    i = n
    groups: list[tuple[int, int]] = []
    while i > 0:
        groups.append((choice[i], i))
        i = choice[i]
    for k, (j, i) in enumerate(reversed(groups)):
        start, end = spans[j][0], max(e for _, e in spans[j:i])
        reads.append(BlockRead(start, end - start))
        for f in names[j:i]:
            offsets[f] = (k, FIELDS[f][0] - start)
    return ReadPlan(tuple(names), tuple(reads), offsets)


@dataclass(frozen=True)
class CalibrationStatus:
    """CALIB_STAT: 0 (uncalibrated) .. 3 (fully calibrated) per part."""

    system: int
    gyro: int
    accel: int
    mag: int

    @classmethod
    def from_byte(cls, byte: int) -> CalibrationStatus:
        """Decode the CALIB_STAT byte."""
        return cls((byte >> 6) & 3, (byte >> 4) & 3, (byte >> 2) & 3, byte & 3)

    def to_byte(self) -> int:
        """Encode as the CALIB_STAT byte."""
        return (self.system << 6) | (self.gyro << 4) | (self.accel << 2) | self.mag

    @property
    def fully_calibrated(self) -> bool:
        """All four parts at level 3."""
        return min(self.system, self.gyro, self.accel, self.mag) == 3

    def as_list(self) -> list[int]:
        """``[system, gyro, accel, mag]``."""
        return [self.system, self.gyro, self.accel, self.mag]


_INT16_MIN, _INT16_MAX = -32768, 32767


@dataclass(frozen=True)
class CalibrationProfile:
    """The 22-byte calibration profile (offsets in chip LSB, radii in LSB)."""

    accel_offset: tuple[int, int, int]
    mag_offset: tuple[int, int, int]
    gyro_offset: tuple[int, int, int]
    accel_radius: int
    mag_radius: int

    def __post_init__(self) -> None:
        for name in ("accel_offset", "mag_offset", "gyro_offset"):
            v = getattr(self, name)
            if len(v) != 3 or any(not isinstance(x, (int, np.integer)) or not _INT16_MIN <= x <= _INT16_MAX for x in v):
                raise DriverConfigError(f"calibration {name} = {v!r}: expected 3 integers in [-32768, 32767]")
        if not -1000 <= self.accel_radius <= 1000:
            raise DriverConfigError(f"calibration accel_radius = {self.accel_radius!r}: expected -1000..1000 LSB")
        if not -960 <= self.mag_radius <= 960:
            raise DriverConfigError(f"calibration mag_radius = {self.mag_radius!r}: expected -960..960 LSB")

    @classmethod
    def from_bytes(cls, raw: Sequence[int] | bytes) -> CalibrationProfile:
        """Decode the 22 bytes read from 0x55."""
        if len(raw) != CALIBRATION_LENGTH:
            raise ProtocolError(f"calibration profile has {len(raw)} bytes, expected {CALIBRATION_LENGTH}")
        v = struct.unpack("<11h", bytes(raw))
        return cls((v[0], v[1], v[2]), (v[3], v[4], v[5]), (v[6], v[7], v[8]), v[9], v[10])

    def to_bytes(self) -> bytes:
        """The 22 bytes to write at 0x55."""
        return struct.pack(
            "<11h", *self.accel_offset, *self.mag_offset, *self.gyro_offset, self.accel_radius, self.mag_radius
        )

    def to_dict(self) -> dict[str, list[int] | int]:
        """Plain mapping for YAML."""
        return {
            "accel_offset": [int(x) for x in self.accel_offset],
            "mag_offset": [int(x) for x in self.mag_offset],
            "gyro_offset": [int(x) for x in self.gyro_offset],
            "accel_radius": int(self.accel_radius),
            "mag_radius": int(self.mag_radius),
        }

    @classmethod
    def from_dict(cls, data: object, where: str = "") -> CalibrationProfile:
        """From the mapping written by :meth:`to_dict`; errors name ``where``."""
        loc = f"{where}: " if where else ""
        if not isinstance(data, dict):
            raise DriverConfigError(f"{loc}calibration profile must be a mapping, got {type(data).__name__}")
        keys = {"accel_offset", "mag_offset", "gyro_offset", "accel_radius", "mag_radius"}
        if set(data) != keys:
            raise DriverConfigError(f"{loc}calibration profile keys {sorted(data)}: expected {sorted(keys)}")

        def vec(name: str) -> tuple[int, int, int]:
            v = data[name]
            if not isinstance(v, list) or len(v) != 3 or any(isinstance(x, bool) or not isinstance(x, int) for x in v):
                raise DriverConfigError(f"{loc}calibration {name} = {v!r}: expected a list of 3 integers")
            return (v[0], v[1], v[2])

        def scalar(name: str) -> int:
            v = data[name]
            if isinstance(v, bool) or not isinstance(v, int):
                raise DriverConfigError(f"{loc}calibration {name} = {v!r}: expected an integer")
            return v

        try:
            return cls(
                vec("accel_offset"), vec("mag_offset"), vec("gyro_offset"), scalar("accel_radius"), scalar("mag_radius")
            )
        except DriverConfigError as exc:
            raise DriverConfigError(f"{loc}{exc}") from None


@dataclass
class Decoded:
    """Fields decoded from one sensor's burst reads (SI units; ``None`` when not read)."""

    orientation: FloatArray | None = None  # x, y, z, w
    angular_velocity: FloatArray | None = None  # rad/s
    linear_acceleration: FloatArray | None = None  # m/s^2, gravity included
    magnetic_field: FloatArray | None = None  # tesla
    temperature: float | None = None  # degC
    calibration: CalibrationStatus | None = None
    system_status: int | None = None
    system_error: int | None = None
    mode: int | None = None
    extra: dict[str, FloatArray] = field(default_factory=dict)


def _vec3(buf: bytes, off: int, scale: float) -> FloatArray:
    # scaled as Python floats (the same IEEE products as numpy's), then one array
    a, b, c = struct.unpack_from("<3h", buf, off)
    return np.array((a * scale, b * scale, c * scale))


def decode_block(plan: ReadPlan, blocks: Sequence[bytes], unit_sel: int = UNITS_SI) -> Decoded:
    """Decode the reads of ``plan`` (one ``bytes`` per :class:`BlockRead`) into SI units.

    Quaternions are returned as ``[x, y, z, w]`` (the chip sends w first).
    """
    out = Decoded()
    accel_scale = MG / ACCEL_LSB_MG if unit_sel & 0x01 else 1.0 / ACCEL_LSB_SI
    gyro_scale = 1.0 / GYRO_LSB_RPS if unit_sel & 0x02 else float(np.deg2rad(1.0)) / GYRO_LSB_DPS
    euler_scale = 1.0 / 900.0 if unit_sel & 0x04 else float(np.deg2rad(1.0)) / 16.0
    for name in plan.fields:
        k, off = plan.offsets[name]
        buf = blocks[k]
        if name == "orientation":
            w, x, y, z = struct.unpack_from("<4h", buf, off)
            out.orientation = np.array((x / QUAT_LSB, y / QUAT_LSB, z / QUAT_LSB, w / QUAT_LSB))
        elif name == "angular_velocity":
            out.angular_velocity = _vec3(buf, off, gyro_scale)
        elif name == "linear_acceleration":
            out.linear_acceleration = _vec3(buf, off, accel_scale)
        elif name == "magnetic_field":
            out.magnetic_field = _vec3(buf, off, 1e-6 / MAG_LSB_UT)
        elif name == "temperature":
            t = struct.unpack_from("<b", buf, off)[0]
            out.temperature = float(t) if not unit_sel & 0x10 else (t * 2.0 - 32.0) * 5.0 / 9.0
        elif name == "calibration":
            out.calibration = CalibrationStatus.from_byte(buf[off])
        elif name == "system_status":
            out.system_status, out.system_error = buf[off], buf[off + 1]
        elif name == "mode":
            out.mode = buf[off] & 0x0F
        elif name in ("free_acceleration", "gravity"):
            out.extra[name] = _vec3(buf, off, accel_scale)
        elif name == "euler":
            out.extra[name] = _vec3(buf, off, euler_scale)
    return out


class BNO055:
    """One BNO055 (reached through whatever mux path the caller has opened).

    Args:
        bus: an ``smbus2.SMBus``-like object.
        address: 0x28 or 0x29.
        sleep: ``sleep(seconds)``, injected so simulations need not wait.

    Bus errors (``OSError``: NACK, timeout) propagate to the caller.
    """

    def __init__(self, bus: _Bus, address: int = 0x28, *, sleep: Callable[[float], None] = time.sleep) -> None:
        if address not in (0x28, 0x29):
            raise DriverConfigError(f"BNO055 address {address:#04x} invalid: expected 0x28 or 0x29")
        self.bus = bus
        self.address = address
        self.sleep = sleep

    # -- identification and modes ------------------------------------------------
    def chip_id(self) -> int:
        """CHIP_ID register."""
        return int(self.bus.read_byte_data(self.address, Reg.CHIP_ID))

    def check_chip_id(self) -> None:
        """Raise :class:`ProtocolError` unless CHIP_ID reads 0xA0."""
        cid = self.chip_id()
        if cid != CHIP_ID_VALUE:
            raise ProtocolError(
                f"device at {self.address:#04x} has CHIP_ID {cid:#04x}, expected {CHIP_ID_VALUE:#04x} (BNO055)"
            )

    def reset(self, *, wait: bool = True) -> None:
        """Trigger a system reset (RST_SYS); the chip restarts in CONFIGMODE."""
        self.bus.write_byte_data(self.address, Reg.SYS_TRIGGER, RST_SYS)
        if wait:
            self.sleep(RESET_TIME_S)

    def mode(self) -> int:
        """Current OPR_MODE (low nibble)."""
        return int(self.bus.read_byte_data(self.address, Reg.OPR_MODE)) & 0x0F

    def set_mode(self, mode: int, *, wait: bool = True) -> None:
        """Write OPR_MODE and wait the datasheet's switching time."""
        mode = Mode(mode)
        self.bus.write_byte_data(self.address, Reg.OPR_MODE, int(mode))
        if wait:
            self.sleep(MODE_SWITCH_TO_CONFIG_S if mode == Mode.CONFIG else MODE_SWITCH_FROM_CONFIG_S)

    def set_units(self, unit_sel: int = UNITS_SI) -> None:
        """Write UNIT_SEL (CONFIGMODE only)."""
        self.bus.write_byte_data(self.address, Reg.UNIT_SEL, unit_sel & 0xFF)

    def set_axis_remap(self, config: int = 0x24, sign: int = 0x00) -> None:
        """Write AXIS_MAP_CONFIG and AXIS_MAP_SIGN (CONFIGMODE only); defaults are the chip's P1 placement."""
        _check_remap(config, sign)
        self.bus.write_byte_data(self.address, Reg.AXIS_MAP_CONFIG, config)
        self.bus.write_byte_data(self.address, Reg.AXIS_MAP_SIGN, sign)

    def configure(
        self,
        mode: int = Mode.NDOF,
        *,
        unit_sel: int = UNITS_SI,
        axis_map: tuple[int, int] = (0x24, 0x00),
        calibration: CalibrationProfile | None = None,
    ) -> None:
        """CONFIGMODE, units, axis remap, optional calibration profile, then ``mode`` (blocking)."""
        self.set_mode(Mode.CONFIG)
        self.set_units(unit_sel)
        self.set_axis_remap(*axis_map)
        if calibration is not None:
            self.write_calibration(calibration)
        self.set_mode(mode)

    # -- data --------------------------------------------------------------------
    def read_block(self, start: int, length: int) -> bytes:
        """Burst read ``length`` bytes from register ``start``."""
        data = self.bus.read_i2c_block_data(self.address, start, length)
        if len(data) != length:
            raise ProtocolError(
                f"BNO055 {self.address:#04x}: read {len(data)} bytes from {start:#04x}, expected {length}"
            )
        return bytes(data)

    def read(self, plan: ReadPlan, unit_sel: int = UNITS_SI) -> Decoded:
        """Execute ``plan`` and decode it."""
        return decode_block(plan, [self.read_block(r.start, r.length) for r in plan.reads], unit_sel)

    def calibration_status(self) -> CalibrationStatus:
        """CALIB_STAT."""
        return CalibrationStatus.from_byte(int(self.bus.read_byte_data(self.address, Reg.CALIB_STAT)))

    def read_calibration(self) -> CalibrationProfile:
        """Read the 22-byte profile (the chip must be in CONFIGMODE)."""
        return CalibrationProfile.from_bytes(self.read_block(Reg.CALIB_DATA, CALIBRATION_LENGTH))

    def write_calibration(self, profile: CalibrationProfile) -> None:
        """Write the 22-byte profile in one block (the chip must be in CONFIGMODE)."""
        self.bus.write_i2c_block_data(self.address, Reg.CALIB_DATA, list(profile.to_bytes()))


def _check_remap(config: int, sign: int) -> None:
    axes = [(config >> s) & 3 for s in (0, 2, 4)]
    if config & ~0x3F or sorted(axes) != [0, 1, 2]:
        raise DriverConfigError(
            f"AXIS_MAP_CONFIG {config:#04x} invalid: expected each of x, y, z (0, 1, 2) once in bits 5:0"
        )
    if sign & ~0x07:
        raise DriverConfigError(f"AXIS_MAP_SIGN {sign:#04x} invalid: expected bits 2:0 only")
