"""The VL53L5CX range convention: perpendicular (default) or radial distances, in the simulator, the ring driver and a
flat-wall bring-up check.

Checked against geometry computed here: facing a wall squarely at distance D, a perpendicular chip reports D in every
zone; a radial one reports D * |[tan(ax), tan(ay), 1]| with the zone centre angles of a 45 deg field of view.
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from shape_sensing.drivers.tof_ring import SCHEMA, TofRingSet, layout_from_params, split_by_bus
from shape_sensing.drivers.vl53l5cx import (
    TofReading,
    UldBuffers,
    Vl53l5cx,
    range_convention_from_wall,
    run_steps,
    to_perpendicular,
    zone_direction_norms,
)
from shape_sensing.sim.i2c_bus import SimI2CBus
from shape_sensing.sim.i2c_dev import RealSMBus
from shape_sensing.sim.tof_rings import build_ring_hardware
from shape_sensing.sim.vl53l5cx_sim import SimVL53L5CX

WALL = 0.8  # m


@pytest.fixture(scope="module")
def buffers() -> UldBuffers:
    return UldBuffers.from_package()


def _norms_by_hand(n: int) -> np.ndarray:
    c = [math.tan(((i + 0.5) / n - 0.5) * math.radians(45.0)) for i in range(n)]
    return np.array([math.sqrt(c[i] ** 2 + c[j] ** 2 + 1.0) for j in range(n) for i in range(n)])


def _frame(buffers: UldBuffers, convention: str, distances: np.ndarray) -> TofReading:
    bus = SimI2CBus(bitrate=1_000_000.0)
    chip = bus.host.attach(
        SimVL53L5CX(0x29, firmware_crc=zlib.crc32(buffers.firmware), range_convention=convention, noise=False)
    )
    chip.set_zones(distances)
    with RealSMBus([bus]) as (sb,):
        tof = Vl53l5cx(sb, 0x29, buffers, clock=bus.clock)
        run_steps(tof.init_steps(), bus.sleep)
        run_steps(tof.set_resolution(8), bus.sleep)
        run_steps(tof.start_ranging(), bus.sleep)
        while not tof.check_data_ready():
            bus.sleep(0.01)
        return tof.get_ranging_data()


def test_zone_norms_by_hand():
    np.testing.assert_allclose(zone_direction_norms(8), _norms_by_hand(8), rtol=1e-12)
    np.testing.assert_allclose(zone_direction_norms(4), _norms_by_hand(4), rtol=1e-12)
    corner = math.radians(3.5 / 8 * 45.0)  # centre angle of a corner zone, both axes
    assert zone_direction_norms(8).max() == pytest.approx(math.sqrt(2 * math.tan(corner) ** 2 + 1))  # +13 %


@pytest.mark.parametrize("convention", ["perpendicular", "radial"])
def test_simulated_chip_reports_either_convention_and_the_wall_check_tells_which(buffers, convention):
    r = _frame(buffers, convention, np.full(64, WALL))
    expected = WALL * 1000 * (_norms_by_hand(8) if convention == "radial" else np.ones(64))
    np.testing.assert_allclose(r.distance_mm, expected, atol=0.125 + 1e-9)
    check = range_convention_from_wall(r)
    assert check.convention == convention and check.zones == 64
    np.testing.assert_allclose(to_perpendicular(r).distance_mm if convention == "radial" else r.distance_mm,
                               WALL * 1000, atol=0.2)  # fmt: skip


def test_wall_check_refuses_to_guess():
    z = 64
    few = TofReading(0, z, 1, 30.0, np.full(z, 800.0), np.ones(z), np.full(z, 255, np.uint8), np.zeros(z, np.uint8),
                     np.zeros(z), np.zeros(z))  # fmt: skip
    few.target_status[:5] = 5
    few.nb_target_detected[:5] = 1
    assert range_convention_from_wall(few).convention == "undecided"  # 5 valid zones
    rng = np.random.default_rng(0)
    rough = TofReading(0, z, 1, 30.0, 800.0 + rng.normal(0, 80, z), np.ones(z), np.full(z, 5, np.uint8),
                       np.ones(z, np.uint8), np.zeros(z), np.zeros(z))  # fmt: skip
    assert range_convention_from_wall(rough).convention == "undecided"  # an uneven target: neither model fits


def test_ring_driver_turns_radial_chips_into_perpendicular_readings(buffers):
    """Two rigs seeing the same wall: radial chips with range_convention 'radial' give the perpendicular chips'
    readings; with the default they would be up to 13 % long at the corners."""
    got = {}
    for convention in ("perpendicular", "radial"):
        p = SCHEMA.validate({})
        q = SCHEMA.validate({**split_by_bus(p)[1], "range_convention": convention})
        hw = build_ring_hardware(layout_from_params(q), buffers, bitrate=1_000_000.0, seed=1, tof_noise=False,
                                 range_convention=convention)  # fmt: skip
        for chip in hw.tofs.values():
            chip.set_zones(np.full(64, WALL))
        out: dict[str, TofReading] = {}
        with RealSMBus([hw.bus]) as (sb,):
            rings = TofRingSet(sb, q, buffers, clock=hw.bus.clock, sleep=hw.bus.sleep)

            def on(r, out=out):
                out.update(dict(r.tof))

            rings.run_until(4 * 1_000_000_000, on)
        got[convention] = out
    assert set(got["radial"]) == set(got["perpendicular"]) and len(got["radial"]) == 3
    for name, r in got["radial"].items():
        np.testing.assert_allclose(r.distance_mm, got["perpendicular"][name].distance_mm, atol=0.2)
        np.testing.assert_allclose(r.distance_mm, WALL * 1000, atol=0.2)
