"""TCA9548A 8-channel I2C switch (TI SCPS207), on an smbus2-like bus.

The chip has one 8-bit control register, written and read without a register
pointer: bit ``i`` set connects channel ``i`` (several may be set; 0 closes
all, the power-up state). A selection takes effect at the STOP that ends the
write. Addresses are 0x70-0x77 (pins A2..A0).
"""

from __future__ import annotations

from typing import Protocol

from shape_sensing.drivers.errors import DriverConfigError

__all__ = ["TCA9548A", "TCA9548A_ADDRESSES"]

TCA9548A_ADDRESSES = tuple(range(0x70, 0x78))


class _Bus(Protocol):
    def write_byte(self, i2c_addr: int, value: int, force: bool | None = None) -> None: ...

    def read_byte(self, i2c_addr: int, force: bool | None = None) -> int: ...


class TCA9548A:
    """One TCA9548A.

    Args:
        bus: an ``smbus2.SMBus``-like object (``write_byte``/``read_byte``).
        address: 0x70-0x77.

    Bus errors (``OSError``: NACK, timeout) propagate to the caller.
    """

    def __init__(self, bus: _Bus, address: int = 0x70) -> None:
        if address not in TCA9548A_ADDRESSES:
            raise DriverConfigError(f"TCA9548A address {address:#04x} invalid: expected 0x70-0x77")
        self.bus = bus
        self.address = address

    def select_mask(self, mask: int) -> None:
        """Write the control byte (bit ``i`` opens channel ``i``)."""
        if not 0 <= mask <= 0xFF:
            raise DriverConfigError(f"TCA9548A control byte {mask!r} invalid: expected 0-255")
        self.bus.write_byte(self.address, mask)

    def select(self, channel: int) -> None:
        """Open ``channel`` (0-7) alone."""
        if not 0 <= channel <= 7:
            raise DriverConfigError(f"TCA9548A channel {channel!r} invalid: expected 0-7")
        self.select_mask(1 << channel)

    def deselect(self) -> None:
        """Close every channel."""
        self.select_mask(0)

    def read_control(self) -> int:
        """The control byte as the chip holds it."""
        return int(self.bus.read_byte(self.address)) & 0xFF

    def channels(self) -> list[int]:
        """Open channels, read from the chip."""
        byte = self.read_control()
        return [ch for ch in range(8) if byte & (1 << ch)]
