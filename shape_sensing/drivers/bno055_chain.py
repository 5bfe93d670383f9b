"""A chain of BNO055s behind layered TCA9548A muxes: sweep scheduler, fault handling, calibration store.

:class:`Bno055Chain` reads every sensor of a :class:`~shape_sensing.drivers.i2c_topology.Topology`
once per :meth:`Bno055Chain.sweep`, with as little bus traffic as it can:

* sensors are visited in path order, reversed every other sweep (serpentine),
  so the mux channel left open at the end of one sweep is the first needed by
  the next; a mux is written only when its control byte must change, and a
  child channel is closed only when it would expose a second device at the
  address about to be used (:class:`~shape_sensing.drivers.i2c_topology.MuxRouter`);
* each sensor is read with the burst reads that cover exactly the published
  fields at the fewest bits (:func:`~shape_sensing.drivers.bno055.plan_reads`);
  magnetometer and the status block (temperature, calibration levels, system
  status, operation mode) are read at their own, lower rates, staggered
  across sensors;
* each sample is stamped with the clock read just before its first data byte.

Faults never stop a sweep:

* a NACK, ``OSError`` or timeout marks the sensor stale; it is retried with
  exponential backoff while the others keep streaming;
* a sensor found in CONFIGMODE (reset), or uncalibrated after it was fully
  calibrated, is reconfigured without blocking (the 19 ms and 7 ms mode
  switches are waited across sweeps) and its stored calibration profile is
  written back;
* a mux that does not answer, or reads back a control byte other than the one
  written (stuck), isolates its subtree until a retry succeeds;
* every frame is checked before use (:class:`FrameCheck`): a block read as all 0x00 or all 0xFF
  (a bus that returned nothing, or a chip that reset), a quaternion whose norm is not 1, and a
  quaternion that turned further since the last good one than the gyroscope's full range allows
  (a torn read, or bytes from the wrong register or the wrong chip that happen to form a unit
  quaternion) are counted per reason and the sample is dropped: it never reaches a reading.

Calibration: once a sensor reports full calibration its 22-byte profile is
captured (a short CONFIGMODE visit) into a :class:`CalibrationStore`, which
saves to and loads from YAML; a loaded store is applied at bring-up and after
every reset.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from shape_sensing.config import Param, Schema
from shape_sensing.drivers.bno055 import (
    BNO055,
    MODE_SWITCH_FROM_CONFIG_S,
    MODE_SWITCH_TO_CONFIG_S,
    UNITS_SI,
    CalibrationProfile,
    CalibrationStatus,
    Decoded,
    Mode,
    ReadPlan,
    decode_block,
    plan_reads,
)
from shape_sensing.drivers.errors import DriverConfigError, ProtocolError
from shape_sensing.drivers.i2c_topology import MuxError, MuxRouter, SensorSpec, Topology, path_text
from shape_sensing.geometry import FloatArray
from shape_sensing.types import DiagnosticLevel, DiagnosticStatus, ImuSample

__all__ = [
    "CALIBRATION_FORMAT",
    "IMU_FIELDS",
    "SCHEMA",
    "Bno055Chain",
    "Bno055Reading",
    "CalibrationStore",
    "ChainOptions",
    "SensorHealth",
    "SweepResult",
    "example_topology_params",
]

_log = logging.getLogger(__name__)

IMU_FIELDS = ("orientation", "angular_velocity", "linear_acceleration")
STATUS_FIELDS = ("temperature", "calibration", "system_status", "mode")
CALIBRATION_FORMAT = "shape_sensing/bno055_calibration/1"
_NS = 1_000_000_000
_WARN_AFTER = 3  # consecutive failures before a sensor's trouble is logged as a warning


def example_topology_params(names: Sequence[str] | None = None) -> dict[str, list[Any]]:
    """A two-level TCA9548A tree for ``names`` (frames = names; default: the 18 IMUs of the seed-000 vine robot,
    ``imu_00`` .. ``imu_17`` in frames ``vine_imu_00`` .. ``vine_imu_17``).

    A root mux (0x70) on the host bus; child muxes 0x71, 0x72, ... on its
    channels 0, 1, ...; each child carries two sensors (0x28 and 0x29) on each
    of its channels 0, 1, 2 (all eight channels beyond 48 sensors). Sensors
    are listed base to tip. Up to 128 sensors.
    """
    frames = [f"vine_imu_{i:02d}" for i in range(18)] if names is None else list(names)
    names = [f"imu_{i:02d}" for i in range(18)] if names is None else list(names)
    n = len(names)
    per_child = 6 if n <= 48 else 16
    n_children = max(1, -(-n // per_child))
    if n_children > 7:
        raise DriverConfigError(f"{n} sensors do not fit a two-level tree (at most 112)")
    children = [f"arm_{chr(ord('a') + k)}" for k in range(n_children)]
    return {
        "mux_names": ["root", *children],
        "mux_addresses": [0x70 + k for k in range(n_children + 1)],
        "mux_parents": ["", *(["root"] * n_children)],
        "mux_channels": [-1, *range(n_children)],
        "sensor_names": names,
        "sensor_frames": frames,
        "sensor_addresses": [0x28 if i % 2 == 0 else 0x29 for i in range(n)],
        "sensor_muxes": [children[i // per_child] for i in range(n)],
        "sensor_channels": [(i % per_child) // 2 for i in range(n)],
    }


_EX = example_topology_params()


def _diag3(values: list[float]) -> str | None:
    return None if len(values) == 3 else "expected 3 values (the covariance diagonal)"


SCHEMA = Schema(
    "bno055_chain",
    (
        Param("bus", int, 1, "I2C adapter number (/dev/i2c-N)", min=0),
        Param("simulate", bool, False, "use the register-level simulator instead of /dev/i2c-N"),
        Param("rate", float, 100.0, "target sweep rate", min=0.1, max=1000.0, unit="Hz"),
        Param("mode", str, "NDOF", "BNO055 operation mode", choices=("NDOF", "IMU", "NDOF_FMC_OFF", "M4G", "COMPASS")),
        Param("imu_fields", "str[]", list(IMU_FIELDS), "sensor_msgs/Imu fields read every sweep", choices=IMU_FIELDS),
        Param("mag_rate", float, 20.0, "magnetometer read rate (0: never; none in IMU mode)", min=0.0, unit="Hz"),
        Param("status_rate", float, 1.0, "temperature/calibration/status read rate", min=0.01, unit="Hz"),
        Param("axis_map_config", int, 0x24, "AXIS_MAP_CONFIG register (0x24: chip default)", min=0, max=0x3F),
        Param("axis_map_sign", int, 0x00, "AXIS_MAP_SIGN register", min=0, max=7),
        Param("retry_initial", float, 0.05, "first retry delay of a failed sensor or mux", min=0.001, unit="s"),
        Param("retry_max", float, 2.0, "longest retry delay", min=0.001, unit="s"),
        Param("mux_verify_period", float, 1.0, "read-back check of each mux (0: only after errors)", min=0.0, unit="s"),
        Param("calibration_file", str, "", "YAML calibration profiles restored at start and saved by the service"),
        Param("capture_calibration", bool, True, "capture each sensor's profile once it is fully calibrated"),
        Param("frame_prefix", str, "", "prefix of every frame id"),
        Param(
            "imu_array_topic", str, "",
            "also publish every sweep as one shape_sensing/ImuArray on this topic (one row per sensor in the "
            "configured order, a sensor not read in the sweep without orientation); '' for none. The per-sensor "
            "NAME/data topics are published either way",
        ),
        Param("orientation_covariance", "float[]", [3e-4, 3e-4, 3e-4], "diagonal", min=0.0, check=_diag3, unit="rad^2"),
        Param(
            "angular_velocity_covariance",
            "float[]",
            [1e-5, 1e-5, 1e-5],
            "diagonal",
            min=0.0,
            check=_diag3,
            unit="(rad/s)^2",
        ),
        Param(
            "linear_acceleration_covariance",
            "float[]",
            [4e-4, 4e-4, 4e-4],
            "diagonal",
            min=0.0,
            check=_diag3,
            unit="(m/s^2)^2",
        ),
        Param(
            "magnetic_field_covariance", "float[]", [1e-12, 1e-12, 1e-12], "diagonal", min=0.0, check=_diag3, unit="T^2"
        ),
        Param("diagnostics_period", float, 1.0, "diagnostics publishing period", min=0.05, unit="s"),
        Param("mux_names", "str[]", _EX["mux_names"], "TCA9548A names"),
        Param(
            "mux_addresses",
            "int[]",
            _EX["mux_addresses"],
            "TCA9548A addresses (112-119 = 0x70-0x77)",
            min=0x70,
            max=0x77,
        ),
        Param("mux_parents", "str[]", _EX["mux_parents"], "parent mux of each mux ('' = host bus)"),
        Param(
            "mux_channels",
            "int[]",
            _EX["mux_channels"],
            "parent channel of each mux (-1 on the host bus)",
            min=-1,
            max=7,
        ),
        Param("sensor_names", "str[]", _EX["sensor_names"], "BNO055 names (topic namespaces)"),
        Param("sensor_frames", "str[]", _EX["sensor_frames"], "BNO055 frame ids"),
        Param(
            "sensor_addresses",
            "int[]",
            _EX["sensor_addresses"],
            "BNO055 addresses (40 = 0x28, 41 = 0x29)",
            min=0x28,
            max=0x29,
        ),
        Param("sensor_muxes", "str[]", _EX["sensor_muxes"], "mux each BNO055 hangs off ('' = host bus)"),
        Param(
            "sensor_channels",
            "int[]",
            _EX["sensor_channels"],
            "mux channel of each BNO055 (-1 on the host bus)",
            min=-1,
            max=7,
        ),
    ),
    description="BNO055 IMUs behind layered TCA9548A I2C multiplexers: Imu, MagneticField, Temperature, calibration.",
)


@dataclass(frozen=True)
class ChainOptions:
    """Scheduler options (see :data:`SCHEMA` for meanings and units)."""

    mode: Mode = Mode.NDOF
    imu_fields: tuple[str, ...] = IMU_FIELDS
    mag_rate: float = 20.0
    status_rate: float = 1.0
    unit_sel: int = UNITS_SI
    axis_map: tuple[int, int] = (0x24, 0x00)
    retry_initial: float = 0.05
    retry_max: float = 2.0
    mux_verify_period: float = 1.0
    capture_calibration: bool = True
    serpentine: bool = True
    quaternion_tolerance: float = 0.02
    # A jump no physical motion explains: more than max_angular_rate * dt + jump_margin (rad) since the last good
    # quaternion. 2000 dps is the gyroscope's range in the fusion modes (datasheet 3.5): the fusion cannot follow
    # faster turns. The margin covers quantisation and the fusion's own corrections. 0 disables the test.
    max_angular_rate: float = float(np.deg2rad(2000.0))
    jump_margin: float = float(np.deg2rad(5.0))
    # When the gyroscope is read too, the chip's own rate bounds the turn more tightly: at most
    # gyro_factor * max(|w| of this and the last good sample) + gyro_slack (rad/s), never above max_angular_rate.
    gyro_factor: float = 1.5
    gyro_slack: float = float(np.deg2rad(30.0))
    # consecutive jump rejections that agree with each other before they are taken as the new orientation
    # (the last good one was itself wrong, or the sensor really turned while it was not read)
    jump_resync: int = 3
    frame_checks: bool = True  # False: only the quaternion norm (the behaviour before these checks)

    def __post_init__(self) -> None:
        bad = [f for f in self.imu_fields if f not in IMU_FIELDS]
        if bad:
            raise DriverConfigError(
                f"imu_fields {list(self.imu_fields)}: unknown {bad}; expected some of {list(IMU_FIELDS)}"
            )
        if self.retry_initial <= 0 or self.retry_max < self.retry_initial:
            raise DriverConfigError(
                f"retry_initial {self.retry_initial} / retry_max {self.retry_max}: expected 0 < initial <= max"
            )
        if self.mag_rate < 0 or self.status_rate <= 0:
            raise DriverConfigError(f"mag_rate {self.mag_rate} must be >= 0 and status_rate {self.status_rate} > 0")

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> ChainOptions:
        """From a mapping validated by :data:`SCHEMA`."""
        return cls(
            mode=Mode[str(params["mode"])],
            imu_fields=tuple(params["imu_fields"]),
            mag_rate=float(params["mag_rate"]),
            status_rate=float(params["status_rate"]),
            axis_map=(int(params["axis_map_config"]), int(params["axis_map_sign"])),
            retry_initial=float(params["retry_initial"]),
            retry_max=float(params["retry_max"]),
            mux_verify_period=float(params["mux_verify_period"]),
            capture_calibration=bool(params["capture_calibration"]),
        )


@dataclass
class Bno055Reading:
    """One sensor's data from one sweep (SI units; ``None`` for fields not read this sweep)."""

    name: str
    frame_id: str
    stamp_ns: int
    orientation: FloatArray | None = None
    angular_velocity: FloatArray | None = None
    linear_acceleration: FloatArray | None = None
    magnetic_field: FloatArray | None = None
    temperature: float | None = None
    calibration: CalibrationStatus | None = None

    def to_imu_sample(
        self,
        frame_prefix: str = "",
        *,
        orientation_covariance: FloatArray | None = None,
        angular_velocity_covariance: FloatArray | None = None,
        linear_acceleration_covariance: FloatArray | None = None,
    ) -> ImuSample:
        """As an :class:`ImuSample`; a field not read gets covariance element 0 = -1 (sensor_msgs/Imu)."""
        absent = np.zeros((3, 3))
        absent[0, 0] = -1.0
        return ImuSample(
            stamp_ns=self.stamp_ns,
            frame_id=frame_prefix + self.frame_id,
            orientation=self.orientation,
            angular_velocity=self.angular_velocity if self.angular_velocity is not None else np.zeros(3),
            linear_acceleration=self.linear_acceleration if self.linear_acceleration is not None else np.zeros(3),
            orientation_covariance=orientation_covariance,
            angular_velocity_covariance=angular_velocity_covariance if self.angular_velocity is not None else absent,
            linear_acceleration_covariance=(
                linear_acceleration_covariance if self.linear_acceleration is not None else absent
            ),
        )


@dataclass
class SensorHealth:
    """Per-sensor state and counters (shown in diagnostics)."""

    phase: str = "probe"  # probe, to_config, setup, starting, ok, capture_config, capture_read
    ready_at_ns: int = -(1 << 62)
    retry_at_ns: int = -(1 << 62)
    stale: bool = False
    consecutive_failures: int = 0
    reads: int = 0
    nacks: int = 0
    timeouts: int = 0
    errors: int = 0
    bad_frames: int = 0
    bad_norm: int = 0
    bad_jump: int = 0
    bad_zero: int = 0
    bad_ff: int = 0
    resyncs: int = 0
    last_q: FloatArray | None = None
    last_q_ns: int = 0
    last_rate: float | None = None  # |angular velocity| of the last good sample (rad/s)
    jump_candidate: FloatArray | None = None
    jump_candidate_ns: int = 0
    jump_count: int = 0
    resets: int = 0
    reconfigures: int = 0
    captures: int = 0
    last_error: str = ""
    last_read_ns: int = 0
    rate_hz: float = 0.0
    calibration: CalibrationStatus | None = None
    was_fully_calibrated: bool = False
    temperature: float | None = None
    system_status: int | None = None
    system_error: int | None = None
    mag_due_ns: int = 0
    status_due_ns: int = 0
    status_now: bool = False
    capture_requested: bool = False


@dataclass
class MuxHealth:
    """Per-mux state and counters."""

    down: bool = False
    retry_at_ns: int = 0
    consecutive_failures: int = 0
    failures: int = 0
    last_error: str = ""
    verified_ns: int = -(1 << 62)


@dataclass
class SweepResult:
    """What one sweep produced."""

    stamp_ns: int
    end_ns: int
    readings: list[Bno055Reading]
    skipped: list[str] = field(default_factory=list)


class CalibrationStore:
    """Calibration profiles by sensor name, saved as YAML.

    File layout::

        format: shape_sensing/bno055_calibration/1
        sensors:
          imu_00: {accel_offset: [x, y, z], mag_offset: [...], gyro_offset: [...], accel_radius: r, mag_radius: r}
    """

    def __init__(self, profiles: Mapping[str, CalibrationProfile] | None = None) -> None:
        self.profiles: dict[str, CalibrationProfile] = dict(profiles or {})

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> CalibrationStore:
        """Read and validate a calibration file.

        Raises:
            DriverConfigError: missing file, bad YAML, wrong format tag or a bad profile (named).
        """
        p = Path(path)
        try:
            data = yaml.safe_load(p.read_text())
        except FileNotFoundError:
            raise DriverConfigError(f"calibration file {p} does not exist") from None
        except yaml.YAMLError as exc:
            raise DriverConfigError(f"calibration file {p} is not valid YAML: {exc}") from exc
        if not isinstance(data, dict) or data.get("format") != CALIBRATION_FORMAT:
            found = data.get("format") if isinstance(data, dict) else type(data).__name__
            raise DriverConfigError(f"calibration file {p}: format {found!r}, expected {CALIBRATION_FORMAT!r}")
        sensors = data.get("sensors") or {}
        if not isinstance(sensors, dict):
            raise DriverConfigError(f"calibration file {p}: 'sensors' must be a mapping of name -> profile")
        return cls({str(k): CalibrationProfile.from_dict(v, where=f"{p}: sensor {k}") for k, v in sensors.items()})

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write atomically (temporary file, then rename); returns the path."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        text = yaml.safe_dump(
            {"format": CALIBRATION_FORMAT, "sensors": {k: v.to_dict() for k, v in sorted(self.profiles.items())}},
            sort_keys=False,
            default_flow_style=None,
        )
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.replace(tmp, p)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)  # a full disk or a signal: no empty or half-written file left
            raise
        return p


# The fusion output registers change every 10 ms (datasheet table 3-14, fusion data rate 100 Hz): two reads however
# close together may straddle one update, so each turn bound allows one more fusion period.
_FUSION_PERIOD_NS = 10_000_000
_BLOCK_CHECK_MIN = 8  # blocks this long read as all 0x00 or all 0xFF are taken as failed reads


def _angle(a: FloatArray, b: FloatArray) -> float:
    """Rotation angle (rad) between unit quaternions ``a`` and ``b``."""
    d = abs(float(a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]))
    return 2.0 * float(np.arccos(min(1.0, d)))


def _next_due(due: int, period: int, now: int) -> int:
    """The next time after ``now`` on the grid ``due + k * period`` (keeps each sensor's stagger)."""
    if due > now:
        return due
    return due + ((now - due) // period + 1) * period


class Bno055Chain:
    """All BNO055s of a topology on one bus.

    Args:
        bus: an ``smbus2.SMBus``-like object (or :class:`shape_sensing.sim.i2c_bus.SimI2CBus`).
        topology: the validated tree.
        options: scheduler options.
        calibration: profiles to apply at bring-up and after resets.
        clock: ``() -> int`` nanoseconds; stamps and retry timing (inject ROS or simulated time).
        sleep: used only by :meth:`start` while waiting for bring-up.
    """

    def __init__(
        self,
        bus: Any,
        topology: Topology,
        options: ChainOptions | None = None,
        *,
        calibration: CalibrationStore | None = None,
        clock: Callable[[], int] = time.monotonic_ns,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.bus = bus
        self.topology = topology
        self.options = options or ChainOptions()
        self.calibration = calibration or CalibrationStore()
        self.clock = clock
        self.sleep = sleep
        self.router = MuxRouter(bus, topology)
        self.order: list[SensorSpec] = topology.sweep_order()
        self.paths = {s.name: topology.sensor_path(s) for s in self.order}
        self.chips = {s.name: BNO055(bus, s.address, sleep=sleep) for s in self.order}
        self.health = {s.name: SensorHealth() for s in self.order}
        self.mux_health = {name: MuxHealth() for name in topology.muxes}
        self.sweeps = 0
        self.sweep_rate_hz = 0.0
        self._last_sweep_ns: int | None = None
        self._plans = self._make_plans()
        self._mag_on = self.options.mag_rate > 0 and self.options.mode != Mode.IMU  # IMU mode: magnetometer off
        n = len(self.order)
        # Stagger low-rate reads across sensors so each sweep carries a similar load.
        t0 = clock()
        for i, s in enumerate(self.order):
            h = self.health[s.name]
            if self.options.mag_rate > 0:
                h.mag_due_ns = t0 + int(i * _NS / self.options.mag_rate / max(n, 1))
            h.status_due_ns = t0 + int(i * _NS / self.options.status_rate / max(n, 1))

    # -- public --------------------------------------------------------------------
    def start(self, timeout: float = 2.0) -> list[str]:
        """Sweep until every sensor streams or ``timeout`` (clock seconds) passed; returns those that do not."""
        t_end = self.clock() + int(timeout * _NS)
        while True:
            self.sweep()
            pending = [n for n, h in self.health.items() if h.phase != "ok" or h.stale]
            if not pending or self.clock() >= t_end:
                return pending
            waits = [h.ready_at_ns for h in self.health.values() if h.phase != "ok" and not h.stale]
            waits += [h.retry_at_ns for h in self.health.values() if h.stale]
            now = self.clock()
            nxt = min(waits) if waits else now
            self.sleep(max(0.0005, min((nxt - now) / _NS, 0.05)))

    def sweep(self) -> SweepResult:
        """Visit every sensor once; returns the readings (faults are counted, never raised)."""
        order = self.order if not (self.options.serpentine and self.sweeps % 2) else self.order[::-1]
        self.sweeps += 1
        t0 = self.clock()
        if self._last_sweep_ns is not None and t0 > self._last_sweep_ns:
            inst = _NS / (t0 - self._last_sweep_ns)
            self.sweep_rate_hz = inst if self.sweep_rate_hz == 0 else 0.9 * self.sweep_rate_hz + 0.1 * inst
        self._last_sweep_ns = t0
        readings: list[Bno055Reading] = []
        skipped: list[str] = []
        for spec in order:
            reading = self._visit(spec)
            if reading is None:
                skipped.append(spec.name)
            else:
                readings.append(reading)
        return SweepResult(t0, self.clock(), readings, skipped)

    def request_capture(self, names: Sequence[str] | None = None) -> None:
        """Capture the profile of ``names`` (all) the next time each reports full calibration."""
        for name in names or list(self.health):
            self.health[name].capture_requested = True

    def save_calibration(self, path: str | os.PathLike[str]) -> Path:
        """Save the captured and loaded profiles."""
        return self.calibration.save(path)

    def restore_calibration(self, store: CalibrationStore | None = None) -> None:
        """Use ``store`` (or the current one) and re-apply it to every sensor (non-blocking reconfigure)."""
        if store is not None:
            self.calibration = store
        for _name, h in self.health.items():
            if h.phase not in ("probe",):
                h.phase = "to_config"
            h.reconfigures += 1

    def close(self) -> None:
        """Close every mux channel (best effort)."""
        self.router.close_all()

    def diagnostics(self) -> list[DiagnosticStatus]:
        """Per-sensor and per-mux statuses plus a chain summary."""
        now = self.clock()
        out: list[DiagnosticStatus] = []
        n_ok = 0
        for spec in self.order:
            h = self.health[spec.name]
            cal = h.calibration
            isolated = self._isolating_mux(spec.name)
            if isolated is not None:
                level, msg = DiagnosticLevel.ERROR, f"isolated: mux {isolated} not answering"
            elif h.stale:
                level, msg = DiagnosticLevel.ERROR, f"stale: {h.last_error}"
            elif h.phase != "ok":
                level, msg = DiagnosticLevel.WARN, f"configuring ({h.phase})"
            elif cal is not None and not cal.fully_calibrated:
                level, msg = DiagnosticLevel.WARN, "calibrating"
                n_ok += 1
            else:
                level, msg = DiagnosticLevel.OK, "streaming"
                n_ok += 1
            values = {
                "calibration_system": "" if cal is None else str(cal.system),
                "calibration_gyro": "" if cal is None else str(cal.gyro),
                "calibration_accel": "" if cal is None else str(cal.accel),
                "calibration_mag": "" if cal is None else str(cal.mag),
                "rate_hz": f"{h.rate_hz:.2f}",
                "reads": str(h.reads),
                "nacks": str(h.nacks),
                "timeouts": str(h.timeouts),
                "errors": str(h.errors),
                "bad_frames": str(h.bad_frames),
                "bad_frames_norm": str(h.bad_norm),
                "bad_frames_jump": str(h.bad_jump),
                "bad_frames_all_zero": str(h.bad_zero),
                "bad_frames_all_ff": str(h.bad_ff),
                "jump_resyncs": str(h.resyncs),
                "resets": str(h.resets),
                "reconfigures": str(h.reconfigures),
                "calibration_stored": str(spec.name in self.calibration.profiles),
                "temperature_c": "" if h.temperature is None else f"{h.temperature:.0f}",
                "system_status": "" if h.system_status is None else str(h.system_status),
                "system_error": "" if h.system_error is None else str(h.system_error),
                "retry_in_s": f"{max(0, h.retry_at_ns - now) / _NS:.3f}" if h.stale else "0",
                "last_error": h.last_error,
            }
            out.append(
                DiagnosticStatus(
                    f"bno055_chain: {spec.name}",
                    level,
                    msg,
                    hardware_id=f"bno055 {path_text(self.paths[spec.name])} {spec.address:#04x}",
                    values=values,
                )
            )
        for name, mh in self.mux_health.items():
            m = self.topology.muxes[name]
            out.append(
                DiagnosticStatus(
                    f"bno055_chain: mux {name}",
                    DiagnosticLevel.ERROR if mh.down else DiagnosticLevel.OK,
                    f"down: {mh.last_error}" if mh.down else "ok",
                    hardware_id=f"tca9548a {path_text(self.topology.mux_path(name))} {m.address:#04x}",
                    values={"failures": str(mh.failures), "subtree": ",".join(self.topology.subtree_sensors(name))},
                )
            )
        total = len(self.order)
        level = DiagnosticLevel.OK if n_ok == total else (DiagnosticLevel.WARN if n_ok else DiagnosticLevel.ERROR)
        out.append(
            DiagnosticStatus(
                "bno055_chain: summary",
                level,
                f"{n_ok}/{total} sensors streaming",
                values={
                    "sweep_rate_hz": f"{self.sweep_rate_hz:.2f}",
                    "sweeps": str(self.sweeps),
                    "mux_writes": str(self.router.writes),
                    "sensors_streaming": str(n_ok),
                },
            )
        )
        return out

    # -- internals -----------------------------------------------------------------
    def _make_plans(self) -> dict[tuple[bool, bool], ReadPlan]:
        imu = list(self.options.imu_fields)
        return {
            (mag, status): plan_reads(
                imu + (["magnetic_field"] if mag else []) + (list(STATUS_FIELDS) if status else [])
            )
            for mag in (False, True)
            for status in (False, True)
        }

    def _isolating_mux(self, name: str) -> str | None:
        for mux, _ in self.paths[name]:
            if self.mux_health[mux].down:
                return mux
        return None

    def _backoff(self, failures: int) -> int:
        """Retry delay after ``failures`` consecutive failures: the next sweep once, then doubling."""
        if failures <= 1:
            return 0
        delay = min(self.options.retry_initial * 2 ** (failures - 2), self.options.retry_max)
        return int(delay * _NS)

    def _visit(self, spec: SensorSpec) -> Bno055Reading | None:
        name = spec.name
        h = self.health[name]
        now = self.clock()
        path = self.paths[name]
        # Isolated subtree: wait for the mux's retry time, then try it (with a read-back).
        for mux, _ in path:
            mh = self.mux_health[mux]
            if mh.down and now < mh.retry_at_ns:
                return None
        if h.stale and now < h.retry_at_ns:
            return None
        if h.phase != "ok" and now < h.ready_at_ns:
            return None
        try:
            for mux, _ in path:
                if self.mux_health[mux].down:
                    self.router.exercise(mux)  # a stuck mux must not pass by holding the byte we want
            self.router.open(path, spec.address)
            self._verify_muxes(path, now)
            reading = self._step(spec, h)
        except MuxError as exc:
            self._mux_failed(exc)
            return None
        except (OSError, ProtocolError) as exc:
            self._sensor_failed(spec, h, exc)
            return None
        if h.stale:
            h.stale = False
            if h.consecutive_failures >= _WARN_AFTER:
                _log.info("sensor %s answers again", name)
        h.consecutive_failures = 0
        return reading

    def _verify_muxes(self, path: Sequence[tuple[str, int]], now: int) -> None:
        for mux, _ in path:
            mh = self.mux_health[mux]
            period = self.options.mux_verify_period
            if mh.down or (period > 0 and now - mh.verified_ns >= period * _NS):
                self.router.verify(mux)
                mh.verified_ns = now
                if mh.down:
                    _log.info("mux %s answers again", mux)
                mh.down = False
                mh.consecutive_failures = 0

    def _mux_failed(self, exc: MuxError) -> None:
        mh = self.mux_health[exc.mux]
        mh.failures += 1
        mh.consecutive_failures += 1
        mh.last_error = exc.reason
        if not mh.down:
            _log.warning("%s; isolating sensors %s", exc, self.topology.subtree_sensors(exc.mux))
        mh.down = True
        mh.retry_at_ns = self.clock() + self._backoff(mh.consecutive_failures)
        self.router.invalidate(exc.mux)

    def _sensor_failed(self, spec: SensorSpec, h: SensorHealth, exc: Exception) -> None:
        if isinstance(exc, TimeoutError):
            h.timeouts += 1
        elif isinstance(exc, OSError):
            h.nacks += 1
        else:
            h.errors += 1
        h.last_error = str(exc)
        h.consecutive_failures += 1
        if h.consecutive_failures == _WARN_AFTER:
            _log.warning("sensor %s: %s (%d failures in a row); retrying with backoff", spec.name, exc, _WARN_AFTER)
        else:
            _log.debug("sensor %s: %s", spec.name, exc)
        h.stale = True
        h.retry_at_ns = self.clock() + self._backoff(h.consecutive_failures)
        # A failure may come from a mux on the way: read their control bytes back now (only on errors). A mux
        # that answers with the byte it was given keeps its known state; one that does not is isolated.
        for mux, _ in self.paths[spec.name]:
            try:
                self.router.verify(mux)
            except MuxError as mf:
                self._mux_failed(mf)
                break

    def _step(self, spec: SensorSpec, h: SensorHealth) -> Bno055Reading | None:
        chip = self.chips[spec.name]
        opts = self.options
        if h.phase == "probe":
            chip.check_chip_id()
            h.phase = "to_config"
        if h.phase in ("to_config", "capture_config"):
            chip.set_mode(Mode.CONFIG, wait=False)
            h.ready_at_ns = self.clock() + int(MODE_SWITCH_TO_CONFIG_S * _NS)
            h.phase = "setup" if h.phase == "to_config" else "capture_read"
            return None
        if h.phase == "capture_read":
            profile = chip.read_calibration()
            self.calibration.profiles[spec.name] = profile
            h.captures += 1
            h.capture_requested = False
            _log.info("captured calibration profile of %s", spec.name)
            chip.set_mode(opts.mode, wait=False)
            h.ready_at_ns = self.clock() + int(MODE_SWITCH_FROM_CONFIG_S * _NS)
            h.phase = "starting"
            return None
        if h.phase == "setup":
            chip.set_units(opts.unit_sel)
            chip.set_axis_remap(*opts.axis_map)
            stored = self.calibration.profiles.get(spec.name)
            if stored is not None:
                chip.write_calibration(stored)
            chip.set_mode(opts.mode, wait=False)
            h.ready_at_ns = self.clock() + int(MODE_SWITCH_FROM_CONFIG_S * _NS)
            h.phase = "starting"
            return None
        if h.phase == "starting":
            h.phase = "ok"
            h.status_now = True  # learn mode and calibration at once
        return self._read(spec, h, chip)

    def _read(self, spec: SensorSpec, h: SensorHealth, chip: BNO055) -> Bno055Reading | None:
        opts = self.options
        now = self.clock()
        mag_due = self._mag_on and now >= h.mag_due_ns
        status_due = h.status_now or now >= h.status_due_ns
        plan = self._plans[(mag_due, status_due)]
        stamp = now
        blocks = [chip.read_block(r.start, r.length) for r in plan.reads]
        if opts.frame_checks:
            for block in blocks:
                if len(block) < _BLOCK_CHECK_MIN:
                    continue
                if block.count(0) == len(block):
                    # All-zero outputs: the chip is in CONFIGMODE (it reset) unless its mode says otherwise.
                    if chip.mode() == Mode.CONFIG:
                        self._reset_detected(spec, h, "found in CONFIGMODE")
                        return None
                    self._bad(h, "bad_zero", f"bad frame: {len(block)} bytes all 0x00")
                    return None
                if block.count(0xFF) == len(block):
                    self._bad(h, "bad_ff", f"bad frame: {len(block)} bytes all 0xFF")
                    return None
        decoded = decode_block(plan, blocks, opts.unit_sel)
        if mag_due:
            h.mag_due_ns = _next_due(h.mag_due_ns, int(_NS / opts.mag_rate), now)
        if status_due:
            h.status_now = False
            h.status_due_ns = _next_due(h.status_due_ns, int(_NS / opts.status_rate), now)
            if self._check_status(spec, h, decoded):
                return None
        if decoded.orientation is not None:
            norm = float(np.linalg.norm(decoded.orientation))
            if norm == 0.0:
                # All-zero outputs: the chip is in CONFIGMODE (it reset) unless its mode says otherwise.
                if chip.mode() == Mode.CONFIG:
                    self._reset_detected(spec, h, "found in CONFIGMODE")
                    return None
                self._bad(h, "bad_zero", "bad frame: quaternion all zero")
                return None
            if abs(norm - 1.0) > opts.quaternion_tolerance:
                self._bad(h, "bad_norm", f"bad frame: quaternion norm {norm:.4f}")
                return None
            decoded.orientation = decoded.orientation / norm
            checked = opts.frame_checks and opts.max_angular_rate > 0
            rate = None if decoded.angular_velocity is None else float(np.linalg.norm(decoded.angular_velocity))
            if checked and not self._plausible_turn(h, decoded.orientation, stamp, rate):
                return None
        h.reads += 1
        if h.last_read_ns:
            dt = stamp - h.last_read_ns
            if dt > 0:
                h.rate_hz = _NS / dt if h.rate_hz == 0 else 0.9 * h.rate_hz + 0.1 * _NS / dt
        h.last_read_ns = stamp
        return self._reading(spec, stamp, decoded, h)

    def _bad(self, h: SensorHealth, reason: str, text: str) -> None:
        """Count a dropped frame under ``reason`` (a :class:`SensorHealth` counter)."""
        h.bad_frames += 1
        setattr(h, reason, getattr(h, reason) + 1)
        h.last_error = text

    def _plausible_turn(self, h: SensorHealth, q: FloatArray, stamp: int, rate: float | None) -> bool:
        """Whether ``q`` is reachable from the last good quaternion (see :class:`ChainOptions`).

        ``rate``: the gyroscope's |angular velocity| read with ``q`` (rad/s), ``None`` when not read.
        """
        opts = self.options
        if h.last_q is None:
            h.last_q, h.last_q_ns, h.last_rate = q, stamp, rate
            return True
        bound = opts.max_angular_rate
        if rate is not None and h.last_rate is not None:
            bound = min(bound, opts.gyro_factor * max(rate, h.last_rate) + opts.gyro_slack)
        limit = bound * (max(stamp - h.last_q_ns, 0) + _FUSION_PERIOD_NS) / _NS + opts.jump_margin
        if _angle(h.last_q, q) <= limit:
            h.last_q, h.last_q_ns, h.last_rate = q, stamp, rate
            h.jump_candidate, h.jump_count = None, 0
            return True
        # A run of rejected samples that agree with each other is the real orientation: take it.
        if h.jump_candidate is not None and _angle(h.jump_candidate, q) <= (
            bound * (max(stamp - h.jump_candidate_ns, 0) + _FUSION_PERIOD_NS) / _NS + opts.jump_margin
        ):
            h.jump_count += 1
        else:
            h.jump_count = 1
        h.jump_candidate, h.jump_candidate_ns = q, stamp
        if h.jump_count >= opts.jump_resync:
            h.resyncs += 1
            h.last_q, h.last_q_ns, h.last_rate = q, stamp, rate
            h.jump_candidate, h.jump_count = None, 0
            return True
        self._bad(h, "bad_jump", f"bad frame: turned {np.rad2deg(_angle(h.last_q, q)):.1f} deg since the last good "
                                 f"sample, at most {np.rad2deg(limit):.1f} deg possible")  # fmt: skip
        return False

    def _check_status(self, spec: SensorSpec, h: SensorHealth, d: Decoded) -> bool:
        """Update health from the status block; True when the sensor must be reconfigured."""
        h.temperature = d.temperature
        h.system_status, h.system_error = d.system_status, d.system_error
        cal = d.calibration
        if d.mode is not None and d.mode != self.options.mode:
            self._reset_detected(spec, h, f"found in mode {d.mode:#04x}")
            return True
        if cal is not None:
            h.calibration = cal
            if cal.fully_calibrated:
                h.was_fully_calibrated = True
                wanted = h.capture_requested or (
                    self.options.capture_calibration and spec.name not in self.calibration.profiles
                )
                if wanted:
                    h.phase = "capture_config"
            elif h.was_fully_calibrated and cal.as_list() == [0, 0, 0, 0]:
                self._reset_detected(spec, h, "calibration lost")
                return True
        return False

    def _reset_detected(self, spec: SensorSpec, h: SensorHealth, why: str) -> None:
        _log.warning("sensor %s %s: reconfiguring%s", spec.name, why,
                     " and re-applying its calibration" if spec.name in self.calibration.profiles else "")  # fmt: skip
        h.resets += 1
        h.reconfigures += 1
        h.was_fully_calibrated = False
        h.last_error = f"reset ({why})"
        h.phase = "to_config"
        h.last_q, h.jump_candidate, h.jump_count = None, None, 0

    def _reading(self, spec: SensorSpec, stamp: int, d: Decoded, h: SensorHealth) -> Bno055Reading:
        return Bno055Reading(
            name=spec.name,
            frame_id=spec.frame_id,
            stamp_ns=stamp,
            orientation=d.orientation,
            angular_velocity=d.angular_velocity,
            linear_acceleration=d.linear_acceleration,
            magnetic_field=d.magnetic_field,
            temperature=d.temperature,
            calibration=d.calibration,
        )
