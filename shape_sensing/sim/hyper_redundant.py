"""Ground-truth simulator of an n-module hyper-redundant robot with one WT901 per platform.

Known joint trajectories drive a chain of universal-joint modules (its kinematics stated here, on scipy's rotations)
(``Trans(z, d1) Rx(theta_x) Ry(theta_y) Trans(z, d2)`` per module). Each
platform's sensor reads its world attitude through a fixed mounting
misalignment, with white noise at the WT901's stated accuracy (0.05 deg
roll/pitch, 1 deg yaw) and a slowly varying yaw disturbance from magnetic
parts. For the first ``rods_s`` seconds the robot is held straight on the
calibration rods.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.spatial.transform import Rotation

from shape_sensing.config import Param, Schema
from shape_sensing.geometry import FloatArray
from shape_sensing.sim.wt901_emulator import OUTPUT_RATES_HZ
from shape_sensing.types import ImuSample

__all__ = ["SCHEMA", "EmulatedSensors", "HyperRedundantSim", "SimSnapshot"]

# -- the world's kinematics, stated here (not the estimator's): rotations by scipy's Rotation --------------------------
# Each module is a universal joint between two platforms: from the lower platform, d1 up its axis to the joint centre,
# the joint turns by theta_x about x then theta_y about the turned y, and d2 further up the turned axis is the next
# platform (the seed's rigid-module robot). A WT901 reports its attitude as roll, pitch, yaw of R = Rz Ry Rx.


def _euler_zyx_to_matrix(euler: FloatArray) -> FloatArray:
    """``(..., 3)`` roll, pitch, yaw -> ``Rz(yaw) Ry(pitch) Rx(roll)`` (intrinsic Z-Y-X)."""
    e = np.asarray(euler, dtype=float)
    flat = e.reshape(-1, 3)
    R = Rotation.from_euler("ZYX", flat[:, ::-1]).as_matrix()
    return np.asarray(R.reshape(*e.shape[:-1], 3, 3))


def _matrix_to_euler_zyx(R: FloatArray) -> FloatArray:
    """``(..., 3, 3)`` -> roll, pitch, yaw (pitch in [-pi/2, pi/2]), as the sensor reports them."""
    m = np.asarray(R, dtype=float)
    ypr = Rotation.from_matrix(m.reshape(-1, 3, 3)).as_euler("ZYX")
    return np.asarray(ypr[:, ::-1].reshape(*m.shape[:-2], 3))


def _joint_rotations(theta: FloatArray) -> FloatArray:
    """``(n, 2)`` joint angles -> ``(n, 3, 3)`` ``Rx(theta_x) Ry(theta_y)`` (intrinsic X then Y)."""
    return np.asarray(Rotation.from_euler("XY", np.asarray(theta, dtype=float)).as_matrix())


def _platform_poses(theta: FloatArray, d1: float, d2: float) -> FloatArray:
    """``(n, 2)`` joint angles -> ``(n, 4, 4)`` poses of platforms 1..n in the base platform's frame."""
    out = np.empty((len(theta), 4, 4))
    pose = np.eye(4)
    for j, R in enumerate(_joint_rotations(theta)):
        step = np.eye(4)
        step[:3, :3] = R
        step[:3, 3] = np.array([0.0, 0.0, d1]) + R @ np.array([0.0, 0.0, d2])
        pose = pose @ step
        out[j] = pose
    return out


SCHEMA = Schema(
    node="hyper_redundant_simulator",
    description="Simulated hyper-redundant robot: WT901 readings through the emulator and parser, and ground truth.",
    params=(
        Param("n_modules", int, 4, "number of modules", min=4, max=20),
        Param(
            "imu_array_topic",
            str,
            "imu/array",
            "shape_sensing/ImuArray topic of each cycle of the bus (the "
            "samples recovered), beside imu/platform_<i>; '' for none",
        ),
        Param("d1", float, 0.040, "universal joint height above the lower platform", min=0.0, max=2.0, unit="m"),
        Param("d2", float, 0.040, "upper platform height above the universal joint", min=0.0, max=2.0, unit="m"),
        Param("rate", float, 100.0, "WT901 output rate", choices=OUTPUT_RATES_HZ, unit="Hz"),
        Param("amplitude_deg", float, 20.0, "peak joint angle", min=0.0, max=80.0, unit="deg"),
        Param("mount_deg", float, 0.5, "sensor mounting misalignment (std)", min=0.0, max=10.0, unit="deg"),
        Param("yaw_disturbance_deg", float, 5.0, "magnetic yaw disturbance amplitude", min=0.0, max=90.0, unit="deg"),
        Param("rods_seconds", float, 1.0, "time held straight on the calibration rods at start", min=0.0, unit="s"),
        Param("byte_error_rate", float, 1e-4, "UART bit-flip and byte-loss probability per byte", min=0.0, max=0.1),
        Param("seed", int, 0, "random seed", min=0),
        Param("frame_prefix", str, "", "prefix of the published frame ids"),
    ),
)


@dataclass(frozen=True)
class SimSnapshot:
    """Truth and sensor readings at one time.

    Attributes:
        t: time (s).
        theta: ``(n, 2)`` joint angles (rad).
        attitudes: ``(n+1, 3, 3)`` true platform attitudes in the world frame.
        poses: ``(n+2, 4, 4)`` platforms 0..n and the end effector in the base frame.
        readings: ``(n+1, 3)`` sensor ``[roll, pitch, yaw]`` (rad) with mounting, noise and disturbance.
    """

    t: float
    theta: FloatArray
    attitudes: FloatArray
    poses: FloatArray
    readings: FloatArray


@dataclass
class HyperRedundantSim:
    """An n-module robot (4 to 20 modules) moving through smooth known joint trajectories.

    Args:
        n_modules: modules (4..20).
        d1, d2: joint offsets (m).
        tool: end effector in the last platform's frame (4x4).
        amplitude_deg: peak joint angle.
        base_euler: base platform attitude in the world ``[roll, pitch, yaw]`` (rad).
        mount_deg: standard deviation of each sensor's fixed mounting misalignment.
        roll_pitch_noise_deg, yaw_noise_deg: white noise per reading.
        yaw_disturbance_deg: amplitude of the slow magnetic yaw disturbance per sensor.
        rods_s: time held straight on the calibration rods at the start.
        seed: random seed.
    """

    n_modules: int = 4
    d1: float = 0.040
    d2: float = 0.040
    tool: FloatArray = field(
        default_factory=lambda: np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0.03], [0, 0, 0, 1.0]])
    )
    amplitude_deg: float = 20.0
    base_euler: tuple[float, float, float] = (0.02, -0.03, 0.4)
    mount_deg: float = 0.5
    roll_pitch_noise_deg: float = 0.05
    yaw_noise_deg: float = 1.0
    yaw_disturbance_deg: float = 5.0
    rods_s: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if not 4 <= self.n_modules <= 20:
            raise ValueError(f"n_modules={self.n_modules}: expected 4..20")
        rng = np.random.default_rng(self.seed)
        n = self.n_modules
        self._rng = rng
        self._freq = rng.uniform(0.1, 0.3, (n, 2))
        self._phase = rng.uniform(0, 2 * np.pi, (n, 2))
        self._mount = _euler_zyx_to_matrix(np.radians(rng.normal(0.0, self.mount_deg, (n + 1, 3))))
        self._dist_freq = rng.uniform(0.02, 0.08, n + 1)
        self._dist_phase = rng.uniform(0, 2 * np.pi, n + 1)
        self._base = _euler_zyx_to_matrix(np.asarray(self.base_euler, dtype=float))

    def joint_angles(self, t: float) -> FloatArray:
        """``(n, 2)`` true joint angles at ``t`` (zero on the rods, then a smooth start)."""
        tm = t - self.rods_s
        if tm <= 0:
            return np.zeros((self.n_modules, 2))
        ramp = 1.0 - np.exp(-tm / 1.0)
        amp = np.radians(self.amplitude_deg)
        phase = 2 * np.pi * self._freq * tm + self._phase
        return ramp * amp * (np.sin(phase) - np.sin(self._phase) * np.exp(-tm))

    def snapshot(self, t: float) -> SimSnapshot:
        """Truth and one noisy reading per sensor at ``t``."""
        theta = self.joint_angles(t)
        n = self.n_modules
        R = np.empty((n + 1, 3, 3))
        R[0] = self._base
        Ru = _joint_rotations(theta)
        for j in range(n):
            R[j + 1] = R[j] @ Ru[j]
        T = _platform_poses(theta, self.d1, self.d2)
        poses = np.empty((n + 2, 4, 4))
        poses[0] = np.eye(4)
        poses[1 : n + 1] = T
        poses[-1] = T[-1] @ self.tool
        sensed = _matrix_to_euler_zyx(R @ self._mount)
        noise = self._rng.normal(0.0, 1.0, (n + 1, 3)) * np.radians(
            [self.roll_pitch_noise_deg, self.roll_pitch_noise_deg, self.yaw_noise_deg]
        )
        dist = np.radians(self.yaw_disturbance_deg) * np.sin(2 * np.pi * self._dist_freq * t + self._dist_phase)
        readings = sensed + noise
        readings[:, 2] += dist
        readings[:, 2] = (readings[:, 2] + np.pi) % (2 * np.pi) - np.pi
        return SimSnapshot(t=t, theta=theta, attitudes=R, poses=poses, readings=readings)


@dataclass
class EmulatedSensors:
    """The robot's WT901s seen through the protocol: emulator -> line faults -> parser -> assembler.

    Args:
        n_platforms: sensors (one per platform).
        rate_hz: WT901 output rate.
        byte_error_rate: per-byte probability of a bit flip and, separately, of a lost byte.
        garbage_rate: per-cycle probability of a burst of random bytes.
        seed: random seed of the line faults.
        frame_prefix: prefix of the ``platform_<i>`` frame ids.
    """

    n_platforms: int
    rate_hz: float = 100.0
    byte_error_rate: float = 1e-4
    garbage_rate: float = 0.01
    seed: int = 1
    frame_prefix: str = ""

    def __post_init__(self) -> None:
        from shape_sensing.drivers.wt901 import Wt901Assembler, Wt901Parser
        from shape_sensing.sim.wt901_emulator import Corruptor, Wt901Emulator

        rng = np.random.default_rng(self.seed)
        self.emulator = Wt901Emulator(rate_hz=self.rate_hz, baud=921600)
        e = self.byte_error_rate
        self.lines = [Corruptor(rng, e, e, self.garbage_rate) for _ in range(self.n_platforms)]
        self.parsers = [Wt901Parser() for _ in range(self.n_platforms)]
        self.assemblers = [Wt901Assembler(f"{self.frame_prefix}platform_{i}") for i in range(self.n_platforms)]

    def samples(self, snap: SimSnapshot, stamp_ns: int) -> list[tuple[int, ImuSample]]:
        """The samples recovered from one output cycle of every sensor (lost frames drop samples)."""
        out = []
        for i in range(self.n_platforms):
            data = self.lines[i].apply(self.emulator.cycle_bytes(snap.readings[i], time_ms=int(snap.t * 1000)))
            for frame in self.parsers[i].feed(data):
                sample = self.assemblers[i].push(frame, stamp_ns)
                if sample is not None:
                    out.append((i, sample))
        return out

    def stats(self) -> dict[str, int]:
        """Parser counters summed over the sensors."""
        return {
            "frames_parsed": sum(p.stats.frames for p in self.parsers),
            "frames_bad_checksum": sum(p.stats.bad_checksum for p in self.parsers),
            "bytes_skipped": sum(p.stats.skipped_bytes for p in self.parsers),
        }
