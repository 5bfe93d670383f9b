"""ATI Net F/T RDT: byte layouts from the manual, loopback streaming, loss and reordering counted."""

from __future__ import annotations

import socket
import struct
import time

import numpy as np
import pytest

from shape_sensing.drivers.errors import DriverConfigError
from shape_sensing.drivers.netft import (
    CMD_START_REALTIME,
    CMD_STOP,
    RECORD_SIZE,
    NetFtReceiver,
    RdtRecord,
    decode_records,
    decode_request,
    encode_record,
    encode_request,
)
from shape_sensing.sim.netft_emulator import NetFtEmulator


def test_request_and_record_layouts() -> None:
    # request: uint16 0x1234, uint16 command, uint32 sample count, big-endian
    assert encode_request(CMD_START_REALTIME, 0) == b"\x12\x34\x00\x02\x00\x00\x00\x00"
    assert encode_request(CMD_STOP, 5) == b"\x12\x34\x00\x00\x00\x00\x00\x05"
    assert decode_request(encode_request(CMD_START_REALTIME, 7)) == (2, 7)
    with pytest.raises(ValueError, match="header 0x4321"):
        decode_request(b"\x43\x21\x00\x02\x00\x00\x00\x00")
    # record: uint32 rdt_sequence, ft_sequence, status, int32 Fx..Tz: 36 bytes big-endian
    raw = struct.pack(">III6i", 9, 1234, 0, 1_500_000, -2_000_000, 3, -4, 5, -6)
    assert RECORD_SIZE == len(raw) == 36
    (rec,) = decode_records(raw)
    assert rec == RdtRecord(9, 1234, 0, (1_500_000, -2_000_000, 3, -4, 5, -6))
    assert encode_record(rec) == raw
    with pytest.raises(ValueError, match="multiple of 36"):
        decode_records(raw[:-1])


def _client() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.setblocking(False)
    return sock


def _drain(rx: NetFtReceiver, want: int, timeout: float = 3.0) -> list:
    out: list = []
    deadline = time.monotonic() + timeout
    while len(out) < want and time.monotonic() < deadline:
        out += rx.poll()
        time.sleep(0.001)
    return out


def test_loopback_stream_scales_counts_and_stops() -> None:
    with NetFtEmulator(counts_per_force=1e6, counts_per_torque=2e6) as emu:
        sock = _client()
        rx = NetFtReceiver(sock, emu.address, counts_per_force=1e6, counts_per_torque=2e6)
        assert not emu.send([1.0, 0, 0])  # nobody asked yet
        rx.start()
        time.sleep(0.01)
        for k in range(20):
            emu.send([0.5, -0.25, 0.01 * k], [0.001, 0.0, -0.002])
        got = _drain(rx, 20)
        assert len(got) == 20
        assert np.allclose(got[3].force, [0.5, -0.25, 0.03], atol=1e-6)
        assert np.allclose(got[3].torque, [0.001, 0.0, -0.002], atol=1e-6)
        assert rx.stats.lost == rx.stats.reordered == 0
        rx.stop()
        time.sleep(0.01)
        assert not emu.send([1.0, 0, 0]) and not emu.streaming
        sock.close()


def test_loss_and_reordering_are_counted_and_the_stream_stays_ordered() -> None:
    with NetFtEmulator(loss=0.1, reorder=0.1, seed=4) as emu:
        sock = _client()
        rx = NetFtReceiver(sock, emu.address)
        rx.start()
        time.sleep(0.01)
        got = []
        for k in range(400):
            emu.send([0.0, 0.0, float(k)])
            if k % 20 == 19:  # read as we go, as the node does (the socket buffer is finite)
                got += _drain(rx, 1, timeout=0.05)
        got += _drain(rx, 10**6, timeout=0.2)
        assert emu.packets_lost > 0 and emu.packets_reordered > 0
        seqs = [r.rdt_sequence for r in got]
        assert seqs == sorted(seqs)
        assert rx.stats.reordered == emu.packets_reordered
        # a late packet is skipped, so it is lost to the stream too
        assert rx.stats.lost + rx.stats.reordered == emu.packets_lost + emu.packets_reordered
        sock.close()


def test_buffered_mode_packs_several_records_per_packet() -> None:
    with NetFtEmulator(records_per_packet=4) as emu:
        sock = _client()
        rx = NetFtReceiver(sock, emu.address)
        rx.start(buffered=True)
        time.sleep(0.01)
        for k in range(12):
            emu.send([float(k), 0, 0])
        got = _drain(rx, 12)
        assert [r.force[0] for r in got] == pytest.approx(list(range(12)), abs=1e-6)
        assert emu.packets_sent == 3
        sock.close()


def test_bad_packets_status_and_config() -> None:
    rx = NetFtReceiver(sock=None, address=("127.0.0.1", 1))  # type: ignore[arg-type]
    assert rx.handle(b"\x00" * 35, 0) == []
    assert rx.stats.bad_packets == 1
    rx.handle(encode_record(RdtRecord(1, 1, 0x80000000, (0,) * 6)), 1)
    assert rx.stats.status_errors == 1
    assert rx.diagnostics(1).level == 2
    with pytest.raises(DriverConfigError, match="parameter 'counts_per_force' = 0.0"):
        NetFtReceiver(sock=None, address=("127.0.0.1", 1), counts_per_force=0.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="only 127.0.0.1"):
        NetFtEmulator(host="0.0.0.0")
