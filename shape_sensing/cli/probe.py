"""``shape-sensing probe``: find the sensors on the I2C buses (through nested TCA9548A switches), serial ports and CAN.

Every device is identified by what its datasheet or protocol says it answers, never by what our drivers
assume (the constants below are written down here on their own):

* BNO055 (BST-BNO055-DS000 4.3.1-4.3.4, table 4-2): 0x28/0x29, registers 0x00-0x03 read CHIP_ID 0xA0,
  ACC_ID 0xFB, MAG_ID 0x32, GYR_ID 0x0F (all four are checked: a second chip at the address ANDs into them).
* VL53L5CX (ST UM2884 and the ULD's ``vl53l5cx_is_alive``): 16-bit register indices; write 0x00 to 0x7FFF
  (page 0), read device id 0x0000 = 0xF0 and revision id 0x0001 = 0x02, then 0x02 to 0x7FFF (back to page 2).
  Power-up address 0x29.
* ISM330BX (datasheet, register WHO_AM_I): 0x6A/0x6B, WHO_AM_I register 0x0F reads 0x71.
* TCA9548A (SCPS207): 0x70-0x77, one control byte without register pointer that reads back what was
  written (checked with 0x00 and 0x01, then closed again).
* WT901 (WitMotion WT901 datasheet 5.1): 11-byte frames ``0x55, type 0x50-0x5F, four int16, checksum``
  (low byte of the sum of the first 10) at any of the WitMotion rates 4800-921600 bit/s; over CAN the
  first 8 bytes of a frame (0x55, type 0x50-0x54, three int16) per message, one CAN ID per board.
* Vine base station (its firmware's STATE frame): ``A5 5A``, length 13, id 0x01, then CRC-16/CCITT-FALSE
  of length .. payload, at 115200 bit/s.

The I2C scan ACK-probes every address 0x08-0x77 of a segment with a zero-length write, identifies what
answers, and descends into every channel of every TCA9548A found (one channel open at a time, the path
above it held open). An address that already answers upstream cannot be told apart from a device behind
the channel by its ACK; it is identified again, and a different answer is reported as an address
conflict. A mux channel where nothing new answers is shown empty; it is a dead branch when a higher
channel of the same switch is used (channels are wired in order), and a switch with nothing behind any
channel is one too. Two chips of different kinds at one
address answer with the AND of their bytes: that shows as an unknown or wrong id. (Two chips of the same
kind at one address answer the same id as one chip: no ID register tells them apart; the draft
configuration's sensor count is the check.)

Exit status: 0 when every device was identified and nothing is wrong, 1 when the tree has problems
(conflicts, wrong ids, dead branches, muxes that do not switch), 2 on errors (a bus that cannot be opened,
bad arguments).
"""

from __future__ import annotations

import argparse
import glob
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "BASE_STATION_BAUD",
    "WT901_BAUDS",
    "CanFind",
    "Device",
    "I2cTree",
    "ProbeReport",
    "SerialFind",
    "add_arguments",
    "draft_config",
    "probe_can",
    "probe_i2c",
    "probe_serial",
    "run",
]

BNO055_ADDRESSES = (0x28, 0x29)
BNO055_CHIP_ID_REG, BNO055_CHIP_ID = 0x00, 0xA0
BNO055_IDS = bytes([0xA0, 0xFB, 0x32, 0x0F])  # CHIP_ID, ACC_ID, MAG_ID, GYR_ID
VL53L5CX_ADDRESS = 0x29
VL53L5CX_PAGE_REG = 0x7FFF
VL53L5CX_DEVICE_ID, VL53L5CX_REVISION_ID = 0xF0, 0x02
ISM330BX_ADDRESSES = (0x6A, 0x6B)
ISM330BX_WHO_AM_I_REG, ISM330BX_WHO_AM_I = 0x0F, 0x71
TCA9548A_ADDRESSES = tuple(range(0x70, 0x78))
WT901_BAUDS = (115200, 9600, 230400, 460800, 921600, 57600, 38400, 19200, 4800)  # the usual ones first
WT901_TYPES = range(0x50, 0x60)
WT901_CAN_TYPES = range(0x50, 0x55)
BASE_STATION_BAUD = 115200
SCAN_ADDRESSES = range(0x08, 0x78)


class RawI2C(Protocol):
    """Plain I2C transfers (what the probe needs of a bus)."""

    def write(self, address: int, data: bytes) -> None: ...

    def write_read(self, address: int, data: bytes, n: int) -> bytes: ...

    def read(self, address: int, n: int) -> bytes: ...


class SmbusRaw:
    """:class:`RawI2C` over an ``smbus2.SMBus`` (``I2C_RDWR`` combined transfers)."""

    def __init__(self, bus: Any) -> None:
        self.bus = bus

    def write(self, address: int, data: bytes) -> None:
        from smbus2 import i2c_msg

        self.bus.i2c_rdwr(i2c_msg.write(address, list(data)))

    def write_read(self, address: int, data: bytes, n: int) -> bytes:
        from smbus2 import i2c_msg

        rd = i2c_msg.read(address, n)
        self.bus.i2c_rdwr(i2c_msg.write(address, list(data)), rd)
        return bytes(rd.buf[: rd.len])

    def read(self, address: int, n: int) -> bytes:
        from smbus2 import i2c_msg

        rd = i2c_msg.read(address, n)
        self.bus.i2c_rdwr(rd)
        return bytes(rd.buf[: rd.len])


@dataclass
class Device:
    """One device found on an I2C segment."""

    address: int
    kind: str  # BNO055, VL53L5CX, ISM330BX, TCA9548A, unknown
    detail: str = ""
    problem: str = ""
    channels: dict[int, Segment] = field(default_factory=dict)  # TCA9548A: channel -> what is behind it


@dataclass
class Segment:
    """What answers on one segment (the host bus or a mux channel)."""

    name: str
    devices: list[Device] = field(default_factory=list)
    problem: str = ""


@dataclass
class I2cTree:
    """One adapter's tree."""

    bus: str
    root: Segment


@dataclass
class SerialFind:
    """A device on a serial port."""

    port: str
    kind: str  # WT901, base station
    baud: int
    detail: str


@dataclass
class CanFind:
    """A WT901 board on a CAN interface."""

    channel: str
    can_id: int
    extended: bool
    types: list[int]


@dataclass
class ProbeReport:
    """Everything found."""

    i2c: list[I2cTree] = field(default_factory=list)
    serial: list[SerialFind] = field(default_factory=list)
    can: list[CanFind] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        """Every problem, with where it is."""
        out: list[str] = []

        def walk(seg: Segment, where: str) -> None:
            if seg.problem:
                out.append(f"{where}: {seg.problem}")
            for d in seg.devices:
                if d.problem:
                    out.append(f"{where} {d.address:#04x}: {d.problem}")
                for ch, child in sorted(d.channels.items()):
                    walk(child, f"{where} > {d.address:#04x} ch{ch}")

        for tree in self.i2c:
            walk(tree.root, tree.bus)
        return out + self.errors

    def text(self) -> str:
        """The tree as printed."""
        lines: list[str] = []

        def dev_line(d: Device) -> str:
            s = f"{d.address:#04x} {d.kind}"
            if d.detail:
                s += f" ({d.detail})"
            if d.problem:
                s += f"  <-- {d.problem}"
            return s

        def walk(seg: Segment, indent: str) -> None:
            if seg.problem:
                lines.append(f"{indent}!! {seg.problem}")
            if not seg.devices and not seg.problem:
                lines.append(f"{indent}(nothing answers)")
            for d in seg.devices:
                lines.append(indent + dev_line(d))
                quiet = [ch for ch, c in sorted(d.channels.items()) if not c.devices and not c.problem]
                if quiet:
                    lines.append(f"{indent}    ch{','.join(map(str, quiet))}: (nothing answers)")
                for ch, child in sorted(d.channels.items()):
                    if ch in quiet:
                        continue
                    lines.append(f"{indent}    ch{ch}:")
                    walk(child, indent + "        ")

        for tree in self.i2c:
            lines.append(f"I2C {tree.bus}")
            walk(tree.root, "    ")
        for f in self.serial:
            lines.append(f"serial {f.port}: {f.kind} at {f.baud} bit/s ({f.detail})")
        for c in self.can:
            kind = "extended" if c.extended else "standard"
            lines.append(f"CAN {c.channel}: WT901 board, {kind} id {c.can_id:#x} (frame types "
                         + " ".join(f"{t:#04x}" for t in c.types) + ")")  # fmt: skip
        problems = self.problems()
        lines.append(f"{len(problems)} problem(s)" + (":" if problems else ""))
        lines += [f"  {p}" for p in problems]
        return "\n".join(lines)


# -- I2C --------------------------------------------------------------------------------------------------------


def _acks(bus: RawI2C, address: int) -> bool:
    try:
        bus.write(address, b"")
    except OSError:
        return False
    return True


def _identify(bus: RawI2C, address: int) -> Device:
    """What answers at ``address`` (the path to it is open)."""
    try:
        if address in TCA9548A_ADDRESSES:
            return _identify_mux(bus, address)
        if address in ISM330BX_ADDRESSES:
            who = bus.write_read(address, bytes([ISM330BX_WHO_AM_I_REG]), 1)[0]
            if who == ISM330BX_WHO_AM_I:
                return Device(address, "ISM330BX", f"WHO_AM_I {who:#04x}")
            return Device(address, "unknown", problem=f"WHO_AM_I {who:#04x}, expected {ISM330BX_WHO_AM_I:#04x} "
                          "for an ISM330BX here (a chip with a wrong id, or two chips at one address)")  # fmt: skip
        if address in BNO055_ADDRESSES:
            ids = bus.write_read(address, bytes([BNO055_CHIP_ID_REG]), len(BNO055_IDS))
            cid = ids[0]
            if ids == BNO055_IDS:
                return Device(address, "BNO055", f"CHIP_ID {cid:#04x}")
            if cid == BNO055_CHIP_ID:
                why = f"ACC/MAG/GYR_ID read {ids[1:].hex(' ')}, expected {BNO055_IDS[1:].hex(' ')}"
                return Device(address, "BNO055?", f"CHIP_ID {cid:#04x}", problem=f"{why} (two chips at one address?)")
            if address == VL53L5CX_ADDRESS:
                vl = _identify_vl53l5cx(bus, address)
                if vl is not None:
                    return vl
            return Device(address, "unknown", problem=f"CHIP_ID {cid:#04x}, expected {BNO055_CHIP_ID:#04x} for a "
                          "BNO055 here (a chip with a wrong id, or two chips at one address)")  # fmt: skip
        return Device(address, "unknown", "no identification known for this address")
    except OSError as exc:
        return Device(address, "unknown", problem=f"acknowledged, then failed: {exc}")


def _identify_vl53l5cx(bus: RawI2C, address: int) -> Device | None:
    bus.write(address, bytes([VL53L5CX_PAGE_REG >> 8, VL53L5CX_PAGE_REG & 0xFF, 0x00]))
    dev = bus.write_read(address, b"\x00\x00", 1)[0]
    rev = bus.write_read(address, b"\x00\x01", 1)[0]
    bus.write(address, bytes([VL53L5CX_PAGE_REG >> 8, VL53L5CX_PAGE_REG & 0xFF, 0x02]))
    if dev == VL53L5CX_DEVICE_ID and rev == VL53L5CX_REVISION_ID:
        return Device(address, "VL53L5CX", f"device id {dev:#04x}, revision {rev:#04x}")
    if dev == VL53L5CX_DEVICE_ID:
        return Device(address, "VL53L5CX", f"device id {dev:#04x}",
                      problem=f"revision id {rev:#04x}, expected {VL53L5CX_REVISION_ID:#04x}")  # fmt: skip
    return None


def _identify_mux(bus: RawI2C, address: int) -> Device:
    readback = []
    for pattern in (0x00, 0x01, 0x00):
        bus.write(address, bytes([pattern]))
        readback.append(bus.read(address, 1)[0])
    if readback == [0x00, 0x01, 0x00]:
        return Device(address, "TCA9548A")
    return Device(address, "TCA9548A?", problem=f"control byte reads back {[hex(b) for b in readback]} after "
                  "writing 0x00, 0x01, 0x00: not a TCA9548A, or a switch that does not switch")  # fmt: skip


def _scan_segment(bus: RawI2C, name: str, upstream: dict[int, Device]) -> Segment:
    seg = Segment(name)
    present = [a for a in SCAN_ADDRESSES if _acks(bus, a)]
    for a in present:
        if a in upstream:
            if upstream[a].kind.startswith("TCA9548A"):
                continue  # a switch on the path (or beside it): writing its control byte would close the path
            again = _identify(bus, a)
            up = upstream[a]
            if (again.kind, again.detail) != (up.kind, up.detail):
                seg.devices.append(Device(a, again.kind if again.kind != "unknown" else "?", again.detail,
                                          problem=f"address conflict: {a:#04x} also answers upstream "
                                          f"({up.kind}); with this channel open the bus sees both"))  # fmt: skip
            continue
        seg.devices.append(_identify(bus, a))
    seen = dict(upstream)
    seen.update({d.address: d for d in seg.devices})
    for d in seg.devices:
        if d.kind != "TCA9548A":
            continue
        for ch in range(8):
            try:
                bus.write(d.address, bytes([1 << ch]))
                child = _scan_segment(bus, f"{name} > {d.address:#04x} ch{ch}", seen)
            except OSError as exc:
                child = Segment(f"{name} > {d.address:#04x} ch{ch}", problem=f"mux stopped answering: {exc}")
            d.channels[ch] = child
        used = [ch for ch, c in d.channels.items() if c.devices]
        if not used:
            d.problem = d.problem or "dead branch: nothing answers behind any of its channels"
        for ch, child in d.channels.items():
            if not child.devices and not child.problem and used and ch < max(used):
                # channels are wired in order: an empty one below a used one is a broken branch
                child.problem = f"dead branch: nothing answers behind this channel, though ch{max(used)} is used"
        try:
            bus.write(d.address, b"\x00")
        except OSError:
            d.problem = d.problem or "does not answer any more (could not close its channels)"
    return seg


def probe_i2c(bus: RawI2C, name: str) -> I2cTree:
    """Scan one adapter's tree."""
    return I2cTree(name, _scan_segment(bus, "host", {}))


# -- serial -----------------------------------------------------------------------------------------------------


def _wt901_frames(data: bytes) -> list[int]:
    """Types of the checksummed WT901 frames in ``data``."""
    types, i = [], 0
    while i + 11 <= len(data):
        if data[i] == 0x55 and data[i + 1] in WT901_TYPES and sum(data[i : i + 10]) & 0xFF == data[i + 10]:
            types.append(data[i + 1])
            i += 11
        else:
            i += 1
    return types


def _base_station_frames(data: bytes) -> int:
    """STATE frames that the base-station driver's own parser accepts in ``data`` (sync, length, id and CRC)."""
    from shape_sensing.drivers.base_station import BaseStationParser

    return len(BaseStationParser().feed(data))


def probe_serial(
    port: str, open_port: Callable[[str, int], Any], *, window_s: float = 0.3, nbytes: int = 2048
) -> SerialFind | None:
    """Listen on ``port`` at each candidate rate; the first rate that carries checked frames names the device."""
    bauds = list(dict.fromkeys([BASE_STATION_BAUD, *WT901_BAUDS]))
    for baud in bauds:
        ser = open_port(port, baud)
        try:
            data = b""
            t_end = time.monotonic() + window_s
            while len(data) < nbytes and time.monotonic() < t_end:
                data += ser.read(nbytes - len(data))
        finally:
            ser.close()
        types = _wt901_frames(data)
        if len(types) >= 3:
            kinds = " ".join(f"{t:#04x}" for t in sorted(set(types)))
            return SerialFind(port, "WT901", baud, f"{len(types)} frames, types {kinds}")
        if baud == BASE_STATION_BAUD and (n := _base_station_frames(data)) >= 2:
            return SerialFind(port, "base station", baud, f"{n} STATE frames")
    return None


# -- CAN --------------------------------------------------------------------------------------------------------


def probe_can(channel: str, bus: Any, *, window_s: float = 0.5) -> list[CanFind]:
    """WT901 boards heard on ``bus`` within ``window_s`` (at least two frames each)."""
    seen: dict[tuple[int, bool], list[int]] = {}
    t_end = time.monotonic() + window_s
    while time.monotonic() < t_end:
        msg = bus.recv(timeout=0.05)
        if msg is None or msg.is_error_frame:
            continue
        data = bytes(msg.data)
        if len(data) == 8 and data[0] == 0x55 and data[1] in WT901_CAN_TYPES:
            seen.setdefault((int(msg.arbitration_id), bool(msg.is_extended_id)), []).append(data[1])
    return [CanFind(channel, cid, ext, sorted(set(t))) for (cid, ext), t in sorted(seen.items()) if len(t) >= 2]


# -- configuration draft ----------------------------------------------------------------------------------------


def _flow(values: Iterable[Any]) -> str:
    return "[" + ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in values) + "]"


def _bno055_section(tree: I2cTree, bus_number: int | None) -> list[str] | None:
    muxes: list[tuple[str, int, str, int]] = []  # name, address, parent, channel
    sensors: list[tuple[int, str, int]] = []  # address, mux, channel

    def walk(seg: Segment, parent: str, channel: int) -> None:
        for d in seg.devices:
            if d.kind == "BNO055" and not d.problem:
                sensors.append((d.address, parent, channel))
            if d.kind == "TCA9548A" and d.channels:
                name = f"mux_{len(muxes)}"
                muxes.append((name, d.address, parent, channel))
                for ch, child in sorted(d.channels.items()):
                    walk(child, name, ch)

    walk(tree.root, "", -1)
    if not sensors:
        return None
    names = [f"imu_{i:02d}" for i in range(len(sensors))]
    return [
        "/**/bno055_chain:",
        "  ros__parameters:",
        f"    bus: {bus_number if bus_number is not None else 1}",
        f"    mux_names: {_flow(m[0] for m in muxes)}",
        f"    mux_addresses: {_flow(m[1] for m in muxes)}",
        f"    mux_parents: {_flow(m[2] for m in muxes)}",
        f"    mux_channels: {_flow(m[3] for m in muxes)}",
        "    # in scan order: reorder base to tip",
        f"    sensor_names: {_flow(names)}",
        f"    sensor_frames: {_flow('vine_' + n for n in names)}",
        f"    sensor_addresses: {_flow(s[0] for s in sensors)}",
        f"    sensor_muxes: {_flow(s[1] for s in sensors)}",
        f"    sensor_channels: {_flow(s[2] for s in sensors)}",
    ]


def draft_config(report: ProbeReport, bus_numbers: dict[str, int]) -> tuple[str, list[str]]:
    """A ROS 2 parameter file for what was found, and the robot kinds it is for."""
    lines: list[str] = []
    kinds: list[str] = []
    for tree in report.i2c:
        section = _bno055_section(tree, bus_numbers.get(tree.bus))
        if section is not None:
            kinds.append(f"vine robot with BNO055 IMUs (hinge-arc; {tree.bus})")
            lines += section
            break  # one chain per file: the node reads one bus
    wt_serial = [f for f in report.serial if f.kind == "WT901"]
    if wt_serial:
        kinds.append("hyper-redundant robot with WT901s over UART (rigid-module)")
        bauds = sorted({f.baud for f in wt_serial})
        lines += ["/**/wt901:", "  ros__parameters:", "    mode: uart",
                  f"    frame_ids: {_flow(f'platform_{i}' for i in range(len(wt_serial)))}",
                  f"    ports: {_flow(f.port for f in wt_serial)}", f"    baud: {bauds[0]}"]  # fmt: skip
        if len(bauds) > 1:
            lines.append(f"    # the sensors run at different rates {bauds}: set them to one (WT901 BAUD register)")
    elif report.can:
        kinds.append("hyper-redundant robot with WT901s over CAN (rigid-module)")
        chan = report.can[0].channel
        boards = [c for c in report.can if c.channel == chan]
        lines += ["/**/wt901:", "  ros__parameters:", "    mode: can", f"    can_channel: {chan}",
                  f"    frame_ids: {_flow(f'platform_{i}' for i in range(len(boards)))}",
                  f"    can_ids: {_flow(c.can_id for c in boards)}",
                  f"    extended_ids: {'true' if boards[0].extended else 'false'}"]  # fmt: skip
    stations = [f for f in report.serial if f.kind == "base station"]
    if stations:
        kinds.append("vine robot base station (vine-collision)")
        lines += ["/**/base_station:", "  ros__parameters:", f"    port: {stations[0].port}",
                  f"    baud: {stations[0].baud}"]  # fmt: skip
    tofs = sum(1 for t in report.i2c for d in _all_devices(t.root) if d.kind == "VL53L5CX")
    imus = sum(1 for t in report.i2c for d in _all_devices(t.root) if d.kind == "ISM330BX")
    if tofs or imus:
        kinds.append(f"ToF rings: {tofs} VL53L5CX, {imus} ISM330BX (tof_ring; layout as config/tof_rings.yaml)")
    head = ["# Draft written by `shape-sensing probe --write-config`: check names, order (base to tip) and frames.",
            *(f"# found: {k}" for k in kinds)]  # fmt: skip
    return "\n".join(head + lines) + "\n", kinds


def _all_devices(seg: Segment) -> Iterable[Device]:
    for d in seg.devices:
        yield d
        for child in d.channels.values():
            yield from _all_devices(child)


# -- command line -----------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``shape-sensing probe``."""
    parser.add_argument("--i2c", type=int, nargs="*", default=None, metavar="N",
                        help="I2C adapters to scan (/dev/i2c-N); default all")  # fmt: skip
    parser.add_argument("--serial", nargs="*", default=None, metavar="PORT",
                        help="serial ports to listen on; default /dev/ttyUSB* and /dev/ttyACM*")  # fmt: skip
    parser.add_argument("--can", nargs="*", default=None, metavar="CHANNEL",
                        help="socketcan channels to listen on (e.g. can0); default none")  # fmt: skip
    parser.add_argument("--window", type=float, default=0.3, help="seconds to listen per serial rate and CAN bus")
    parser.add_argument("--write-config", metavar="PATH", help="write a configuration draft for what was found")


def run(
    args: argparse.Namespace,
    *,
    i2c: dict[str, tuple[RawI2C, int | None]] | None = None,
    open_port: Callable[[str, int], Any] | None = None,
    can_buses: dict[str, Any] | None = None,
) -> int:
    """Probe, print the tree, optionally write the draft; see the module doc for the exit status.

    ``i2c``/``open_port``/``can_buses`` replace the real buses (tests pass simulated ones).
    """
    if args.window <= 0:
        print(f"shape-sensing probe: --window {args.window}: expected > 0 s", file=sys.stderr)
        return 2
    report = ProbeReport()
    buses = i2c if i2c is not None else _open_i2c(args.i2c, report)
    bus_numbers = {name: n for name, (_, n) in buses.items() if n is not None}
    for name, (bus, _) in buses.items():
        try:
            report.i2c.append(probe_i2c(bus, name))
        except OSError as exc:
            report.errors.append(f"I2C {name}: {exc}")
    ports = args.serial if args.serial is not None else sorted(glob.glob("/dev/ttyUSB*") + glob.glob("/dev/ttyACM*"))
    opener = open_port or _open_serial
    for port in ports:
        try:
            found = probe_serial(port, opener, window_s=args.window)
        except OSError as exc:
            report.errors.append(f"serial {port}: cannot read: {exc}")
            continue
        if found is not None:
            report.serial.append(found)
    for channel, bus in (can_buses if can_buses is not None else _open_can(args.can or [], report)).items():
        report.can += probe_can(channel, bus, window_s=args.window)
    print(report.text())
    if args.write_config:
        text, kinds = draft_config(report, bus_numbers)
        if not kinds:
            print("shape-sensing probe: no known sensor found: no configuration written", file=sys.stderr)
            return 2
        path = Path(args.write_config)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        except OSError as exc:
            print(f"shape-sensing probe: cannot write {path}: {exc}", file=sys.stderr)
            return 2
        print(f"configuration draft written to {path} ({'; '.join(kinds)})")
    if report.errors and not (report.i2c or report.serial or report.can):
        return 2
    return 1 if report.problems() else 0


def _open_i2c(numbers: Sequence[int] | None, report: ProbeReport) -> dict[str, tuple[RawI2C, int | None]]:
    if numbers is None:
        numbers = sorted(int(p.rsplit("-", 1)[1]) for p in glob.glob("/dev/i2c-*"))
    out: dict[str, tuple[RawI2C, int | None]] = {}
    for n in numbers:
        try:
            import smbus2

            out[f"/dev/i2c-{n}"] = (SmbusRaw(smbus2.SMBus(n)), n)
        except (OSError, ImportError) as exc:
            report.errors.append(f"I2C /dev/i2c-{n}: cannot open: {exc}")
    return out


def _open_serial(port: str, baud: int) -> Any:
    import serial

    try:
        return serial.Serial(port, baud, timeout=0.05)
    except serial.SerialException as exc:
        raise OSError(str(exc)) from exc


def _open_can(channels: Sequence[str], report: ProbeReport) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for ch in channels:
        try:
            import can

            out[ch] = can.Bus(interface="socketcan", channel=ch)
        except (OSError, ImportError, ValueError) as exc:
            report.errors.append(f"CAN {ch}: cannot open: {exc}")
        except Exception as exc:  # python-can raises its own CanError subclasses
            report.errors.append(f"CAN {ch}: cannot open: {exc}")
    return out
