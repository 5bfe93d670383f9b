"""Protocol-level WT901 emulator: byte streams and CAN messages, with corruption injection.

The emulator speaks the protocol described in :mod:`shape_sensing.drivers.wt901`:
it encodes attitude, angular velocity and acceleration into 11-byte frames in
the sensor's output order (0x50, 0x51, 0x52, 0x53, 0x54, 0x59, each when
enabled in RSW) and obeys configuration commands (unlock, RSW, RRATE, BAUD,
CALSW, save) written to it. Its bytes are read by the real driver through
pyserial's ``loop://``, a pty, or python-can's ``virtual`` bus.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

import can
import numpy as np
from numpy.typing import ArrayLike

from shape_sensing.drivers.wt901 import (
    BAUD_CODES,
    RATE_CODES,
    STANDARD_GRAVITY,
    CalibrationMode,
    FrameType,
    Register,
    encode_frame,
    euler_to_quat,
)
from shape_sensing.drivers.wt901_can import encode_can_cycle

__all__ = ["Corruptor", "Wt901CanEmulator", "Wt901Emulator", "open_pty"]

_RSW_ORDER = (
    (0, FrameType.TIME),
    (1, FrameType.ACCEL),
    (2, FrameType.GYRO),
    (3, FrameType.ANGLE),
    (4, FrameType.MAG),
    (9, FrameType.QUATERNION),
)
_RATE_BY_CODE = {v: k for k, v in RATE_CODES.items()}
_BAUD_BY_CODE = {v: k for k, v in BAUD_CODES.items()}


def _q16(x: float) -> int:
    return max(-32768, min(32767, round(x)))


@dataclass
class Wt901Emulator:
    """A WT901 as seen from its UART.

    Attributes:
        rsw: output content register (default acc, gyro, angle, mag: ``0x1E``).
        rate_hz: output rate (RRATE).
        baud: line rate (BAUD).
        unlocked: whether writes are accepted (after ``FF AA 69 88 B5``).
        saved: number of save commands received.
        calibration: last CALSW value written.
        rejected: commands ignored (locked sensor or malformed).
    """

    rsw: int = 0x001E
    rate_hz: float = 10.0
    baud: int = 9600
    unlocked: bool = False
    saved: int = 0
    calibration: int = CalibrationMode.NORMAL
    rejected: int = 0
    _cmd: bytearray = field(default_factory=bytearray)

    def write(self, data: bytes) -> None:
        """Bytes from the host: configuration commands (any split)."""
        self._cmd += data
        while True:
            j = self._cmd.find(b"\xff\xaa")
            if j < 0:
                del self._cmd[: max(0, len(self._cmd) - 1)]
                return
            if len(self._cmd) - j < 5:
                del self._cmd[:j]
                return
            reg, lo, hi = self._cmd[j + 2], self._cmd[j + 3], self._cmd[j + 4]
            del self._cmd[: j + 5]
            self._command(reg, lo | (hi << 8))

    def _command(self, reg: int, value: int) -> None:
        if reg == 0x69 and value == 0xB588:
            self.unlocked = True
            return
        if not self.unlocked:
            self.rejected += 1
            return
        if reg == Register.SAVE and value == 0:
            self.saved += 1
            self.unlocked = False
        elif reg == Register.RSW:
            self.rsw = value
        elif reg == Register.RRATE and value in _RATE_BY_CODE:
            self.rate_hz = _RATE_BY_CODE[value]
        elif reg == Register.BAUD and value in _BAUD_BY_CODE:
            self.baud = _BAUD_BY_CODE[value]
        elif reg == Register.CALSW:
            self.calibration = value
        else:
            self.rejected += 1

    def frames(
        self,
        euler: ArrayLike,
        *,
        gyro: ArrayLike = (0.0, 0.0, 0.0),
        accel: ArrayLike | None = None,
        mag: ArrayLike = (0, 0, 0),
        temperature_c: float = 25.0,
        time_ms: int = 0,
    ) -> list[bytes]:
        """The frames of one output cycle, in the sensor's order.

        Args:
            euler: ``[roll, pitch, yaw]`` (rad), the z-y-x attitude.
            gyro: angular velocity (rad/s).
            accel: specific force (m/s^2); default gravity seen in the sensor frame.
            mag: raw magnetometer counts.
            temperature_c: carried in accel/gyro/mag frames.
            time_ms: milliseconds field of the time frame.
        """
        r, p, y = (float(v) for v in np.asarray(euler, dtype=float))
        if accel is None:
            # Specific force of a resting sensor: R^T * [0, 0, g] for R = Rz Ry Rx.
            accel = STANDARD_GRAVITY * np.array([-math.sin(p), math.cos(p) * math.sin(r), math.cos(p) * math.cos(r)])
        a = np.asarray(accel, dtype=float) / (16.0 * STANDARD_GRAVITY) * 32768.0
        g = np.degrees(np.asarray(gyro, dtype=float)) / 2000.0 * 32768.0
        ang = np.degrees([r, p, y]) / 180.0 * 32768.0
        t = _q16(temperature_c * 100.0)
        out = []
        for bit, ftype in _RSW_ORDER:
            if not self.rsw & (1 << bit):
                continue
            if ftype == FrameType.TIME:
                vals = [0, 0, 0, time_ms & 0x7FFF]
            elif ftype == FrameType.ACCEL:
                vals = [_q16(a[0]), _q16(a[1]), _q16(a[2]), t]
            elif ftype == FrameType.GYRO:
                vals = [_q16(g[0]), _q16(g[1]), _q16(g[2]), t]
            elif ftype == FrameType.ANGLE:
                vals = [_q16(ang[0]), _q16(ang[1]), _q16(ang[2]), 0x1234]
            elif ftype == FrameType.MAG:
                m = np.asarray(mag, dtype=float)
                vals = [_q16(m[0]), _q16(m[1]), _q16(m[2]), t]
            else:
                q = euler_to_quat(r, p, y)  # [x, y, z, w]
                vals = [_q16(q[3] * 32768.0), _q16(q[0] * 32768.0), _q16(q[1] * 32768.0), _q16(q[2] * 32768.0)]
            out.append(encode_frame(ftype, vals))
        return out

    def cycle_bytes(self, euler: ArrayLike, **kwargs: object) -> bytes:
        """The bytes of one output cycle (see :meth:`frames`)."""
        return b"".join(self.frames(euler, **kwargs))  # type: ignore[arg-type]


@dataclass
class Corruptor:
    """Inject line faults into a byte stream.

    Args:
        rng: random generator (seeded by the caller for reproducible runs).
        flip_rate: probability per byte of one flipped bit.
        drop_rate: probability per byte of the byte being lost.
        garbage_rate: probability per call of a burst of 1-16 random bytes inserted at a random place.
    """

    rng: np.random.Generator
    flip_rate: float = 0.0
    drop_rate: float = 0.0
    garbage_rate: float = 0.0
    flipped: int = 0
    dropped: int = 0
    garbage_bursts: int = 0

    def apply(self, data: bytes) -> bytes:
        """Return ``data`` with faults injected."""
        if not data:
            return data
        arr = np.frombuffer(data, dtype=np.uint8).copy()
        if self.flip_rate > 0:
            hit = self.rng.random(arr.size) < self.flip_rate
            bits = self.rng.integers(0, 8, arr.size).astype(np.uint8)
            arr[hit] ^= (np.uint8(1) << bits[hit]).astype(np.uint8)
            self.flipped += int(hit.sum())
        if self.drop_rate > 0:
            keep = self.rng.random(arr.size) >= self.drop_rate
            self.dropped += int((~keep).sum())
            arr = arr[keep]
        out = arr.tobytes()
        if self.garbage_rate > 0 and self.rng.random() < self.garbage_rate:
            burst = self.rng.integers(0, 256, int(self.rng.integers(1, 17))).astype(np.uint8).tobytes()
            at = int(self.rng.integers(0, len(out) + 1))
            out = out[:at] + burst + out[at:]
            self.garbage_bursts += 1
        return out


def open_pty() -> tuple[int, str]:
    """A pseudo-terminal: ``(master_fd, slave_path)``. The emulator writes to the master; the driver opens the path."""
    master, slave = os.openpty()
    path = os.ttyname(slave)
    os.close(slave)
    return master, path


@dataclass
class Wt901CanEmulator:
    """Boards forwarding WT901 frames onto a CAN bus (one CAN ID per module).

    Args:
        bus: a python-can bus (``can.Bus(interface="virtual", channel=...)`` in tests).
        can_ids: the boards' IDs, one per sensor.
        extended: send 29-bit extended IDs.
    """

    bus: can.BusABC
    can_ids: Sequence[int]
    extended: bool = False
    emulator: Wt901Emulator = field(default_factory=Wt901Emulator)

    def send_cycle(self, eulers: ArrayLike, *, skip: Sequence[int] = ()) -> int:
        """Send one output cycle for every sensor (``eulers`` is ``(n, 3)``); return messages sent."""
        e = np.asarray(eulers, dtype=float).reshape(-1, 3)
        if len(e) != len(self.can_ids):
            raise ValueError(f"{len(e)} attitudes for {len(self.can_ids)} CAN IDs")
        sent = 0
        for k, (cid, eul) in enumerate(zip(self.can_ids, e, strict=True)):
            if k in skip:
                continue
            for msg in encode_can_cycle(cid, self.emulator.frames(eul), extended=self.extended):
                self.bus.send(msg)
                sent += 1
        return sent
