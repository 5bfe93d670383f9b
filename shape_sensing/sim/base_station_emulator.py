"""Byte-level emulator of the vine robot base station's microcontroller (see :mod:`shape_sensing.drivers.base_station`).

It quantises the physical state as the firmware would (encoder counts, 10-bit ADC), frames it with
a sequence number, its own microsecond clock and the CRC, and can inject line faults: garbage
bytes, frames split across writes, lost frames and corrupted bytes. The bytes reach the real
driver through pyserial on a pty (:func:`open_pty`) or directly through ``feed``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from shape_sensing.drivers.base_station import BaseStationCalibration, StateFrame, encode_state
from shape_sensing.sim.wt901_emulator import open_pty

__all__ = ["BaseStationEmulator", "LineFaults", "PtyLink", "open_pty"]


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
        calibration: the true units of the hardware (the driver may be given another, e.g. uncalibrated).
        faults: line faults to inject.
        seed: seed of the fault generator.
    """

    calibration: BaseStationCalibration = field(default_factory=BaseStationCalibration)
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
    ) -> StateFrame:
        """The frame the firmware builds at device time ``t`` (s)."""
        cal = self.calibration
        f = StateFrame(
            sequence=self.sequence & 0xFFFF,
            device_time_us=round(t * 1e6) & 0xFFFFFFFF,
            encoder_counts=cal.counts(length),
            pressure_adc=cal.adc(pressure),
            setpoint_adc=cal.adc(setpoint),
            start_switch=start,
            cap_switches=cap_mask,
        )
        self.sequence += 1
        return f

    def step(
        self, t: float, length: float, pressure: float, setpoint: float = 0.0, start: bool = True, cap_mask: int = 0
    ) -> bytes:
        """The bytes on the line for one control cycle (faults applied)."""
        data = encode_state(self.frame(t, length, pressure, setpoint, start, cap_mask))
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
