"""Protocol-level WT901 emulator: byte streams and CAN messages, with corruption injection.

The emulator speaks WitMotion's protocol as their documents state it (the
constants below, written here on their own so that a misreading in the driver
:mod:`shape_sensing.drivers.wt901` is not repeated by its test partner): it
encodes attitude, angular velocity and acceleration into 11-byte frames in
the sensor's output order (0x50, 0x51, 0x52, 0x53, 0x54, 0x59, each when
enabled in RSW) and obeys configuration commands (unlock, RSW, RRATE, BAUD,
CALSW, save) written to it. Its bytes are read by the real driver through
pyserial's ``loop://``, a pty, or python-can's ``virtual`` bus.
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field

import can
import numpy as np
from numpy.typing import ArrayLike

__all__ = ["Corruptor", "Wt901CanEmulator", "Wt901Emulator", "open_pty"]

# The protocol as WitMotion documents it, stated here on its own (not taken from the driver):
# WT901 datasheet v20-0702 5.1 (frames: 0x55, type, four int16 LE, checksum = low byte of the sum of
# the first 10 bytes; scales 16 g, 2000 deg/s, 180 deg full scale), 5.2.8 (RSW bits), HWT905-TTL
# datasheet v20-0707 5.2.9/5.2.10 (RRATE and BAUD codes), WIT standard protocol (unlock, save).
_HEADER = 0x55
_TIME, _ACC, _GYRO, _ANGLE, _MAG, _QUAT = 0x50, 0x51, 0x52, 0x53, 0x54, 0x59
_REG_SAVE, _REG_CALSW, _REG_RSW, _REG_RRATE, _REG_BAUD = 0x00, 0x01, 0x02, 0x03, 0x04
_REG_KEY, _KEY_UNLOCK = 0x69, 0xB588  # FF AA 69 88 B5
_G = 9.80665  # the datasheet's "g"
_RSW_ORDER = ((0, _TIME), (1, _ACC), (2, _GYRO), (3, _ANGLE), (4, _MAG), (9, _QUAT))
_RATE_BY_CODE = {1: 0.2, 2: 0.5, 3: 1.0, 4: 2.0, 5: 5.0, 6: 10.0, 7: 20.0, 8: 50.0, 9: 100.0, 10: 125.0, 11: 200.0}
_BAUD_BY_CODE = {1: 4800, 2: 9600, 3: 19200, 4: 38400, 5: 57600, 6: 115200, 7: 230400, 8: 460800, 9: 921600}
OUTPUT_RATES_HZ = tuple(sorted(_RATE_BY_CODE.values()))
BAUD_RATES = tuple(sorted(_BAUD_BY_CODE.values()))
# Types a CAN board forwards (8 data bytes: the frame's first 8 bytes; see Wt901CanEmulator).
_CAN_TYPES = frozenset({_TIME, _ACC, _GYRO, _ANGLE, _MAG})


def _frame(ftype: int, values: Sequence[int]) -> bytes:
    body = struct.pack("<BB4h", _HEADER, ftype, *values)
    return body + bytes([sum(body) & 0xFF])


def _zyx_quaternion(roll: float, pitch: float, yaw: float) -> tuple[float, float, float, float]:
    """``(w, x, y, z)`` of ``Rz(yaw) Ry(pitch) Rx(roll)`` (half-angle products)."""
    cr, sr = math.cos(roll / 2), math.sin(roll / 2)
    cp, sp = math.cos(pitch / 2), math.sin(pitch / 2)
    cy, sy = math.cos(yaw / 2), math.sin(yaw / 2)
    return (
        cr * cp * cy + sr * sp * sy,
        sr * cp * cy - cr * sp * sy,
        cr * sp * cy + sr * cp * sy,
        cr * cp * sy - sr * sp * cy,
    )


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
    calibration: int = 0  # CALSW 0: normal working mode
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
        if reg == _REG_KEY and value == _KEY_UNLOCK:
            self.unlocked = True
            return
        if not self.unlocked:
            self.rejected += 1
            return
        if reg == _REG_SAVE and value == 0:
            self.saved += 1
            self.unlocked = False
        elif reg == _REG_RSW:
            self.rsw = value
        elif reg == _REG_RRATE and value in _RATE_BY_CODE:
            self.rate_hz = _RATE_BY_CODE[value]
        elif reg == _REG_BAUD and value in _BAUD_BY_CODE:
            self.baud = _BAUD_BY_CODE[value]
        elif reg == _REG_CALSW:
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
            accel = _G * np.array([-math.sin(p), math.cos(p) * math.sin(r), math.cos(p) * math.cos(r)])
        a = np.asarray(accel, dtype=float) / (16.0 * _G) * 32768.0
        g = np.degrees(np.asarray(gyro, dtype=float)) / 2000.0 * 32768.0
        ang = np.degrees([r, p, y]) / 180.0 * 32768.0
        t = _q16(temperature_c * 100.0)
        out = []
        for bit, ftype in _RSW_ORDER:
            if not self.rsw & (1 << bit):
                continue
            if ftype == _TIME:
                vals = [0, 0, 0, time_ms & 0x7FFF]
            elif ftype == _ACC:
                vals = [_q16(a[0]), _q16(a[1]), _q16(a[2]), t]
            elif ftype == _GYRO:
                vals = [_q16(g[0]), _q16(g[1]), _q16(g[2]), t]
            elif ftype == _ANGLE:
                vals = [_q16(ang[0]), _q16(ang[1]), _q16(ang[2]), 0x1234]
            elif ftype == _MAG:
                m = np.asarray(mag, dtype=float)
                vals = [_q16(m[0]), _q16(m[1]), _q16(m[2]), t]
            else:
                vals = [_q16(c * 32768.0) for c in _zyx_quaternion(r, p, y)]  # Q0 (scalar), Q1, Q2, Q3
            out.append(_frame(ftype, vals))
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
            for frame in self.emulator.frames(eul):
                if frame[1] not in _CAN_TYPES:
                    continue  # a quaternion needs all four values: it does not fit 8 bytes
                self.bus.send(can.Message(arbitration_id=cid, is_extended_id=self.extended, data=frame[:8], dlc=8))
                sent += 1
        return sent
