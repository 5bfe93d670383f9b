"""Messages of the hardware drivers: IMU chains (sensor_msgs/Imu, MagneticField, Temperature, calibration).

Builders take core types (driver readings) and an optional ``factory``
(defaults to the rosbags-backed Jazzy factory); nodes pass the rclpy one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from shape_sensing.drivers.bno055 import CalibrationStatus
from shape_sensing.drivers.bno055_chain import Bno055Reading
from shape_sensing.drivers.i2c_topology import SensorSpec
from shape_sensing.geometry import FloatArray
from shape_sensing.messages.common import diagnostic_array, header, imu_to_msg
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import MessageFactory, default_factory, published_type
from shape_sensing.messages.imu_array import imu_array_msg
from shape_sensing.types import DiagnosticStatus, ImuSample

__all__ = [
    "CALIBRATION_LABELS",
    "CHAIN_TOPICS",
    "ChainMessages",
    "bno055_imu_msg",
    "calibration_from_msg",
    "calibration_status_msg",
    "chain_diagnostics_msg",
    "magnetic_field_msg",
    "temperature_msg",
]

CALIBRATION_LABELS = ("system", "gyro", "accel", "mag")

# Per-sensor topics of the bno055_chain node (relative, after ``NAME/``) and their types.
CHAIN_TOPICS = {
    "data": "sensor_msgs/msg/Imu",
    "mag": "sensor_msgs/msg/MagneticField",
    "temperature": "sensor_msgs/msg/Temperature",
    "calibration_status": "shape_sensing/msg/Bno055Calibration",
}


def _f(factory: MessageFactory | None) -> MessageFactory:
    return factory if factory is not None else default_factory()


def _cov3(diag: Sequence[float] | FloatArray | None, name: str) -> FloatArray | None:
    if diag is None:
        return None
    d = np.asarray(diag, dtype=float).reshape(-1)
    if d.shape != (3,) or not np.all(np.isfinite(d)) or np.any(d < 0):
        raise MessageError(f"{name} covariance diagonal {d.tolist()}: expected 3 finite values >= 0")
    return np.diag(d)


def bno055_imu_msg(
    reading: Bno055Reading,
    *,
    frame_prefix: str = "",
    orientation_covariance: Sequence[float] | None = None,
    angular_velocity_covariance: Sequence[float] | None = None,
    linear_acceleration_covariance: Sequence[float] | None = None,
    factory: MessageFactory | None = None,
) -> Any:
    """sensor_msgs/Imu from a reading (REP-145: fields not read carry covariance element 0 = -1).

    Covariances are diagonals (rad^2, (rad/s)^2, (m/s^2)^2); ``None`` means unknown (zeros).
    """
    sample = reading.to_imu_sample(
        frame_prefix,
        orientation_covariance=_cov3(orientation_covariance, "orientation"),
        angular_velocity_covariance=_cov3(angular_velocity_covariance, "angular velocity"),
        linear_acceleration_covariance=_cov3(linear_acceleration_covariance, "linear acceleration"),
    )
    return imu_to_msg(sample, factory)


@published_type("sensor_msgs/msg/MagneticField")
def magnetic_field_msg(
    stamp_ns: int,
    frame_id: str,
    field_tesla: Sequence[float] | FloatArray,
    covariance_diagonal: Sequence[float] | None = None,
    factory: MessageFactory | None = None,
) -> Any:
    """sensor_msgs/MagneticField (tesla, sensor frame); unknown covariance is all zeros."""
    f = _f(factory)
    b = np.asarray(field_tesla, dtype=float).reshape(-1)
    if b.shape != (3,):
        raise MessageError(f"magnetic field needs 3 values, got {b.tolist()}")
    cov = _cov3(covariance_diagonal, "magnetic field")
    return f.make(
        "sensor_msgs/msg/MagneticField",
        header=header(stamp_ns, frame_id, factory),
        magnetic_field=f.make("geometry_msgs/msg/Vector3", x=float(b[0]), y=float(b[1]), z=float(b[2])),
        magnetic_field_covariance=np.zeros(9) if cov is None else cov.reshape(9),
    )


@published_type("sensor_msgs/msg/Temperature")
def temperature_msg(
    stamp_ns: int, frame_id: str, celsius: float, variance: float = 1.0, factory: MessageFactory | None = None
) -> Any:
    """sensor_msgs/Temperature (degC; the BNO055 reports whole degrees, hence variance 1 by default)."""
    if not np.isfinite(celsius):
        raise MessageError(f"temperature {celsius!r} is not finite")
    return _f(factory).make(
        "sensor_msgs/msg/Temperature",
        header=header(stamp_ns, frame_id, factory),
        temperature=float(celsius),
        variance=float(variance),
    )


@published_type("shape_sensing/msg/Bno055Calibration")
def calibration_status_msg(
    status: CalibrationStatus,
    factory: MessageFactory | None = None,
    *,
    stamp_ns: int = 0,
    frame_id: str = "",
    sensor: str = "",
    profile_restored: bool = False,
) -> Any:
    """shape_sensing/Bno055Calibration: the four CALIB_STAT levels (0-3) of sensor ``sensor``, named fields."""
    levels = status.as_list()
    if any(not 0 <= int(v) <= 3 for v in levels):
        raise MessageError(f"calibration status {levels}: expected 4 levels 0-3 ({', '.join(CALIBRATION_LABELS)})")
    return _f(factory).make(
        "shape_sensing/msg/Bno055Calibration",
        header=header(stamp_ns, frame_id, factory),
        sensor=str(sensor),
        system=int(status.system),
        gyroscope=int(status.gyro),
        accelerometer=int(status.accel),
        magnetometer=int(status.mag),
        profile_restored=bool(profile_restored),
        fully_calibrated=all(int(v) == 3 for v in levels),
    )


def calibration_from_msg(msg: Any) -> CalibrationStatus:
    """Inverse of :func:`calibration_status_msg` (either backend)."""
    data = [int(msg.system), int(msg.gyroscope), int(msg.accelerometer), int(msg.magnetometer)]
    if any(not 0 <= v <= 3 for v in data):
        raise MessageError(f"calibration status {data}: expected 4 levels 0-3 ({', '.join(CALIBRATION_LABELS)})")
    return CalibrationStatus(*data)


def chain_diagnostics_msg(
    stamp_ns: int, statuses: Iterable[DiagnosticStatus], factory: MessageFactory | None = None
) -> Any:
    """diagnostic_msgs/DiagnosticArray of a chain's statuses (see ``Bno055Chain.diagnostics``)."""
    return diagnostic_array(stamp_ns, statuses, factory)


class ChainMessages:
    """What the ``bno055_chain`` node publishes for a sweep: ``(topic, message)`` pairs.

    Every reading gives ``NAME/data``; ``NAME/mag`` and ``NAME/temperature``
    when those were read in the sweep; ``NAME/calibration_status`` when the
    levels were read and differ from the last ones published.

    Args:
        params: validated ``bno055_chain`` parameters (covariances, ``frame_prefix``).
        factory: message factory (rclpy-backed in the node).
    """

    def __init__(
        self,
        params: Mapping[str, Any],
        factory: MessageFactory | None = None,
        profile_restored: Callable[[str], bool] | None = None,
    ) -> None:
        self.factory = factory
        self.profile_restored = profile_restored or (lambda _name: False)
        self.prefix = str(params.get("frame_prefix", ""))
        self.covariances = {
            k: params.get(k)
            for k in ("orientation_covariance", "angular_velocity_covariance", "linear_acceleration_covariance")
        }
        self.mag_covariance = params.get("magnetic_field_covariance")
        self.array_frame = self.prefix + "bno055_chain"  # the ImuArray header's frame: the bus, not a TF frame
        # the ImuArray rows' covariances, checked once (they are parameters): not on every sweep
        self._array_covs = {
            k: _cov3(v, k.replace("_covariance", "").replace("_", " ")) for k, v in self.covariances.items()
        }
        self._absent = np.zeros((3, 3))
        self._absent[0, 0] = -1.0  # sensor_msgs/Imu: not provided
        self.last_calibration: dict[str, list[int]] = {}

    def imu_array(self, readings: Iterable[Bno055Reading], sensors: Sequence[SensorSpec], stamp_ns: int) -> Any:
        """shape_sensing/ImuArray of one sweep: row i is ``sensors[i]`` (the chain's configured order, which the
        estimator's ``imu_topics`` follow), with the fields and covariances of its ``NAME/data`` message; a sensor
        not read in this sweep is sent without orientation (covariance element 0 = -1) at ``stamp_ns``, the
        sweep's stamp in the header (a sweep without readings is still sent: it says the chain is alive)."""
        by_name = {r.name: r for r in readings}
        absent, covs = self._absent, self._array_covs
        samples = []
        for spec in sensors:
            r = by_name.get(spec.name)
            if r is None:
                samples.append(ImuSample(stamp_ns=stamp_ns, frame_id=self.prefix + spec.frame_id, orientation=None,
                                         angular_velocity=np.zeros(3), linear_acceleration=np.zeros(3),
                                         angular_velocity_covariance=absent,
                                         linear_acceleration_covariance=absent))  # fmt: skip
            else:
                samples.append(r.to_imu_sample(self.prefix, **covs))
        return imu_array_msg(stamp_ns, self.array_frame, samples, self.factory)

    def sweep(self, readings: Iterable[Bno055Reading]) -> list[tuple[str, Any]]:
        """Messages for the readings of one sweep, in reading order."""
        f = self.factory
        out: list[tuple[str, Any]] = []
        for r in readings:
            out.append((f"{r.name}/data", bno055_imu_msg(r, frame_prefix=self.prefix, factory=f, **self.covariances)))
            frame = self.prefix + r.frame_id
            if r.magnetic_field is not None:
                out.append(
                    (f"{r.name}/mag", magnetic_field_msg(r.stamp_ns, frame, r.magnetic_field, self.mag_covariance, f))
                )
            if r.temperature is not None:
                out.append((f"{r.name}/temperature", temperature_msg(r.stamp_ns, frame, r.temperature, factory=f)))
            if r.calibration is not None and self.last_calibration.get(r.name) != r.calibration.as_list():
                self.last_calibration[r.name] = r.calibration.as_list()
                msg = calibration_status_msg(r.calibration, f, stamp_ns=r.stamp_ns, frame_id=frame, sensor=r.name,
                                             profile_restored=self.profile_restored(r.name))  # fmt: skip
                out.append((f"{r.name}/calibration_status", msg))
        return out
