"""Register-level IMU source: samples in, the driver's read-back out, through simulated registers and muxes."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from shape_sensing.drivers.bno055_chain import ChainOptions
from shape_sensing.drivers.errors import DriverConfigError
from shape_sensing.sim.register_level import RegisterLevelSource
from shape_sensing.types import ImuSample

FRAMES = [f"vine/imu_{i:02d}" for i in range(18)]


def provider(t: float) -> list[ImuSample]:
    """A smoothly turning chain of 18 IMUs (independent of the driver)."""
    out = []
    for i, frame in enumerate(FRAMES):
        rot = Rotation.from_rotvec([0.1 * i * np.sin(t), 0.05 * i, 0.3 * t])
        out.append(ImuSample(int(t * 1e9), frame, rot.as_quat(), np.array([0.0, 0.01 * i, 0.3]),
                             rot.inv().apply([0.0, 0.0, 9.80665])))  # fmt: skip
    return out


def test_register_level_round_trip_keeps_frames_and_quantises_like_the_chip():
    source = RegisterLevelSource(provider)
    for k in range(120):  # 1.2 s at 100 Hz: status reads (1 Hz) included
        t = 0.01 * k
        truth = provider(t)
        got = source(t)
        assert [s.frame_id for s in got] == FRAMES
        for a, b in zip(truth, got, strict=True):
            dq = min(np.abs(a.orientation - b.orientation).max(), np.abs(a.orientation + b.orientation).max())
            assert dq < 1.5 / 2**14  # 2^-14 quantisation per component (then renormalised)
            np.testing.assert_allclose(b.angular_velocity, a.angular_velocity, atol=0.5 / 900 + 1e-12)
            # Not read by default (bus time): marked absent per sensor_msgs/Imu.
            assert b.linear_acceleration_covariance is not None and b.linear_acceleration_covariance[0, 0] == -1
            # Read stamps: after t, within the 10 ms period (the default fields fit 100 Hz at 400 kHz).
            assert 0 <= b.stamp_ns - int(t * 1e9) < 10_000_000
    assert source.overruns == 0
    assert source.hardware is not None and source.hardware.bus.stats.conflicts == 0


def test_register_level_all_imu_fields_and_bus_overruns():
    source = RegisterLevelSource(provider, options=ChainOptions(capture_calibration=False, mag_rate=0.0))
    for k in range(5):
        truth, got = provider(0.01 * k), source(0.01 * k)
        for a, b in zip(truth, got, strict=True):
            np.testing.assert_allclose(b.linear_acceleration, a.linear_acceleration, atol=0.005 + 1e-12)
    # Three Imu fields for 18 sensors need ~13 ms of bus time: calls every 10 ms overrun.
    assert source.overruns == 4


def test_register_level_provider_stamps_and_a_dead_sensor():
    source = RegisterLevelSource(provider, stamps="provider")
    assert [s.stamp_ns for s in source(0.1)] == [int(0.1 * 1e9)] * 18
    assert source.hardware is not None
    source.hardware.set_dead("imu_04")
    got = source(0.2)
    assert [s.frame_id for s in got] == [f for f in FRAMES if f != "vine/imu_04"]
    assert source.missing == 1


def test_register_level_bad_arguments():
    with pytest.raises(DriverConfigError, match="stamps 'bus' invalid"):
        RegisterLevelSource(provider, stamps="bus")


def test_register_level_on_the_vine_simulator():
    from shape_sensing.sim.vine import VineSimConfig, VineSimulator

    sim = VineSimulator(VineSimConfig(scenario="active", duration=2.0, seed=1))
    loaded: dict[float, list[ImuSample]] = {}

    def provider(t: float) -> list[ImuSample]:  # the simulator's noise is fresh per call: keep what was loaded
        loaded[t] = sim.imu_samples(t)
        return loaded[t]

    source = RegisterLevelSource(provider)
    for k in range(3):
        t = 0.5 + 0.01 * k
        got = source(t)
        truth = loaded[t]
        assert [s.frame_id for s in got] == sim.sensor_names
        for a, b in zip(truth, got, strict=True):
            dq = min(np.abs(a.orientation - b.orientation).max(), np.abs(a.orientation + b.orientation).max())
            assert dq < 1.5 / 2**14
