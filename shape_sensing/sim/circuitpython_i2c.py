"""A CircuitPython ``busio.I2C`` look-alike over a simulated bus, so CircuitPython drivers run on our simulators.

Adafruit's CircuitPython drivers talk to an I2C object through ``adafruit_bus_device.I2CDevice``, which
needs only ``try_lock``, ``unlock``, ``writeto``, ``readfrom_into`` and ``writeto_then_readfrom`` (the
``start``/``end`` slice arguments of CircuitPython's ``busio.I2C``) and, for probing, ``scan``.
:class:`CircuitPythonI2C` provides them over :class:`~shape_sensing.sim.i2c_bus.SimI2CBus`, so no
board, no Blinka platform detection and no ``/dev/i2c-N`` are involved. A missing ACK raises
``OSError`` as Blinka's Linux backend does.
"""

from __future__ import annotations

from typing import Any

from shape_sensing.sim.i2c_bus import SimI2CBus

__all__ = ["CircuitPythonI2C"]


def _span(buf: Any, start: int, end: int | None) -> tuple[int, int]:
    return start, len(buf) if end is None else end


class CircuitPythonI2C:
    """``busio.I2C`` over a simulated bus.

    Args:
        bus: the simulated bus.
    """

    def __init__(self, bus: SimI2CBus) -> None:
        self.bus = bus
        self.locked = False

    def try_lock(self) -> bool:
        """Take the bus lock; ``False`` if it is held already."""
        if self.locked:
            return False
        self.locked = True
        return True

    def unlock(self) -> None:
        """Release the bus lock."""
        self.locked = False

    def scan(self) -> list[int]:
        """Addresses that acknowledge a zero-length write, as ``busio.I2C.scan``."""
        found = []
        for address in range(0x08, 0x78):
            try:
                self.bus.write(address, b"")
            except OSError:
                continue
            found.append(address)
        return found

    def writeto(self, address: int, buffer: Any, *, start: int = 0, end: int | None = None) -> None:
        """Write ``buffer[start:end]``."""
        a, b = _span(buffer, start, end)
        self.bus.write(address, bytes(buffer[a:b]))

    def readfrom_into(self, address: int, buffer: Any, *, start: int = 0, end: int | None = None) -> None:
        """Read into ``buffer[start:end]``."""
        a, b = _span(buffer, start, end)
        buffer[a:b] = self.bus.read(address, b - a)

    def writeto_then_readfrom(
        self,
        address: int,
        buffer_out: Any,
        buffer_in: Any,
        *,
        out_start: int = 0,
        out_end: int | None = None,
        in_start: int = 0,
        in_end: int | None = None,
    ) -> None:
        """Write ``buffer_out[out_start:out_end]``, repeated START, read into ``buffer_in[in_start:in_end]``."""
        oa, ob = _span(buffer_out, out_start, out_end)
        ia, ib = _span(buffer_in, in_start, in_end)
        buffer_in[ia:ib] = self.bus.write_read(address, bytes(buffer_out[oa:ob]), ib - ia)
