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
    status = CalibrationStatus(3, 2, 1, 0)
    back = cdr(calibration_status_msg(status), "std_msgs/msg/UInt8MultiArray")
    assert calibration_from_msg(back) == status
    assert back.layout.dim[0].label == "system,gyro,accel,mag"
    back.data = np.array([4, 0, 0, 0], dtype=np.uint8)
    with pytest.raises(MessageError, match="expected 4 levels 0-3"):
        calibration_from_msg(back)


def test_chain_diagnostics_round_trip():
    values = {"calibration_system": "1", "nacks": "0"}
    status = DiagnosticStatus("bno055_chain: imu_00", DiagnosticLevel.WARN, "calibrating", "bno055 0x28", values)
    statuses = [status]
    back = cdr(chain_diagnostics_msg(5, statuses), "diagnostic_msgs/msg/DiagnosticArray")
    assert diagnostics_from_msg(back) == statuses
