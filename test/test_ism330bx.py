"""ISM330BX driver against its register-level simulator, driven through the real smbus2 class."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest

from shape_sensing.drivers.errors import DriverConfigError, DriverError, ProtocolError
from shape_sensing.drivers.ism330bx import (
    ACCEL_FS,
    GYRO_FS,
    ODR_CODES,
    Ism330bx,
    Ism330bxConfig,
    Reg,
    Tag,
    decode_fifo,
)
from shape_sensing.sim.i2c_bus import SimI2CBus
from shape_sensing.sim.i2c_dev import RealSMBus
from shape_sensing.sim.ism330bx_sim import SimISM330BX

G = 9.80665


def test_register_map_and_sensitivities_match_st_reference():
    """Values as typed from ST's ism330bx_reg.h / ism330bx_reg.c (addresses, enum codes, LSB conversions)."""
    assert (Reg.WHO_AM_I, Reg.CTRL1, Reg.CTRL2, Reg.CTRL3, Reg.CTRL6, Reg.CTRL8) == (0x0F, 0x10, 0x11, 0x12, 0x15, 0x17)
    assert (Reg.FIFO_CTRL1, Reg.FIFO_CTRL3, Reg.FIFO_CTRL4, Reg.FIFO_STATUS1, Reg.FIFO_STATUS2) == (
        0x07, 0x09, 0x0A, 0x1B, 0x1C)  # fmt: skip
    assert (Reg.OUT_TEMP_L, Reg.OUTX_L_G, Reg.OUTZ_L_A, Reg.TIMESTAMP0) == (0x20, 0x22, 0x28, 0x40)
    assert (Reg.INTERNAL_FREQ, Reg.FUNCTIONS_ENABLE, Reg.FIFO_DATA_OUT_TAG) == (0x4F, 0x50, 0x78)
    assert (Tag.GYRO, Tag.ACCEL, Tag.TEMPERATURE, Tag.TIMESTAMP, Tag.CFG_CHANGE) == (1, 2, 3, 4, 5)
    assert ODR_CODES[120.0] == 0x6 and ODR_CODES[7.5] == 0x2 and ODR_CODES[3840.0] == 0xB
    assert {fs: code for fs, (code, _) in GYRO_FS.items()} == {125: 0, 250: 1, 500: 2, 1000: 3, 2000: 4, 4000: 0xC}
    # mdps/LSB 4.375 ... 140, mg/LSB 0.061 / 0.122 / 0.244
    for fs, mdps in ((125, 4.375), (250, 8.75), (500, 17.5), (1000, 35.0), (2000, 70.0), (4000, 140.0)):
        assert GYRO_FS[fs][1] == pytest.approx(mdps * 1e-3 * math.pi / 180)
    for fs, mg in ((2, 0.061), (4, 0.122), (8, 0.244)):
        assert ACCEL_FS[fs][1] == pytest.approx(mg * 1e-3 * G)


@pytest.fixture()
def rig():
    bus = SimI2CBus(bitrate=400_000.0)
    chip = bus.host.attach(SimISM330BX(0x6A, freq_fine=-7, gyro_bias=np.array([0.01, -0.02, 0.005]), seed=3))
    with RealSMBus([bus]) as (sb,):
        drv = Ism330bx(sb, 0x6A, Ism330bxConfig(bias_duration=0.5), clock=bus.clock, sleep=bus.sleep)
        yield bus, chip, drv


def test_start_writes_the_datasheet_configuration(rig):
    _bus, chip, drv = rig
    drv.start()
    r = chip.regs
    assert (r[Reg.CTRL1], r[Reg.CTRL2], r[Reg.CTRL6], r[Reg.CTRL8]) == (0x06, 0x06, 0x02, 0x01)
    assert r[Reg.FIFO_CTRL3] == 0x66  # BDR_GY = BDR_XL = 120 Hz
    assert r[Reg.FIFO_CTRL4] == 0x46  # DEC_TS_BATCH = 1, continuous mode
    assert r[Reg.FUNCTIONS_ENABLE] & 0x40 and r[Reg.CTRL3] == 0x44  # timestamp; BDU + IF_INC
    assert chip.resets == 1  # the SW_RESET
    assert drv.tick_s == pytest.approx(21.75e-6 / (1 - 7 * 0.0013))
    chip.temperature = 41.5
    assert drv.temperature() == pytest.approx(41.5, abs=1 / 256)


def test_fifo_bursts_keep_every_sample_with_chip_timestamps(rig):
    bus, chip, drv = rig
    drv.start()
    w, a = np.array([0.3, -0.2, 0.1]), np.array([1.0, -2.0, 9.5])
    samples = []
    for k in range(60):  # 3 s, reads every 50 ms; still for the first second (the bias window is 0.5 s)
        if k == 20:
            chip.set_motion(w, a)
        bus.sleep(0.05)
        samples += drv.read_fifo().samples
    rate = 120.0 * (1 - 7 * 0.0013)
    elapsed = (bus.now_ns - 0) * 1e-9
    assert abs(len(samples) - rate * elapsed) <= 2
    stamps = np.array([s.stamp_ns for s in samples])
    tick_ns = 21.75e3 / (1 - 7 * 0.0013)
    d = np.diff(stamps[20:])  # after the host/chip offset has settled (first reads)
    assert np.all(np.diff(stamps) > 0)
    # chip clock spacing (one timestamp tick), not read times; the host/chip offset may still settle by
    # fractions of a period when a read lands closer to the newest sample (lowest latency wins)
    assert np.mean(np.abs(d - 1e9 / rate) <= tick_ns + 1) > 0.95
    assert np.all(np.abs(d - 1e9 / rate) < 0.05 * 1e9 / rate)
    assert drv.overruns == 0 and drv.gaps == 0 and drv.bad_words == 0
    gyro_lsb, acc_lsb = GYRO_FS[500][1], ACCEL_FS[4][1]
    late = samples[-1]
    # bias known after 0.5 s of stillness: the published rate has it removed
    assert drv.bias is not None
    np.testing.assert_allclose(drv.bias.bias, [0.01, -0.02, 0.005], atol=gyro_lsb)
    np.testing.assert_allclose(late.angular_velocity, w, atol=gyro_lsb)
    np.testing.assert_allclose(late.linear_acceleration, a, atol=acc_lsb / 2 + 1e-12)  # X, Y, Z from Z, Y, X words


def test_overrun_is_counted_and_recovered(rig):
    bus, _chip, drv = rig
    drv.start()
    bus.sleep(0.1)
    drv.read_fifo()
    bus.sleep(6.0)  # 511 words hold 170 slots (1.4 s)
    r = drv.read_fifo()
    assert r.overrun and drv.overruns == 1
    bus.sleep(0.05)
    r2 = drv.read_fifo()
    assert not r2.overrun and 4 <= len(r2.samples) <= 8
    assert drv.gaps >= 1  # the lost span shows as a timestamp gap


def test_gyro_bias_from_a_still_start_after_motion():
    bus = SimI2CBus()
    bias = np.array([0.012, -0.007, 0.02])
    chip = bus.host.attach(SimISM330BX(0x6B, gyro_bias=bias, gyro_noise=0.002, seed=5))
    chip.motion = lambda t: (np.array([0.0, 0.0, 0.5 if t < 0.4 else 0.0]), np.array([0.0, 0.0, G]))
    with RealSMBus([bus]) as (sb,):
        drv = Ism330bx(sb, 0x6B, Ism330bxConfig(bias_duration=1.0), clock=bus.clock, sleep=bus.sleep)
        drv.start()
        for _ in range(50):
            bus.sleep(0.05)
            drv.read_fifo()
    assert drv.bias is not None
    assert drv.bias.restarts >= 1  # the moving start was refused
    n = drv.bias.samples
    np.testing.assert_allclose(drv.bias.bias, bias, atol=4 * 0.002 / math.sqrt(n) + GYRO_FS[500][1])
    np.testing.assert_allclose(drv.bias.gyro_std, 0.002, rtol=0.25)


def test_reset_mid_stream_is_visible_and_identity_is_checked(rig):
    bus, chip, drv = rig
    drv.start()
    assert drv.verify()
    chip.power_on_reset(bus.now_ns)
    assert not drv.verify()
    chip.regs[Reg.WHO_AM_I] = 0x6B
    with pytest.raises(DriverError, match="WHO_AM_I 0x6b, expected 0x71"):
        drv.check_identity()


def _word(tag: int, cnt: int, data: bytes) -> bytes:
    return bytes([(tag << 3) | (cnt << 1)]) + data.ljust(6, b"\0")


def test_decode_fifo_pairs_by_tag_counter_and_counts_bad_words():
    raw = (
        _word(Tag.TIMESTAMP, 1, struct.pack("<I", 1000))
        + _word(Tag.GYRO, 1, struct.pack("<3h", 100, -200, 300))
        + _word(Tag.ACCEL, 1, struct.pack("<3h", 30, 20, 10))  # Z, Y, X
        + _word(Tag.TIMESTAMP, 2, struct.pack("<I", 1384))
        + _word(Tag.GYRO, 2, struct.pack("<3h", 1, 2, 3))
        + _word(0x1F, 2, b"")  # an unexpected tag
        + _word(Tag.GYRO, 3, struct.pack("<3h", 4, 5, 6))  # slot without its accelerometer word
    )
    pairs, bad, ts_words = decode_fifo(raw, 1.0, 1.0)
    assert ts_words == 2 and len(pairs) == 1 and bad == 3
    ts, g, a = pairs[0]
    assert ts == 1000
    np.testing.assert_array_equal(g, [100, -200, 300])
    np.testing.assert_array_equal(a, [10, 20, 30])
    with pytest.raises(ProtocolError, match="not a whole number of 7-byte words"):
        decode_fifo(raw[:-1], 1.0, 1.0)


def test_bad_configuration_names_the_option():
    with pytest.raises(DriverConfigError, match="odr 100"):
        Ism330bxConfig(odr=100.0)
    with pytest.raises(DriverConfigError, match="gyro_fs 300"):
        Ism330bxConfig(gyro_fs=300)
    with pytest.raises(DriverConfigError, match="accel_fs 16"):
        Ism330bxConfig(accel_fs=16)
    with pytest.raises(DriverConfigError, match="address 0x68"):
        Ism330bx(SimI2CBus(), 0x68)


def _turning(t: float) -> tuple[np.ndarray, np.ndarray]:
    """A hand turning the sensor: X and Z rates far apart and changing."""
    return np.array([1.5 * math.sin(3 * t), 0.3, -0.8 + 0.5 * math.cos(2 * t)]), np.array([0.0, 0.0, 9.80665])


@pytest.mark.parametrize("chip_order", ["xyz", "zyx"])
def test_gyro_order_self_check_tells_the_chips_order(chip_order):
    """The FIFO gyroscope words against the output registers (X, Y, Z) under motion, on chips built both ways; the
    driver configured with the order found then reads the FIFO gyroscope as the registers have it."""
    bus = SimI2CBus(bitrate=400_000.0)
    chip = bus.host.attach(SimISM330BX(0x6A, seed=5, fifo_gyro_order=chip_order))
    with RealSMBus([bus]) as (sb,):
        drv = Ism330bx(sb, 0x6A, Ism330bxConfig(bias_duration=0.0), clock=bus.clock, sleep=bus.sleep)
        drv.start()
        chip.set_motion(np.zeros(3), np.array([0.0, 0.0, 9.80665]))
        still = drv.check_fifo_gyro_order(duration_s=0.3)
        assert still.order == "undecided" and still.readings == 0  # a still sensor cannot tell
        chip.motion = _turning
        res = drv.check_fifo_gyro_order(duration_s=1.0)
        assert res.order == chip_order and res.readings > 20
        wrong, right = (res.mean_error_zyx, res.mean_error_xyz)[:: 1 if chip_order == "xyz" else -1]
        assert right < 0.02 < 0.5 < wrong  # rad/s: quantisation only vs the X-Z swap
        fixed = Ism330bx(sb, 0x6A, Ism330bxConfig(bias_duration=0.0, fifo_gyro_order=res.order), clock=bus.clock,
                         sleep=bus.sleep)  # fmt: skip
        fixed.start()
        bus.sleep(0.2)
        samples = fixed.read_fifo().samples
        assert len(samples) > 10
        g = samples[-1].angular_velocity
        assert abs(g[1] - 0.3) < 0.02  # Y is Y either way
        reg = np.frombuffer(fixed.read(Reg.OUTX_L_G, 6), "<i2") * fixed.gyro_lsb
        np.testing.assert_allclose(g, reg, atol=0.1)  # last FIFO sample ~ the output registers (one period apart)


def test_fifo_gyro_order_is_validated():
    with pytest.raises(DriverConfigError, match="fifo_gyro_order 'yxz' invalid"):
        Ism330bxConfig(fifo_gyro_order="yxz")
    word = bytes([Tag.GYRO << 3]) + struct.pack("<3h", 100, 200, 300)
    word += bytes([Tag.ACCEL << 3]) + struct.pack("<3h", 1, 2, 3)
    ((_, g_xyz, _),) = decode_fifo(word, 1.0, 1.0)[0]
    ((_, g_zyx, a),) = decode_fifo(word, 1.0, 1.0, "zyx")[0]
    assert list(g_xyz) == [100, 200, 300] and list(g_zyx) == [300, 200, 100] and list(a) == [3, 2, 1]


@pytest.mark.parametrize("chip_order", ["xyz", "zyx"])
def test_gyro_order_command_behind_a_mux(chip_order, capsys):
    """``python -m shape_sensing.drivers.ism330bx --mux 0x70 --channel 3``: the verdict printed, exit 0."""
    from shape_sensing.drivers.ism330bx import main
    from shape_sensing.sim.tca9548a_sim import SimTCA9548A

    bus = SimI2CBus(bitrate=400_000.0)
    mux = bus.host.attach(SimTCA9548A(0x70, "mux"))
    chip = mux.channels[3].attach(SimISM330BX(0x6A, seed=2, fifo_gyro_order=chip_order))
    chip.motion = _turning
    with RealSMBus([bus]) as (sb,):
        rc = main(["--mux", "0x70", "--channel", "3", "--duration", "1"], bus=sb, clock=bus.clock, sleep=bus.sleep)
    out = capsys.readouterr().out
    assert rc == 0 and f"FIFO gyroscope order: {chip_order}" in out and f"imu_fifo_gyro_order: {chip_order}" in out
    chip.motion = None
    chip.set_motion(np.zeros(3), np.array([0.0, 0.0, 9.80665]))
    with RealSMBus([bus]) as (sb,):
        assert main(["--mux", "0x70", "--channel", "3", "--duration", "0.3"], bus=sb, clock=bus.clock,
                    sleep=bus.sleep) == 2  # fmt: skip
    assert "undecided" in capsys.readouterr().out
    with RealSMBus([bus]) as (sb,):  # the IMU is on channel 3, not 4: no answer at 0x6a
        assert main(["--mux", "0x70", "--channel", "4"], bus=sb, clock=bus.clock, sleep=bus.sleep) == 1
    assert "error:" in capsys.readouterr().out
    assert main(["--mux", "0x70"]) == 1  # a mux without its channel
