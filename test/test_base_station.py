"""Base station serial protocol: CRC against an independent implementation, framing faults, pty + pyserial."""

from __future__ import annotations

import binascii
import json
import struct
import time

import numpy as np
import pytest
import serial

from shape_sensing.config import ConfigError
from shape_sensing.drivers.base_station import (
    SCHEMA,
    STATE_FRAME_SIZE,
    BaseStationCalibration,
    BaseStationDriver,
    BaseStationParser,
    StateFrame,
    calibrate_metres_per_count,
    crc16_ccitt_false,
    encode_state,
)
from shape_sensing.sim.base_station_emulator import BaseStationEmulator, LineFaults, PtyLink


def _frame(seq: int, counts: int = 1000, cap: int = 0) -> StateFrame:
    return StateFrame(seq, 1000 * seq, counts, 300, 310, True, cap)


def test_crc_is_ccitt_false_with_its_check_value() -> None:
    assert crc16_ccitt_false(b"123456789") == 0x29B1  # the catalogue's check value
    data = bytes(range(256)) * 3
    # binascii.crc_hqx is CRC-CCITT with poly 0x1021, no reflection: with init 0xFFFF it is CCITT-FALSE
    assert crc16_ccitt_false(data) == binascii.crc_hqx(data, 0xFFFF)


def test_frame_layout_matches_the_documented_spec() -> None:
    raw = encode_state(StateFrame(0x1234, 0xDEADBEEF, -5, 512, 1023, True, 0b101))
    assert len(raw) == STATE_FRAME_SIZE == 25
    payload = struct.pack("<iHHBI", -5, 512, 1023, 1, 0b101)
    body = struct.pack("<BBHI", 13, 0x01, 0x1234, 0xDEADBEEF) + payload
    assert raw == b"\xa5\x5a" + body + struct.pack("<H", binascii.crc_hqx(body, 0xFFFF))


def test_garbage_false_syncs_and_byte_by_byte_split_lose_no_frame() -> None:
    rng = np.random.default_rng(1)
    stream = bytearray()
    frames = [_frame(i, counts=i * 7, cap=i) for i in range(50)]
    for f in frames:
        stream += b"\xa5\x5a\x0d\x01" + rng.integers(0, 256, int(rng.integers(0, 9)), dtype=np.uint8).tobytes()
        stream += encode_state(f)
    p = BaseStationParser()
    got = [fr for b in stream for fr in p.feed(bytes([b]))]
    assert got == frames
    assert p.stats.frames == 50 and p.stats.dropped == 0 and p.stats.garbage_bytes > 0


def test_a_real_frame_inside_a_spurious_header_is_recovered() -> None:
    real = encode_state(_frame(7))
    # a plausible header (sync, length 13, id 1) whose bytes run into the real frame: its CRC fails
    p = BaseStationParser()
    got = p.feed(b"\xa5\x5a\x0d\x01\x00" + real)
    assert got == [_frame(7)]
    assert p.stats.crc_errors == 1


def test_lost_frame_crc_error_and_sequence_wrap_are_counted() -> None:
    p = BaseStationParser()
    bad = bytearray(encode_state(_frame(2)))
    bad[12] ^= 0x40
    out = p.feed(encode_state(_frame(0)) + encode_state(_frame(1)) + bytes(bad) + encode_state(_frame(3)))
    assert [f.sequence for f in out] == [0, 1, 3]
    assert p.stats.crc_errors == 1 and p.stats.dropped == 1  # the corrupted frame is a lost frame too
    out = p.feed(encode_state(_frame(5)))  # frame 4 lost on the line
    assert p.stats.dropped == 2
    p2 = BaseStationParser()
    p2.feed(encode_state(_frame(65535)) + encode_state(_frame(0)))
    assert p2.stats.dropped == 0


def test_driver_reads_the_emulator_through_pyserial_on_a_pty() -> None:
    cal = BaseStationCalibration(metres_per_count=2.5e-4)
    emu = BaseStationEmulator(calibration=cal, faults=LineFaults(garbage=0.3, corrupt=0.05), seed=3)
    with PtyLink() as link:
        port = serial.Serial(link.path, 115200, timeout=0)
        try:
            drv = BaseStationDriver(port, cal)
            readings = []
            for k in range(200):
                link.write(emu.step(k * 0.01, 0.1234 + 0.001 * k, 10_000.0, 10_000.0, True, 1 << (k % 19)))
            deadline = time.monotonic() + 5.0
            while len(readings) < 200 - emu.corrupted and time.monotonic() < deadline:
                readings += drv.poll()
                time.sleep(0.002)
        finally:
            port.close()
    assert len(readings) == 200 - emu.corrupted
    # a flipped bit in the sync or header makes those bytes garbage; anywhere else it is a CRC error
    assert 0 < drv.parser.stats.crc_errors <= emu.corrupted
    assert drv.parser.stats.dropped == emu.corrupted  # every corrupted frame shows as a sequence gap
    r = readings[0]
    assert r.length == pytest.approx(0.1234, abs=1.25e-4)  # within half a count
    assert r.pressure == pytest.approx(10_000.0, abs=cal.pascals_per_adc / 2)
    assert all(x.cap_switches == 1 << (x.sequence % 19) for x in readings)
    diag = drv.diagnostics(drv.last_ns or 0)
    assert diag.values["dropped"] == str(emu.corrupted) and "CRC errors" in diag.message
    assert "stale" in drv.diagnostics((drv.last_ns or 0) + 10**9).message


def test_device_time_unwraps_across_the_32_bit_microsecond_wrap() -> None:
    drv = BaseStationDriver(port=None)  # type: ignore[arg-type]
    a = drv.convert(StateFrame(0, 0xFFFFFF00, 0, 0, 0, False, 0), 0)
    b = drv.convert(StateFrame(1, 0x00000100, 0, 0, 0, False, 0), 0)
    assert b.device_time_ns - a.device_time_ns == 0x200 * 1000


def test_calibration_from_tape_measured_trials() -> None:
    true_mpc = 3.1e-4
    before = [0, 5000, -200]
    grown = [1.0, 0.5, 2.0]
    after = [b + round(g / true_mpc) for b, g in zip(before, grown, strict=True)]
    mpc, rms = calibrate_metres_per_count(before, after, grown)
    assert mpc == pytest.approx(true_mpc, rel=1e-4) and rms < 2e-4
    with pytest.raises(ConfigError, match="did not move"):
        calibrate_metres_per_count([0], [0], [1.0])
    with pytest.raises(ConfigError, match="expected the same number"):
        calibrate_metres_per_count([0, 1], [5], [1.0])
    with pytest.raises(ConfigError, match="positive metres"):
        calibrate_metres_per_count([0], [10], [-1.0])


def test_bad_config_names_the_parameter() -> None:
    with pytest.raises(ConfigError, match=r"parameter 'metres_per_count' = -0.001: expected float >= 1e-09"):
        SCHEMA.validate({"metres_per_count": -0.001})
    with pytest.raises(ConfigError, match=r"parameter 'n_cap_switches' = 40"):
        SCHEMA.validate({"n_cap_switches": 40})


def test_calibration_command(capsys: pytest.CaptureFixture[str]) -> None:
    from shape_sensing.cli import main

    argv = ["calibrate-base-station", "--trial", "0", "4000", "1.0", "--trial", "100", "2100", "0.5", "--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["metres_per_count"] == pytest.approx(2.5e-4) and out["trials"] == 2
    assert main(["calibrate-base-station", "--trial", "0", "0", "1.0"]) == 2
    assert "did not move" in capsys.readouterr().err
    assert main(["calibrate-base-station", "--trial", "a", "1", "1.0"]) == 2
    assert "integer counts" in capsys.readouterr().err
