"""The gyroscopes' clock offset against the ToF sensors', calibrated from a run.

The gyroscopes and the ToF sensors of a ring are often read by different boards (an IMU on its own bus, the
ToF rings over I2C multiplexers), each stamping by its own clock or on arrival at the host: the gyro readings
come late or early against the frames by a constant offset of a few to tens of milliseconds (bus and USB
latencies, a driver's buffering). Seed 001 assumes one clock. A reading stamped ``tau`` measured the angular
velocity at ``tau - delta``; the batch, taking it at ``tau``, pulls the rings' orientations by ``delta`` times
their angular acceleration against what the ToF points say.

The calibration compares the two clocks' views of the same motion. The batch estimate of the run from the ToF
points and strain alone (no gyroscope) gives each ring's angular velocity on the ToF clock; each gyro reading,
less its still-period bias, is that velocity at ``tau - delta`` plus noise. ``delta`` is the least-squares
shift: a coarse search over ``+-search`` (the cost can have side minima where the motion repeats), then
Gauss-Newton on the residuals ``w - omega(tau - delta)`` with the derivative taken by central differences in
time. Its standard deviation is the Gauss-Newton one, ``s_r / sqrt(sum J^2)``, with ``s_r`` the residuals'
own spread (the gyro noise and the ToF-only estimate's velocity error together, so the figure is
conservative).

Why not with the gyroscopes inside the batch, as the biases are (:mod:`~.gyro_bias`): there the state's
velocity can follow the shifted readings between its nodes and its pose the ToF points, so the offset is seen
only through the motion prior's coupling of the two, weakly (an estimate shrunk towards 0 and finer the coarser
the time grid). A ToF-only estimate has no such freedom: its velocity is what the points' poses make it.

What it assumes: one offset for every gyroscope (one board reads them all), constant over the run (a 50 ppm
clock rate error moves it by 0.05 ms per second: left out), and motion after the still start (a robot that
never turns leaves the offset unobserved, and the calibration says so).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from shape_sensing.estimators.continuum import lie
from shape_sensing.estimators.continuum.errors import ContinuumError
from shape_sensing.estimators.continuum.model import GridState
from shape_sensing.estimators.continuum.query import query_poses
from shape_sensing.geometry import FloatArray

__all__ = ["TIME_STEP", "TimeOffset", "fit_time_offset", "ring_angular_velocity"]

#: the central differences' half step in time (s): far below the offsets estimated and the motion's time scale
TIME_STEP = 1e-3


@dataclass(frozen=True)
class TimeOffset:
    """A calibrated clock offset.

    Attributes:
        offset: s, the gyroscopes' clock minus the ToF sensors' (a gyro stamp less it is on the ToF clock).
        sigma: s, its standard deviation.
        readings: gyro readings that entered.
        residual_rms: rad/s, the readings' spread about the shifted ToF-only velocity.
    """

    offset: float
    sigma: float
    readings: int
    residual_rms: float


def ring_angular_velocity(state: GridState, t: FloatArray, s: FloatArray, h: float = TIME_STEP) -> FloatArray:
    """``(M, 3)`` body-frame angular velocity of the estimate at times ``t`` and arc lengths ``s`` (central
    differences of its poses)."""
    t = np.asarray(t, dtype=np.float64)
    s = np.asarray(s, dtype=np.float64)
    Ta = query_poses(state, t - h, s)
    Tb = query_poses(state, t + h, s)
    return lie.log(lie.inv(Ta) @ Tb)[:, 3:] / (2.0 * h)


def fit_time_offset(
    state: GridState,
    gyro_t: FloatArray,
    gyro_s: FloatArray,
    gyro_w: FloatArray,
    t_from: float,
    search: float = 0.1,
    coarse: float = 0.005,
    iterations: int = 5,
) -> TimeOffset:
    """The clock offset that best lays the gyro readings (bias removed) on the angular velocity of ``state``, an
    estimate made without them (see the module docstring).

    Args:
        state: the ToF-only estimate (on the ToF clock).
        gyro_t: the readings' stamps on their own clock (s, the estimate's time origin).
        gyro_s: their arc lengths.
        gyro_w: ``(M, 3)`` readings less each sensor's bias (rad/s); NaN axes are left out.
        t_from: readings stamped before this (the still start) are left out: no motion to see the offset by.
        search: the offsets tried lie within ``+-search`` (s).
        coarse: the coarse search's step (s).
        iterations: Gauss-Newton steps after it.

    Raises:
        ContinuumError: too few readings inside the estimate's span, no motion to see the offset by, or the best
            fit at the edge of the search.
    """
    if not (np.isfinite(search) and search > 0 and np.isfinite(coarse) and 0 < coarse <= search):
        raise ContinuumError(f"time offset search +-{search!r} s in steps of {coarse!r} s: expected 0 < step <= range")
    t = np.asarray(gyro_t, dtype=np.float64)
    s = np.asarray(gyro_s, dtype=np.float64)
    w = np.asarray(gyro_w, dtype=np.float64)
    lo, hi = float(state.t[0]) + search + 2 * TIME_STEP, float(state.t[-1]) - search - 2 * TIME_STEP
    keep = (t >= max(t_from, lo)) & (t <= hi) & np.all(np.isfinite(w), axis=1)
    if np.count_nonzero(keep) < 10:
        raise ContinuumError(
            f"{int(np.count_nonzero(keep))} gyro readings after the still start and inside the estimate's span "
            f"(+-{search:g} s): too few to calibrate the clock offset"
        )
    t, s, w = t[keep], s[keep], w[keep]

    def cost(delta: float) -> float:
        r = w - ring_angular_velocity(state, t - delta, s)
        return float(np.sum(r * r))

    grid = np.arange(-search, search + 0.5 * coarse, coarse)
    costs = np.array([cost(d) for d in grid])
    delta = float(grid[int(np.argmin(costs))])
    JtJ = 0.0
    r = w - ring_angular_velocity(state, t - delta, s)
    for _ in range(iterations):
        # d r / d delta = + d omega / dt at t - delta
        J = (ring_angular_velocity(state, t - delta + TIME_STEP, s)
             - ring_angular_velocity(state, t - delta - TIME_STEP, s)) / (2 * TIME_STEP)  # fmt: skip
        JtJ = float(np.sum(J * J))
        if not (np.isfinite(JtJ) and JtJ > 0):
            raise ContinuumError("the estimate does not turn after the still start: the clock offset is not observed")
        step = -float(np.sum(J * r)) / JtJ
        delta = float(np.clip(delta + step, -search, search))
        r = w - ring_angular_velocity(state, t - delta, s)
        if abs(step) < 1e-6:
            break
    if abs(delta) >= search - 1e-9:
        raise ContinuumError(
            f"the clock offset that fits best lies at the search's edge ({1e3 * delta:+.1f} ms of "
            f"+-{1e3 * search:g} ms): the offset is larger, or not observed; widen the search (gyro_time_search)"
        )
    dof = max(r.size - 1, 1)
    s_r = float(np.sqrt(np.sum(r * r) / dof))
    sigma = s_r / np.sqrt(JtJ)
    return TimeOffset(delta, float(sigma), int(t.size), float(np.sqrt(np.mean(r * r))))
