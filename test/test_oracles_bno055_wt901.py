"""Oracles: implementations we did not write read our simulated BNO055 chain and our WT901 stream.

* Adafruit's CircuitPython BNO055 and TCA9548A drivers (PyPI ``adafruit-circuitpython-bno055``,
  ``adafruit-circuitpython-tca9548a``) run unchanged on our simulated mux tree through
  :class:`~shape_sensing.sim.circuitpython_i2c.CircuitPythonI2C` (the ``busio.I2C`` calls their
  ``I2CDevice`` makes). Their only use of ``busio`` is in type hints (evaluated at import): the test
  puts ``busio`` and ``digitalio`` modules in ``sys.modules`` whose ``I2C`` is our adapter, so
  Blinka's ``busio`` and its board detection never run. Their ``time.sleep`` is
  pointed at the simulated clock so that their waits count in the chip's timing model.
* PyPI ``witmotion`` (0.0.1.dev0, a WitMotion serial API: frame parser and configuration commands)
  reads our WT901 emulator's bytes from a pseudo-terminal with its own serial thread, and its
  configuration commands are written to the same emulator.

Where our driver and the oracle do the same thing on the wire (open a mux path, read CHIP_ID, switch
OPR_MODE, burst-read the quaternion, unlock and write a WT901 register), the recorded bytes are
compared byte for byte.
"""

from __future__ import annotations

import importlib
import os
import struct
import sys
import time
from types import ModuleType, SimpleNamespace
from typing import Any

import can
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from shape_sensing.drivers.bno055 import BNO055, CalibrationProfile, Reg
from shape_sensing.drivers.bno055_chain import Bno055Chain, ChainOptions
from shape_sensing.drivers.i2c_topology import Topology
from shape_sensing.drivers.wt901 import STANDARD_GRAVITY, FrameType, Wt901Parser, configuration_sequence
from shape_sensing.drivers.wt901_can import can_data_to_frame
from shape_sensing.sim.circuitpython_i2c import CircuitPythonI2C
from shape_sensing.sim.register_level import SimulatedHardware, build_simulated_hardware
from shape_sensing.sim.wt901_emulator import Wt901CanEmulator, Wt901Emulator, open_pty

# root 0x70 on the host bus; child 0x71 on root channel 0 (nested); sensors on both levels, 0x28 and 0x29 twice
TOPOLOGY = {
    "mux_names": ["root", "child"],
    "mux_addresses": [0x70, 0x71],
    "mux_parents": ["", "root"],
    "mux_channels": [-1, 0],
    "sensor_names": ["a", "b", "c"],
    "sensor_frames": ["a", "b", "c"],
    "sensor_addresses": [0x28, 0x29, 0x28],
    "sensor_muxes": ["child", "child", "root"],
    "sensor_channels": [2, 2, 1],
}


@pytest.fixture
def adafruit(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """Adafruit's modules, imported with our ``busio`` stand-in (no Blinka platform detection)."""
    busio = ModuleType("busio")
    busio.I2C = CircuitPythonI2C  # type: ignore[attr-defined]
    busio.UART = busio.SPI = object  # type: ignore[attr-defined]
    digitalio = ModuleType("digitalio")  # a type hint of adafruit_bus_device.spi_device
    digitalio.DigitalInOut = object  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "busio", busio)
    monkeypatch.setitem(sys.modules, "digitalio", digitalio)
    for name in ("adafruit_bno055", "adafruit_tca9548a", "adafruit_bus_device.i2c_device",
                 "adafruit_bus_device.spi_device", "adafruit_register.i2c_struct"):  # fmt: skip
        monkeypatch.delitem(sys.modules, name, raising=False)
    return SimpleNamespace(
        bno055=importlib.import_module("adafruit_bno055"), tca9548a=importlib.import_module("adafruit_tca9548a")
    )


def _hardware(seed: int = 0) -> tuple[Topology, SimulatedHardware]:
    topo = Topology.from_params(TOPOLOGY)
    hw = build_simulated_hardware(topo, seed=seed)
    rots = Rotation.from_euler("xyz", [[10, -20, 30], [-40, 5, 100], [0, 60, -150]], degrees=True)
    for k, chip in enumerate(hw.sensors.values()):
        chip.set_motion(rots[k].as_quat(), [0.1 * k, -0.2, 0.3], [0.5, -0.25, 9.81], [20e-6, 5e-6, -40e-6], 21 + k)
        chip.calibrate()
    return topo, hw


def _sim_time(monkeypatch: pytest.MonkeyPatch, module: ModuleType, hw: SimulatedHardware) -> None:
    clock = SimpleNamespace(sleep=hw.bus.sleep, monotonic=lambda: hw.bus.now_ns / 1e9)
    monkeypatch.setattr(module, "time", clock)


def _adafruit_sensors(ada: SimpleNamespace, hw: SimulatedHardware) -> dict[str, Any]:
    i2c = CircuitPythonI2C(hw.bus)
    root = ada.tca9548a.TCA9548A(i2c, 0x70)
    child = ada.tca9548a.TCA9548A(root[0], 0x71)  # a mux behind a mux channel
    return {
        "a": ada.bno055.BNO055_I2C(child[2], 0x28),
        "b": ada.bno055.BNO055_I2C(child[2], 0x29),
        "c": ada.bno055.BNO055_I2C(root[1], 0x28),
    }


def test_adafruit_drivers_read_our_simulated_chain(adafruit, monkeypatch):
    _, hw = _hardware()
    _sim_time(monkeypatch, adafruit.bno055, hw)
    sensors = _adafruit_sensors(adafruit, hw)
    for name, bno in sensors.items():
        chip = hw.sensors[name]
        assert bno.mode == 0x0C  # NDOF, set by the Adafruit driver's own bring-up (reset, page 1, mode)
        x, y, z, w = chip.orientation
        got = np.array(bno.quaternion)  # (w, x, y, z)
        want = np.array([w, x, y, z]) * np.sign(w)
        np.testing.assert_allclose(got * np.sign(got[0]), want, atol=1.5 / 2**14)
        np.testing.assert_allclose(bno.gyro, chip.angular_velocity, atol=np.deg2rad(1 / 16))  # rad/s, dps units
        np.testing.assert_allclose(bno.acceleration, chip.linear_acceleration, atol=0.011)
        np.testing.assert_allclose(bno.magnetic, chip.magnetic_field * 1e6, atol=1 / 16)  # uT
        assert bno.temperature == round(chip.temperature)
        assert bno.calibration_status == (0, 0, 0, 0)  # its bring-up resets the chip: the calibration is gone
        chip.calibrate()  # the user moves the sensor until it calibrates
        assert bno.calibration_status == (3, 3, 3, 3)
        # the calibration profile: Adafruit's offset/radius registers against our driver's 22-byte layout
        ours = CalibrationProfile.from_bytes(chip.learned)
        assert bno.offsets_accelerometer == ours.accel_offset
        assert bno.offsets_magnetometer == ours.mag_offset
        assert bno.offsets_gyroscope == ours.gyro_offset
        assert bno.radius_accelerometer == ours.accel_radius and bno.radius_magnetometer == ours.mag_radius
        # Adafruit waits the datasheet's switching and reset times: our chip model saw no early access
        assert chip.timing_violations == 0 and chip.ignored_writes == 0, name
    assert hw.bus.stats.conflicts == 0  # its one-channel-at-a-time switching never exposed two chips at 0x28


def _sensor_wire(wire: list[tuple[int, bytes, bytes, bool]], address: int) -> list[tuple[bytes, bytes]]:
    return [(w, r) for a, w, r, ok in wire if a == address and ok and w]  # probes (empty writes) left out


def test_transfer_logs_of_our_chain_and_adafruits_driver_agree(adafruit, monkeypatch):
    """Bring-up and one quaternion read of sensor ``a`` (behind two muxes), recorded byte by byte."""
    topo_one = {k: (v[:1] if k.startswith("sensor_") else v) for k, v in TOPOLOGY.items()}
    # ours: the chain driver
    _, hw_ours = _hardware()
    topo = Topology.from_params(topo_one)
    hw_ours.bus.wire = []
    chain = Bno055Chain(hw_ours.bus, topo, ChainOptions(mag_rate=0.0, capture_calibration=False),
                        clock=hw_ours.bus.clock, sleep=hw_ours.bus.sleep)  # fmt: skip
    assert chain.start() == []
    [reading] = chain.sweep().readings
    ours = list(hw_ours.bus.wire)
    # the oracle on an identical chip
    _, hw_ada = _hardware()
    _sim_time(monkeypatch, adafruit.bno055, hw_ada)
    hw_ada.bus.wire = []
    i2c = CircuitPythonI2C(hw_ada.bus)
    child = adafruit.tca9548a.TCA9548A(adafruit.tca9548a.TCA9548A(i2c, 0x70)[0], 0x71)
    bno = adafruit.bno055.BNO055_I2C(child[2], 0x28)
    w, x, y, z = bno.quaternion
    theirs = list(hw_ada.bus.wire)

    # Opening the path: both write 0x01 to the root and 0x04 to the child, in that order, before talking to 0x28
    # (ours also reads the control bytes back: reads are left out here).
    first_sensor = next(i for i, t in enumerate(ours) if t[0] == 0x28)
    assert [(a, wr) for a, wr, rd, _ in ours[:first_sensor] if wr] == [(0x70, b"\x01"), (0x71, b"\x04")]
    assert [(a, wr) for a, wr, rd, _ in theirs[:2]] == [(0x70, b"\x01"), (0x71, b"\x04")]
    ours_s, theirs_s = _sensor_wire(ours, 0x28), _sensor_wire(theirs, 0x28)
    # CHIP_ID: the first sensor transaction of both, register 0x00 answered 0xA0
    assert ours_s[0] == theirs_s[0] == (b"\x00", b"\xa0")
    # OPR_MODE writes: CONFIGMODE, then NDOF last; the same two bytes each
    for mode_write in ((b"\x3d\x00", b""), (b"\x3d\x0c", b"")):
        assert mode_write in ours_s and mode_write in theirs_s
    last_mode_write = [[t for t in log if t[0][:1] == b"\x3d" and len(t[0]) == 2][-1] for log in (ours_s, theirs_s)]
    assert last_mode_write[0] == last_mode_write[1] == (b"\x3d\x0c", b"")
    # The quaternion burst read: register 0x20, 8 bytes, the same bytes from the same chip state
    q_ours = [t for t in ours_s if t[0] == b"\x20"]
    q_theirs = [t for t in theirs_s if t[0] == b"\x20"]
    assert len(q_theirs) == 1 and q_ours[-1] == q_theirs[0] and len(q_theirs[0][1]) == 8
    # and both decode those bytes to the same rotation (ours x, y, z, w; theirs w, x, y, z)
    np.testing.assert_allclose(reading.orientation, np.array([x, y, z, w]) / np.linalg.norm([x, y, z, w]), atol=1e-12)
    # every mux byte Adafruit writes is "open one channel" or "close all"; ours opens the same channels
    for addr in (0x70, 0x71):
        opened_ours = {wr for a, wr, _, ok in ours if a == addr and ok and wr not in (b"", b"\x00")}
        opened_theirs = {wr for a, wr, _, ok in theirs if a == addr and ok and wr not in (b"", b"\x00")}
        assert opened_ours == opened_theirs


def test_our_bno055_driver_reads_what_adafruit_wrote(adafruit, monkeypatch):
    """The other direction: after Adafruit's driver configured the chip (page 1 ranges, NDOF), ours reads it."""
    _, hw = _hardware()
    _sim_time(monkeypatch, adafruit.bno055, hw)
    bno = _adafruit_sensors(adafruit, hw)["c"]
    bno.accel_range = adafruit.bno055.ACCEL_4G
    hw.bus.write_byte(0x70, 0x02)  # root channel 1 (Adafruit's channel unlock closed it)
    ours = BNO055(hw.bus, 0x28, sleep=hw.bus.sleep)
    assert ours.mode() == 0x0C and ours.chip_id() == 0xA0
    raw = ours.read_block(Reg.QUA_DATA, 8)
    assert struct.unpack("<4h", raw) == tuple(round(v * 2**14) for v in bno.quaternion)


# -- WT901 -------------------------------------------------------------------------------------------------------


def _pump(master: int, emu: Wt901Emulator, seconds: float) -> bytes:
    """Bytes the host wrote to the pty during ``seconds``, fed to the emulator too."""
    got = bytearray()
    t_end = time.monotonic() + seconds
    while time.monotonic() < t_end:
        try:
            chunk = os.read(master, 4096)
        except BlockingIOError:
            time.sleep(0.01)
            continue
        got += chunk
        emu.write(chunk)
    return bytes(got)


def test_witmotion_decodes_our_wt901_stream_as_our_parser_does():
    witmotion = importlib.import_module("witmotion")
    protocol = importlib.import_module("witmotion.protocol")
    emu = Wt901Emulator(rsw=0x021E, rate_hz=100.0)  # acc, gyro, angle, mag, quaternion
    euler = np.deg2rad([12.5, -33.0, 141.0])
    gyro = np.deg2rad([10.0, -250.0, 1500.0])
    accel = np.array([1.5, -2.25, 9.5])
    data = emu.cycle_bytes(euler, gyro=gyro, accel=accel, mag=[120, -340, 560], temperature_c=31.25)
    master, path = open_pty()
    os.set_blocking(master, False)
    got: list[Any] = []
    imu = witmotion.IMU(path, baudrate=9600)
    try:
        imu.subscribe(got.append)
        for _ in range(3):
            os.write(master, data)
        t_end = time.monotonic() + 5.0
        while len(got) < 10 and time.monotonic() < t_end:
            time.sleep(0.02)
    finally:
        imu.close()
        imu.ser.close()
        os.close(master)
    by_type = {type(m): m for m in got}
    frames = {f.type: f for f in Wt901Parser().feed(data)}
    ang = by_type[protocol.AngleMessage]
    np.testing.assert_allclose([ang.roll, ang.pitch, ang.yaw], np.rad2deg(euler), atol=180 / 32768)
    np.testing.assert_allclose(np.deg2rad([ang.roll, ang.pitch, ang.yaw]), frames[FrameType.ANGLE].scaled(), rtol=1e-12)
    acc = by_type[protocol.AccelerationMessage]
    # witmotion takes g = 9.8 (its protocol.G), ours and the datasheet's g 9.80665: compare in units of g
    np.testing.assert_allclose(np.array(acc.a) / protocol.G, frames[FrameType.ACCEL].scaled() / STANDARD_GRAVITY)
    np.testing.assert_allclose(np.array(acc.a) / protocol.G * STANDARD_GRAVITY, accel, atol=16 * 9.81 / 32768)
    assert acc.temp_celsius == 31.25 == frames[FrameType.ACCEL].temperature_c
    gy = by_type[protocol.AngularVelocityMessage]
    np.testing.assert_allclose(np.deg2rad(gy.w), frames[FrameType.GYRO].scaled(), rtol=1e-12)
    np.testing.assert_allclose(np.deg2rad(gy.w), gyro, atol=np.deg2rad(2000 / 32768))
    q = by_type[protocol.QuaternionMessage].q  # (q0, q1, q2, q3) = (w, x, y, z)
    np.testing.assert_allclose([q[1], q[2], q[3], q[0]], frames[FrameType.QUATERNION].scaled(), rtol=1e-12)
    truth = Rotation.from_euler("ZYX", euler[::-1]).as_quat()
    assert abs(float(np.dot([q[1], q[2], q[3], q[0]], truth))) > 1 - 1e-8
    assert by_type[protocol.MagneticMessage].mag == (120, -340, 560)


def test_witmotion_configuration_commands_match_ours_byte_for_byte():
    witmotion = importlib.import_module("witmotion")
    protocol = importlib.import_module("witmotion.protocol")
    emu = Wt901Emulator()
    master, path = open_pty()
    os.set_blocking(master, False)
    imu = witmotion.IMU(path, baudrate=9600)
    try:
        imu.set_messages_enabled({protocol.AngleMessage, protocol.QuaternionMessage, protocol.AccelerationMessage})
        imu.set_update_rate(50)
        imu.set_baudrate(115200)
        theirs = _pump(master, emu, 0.3)
    finally:
        imu.close()
        imu.ser.close()
        os.close(master)
    ours = configuration_sequence(output=["accel", "angle", "quaternion"], rate_hz=50.0, baud=115200, save=False)
    unlock, commands = ours[0], ours[1:]
    assert theirs == b"".join(unlock + c for c in commands)  # witmotion unlocks before every write
    assert (emu.rsw, emu.rate_hz, emu.baud, emu.rejected) == (0x020A, 50.0, 115200, 0)


def test_witmotion_message_classes_decode_our_can_payloads():
    """Over CAN a board forwards a frame's first 8 bytes; witmotion's decoders read the same three values."""
    protocol = importlib.import_module("witmotion.protocol")
    bus = can.Bus(interface="virtual", channel="oracle_wt901", receive_own_messages=True)
    try:
        emu = Wt901CanEmulator(bus, [0x50])
        emu.send_cycle([np.deg2rad([5.0, -10.0, 170.0])])
        n = 0
        while (msg := bus.recv(timeout=0.2)) is not None:
            ours = can_data_to_frame(msg.data)
            assert ours is not None
            cls = protocol.receive_messages[msg.data[1]]
            theirs = cls.parse(bytes(msg.data[2:8]) + b"\x00\x00")
            vals = {0x51: lambda m: np.array(m.a) / protocol.G * STANDARD_GRAVITY, 0x52: lambda m: np.deg2rad(m.w),
                    0x53: lambda m: np.deg2rad([m.roll, m.pitch, m.yaw]), 0x54: lambda m: np.array(m.mag, float)}
            np.testing.assert_allclose(vals[msg.data[1]](theirs), ours.scaled(), rtol=1e-12, atol=1e-12)
            n += 1
        assert n == 4  # acc, gyro, angle, mag (the default RSW); no quaternion over CAN
    finally:
        bus.shutdown()
