"""Simulated sensor rings: register-level VL53L5CX and ISM330BX chips behind simulated TCA9548As, and a scene.

:func:`build_ring_hardware` wires simulators as a ring layout (the
configuration's ``RingLayout``, read by its fields) says. :class:`BoxScene`
gives each zone's boresight distance by ray casting against planes and
axis-aligned boxes (the zone's centre ray), which
:meth:`SimRingHardware.set_scene` loads into every ToF chip for the sensors'
current world poses.

Nothing here is imported from ``shape_sensing.drivers``: the zone geometry is
the datasheet's (a square field of view of 45 deg by 45 deg, split into 4x4 or
8x8 equal zones, row-major), and the chips are the register-level simulators.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shape_sensing.geometry import FloatArray
from shape_sensing.sim.i2c_bus import Segment, SimI2CBus
from shape_sensing.sim.ism330bx_sim import SimISM330BX
from shape_sensing.sim.tca9548a_sim import SimTCA9548A
from shape_sensing.sim.vl53l5cx_sim import FOV_RAD, SimVL53L5CX, zone_directions

__all__ = ["BoxScene", "SimRingHardware", "build_ring_hardware", "demo_scene"]


@dataclass
class BoxScene:
    """Planes (point, normal) and axis-aligned boxes (min corner, max corner)."""

    planes: list[tuple[FloatArray, FloatArray]] = field(default_factory=list)
    boxes: list[tuple[FloatArray, FloatArray]] = field(default_factory=list)

    def cast(self, origins: FloatArray, dirs: FloatArray) -> FloatArray:
        """Ray parameter ``t`` of the first hit (``inf`` if none) for rays ``origin + t * dir``, ``t > 0``."""
        o = np.atleast_2d(origins).astype(float)
        d = np.atleast_2d(dirs).astype(float)
        best = np.full(len(d), np.inf)
        for p, n in self.planes:
            den = d @ n
            with np.errstate(divide="ignore", invalid="ignore"):
                t = ((p - o) @ n) / den
            t = np.where((np.abs(den) > 1e-12) & (t > 1e-9), t, np.inf)
            best = np.minimum(best, t)
        for lo, hi in self.boxes:
            with np.errstate(divide="ignore", invalid="ignore"):
                t1 = (lo - o) / d
                t2 = (hi - o) / d
            tmin = np.nanmax(np.minimum(t1, t2), axis=1)
            tmax = np.nanmin(np.maximum(t1, t2), axis=1)
            hit = (tmax >= tmin) & (tmax > 1e-9)
            t = np.where(hit, np.where(tmin > 1e-9, tmin, tmax), np.inf)
            best = np.minimum(best, t)
        return best

    def zone_distances(
        self, T_world_sensor: FloatArray, zones_per_side: int, fov: float = FOV_RAD, max_range: float = 4.0
    ) -> FloatArray:
        """Boresight distance of each zone's centre ray (NaN beyond ``max_range`` or no hit)."""
        v = zone_directions(zones_per_side, fov)  # z = 1
        R, o = T_world_sensor[:3, :3], T_world_sensor[:3, 3]
        dirs = v @ R.T
        t = self.cast(np.broadcast_to(o, dirs.shape), dirs)  # hit = o + t * dirs, boresight distance = t (z = 1)
        return np.where(np.isfinite(t) & (t * np.linalg.norm(v, axis=1) <= max_range), t, np.nan)


def demo_scene() -> BoxScene:
    """A floor, a side wall, a ceiling-high block and a low box around a robot lying along +x at z = 0."""
    return BoxScene(
        planes=[
            (np.array([0.0, 0.0, -0.20]), np.array([0.0, 0.0, 1.0])),  # floor
            (np.array([0.0, 0.45, 0.0]), np.array([0.0, -1.0, 0.0])),  # wall on +y
        ],
        boxes=[
            (np.array([0.15, -0.60, -0.20]), np.array([0.40, -0.30, 0.50])),  # block on -y
            (np.array([0.35, -0.05, 0.25]), np.array([0.60, 0.30, 0.35])),  # shelf above
        ],
    )


@dataclass
class SimRingHardware:
    """Simulated bus with its muxes, ToF chips and IMUs by name."""

    bus: SimI2CBus
    muxes: dict[str, SimTCA9548A]
    tofs: dict[str, SimVL53L5CX]
    imus: dict[str, SimISM330BX]

    def set_scene(
        self, scene: BoxScene, T_world_sensor: dict[str, FloatArray], zones_per_side: int = 8, max_range: float = 4.0
    ) -> None:
        """Load each ToF chip with the zone distances of its sensor's world pose."""
        for name, T in T_world_sensor.items():
            self.tofs[name].set_zones(scene.zone_distances(T, zones_per_side, max_range=max_range))

    def reset(self, name: str) -> None:
        """Power-on reset of sensor ``name`` (as after a brown-out)."""
        chip = self.tofs.get(name) or self.imus[name]
        chip.power_on_reset(self.bus.now_ns)
        self.bus.invalidate()

    def set_nack_rate(self, address: int, rate: float) -> None:
        """Probability that a transfer to ``address`` (wherever routed) is not acknowledged."""
        self.bus.nack_rate[address] = rate

    def set_timeout_rate(self, address: int, rate: float) -> None:
        """Probability that a transfer to ``address`` times out (stretched clock)."""
        self.bus.timeout_rate[address] = rate


def build_ring_hardware(
    layout: Any,
    buffers: Any,
    *,
    bitrate: float = 400_000.0,
    seed: int = 0,
    gyro_noise: float = 0.002,
    accel_noise: float = 0.02,
    tof_noise: bool = True,
    range_convention: str = "perpendicular",
) -> SimRingHardware:
    """Simulated TCA9548As, VL53L5CXs and ISM330BXs wired as ``layout.topology`` says.

    ``layout``: the configuration's ring layout (``topology.muxes`` by name with ``address``, ``parent`` (empty:
    the host's segment) and ``channel``; ``tofs`` and ``imus`` with ``spec.name``, ``.address``, ``.mux``,
    ``.channel``). ``buffers``: ST's buffers (an object with ``firmware``) or the firmware image's bytes: the
    simulated chips accept that image. ``range_convention``: what the simulated VL53L5CXs report (see
    :class:`~shape_sensing.sim.vl53l5cx_sim.SimVL53L5CX`).
    """
    topo = layout.topology
    bus = SimI2CBus(bitrate=bitrate, seed=seed)
    muxes = {name: SimTCA9548A(m.address, name) for name, m in topo.muxes.items()}

    def segment(parent: str, channel: int) -> Segment:
        return muxes[parent].channels[channel] if parent else bus.host

    for name, m in topo.muxes.items():
        segment(m.parent, m.channel).attach(muxes[name])
    crc = zlib.crc32(bytes(getattr(buffers, "firmware", buffers)))
    rng = np.random.default_rng(seed)
    tofs, imus = {}, {}
    for i, mt in enumerate(layout.tofs):
        s = mt.spec
        tofs[s.name] = SimVL53L5CX(
            s.address, s.name, firmware_crc=crc, seed=seed * 100 + i, noise=tof_noise, range_convention=range_convention
        )
        segment(s.mux, s.channel).attach(tofs[s.name])
    for i, mi in enumerate(layout.imus):
        s = mi.spec
        imus[s.name] = SimISM330BX(
            s.address, s.name, freq_fine=int(rng.integers(-8, 9)), gyro_bias=rng.normal(0.0, 0.01, 3),
            gyro_noise=gyro_noise, accel_noise=accel_noise, seed=seed * 100 + 50 + i,
        )  # fmt: skip
        segment(s.mux, s.channel).attach(imus[s.name])
    return SimRingHardware(bus, muxes, tofs, imus)
