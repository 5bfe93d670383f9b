"""Byte-level emulator of the vine robot base station's microcontroller.

Its driver is :mod:`shape_sensing.drivers.base_station`; the frame layout and CRC are written down here again.

It quantises the physical state as the firmware would (encoder counts, 10-bit ADC), frames it with
a sequence number, its own microsecond clock and the CRC, and can inject line faults: garbage
bytes, frames split across writes, lost frames and corrupted bytes. The bytes reach the real
driver through pyserial on a pty (:func:`open_pty`) or directly through ``feed``.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from shape_sensing.sim.wt901_emulator import open_pty

__all__ = ["BaseStationEmulator", "FirmwareFrame", "HardwareUnits", "LineFaults", "PtyLink", "crc16_ccitt", "open_pty"]

# The firmware's STATE frame, written down here from the protocol spec (docs/hardware) on its own:
# A5 5A, payload length, message id 0x01, uint16 sequence, uint32 micros(), payload (int32 encoder
# counts, uint16 pressure ADC, uint16 setpoint ADC, uint8 switches, uint32 cap switches), then the
# CRC-16/CCITT-FALSE of length .. payload; all little-endian.
_SYNC = b"\xa5\x5a"
_MSG_STATE = 0x01
_PAYLOAD = struct.Struct("<iHHBI")
_HEAD = struct.Struct("<BBHI")  # after the sync


def crc16_ccitt(data: bytes) -> int:
    """CRC-16/CCITT-FALSE bit by bit (poly 0x1021, init 0xFFFF, MSB first, no final XOR; "123456789" -> 0x29B1)."""
    crc = 0xFFFF
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


@dataclass(frozen=True)
class HardwareUnits:
    """The emulated hardware's true units: encoder metres per count and zero, ADC pascals per count and zero."""

    metres_per_count: float = 2.5e-4
    zero_counts: int = 0
    length_offset: float = 0.0
    pascals_per_adc: float = 34473.8 / 1023.0  # 0-5 PSI regulator feedback on the Arduino's 10-bit ADC
    pressure_zero_adc: int = 0


class FirmwareFrame(NamedTuple):
    """The values one STATE frame carries (raw device units)."""

    sequence: int
    device_time_us: int
    encoder_counts: int
    pressure_adc: int
    setpoint_adc: int
    start_switch: bool
    cap_switches: int


def _encode(f: FirmwareFrame) -> bytes:
    payload = _PAYLOAD.pack(int(f.encoder_counts), int(f.pressure_adc) & 0xFFFF, int(f.setpoint_adc) & 0xFFFF,
                            1 if f.start_switch else 0, int(f.cap_switches) & 0xFFFFFFFF)  # fmt: skip
    body = _HEAD.pack(len(payload), _MSG_STATE, f.sequence & 0xFFFF, f.device_time_us & 0xFFFFFFFF) + payload
    return _SYNC + body + struct.pack("<H", crc16_ccitt(body))


@dataclass
class LineFaults:
    """Probabilities of faults per frame (0 = clean line)."""

    garbage: float = 0.0  # random bytes inserted before the frame
    drop: float = 0.0  # the frame is lost
    corrupt: float = 0.0  # one byte of the frame is flipped (CRC error)
    max_garbage: int = 12


@dataclass
class BaseStationEmulator:
    """The microcontroller: physical state in, STATE frame bytes out.

    Args:
        calibration: the true units of the hardware (the driver may be given another, e.g. uncalibrated); any
            object with :class:`HardwareUnits`' fields.
        faults: line faults to inject.
        seed: seed of the fault generator.
    """

    calibration: Any = field(default_factory=HardwareUnits)
    faults: LineFaults = field(default_factory=LineFaults)
    seed: int = 0
    sequence: int = 0
    sent: int = 0
    dropped: int = 0
    corrupted: int = 0
    garbage_bytes: int = 0

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def frame(
        self, t: float, length: float, pressure: float, setpoint: float, start: bool, cap_mask: int
    ) -> FirmwareFrame:
        """The frame the firmware builds at device time ``t`` (s): counts rounded, ADC rounded, clipped to 10 bits."""
        cal = self.calibration

        def adc(p: float) -> int:
            return int(np.clip(round(p / cal.pascals_per_adc) + cal.pressure_zero_adc, 0, 1023))

        f = FirmwareFrame(
            sequence=self.sequence & 0xFFFF,
            device_time_us=round(t * 1e6) & 0xFFFFFFFF,
            encoder_counts=round((length - cal.length_offset) / cal.metres_per_count) + cal.zero_counts,
            pressure_adc=adc(pressure),
            setpoint_adc=adc(setpoint),
            start_switch=start,
            cap_switches=cap_mask,
        )
        self.sequence += 1
        return f

    def step(
        self, t: float, length: float, pressure: float, setpoint: float = 0.0, start: bool = True, cap_mask: int = 0
    ) -> bytes:
        """The bytes on the line for one control cycle (faults applied)."""
        data = _encode(self.frame(t, length, pressure, setpoint, start, cap_mask))
        fl, rng = self.faults, self.rng
        if fl.drop and rng.random() < fl.drop:
            self.dropped += 1
            return b""
        out = bytearray()
        if fl.garbage and rng.random() < fl.garbage:
            junk = rng.integers(0, 256, int(rng.integers(1, fl.max_garbage + 1)), dtype=np.uint8).tobytes()
            if rng.random() < 0.5:  # a false sync too, the hardest case
                junk = b"\xa5\x5a" + junk
            out += junk
            self.garbage_bytes += len(junk)
        frame = bytearray(data)
        if fl.corrupt and rng.random() < fl.corrupt:
            k = int(rng.integers(2, len(frame)))
            frame[k] ^= 1 << int(rng.integers(0, 8))
            self.corrupted += 1
        out += frame
        self.sent += 1
        return bytes(out)


class PtyLink:
    """The emulator's side of a pseudo-terminal: ``write`` bytes that pyserial reads from ``path``."""

    def __init__(self) -> None:
        self.master, self.path = open_pty()

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.master, view)
            view = view[n:]

    def close(self) -> None:
        os.close(self.master)

    def __enter__(self) -> PtyLink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
