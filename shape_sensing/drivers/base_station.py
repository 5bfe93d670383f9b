"""Vine robot base station over a serial line: binary protocol, parser, calibration and pyserial driver.

The base station is a microcontroller (an Arduino Mega in seed 004) reading the spool motor's
quadrature encoder, the pressure regulator's feedback and setpoint (analog), a start switch and the
tip cap's limit switches (carried on the tether). It streams one STATE frame per control cycle.

Frame layout (all multi-byte fields little-endian)::

    offset  size  field
    0       2     sync: 0xA5 0x5A
    2       1     payload length N (bytes of payload only)
    3       1     message id (0x01 = STATE)
    4       2     sequence (uint16, +1 per frame, wraps at 65536)
    6       4     device time (uint32, the microcontroller's micros(), wraps after ~71.6 min)
    10      N     payload
    10+N    2     CRC-16/CCITT-FALSE of bytes 2 .. 9+N (length through payload), little-endian

CRC-16/CCITT-FALSE: polynomial 0x1021, initial value 0xFFFF, no reflection, no final XOR
(check value 0x29B1 for the ASCII bytes "123456789").

STATE payload (id 0x01, N = 13)::

    0   int32   encoder_counts   quadrature counts since power-up (x4 decoding)
    4   uint16  pressure_adc     regulator pressure feedback, ADC counts
    6   uint16  setpoint_adc     regulator setpoint, ADC counts
    8   uint8   switches         bit 0: start switch; bits 1-7 reserved (0)
    9   uint32  cap_switches     tip cap limit switches, bit i = switch i pressed

A STATE frame is 25 bytes: at 115200 bit/s (8N1, 11520 byte/s) the line carries at most 460 frames/s.

The parser accepts a header only when its (id, length) pair is a known message, so garbage is
skipped byte by byte; a frame whose CRC fails is counted and the search restarts one byte after its
sync, so a real frame that began inside a spurious one is never lost. Sequence gaps count dropped
frames.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from shape_sensing.config import ConfigError, Param, Schema
from shape_sensing.drivers.errors import BusError
from shape_sensing.types import DiagnosticLevel, DiagnosticStatus

__all__ = [
    "FRAME_OVERHEAD",
    "MSG_STATE",
    "SCHEMA",
    "STATE_FRAME_SIZE",
    "SYNC",
    "BaseStationCalibration",
    "BaseStationDriver",
    "BaseStationParser",
    "BaseStationReading",
    "ParserStats",
    "StateFrame",
    "calibrate_metres_per_count",
    "calibration_from_params",
    "crc16_ccitt_false",
    "encode_state",
    "open_port",
]

_log = logging.getLogger(__name__)

SYNC = b"\xa5\x5a"
MSG_STATE = 0x01
_HEADER = struct.Struct("<2sBBHI")  # sync, length, id, sequence, device time
_STATE = struct.Struct("<iHHBI")
HEADER_SIZE = _HEADER.size  # 10
FRAME_OVERHEAD = HEADER_SIZE + 2
STATE_FRAME_SIZE = FRAME_OVERHEAD + _STATE.size  # 25
# message id -> payload length; a header is plausible only when its pair is listed here
MESSAGE_LENGTHS: dict[int, int] = {MSG_STATE: _STATE.size}


def _crc_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return table


_CRC_TABLE = _crc_table()


def crc16_ccitt_false(data: bytes | bytearray | memoryview, crc: int = 0xFFFF) -> int:
    """CRC-16/CCITT-FALSE (poly 0x1021, init 0xFFFF, no reflection, xorout 0)."""
    table = _CRC_TABLE
    for b in bytes(data):
        crc = ((crc << 8) & 0xFFFF) ^ table[((crc >> 8) ^ b) & 0xFF]
    return crc


@dataclass(frozen=True)
class StateFrame:
    """One decoded STATE frame (raw device units)."""

    sequence: int
    device_time_us: int
    encoder_counts: int
    pressure_adc: int
    setpoint_adc: int
    start_switch: bool
    cap_switches: int


def encode_state(frame: StateFrame) -> bytes:
    """The bytes of a STATE frame (what the microcontroller sends)."""
    payload = _STATE.pack(
        int(frame.encoder_counts), int(frame.pressure_adc) & 0xFFFF, int(frame.setpoint_adc) & 0xFFFF,
        1 if frame.start_switch else 0, int(frame.cap_switches) & 0xFFFFFFFF,
    )  # fmt: skip
    head = _HEADER.pack(SYNC, len(payload), MSG_STATE, frame.sequence & 0xFFFF, frame.device_time_us & 0xFFFFFFFF)
    crc = crc16_ccitt_false(head[2:] + payload)
    return head + payload + struct.pack("<H", crc)


@dataclass
class ParserStats:
    """Counters of the serial parser (reported in diagnostics)."""

    frames: int = 0
    crc_errors: int = 0
    garbage_bytes: int = 0
    dropped: int = 0
    out_of_order: int = 0
    bytes_in: int = 0

    def as_dict(self) -> dict[str, str]:
        return {k: str(v) for k, v in self.__dict__.items()}


class BaseStationParser:
    """Byte stream -> :class:`StateFrame` list; resynchronises after garbage, counts CRC errors and gaps."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self.stats = ParserStats()
        self._last_seq: int | None = None

    def feed(self, data: bytes | bytearray | memoryview) -> list[StateFrame]:
        """Add bytes (any split); return the frames completed by them."""
        buf = self._buf
        buf += data
        self.stats.bytes_in += len(data)
        out: list[StateFrame] = []
        pos = 0
        n = len(buf)
        while True:
            j = buf.find(SYNC, pos)
            if j < 0:
                # keep a trailing first sync byte, which may start a frame
                keep = 1 if n and buf[n - 1] == SYNC[0] else 0
                self.stats.garbage_bytes += max(0, n - pos - keep)
                pos = n - keep
                break
            self.stats.garbage_bytes += j - pos
            pos = j
            if n - pos < 4:
                break
            length, msg_id = buf[pos + 2], buf[pos + 3]
            if MESSAGE_LENGTHS.get(msg_id) != length:
                self.stats.garbage_bytes += 1  # not a plausible header: this sync was data
                pos += 1
                continue
            end = pos + HEADER_SIZE + length + 2
            if n < end:
                break
            crc = buf[end - 2] | (buf[end - 1] << 8)
            if crc16_ccitt_false(memoryview(buf)[pos + 2 : end - 2]) != crc:
                self.stats.crc_errors += 1
                pos += 1  # search again inside the rejected bytes: a real frame may start there
                continue
            _, _, _, seq, dev_t = _HEADER.unpack_from(buf, pos)
            counts, p_adc, sp_adc, sw, cap = _STATE.unpack_from(buf, pos + HEADER_SIZE)
            if self._last_seq is not None:
                gap = (seq - self._last_seq - 1) & 0xFFFF
                if gap < 0x8000:
                    self.stats.dropped += gap
                else:  # a repeat or a step back (device restart): not a loss
                    self.stats.out_of_order += 1
            self._last_seq = seq
            self.stats.frames += 1
            out.append(StateFrame(seq, dev_t, counts, p_adc, sp_adc, bool(sw & 1), cap))
            pos = end
        del buf[:pos]
        return out


@dataclass(frozen=True)
class BaseStationCalibration:
    """Raw device units -> SI.

    ``length = (counts - zero_counts) * metres_per_count + length_offset``;
    ``pressure = (adc - pressure_zero_adc) * pascals_per_adc`` (same for the setpoint).
    """

    metres_per_count: float = 2.5e-4
    zero_counts: int = 0
    length_offset: float = 0.0
    pascals_per_adc: float = 34473.8 / 1023.0
    pressure_zero_adc: int = 0

    def length(self, counts: int | np.ndarray) -> Any:
        return (np.asarray(counts) - self.zero_counts) * self.metres_per_count + self.length_offset

    def pressure(self, adc: int | np.ndarray) -> Any:
        return (np.asarray(adc, dtype=float) - self.pressure_zero_adc) * self.pascals_per_adc

    def counts(self, length: float) -> int:
        """Inverse of :meth:`length`, rounded (the emulator's quantisation)."""
        return round((length - self.length_offset) / self.metres_per_count) + self.zero_counts

    def adc(self, pressure: float) -> int:
        """Inverse of :meth:`pressure`, rounded and clipped to 10 bits (the Arduino ADC)."""
        return int(np.clip(round(pressure / self.pascals_per_adc) + self.pressure_zero_adc, 0, 1023))


def calibrate_metres_per_count(
    counts_before: Sequence[int], counts_after: Sequence[int], measured_lengths: Sequence[float]
) -> tuple[float, float]:
    """Least-squares metres per count from grown lengths measured with a tape.

    Each trial: note the counts, grow the robot, measure the grown length (m), note the counts.
    Returns ``(metres_per_count, rms residual in metres)``.

    Raises:
        ConfigError: fewer than one trial, mismatched lists, or no encoder motion.
    """
    before, after = np.asarray(counts_before, dtype=float), np.asarray(counts_after, dtype=float)
    lengths = np.asarray(measured_lengths, dtype=float)
    if not (len(before) == len(after) == len(lengths)) or len(lengths) == 0:
        raise ConfigError(
            f"calibration: {len(before)} start counts, {len(after)} end counts, {len(lengths)} lengths: "
            "expected the same number (>= 1) of each"
        )
    d = after - before
    if not np.all(np.isfinite(lengths)) or np.any(lengths <= 0):
        raise ConfigError(f"calibration: measured lengths {lengths.tolist()}: expected positive metres")
    if np.any(d == 0):
        raise ConfigError(f"calibration: count changes {d.tolist()}: the encoder did not move in a trial")
    mpc = float(d @ lengths / (d @ d))
    rms = float(np.sqrt(np.mean((d * mpc - lengths) ** 2)))
    return mpc, rms


@dataclass(frozen=True)
class BaseStationReading:
    """One STATE frame in SI units, stamped with the host's read time."""

    stamp_ns: int
    sequence: int
    device_time_ns: int
    encoder_counts: int
    length: float
    pressure: float
    pressure_setpoint: float
    start_switch: bool
    cap_switches: int


class SerialLike(Protocol):
    """The part of ``serial.Serial`` the driver uses."""

    @property
    def in_waiting(self) -> int: ...

    def read(self, size: int = 1) -> bytes: ...


def open_port(url: str, baud: int, *, timeout: float = 0.0) -> Any:
    """Open a serial port or pyserial URL for the base station.

    Raises:
        BusError: the port cannot be opened.
    """
    import serial

    try:
        return serial.serial_for_url(url, baudrate=baud, timeout=timeout)
    except (serial.SerialException, OSError, ValueError) as exc:
        raise BusError(f"cannot open serial port {url!r}: {exc}") from exc


@dataclass
class BaseStationDriver:
    """Reads STATE frames from an injected serial port and converts them with a calibration.

    Args:
        port: ``serial.Serial``-like (non-blocking reads of ``in_waiting`` bytes).
        calibration: counts and ADC to SI.
        clock: nanosecond clock for the host stamps.
    """

    port: SerialLike
    calibration: BaseStationCalibration = field(default_factory=BaseStationCalibration)
    clock: Callable[[], int] = time.time_ns
    parser: BaseStationParser = field(default_factory=BaseStationParser)
    last_ns: int | None = None
    _wraps: int = 0
    _last_dev_us: int | None = None

    def convert(self, frame: StateFrame, stamp_ns: int) -> BaseStationReading:
        """A frame in SI units (device time unwrapped across the 32-bit microsecond wrap)."""
        if self._last_dev_us is not None and frame.device_time_us < self._last_dev_us - (1 << 31):
            self._wraps += 1
        self._last_dev_us = frame.device_time_us
        cal = self.calibration
        return BaseStationReading(
            stamp_ns=stamp_ns,
            sequence=frame.sequence,
            device_time_ns=(frame.device_time_us + (self._wraps << 32)) * 1000,
            encoder_counts=frame.encoder_counts,
            length=float(cal.length(frame.encoder_counts)),
            pressure=float(cal.pressure(frame.pressure_adc)),
            pressure_setpoint=float(cal.pressure(frame.setpoint_adc)),
            start_switch=frame.start_switch,
            cap_switches=frame.cap_switches,
        )

    def feed(self, data: bytes, stamp_ns: int) -> list[BaseStationReading]:
        """Parse bytes read at ``stamp_ns``."""
        out = [self.convert(f, stamp_ns) for f in self.parser.feed(data)]
        if out:
            self.last_ns = stamp_ns
        return out

    def poll(self) -> list[BaseStationReading]:
        """Read what is waiting (non-blocking) and return the completed readings.

        Raises:
            serial.SerialException, OSError: the port failed.
        """
        waiting = self.port.in_waiting
        if not waiting:
            return []
        data = self.port.read(waiting)
        return self.feed(data, self.clock())

    def diagnostics(self, now_ns: int, stale_after_ns: int = 500_000_000) -> DiagnosticStatus:
        """Health: stale WARN, CRC errors and dropped frames counted."""
        st = self.parser.stats
        fresh = self.last_ns is not None and now_ns - self.last_ns <= stale_after_ns
        level = DiagnosticLevel.OK if fresh else DiagnosticLevel.WARN
        msg = "streaming" if fresh else "no recent frame (stale)"
        if fresh and (st.crc_errors or st.dropped):
            level = DiagnosticLevel.WARN if st.crc_errors + st.dropped > 0.01 * max(st.frames, 1) else level
            msg += f", {st.crc_errors} CRC errors, {st.dropped} frames dropped"
        return DiagnosticStatus(name="base_station", level=level, message=msg, values=st.as_dict())


def _check_mask_bits(value: int) -> str | None:
    return None if 1 <= value <= 32 else "the cap bitmask field has 32 bits"


SCHEMA = Schema(
    node="base_station",
    description="Vine robot base station (spool encoder, pressure regulator, switches) over a serial line.",
    params=(
        Param("port", str, "/dev/ttyACM0", "serial port or pyserial URL"),
        Param("baud", int, 115200, "line rate", min=1200, max=4_000_000, unit="bit/s"),
        Param("metres_per_count", float, 2.5e-4, "calibrated spool length per encoder count (see README)",
              min=1e-9, max=1.0, unit="m"),
        Param("zero_counts", int, 0, "encoder counts at zero grown length"),
        Param("length_offset", float, 0.0, "length added after scaling (body already everted at zero counts)",
              unit="m"),
        Param("pascals_per_adc", float, 34473.8 / 1023.0, "regulator feedback scale (5 psi over 10 bits)",
              min=1e-9, unit="Pa"),
        Param("pressure_zero_adc", int, 0, "ADC counts at zero gauge pressure", min=0, max=1023),
        Param("n_cap_switches", int, 19, "limit switches on the tip cap (bits of cap_switches)", min=1, max=32,
              check=_check_mask_bits),
        Param("poll_rate", float, 500.0, "how often the port is drained", min=1.0, max=10000.0, unit="Hz"),
        Param("stale_timeout", float, 0.5, "no frame for this long is reported stale", min=0.0, unit="s"),
        Param("frame_id", str, "vine_base", "frame of the published messages"),
        Param("frame_prefix", str, "", "prefix of the published frame ids"),
    ),
)  # fmt: skip


def calibration_from_params(p: dict[str, Any]) -> BaseStationCalibration:
    """The calibration from validated ``base_station`` parameters."""
    return BaseStationCalibration(
        metres_per_count=p["metres_per_count"], zero_counts=p["zero_counts"], length_offset=p["length_offset"],
        pascals_per_adc=p["pascals_per_adc"], pressure_zero_adc=p["pressure_zero_adc"],
    )  # fmt: skip
