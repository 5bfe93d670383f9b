"""BNO055 and TCA9548A drivers against hand-built bytes and the datasheet scales."""

from __future__ import annotations

import glob
import inspect
import math
import os
import struct

import numpy as np
import pytest
import smbus2

from shape_sensing.drivers.bno055 import (
    BNO055,
    FIELDS,
    BlockRead,
    CalibrationProfile,
    CalibrationStatus,
    Mode,
    Reg,
    decode_block,
    plan_reads,
)
from shape_sensing.drivers.errors import DriverConfigError, ProtocolError
from shape_sensing.drivers.tca9548a import TCA9548A
from shape_sensing.sim.bno055_sim import SimBNO055
from shape_sensing.sim.i2c_bus import SimI2CBus
from shape_sensing.sim.tca9548a_sim import SimTCA9548A


class RecordingBus:
    """Records smbus2 calls and answers reads from a register dict."""

    def __init__(self, regs: dict[int, int] | None = None) -> None:
        self.calls: list[tuple] = []
        self.regs = regs or {}

    def write_byte(self, addr: int, value: int, force: bool | None = None) -> None:
        self.calls.append(("write_byte", addr, value))

    def read_byte(self, addr: int, force: bool | None = None) -> int:
        self.calls.append(("read_byte", addr))
        return 0x05

    def write_byte_data(self, addr: int, reg: int, value: int, force: bool | None = None) -> None:
        self.calls.append(("write_byte_data", addr, reg, value))
        self.regs[reg] = value

    def read_byte_data(self, addr: int, reg: int, force: bool | None = None) -> int:
        self.calls.append(("read_byte_data", addr, reg))
        return self.regs.get(reg, 0)

    def read_i2c_block_data(self, addr: int, reg: int, length: int, force: bool | None = None) -> list[int]:
        self.calls.append(("read_i2c_block_data", addr, reg, length))
        return [self.regs.get(reg + i, 0) for i in range(length)]

    def write_i2c_block_data(self, addr: int, reg: int, data: list[int], force: bool | None = None) -> None:
        self.calls.append(("write_i2c_block_data", addr, reg, list(data)))
        for i, d in enumerate(data):
            self.regs[reg + i] = d


def test_tca9548a_writes_one_control_byte_per_selection():
    bus = RecordingBus()
    mux = TCA9548A(bus, 0x71)
    mux.select(3)
    mux.select_mask(0b1000_0001)
    mux.deselect()
    assert bus.calls == [("write_byte", 0x71, 0x08), ("write_byte", 0x71, 0x81), ("write_byte", 0x71, 0x00)]
    assert mux.channels() == [0, 2]  # read_byte answers 0x05


def test_tca9548a_rejects_bad_address_and_channel():
    with pytest.raises(DriverConfigError, match="0x6f invalid: expected 0x70-0x77"):
        TCA9548A(RecordingBus(), 0x6F)
    with pytest.raises(DriverConfigError, match="channel 8 invalid"):
        TCA9548A(RecordingBus(), 0x70).select(8)


def test_tca9548a_sim_keeps_last_byte_and_reads_it_back():
    bus = SimI2CBus()
    sim = bus.host.attach(SimTCA9548A(0x70))
    bus.write_i2c_block_data(0x70, 0x01, [0x02, 0x04])  # several bytes: the last one is kept
    assert sim.control == 0x04
    assert TCA9548A(bus, 0x70).read_control() == 0x04


def _le16(v: int) -> list[int]:
    return list(struct.pack("<h", v))


def test_decode_scales_and_signs_from_hand_built_bytes():
    # Quaternion w=0.5, x=-0.5, y=0.5, z=-0.5 at 2^14 LSB; gyro -1 rad/s at 900 LSB; accel 9.81 m/s^2 at 100 LSB;
    # mag -25 uT at 16 LSB; temperature -5 degC.
    regs = {}
    for i, v in enumerate([8192, -8192, 8192, -8192]):
        regs[Reg.QUA_DATA + 2 * i], regs[Reg.QUA_DATA + 2 * i + 1] = _le16(v)
    for i, v in enumerate([-900, 450, 0]):
        regs[Reg.GYR_DATA + 2 * i], regs[Reg.GYR_DATA + 2 * i + 1] = _le16(v)
    for i, v in enumerate([0, -100, 981]):
        regs[Reg.ACC_DATA + 2 * i], regs[Reg.ACC_DATA + 2 * i + 1] = _le16(v)
    for i, v in enumerate([-400, 16, 0]):
        regs[Reg.MAG_DATA + 2 * i], regs[Reg.MAG_DATA + 2 * i + 1] = _le16(v)
    regs[Reg.TEMP] = (-5) & 0xFF
    regs[Reg.CALIB_STAT] = 0b11_10_01_00
    chip = BNO055(RecordingBus(regs), 0x28)
    fields = ["orientation", "angular_velocity", "linear_acceleration", "magnetic_field", "temperature", "calibration"]
    assert set(fields) <= set(FIELDS)
    d = chip.read(plan_reads(fields))
    np.testing.assert_allclose(d.orientation, [-0.5, 0.5, -0.5, 0.5])  # x, y, z, w
    np.testing.assert_allclose(d.angular_velocity, [-1.0, 0.5, 0.0])
    np.testing.assert_allclose(d.linear_acceleration, [0.0, -1.0, 9.81])
    np.testing.assert_allclose(d.magnetic_field, [-25e-6, 1e-6, 0.0])
    assert d.temperature == -5.0
    assert d.calibration == CalibrationStatus(3, 2, 1, 0)


def test_decode_dps_and_mg_units():
    plan = plan_reads(["angular_velocity", "linear_acceleration"])
    gyr = bytes(_le16(16) + _le16(-32) + _le16(0))
    acc = bytes(_le16(1000) + _le16(0) + _le16(-500))
    blocks = {r.start: (acc if r.start == Reg.ACC_DATA else gyr) for r in plan.reads}
    d = decode_block(plan, [blocks[r.start] for r in plan.reads], unit_sel=0x00 | 0x01)  # dps, mg
    np.testing.assert_allclose(d.angular_velocity, np.deg2rad([1.0, -2.0, 0.0]))
    np.testing.assert_allclose(d.linear_acceleration, [9.80665, 0.0, -4.903325])


def test_plan_reads_merges_only_when_cheaper():
    # QUA (8) + LIA (6) + GRV (6) are contiguous: one read.
    p = plan_reads(["orientation", "free_acceleration", "gravity"])
    assert p.reads == (BlockRead(0x20, 20),)
    # ACC and GYR are 6 bytes apart (MAG between): a gap of 54 bits costs more than a read's 30 overhead bits.
    p = plan_reads(["linear_acceleration", "angular_velocity"])
    assert p.reads == (BlockRead(0x08, 6), BlockRead(0x14, 6))
    # Status fields 0x34-0x35, 0x39-0x3A, 0x3D: gaps of 3 and 2 bytes are cheaper than reads.
    p = plan_reads(["temperature", "calibration", "system_status", "mode"])
    assert p.reads == (BlockRead(0x34, 10),)
    assert p.wire_bits == 30 + 9 * 10
    # Never beyond the 32-byte SMBus block.
    p = plan_reads(["linear_acceleration", "magnetic_field", "angular_velocity", "euler", "orientation", "gravity"])
    assert all(r.length <= 32 for r in p.reads)
    with pytest.raises(DriverConfigError, match="unknown BNO055 field"):
        plan_reads(["heading"])


def test_calibration_profile_bytes_round_trip_and_layout():
    prof = CalibrationProfile((1, -2, 3), (-400, 250, 7), (0, -1, 2), 1000, 640)
    raw = prof.to_bytes()
    assert len(raw) == 22
    assert raw[:2] == bytes([1, 0]) and raw[2:4] == bytes([0xFE, 0xFF])  # little-endian int16, accel x first
    assert struct.unpack("<h", raw[20:22])[0] == 640  # mag radius last (0x69-0x6A)
    assert CalibrationProfile.from_bytes(raw) == prof
    assert CalibrationProfile.from_dict(prof.to_dict()) == prof


def test_calibration_profile_bad_values():
    with pytest.raises(DriverConfigError, match="accel_radius"):
        CalibrationProfile((0, 0, 0), (0, 0, 0), (0, 0, 0), 5000, 0)
    with pytest.raises(DriverConfigError, match="mag_offset"):
        CalibrationProfile((0, 0, 0), (0, 0, 40000), (0, 0, 0), 0, 0)
    with pytest.raises(ProtocolError, match="21 bytes, expected 22"):
        CalibrationProfile.from_bytes(bytes(21))
    with pytest.raises(DriverConfigError, match="expected a list of 3 integers"):
        CalibrationProfile.from_dict(
            {
                "accel_offset": [1, 2],
                "mag_offset": [0, 0, 0],
                "gyro_offset": [0, 0, 0],
                "accel_radius": 0,
                "mag_radius": 0,
            }
        )


def test_bno055_configure_sequence_and_chip_id():
    bus = RecordingBus({Reg.CHIP_ID: 0xA0})
    slept: list[float] = []
    chip = BNO055(bus, 0x29, sleep=slept.append)
    chip.check_chip_id()
    prof = CalibrationProfile((1, 2, 3), (4, 5, 6), (7, 8, 9), 10, 11)
    chip.configure(Mode.NDOF, calibration=prof)
    writes = [c for c in bus.calls if c[0].startswith("write")]
    assert writes[0] == ("write_byte_data", 0x29, Reg.OPR_MODE, 0x00)
    assert ("write_byte_data", 0x29, Reg.UNIT_SEL, 0x06) in writes
    assert ("write_i2c_block_data", 0x29, 0x55, list(prof.to_bytes())) in writes
    assert writes[-1] == ("write_byte_data", 0x29, Reg.OPR_MODE, 0x0C)
    assert slept == [0.019, 0.007]  # datasheet switching times
    bus.regs[Reg.CHIP_ID] = 0x55
    with pytest.raises(ProtocolError, match="CHIP_ID 0x55, expected 0xa0"):
        chip.check_chip_id()
    with pytest.raises(DriverConfigError, match="AXIS_MAP_CONFIG 0x25"):
        chip.set_axis_remap(0x25, 0)


def test_sim_bno055_quantises_like_the_chip():
    bus = SimI2CBus()
    sim = bus.host.attach(SimBNO055(0x28))
    chip = BNO055(bus, 0x28, sleep=bus.sleep)
    chip.configure(Mode.NDOF)
    q = np.array([0.1, -0.2, 0.3, 0.9])
    q /= np.linalg.norm(q)
    sim.set_motion(q, [0.123, -0.5, 2.0], [0.01, -9.8, 0.333])
    d = chip.read(plan_reads(["orientation", "angular_velocity", "linear_acceleration"]))
    assert np.max(np.abs(d.orientation - q)) <= 0.5 / 2**14 + 1e-12
    assert np.max(np.abs(d.angular_velocity - [0.123, -0.5, 2.0])) <= 0.5 / 900 + 1e-12
    np.testing.assert_allclose(d.linear_acceleration, [0.01, -9.8, 0.33])
    assert sim.timing_violations == 0


def test_sim_bno055_ignores_config_writes_outside_configmode():
    bus = SimI2CBus()
    sim = bus.host.attach(SimBNO055(0x28))
    chip = BNO055(bus, 0x28, sleep=bus.sleep)
    chip.configure(Mode.NDOF)
    chip.write_calibration(CalibrationProfile((9, 9, 9), (9, 9, 9), (9, 9, 9), 9, 9))
    assert sim.ignored_writes == 22
    chip.set_mode(Mode.CONFIG)
    assert chip.read_calibration() == CalibrationProfile((0, 0, 0), (0, 0, 0), (0, 0, 0), 0, 0)


def test_smbus2_has_the_calls_the_drivers_use():
    """The fakes mirror real smbus2 signatures: check them against the installed library."""
    for name in ("write_byte", "read_byte", "write_byte_data", "read_byte_data", "read_i2c_block_data",
                 "write_i2c_block_data"):  # fmt: skip
        real = list(inspect.signature(getattr(smbus2.SMBus, name)).parameters)
        sim = list(inspect.signature(getattr(SimI2CBus, name)).parameters)
        assert real == sim, name


@pytest.mark.skipif(not glob.glob("/dev/i2c-*"), reason="no /dev/i2c-* on this machine")
def test_real_smbus2_bus_runs_the_same_driver():
    """On a machine with an I2C adapter: run the chain on it (config from SHAPE_SENSING_BNO055_CONFIG)."""
    from shape_sensing.drivers.bno055_chain import SCHEMA, Bno055Chain, ChainOptions
    from shape_sensing.drivers.i2c_topology import Topology

    config = os.environ.get("SHAPE_SENSING_BNO055_CONFIG")
    if not config:
        pytest.skip("set SHAPE_SENSING_BNO055_CONFIG to a bno055_chain parameter file describing the wired tree")
    params = SCHEMA.load_yaml(config)
    with smbus2.SMBus(params["bus"]) as bus:
        chain = Bno055Chain(bus, Topology.from_params(params), ChainOptions.from_params(params))
        try:
            pending = chain.start(timeout=3.0)
            assert pending == []
            result = chain.sweep()
            assert {r.name for r in result.readings} == {s.name for s in chain.topology.sensors}
            for r in result.readings:
                if r.orientation is not None:
                    assert math.isclose(float(np.linalg.norm(r.orientation)), 1.0, abs_tol=1e-6)
        finally:
            chain.close()


def test_axis_remap_reaches_the_vectors_as_the_datasheet_defines():
    bus = SimI2CBus()
    sim = bus.host.attach(SimBNO055(0x28))
    chip = BNO055(bus, 0x28, sleep=bus.sleep)
    # X' = Y, Y' = X, Z' = Z (0x21), Z' negated (sign bit 0).
    chip.configure(Mode.NDOF, axis_map=(0x21, 0x01))
    sim.set_motion([0, 0, 0, 1], [0.1, 0.2, 0.3], [1.0, 2.0, 3.0])
    d = chip.read(plan_reads(["angular_velocity", "linear_acceleration"]))
    np.testing.assert_allclose(d.linear_acceleration, [2.0, 1.0, -3.0])
    np.testing.assert_allclose(d.angular_velocity, [0.2, 0.1, -0.3], atol=1e-3)
    # An invalid map written straight to the chip is refused (the previous one stays).
    chip.set_mode(Mode.CONFIG)
    bus.write_byte_data(0x28, Reg.AXIS_MAP_CONFIG, 0x25)
    assert bus.read_byte_data(0x28, Reg.AXIS_MAP_CONFIG) == 0x21


def test_real_smbus2_object_drives_the_simulated_tree(monkeypatch):
    """The installed smbus2.SMBus (its own struct packing and ioctl calls) against emulated i2c-dev ioctls."""
    import smbus2.smbus2 as smbus2_module

    from shape_sensing.drivers.bno055_chain import Bno055Chain, ChainOptions, example_topology_params
    from shape_sensing.drivers.i2c_topology import Topology
    from shape_sensing.sim.i2c_dev import I2cDevEmulator
    from shape_sensing.sim.register_level import build_simulated_hardware

    topo = Topology.from_params(example_topology_params())
    hw = build_simulated_hardware(topo)
    for i, chip in enumerate(hw.sensors.values()):
        chip.set_motion([0.0, 0.0, np.sin(0.05 * i), np.cos(0.05 * i)], [0.0, 0.0, 0.01 * i])
        chip.calibrate()
    emulator = I2cDevEmulator(hw.bus)
    monkeypatch.setattr(smbus2_module, "ioctl", emulator.ioctl)
    bus = smbus2.SMBus()  # not opened: no /dev/i2c-N needed
    bus.fd = 1000
    chain = Bno055Chain(bus, topo, ChainOptions(), clock=hw.bus.clock, sleep=hw.bus.sleep)
    assert chain.start() == []
    result = chain.sweep()
    assert len(result.readings) == 18
    for r in result.readings:
        i = int(r.name[-2:])
        np.testing.assert_allclose(r.orientation, [0.0, 0.0, np.sin(0.05 * i), np.cos(0.05 * i)], atol=1e-4)
        np.testing.assert_allclose(r.angular_velocity, [0.0, 0.0, 0.01 * i], atol=1 / 1800)
    assert set(chain.calibration.profiles) == set(hw.sensors)  # 22-byte block reads went through smbus2 too
    assert emulator.requests > hw.bus.stats.transactions  # I2C_SLAVE address switches on top of the transfers
    hw.set_dead("imu_03")
    chain.sweep()
    assert "Remote I/O error" in chain.health["imu_03"].last_error


def test_plan_reads_is_optimal_against_brute_force():
    """Every contiguous grouping of the sorted fields, costed independently, is never cheaper than the plan."""
    import itertools

    rng = np.random.default_rng(0)
    names = sorted(FIELDS, key=lambda f: FIELDS[f][0])
    for _ in range(150):
        chosen = [f for f in names if rng.random() < 0.5] or ["orientation"]
        spans = [(FIELDS[f][0], FIELDS[f][0] + FIELDS[f][1]) for f in chosen]
        best = None
        for cuts in itertools.product([False, True], repeat=len(spans) - 1):
            groups, start = [], 0
            for i, cut in enumerate(cuts, start=1):
                if cut:
                    groups.append(spans[start:i])
                    start = i
            groups.append(spans[start:])
            lengths = [max(e for _, e in g) - g[0][0] for g in groups]
            if max(lengths) <= 32:
                cost = sum(30 + 9 * n for n in lengths)
                best = cost if best is None else min(best, cost)
        plan = plan_reads(chosen)
        assert plan.wire_bits == best, chosen
        # and the plan covers every field inside its reads
        for f in chosen:
            k, off = plan.offsets[f]
            assert off + FIELDS[f][1] <= plan.reads[k].length


def _remap_chip(axis_map: tuple[int, int]) -> tuple[SimI2CBus, SimBNO055, BNO055]:
    bus = SimI2CBus()
    sim = bus.host.attach(SimBNO055(0x28))
    chip = BNO055(bus, 0x28, sleep=bus.sleep)
    chip.configure(Mode.NDOF, axis_map=axis_map)
    return bus, sim, chip


@pytest.mark.parametrize("axis_map", [(0x21, 0x01), (0x24, 0x06), (0x12, 0x00), (0x09, 0x05)])
def test_axis_remap_reaches_the_fused_orientation(axis_map: tuple[int, int]) -> None:
    """Section 3.4: the remap changes the sensor frame of every output, the fused orientation included.

    Checked against an independent reading of the same chip: the gravity vector it reports must be
    the world's gravity seen through the quaternion it reports, and the Euler angles must be that
    quaternion's heading/roll/pitch (0x21/0x01 was the case seen: gravity (4.61, 3.35, -7.98) against
    (3.35, 4.61, 7.98) from the quaternion).
    """
    from scipy.spatial.transform import Rotation

    _bus, sim, chip = _remap_chip(axis_map)
    q_world_sensor = Rotation.from_euler("xyz", [0.4, -0.3, 1.1]).as_quat()
    sim.set_motion(q_world_sensor)
    d = chip.read(plan_reads(["orientation", "gravity", "euler"]))
    R = Rotation.from_quat(d.orientation)
    np.testing.assert_allclose(R.inv().apply([0.0, 0.0, 9.80665]), d.extra["gravity"], atol=0.02)
    heading, roll, pitch = d.extra["euler"]
    yaw_e, pitch_e, roll_e = R.as_euler("ZYX")
    np.testing.assert_allclose([heading, roll, pitch], [yaw_e, roll_e, pitch_e], atol=2e-3)
    # And the remapped frame is the old one with its axes picked and signed as the registers say.
    P = sim._remap_matrix()
    np.testing.assert_allclose(R.as_matrix(), Rotation.from_quat(q_world_sensor).as_matrix() @ P.T, atol=1e-3)


def test_page1_sensor_configuration_is_stored_read_back_and_applied() -> None:
    """Page 1 (table 4-3): ACC_Config 0x08, MAG_Config 0x09, GYR_Config_0/1 0x0A/0x0B; CONFIGMODE-only writes."""
    bus = SimI2CBus()
    sim = bus.host.attach(SimBNO055(0x28))
    chip = BNO055(bus, 0x28, sleep=bus.sleep)
    chip.configure(Mode.AMG)  # non-fusion: the user's sensor configuration applies
    bus.sleep(0.05)
    bus.write_byte_data(0x28, Reg.PAGE_ID, 1)
    assert bus.read_byte_data(0x28, Reg.PAGE_ID) == 1
    # Reset values (datasheet): ACC 0x0D (4 G), MAG 0x6D, GYR_0 0x38 (2000 dps), GYR_1 0x00.
    assert bus.read_i2c_block_data(0x28, 0x08, 4) == [0x0D, 0x6D, 0x38, 0x00]
    bus.write_byte_data(0x28, 0x08, 0x0C)  # outside CONFIGMODE: ignored
    assert bus.read_byte_data(0x28, 0x08) == 0x0D and sim.ignored_writes >= 1
    bus.write_byte_data(0x28, Reg.PAGE_ID, 0)
    chip.set_mode(Mode.CONFIG)
    bus.sleep(0.05)
    bus.write_byte_data(0x28, Reg.PAGE_ID, 1)
    bus.write_byte_data(0x28, 0x08, 0x0C)  # 2 G
    bus.write_byte_data(0x28, 0x09, 0x6F)  # magnetometer 30 Hz
    bus.write_byte_data(0x28, 0x0A, 0x3C)  # 125 dps
    bus.write_byte_data(0x28, 0x0B, 0x01)
    assert bus.read_i2c_block_data(0x28, 0x08, 4) == [0x0C, 0x6F, 0x3C, 0x01]
    bus.write_byte_data(0x28, Reg.PAGE_ID, 0)
    assert bus.read_byte_data(0x28, 0x00) == 0xA0  # page 0 again
    chip.set_mode(Mode.AMG)
    bus.sleep(0.05)
    sim.set_motion([0, 0, 0, 1], [3.0, -0.5, 0.1], [45.0, -5.0, 9.0])
    d = chip.read(plan_reads(["angular_velocity", "linear_acceleration"]))
    two_g, dps125 = 2 * 9.80665, math.radians(125.0)
    np.testing.assert_allclose(d.linear_acceleration, [two_g, -5.0, 9.0], atol=0.01)
    np.testing.assert_allclose(d.angular_velocity, [dps125, -0.5, 0.1], atol=2e-3)
    # In a fusion mode the fusion sets 4 G and 2000 dps itself, whatever page 1 holds.
    chip.set_mode(Mode.NDOF)
    bus.sleep(0.05)
    d = chip.read(plan_reads(["angular_velocity", "linear_acceleration"]))
    np.testing.assert_allclose(d.linear_acceleration, [4 * 9.80665, -5.0, 9.0], atol=0.01)
    np.testing.assert_allclose(d.angular_velocity, [3.0, -0.5, 0.1], atol=2e-3)
    # A reset restores the page-1 defaults.
    bus.write_byte_data(0x28, Reg.SYS_TRIGGER, 0x20)
    bus.sleep(0.7)
    bus.write_byte_data(0x28, Reg.PAGE_ID, 1)
    assert bus.read_i2c_block_data(0x28, 0x08, 4) == [0x0D, 0x6D, 0x38, 0x00]
