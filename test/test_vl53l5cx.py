"""VL53L5CX: the ULD sequence in Python against the register-level simulator, through the real smbus2 class."""

from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest

import shape_sensing.drivers.vl53l5cx as vl
from shape_sensing.drivers.errors import DriverConfigError
from shape_sensing.drivers.vl53l5cx import (
    BH,
    DEFAULT_OUTPUTS,
    FIRMWARE_SIZE,
    UldBuffers,
    Vl53l5cx,
    Vl53l5cxError,
    frame_size,
    output_list,
    parse_frame,
    run_steps,
    swap_words,
)
from shape_sensing.sim.i2c_bus import SimI2CBus
from shape_sensing.sim.i2c_dev import RealSMBus
from shape_sensing.sim.vl53l5cx_sim import SimVL53L5CX, seed_sigma


@pytest.fixture(scope="module")
def buffers() -> UldBuffers:
    return UldBuffers.from_package()


def _rig(buffers: UldBuffers, **chip_kw):
    bus = SimI2CBus(bitrate=1_000_000.0)
    chip = bus.host.attach(SimVL53L5CX(0x29, firmware_crc=zlib.crc32(buffers.firmware), **chip_kw))
    return bus, chip


def test_st_buffers_have_the_uld_sizes(buffers):
    assert len(buffers.firmware) == FIRMWARE_SIZE == 86016
    assert len(buffers.default_configuration) == 972 and len(buffers.default_xtalk) == 776
    assert buffers.get_nvm_cmd[:4] == bytes([0x54, 0x00, 0x00, 0x40])  # first DCI group read by the NVM command
    with pytest.raises(DriverConfigError, match="firmware from memory has 3 bytes, expected 86016"):
        UldBuffers(b"abc", buffers.default_configuration, buffers.default_xtalk, buffers.get_nvm_cmd)


def test_block_headers_and_frame_sizes_by_hand():
    """Sizes summed by hand from ULD 1.1.2's block headers: 4-byte header + type * zones per enabled block, + 20."""
    assert (BH.DISTANCE & 0xF, (BH.DISTANCE >> 4) & 0xFFF, BH.DISTANCE >> 16) == (2, 0x40, 0xD33C)
    # 8x8: start 4, metadata 16, common 8, ambient 4+256, targets 4+64, signal 4+256, sigma 4+128, distance
    # 4+128, status 4+64, + 20
    assert frame_size(64) == 4 + 16 + 8 + 260 + 68 + 260 + 132 + 132 + 68 + 20 == 968
    assert frame_size(16) == 4 + 16 + 8 + 68 + 20 + 68 + 36 + 36 + 20 + 20 == 296
    everything = (*DEFAULT_OUTPUTS, "SPAD_COUNT", "REFLECTANCE", "MOTION_DETECT")
    assert frame_size(64, everything) == 968 + 260 + 68 + 144
    _, enables, _ = output_list(64)
    assert enables == [0x7 | 8 | 32 | 64 | 128 | 256 | 1024, 0, 0, 0xC0000000]
    with pytest.raises(DriverConfigError, match="outputs \\['COLOUR'\\] invalid"):
        output_list(64, ("COLOUR",))
    assert swap_words(b"\x01\x02\x03\x04\x05") == b"\x04\x03\x02\x01\x05"


def test_boot_settings_and_frames_round_trip(buffers):
    bus, chip = _rig(buffers)
    with RealSMBus([bus]) as (sb,):
        tof = Vl53l5cx(sb, 0x29, buffers, clock=bus.clock, upload_chunk=2048)
        stats0 = bus.stats.copy()
        run_steps(tof.init_steps(), bus.sleep)
        boot = bus.stats.minus(stats0)
        # firmware + offsets + xtalk + configuration dominate; everything else is small
        assert FIRMWARE_SIZE + 488 + 776 + 972 < boot.bytes < 1.03 * (FIRMWARE_SIZE + 488 + 776 + 972 + 492)
        assert chip.booted and chip.bad_commands == 0
        run_steps(tof.set_resolution(8), bus.sleep)
        run_steps(tof.set_ranging_frequency_hz(15), bus.sleep)
        run_steps(tof.set_integration_time_ms(25), bus.sleep)
        run_steps(tof.set_sharpener_percent(20), bus.sleep)
        run_steps(tof.set_target_order("closest"), bus.sleep)
        assert run_steps(tof.get_resolution(), bus.sleep) == 64
        assert run_steps(tof.get_ranging_frequency_hz(), bus.sleep) == 15
        assert run_steps(tof.get_integration_time_ms(), bus.sleep) == 25
        assert run_steps(tof.get_sharpener_percent(), bus.sleep) == 20
        assert run_steps(tof.get_target_order(), bus.sleep) == "closest"
        assert chip.dci[vl.DCI.SHARPENER][0x0D] == 51  # 20 * 255 // 100, as the ULD stores it
        truth = np.linspace(0.05, 2.0, 64)
        truth[5] = np.nan  # no target
        status = np.full(64, 5, np.uint8)
        status[7] = 4
        chip.set_zones(truth, status=status)
        run_steps(tof.start_ranging(), bus.sleep)
        assert tof.data_read_size == 968
        got = []
        while len(got) < 5:
            bus.sleep(0.005)
            if tof.check_data_ready():
                got.append(tof.get_ranging_data())
        run_steps(tof.stop_ranging(), bus.sleep)
        assert not chip.ranging and tof.is_alive()
    r = got[-1]
    assert [g.stream_count for g in got] == [1, 2, 3, 4, 5]
    ok = np.isfinite(truth)
    np.testing.assert_allclose(r.distance_mm[ok], truth[ok] * 1000, atol=0.125 + 1e-9)  # 1/4 mm steps
    np.testing.assert_allclose(r.range_sigma_mm[ok], seed_sigma(truth[ok]) * 1000, atol=0.5 / 128 + 1e-9)
    assert r.nb_target_detected[5] == 0 and r.target_status[7] == 4 and r.target_status[0] == 5
    assert not r.valid()[5] and not r.valid()[7] and r.valid()[0]
    assert r.silicon_temp_degc == 31.0
    stamps = np.array([g.stamp_ns for g in got])
    np.testing.assert_allclose(np.diff(stamps), 1e9 / 15, atol=6e6)  # polled every 5 ms


def test_four_by_four_and_bad_settings(buffers):
    bus, chip = _rig(buffers)
    with RealSMBus([bus]) as (sb,):
        tof = Vl53l5cx(sb, 0x29, buffers, clock=bus.clock)
        run_steps(tof.init_steps(), bus.sleep)
        run_steps(tof.set_ranging_frequency_hz(60), bus.sleep)  # 4x4 after init: up to 60 Hz
        chip.set_zones(np.full(16, 0.8))
        run_steps(tof.start_ranging(), bus.sleep)
        assert tof.data_read_size == 296
        while not tof.check_data_ready():
            bus.sleep(0.002)
        r = tof.get_ranging_data()
        assert r.zones_per_side == 4
        np.testing.assert_allclose(r.distance_mm, 800.0)
        tof.resolution = 64
        for gen, match in (
            (lambda: tof.set_resolution(5), "resolution 5 invalid"),
            (lambda: tof.set_ranging_frequency_hz(16), "ranging frequency 16 invalid: expected an integer 1-15"),
            (lambda: tof.set_integration_time_ms(1), "integration time 1 invalid"),
            (lambda: tof.set_sharpener_percent(100), "sharpener 100 invalid"),
            (lambda: tof.set_target_order("far"), "target order 'far' invalid"),
        ):
            with pytest.raises(DriverConfigError, match=match):
                run_steps(gen(), bus.sleep)


@pytest.mark.parametrize(
    ("fault", "match"),
    [
        ("never_boots", "timeout while waiting for the boot ROM"),
        ("bad_image", "timeout while checking the firmware download"),
        ("wrong_pages", "timeout while checking the firmware download"),
        ("short_upload", "timeout while checking the firmware download"),
    ],
)
def test_boot_handshake_faults_as_a_real_chip(buffers, monkeypatch, fault, match):
    bus, chip = _rig(buffers)
    image = buffers
    if fault == "never_boots":
        chip.never_boots = True
    elif fault == "bad_image":
        fw = bytearray(buffers.firmware)
        fw[1234] ^= 0xFF
        image = UldBuffers(bytes(fw), buffers.default_configuration, buffers.default_xtalk, buffers.get_nvm_cmd)
    elif fault == "wrong_pages":  # the first two 32 kB halves written to each other's page
        monkeypatch.setattr(
            vl, "FIRMWARE_PAGES", ((0x0A, 0x0000, 0x8000), (0x09, 0x8000, 0x8000), (0x0B, 0x10000, 0x5000))
        )
    else:  # the last page cut short
        monkeypatch.setattr(
            vl, "FIRMWARE_PAGES", ((0x09, 0x0000, 0x8000), (0x0A, 0x8000, 0x8000), (0x0B, 0x10000, 0x4000))
        )
    with RealSMBus([bus]) as (sb,):
        tof = Vl53l5cx(sb, 0x29, image, clock=bus.clock, poll_timeout=0.2)
        with pytest.raises(Vl53l5cxError, match=match):
            run_steps(tof.init_steps(), bus.sleep)
    assert not chip.booted


def test_new_address_and_malformed_frame(buffers):
    bus, chip = _rig(buffers)
    with RealSMBus([bus]) as (sb,):
        tof = Vl53l5cx(sb, 0x29, buffers, clock=bus.clock)
        assert tof.is_alive()
        tof.set_i2c_address(0x35)
        assert chip.address == 0x35 and tof.is_alive()
        with pytest.raises(OSError, match="Remote I/O error"):
            Vl53l5cx(sb, 0x29, buffers, clock=bus.clock).is_alive()
    host = bytearray(16 + 8)
    host[16:20] = struct.pack("<I", (0xD33C << 16) | (64 << 4) | 2)  # a distance block the 24 bytes cannot hold
    with pytest.raises(Vl53l5cxError, match="malformed frame"):
        parse_frame(swap_words(bytes(host)), 64)


def test_parse_frame_of_hand_packed_blocks():
    """A frame packed here with struct (independent of the simulator), parsed as the ULD would."""
    z = 16
    dist = np.arange(z, dtype=np.int16) * 40  # 0..600 in 1/4 mm
    blocks = struct.pack("<I", (0xD33C << 16) | (z << 4) | 2) + dist.astype("<i2").tobytes()
    blocks += struct.pack("<I", (0xD47C << 16) | (z << 4) | 1) + bytes([5] * z)
    blocks += struct.pack("<I", (0x54B4 << 16) | (12 << 4)) + bytes([0] * 8 + [0xFB, 0, 0, 0])  # -5 degC
    host = bytearray(16) + blocks + bytearray(8)
    r = parse_frame(swap_words(bytes(host)), z)
    np.testing.assert_allclose(r.distance_mm, dist / 4.0)
    assert r.silicon_temp_degc == -5.0 and list(r.target_status) == [5] * z


def test_random_frames_never_raise_anything_but_a_frame_error():
    """Bytes off a noisy bus: a reading or Vl53l5cxError, nothing else."""
    rng = np.random.default_rng(11)
    outcomes = {"ok": 0, "error": 0}
    for _ in range(300):
        host = bytearray(rng.integers(0, 256, 972, dtype=np.uint8).tobytes())
        if rng.random() < 0.5:  # a block skipping to 8 bytes before the end, where a distance block starts
            host[16:20] = struct.pack("<I", (0x0000 << 16) | ((972 - 8 - 20) << 4) | 0)
            host[972 - 8 : 972 - 4] = struct.pack("<I", (0xD33C << 16) | (64 << 4) | 2)
        try:
            r = parse_frame(swap_words(bytes(host)), 64)
            assert r.distance_mm.shape == (64,) and np.all(r.distance_mm >= 0)
            outcomes["ok"] += 1
        except Vl53l5cxError as exc:
            assert "malformed frame" in str(exc)
            outcomes["error"] += 1
    assert outcomes["ok"] > 0 and outcomes["error"] > 0


@pytest.mark.parametrize(("report", "error", "match"), [
    ("uld1.1", 0, None),  # ULD 1.1.2's answer: GO2 status 0 back to 0x00
    ("uld1.2", 0, None),  # ULD 1.2-2.0.1's answer: bit 7 with GO2 status 1 = 0
    # an MCU error code in GO2 status 1: ULD 1.1.2's handshake is past the boot when the MCU reports it, so the
    # error shows in the next command's status (byte 2 >= 0x7F)
    ("uld1.2", 0x42, "MCU error 0xff while reading the NVM"),
    ("uld1.1", 0x42, "MCU error 0xff while reading the NVM"),
])  # fmt: skip
def test_mcu_boot_answered_either_of_sts_ways(buffers, report, error, match):
    bus, chip = _rig(buffers, boot_report=report)
    chip.mcu_boot_error = error
    with RealSMBus([bus]) as (sb,):
        tof = Vl53l5cx(sb, 0x29, buffers, clock=bus.clock, poll_timeout=0.3)
        if match is None:
            run_steps(tof.init_steps(), bus.sleep)
            assert chip.booted and chip.refused == []
        else:
            with pytest.raises(Vl53l5cxError, match=match):
                run_steps(tof.init_steps(), bus.sleep)


def test_the_firmware_refuses_another_releases_dci_index_and_the_driver_says_so(buffers):
    """ULD 1.3.9's pipe control 0xDB80 is no variable of the 1.1.2 firmware: the chip answers an MCU error."""
    bus, chip = _rig(buffers)
    with RealSMBus([bus]) as (sb,):
        tof = Vl53l5cx(sb, 0x29, buffers, clock=bus.clock)
        run_steps(tof.init_steps(), bus.sleep)
        with pytest.raises(Vl53l5cxError, match="MCU error 0xff while writing DCI 0xdb80"):
            run_steps(tof.dci_write(0xDB80, bytes([1, 0, 1, 0])), bus.sleep)
    assert chip.refused and "0xdb80" in chip.refused[-1]


def test_a_firmware_directory_of_another_release_is_refused(buffers, tmp_path):
    files = {
        "firmware.bin": bytes(reversed(buffers.firmware)),
        "default_configuration.bin": buffers.default_configuration,
        "default_xtalk.bin": buffers.default_xtalk,
        "get_nvm_cmd.bin": buffers.get_nvm_cmd,
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    with pytest.raises(DriverConfigError, match="not 0xd867a331 of ST's ULD 1.1.2 image"):
        UldBuffers.from_dir(tmp_path)
    assert zlib.crc32(buffers.firmware) == vl.FIRMWARE_CRC32
