"""BNO055 chain messages: every builder round-tripped through CDR with the real ROS 2 definitions."""

from __future__ import annotations

import numpy as np
import pytest

from shape_sensing.drivers.bno055 import CalibrationStatus
from shape_sensing.drivers.bno055_chain import Bno055Reading
from shape_sensing.messages.common import diagnostics_from_msg, imu_from_msg, stamp_from_msg
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import default_factory
from shape_sensing.messages.hardware import (
    bno055_imu_msg,
    calibration_from_msg,
    calibration_status_msg,
    chain_diagnostics_msg,
    magnetic_field_msg,
    temperature_msg,
)
from shape_sensing.types import DiagnosticLevel, DiagnosticStatus


def cdr(msg, typename):
    f = default_factory()
    return f.typestore.deserialize_cdr(f.typestore.serialize_cdr(msg, typename), typename)


def test_imu_round_trip_with_missing_fields_marked():
    r = Bno055Reading("imu_03", "imu_03", 1_500_000_123, orientation=np.array([0.0, 0.6, 0.0, 0.8]),
                      angular_velocity=np.array([0.1, -0.2, 0.3]))  # fmt: skip
    msg = bno055_imu_msg(r, frame_prefix="vine/", orientation_covariance=[1e-4, 2e-4, 3e-4])
    back = cdr(msg, "sensor_msgs/msg/Imu")
    assert back.header.frame_id == "vine/imu_03" and stamp_from_msg(back) == 1_500_000_123
    sample = imu_from_msg(back)
    np.testing.assert_allclose(sample.orientation, [0.0, 0.6, 0.0, 0.8])
    np.testing.assert_allclose(np.diag(sample.orientation_covariance), [1e-4, 2e-4, 3e-4])
    np.testing.assert_allclose(sample.angular_velocity, [0.1, -0.2, 0.3])
    # Linear acceleration was not read: element 0 of its covariance is -1 (sensor_msgs/Imu convention).
    assert back.linear_acceleration_covariance[0] == -1.0
    assert back.angular_velocity_covariance[0] == 0.0


def test_magnetic_field_and_temperature_round_trip():
    back = cdr(magnetic_field_msg(7, "imu_00", [20e-6, -1e-6, -40e-6], [1e-12, 2e-12, 3e-12]),
               "sensor_msgs/msg/MagneticField")  # fmt: skip
    assert (back.magnetic_field.x, back.magnetic_field.y, back.magnetic_field.z) == (20e-6, -1e-6, -40e-6)
    np.testing.assert_allclose(back.magnetic_field_covariance.reshape(3, 3), np.diag([1e-12, 2e-12, 3e-12]))
    back = cdr(temperature_msg(8, "imu_00", 23.0), "sensor_msgs/msg/Temperature")
    assert (back.temperature, back.variance, back.header.frame_id) == (23.0, 1.0, "imu_00")
    with pytest.raises(MessageError, match="magnetic field needs 3 values"):
        magnetic_field_msg(0, "x", [1.0, 2.0])
    with pytest.raises(MessageError, match="temperature nan is not finite"):
        temperature_msg(0, "x", float("nan"))
    with pytest.raises(MessageError, match="covariance diagonal"):
        magnetic_field_msg(0, "x", [1.0, 2.0, 3.0], [-1.0, 0.0, 0.0])


def test_calibration_status_round_trip():
    """The package's Bno055Calibration (defined in msg/, unused before: the levels went out as a UInt8MultiArray)."""
    status = CalibrationStatus(3, 2, 1, 0)
    msg = calibration_status_msg(status, stamp_ns=1_500_000_000, frame_id="vine_imu_05", sensor="imu_05",
                                 profile_restored=True)  # fmt: skip
    back = cdr(msg, "shape_sensing/msg/Bno055Calibration")
    assert calibration_from_msg(back) == status
    assert (back.sensor, back.header.frame_id, back.header.stamp.sec, back.header.stamp.nanosec) == (
        "imu_05", "vine_imu_05", 1, 500_000_000)  # fmt: skip
    assert (back.system, back.gyroscope, back.accelerometer, back.magnetometer) == (3, 2, 1, 0)
    assert back.profile_restored and not back.fully_calibrated
    full = cdr(calibration_status_msg(CalibrationStatus(3, 3, 3, 3)), "shape_sensing/msg/Bno055Calibration")
    assert calibration_from_msg(full) == CalibrationStatus(3, 3, 3, 3) and full.fully_calibrated
    back.system = 4
    with pytest.raises(MessageError, match="expected 4 levels 0-3"):
        calibration_from_msg(back)


def test_chain_diagnostics_round_trip():
    values = {"calibration_system": "1", "nacks": "0"}
    status = DiagnosticStatus("bno055_chain: imu_00", DiagnosticLevel.WARN, "calibrating", "bno055 0x28", values)
    statuses = [status]
    back = cdr(chain_diagnostics_msg(5, statuses), "diagnostic_msgs/msg/DiagnosticArray")
    assert diagnostics_from_msg(back) == statuses


def test_chain_messages_of_a_sweep_match_the_readings():
    """What the node publishes per sweep, built from a simulated chain and round-tripped through CDR."""
    from shape_sensing.drivers.bno055_chain import SCHEMA, Bno055Chain, ChainOptions
    from shape_sensing.drivers.i2c_topology import Topology
    from shape_sensing.messages.hardware import CHAIN_TOPICS, ChainMessages
    from shape_sensing.sim.register_level import build_simulated_hardware

    params = SCHEMA.defaults() | {"frame_prefix": "r1/"}
    topo = Topology.from_params(params)
    hw = build_simulated_hardware(topo)
    for chip in hw.sensors.values():
        chip.calibrate((3, 3, 2, 1))
    chain = Bno055Chain(hw.bus, topo, ChainOptions.from_params(params), clock=hw.bus.clock, sleep=hw.bus.sleep)
    assert chain.start() == []
    messages = ChainMessages(params)
    first = messages.sweep(chain.sweep().readings)
    topics = [t for t, _ in first]
    assert topics.count("imu_00/data") == 1
    for topic, msg in first:
        typename = CHAIN_TOPICS[topic.split("/", 1)[1]]
        back = cdr(msg, typename)
        if typename == "sensor_msgs/msg/Imu":
            assert back.header.frame_id.startswith("r1/vine_imu_")
            np.testing.assert_allclose(back.orientation_covariance.reshape(3, 3), np.diag([3e-4] * 3))
        if typename == "shape_sensing/msg/Bno055Calibration":
            assert calibration_from_msg(back) == CalibrationStatus(3, 3, 2, 1)
    # Over 2.5 s (status read at 1 Hz) each sensor's levels are published once: only changes are published.
    later = list(topics)
    while hw.bus.now_ns < 2_500_000_000:
        later += [t for t, _ in messages.sweep(chain.sweep().readings)]
    assert sorted(t for t in later if t.endswith("calibration_status")) == [
        f"imu_{i:02d}/calibration_status" for i in range(18)
    ]
    assert later.count("imu_05/temperature") >= 2 and later.count("imu_05/mag") >= 40  # 1 Hz and 20 Hz
