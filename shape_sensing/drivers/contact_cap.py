"""The vine robot's tip contact cap: limit switches -> contact angle, and tip heading from a BNO055.

The cap (seed 004) carries ``n`` limit switches equally spaced over its sensing arc (19 over the
front half, 10 degrees apart, by default) and a BNO055. Switch ``i`` sits at angle
``-arc/2 + i * arc/(n-1)`` from the cap's x axis (the tip heading), positive counter-clockwise
seen from above (REP-103: about +z). A hemispherical cap touches a flat obstacle where its surface
normal is the obstacle's, so the mean angle ``phi`` of the pressed switches is the direction of the
obstacle normal seen from the tip; the angle between the heading and the obstacle surface (the
paper's contact angle, 90 deg = head-on) is ``pi/2 - |phi|``.

Contact is often lost for a moment while the tip slides along an obstacle; the cap holds the last
reading for ``hold_time`` seconds (the paper's hold of the previous reading) and says so (``held``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from shape_sensing.config import ConfigError, Param, Schema
from shape_sensing.drivers.bno055 import BNO055, Mode, plan_reads
from shape_sensing.drivers.tca9548a import TCA9548A, TCA9548A_ADDRESSES

__all__ = [
    "SCHEMA",
    "CapHeading",
    "CapReading",
    "ContactCap",
    "contact_angle_from_cap",
    "heading_from_quaternion",
    "switch_angles",
]


def switch_angles(n: int, arc: float) -> np.ndarray:
    """Angles (rad) of ``n`` switches equally spaced over ``arc`` (rad), centred on the cap axis."""
    if n < 1:
        raise ConfigError(f"parameter 'n_switches' = {n!r}: expected >= 1")
    if not 0 < arc <= 2 * math.pi:
        raise ConfigError(f"parameter 'sensing_arc' = {arc!r}: expected 0 < arc <= 2 pi rad")
    if n == 1:
        return np.zeros(1)
    return np.linspace(-arc / 2, arc / 2, n)


def contact_angle_from_cap(phi: float) -> float:
    """The paper's contact angle (heading to obstacle surface, rad) from the cap angle ``phi`` of the normal."""
    return math.pi / 2 - abs(phi)


def heading_from_quaternion(q: Any) -> float:
    """Yaw (rad, about +z) of an ``[x, y, z, w]`` orientation: the tip heading in the plane."""
    x, y, z, w = (float(v) for v in q)
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


@dataclass(frozen=True)
class CapReading:
    """The cap's state after one switch reading."""

    stamp_ns: int
    switch_mask: int
    in_contact: bool
    held: bool
    contact_angle: float  # rad, cap angle phi of the mean pressed switch (NaN before any contact)
    held_for: float  # s


class ContactCap:
    """Switch bitmask -> contact state with a hold through brief contact loss.

    Args:
        n_switches: switches on the cap.
        sensing_arc: arc they span (rad).
        hold_time: how long a lost contact is held (s); 0 disables the hold.
    """

    def __init__(self, n_switches: int = 19, sensing_arc: float = math.pi, hold_time: float = 0.15) -> None:
        self.angles = switch_angles(n_switches, sensing_arc)
        if not (math.isfinite(hold_time) and hold_time >= 0):
            raise ConfigError(f"parameter 'hold_time' = {hold_time!r}: expected a number of seconds >= 0")
        self.n = n_switches
        self.hold_ns = round(hold_time * 1e9)
        self._valid_bits = (1 << n_switches) - 1
        self._last_live_ns: int | None = None
        self._angle = math.nan
        self.stray_bits = 0

    def angle_of(self, mask: int) -> float:
        """Mean angle of the pressed switches (NaN when none)."""
        idx = [i for i in range(self.n) if mask >> i & 1]
        return float(np.mean(self.angles[idx])) if idx else math.nan

    def update(self, stamp_ns: int, mask: int) -> CapReading:
        """One switch reading."""
        if mask & ~self._valid_bits:
            self.stray_bits += 1  # bits above n_switches: wiring fault, ignored
            mask &= self._valid_bits
        if mask:
            self._angle = self.angle_of(mask)
            self._last_live_ns = stamp_ns
            return CapReading(stamp_ns, mask, True, False, self._angle, 0.0)
        if self._last_live_ns is not None:
            age = stamp_ns - self._last_live_ns
            if 0 <= age <= self.hold_ns and self.hold_ns > 0:
                return CapReading(stamp_ns, 0, True, True, self._angle, age * 1e-9)
        return CapReading(stamp_ns, 0, False, False, self._angle, 0.0)


class CapHeading:
    """The cap's BNO055 read through the project's driver: orientation -> tip heading (yaw).

    Args:
        bus: an ``smbus2.SMBus``-like bus.
        address: 0x28 or 0x29.
        sleep: injected sleep (simulations need not wait).
        configure: check the chip id and start NDOF fusion.
        mux_address, mux_channel: the TCA9548A in front of the BNO055, if any (selected before each read).
    """

    def __init__(
        self,
        bus: Any,
        address: int = 0x28,
        *,
        sleep: Callable[[float], None] | None = None,
        configure: bool = True,
        mux_address: int | None = None,
        mux_channel: int = 0,
    ) -> None:
        self.chip = BNO055(bus, address, **({"sleep": sleep} if sleep is not None else {}))
        self.plan = plan_reads(["orientation", "angular_velocity", "calibration"])
        self.mux = TCA9548A(bus, mux_address) if mux_address else None
        self.mux_channel = mux_channel
        self._select()
        if configure:
            self.chip.check_chip_id()
            self.chip.configure(Mode.NDOF)

    def _select(self) -> None:
        if self.mux is not None:  # another master may have switched the mux: select before every read
            self.mux.select(self.mux_channel)

    def read(self) -> tuple[np.ndarray, np.ndarray, float]:
        """``(quaternion [x, y, z, w], angular velocity rad/s, heading rad)``.

        Raises:
            OSError: the bus failed; ProtocolError: a short read.
        """
        self._select()
        d = self.chip.read(self.plan)
        assert d.orientation is not None and d.angular_velocity is not None
        q = d.orientation
        norm = float(np.linalg.norm(q))
        if not 0.5 < norm < 1.5:
            raise ValueError(f"BNO055 quaternion norm {norm:.3f}: not a rotation (fusion not running?)")
        q = q / norm
        return q, d.angular_velocity, heading_from_quaternion(q)


SCHEMA = Schema(
    node="contact_cap",
    description="Tip contact cap: limit switches (from the base station's state) and a BNO055 heading.",
    params=(
        Param("n_switches", int, 19, "limit switches on the cap", min=1, max=32),
        Param("sensing_arc", float, math.pi, "arc the switches span, centred on the heading", min=1e-3,
              max=2 * math.pi, unit="rad"),
        Param("hold_time", float, 0.15, "a lost contact is held this long (0: no hold)", min=0.0, unit="s"),
        Param("i2c_bus", int, 1, "I2C bus number of the BNO055 (/dev/i2c-N); -1: no BNO055", min=-1),
        Param("bno055_address", int, 0x28, "BNO055 address", choices=(0x28, 0x29)),
        Param("mux_address", int, 0, "TCA9548A address if the BNO055 sits behind one (0: no mux)",
              choices=(0, *TCA9548A_ADDRESSES)),
        Param("mux_channel", int, 0, "TCA9548A channel of the BNO055", min=0, max=7),
        Param("imu_rate", float, 50.0, "BNO055 read rate", min=1.0, max=100.0, unit="Hz"),
        Param("stale_timeout", float, 0.5, "no switch state for this long is reported stale", min=0.0, unit="s"),
        Param("frame_id", str, "vine_cap", "frame of the cap state and IMU"),
        Param("frame_prefix", str, "", "prefix of the published frame ids"),
    ),
)  # fmt: skip
