"""I2C bus topology behind layered TCA9548A multiplexers, and the router that opens paths through it.

A topology is a tree of *segments*. The host segment is the adapter's own bus;
every multiplexer channel is a segment of its own. A device (a mux or a
sensor) sits on one segment and is reached by its *path*: the ordered
``(mux, channel)`` pairs from the host segment down to its segment.

When a mux channel is open, the devices behind it answer on the segment above
it as if they were wired there. Two devices answering the same address at the
same time drive the bus together (their read data is ANDed on the wire), so
:class:`Topology` refuses any configuration where that can happen while the
router opens one channel per mux, and :class:`MuxRouter` closes a child's
channel before it could expose a second device with the address it is about
to talk to.

The topology is given as parallel arrays, so that it fits ROS 2 parameters::

    mux_names:       [root, arm_a]
    mux_addresses:   [112, 113]       # 0x70, 0x71
    mux_parents:     ["", root]       # "" = on the host segment
    mux_channels:    [-1, 0]          # channel of the parent mux (-1 on the host segment)
    sensor_names:    [imu_00, ...]
    sensor_frames:   [imu_00, ...]
    sensor_addresses: [40, ...]       # 0x28 / 0x29
    sensor_muxes:    [arm_a, ...]
    sensor_channels: [0, ...]
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from shape_sensing.drivers.errors import DriverConfigError, DriverError
from shape_sensing.drivers.tca9548a import TCA9548A, TCA9548A_ADDRESSES

__all__ = [
    "BNO055_ADDRESSES",
    "HOST",
    "MuxError",
    "MuxRouter",
    "MuxSpec",
    "SensorSpec",
    "Topology",
    "TopologyError",
    "path_text",
]

_log = logging.getLogger(__name__)

BNO055_ADDRESSES = (0x28, 0x29)
HOST = ""  # name of the host segment's "mux" in parent fields

Path = tuple[tuple[str, int], ...]  # ((mux name, channel), ...) from the host segment down


class TopologyError(DriverConfigError):
    """The bus topology is inconsistent; the message names the device and the conflict."""


class MuxError(DriverError):
    """A multiplexer did not answer, or did not hold the channel it was told to select."""

    def __init__(self, mux: str, reason: str) -> None:
        super().__init__(f"mux {mux!r}: {reason}")
        self.mux = mux
        self.reason = reason


@dataclass(frozen=True)
class MuxSpec:
    """A TCA9548A in the tree.

    Attributes:
        name: unique name.
        address: 7-bit address, 0x70-0x77.
        parent: name of the mux it hangs off, or ``""`` for the host segment.
        channel: channel of ``parent`` it is wired to (``-1`` on the host segment).
    """

    name: str
    address: int
    parent: str = HOST
    channel: int = -1


@dataclass(frozen=True)
class SensorSpec:
    """A BNO055 in the tree.

    Attributes:
        name: unique name (topic namespace).
        frame_id: its TF frame (before any ``frame_prefix``).
        address: 0x28 or 0x29.
        mux: name of the mux it hangs off, or ``""`` for the host segment.
        channel: channel of ``mux`` (``-1`` on the host segment).
    """

    name: str
    frame_id: str
    address: int
    mux: str = HOST
    channel: int = -1


class Topology:
    """A validated tree of muxes and sensors.

    Raises:
        TopologyError: duplicate names, unknown or cyclic parents, channels out of
            range, duplicate sensor paths, or two devices able to answer one
            address on one segment.
    """

    def __init__(
        self,
        muxes: Sequence[MuxSpec],
        sensors: Sequence[SensorSpec],
        *,
        sensor_addresses: Sequence[int] | None = BNO055_ADDRESSES,
        sensor_kind: str = "BNO055",
    ) -> None:
        allowed = tuple(range(0x08, 0x78)) if sensor_addresses is None else tuple(sensor_addresses)
        self.muxes: dict[str, MuxSpec] = {}
        for m in muxes:
            if not m.name:
                raise TopologyError("a mux has an empty name")
            if m.name in self.muxes:
                raise TopologyError(f"mux name {m.name!r} is used twice")
            if m.address not in TCA9548A_ADDRESSES:
                raise TopologyError(
                    f"mux {m.name!r}: address {m.address:#04x} is not a TCA9548A address (expected 0x70-0x77)"
                )
            self.muxes[m.name] = m
        for m in muxes:
            self._check_attachment(f"mux {m.name!r}", m.parent, m.channel)
        self._mux_paths = {name: self._resolve(name) for name in self.muxes}
        self.sensors: list[SensorSpec] = []
        names: set[str] = set()
        for s in sensors:
            if not s.name:
                raise TopologyError("a sensor has an empty name")
            if s.name in names:
                raise TopologyError(f"sensor name {s.name!r} is used twice")
            names.add(s.name)
            if s.address not in allowed:
                expected = " or ".join(f"{a:#04x}" for a in allowed) if len(allowed) <= 4 else "0x08-0x77"
                raise TopologyError(
                    f"sensor {s.name!r}: address {s.address:#04x} is not a {sensor_kind} address (expected {expected})"
                )
            self._check_attachment(f"sensor {s.name!r}", s.mux, s.channel)
            self.sensors.append(s)
        self._check_paths()
        self._check_conflicts()

    # -- construction ----------------------------------------------------------
    @classmethod
    def from_params(cls, params: Mapping[str, Any], **kwargs: Any) -> Topology:
        """Build from the parallel-array parameters (see the module docstring); ``kwargs`` go to the constructor."""

        def arr(name: str) -> list[Any]:
            value = params.get(name, [])
            if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
                raise TopologyError(f"parameter {name!r} = {value!r}: expected a list")
            return list(value)

        mux_fields = [arr(n) for n in ("mux_names", "mux_addresses", "mux_parents", "mux_channels")]
        sensor_fields = [
            arr(n) for n in ("sensor_names", "sensor_frames", "sensor_addresses", "sensor_muxes", "sensor_channels")
        ]
        if len({len(f) for f in mux_fields}) > 1:
            raise TopologyError(
                "mux_names, mux_addresses, mux_parents and mux_channels must have the same length; got "
                f"{[len(f) for f in mux_fields]}"
            )
        if len({len(f) for f in sensor_fields}) > 1:
            raise TopologyError(
                "sensor_names, sensor_frames, sensor_addresses, sensor_muxes and sensor_channels must have the same "
                f"length; got {[len(f) for f in sensor_fields]}"
            )
        muxes = [MuxSpec(str(n), int(a), str(p), int(c)) for n, a, p, c in zip(*mux_fields, strict=True)]
        sensors = [
            SensorSpec(str(n), str(f) or str(n), int(a), str(m), int(c))
            for n, f, a, m, c in zip(*sensor_fields, strict=True)
        ]
        return cls(muxes, sensors, **kwargs)

    def to_params(self) -> dict[str, list[Any]]:
        """The parallel-array parameters of this topology (inverse of :meth:`from_params`)."""
        ms = list(self.muxes.values())
        return {
            "mux_names": [m.name for m in ms],
            "mux_addresses": [m.address for m in ms],
            "mux_parents": [m.parent for m in ms],
            "mux_channels": [m.channel for m in ms],
            "sensor_names": [s.name for s in self.sensors],
            "sensor_frames": [s.frame_id for s in self.sensors],
            "sensor_addresses": [s.address for s in self.sensors],
            "sensor_muxes": [s.mux for s in self.sensors],
            "sensor_channels": [s.channel for s in self.sensors],
        }

    # -- queries ---------------------------------------------------------------
    def mux_path(self, name: str) -> Path:
        """Path of the segment mux ``name`` sits on."""
        return self._mux_paths[name]

    def sensor_path(self, sensor: SensorSpec) -> Path:
        """Path of the segment ``sensor`` sits on."""
        if sensor.mux == HOST:
            return ()
        return (*self._mux_paths[sensor.mux], (sensor.mux, sensor.channel))

    def sensor(self, name: str) -> SensorSpec:
        """The sensor called ``name``."""
        for s in self.sensors:
            if s.name == name:
                return s
        raise KeyError(f"no sensor {name!r}; known: {[s.name for s in self.sensors]}")

    def devices_on(self, segment: Path) -> list[tuple[str, int]]:
        """``(device name, address)`` of every device wired directly to ``segment``."""
        out = [(f"mux {m.name}", m.address) for m in self.muxes.values() if self._mux_paths[m.name] == segment]
        out += [(f"sensor {s.name}", s.address) for s in self.sensors if self.sensor_path(s) == segment]
        return out

    def children(self, mux: str) -> list[str]:
        """Muxes wired to a channel of ``mux``."""
        return [m.name for m in self.muxes.values() if m.parent == mux]

    def subtree_sensors(self, mux: str) -> list[str]:
        """Names of the sensors behind ``mux`` (at any depth)."""
        return [s.name for s in self.sensors if any(name == mux for name, _ in self.sensor_path(s))]

    def sweep_order(self) -> list[SensorSpec]:
        """Sensors in depth-first path order, so consecutive sensors share as much path as possible."""

        def key(s: SensorSpec) -> tuple[Any, ...]:
            path = self.sensor_path(s)
            return (tuple((self.muxes[n].address, n, c) for n, c in path), s.address, s.name)

        return sorted(self.sensors, key=key)

    # -- validation ------------------------------------------------------------
    def _check_attachment(self, what: str, parent: str, channel: int) -> None:
        if parent == HOST:
            if channel != -1:
                raise TopologyError(f"{what}: on the host segment its channel must be -1, got {channel}")
            return
        if parent not in self.muxes:
            raise TopologyError(f"{what}: unknown mux {parent!r}; known muxes: {sorted(self.muxes)}")
        if not 0 <= channel <= 7:
            raise TopologyError(f"{what}: channel {channel} of mux {parent!r} is out of range (expected 0-7)")

    def _resolve(self, name: str) -> Path:
        path: list[tuple[str, int]] = []
        seen = [name]
        m = self.muxes[name]
        while m.parent != HOST:
            if m.parent in seen:
                cycle = " -> ".join([*seen, m.parent])
                raise TopologyError(f"mux parents form a cycle: {cycle}")
            seen.append(m.parent)
            path.append((m.parent, m.channel))
            m = self.muxes[m.parent]
        return tuple(reversed(path))

    def _check_paths(self) -> None:
        where: dict[tuple[Path, int], str] = {}
        for s in self.sensors:
            key = (self.sensor_path(s), s.address)
            if key in where:
                raise TopologyError(
                    f"sensors {where[key]!r} and {s.name!r} have the same path {path_text(key[0])} "
                    f"and address {s.address:#04x}"
                )
            where[key] = s.name

    def _check_conflicts(self) -> None:
        """Every segment plus all segments above it must hold each address once."""
        segments = {()} | {self.sensor_path(s) for s in self.sensors}
        segments |= {(*self._mux_paths[m], (m, c)) for m in self.muxes for c in range(8)}
        for seg in segments:
            visible: dict[int, str] = {}
            for depth in range(len(seg) + 1):
                for device, address in self.devices_on(seg[:depth]):
                    if address in visible:
                        raise TopologyError(
                            f"address conflict on segment {path_text(seg)}: {visible[address]} and {device} "
                            f"both answer {address:#04x} when that segment is open"
                        )
                    visible[address] = device


def path_text(path: Path) -> str:
    """``root:0/arm_a:2`` (``host`` for the host segment)."""
    return "host" if not path else "/".join(f"{n}:{c}" for n, c in path)


class SMBusLike(Protocol):
    """The part of ``smbus2.SMBus`` the multiplexer driver uses."""

    def write_byte(self, i2c_addr: int, value: int, force: bool | None = None) -> None: ...

    def read_byte(self, i2c_addr: int, force: bool | None = None) -> int: ...


class MuxRouter:
    """Opens the path to a segment with as few mux writes as possible.

    The router remembers every mux's control byte (``None`` when unknown, e.g.
    at start or after an error) and writes a mux only when its byte must
    change. Before a device is addressed, every other device that could answer
    the same address (behind a child mux left open on the way) is hidden by
    closing that child's channel.

    Args:
        bus: an ``smbus2.SMBus``-like object.
        topology: the validated tree.
        on_write: called with the mux name after each successful control write
            (for statistics).
    """

    def __init__(self, bus: SMBusLike, topology: Topology, *, on_write: Callable[[str], None] | None = None) -> None:
        self.topology = topology
        self.drivers = {m.name: TCA9548A(bus, m.address) for m in topology.muxes.values()}
        self.state: dict[str, int | None] = dict.fromkeys(topology.muxes)
        self.on_write = on_write
        self.writes = 0
        self._visible: Counter[int] | None = None
        self._visible_by_state: dict[tuple[int | None, ...], Counter[int]] = {}
        self._open_path: Path | None = None
        # Segment -> addresses of the sensors on it, and the muxes on it (precomputed: routing is on the hot path).
        self._sensor_addresses: dict[Path, list[int]] = {}
        for s in topology.sensors:
            self._sensor_addresses.setdefault(topology.sensor_path(s), []).append(s.address)
        self._muxes_on: dict[Path, list[MuxSpec]] = {}
        for m in topology.muxes.values():
            self._muxes_on.setdefault(topology.mux_path(m.name), []).append(m)

    def invalidate(self, mux: str | None = None) -> None:
        """Forget the control byte of ``mux`` (all muxes when ``None``)."""
        if mux is None:
            self.state = dict.fromkeys(self.state)
        else:
            self.state[mux] = None
        self._visible = None
        self._open_path = None

    def open(self, path: Path, address: int) -> None:
        """Make the device at ``address`` on segment ``path`` the only one answering that address.

        Raises:
            MuxError: a mux on the way did not accept its control byte.
        """
        if path != self._open_path:
            for name, channel in path:
                self._set(name, 1 << channel)
            self._open_path = path
        if self._visible is None:
            self._visible = self._visible_addresses()
        if self._visible[address] > 1:
            self._hide_duplicates(path, address)

    def verify(self, mux: str) -> None:
        """Read back ``mux``'s control byte and compare with what was written.

        Raises:
            MuxError: no answer, or a different byte (a stuck mux).
        """
        expected = self.state[mux]
        try:
            got = self.drivers[mux].read_control()
        except OSError as exc:
            self.invalidate(mux)
            raise MuxError(mux, f"no answer on read-back ({exc})") from exc
        if expected is None:
            self.state[mux] = got  # learnt from the chip
            self._visible = None
        elif got != expected:
            self.invalidate(mux)
            raise MuxError(mux, f"holds control byte {got:#04x}, expected {expected:#04x} (stuck?)")

    def exercise(self, mux: str) -> None:
        """Prove ``mux`` follows writes: close it, read back 0 (its byte is then known).

        Raises:
            MuxError: no answer or a wrong read-back.
        """
        self.open(self.topology.mux_path(mux), self.topology.muxes[mux].address)
        self.invalidate(mux)
        self._set(mux, 0)
        self.verify(mux)

    def close_all(self) -> None:
        """Write 0 to every mux, leaves first (best effort: errors are logged)."""
        order = sorted(self.topology.muxes, key=lambda n: -len(self.topology.mux_path(n)))
        for name in order:
            try:
                self.open(self.topology.mux_path(name), self.topology.muxes[name].address)
                self._set(name, 0)
            except MuxError as exc:
                _log.warning("could not close %s: %s", name, exc)
        self._open_path = None

    # -- internals ---------------------------------------------------------------
    def _set(self, name: str, byte: int) -> None:
        if self.state[name] == byte:
            return
        try:
            self.drivers[name].select_mask(byte)
        except OSError as exc:
            self.invalidate(name)
            raise MuxError(name, f"control write {byte:#04x} failed ({exc})") from exc
        self.state[name] = byte
        self.writes += 1
        self._visible = None
        if self.on_write is not None:
            self.on_write(name)

    def _visible_addresses(self) -> Counter[int]:
        """Addresses answering on the host bus given the known control bytes (unknown = all open).

        A function of the control bytes alone (the tree is fixed): a sweep goes through the same few states
        again and again, so each state's answer is kept (callers only read it).
        """
        key = tuple(self.state.values())
        found = self._visible_by_state.get(key)
        if found is None:
            if len(self._visible_by_state) >= 256:
                self._visible_by_state.clear()
            found = self._visible_by_state[key] = self._count_visible()
        return found

    def _count_visible(self) -> Counter[int]:
        counts: Counter[int] = Counter()
        stack: list[Path] = [()]
        while stack:
            seg = stack.pop()
            for m in self._muxes_on.get(seg, ()):
                counts[m.address] += 1
                byte = self.state[m.name]
                for ch in range(8):
                    if byte is None or byte & (1 << ch):
                        stack.append((*seg, (m.name, ch)))
            counts.update(self._sensor_addresses.get(seg, ()))
        return counts

    def _hide_duplicates(self, path: Path, address: int) -> None:
        """Close off-path child channels until ``address`` answers once."""
        on_path = {name for name, _ in path}
        for _ in range(len(self.state) + 1):
            assert self._visible is not None
            if self._visible[address] <= 1:
                return
            # Close the deepest off-path mux that is reachable and has a channel open.
            candidates = [
                name for name, byte in self.state.items() if name not in on_path and byte != 0 and self._reachable(name)
            ]
            if not candidates:
                break
            victim = max(candidates, key=lambda n: len(self.topology.mux_path(n)))
            self._set(victim, 0)
            self._visible = self._visible_addresses()
        raise MuxError(path[-1][0] if path else "host", f"address {address:#04x} still answers more than once")

    def _reachable(self, name: str) -> bool:
        for parent, ch in self.topology.mux_path(name):
            byte = self.state[parent]
            if byte is not None and not byte & (1 << ch):
                return False
        return True
