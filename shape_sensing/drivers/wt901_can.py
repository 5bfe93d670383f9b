"""WT901 frames over CAN (python-can): one small board per module forwards its sensor's frames.

CAN layout: a CAN data field carries a 0x55 frame's content (see
:mod:`shape_sensing.drivers.wt901` for the frame)::

    byte   0     1      2    3    4    5    6    7
           0x55  TYPE   v0L  v0H  v1L  v1H  v2L  v2H

No WitMotion CAN document was found to confirm it. An independent open-source
ROS driver for WitMotion CAN modules decodes acceleration (0x51), angular
velocity (0x52) and magnetic field (0x54) from exactly these bytes, with the
serial scales, from a module at standard ID 0x50 on a 250 kbit/s bus. Its
high-precision inclinometer model sends angles differently (0x53 with an axis
index in byte 2 and a 32-bit value in bytes 4-7, 0.001 deg); this driver
decodes the WT901's 16-bit angle frame only. Check one frame from the real
boards (``candump``) before relying on the angle frame.

An 8-byte CAN data field cannot hold the whole 11-byte serial frame, so the
fourth value (temperature / version) and the checksum are not carried; CAN's
own CRC protects the bytes. Consequence: quaternion frames (which need all
four values) cannot travel in this layout, so over CAN the orientation comes
from the angle frame (0x53).

Each module's board sends with its own CAN ID; IDs are standard (11-bit) or
extended (29-bit), chosen by configuration. Error frames are counted; an
exception from the bus (bus-off, interface down) marks the bus as failed and
the reader retries with exponential backoff, while samples already received
from the other modules are kept and their freshness is tracked per module.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import can

from shape_sensing.drivers.errors import DriverConfigError
from shape_sensing.drivers.wt901 import FrameType, Wt901Assembler, Wt901Frame
from shape_sensing.types import DiagnosticLevel, DiagnosticStatus, ImuSample

__all__ = [
    "CanStats",
    "Wt901Can",
    "can_data_to_frame",
    "encode_can_cycle",
    "frame_to_can_data",
    "frame_to_can_message",
]

_log = logging.getLogger(__name__)
_CAN_TYPES = frozenset(
    int(t) for t in (FrameType.TIME, FrameType.ACCEL, FrameType.GYRO, FrameType.ANGLE, FrameType.MAG)
)


def frame_to_can_data(frame: bytes) -> bytes:
    """The 8 CAN data bytes of an 11-byte serial frame (drops the 4th value and the checksum)."""
    if len(frame) != 11 or frame[0] != 0x55:
        raise DriverConfigError(f"expected an 11-byte frame starting with 0x55, got {frame.hex(' ')}")
    return bytes(frame[:8])


def can_data_to_frame(data: bytes | bytearray) -> Wt901Frame | None:
    """A frame from 8 CAN data bytes, or ``None`` when they are not in the layout (wrong length/header/type)."""
    if len(data) != 8 or data[0] != 0x55 or data[1] not in _CAN_TYPES:
        return None
    v = [int.from_bytes(data[k : k + 2], "little", signed=True) for k in (2, 4, 6)]
    return Wt901Frame(data[1], (v[0], v[1], v[2], 0))


def frame_to_can_message(frame: bytes, can_id: int, *, extended: bool = False) -> can.Message:
    """A python-can message carrying ``frame`` from the board with ``can_id``."""
    return can.Message(arbitration_id=can_id, is_extended_id=extended, data=frame_to_can_data(frame), dlc=8)


@dataclass
class CanStats:
    """Counters of a CAN reader."""

    messages: int = 0
    frames: int = 0
    error_frames: int = 0
    bad_layout: int = 0
    unknown_id: int = 0
    bus_errors: int = 0


@dataclass
class _Module:
    frame_id: str
    assembler: Wt901Assembler
    last_ns: int | None = None
    frames: int = 0


@dataclass
class Wt901Can:
    """Read the WT901 frames of several modules from one CAN bus.

    Args:
        bus: a python-can bus (any interface; tests use ``virtual``).
        sensors: CAN ID -> frame id of the sensor behind that board.
        extended: IDs are 29-bit extended (else 11-bit standard).
        clock: nanosecond clock for stamps (read time); ``time.time_ns`` by default.
        reopen: called to get a new bus after a bus failure (``None``: keep the same bus and retry).
        backoff_s: first retry delay after a bus failure, doubled up to ``max_backoff_s``.
    """

    bus: can.BusABC | None
    sensors: Mapping[int, str]
    extended: bool = False
    clock: Callable[[], int] = time.time_ns
    reopen: Callable[[], can.BusABC] | None = None
    backoff_s: float = 0.1
    max_backoff_s: float = 5.0
    stats: CanStats = field(default_factory=CanStats)
    bus_ok: bool = True
    last_error: str = ""

    def __post_init__(self) -> None:
        limit = 0x1FFFFFFF if self.extended else 0x7FF
        if not self.sensors:
            raise DriverConfigError("sensors: expected at least one CAN ID -> frame id entry")
        for cid in self.sensors:
            if not 0 <= int(cid) <= limit:
                kind = "extended (29-bit)" if self.extended else "standard (11-bit)"
                raise DriverConfigError(f"CAN ID 0x{int(cid):X} does not fit a {kind} identifier (max 0x{limit:X})")
        self._modules = {int(cid): _Module(name, Wt901Assembler(name, "angle")) for cid, name in self.sensors.items()}
        self._retry_at = 0.0
        self._delay = self.backoff_s

    def poll(self, max_messages: int = 10000) -> list[ImuSample]:
        """Drain the bus without blocking; return the completed samples in arrival order."""
        out: list[ImuSample] = []
        if not self.bus_ok and not self._try_recover():
            return out
        for _ in range(max_messages):
            try:
                assert self.bus is not None
                msg = self.bus.recv(timeout=0.0)
            except (can.CanError, OSError, ValueError) as exc:
                self._fail(exc)
                break
            if msg is None:
                break
            sample = self._handle(msg)
            if sample is not None:
                out.append(sample)
        return out

    def _handle(self, msg: can.Message) -> ImuSample | None:
        self.stats.messages += 1
        if msg.is_error_frame:
            self.stats.error_frames += 1
            return None
        module = self._modules.get(msg.arbitration_id)
        if module is None or bool(msg.is_extended_id) != self.extended:
            self.stats.unknown_id += 1
            return None
        frame = can_data_to_frame(msg.data)
        if frame is None:
            self.stats.bad_layout += 1
            return None
        self.stats.frames += 1
        module.frames += 1
        stamp = self.clock()
        sample = module.assembler.push(frame, stamp)
        if sample is not None:
            module.last_ns = stamp
        return sample

    def _fail(self, exc: BaseException) -> None:
        self.stats.bus_errors += 1
        self.bus_ok = False
        self.last_error = f"{type(exc).__name__}: {exc}"
        self._retry_at = time.monotonic() + self._delay
        _log.warning("CAN bus failed (%s); retrying in %.2f s", self.last_error, self._delay)
        self._delay = min(self._delay * 2.0, self.max_backoff_s)

    def _try_recover(self) -> bool:
        if time.monotonic() < self._retry_at:
            return False
        if self.reopen is not None:
            try:
                if self.bus is not None:
                    self.bus.shutdown()
            except (can.CanError, OSError):
                pass
            try:
                self.bus = self.reopen()
            except (can.CanError, OSError, ValueError) as exc:
                self._fail(exc)
                return False
        self.bus_ok = True
        self._delay = self.backoff_s
        return True

    def diagnostics(self, now_ns: int, stale_after_ns: int = 500_000_000) -> list[DiagnosticStatus]:
        """One status for the bus and one per module (stale modules WARN, the others stay OK)."""
        s = self.stats
        bus_level = DiagnosticLevel.OK if self.bus_ok else DiagnosticLevel.ERROR
        out = [
            DiagnosticStatus(
                name="wt901/can",
                level=bus_level if not s.error_frames or not self.bus_ok else DiagnosticLevel.WARN,
                message="bus ok" if self.bus_ok else f"bus failed: {self.last_error}",
                values={k: str(v) for k, v in s.__dict__.items()},
            )
        ]
        for cid, m in self._modules.items():
            fresh = m.last_ns is not None and now_ns - m.last_ns <= stale_after_ns
            out.append(
                DiagnosticStatus(
                    name=f"wt901/{m.frame_id}",
                    level=DiagnosticLevel.OK if fresh else DiagnosticLevel.WARN,
                    message="streaming" if fresh else "no recent sample",
                    hardware_id=f"can:0x{cid:X}",
                    values={"frames": str(m.frames), "last_stamp_ns": str(m.last_ns)},
                )
            )
        return out


def encode_can_cycle(can_id: int, frames: list[bytes], *, extended: bool = False) -> list[can.Message]:
    """CAN messages for a list of serial frames (helper for emulators)."""
    return [frame_to_can_message(f, can_id, extended=extended) for f in frames if f[1] in _CAN_TYPES]
