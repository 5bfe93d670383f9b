"""Register-level IMU source: samples go through simulated BNO055 registers, muxes and the real driver.

:class:`RegisterLevelSource` wraps any sample provider (``t -> list[ImuSample]``,
e.g. :meth:`shape_sensing.sim.vine.VineSimulator.imu_samples`). Each call loads
every sample into its simulated BNO055 (quantised as the chip stores it), runs
one :meth:`~shape_sensing.drivers.bno055_chain.Bno055Chain.sweep` of the real
driver over the simulated bus and mux tree, and returns what the driver read
back, as ``ImuSample`` with the provider's frame ids.

:func:`build_simulated_hardware` wires simulators for a topology; its
:class:`SimulatedHardware` offers the fault switches the tests and demos use.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from shape_sensing.drivers.bno055_chain import Bno055Chain, ChainOptions, example_topology_params
from shape_sensing.drivers.errors import DriverConfigError
from shape_sensing.drivers.i2c_topology import HOST, Topology
from shape_sensing.geometry import quat_to_matrix
from shape_sensing.sim.bno055_sim import SimBNO055
from shape_sensing.sim.i2c_bus import Segment, SimI2CBus
from shape_sensing.sim.tca9548a_sim import SimTCA9548A
from shape_sensing.types import ImuSample

__all__ = [
    "EARTH_FIELD",
    "RegisterLevelSource",
    "SimulatedHardware",
    "SpikeStreamResult",
    "build_simulated_hardware",
    "spike_stream",
]

EARTH_FIELD = np.array([0.0, 20e-6, -42e-6])  # T, world frame (ENU, mid-latitude)


@dataclass
class SimulatedHardware:
    """A simulated bus with its muxes and sensors by name."""

    bus: SimI2CBus
    muxes: dict[str, SimTCA9548A]
    sensors: dict[str, SimBNO055]

    def set_mux_dead(self, name: str, dead: bool = True) -> None:
        """Mux ``name`` stops (or resumes) answering; a dead switch connects nothing."""
        self.muxes[name].dead = dead
        self.bus.invalidate()

    def set_mux_stuck(self, name: str, stuck: bool = True) -> None:
        """Mux ``name`` acknowledges writes but keeps its control byte."""
        self.muxes[name].stuck = stuck

    def reset_sensor(self, name: str) -> None:
        """Power-on reset of sensor ``name`` (as after a brown-out)."""
        self.sensors[name].power_on_reset(self.bus.now_ns)

    def set_nack_rate(self, name: str, rate: float) -> None:
        """Probability that a transaction to sensor ``name`` (its address, wherever routed) is not acknowledged."""
        self.bus.nack_rate[self.sensors[name].address] = rate

    def set_dead(self, name: str, dead: bool = True) -> None:
        """Sensor ``name`` stops (or resumes) answering."""
        self.sensors[name].dead = dead


def build_simulated_hardware(
    topology: Topology, *, bitrate: float = 400_000.0, seed: int = 0, start_ns: int = 0
) -> SimulatedHardware:
    """Simulated TCA9548As and BNO055s wired as ``topology`` says."""
    bus = SimI2CBus(bitrate=bitrate, seed=seed, start_ns=start_ns)
    muxes = {name: SimTCA9548A(m.address, name) for name, m in topology.muxes.items()}

    def segment(parent: str, channel: int) -> Segment:
        return bus.host if parent == HOST else muxes[parent].channels[channel]

    for name, m in topology.muxes.items():
        segment(m.parent, m.channel).attach(muxes[name])
    sensors = {}
    for i, s in enumerate(topology.sensors):
        sensors[s.name] = SimBNO055(s.address, s.name, seed=seed * 1000 + i)
        segment(s.mux, s.channel).attach(sensors[s.name])
    return SimulatedHardware(bus, muxes, sensors)


class RegisterLevelSource:
    """Samples from ``provider`` as the BNO055 driver reads them through simulated registers.

    Args:
        provider: ``t -> list[ImuSample]`` (ground-truth-side samples).
        topology: mux tree; by default a two-level tree built from the
            provider's frame ids on the first call. A given topology is
            matched to the samples by frame id.
        options: driver options. Default: orientation and angular velocity
            every sweep, no magnetometer, no calibration capture: 18 sensors
            then take about 9 ms of bus time at 400 kHz, within a 100 Hz
            period. (All three Imu fields take about 13 ms; a caller faster
            than the bus allows gets later and later stamps, as hardware
            would, and :attr:`overruns` counts the calls that found the bus
            still busy.)
        seed: fault/learned-profile seed.
        bitrate: bus bit rate (sets the read stamps' spacing).
        stamps: ``"read"`` (the driver's read time, as on hardware) or
            ``"provider"`` (the provider's stamps).
        calibrated: start with every simulated sensor fully calibrated.
    """

    def __init__(
        self,
        provider: Callable[[float], list[ImuSample]],
        topology: Topology | None = None,
        *,
        options: ChainOptions | None = None,
        seed: int = 0,
        bitrate: float = 400_000.0,
        stamps: str = "read",
        calibrated: bool = True,
    ) -> None:
        if stamps not in ("read", "provider"):
            raise DriverConfigError(f"stamps {stamps!r} invalid: expected 'read' or 'provider'")
        self.provider = provider
        self.topology = topology
        self.options = options or ChainOptions(
            imu_fields=("orientation", "angular_velocity"), mag_rate=0.0, capture_calibration=False
        )
        self.seed = seed
        self.bitrate = bitrate
        self.stamps = stamps
        self.calibrated = calibrated
        self.hardware: SimulatedHardware | None = None
        self.chain: Bno055Chain | None = None
        self._by_frame: dict[str, str] = {}
        self.reads = 0
        self.missing = 0
        self.overruns = 0

    def _setup(self, samples: Sequence[ImuSample]) -> tuple[SimulatedHardware, Bno055Chain]:
        frame_ids = [s.frame_id for s in samples]
        if self.topology is None:
            params = example_topology_params([f"imu_{i:02d}" for i in range(len(frame_ids))])
            params["sensor_frames"] = list(frame_ids)
            self.topology = Topology.from_params(params)
        by_frame = {s.frame_id: s.name for s in self.topology.sensors}
        unknown = [f for f in frame_ids if f not in by_frame]
        if unknown:
            raise DriverConfigError(
                f"samples from frames {unknown} have no sensor in the topology (frames: {sorted(by_frame)})"
            )
        self._by_frame = by_frame
        # Bring the chain up before time zero, so the first call at t = 0 reads data.
        hw = build_simulated_hardware(self.topology, bitrate=self.bitrate, seed=self.seed, start_ns=-100_000_000)
        if self.calibrated:
            for chip in hw.sensors.values():
                chip.calibrate()
        self._load(hw, samples)  # the chips hold the first motion from power-up: no jump when the data starts
        chain = Bno055Chain(hw.bus, self.topology, self.options, clock=hw.bus.clock, sleep=hw.bus.sleep)
        pending = chain.start(timeout=0.5)
        if pending:
            raise DriverConfigError(f"simulated sensors {pending} did not come up")
        self.hardware, self.chain = hw, chain
        return hw, chain

    def __call__(self, t: float) -> list[ImuSample]:
        """Samples at time ``t`` (s) as read back by the driver (sensors not read this sweep are left out)."""
        samples = self.provider(t)
        if self.hardware is None or self.chain is None:
            hw, chain = self._setup(samples)
        else:
            hw, chain = self.hardware, self.chain
        t_ns = round(t * 1e9)
        if hw.bus.now_ns > t_ns:
            self.overruns += 1
        hw.bus.now_ns = max(hw.bus.now_ns, t_ns)
        self._load(hw, samples)
        result = chain.sweep()
        by_name = {r.name: r for r in result.readings}
        out: list[ImuSample] = []
        for s in samples:
            r = by_name.get(self._by_frame[s.frame_id])
            if r is None:
                self.missing += 1
                continue
            sample = r.to_imu_sample()
            sample.frame_id = s.frame_id
            if self.stamps == "provider":
                sample.stamp_ns = s.stamp_ns
            out.append(sample)
        self.reads += len(out)
        return out

    imu_samples = __call__

    def _load(self, hw: SimulatedHardware, samples: Sequence[ImuSample]) -> None:
        """Set every sample's motion on its simulated chip."""
        quats = np.array([[0.0, 0.0, 0.0, 1.0] if s.orientation is None else s.orientation for s in samples], float)
        fields = np.einsum("nji,j->ni", quat_to_matrix(quats), EARTH_FIELD)  # R^T B: the field in each sensor frame
        for s, q, b in zip(samples, quats, fields, strict=True):
            hw.sensors[self._by_frame[s.frame_id]].set_motion(q, s.angular_velocity, s.linear_acceleration, b)


@dataclass
class SpikeStreamResult:
    """What a corrupted stream did: glitches injected, and what reached the chain's output (the estimator's input)."""

    seconds: float
    readings: int  # samples the chain handed on
    injected: dict[str, int]  # corrupted reads by kind
    spikes_out: int  # handed-on samples further than spike_deg from the true orientation
    spikes_out_by_kind: dict[str, int]
    worst_out_deg: float  # the largest error of a handed-on sample
    dropped_clean: int  # clean reads the checks dropped (false alarms)
    bad_frames: dict[str, int]  # the chain's counters, summed over sensors

    def as_dict(self) -> dict[str, Any]:
        """Plain mapping (for JSON)."""
        return dict(self.__dict__)


def spike_stream(
    *,
    frame_checks: bool,
    seconds: float = 60.0,
    n_sensors: int = 6,
    rate: float = 0.005,
    sweep_hz: float = 100.0,
    peak_rate_dps: float = 180.0,
    spike_deg: float = 2.0,
    seed: int = 0,
) -> SpikeStreamResult:
    """Run the BNO055 chain driver on chips whose quaternion reads fail now and then; count what gets through.

    Each sensor turns about its own random axis at ``peak_rate_dps * sin(2 pi 0.5 t)`` (a smooth, physical
    motion); every read covering the quaternion is corrupted with probability ``rate`` (0.005 at 100 Hz: one
    spike every 2 s per sensor) by one of :data:`~shape_sensing.sim.bno055_glitches.KINDS`. A sample the chain
    hands on is a spike when it is more than ``spike_deg`` from the orientation the chip was given.
    ``frame_checks=False`` is the driver's behaviour before the frame checks (the quaternion norm only).
    """
    from scipy.spatial.transform import Rotation

    from shape_sensing.sim.bno055_glitches import GlitchyBNO055

    rng = np.random.default_rng(seed)
    names = [f"imu_{i:02d}" for i in range(n_sensors)]
    topology = Topology.from_params(example_topology_params(names))
    hw = build_simulated_hardware(topology, seed=seed, start_ns=-100_000_000)
    wrappers: dict[str, GlitchyBNO055] = {}
    sensors = list(hw.sensors.items())
    for k, (name, chip) in enumerate(sensors):
        chip.calibrate()
        wrappers[name] = GlitchyBNO055(chip, rate, rng, neighbour=sensors[(k + 1) % len(sensors)][1])
    for seg in [hw.bus.host, *(ch for m in hw.muxes.values() for ch in m.channels)]:
        devices: list[Any] = [wrappers.get(d.name, d) for d in seg.devices]
        seg.devices = devices
    hw.bus.invalidate()
    axes = rng.normal(size=(n_sensors, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    w0 = np.deg2rad(peak_rate_dps)
    f = 0.5

    def truth(t: float) -> np.ndarray:
        angle = w0 / (2 * np.pi * f) * (1 - np.cos(2 * np.pi * f * t))  # integral of w0 sin(2 pi f t)
        return Rotation.from_rotvec(axes * angle).as_quat()

    def load(t: float) -> np.ndarray:
        q = truth(t)
        rate_now = axes * w0 * np.sin(2 * np.pi * f * t)
        for (_name, chip), qi, wi in zip(sensors, q, rate_now, strict=True):
            chip.set_motion(qi, wi)
        return q

    load(0.0)
    options = ChainOptions(
        imu_fields=("orientation", "angular_velocity", "linear_acceleration"),
        mag_rate=0.0,
        capture_calibration=False,
        frame_checks=frame_checks,
    )
    chain = Bno055Chain(hw.bus, topology, options, clock=hw.bus.clock, sleep=hw.bus.sleep)
    if chain.start(timeout=0.5):
        raise DriverConfigError("simulated sensors did not come up")
    for w in wrappers.values():
        w.injected.clear()
    readings = spikes = dropped_clean = 0
    worst = 0.0
    by_kind: Counter[str] = Counter()
    index = {name: k for k, name in enumerate(names)}
    for step in range(int(seconds * sweep_hz)):
        t = step / sweep_hz
        hw.bus.now_ns = max(hw.bus.now_ns, round(t * 1e9))
        q_true = load(t)
        kinds_before = {n: sum(w.injected.values()) for n, w in wrappers.items()}
        result = chain.sweep()
        got = {r.name: r for r in result.readings}
        for name, w in wrappers.items():
            corrupted = sum(w.injected.values()) > kinds_before[name]
            r = got.get(name)
            if r is None:
                dropped_clean += not corrupted and name not in result.skipped
                continue
            readings += 1
            assert r.orientation is not None
            d = abs(float(np.dot(r.orientation, q_true[index[name]])))
            err = float(np.rad2deg(2 * np.arccos(min(1.0, d))))
            worst = max(worst, err)
            if err > spike_deg:
                spikes += 1
                by_kind[w.last_kind or "clean"] += 1
    injected: Counter[str] = Counter()
    for w in wrappers.values():
        injected.update(w.injected)
    keys = ("bad_frames", "bad_norm", "bad_jump", "bad_zero", "bad_ff", "resyncs")
    bad = {k: sum(getattr(h, k) for h in chain.health.values()) for k in keys}
    return SpikeStreamResult(seconds, readings, dict(injected), spikes, dict(by_kind), worst, dropped_clean, bad)
