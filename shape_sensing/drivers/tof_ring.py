"""Sensor rings of a continuum robot: VL53L5CX time-of-flight sensors and ISM330BX IMUs behind TCA9548A switches.

:class:`TofRingSet` drives every sensor of N rings on one I2C bus. Sensors
are reached through the project's mux topology and router
(:mod:`shape_sensing.drivers.i2c_topology`), which checks address conflicts
(every VL53L5CX answers 0x29 at power-up, so each sits on its own channel).

Scheduling: :meth:`TofRingSet.poll` gives every device at most one *step*
per call: a boot step (a few register writes, or one firmware chunk of
``upload_chunk`` bytes), one data-ready check, one frame read, or one FIFO
burst. So a sensor that is booting, or re-booting after a reset, never holds
the bus longer than about one frame read, and the others keep streaming.

Faults never stop the set:

* a NACK or timeout on a VL53L5CX transfer is retried by its driver (every
  transfer of the ULD sequence is idempotent; ``retried_transfers``); one
  that still fails, or any on an ISM330BX (its FIFO reads are destructive,
  so they are not repeated), is counted; a sensor failing 3 times in a
  row, or failing its boot handshake (:class:`~shape_sensing.drivers.vl53l5cx.Vl53l5cxError`),
  is retried from a fresh boot with exponential backoff and reported;
* a VL53L5CX that stops producing frames for 3 periods (at least 0.3 s) is
  probed: a page register other than 2 means it was reset, and it is booted
  again (``reinits``); gaps in its stream counter count missed frames;
* an ISM330BX whose FIFO configuration is gone (reset) is configured again;
  FIFO overruns are counted and recovered by the driver;
* a malformed frame (block headers that do not fit the frame) is counted as bad and skipped.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from shape_sensing.config import Param, Schema
from shape_sensing.drivers.errors import DriverConfigError, DriverError
from shape_sensing.drivers.i2c_topology import HOST, MuxError, MuxRouter, MuxSpec, SensorSpec, Topology
from shape_sensing.drivers.ism330bx import ImuFifoSample, Ism330bx, Ism330bxConfig
from shape_sensing.drivers.vl53l5cx import (
    FIELD_OF_VIEW_RAD,
    RANGE_CONVENTIONS,
    TofReading,
    UldBuffers,
    Vl53l5cx,
    Vl53l5cxError,
    to_perpendicular,
)
from shape_sensing.geometry import FloatArray
from shape_sensing.types import DiagnosticLevel, DiagnosticStatus

__all__ = [
    "SCHEMA", "PollResult", "RingLayout", "SensorMount", "TofRingSet", "layout_from_params", "seed_params",
    "split_by_bus",
]  # fmt: skip

_log = logging.getLogger(__name__)
_NS = 1_000_000_000


def seed_params() -> dict[str, Any]:
    """The seed paper's layout: 3 rings of 3 VL53L5CX at 120 deg and one ISM330BX, rings turned 60 deg apart.

    Bus: one TCA9548A per ring on the host bus (0x70-0x72); the ToF sensors of a
    ring on channels 0-2 (all at 0x29), the IMU on channel 3 (0x6A).
    """
    rings = ["ring_0", "ring_1", "ring_2"]
    tof_names, tof_rings, tof_angles, tof_muxes, tof_channels = [], [], [], [], []
    imu_names, imu_rings, imu_muxes, imu_channels = [], [], [], []
    for i, ring in enumerate(rings):
        for k in range(3):
            tof_names.append(f"{ring}_tof_{k}")
            tof_rings.append(ring)
            tof_angles.append(60.0 * i + 120.0 * k)
            tof_muxes.append(f"mux_{i}")
            tof_channels.append(k)
        imu_names.append(f"{ring}_imu")
        imu_rings.append(ring)
        imu_muxes.append(f"mux_{i}")
        imu_channels.append(3)
    return {
        "ring_names": rings,
        "ring_buses": [1, 3, 4],
        "ring_arc_lengths": [0.13, 0.30, 0.47],
        "ring_radius": 0.038,
        "mux_names": [f"mux_{i}" for i in range(3)],
        "mux_addresses": [0x70, 0x71, 0x72],
        "mux_parents": ["", "", ""],
        "mux_channels": [-1, -1, -1],
        "tof_names": tof_names,
        "tof_rings": tof_rings,
        "tof_angles": tof_angles,
        "tof_addresses": [0x29] * 9,
        "tof_muxes": tof_muxes,
        "tof_channels": tof_channels,
        "imu_names": imu_names,
        "imu_rings": imu_rings,
        "imu_addresses": [0x6A] * 3,
        "imu_muxes": imu_muxes,
        "imu_channels": imu_channels,
    }


_SEED = seed_params()

SCHEMA = Schema(
    "tof_ring",
    (
        Param("bus", int, 1, "I2C adapter (set per adapter from ring_buses)", min=0),
        Param("simulate", bool, False, "use the register-level simulators (and a simple scene) instead of /dev/i2c-N"),
        Param("frame_prefix", str, "", "prefix of every frame id"),
        Param("ring_names", "str[]", _SEED["ring_names"], "ring names (ring frames: <prefix><name>)"),
        Param(
            "ring_arc_lengths", "float[]", _SEED["ring_arc_lengths"], "arc length of each ring from the base", unit="m"
        ),
        Param(
            "ring_buses",
            "int[]",
            _SEED["ring_buses"],
            "I2C adapter of each ring (rings on one adapter share a TofRingSet)",
            min=0,
        ),
        Param("bitrate", float, 1_000_000.0, "bus clock, for the simulators and the bus budget", min=1e4, unit="Hz"),
        Param("ring_radius", float, _SEED["ring_radius"], "radius of the sensors' optical centres", min=0.0, unit="m"),
        Param("mux_names", "str[]", _SEED["mux_names"], "TCA9548A names"),
        Param("mux_addresses", "int[]", _SEED["mux_addresses"], "TCA9548A addresses (0x70-0x77)", min=0x70, max=0x77),
        Param("mux_parents", "str[]", _SEED["mux_parents"], "parent mux of each mux ('' = host bus)"),
        Param(
            "mux_channels", "int[]", _SEED["mux_channels"], "parent channel of each mux (-1 on the host)", min=-1, max=7
        ),
        Param("tof_names", "str[]", _SEED["tof_names"], "VL53L5CX names (topic namespaces; frame ids <name>_optical)"),
        Param("tof_rings", "str[]", _SEED["tof_rings"], "ring of each VL53L5CX"),
        Param("tof_angles", "float[]", _SEED["tof_angles"], "angle of each VL53L5CX around its ring", unit="deg"),
        Param("tof_addresses", "int[]", _SEED["tof_addresses"], "VL53L5CX addresses (41 = 0x29)", min=0x08, max=0x77),
        Param("tof_muxes", "str[]", _SEED["tof_muxes"], "mux each VL53L5CX hangs off ('' = host bus)"),
        Param("tof_channels", "int[]", _SEED["tof_channels"], "channel of that mux (-1 on the host)", min=-1, max=7),
        Param(
            "tof_mountings",
            "float[]",
            [],
            "optional T_ring_sensor per VL53L5CX: x y z (m) roll pitch yaw (deg, fixed axes x-y-z) of its optical "
            "frame, 6 values each; empty: radial at tof_angles and ring_radius",
        ),
        Param("imu_names", "str[]", _SEED["imu_names"], "ISM330BX names"),
        Param("imu_rings", "str[]", _SEED["imu_rings"], "ring of each ISM330BX"),
        Param(
            "imu_addresses",
            "int[]",
            _SEED["imu_addresses"],
            "ISM330BX addresses (106 = 0x6A, 107 = 0x6B)",
            min=0x6A,
            max=0x6B,
        ),
        Param("imu_muxes", "str[]", _SEED["imu_muxes"], "mux each ISM330BX hangs off"),
        Param("imu_channels", "int[]", _SEED["imu_channels"], "channel of that mux", min=-1, max=7),
        Param(
            "imu_mountings",
            "float[]",
            [],
            "optional T_ring_sensor per ISM330BX: x y z (m) roll pitch yaw (deg), 6 values each; empty: the ring frame",
        ),
        Param("resolution", int, 8, "zones per side", choices=(4, 8)),
        Param("ranging_frequency", int, 15, "ranging frequency (8x8: 1-15, 4x4: 1-60)", min=1, max=60, unit="Hz"),
        Param("integration_time", int, 20, "integration time", min=2, max=1000, unit="ms"),
        Param("sharpener", int, 5, "sharpener", min=0, max=99, unit="%"),
        Param("target_order", str, "strongest", "first target reported per zone", choices=("strongest", "closest")),
        Param("firmware_dir", str, "", "directory with ST's VL53L5CX binaries (default: the sparkfun package's)"),
        Param("upload_chunk", int, 1024, "bytes per firmware write transfer", min=16, max=8190),
        Param(
            "imu_odr",
            float,
            120.0,
            "ISM330BX output data rate",
            choices=(15.0, 30.0, 60.0, 120.0, 240.0, 480.0),
            unit="Hz",
        ),
        Param(
            "gyro_full_scale", int, 500, "gyroscope full scale", choices=(125, 250, 500, 1000, 2000, 4000), unit="dps"
        ),
        Param("accel_full_scale", int, 4, "accelerometer full scale", choices=(2, 4, 8), unit="g"),
        Param(
            "imu_fifo_gyro_order",
            str,
            "xyz",
            "order of the gyroscope axes in the ISM330BX FIFO words (datasheet: xyz; "
            "docs/hardware/vl53l5cx_ism330bx.md tells how to check a chip)",
            choices=("xyz", "zyx"),
        ),
        Param("bias_duration", float, 2.0, "stationary start averaged for the gyro bias (0: none)", min=0.0, unit="s"),
        Param("imu_read_period", float, 0.05, "FIFO burst read period", min=0.005, max=2.0, unit="s"),
        Param(
            "range_convention",
            str,
            "perpendicular",
            "what a VL53L5CX zone distance measures: 'perpendicular' (along the boresight, to the plane through the "
            "target; ST's answers on its forum: 'radial to perpendicular conversion is done on the chip') or "
            "'radial' (along the zone's ray; converted here to perpendicular)",
            choices=RANGE_CONVENTIONS,
        ),
        Param("min_range", float, 0.025, "below this a distance is not trusted (seed paper)", min=0.0, unit="m"),
        Param("max_range", float, 4.0, "VL53L5CX maximum range", min=0.1, unit="m"),
        Param("retry_initial", float, 0.5, "first retry delay of a failed sensor", min=0.01, unit="s"),
        Param("retry_max", float, 10.0, "longest retry delay", min=0.01, unit="s"),
        Param("diagnostics_period", float, 1.0, "diagnostics period", min=0.05, unit="s"),
    ),
)


@dataclass(frozen=True)
class SensorMount:
    """Where a sensor sits: its ring and ``T_ring_sensor`` (4x4)."""

    name: str
    ring: str
    kind: str  # "tof" or "imu"
    T_ring_sensor: FloatArray
    spec: SensorSpec


@dataclass
class RingLayout:
    """Rings, mountings and the bus topology."""

    rings: dict[str, float]  # name -> arc length (m)
    tofs: list[SensorMount]
    imus: list[SensorMount]
    topology: Topology


#: suffix of a ToF sensor's frame id (``<prefix><name>_optical``): its axes are a camera's optical axes (z the
#: boresight, x along a zone row, y down the backbone), which REP-103 marks with this suffix
OPTICAL_SUFFIX = "_optical"


def tof_mount(angle_deg: float, radius: float) -> FloatArray:
    """``T_ring_sensor`` of a ToF looking radially out at ``angle_deg`` (ring z = backbone tangent).

    Optical frame (REP-103 camera): z = boresight (radial), y = down (-backbone), x = y x z.
    """
    a = math.radians(angle_deg)
    z = np.array([math.cos(a), math.sin(a), 0.0])
    y = np.array([0.0, 0.0, -1.0])
    x = np.cross(y, z)
    T = np.eye(4)
    T[:3, :3] = np.column_stack([x, y, z])
    T[:3, 3] = radius * z
    return T


def split_by_bus(p: Mapping[str, Any]) -> dict[int, dict[str, Any]]:
    """Parameters of each adapter's rings (sensors and muxes filtered; a mux serving several adapters is refused)."""
    if len(p["ring_buses"]) != len(p["ring_names"]):
        raise DriverConfigError(
            f"ring_buses has {len(p['ring_buses'])} entries, expected one per ring ({len(p['ring_names'])})"
        )
    bus_of = dict(zip(p["ring_names"], (int(b) for b in p["ring_buses"]), strict=True))
    mux_bus: dict[str, int] = {}
    for prefix in ("tof_", "imu_"):
        for name, ring, mux in zip(p[f"{prefix}names"], p[f"{prefix}rings"], p[f"{prefix}muxes"], strict=False):
            bus = bus_of.get(ring)
            if mux and bus is not None and mux_bus.setdefault(mux, bus) != bus:
                raise DriverConfigError(
                    f"mux {mux!r} carries sensors of rings on adapters {mux_bus[mux]} and {bus} (sensor {name!r}); "
                    "a TCA9548A sits on one bus: fix ring_buses or the sensors' muxes"
                )
    out: dict[int, dict[str, Any]] = {}
    for bus in sorted(set(bus_of.values())):
        q = dict(p)
        keep_r = [i for i, r in enumerate(p["ring_names"]) if bus_of[r] == bus]
        for k in ("ring_names", "ring_arc_lengths", "ring_buses"):
            q[k] = [p[k][i] for i in keep_r]
        for prefix, n in (("tof_", len(p["tof_names"])), ("imu_", len(p["imu_names"]))):
            keep = [i for i in range(n) if bus_of.get(p[f"{prefix}rings"][i], -1) == bus]
            for k in [k for k in p if k.startswith(prefix) and isinstance(p[k], list)]:
                if k.endswith("_mountings"):
                    q[k] = [v for i in keep for v in p[k][6 * i : 6 * i + 6]] if p[k] else []
                else:
                    q[k] = [p[k][i] for i in keep]
        used = set(q["tof_muxes"]) | set(q["imu_muxes"])
        changed = True
        while changed:  # parents of used muxes
            changed = False
            for n, par in zip(p["mux_names"], p["mux_parents"], strict=True):
                if n in used and par and par not in used:
                    used.add(par)
                    changed = True
        keep_m = [i for i, n in enumerate(p["mux_names"]) if n in used]
        for k in ("mux_names", "mux_addresses", "mux_parents", "mux_channels"):
            q[k] = [p[k][i] for i in keep_m]
        q["bus"] = bus
        out[bus] = q
    return out


def _mountings(p: Mapping[str, Any], key: str, n: int) -> list[FloatArray] | None:
    values = list(p.get(key, []) or [])
    if not values:
        return None
    if len(values) != 6 * n:
        raise DriverConfigError(f"{key} has {len(values)} values, expected 6 per sensor ({6 * n}) or none")
    from scipy.spatial.transform import Rotation

    out = []
    for k in range(n):
        x, y, z, r, pt, yw = (float(v) for v in values[6 * k : 6 * k + 6])
        T = np.eye(4)
        T[:3, :3] = Rotation.from_euler("xyz", [r, pt, yw], degrees=True).as_matrix()
        T[:3, 3] = [x, y, z]
        out.append(T)
    return out


def layout_from_params(p: Mapping[str, Any]) -> RingLayout:
    """Validated layout from the schema's parameters (names the offending parameter)."""
    rings = dict(zip(p["ring_names"], p["ring_arc_lengths"], strict=False))
    if len(p["ring_names"]) != len(p["ring_arc_lengths"]):
        raise DriverConfigError(
            f"ring_names ({len(p['ring_names'])}) and ring_arc_lengths ({len(p['ring_arc_lengths'])}) differ in length"
        )
    tof_keys = ("tof_names", "tof_rings", "tof_angles", "tof_addresses", "tof_muxes", "tof_channels")
    imu_keys = ("imu_names", "imu_rings", "imu_addresses", "imu_muxes", "imu_channels")
    for keys in (tof_keys, imu_keys):
        lens = {k: len(p[k]) for k in keys}
        if len(set(lens.values())) > 1:
            raise DriverConfigError(f"{', '.join(keys)} must have the same length; got {lens}")
    prefix = p.get("frame_prefix", "")
    muxes = [
        MuxSpec(str(n), int(a), str(par), int(c))
        for n, a, par, c in zip(p["mux_names"], p["mux_addresses"], p["mux_parents"], p["mux_channels"], strict=True)
    ]
    specs: list[SensorSpec] = []
    tofs, imus = [], []
    tof_T = _mountings(p, "tof_mountings", len(p["tof_names"]))
    imu_T = _mountings(p, "imu_mountings", len(p["imu_names"]))
    for i, (n, ring, ang, addr, mux, ch) in enumerate(zip(*(p[k] for k in tof_keys), strict=True)):
        if ring not in rings:
            raise DriverConfigError(f"tof_rings: sensor {n!r} names ring {ring!r}; known rings: {list(rings)}")
        # the frame of the zones: optical axes (z the boresight), named with REP-103's camera suffix
        spec = SensorSpec(str(n), f"{prefix}{n}{OPTICAL_SUFFIX}", int(addr), str(mux), int(ch))
        specs.append(spec)
        T = tof_T[i] if tof_T is not None else tof_mount(float(ang), float(p["ring_radius"]))
        tofs.append(SensorMount(str(n), str(ring), "tof", T, spec))
    for i, (n, ring, addr, mux, ch) in enumerate(zip(*(p[k] for k in imu_keys), strict=True)):
        if ring not in rings:
            raise DriverConfigError(f"imu_rings: sensor {n!r} names ring {ring!r}; known rings: {list(rings)}")
        spec = SensorSpec(str(n), f"{prefix}{n}", int(addr), str(mux), int(ch))
        specs.append(spec)
        imus.append(SensorMount(str(n), str(ring), "imu", imu_T[i] if imu_T is not None else np.eye(4), spec))
    topo = Topology(muxes, specs, sensor_addresses=None, sensor_kind="ring sensor")
    return RingLayout(rings, tofs, imus, topo)


@dataclass
class PollResult:
    """What one :meth:`TofRingSet.poll` read."""

    tof: list[tuple[str, TofReading]] = field(default_factory=list)
    imu: list[tuple[str, list[ImuFifoSample]]] = field(default_factory=list)
    bus_ns: int = 0


@dataclass
class _Dev:
    mount: SensorMount
    driver: Any
    state: str = "boot"  # boot, run, retry
    steps: Generator[float, None, Any] | None = None
    wake_ns: int = 0
    retry_s: float = 0.0
    fails_in_row: int = 0
    boot_started_ns: int = 0
    boots: int = 0
    boot_failures: int = 0
    reinits: int = 0
    nacks: int = 0
    timeouts: int = 0
    bad_frames: int = 0
    missed_frames: int = 0
    frames: int = 0
    invalid_fraction: float = float("nan")
    last_data_ns: int = 0
    last_error: str = ""
    temperature: float = float("nan")
    next_temp_ns: int = 0
    rate_window: list[int] = field(default_factory=list)


class TofRingSet:
    """All rings' sensors on one bus.

    Args:
        bus: ``smbus2.SMBus``-like (``write_byte``/``read_byte`` for the muxes, byte data and ``i2c_rdwr``).
        params: the :data:`SCHEMA` parameters (validated).
        buffers: VL53L5CX binaries (default: loaded from ``firmware_dir`` or the package).
        clock, sleep: host clock (ns) and sleep; inject the simulated bus's in simulation.
        i2c_msg: ``smbus2.i2c_msg`` (injected for tests).
    """

    def __init__(
        self,
        bus: Any,
        params: Mapping[str, Any],
        buffers: UldBuffers | None = None,
        *,
        clock: Callable[[], int] = time.monotonic_ns,
        sleep: Callable[[float], None] = time.sleep,
        i2c_msg: Any = None,
    ) -> None:
        self.params = SCHEMA.validate(params)
        p = self.params
        if p["resolution"] == 8 and p["ranging_frequency"] > 15:
            raise DriverConfigError(f"ranging_frequency {p['ranging_frequency']} invalid at 8x8: expected 1-15 Hz")
        self.layout = layout_from_params(p)
        self.bus = bus
        self.clock = clock
        self.sleep = sleep
        self.router = MuxRouter(bus, self.layout.topology)
        from shape_sensing.drivers.vl53l5cx import load_buffers

        self.buffers = buffers if buffers is not None else load_buffers(p["firmware_dir"])
        imu_cfg = Ism330bxConfig(
            odr=float(p["imu_odr"]), gyro_fs=int(p["gyro_full_scale"]), accel_fs=int(p["accel_full_scale"]),
            bias_duration=float(p["bias_duration"]), fifo_gyro_order=str(p["imu_fifo_gyro_order"]),
        )  # fmt: skip
        self.devices: list[_Dev] = []
        for m in self.layout.tofs:
            drv = Vl53l5cx(bus, m.spec.address, self.buffers, clock=clock, i2c_msg=i2c_msg,
                           upload_chunk=int(p["upload_chunk"]))  # fmt: skip
            self.devices.append(_Dev(m, drv))
        for m in self.layout.imus:
            self.devices.append(
                _Dev(m, Ism330bx(bus, m.spec.address, imu_cfg, clock=clock, sleep=sleep, i2c_msg=i2c_msg))
            )
        self.by_name = {d.mount.name: d for d in self.devices}
        self.tof_period_ns = int(_NS / int(p["ranging_frequency"]))
        self.mux_errors = 0
        now = clock()
        for d in self.devices:
            self._begin_boot(d, now)

    # -- public ------------------------------------------------------------------
    def streaming(self) -> list[str]:
        """Names of the sensors delivering data."""
        return [d.mount.name for d in self.devices if d.state == "run"]

    def next_wake_ns(self) -> int:
        """Earliest time a device wants the bus."""
        return min(d.wake_ns for d in self.devices)

    def poll(self) -> PollResult:
        """One step for every device that is due (see the module docstring)."""
        out = PollResult()
        t0 = self.clock()
        for d in self.devices:
            now = self.clock()
            if now < d.wake_ns:
                continue
            try:
                self.router.open(self.layout.topology.sensor_path(d.mount.spec), d.mount.spec.address)
                self._step(d, now, out)
                d.fails_in_row = 0
            except MuxError as exc:
                self.mux_errors += 1
                d.last_error = str(exc)
                d.wake_ns = now + int(0.05 * _NS)
            except TimeoutError as exc:
                d.timeouts += 1
                self._bus_error(d, now, exc)
            except OSError as exc:
                d.nacks += 1
                self._bus_error(d, now, exc)
            except (Vl53l5cxError, DriverError) as exc:
                d.boot_failures += 1 if d.state == "boot" else 0
                self._fail(d, now, f"{exc}")
            except (ValueError, IndexError) as exc:  # bytes no decoder expected: counted, the sensor retried
                d.bad_frames += 1
                self._fail(d, now, f"undecodable data: {exc}")
        out.bus_ns = self.clock() - t0
        return out

    def run_until(self, t_ns: int, on_result: Callable[[PollResult], None] | None = None) -> None:
        """Poll until the clock reaches ``t_ns``, sleeping until the next device is due."""
        while self.clock() < t_ns:
            r = self.poll()
            if on_result is not None and (r.tof or r.imu):
                on_result(r)
            wait = min(self.next_wake_ns(), t_ns) - self.clock()
            if wait > 0:
                self.sleep(wait / _NS)

    def diagnostics(self) -> list[DiagnosticStatus]:
        """Per sensor: state, rate, invalid-zone fraction, boot failures, re-inits, bus errors, overruns."""
        now = self.clock()
        out = []
        for d in self.devices:
            window = [t for t in d.rate_window if now - t <= 2 * _NS]
            d.rate_window = window
            rate = len(window) / 2.0
            level = DiagnosticLevel.OK if d.state == "run" else (
                DiagnosticLevel.WARN if d.state == "boot" else DiagnosticLevel.ERROR)  # fmt: skip
            values = {
                "state": d.state, "rate_hz": f"{rate:.2f}", "boot_failures": str(d.boot_failures),
                "reinits": str(d.reinits), "nacks": str(d.nacks), "timeouts": str(d.timeouts),
                "bad_frames": str(d.bad_frames), "last_error": d.last_error,
                "address": f"{d.mount.spec.address:#04x}",
            }  # fmt: skip
            if d.mount.kind == "tof":
                values["retried_transfers"] = str(d.driver.retried)
                values.update(invalid_zone_fraction=f"{d.invalid_fraction:.3f}", missed_frames=str(d.missed_frames),
                              frames=str(d.frames))  # fmt: skip
            else:
                drv: Ism330bx = d.driver
                values.update(fifo_overruns=str(drv.overruns), samples=str(drv.samples_read),
                              timestamp_gaps=str(drv.gaps), temperature_c=f"{d.temperature:.2f}")  # fmt: skip
                if drv.bias is not None:
                    values["gyro_bias_rad_s"] = " ".join(f"{b:.5f}" for b in drv.bias.bias)
            msg = {"run": "streaming", "boot": "booting", "retry": f"failed, retrying: {d.last_error}"}[d.state]
            out.append(DiagnosticStatus(f"tof_ring: {d.mount.name}", level, msg, d.mount.spec.frame_id, values))
        return out

    # -- internals -------------------------------------------------------------------
    def _begin_boot(self, d: _Dev, now: int) -> None:
        d.state = "boot"
        d.boots += 1
        d.boot_started_ns = now
        d.wake_ns = now
        d.steps = self._tof_bringup(d.driver) if d.mount.kind == "tof" else self._imu_bringup(d.driver)

    def _tof_bringup(self, drv: Vl53l5cx) -> Generator[float, None, None]:
        p = self.params
        yield from drv.init_steps()
        yield from drv.set_resolution(int(p["resolution"]))
        yield from drv.set_ranging_frequency_hz(int(p["ranging_frequency"]))
        yield from drv.set_integration_time_ms(int(p["integration_time"]))
        yield from drv.set_sharpener_percent(int(p["sharpener"]))
        yield from drv.set_target_order(str(p["target_order"]))
        yield from drv.start_ranging()

    def _imu_bringup(self, drv: Ism330bx) -> Generator[float, None, None]:
        drv.check_identity()
        yield from drv.reset_steps(timeout=0.05)
        drv.configure()  # a gyro bias estimated before a re-init is kept: it belongs to the chip, not the session
        yield 0.0

    def _step(self, d: _Dev, now: int, out: PollResult) -> None:
        if d.state == "retry":
            self._begin_boot(d, now)
        if d.state == "boot":
            assert d.steps is not None
            try:
                wait = next(d.steps)
                d.wake_ns = now + int(wait * _NS)
            except StopIteration:
                d.state = "run"
                d.steps = None
                d.retry_s = 0.0
                d.last_data_ns = self.clock()
                d.wake_ns = self.clock()
                _log.info("%s: streaming", d.mount.name)
            return
        if d.mount.kind == "tof":
            self._tof_step(d, now, out)
        else:
            self._imu_step(d, now, out)

    def _tof_step(self, d: _Dev, now: int, out: PollResult) -> None:
        drv: Vl53l5cx = d.driver
        previous = drv.stream_count  # check_data_ready takes the new count, as ST's does
        if drv.check_data_ready():
            try:
                reading = drv.get_ranging_data()
            except Vl53l5cxError as exc:
                d.bad_frames += 1
                d.last_error = str(exc)
                d.wake_ns = self.clock() + self.tof_period_ns // 10
                return
            if self.params["range_convention"] == "radial":
                reading = to_perpendicular(reading)
            if previous != 255:
                d.missed_frames += max(0, (reading.stream_count - previous) % 255 - 1)
            d.frames += 1
            d.rate_window.append(reading.stamp_ns)
            valid = reading.valid()
            frac = 1.0 - float(valid.mean())
            d.invalid_fraction = frac if math.isnan(d.invalid_fraction) else 0.8 * d.invalid_fraction + 0.2 * frac
            d.last_data_ns = reading.stamp_ns
            d.temperature = reading.silicon_temp_degc
            out.tof.append((d.mount.name, reading))
            d.wake_ns = reading.stamp_ns + int(0.9 * self.tof_period_ns)
            return
        stall = max(3 * self.tof_period_ns, int(0.3 * _NS))
        if now - d.last_data_ns > stall:
            page = drv.page()
            d.reinits += 1
            reason = "was reset (page register 0)" if page != 2 else "stopped producing frames"
            d.last_error = f"{d.mount.name} {reason}; booting it again"
            _log.warning("%s", d.last_error)
            self._begin_boot(d, now)
            return
        d.wake_ns = now + max(self.tof_period_ns // 20, int(0.002 * _NS))

    def _imu_step(self, d: _Dev, now: int, out: PollResult) -> None:
        drv: Ism330bx = d.driver
        if now >= d.next_temp_ns:
            d.next_temp_ns = now + _NS
            if not drv.verify():
                d.reinits += 1
                d.last_error = f"{d.mount.name} lost its configuration (reset); configuring it again"
                _log.warning("%s", d.last_error)
                drv.configure()
            d.temperature = drv.temperature()
        r = drv.read_fifo()
        if r.samples:
            out.imu.append((d.mount.name, r.samples))
            d.last_data_ns = r.samples[-1].stamp_ns
            d.rate_window.extend(s.stamp_ns for s in r.samples[-len(r.samples) :])
            d.frames += len(r.samples)
        d.wake_ns = now + int(float(self.params["imu_read_period"]) * _NS)

    def _bus_error(self, d: _Dev, now: int, exc: BaseException) -> None:
        d.fails_in_row += 1
        d.last_error = f"{type(exc).__name__}: {exc}"
        self.router.invalidate()
        if d.state == "boot" or d.fails_in_row >= 3:
            d.boot_failures += 1 if d.state == "boot" else 0
            self._fail(d, now, d.last_error)
        else:
            d.wake_ns = now + int(0.002 * _NS)

    def _fail(self, d: _Dev, now: int, why: str) -> None:
        p = self.params
        d.retry_s = float(p["retry_initial"]) if d.retry_s == 0 else min(2 * d.retry_s, float(p["retry_max"]))
        d.state = "retry"
        d.steps = None
        d.last_error = why
        d.wake_ns = now + int(d.retry_s * _NS)
        _log.warning("%s failed (%s); retrying in %.2f s", d.mount.name, why, d.retry_s)


def fov_rad() -> float:
    """Full field of view of the VL53L5CX (rad)."""
    return FIELD_OF_VIEW_RAD


__all__ += ["HOST", "OPTICAL_SUFFIX", "fov_rad", "tof_mount"]
