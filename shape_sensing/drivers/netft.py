"""ATI Net F/T over UDP: the Raw Data Transfer (RDT) protocol.

Per ATI's Net F/T manual (RDT interface, UDP port 49152), all fields big-endian (network order):

* Request (host -> sensor), 8 bytes: ``uint16 command_header = 0x1234``, ``uint16 command``,
  ``uint32 sample_count`` (0 = stream until stopped). Commands: 0x0000 stop streaming,
  0x0002 start high-speed real-time streaming, 0x0003 start high-speed buffered streaming,
  0x0042 set software bias.
* Response record, 36 bytes: ``uint32 rdt_sequence`` (+1 per RDT record sent),
  ``uint32 ft_sequence`` (the sensor's internal sample counter), ``uint32 status``
  (0 = healthy), then ``int32 Fx, Fy, Fz, Tx, Ty, Tz`` in counts. A buffered-mode packet holds
  several records back to back.

Force = counts / counts_per_force (N), torque = counts / counts_per_torque (N m); both factors
are the unit's configuration (its web page or ``netftapi2.xml``: ``cfgcpf``, ``cfgcpt``).

The socket is injected (a ``socket.socket``-like object with ``sendto`` and ``recvfrom``), so
the loopback emulator (:mod:`shape_sensing.sim.netft_emulator`) exercises the same code.
Lost records are counted from ``rdt_sequence`` gaps; a record older than the newest one seen is
counted as reordered and skipped, so the published stream stays in order.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from shape_sensing.config import Param, Schema
from shape_sensing.drivers.errors import BusError, DriverConfigError
from shape_sensing.geometry import FloatArray
from shape_sensing.types import DiagnosticLevel, DiagnosticStatus

__all__ = [
    "CMD_SET_BIAS",
    "CMD_START_BUFFERED",
    "CMD_START_REALTIME",
    "CMD_STOP",
    "RDT_HEADER",
    "RDT_PORT",
    "RECORD_SIZE",
    "SCHEMA",
    "NetFtReceiver",
    "RdtRecord",
    "RdtStats",
    "WrenchReading",
    "decode_records",
    "decode_request",
    "encode_record",
    "encode_request",
]

RDT_PORT = 49152
RDT_HEADER = 0x1234
CMD_STOP = 0x0000
CMD_START_REALTIME = 0x0002
CMD_START_BUFFERED = 0x0003
CMD_SET_BIAS = 0x0042
_REQUEST = struct.Struct(">HHI")
_RECORD = struct.Struct(">III6i")
RECORD_SIZE = _RECORD.size  # 36


def encode_request(command: int, sample_count: int = 0) -> bytes:
    """An RDT request."""
    return _REQUEST.pack(RDT_HEADER, command & 0xFFFF, sample_count & 0xFFFFFFFF)


def decode_request(data: bytes) -> tuple[int, int]:
    """``(command, sample_count)`` of a request.

    Raises:
        ValueError: wrong size or header.
    """
    if len(data) != _REQUEST.size:
        raise ValueError(f"RDT request of {len(data)} bytes: expected {_REQUEST.size}")
    header, command, count = _REQUEST.unpack(data)
    if header != RDT_HEADER:
        raise ValueError(f"RDT request header {header:#06x}: expected {RDT_HEADER:#06x}")
    return command, count


@dataclass(frozen=True)
class RdtRecord:
    """One RDT record in counts."""

    rdt_sequence: int
    ft_sequence: int
    status: int
    counts: tuple[int, int, int, int, int, int]


def encode_record(record: RdtRecord) -> bytes:
    """The 36 bytes of a record."""
    return _RECORD.pack(record.rdt_sequence & 0xFFFFFFFF, record.ft_sequence & 0xFFFFFFFF,
                        record.status & 0xFFFFFFFF, *record.counts)  # fmt: skip


def decode_records(packet: bytes) -> list[RdtRecord]:
    """The records of one packet (one in real-time mode, several in buffered mode).

    Raises:
        ValueError: the packet is not a whole number of 36-byte records.
    """
    if not packet or len(packet) % RECORD_SIZE:
        raise ValueError(f"RDT packet of {len(packet)} bytes: expected a multiple of {RECORD_SIZE}")
    return [RdtRecord(r[0], r[1], r[2], tuple(r[3:])) for r in _RECORD.iter_unpack(packet)]


@dataclass(frozen=True)
class WrenchReading:
    """A force/torque sample in SI units, stamped with the host's receive time."""

    stamp_ns: int
    rdt_sequence: int
    ft_sequence: int
    status: int
    force: FloatArray
    torque: FloatArray


@dataclass
class RdtStats:
    """Counters of the RDT stream."""

    records: int = 0
    lost: int = 0
    reordered: int = 0
    bad_packets: int = 0
    status_errors: int = 0

    def as_dict(self) -> dict[str, str]:
        return {k: str(v) for k, v in self.__dict__.items()}


class DatagramSocket(Protocol):
    """The part of ``socket.socket`` (UDP) the receiver uses."""

    def sendto(self, data: bytes, address: Any, /) -> int: ...

    def recvfrom(self, bufsize: int, /) -> tuple[bytes, Any]: ...


@dataclass
class NetFtReceiver:
    """Streams from one Net F/T.

    Args:
        sock: a UDP socket (non-blocking for :meth:`poll`).
        address: ``(host, port)`` of the sensor.
        counts_per_force, counts_per_torque: the unit's scale factors.
        clock: nanosecond clock for the stamps.
    """

    sock: DatagramSocket
    address: tuple[str, int]
    counts_per_force: float = 1_000_000.0
    counts_per_torque: float = 1_000_000.0
    clock: Callable[[], int] = time.time_ns
    stats: RdtStats = field(default_factory=RdtStats)
    last_ns: int | None = None
    _last_seq: int | None = None

    def __post_init__(self) -> None:
        for name in ("counts_per_force", "counts_per_torque"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v > 0):
                raise DriverConfigError(f"parameter '{name}' = {v!r}: expected a positive number of counts")

    def start(self, *, buffered: bool = False) -> None:
        """Ask for high-speed real-time (or buffered) streaming without end."""
        self.sock.sendto(encode_request(CMD_START_BUFFERED if buffered else CMD_START_REALTIME, 0), self.address)

    def stop(self) -> None:
        """Ask the sensor to stop streaming."""
        self.sock.sendto(encode_request(CMD_STOP, 0), self.address)

    def bias(self) -> None:
        """Ask the sensor to take the current load as zero (software bias)."""
        self.sock.sendto(encode_request(CMD_SET_BIAS, 0), self.address)

    def handle(self, packet: bytes, stamp_ns: int) -> list[WrenchReading]:
        """Decode one packet received at ``stamp_ns``; bad, lost and reordered records are counted."""
        try:
            records = decode_records(packet)
        except ValueError:
            self.stats.bad_packets += 1
            return []
        out = []
        for r in records:
            if self._last_seq is not None:
                gap = (r.rdt_sequence - self._last_seq) & 0xFFFFFFFF
                if gap == 0 or gap >= 0x80000000:  # a repeat or older than the newest seen
                    self.stats.reordered += 1
                    # a late record fills a gap counted as lost before
                    self.stats.lost = max(0, self.stats.lost - (gap != 0))
                    continue
                self.stats.lost += gap - 1
            self._last_seq = r.rdt_sequence
            if r.status:
                self.stats.status_errors += 1
            c = np.asarray(r.counts, dtype=float)
            out.append(WrenchReading(stamp_ns, r.rdt_sequence, r.ft_sequence, r.status,
                                     c[:3] / self.counts_per_force, c[3:] / self.counts_per_torque))  # fmt: skip
        self.stats.records += len(out)
        if out:
            self.last_ns = stamp_ns
        return out

    def poll(self, max_packets: int = 1000) -> list[WrenchReading]:
        """Drain the socket (non-blocking)."""
        out: list[WrenchReading] = []
        for _ in range(max_packets):
            try:
                packet, _ = self.sock.recvfrom(65536)
            except (TimeoutError, BlockingIOError):
                break
            out.extend(self.handle(packet, self.clock()))
        return out

    def diagnostics(self, now_ns: int, stale_after_ns: int = 200_000_000) -> DiagnosticStatus:
        """Health: stale, sensor status errors, loss."""
        st = self.stats
        fresh = self.last_ns is not None and now_ns - self.last_ns <= stale_after_ns
        level, msg = (DiagnosticLevel.OK, "streaming") if fresh else (DiagnosticLevel.WARN, "no recent record (stale)")
        if st.status_errors:
            level, msg = DiagnosticLevel.ERROR, f"{msg}, sensor status errors {st.status_errors}"
        elif fresh and (st.lost or st.reordered or st.bad_packets):
            msg += f", {st.lost} lost, {st.reordered} reordered, {st.bad_packets} bad packets"
        return DiagnosticStatus(name="netft", level=level, message=msg, values=st.as_dict())


def open_socket(local_port: int = 0, *, bind_address: str = "", timeout: float | None = 0.0) -> socket.socket:
    """A UDP socket for the receiver (non-blocking by default), bound to ``bind_address`` ('' = any interface).

    Raises:
        BusError: the socket cannot be bound.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.bind((bind_address, local_port))
    except OSError as exc:
        sock.close()
        raise BusError(f"cannot bind a UDP socket on {bind_address or '*'}:{local_port}: {exc}") from exc
    sock.settimeout(timeout)
    return sock


SCHEMA = Schema(
    node="netft",
    description="ATI Net F/T force/torque sensor over UDP (RDT), published as geometry_msgs/WrenchStamped.",
    params=(
        Param("address", str, "192.168.1.1", "the sensor's IP address"),
        Param("port", int, RDT_PORT, "the sensor's RDT port", min=1, max=65535),
        Param("bind_address", str, "", "local address the receiving socket binds ('' = any interface)"),
        Param("counts_per_force", float, 1_000_000.0, "the unit's cfgcpf (counts per N)", min=1e-9),
        Param("counts_per_torque", float, 1_000_000.0, "the unit's cfgcpt (counts per N m)", min=1e-9),
        Param("buffered", bool, False, "high-speed buffered streaming (several records per packet)"),
        Param("bias_on_start", bool, False, "take the load at start as zero (software bias)"),
        Param("poll_rate", float, 1000.0, "how often the socket is drained", min=1.0, max=10000.0, unit="Hz"),
        Param("stale_timeout", float, 0.2, "no record for this long is reported stale", min=0.0, unit="s"),
        Param("frame_id", str, "force_sensor", "frame of the published wrench"),
        Param("frame_prefix", str, "", "prefix of the published frame ids"),
    ),
)  # fmt: skip
