"""``shape_sensing/ImuArray``: one sweep of several IMUs in one message (every field of sensor_msgs/Imu per sensor).

A driver reading many IMUs in one sweep (the BNO055 chain, the WT901 bus, the simulators) publishes the
sweep with :func:`imu_array_msg`; :func:`imu_sweep_from_msg` reads it back into arrays without a Python
loop over sensors or fields, and :func:`imu_samples_from_sweep` splits it into per-sensor
:class:`~shape_sensing.types.ImuSample` (what the per-sensor sensor_msgs/Imu topics carry). A round trip
through sensor_msgs/Imu and through ImuArray gives the same samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shape_sensing.geometry import FloatArray
from shape_sensing.messages.common import UNIT_QUATERNION_TOLERANCE, header, stamp_from_msg
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import MessageFactory, default_factory, published_type
from shape_sensing.types import ImuSample

__all__ = ["IMU_ARRAY_TYPE", "ImuSweep", "imu_array_msg", "imu_samples_from_sweep", "imu_sweep_from_msg"]

IMU_ARRAY_TYPE = "shape_sensing/msg/ImuArray"
NS_PER_S = 1_000_000_000
_ZERO9 = np.zeros(9)
_ABSENT9 = np.array([-1.0, 0, 0, 0, 0, 0, 0, 0, 0])


@dataclass
class ImuSweep:
    """The readings of one ImuArray, one row per sensor (sensor_msgs/Imu conventions)."""

    stamp_ns: int  # the sweep's stamp (header)
    frame_id: str  # the sweep's frame (header)
    frame_ids: list[str]
    stamps_ns: NDArray[np.int64]  # (n,)
    orientation: FloatArray  # (n, 4) x y z w as sent (not normalised)
    orientation_covariance: FloatArray  # (n, 9); [:, 0] == -1: no orientation
    angular_velocity: FloatArray  # (n, 3)
    angular_velocity_covariance: FloatArray  # (n, 9)
    linear_acceleration: FloatArray  # (n, 3)
    linear_acceleration_covariance: FloatArray  # (n, 9)

    @property
    def n(self) -> int:
        return int(self.stamps_ns.size)

    def unit_orientations(self) -> tuple[FloatArray, NDArray[np.bool_]]:
        """``(quats (n, 4) normalised, usable (n,))``: usable where provided, finite and of norm within
        :data:`~shape_sensing.messages.common.UNIT_QUATERNION_TOLERANCE` of 1 (a norm further off is a corrupted
        reading, refused as :func:`~shape_sensing.messages.common.imu_orientation_from_msg` refuses it).

        The same normalisation as :func:`~shape_sensing.messages.common.imu_orientation_from_msg` (``q / sqrt(q.q)``).
        """
        q = self.orientation
        with np.errstate(invalid="ignore", over="ignore"):
            norm = np.sqrt(np.einsum("ij,ij->i", q, q))
        provided = self.orientation_covariance[:, 0] != -1.0
        usable = provided & (np.abs(norm - 1.0) <= UNIT_QUATERNION_TOLERANCE)  # False for a NaN or infinite norm
        safe = np.where(usable, norm, 1.0)
        return q / safe[:, None], usable


    def provided_orientations(self) -> tuple[FloatArray, NDArray[np.bool_]]:
        """``(quats (n, 4), provided (n,))``: the orientations normalised (:meth:`unit_orientations`), NaN rows where
        a sensor sent none (covariance ``[0] == -1``).

        Raises:
            MessageError: a provided orientation is not a finite quaternion of norm near 1 (naming the sensor): the
                sweep is corrupted, as :func:`imu_samples_from_sweep` refuses it.
        """
        quats, usable = self.unit_orientations()
        provided = self.orientation_covariance[:, 0] != -1.0
        bad = np.flatnonzero(provided & ~usable)
        if bad.size:
            i = int(bad[0])
            raise MessageError(
                f"shape_sensing/ImuArray sensor {i} ({self.frame_ids[i]!r}) has orientation "
                f"{self.orientation[i].tolist()}; expected a unit quaternion"
            )
        quats[~provided] = np.nan
        return quats, provided


def _rows(value: Any, n: int, width: int, name: str) -> FloatArray:
    a = np.asarray(value, dtype=np.float64)
    if a.size != n * width:
        raise MessageError(f"shape_sensing/ImuArray: {name} has {a.size} values for {n} sensors (expected {n * width})")
    return a.reshape(n, width)


def _cov_rows(covs: Sequence[FloatArray | None], fill: FloatArray) -> FloatArray:
    return np.array([fill if c is None else np.asarray(c, dtype=float).reshape(9) for c in covs], dtype=float).reshape(
        -1, 9
    )


@published_type(IMU_ARRAY_TYPE)
def imu_array_msg(
    stamp_ns: int, frame_id: str, samples: Sequence[ImuSample], factory: MessageFactory | None = None
) -> Any:
    """shape_sensing/ImuArray of ``samples`` (sensor i = ``samples[i]``), stamped ``stamp_ns`` in ``frame_id``.

    Per sensor the fields of :func:`~shape_sensing.messages.common.imu_to_msg`: an absent orientation is
    sent as (0, 0, 0, 1) with covariance element 0 = -1; an unknown covariance as zeros.
    """
    f = factory if factory is not None else default_factory()
    stamps = np.array([s.stamp_ns for s in samples], dtype=np.int64)
    q = np.array(
        [(0.0, 0.0, 0.0, 1.0) if s.orientation is None else s.orientation for s in samples], dtype=float
    ).reshape(-1, 4)
    ocov = np.array(
        [_ABSENT9 if s.orientation is None else _cov_rows([s.orientation_covariance], _ZERO9)[0] for s in samples],
        dtype=float,
    ).reshape(-1, 9)
    return f.make(
        IMU_ARRAY_TYPE,
        header=header(stamp_ns, frame_id, f),
        frame_id=[s.frame_id for s in samples],
        stamp_sec=(stamps // NS_PER_S).astype(np.int32),
        stamp_nanosec=(stamps % NS_PER_S).astype(np.uint32),
        orientation=q.reshape(-1),
        orientation_covariance=ocov.reshape(-1),
        angular_velocity=np.array([s.angular_velocity for s in samples], dtype=float).reshape(-1),
        angular_velocity_covariance=_cov_rows([s.angular_velocity_covariance for s in samples], _ZERO9).reshape(-1),
        linear_acceleration=np.array([s.linear_acceleration for s in samples], dtype=float).reshape(-1),
        linear_acceleration_covariance=_cov_rows([s.linear_acceleration_covariance for s in samples], _ZERO9).reshape(
            -1
        ),
    )


def imu_sweep_from_msg(msg: Any) -> ImuSweep:
    """The readings of a shape_sensing/ImuArray (either backend), as arrays.

    Raises:
        MessageError: the arrays do not hold the same number of sensors.
    """
    sec = np.asarray(msg.stamp_sec, dtype=np.int64)
    nsec = np.asarray(msg.stamp_nanosec, dtype=np.int64)
    n = int(sec.size)
    frame_ids = [str(x) for x in msg.frame_id]
    if nsec.size != n or len(frame_ids) != n:
        raise MessageError(
            f"shape_sensing/ImuArray: {n} stamp_sec, {nsec.size} stamp_nanosec and {len(frame_ids)} frame ids"
        )
    return ImuSweep(
        stamp_ns=stamp_from_msg(msg),
        frame_id=str(msg.header.frame_id),
        frame_ids=frame_ids,
        stamps_ns=sec * NS_PER_S + nsec,
        orientation=_rows(msg.orientation, n, 4, "orientation"),
        orientation_covariance=_rows(msg.orientation_covariance, n, 9, "orientation_covariance"),
        angular_velocity=_rows(msg.angular_velocity, n, 3, "angular_velocity"),
        angular_velocity_covariance=_rows(msg.angular_velocity_covariance, n, 9, "angular_velocity_covariance"),
        linear_acceleration=_rows(msg.linear_acceleration, n, 3, "linear_acceleration"),
        linear_acceleration_covariance=_rows(
            msg.linear_acceleration_covariance, n, 9, "linear_acceleration_covariance"
        ),
    )


def imu_samples_from_sweep(sweep: ImuSweep) -> list[ImuSample]:
    """Per-sensor :class:`ImuSample` of a sweep, as :func:`~shape_sensing.messages.common.imu_from_msg` reads
    each sensor's sensor_msgs/Imu (orientation normalised; ``None`` where absent; all-zero covariances ``None``).

    Raises:
        MessageError: a provided orientation is not a finite quaternion of norm >= 0.5 (naming the sensor).
    """
    quats, provided = sweep.provided_orientations()

    def cov(row: FloatArray) -> FloatArray | None:
        return row.reshape(3, 3).copy() if row.any() else None

    return [
        ImuSample(
            stamp_ns=int(sweep.stamps_ns[i]),
            frame_id=sweep.frame_ids[i],
            orientation=quats[i].copy() if provided[i] else None,
            angular_velocity=sweep.angular_velocity[i].copy(),
            linear_acceleration=sweep.linear_acceleration[i].copy(),
            orientation_covariance=cov(sweep.orientation_covariance[i]) if provided[i] else None,
            angular_velocity_covariance=cov(sweep.angular_velocity_covariance[i]),
            linear_acceleration_covariance=cov(sweep.linear_acceleration_covariance[i]),
        )
        for i in range(sweep.n)
    ]
