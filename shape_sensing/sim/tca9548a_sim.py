"""Register-level TCA9548A simulator: one control byte, eight downstream segments.

Behaviour from the datasheet (TI SCPS207): a write after the address byte is
stored in the control register (of several bytes, the last one is kept); a
read returns the control register; power-up state 0 (all channels closed).
Faults: ``dead`` (never acknowledges, connects nothing) and ``stuck`` (acknowledges writes but
keeps its control byte).
"""

from __future__ import annotations

from shape_sensing.sim.i2c_bus import Segment

__all__ = ["SimTCA9548A"]


class SimTCA9548A:
    """A simulated TCA9548A.

    Args:
        address: 0x70-0x77.
        name: label used in logs and error texts.
    """

    def __init__(self, address: int, name: str = "") -> None:
        if not 0x70 <= address <= 0x77:
            raise ValueError(f"TCA9548A address {address:#04x} invalid: expected 0x70-0x77")
        self.address = address
        self.name = name or f"tca9548a@{address:#04x}"
        self.control = 0
        self.channels: list[Segment] = [Segment(f"{self.name}:{ch}") for ch in range(8)]
        self.dead = False
        self.stuck = False
        self.writes = 0

    def acks(self) -> bool:
        """Whether the chip acknowledges its address."""
        return not self.dead

    def i2c_write(self, data: bytes, now_ns: int) -> None:
        """Bytes after the address byte of a write."""
        self.writes += 1
        if data and not self.stuck:
            self.control = data[-1]

    def i2c_read(self, n: int, now_ns: int) -> bytes:
        """Bytes returned to a read (the control byte, repeated)."""
        return bytes([self.control]) * n

    def open_segments(self) -> list[Segment]:
        """Segments connected upstream right now."""
        if self.dead:  # an unpowered switch connects nothing
            return []
        return [seg for ch, seg in enumerate(self.channels) if self.control & (1 << ch)]

    def power_cycle(self) -> None:
        """Back to the power-up state (all channels closed)."""
        self.control = 0
