"""A loopback ATI Net F/T (RDT over UDP; the driver is :mod:`shape_sensing.drivers.netft`).

It binds 127.0.0.1 only, answers RDT requests (start real-time or buffered streaming with a
sample count, stop, bias) and sends records of the wrench the caller sets, with optional loss and
reordering of packets. It is driven by the caller (no thread): :meth:`serve` handles pending
requests and :meth:`send` emits one sample to the streaming client.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["LOOPBACK", "NetFtEmulator"]

LOOPBACK = "127.0.0.1"
# ATI Net F/T Installation and Operation Manual (9620-05-NET FT), section "RDT Interface", stated here on
# its own: request = uint16 header 0x1234, uint16 command, uint32 sample count, big-endian; record =
# uint32 rdt_sequence, uint32 ft_sequence, uint32 status, int32 Fx Fy Fz Tx Ty Tz, big-endian (36 bytes).
_RDT_REQUEST_HEADER = 0x1234
_STOP, _START_REALTIME, _START_BUFFERED, _SET_SOFTWARE_BIAS = 0x0000, 0x0002, 0x0003, 0x0042
_REQUEST = struct.Struct(">HHI")
_RECORD = struct.Struct(">III6i")


@dataclass
class NetFtEmulator:
    """The sensor side of RDT on the loopback interface.

    Args:
        counts_per_force, counts_per_torque: the emulated unit's scale factors.
        loss: probability that a packet is not sent.
        reorder: probability that a packet is held back and sent after the next one.
        records_per_packet: records per packet in buffered mode.
        seed: seed of the loss/reorder generator.
        host: must be ``127.0.0.1`` (the emulator never binds another address).
    """

    counts_per_force: float = 1_000_000.0
    counts_per_torque: float = 1_000_000.0
    loss: float = 0.0
    reorder: float = 0.0
    records_per_packet: int = 4
    seed: int = 0
    host: str = LOOPBACK
    status: int = 0
    client: tuple[str, int] | None = None
    remaining: int = 0  # samples left (0 with ``endless``)
    endless: bool = False
    buffered: bool = False
    rdt_sequence: int = 0
    ft_sequence: int = 0
    bias: np.ndarray = field(default_factory=lambda: np.zeros(6))
    packets_sent: int = 0
    packets_lost: int = 0
    packets_reordered: int = 0
    bad_requests: int = 0
    _held: bytes | None = None
    _pending: list[bytes] = field(default_factory=list)
    _last: np.ndarray = field(default_factory=lambda: np.zeros(6))

    def __post_init__(self) -> None:
        if self.host != LOOPBACK:
            raise ValueError(f"Net F/T emulator host {self.host!r}: only {LOOPBACK} is allowed")
        self.rng = np.random.default_rng(self.seed)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((LOOPBACK, 0))
        self.sock.setblocking(False)
        self.address: tuple[str, int] = self.sock.getsockname()

    @property
    def streaming(self) -> bool:
        return self.client is not None and (self.endless or self.remaining > 0)

    def serve(self) -> int:
        """Handle pending requests; returns how many were handled."""
        handled = 0
        while True:
            try:
                data, addr = self.sock.recvfrom(64)
            except BlockingIOError:
                return handled
            handled += 1
            if len(data) != _REQUEST.size:
                self.bad_requests += 1
                continue
            header, command, count = _REQUEST.unpack(data)
            if header != _RDT_REQUEST_HEADER:
                self.bad_requests += 1
                continue
            if command in (_START_REALTIME, _START_BUFFERED):
                self.client, self.remaining, self.endless = addr, count, count == 0
                self.buffered = command == _START_BUFFERED
            elif command == _STOP:
                self.client, self.remaining, self.endless = None, 0, False
            elif command == _SET_SOFTWARE_BIAS:
                self.bias = self._last.copy()
            else:
                self.bad_requests += 1

    def send(self, force: ArrayLike, torque: ArrayLike = (0.0, 0.0, 0.0)) -> bool:
        """One sample at the sensor's rate; sent to the streaming client (buffered: every n-th). Returns sent."""
        self.serve()
        raw = np.concatenate([np.asarray(force, dtype=float), np.asarray(torque, dtype=float)])
        self._last = raw
        self.ft_sequence += 1
        if not self.streaming:
            return False
        scale = np.array([self.counts_per_force] * 3 + [self.counts_per_torque] * 3)
        counts = np.clip(np.round((raw - self.bias) * scale), -(2**31), 2**31 - 1).astype(np.int64)
        self.rdt_sequence += 1
        head = (self.rdt_sequence & 0xFFFFFFFF, self.ft_sequence & 0xFFFFFFFF, self.status & 0xFFFFFFFF)
        rec = _RECORD.pack(*head, *(int(c) for c in counts))
        if not self.endless:
            self.remaining -= 1
        if self.buffered:
            self._pending.append(rec)
            if len(self._pending) < self.records_per_packet and self.streaming:
                return False
            rec, self._pending = b"".join(self._pending), []
        return self._emit(rec)

    def _emit(self, packet: bytes) -> bool:
        assert self.client is not None or self._held is not None
        if self.loss and self.rng.random() < self.loss:
            self.packets_lost += 1
            return False
        if self._held is None and self.reorder and self.rng.random() < self.reorder:
            self._held = packet  # goes out after the next packet
            self.packets_reordered += 1
            return False
        self._sendto(packet)
        if self._held is not None:
            self._sendto(self._held)
            self._held = None
        return True

    def _sendto(self, packet: bytes) -> None:
        if self.client is None:
            return
        self.sock.sendto(packet, self.client)
        self.packets_sent += 1

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> NetFtEmulator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
