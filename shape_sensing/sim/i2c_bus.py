"""Simulated I2C bus with the ``smbus2.SMBus`` calls the drivers use, routed through mux trees.

Every transaction is resolved the way the wires do it: starting from the host
segment, a device answers if it sits on a segment reachable through the
*current* control bytes of the simulated multiplexers. No device answering is
a NACK (``OSError`` EREMOTEIO, as Linux i2c-dev reports it). Several devices
answering is an address conflict: all of them take a write, and a read
returns the AND of their bytes (open-drain wiring); the log marks it.

The transaction log counts bytes and bits on the wire: each START or repeated
START and each STOP is one bit, each byte is 9 bits (8 data + ACK/NACK). A
virtual clock advances by the transaction's bits at the bus bit rate, so
stamps and achievable rates follow the bus speed.

Faults: per-address NACK and timeout probabilities, a timeout duration
(a stretched clock that the adapter gives up on, ``TimeoutError``), and the
devices' own faults (a dead or stuck mux, a sensor reset).
"""

from __future__ import annotations

import ctypes
import errno
from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

__all__ = ["BusStats", "Segment", "SimDevice", "SimI2CBus", "Transaction"]


class SimDevice(Protocol):
    """What a simulated device provides to the bus."""

    address: int
    name: str

    def acks(self) -> bool: ...

    def i2c_write(self, data: bytes, now_ns: int) -> None: ...

    def i2c_read(self, n: int, now_ns: int) -> bytes: ...


class Segment:
    """One stretch of SDA/SCL with the devices wired to it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.devices: list[SimDevice] = []

    def attach(self, device: SimDevice) -> SimDevice:
        """Wire ``device`` to this segment; returns it."""
        self.devices.append(device)
        return device

    def __repr__(self) -> str:
        return f"Segment({self.name!r}, {[d.name for d in self.devices]})"


@dataclass(frozen=True)
class Transaction:
    """One logged transaction."""

    t_ns: int
    op: str
    address: int
    written: int  # data bytes written after the address byte(s)
    read: int  # data bytes read
    bytes: int  # all bytes on the wire, address bytes included
    bits: int  # all bits: START/Sr/STOP + 9 per byte
    ok: bool
    conflict: bool = False
    error: str = ""


@dataclass
class BusStats:
    """Running totals of the log."""

    transactions: int = 0
    bytes: int = 0
    bits: int = 0
    nacks: int = 0
    timeouts: int = 0
    conflicts: int = 0
    by_op: Counter[str] = field(default_factory=Counter)

    def copy(self) -> BusStats:
        """A snapshot."""
        return BusStats(
            self.transactions, self.bytes, self.bits, self.nacks, self.timeouts, self.conflicts, Counter(self.by_op)
        )

    def minus(self, other: BusStats) -> BusStats:
        """Totals since the snapshot ``other``."""
        return BusStats(
            self.transactions - other.transactions,
            self.bytes - other.bytes,
            self.bits - other.bits,
            self.nacks - other.nacks,
            self.timeouts - other.timeouts,
            self.conflicts - other.conflicts,
            self.by_op - other.by_op,
        )


class SimI2CBus:
    """An ``smbus2.SMBus`` look-alike over simulated segments.

    Args:
        bitrate: SCL frequency in Hz (virtual clock and bit timing).
        seed: seed of the fault random generator.
        keep: how many transactions the log keeps (totals are unbounded).
        start_ns: initial virtual time.
    """

    def __init__(self, *, bitrate: float = 400_000.0, seed: int = 0, keep: int = 10_000, start_ns: int = 0) -> None:
        if bitrate <= 0:
            raise ValueError(f"bitrate {bitrate!r} invalid: expected > 0 Hz")
        self.host = Segment("host")
        self.bitrate = float(bitrate)
        self.rng = np.random.default_rng(seed)
        self.log: deque[Transaction] = deque(maxlen=keep)
        self.stats = BusStats()
        self.now_ns = int(start_ns)
        self.nack_rate: dict[int, float] = {}
        self.timeout_rate: dict[int, float] = {}
        self.timeout_s = 0.001
        self.closed = False
        self._routes: dict[int, list[SimDevice]] | None = None
        # Set to a list to record every transaction's bytes: (address, bytes written, bytes read, acknowledged).
        self.wire: list[tuple[int, bytes, bytes, bool]] | None = None

    # -- wiring ------------------------------------------------------------------
    def invalidate(self) -> None:
        """Forget cached routes (call after changing a mux's control byte by hand)."""
        self._routes = None

    def routes(self) -> dict[int, list[SimDevice]]:
        """Address -> devices answering it now."""
        if self._routes is None:
            routes: dict[int, list[SimDevice]] = {}
            stack = [self.host]
            seen: set[int] = set()
            while stack:
                seg = stack.pop()
                if id(seg) in seen:
                    continue
                seen.add(id(seg))
                for dev in seg.devices:
                    routes.setdefault(dev.address, []).append(dev)
                    opened = getattr(dev, "open_segments", None)
                    if opened is not None:
                        stack.extend(opened())
            self._routes = routes
        return self._routes

    # -- the smbus2 calls --------------------------------------------------------
    def write_byte(self, i2c_addr: int, value: int, force: bool | None = None) -> None:
        """S addr+W data P."""
        self._transfer("write_byte", i2c_addr, bytes([value & 0xFF]), 0)

    def read_byte(self, i2c_addr: int, force: bool | None = None) -> int:
        """S addr+R data P."""
        return self._transfer("read_byte", i2c_addr, b"", 1)[0]

    def write_byte_data(self, i2c_addr: int, register: int, value: int, force: bool | None = None) -> None:
        """S addr+W reg data P."""
        self._transfer("write_byte_data", i2c_addr, bytes([register & 0xFF, value & 0xFF]), 0)

    def read_byte_data(self, i2c_addr: int, register: int, force: bool | None = None) -> int:
        """S addr+W reg Sr addr+R data P."""
        return self._transfer("read_byte_data", i2c_addr, bytes([register & 0xFF]), 1)[0]

    def read_i2c_block_data(self, i2c_addr: int, register: int, length: int, force: bool | None = None) -> list[int]:
        """S addr+W reg Sr addr+R data*length P (length 1-32, as smbus2 allows)."""
        if not 1 <= length <= 32:
            raise ValueError(f"Desired block length over 32 bytes or below 1: {length}")
        return list(self._transfer("read_i2c_block_data", i2c_addr, bytes([register & 0xFF]), length))

    def write_i2c_block_data(
        self, i2c_addr: int, register: int, data: Sequence[int], force: bool | None = None
    ) -> None:
        """S addr+W reg data*len P (up to 32 data bytes)."""
        if len(data) > 32:
            raise ValueError(f"Data length cannot exceed 32 bytes: {len(data)}")
        self._transfer("write_i2c_block_data", i2c_addr, bytes([register & 0xFF, *[d & 0xFF for d in data]]), 0)

    # -- plain I2C (what a CircuitPython ``busio.I2C`` offers) ---------------------
    def write(self, address: int, data: bytes) -> None:
        """S addr+W data* P (an empty ``data`` only probes the address)."""
        self._transfer("write", address, bytes(data), 0)

    def read(self, address: int, n: int) -> bytes:
        """S addr+R data*n P: bytes from the device's current register pointer."""
        return self._transfer("read", address, b"", n)

    def write_read(self, address: int, data: bytes, n: int) -> bytes:
        """S addr+W data* Sr addr+R data*n P (one combined transfer)."""
        return self._transfer_msgs("write_read", address, [(False, bytes(data)), (True, n)])[0]

    def i2c_rdwr(self, *msgs: Any) -> None:
        """Combined transfer (Linux ``I2C_RDWR``): the messages of ``smbus2.i2c_msg`` joined by repeated STARTs.

        Each message is ``addr``, ``flags`` (bit 0: read), ``len`` and ``buf``; read messages are filled in
        place, as the kernel fills them. All messages must go to one address (the drivers never mix them).
        """
        if not msgs:
            raise ValueError("i2c_rdwr needs at least one message")
        address = int(msgs[0].addr)
        if any(int(m.addr) != address for m in msgs):
            raise ValueError(f"i2c_rdwr messages to several addresses: {[hex(int(m.addr)) for m in msgs]}")
        parts: list[tuple[bool, bytes | int]] = []
        for m in msgs:
            if int(m.flags) & 0x0001:
                parts.append((True, int(m.len)))
            else:
                parts.append((False, ctypes.string_at(m.buf, int(m.len))))
        replies = self._transfer_msgs("i2c_rdwr", address, parts)
        for m, reply in zip((m for m in msgs if int(m.flags) & 0x0001), replies, strict=True):
            ctypes.memmove(m.buf, reply, len(reply))

    def sleep(self, seconds: float) -> None:
        """Advance the virtual clock (inject as the drivers' ``sleep``)."""
        self.now_ns += int(seconds * 1e9)

    def clock(self) -> int:
        """The virtual clock in nanoseconds (inject as the drivers' ``clock``)."""
        return self.now_ns

    def close(self) -> None:
        """Mark closed (further calls raise)."""
        self.closed = True

    def __enter__(self) -> SimI2CBus:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- core --------------------------------------------------------------------
    def _transfer(self, op: str, address: int, written: bytes, nread: int) -> bytes:
        if self.closed:
            raise OSError(errno.EBADF, "bus is closed")
        if not 0 <= address <= 0x7F:
            raise ValueError(f"I2C address {address!r} out of range 0-0x7f")
        devices = [d for d in self.routes().get(address, []) if d.acks()]
        t0 = self.now_ns
        nack = not devices or (address in self.nack_rate and self.rng.random() < self.nack_rate[address])
        if nack:
            # START, address byte answered by NACK, STOP.
            self._log(Transaction(t0, op, address, 0, 0, 1, 1 + 9 + 1, False, error="nack"))
            self.stats.nacks += 1
            if self.wire is not None:
                self.wire.append((address, written, b"", False))
            raise OSError(errno.EREMOTEIO, f"Remote I/O error (no ACK from {address:#04x})")
        combined = nread > 0 and len(written) > 0  # register pointer write, then Sr and read
        nbytes = 1 + len(written) + nread + (1 if combined else 0)
        nbits = 2 + (1 if combined else 0) + 9 * nbytes
        if address in self.timeout_rate and self.rng.random() < self.timeout_rate[address]:
            self._log(Transaction(t0, op, address, len(written), nread, nbytes, nbits, False, error="timeout"))
            self.stats.timeouts += 1
            self.now_ns += int(self.timeout_s * 1e9)
            raise TimeoutError(errno.ETIMEDOUT, f"Connection timed out (clock stretched by {address:#04x})")
        data = b""
        if written:
            for d in devices:
                d.i2c_write(written, t0)
            if any(hasattr(d, "open_segments") for d in devices):
                self._routes = None
        if nread:
            replies = [d.i2c_read(nread, t0) for d in devices]
            data = replies[0]
            if len(replies) > 1:
                data = bytes(
                    np.bitwise_and.reduce(np.frombuffer(b"".join(replies), np.uint8).reshape(len(replies), nread))
                )
        conflict = len(devices) > 1
        self.stats.conflicts += conflict
        self._log(Transaction(t0, op, address, len(written), nread, nbytes, nbits, True, conflict))
        if self.wire is not None:
            self.wire.append((address, written, data, True))
        return data

    def _transfer_msgs(self, op: str, address: int, parts: list[tuple[bool, bytes | int]]) -> list[bytes]:
        """One START ... STOP with several messages (``(is_read, data or length)``), Sr between them."""
        if self.closed:
            raise OSError(errno.EBADF, "bus is closed")
        if not 0 <= address <= 0x7F:
            raise ValueError(f"I2C address {address!r} out of range 0-0x7f")
        devices = [d for d in self.routes().get(address, []) if d.acks()]
        t0 = self.now_ns
        if not devices or (address in self.nack_rate and self.rng.random() < self.nack_rate[address]):
            self._log(Transaction(t0, op, address, 0, 0, 1, 1 + 9 + 1, False, error="nack"))
            self.stats.nacks += 1
            if self.wire is not None:
                self.wire.append((address, b"".join(p for _, p in parts if isinstance(p, bytes)), b"", False))
            raise OSError(errno.EREMOTEIO, f"Remote I/O error (no ACK from {address:#04x})")
        written = sum(len(p) for _, p in parts if isinstance(p, bytes))
        nread = sum(p for _, p in parts if isinstance(p, int))
        nbytes = len(parts) + written + nread  # one address byte per message
        nbits = 1 + (len(parts) - 1) + 1 + 9 * nbytes  # START, Sr per extra message, STOP
        if address in self.timeout_rate and self.rng.random() < self.timeout_rate[address]:
            self._log(Transaction(t0, op, address, written, nread, nbytes, nbits, False, error="timeout"))
            self.stats.timeouts += 1
            self.now_ns += int(self.timeout_s * 1e9)
            raise TimeoutError(errno.ETIMEDOUT, f"Connection timed out (clock stretched by {address:#04x})")
        replies: list[bytes] = []
        for _, p in parts:
            if isinstance(p, int):
                got = [d.i2c_read(p, t0) for d in devices]
                data = got[0]
                if len(got) > 1:
                    data = bytes(np.bitwise_and.reduce(np.frombuffer(b"".join(got), np.uint8).reshape(len(got), -1)))
                replies.append(data)
            else:
                for d in devices:
                    d.i2c_write(p, t0)
                if any(hasattr(d, "open_segments") or d.address != address for d in devices):
                    self._routes = None  # a mux switched, or a device took a new address
        conflict = len(devices) > 1
        self.stats.conflicts += conflict
        self._log(Transaction(t0, op, address, written, nread, nbytes, nbits, True, conflict))
        if self.wire is not None:
            out = b"".join(p for _, p in parts if isinstance(p, bytes))
            self.wire.append((address, out, b"".join(replies), True))
        return replies

    def _log(self, tx: Transaction) -> None:
        self.log.append(tx)
        s = self.stats
        s.transactions += 1
        s.bytes += tx.bytes
        s.bits += tx.bits
        s.by_op[tx.op] += 1
        self.now_ns += round(tx.bits * 1e9 / self.bitrate)
