"""Errors of the driver layer (hardware I/O, ROS-free).

Drivers raise these for faults a caller must act on (a bad configuration, a
bus that cannot be opened). A single bad frame is never an exception: it is
counted and skipped, and the counters appear in diagnostics.
"""

from __future__ import annotations

__all__ = ["BusError", "DriverConfigError", "DriverError", "ProtocolError"]


class DriverError(RuntimeError):
    """Base class of the driver layer's errors."""


class DriverConfigError(DriverError, ValueError):
    """A driver option is invalid; the message names the option, the value and what was expected."""


class ProtocolError(DriverError):
    """Bytes or frames that violate a device protocol where a caller asked for strictness."""


class BusError(DriverError):
    """A bus (serial port, CAN interface) failed or cannot be opened."""
