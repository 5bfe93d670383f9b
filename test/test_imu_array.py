"""shape_sensing/ImuArray: a sweep in one message reads back as the per-sensor sensor_msgs/Imu would, through CDR;
the hinge-arc tracker fed sweeps gives the estimates it gives fed the per-IMU messages."""

from __future__ import annotations

import numpy as np
import pytest

from shape_sensing.messages.common import imu_from_msg, imu_orientation_from_msg, imu_to_msg
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import default_factory
from shape_sensing.messages.imu_array import (
    IMU_ARRAY_TYPE,
    imu_array_msg,
    imu_samples_from_sweep,
    imu_sweep_from_cdr,
    imu_sweep_from_msg,
)
from shape_sensing.types import ImuSample


def _samples(n: int, rng: np.random.Generator) -> list[ImuSample]:
    out = []
    for i in range(n):
        q = rng.normal(size=4)
        q /= np.linalg.norm(q)
        out.append(
            ImuSample(
                stamp_ns=1_700_000_000_123_456_789 + 1000 * i,
                frame_id=f"imu_{i:02d}",
                orientation=None if i == 2 else q,
                angular_velocity=rng.normal(size=3),
                linear_acceleration=rng.normal(size=3),
                orientation_covariance=None if i % 2 else np.diag([1e-4, 2e-4, 3e-4]),
                angular_velocity_covariance=np.eye(3) * 1e-5 if i == 1 else None,
                linear_acceleration_covariance=None,
            )
        )
    return out


def _same(a: ImuSample, b: ImuSample) -> None:
    assert a.stamp_ns == b.stamp_ns and a.frame_id == b.frame_id
    for name in (
        "orientation",
        "angular_velocity",
        "linear_acceleration",
        "orientation_covariance",
        "angular_velocity_covariance",
        "linear_acceleration_covariance",
    ):
        x, y = getattr(a, name), getattr(b, name)
        assert (x is None) == (y is None), name
        if x is not None:
            np.testing.assert_allclose(x, y, rtol=0, atol=1e-15, err_msg=name)


def test_a_sweep_through_cdr_reads_as_each_sensors_imu_message():
    """Independent path: each sample through its own sensor_msgs/Imu and imu_from_msg."""
    f = default_factory()
    samples = _samples(7, np.random.default_rng(3))
    msg = imu_array_msg(1_700_000_000_200_000_000, "vine_base", samples, f)
    raw = f.typestore.serialize_cdr(msg, IMU_ARRAY_TYPE)
    back = f.typestore.deserialize_cdr(raw, IMU_ARRAY_TYPE)
    sweep = imu_sweep_from_msg(back)
    assert sweep.n == 7 and sweep.stamp_ns == 1_700_000_000_200_000_000 and sweep.frame_id == "vine_base"
    via_array = imu_samples_from_sweep(sweep)
    for s, a in zip(samples, via_array, strict=True):
        per_sensor = f.typestore.deserialize_cdr(
            f.typestore.serialize_cdr(imu_to_msg(s, f), "sensor_msgs/msg/Imu"), "sensor_msgs/msg/Imu"
        )
        _same(imu_from_msg(per_sensor), a)


def _same_sweep(a, b) -> None:
    for name in a.__dataclass_fields__:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, np.ndarray):
            assert x.shape == y.shape and x.dtype == y.dtype and np.array_equal(x, y), name
        else:
            assert x == y, name


@pytest.mark.parametrize("n", [0, 1, 3, 18])
def test_the_cdr_reader_reads_what_rosbags_serialises(n: int):
    """rosbags' CDR serialiser (an implementation of its own, whose bytes rmw's equal) against the reader: every
    field as the decoded message gives it, frame ids of every length (padding 0-3), an empty sweep."""
    f = default_factory()
    samples = _samples(n, np.random.default_rng(8))
    for i, s in enumerate(samples):
        s.frame_id = "x" * i  # lengths 0.. : each alignment of the following string
    raw = f.typestore.serialize_cdr(imu_array_msg(1_700_000_000_200_000_001, "base"[:n], samples, f), IMU_ARRAY_TYPE)
    back = f.typestore.deserialize_cdr(raw, IMU_ARRAY_TYPE)
    sweep = imu_sweep_from_cdr(raw)
    _same_sweep(imu_sweep_from_msg(back), sweep)
    sweep.orientation[:] = 0.0  # writable, as a decoded message's arrays are (raw itself is not touched)
    _same_sweep(imu_sweep_from_msg(back), imu_sweep_from_cdr(memoryview(raw)))


def test_bad_cdr_sweeps_are_named():
    f = default_factory()
    raw = bytes(f.typestore.serialize_cdr(imu_array_msg(5, "base", _samples(3, np.random.default_rng(5)), f),
                                          IMU_ARRAY_TYPE))  # fmt: skip
    with pytest.raises(MessageError, match="not little-endian plain CDR"):
        imu_sweep_from_cdr(b"\x00\x00" + raw[2:])  # big-endian encapsulation
    for cut in (3, 10, 40, len(raw) // 2, len(raw) - 8):
        with pytest.raises(MessageError, match="bytes end inside|not little-endian"):
            imu_sweep_from_cdr(raw[:cut])
    msg = imu_array_msg(5, "base", _samples(3, np.random.default_rng(5)), f)
    msg.angular_velocity = msg.angular_velocity[:-1]
    with pytest.raises(MessageError, match="angular_velocity has 8 values for 3 sensors"):
        imu_sweep_from_cdr(f.typestore.serialize_cdr(msg, IMU_ARRAY_TYPE))


def test_unit_orientations_match_the_per_message_path():
    f = default_factory()
    samples = _samples(5, np.random.default_rng(4))
    samples[3].orientation = samples[3].orientation * 1.3  # corrupted: refused as imu_orientation_from_msg does
    k = next(i for i, s in enumerate(samples) if i != 3 and s.orientation is not None)
    samples[k].orientation = samples[k].orientation * 1.01  # quantisation-sized: normalised as it does
    sweep = imu_sweep_from_msg(imu_array_msg(5, "base", samples, f))
    quats, usable = sweep.unit_orientations()
    assert not usable[3] and usable[k]
    for i, s in enumerate(samples):
        try:
            _, q = imu_orientation_from_msg(imu_to_msg(s, f))
        except MessageError:
            q = None
        assert usable[i] == (q is not None)
        if q is not None:
            np.testing.assert_allclose(quats[i], q, rtol=0, atol=1e-15)


def test_bad_sweeps_are_named():
    f = default_factory()
    msg = imu_array_msg(5, "base", _samples(3, np.random.default_rng(5)), f)
    msg.angular_velocity = msg.angular_velocity[:-1]
    with pytest.raises(MessageError, match="angular_velocity has 8 values for 3 sensors"):
        imu_sweep_from_msg(msg)
    msg = imu_array_msg(5, "base", _samples(3, np.random.default_rng(5)), f)
    msg.stamp_nanosec = msg.stamp_nanosec[:1]
    with pytest.raises(MessageError, match="stamp_nanosec"):
        imu_sweep_from_msg(msg)
    msg = imu_array_msg(5, "base", _samples(3, np.random.default_rng(5)), f)
    msg.orientation[4:8] = 0.0  # sensor 1: a provided orientation of norm 0
    with pytest.raises(MessageError, match="sensor 1"):
        imu_samples_from_sweep(imu_sweep_from_msg(msg))


@pytest.mark.parametrize("spread_ns", [0, 450_000])
def test_hinge_arc_tracker_fed_sweeps_equals_fed_per_imu_messages(spread_ns: int):
    """The simulated vine robot for 3 s: one tracker gets each sweep as 18 orientations (the per-topic path),
    the other as one array (push_orientations); the estimates agree to rounding. With ``spread_ns``, the sensors
    of a sweep are stamped one after another (as a driver reads them: 0.45 ms apart, so estimate ticks fall
    inside sweeps), one reading comes late (older than its sensor's last), and from 1 s a straight reference is
    requested, whose still check follows every reading."""
    from shape_sensing.estimators.hinge_arc import SCHEMA
    from shape_sensing.pipelines.vine_imu import VineImuTracker
    from shape_sensing.sim.vine import VineSimConfig, VineSimulator

    sim = VineSimulator(VineSimConfig(scenario="active", seed=2))
    params = SCHEMA.defaults() | {"length_topic": ""}
    a, b = VineImuTracker(params), VineImuTracker(params)
    f = default_factory()
    est_a, est_b = [], []
    for k in range(300):
        t = k / 100.0
        stamp = 1_000_000_000 + k * 10_000_000
        stamps = stamp + spread_ns * np.arange(18)
        if spread_ns and k == 150:
            stamps[3] -= 25_000_000  # read late: older than sensor 3's last reading
        if k == 100:
            a.request_offset()
            b.request_offset()
        now = sim.imu_samples(t)
        samples = [ImuSample(int(st), s.frame_id, s.orientation) for st, s in zip(stamps, now, strict=True)]
        if k == 120:
            samples[4] = ImuSample(int(stamps[4]), samples[4].frame_id, None)  # one sensor gives no orientation
        for i in np.argsort(stamps, kind="stable"):
            st, q = imu_orientation_from_msg(imu_to_msg(samples[i], f))
            est_a += a.push_orientation(int(i), st, q)
        sweep = imu_sweep_from_msg(imu_array_msg(int(stamps.max()), "vine_base", samples, f))
        est_b += b.push_orientations(sweep.stamps_ns, *sweep.unit_orientations())
    assert len(est_a) == len(est_b) > 50
    for x, y in zip(est_a, est_b, strict=True):
        assert x.stamp_ns == y.stamp_ns
        np.testing.assert_allclose(x.backbone, y.backbone, rtol=0, atol=1e-12)  # normalisation rounding
    assert a.stats.bad_samples == b.stats.bad_samples == 1
    assert a.stats.out_of_order == b.stats.out_of_order == (1 if spread_ns else 0)
    np.testing.assert_array_equal(a._still_since, b._still_since)
    assert a.reference_status == b.reference_status


def test_rigid_module_tracker_fed_bus_cycles_equals_fed_per_platform_samples():
    """21 WT901 through the emulated bus with byte errors (cycles that lose samples), rods calibration over the
    first second: push_sweep (one bus cycle, vectorised) against push_imu per sample."""
    from shape_sensing.estimators.rigid_module import SCHEMA as ESTIMATOR_SCHEMA
    from shape_sensing.pipelines.hyper_redundant import HyperRedundantTracker
    from shape_sensing.sim.hyper_redundant import SCHEMA, EmulatedSensors, HyperRedundantSim

    p = SCHEMA.defaults() | {"n_modules": 20}
    sim = HyperRedundantSim(n_modules=20, d1=p["d1"], d2=p["d2"], amplitude_deg=p["amplitude_deg"],
                            mount_deg=p["mount_deg"], yaw_disturbance_deg=p["yaw_disturbance_deg"], rods_s=1.0,
                            seed=3)  # fmt: skip
    sensors = EmulatedSensors(21, rate_hz=100.0, byte_error_rate=2e-3, seed=4, frame_prefix="")
    params = ESTIMATOR_SCHEMA.defaults() | {"n_modules": 20}
    a, b = HyperRedundantTracker(params, rods_s=1.0), HyperRedundantTracker(params, rods_s=1.0)
    est_a, est_b, lost = [], [], 0
    f = default_factory()
    for k in range(300):
        stamp = 1_000_000_000 + k * 10_000_000
        recovered = sensors.samples(sim.snapshot(k / 100.0), stamp)
        lost += 21 - len(recovered)
        for i, s in recovered:
            est_a += a.push_imu(s, i)
        sweep = imu_sweep_from_msg(imu_array_msg(stamp, "base_link", [s for _, s in recovered], f))
        est_b += b.push_sweep(imu_samples_from_sweep(sweep))
    assert lost > 0, "some cycles lose samples"
    assert a.calibrated and b.calibrated
    np.testing.assert_allclose(a.estimator.bias, b.estimator.bias, rtol=0, atol=1e-12)
    assert len(est_a) == len(est_b) > 30
    for x, y in zip(est_a, est_b, strict=True):
        assert x.shape.stamp_ns == y.shape.stamp_ns
        np.testing.assert_allclose(x.shape.backbone, y.shape.backbone, rtol=0, atol=1e-9)
    assert vars(a.stats) == vars(b.stats)
