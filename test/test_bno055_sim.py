"""The simulated I2C bus: routing through muxes, conflicts, NACKs, timeouts and the wire-bit log."""

from __future__ import annotations

import errno

import pytest

from shape_sensing.sim.bno055_sim import SimBNO055
from shape_sensing.sim.i2c_bus import SimI2CBus
from shape_sensing.sim.tca9548a_sim import SimTCA9548A


def tree():
    bus = SimI2CBus()
    root = bus.host.attach(SimTCA9548A(0x70, "root"))
    a = root.channels[0].attach(SimBNO055(0x28, "a"))
    b = root.channels[1].attach(SimBNO055(0x28, "b"))
    return bus, root, a, b


def test_routing_follows_the_mux_control_byte():
    bus, _root, a, _b = tree()
    with pytest.raises(OSError) as info:
        bus.read_byte_data(0x28, 0x00)  # all channels closed at power-up: nobody answers
    assert info.value.errno == errno.EREMOTEIO
    bus.write_byte(0x70, 0x01)
    a.regs[0x07] = 0x01  # mark the two chips apart (PAGE_ID)
    assert bus.read_byte_data(0x28, 0x07) == 0x01
    bus.write_byte(0x70, 0x02)
    assert bus.read_byte_data(0x28, 0x07) == 0x00


def test_two_chips_on_one_address_drive_the_bus_together():
    bus, _root, a, b = tree()
    a.regs[0x07], b.regs[0x07] = 0b1100, 0b1010
    bus.write_byte(0x70, 0x03)  # both channels open
    assert bus.read_byte_data(0x28, 0x07) == 0b1000  # open-drain wired AND
    assert bus.stats.conflicts == 1 and bus.log[-1].conflict
    bus.write_byte_data(0x28, 0x3D, 0x0C)  # a write reaches both
    assert a.mode == b.mode == 0x0C


def test_wire_bits_and_bytes_match_hand_counts():
    bus, _root, _a, _b = tree()
    bus.write_byte(0x70, 0x01)  # S addr data P: 2 bytes, 1 + 18 + 1 bits
    assert (bus.log[-1].bytes, bus.log[-1].bits) == (2, 20)
    bus.read_i2c_block_data(0x28, 0x20, 8)  # S addr reg Sr addr 8*data P: 11 bytes, 3 + 99 bits
    assert (bus.log[-1].bytes, bus.log[-1].bits) == (11, 102)
    bus.write_i2c_block_data(0x28, 0x55, list(range(22)))  # S addr reg 22*data P
    assert (bus.log[-1].bytes, bus.log[-1].bits) == (24, 2 + 9 * 24)
    with pytest.raises(OSError):
        bus.read_byte(0x29)  # S addr NACK P
    assert (bus.log[-1].bytes, bus.log[-1].bits, bus.log[-1].ok) == (1, 11, False)
    # The virtual clock advanced by the bits at 400 kHz.
    assert bus.now_ns == ((20 + 102 + 218 + 11) * 2500)


def test_injected_nack_and_timeout_rates():
    bus, _root, _a, _b = tree()
    bus.write_byte(0x70, 0x01)
    bus.timeout_rate[0x28] = 1.0
    with pytest.raises(TimeoutError, match="clock stretched"):
        bus.read_byte_data(0x28, 0)
    bus.timeout_rate.clear()
    bus.nack_rate[0x28] = 0.5
    fails = 0
    for _ in range(400):
        try:
            bus.read_byte_data(0x28, 0)
        except OSError:
            fails += 1
    assert 150 < fails < 250
    with pytest.raises(ValueError, match="block length"):
        bus.read_i2c_block_data(0x28, 0, 33)


def test_dead_and_stuck_mux():
    bus, root, _a, _b = tree()
    bus.write_byte(0x70, 0x01)
    root.stuck = True
    bus.write_byte(0x70, 0x02)  # acknowledged, ignored
    assert bus.read_byte(0x70) == 0x01
    root.dead = True
    bus.invalidate()
    with pytest.raises(OSError):
        bus.read_byte(0x70)
    with pytest.raises(OSError):
        bus.read_byte_data(0x28, 0)  # an unpowered switch connects nothing


def test_bno055_sim_reset_and_mode_timing():
    bus = SimI2CBus()
    chip = bus.host.attach(SimBNO055(0x28))
    bus.write_byte_data(0x28, 0x3D, 0x0C)
    bus.read_byte_data(0x28, 0x00)  # within 7 ms of leaving CONFIGMODE
    assert chip.timing_violations == 1
    bus.sleep(0.01)
    bus.write_byte_data(0x28, 0x3F, 0x20)  # RST_SYS
    assert chip.mode == 0 and chip.resets == 1
    bus.sleep(0.7)
    assert bus.read_byte_data(0x28, 0x00) == 0xA0 and chip.timing_violations == 1
