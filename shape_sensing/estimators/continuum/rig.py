"""What the ToF sensors' mounting tolerance adds to the Laplace covariance (a consider covariance).

The batch solves for the robot with every sensor's mounting taken as given (``TofMount.T_ring_sensor``). A real rig's
sensors sit within a tolerance of that (a printed mount, a hand-soldered board: about 1 mm and 1 deg), and a
mounting error biases the points of that sensor for the whole run: no amount of data averages it down, so the
Laplace covariance, which knows only the points' noise, leaves it out (on the kinematic simulator with 1 mm / 1 deg
mountings, ring rotation NEES 157 against 3).

Schmidt's consider analysis takes such parameters as fixed but uncertain. At the solution, a mounting error ``dm``
moves the estimate by ``dx = -H^-1 B dm``, ``H`` the system matrix of the batch (its inverse the Laplace
covariance) and ``B = J_x^T W J_m`` the cross information of the ToF factors between the state and the mountings;
with independent mountings ``dm ~ N(0, S_m)`` the estimate's covariance gains ``H^-1 B S_m B^T H^-1``.

A point ``q`` of sensor ``j`` (in its ring's backbone frame, mounting applied) moves under a right perturbation
``(a, b)`` of that mounting, written in the ring frame, by ``a + b x (q - t_j)`` (``t_j`` the sensor's origin on the
ring); the state's pose at the point's frame by ``rho + phi x q``. With ``u = alpha n / sigma`` (the whitened map
normal) the point-to-plane residual's Jacobians are ``-u^T R [I, -[q - t_j]x]`` and ``-u^T R [I, -[q]x]``; the
second is chained through the frame's interpolation to its four nodes as the factor does (``pose_st``), so ``B``
has exactly the solver's weights, gates and association.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import cholesky_banded
from scipy.linalg.lapack import dtbtrs

from shape_sensing.estimators.continuum.errors import ContinuumError
from shape_sensing.estimators.continuum.factors import pose_st
from shape_sensing.estimators.continuum.model import DOF, GridState, Measurements
from shape_sensing.estimators.continuum.solver import assign_measurements, blas_single_thread
from shape_sensing.estimators.continuum.tof import TofEvaluation, point_jacobian, tof_factor
from shape_sensing.geometry import FloatArray

__all__ = ["mount_consider_covariance", "mount_sensitivity", "sensor_origins"]


def mount_consider_covariance(
    state: GridState,
    ab: FloatArray,
    meas: Measurements,
    sensor: NDArray[np.int64],
    origins: FloatArray,
    nodes: NDArray[np.int64],
    sigma_translation: float,
    sigma_rotation: float,
    *,
    sigma_extra: float,
    cauchy: float | None,
    gate: float,
    tof_scale: float = 1.0,
) -> FloatArray:
    """The pose covariance ``(len(nodes), 6, 6)`` (right perturbation ``[rho; phi]``, as
    :func:`~.covariance.node_covariances`) that the sensors' mounting tolerance adds at flat nodes ``nodes``:
    ``D S_m D^T`` with ``D`` of :func:`mount_sensitivity` and ``S_m`` the tolerance (``sigma_translation`` m and
    ``sigma_rotation`` rad, 1-sigma per axis, every sensor alike). Arguments as :func:`mount_sensitivity`.
    """
    D = mount_sensitivity(state, ab, meas, sensor, origins, nodes, sigma_extra=sigma_extra, cauchy=cauchy,
                          gate=gate, tof_scale=tof_scale)  # fmt: skip
    sd = np.tile(np.array([sigma_translation] * 3 + [sigma_rotation] * 3), origins.shape[0])
    Ds = D * sd[None, None, :]
    return np.asarray(Ds @ np.swapaxes(Ds, 1, 2))


def mount_sensitivity(
    state: GridState,
    ab: FloatArray,
    meas: Measurements,
    sensor: NDArray[np.int64],
    origins: FloatArray,
    nodes: NDArray[np.int64],
    *,
    sigma_extra: float,
    cauchy: float | None,
    gate: float,
    tof_scale: float = 1.0,
) -> FloatArray:
    """``D`` ``(len(nodes), 6, 6 S)``: how the pose (right perturbation ``[rho; phi]``) at flat nodes ``nodes``
    moves, to first order, with a right perturbation ``(a, b)`` of each of the ``S`` sensors' mountings written in
    its ring's frame (``dx = D dm``, ``dm`` stacked per sensor).

    Args:
        state, ab: the batch's solution and its final system (:class:`~.tof_localise.LocaliseResult`).
        meas: its measurements (ToF points with their configured sigma); ``sensor`` ``(Q,)`` the mounting index of
            each point (``BuildStats.tof_sensor``), ``origins`` ``(S, 3)`` each sensor's origin in its ring's frame.
        sigma_extra, cauchy, gate: the ToF factor's, as the batch weighted it; ``tof_scale`` the noise scale the
            batch estimated (``LocaliseResult.tof_scale``): the point sigmas and ``sigma_extra`` were multiplied
            by it in the final system.
    """
    idx = np.asarray(nodes, dtype=np.int64).reshape(-1)
    out = np.zeros((idx.size, 6, 6 * origins.shape[0]))
    if meas.tof_map is None or meas.tof_t.size == 0 or idx.size == 0:
        return out
    sensor = np.asarray(sensor, dtype=np.int64).reshape(-1)
    if sensor.size != meas.tof_t.size:
        raise ContinuumError(f"{sensor.size} sensor indices for {meas.tof_t.size} ToF points")
    nvar = ab.shape[1]
    if nvar != DOF * state.K * state.N:
        raise ContinuumError(f"the system has {nvar} variables, the state {DOF * state.K * state.N}")
    scaled = Measurements(tof_t=meas.tof_t, tof_s=meas.tof_s, tof_q=meas.tof_q, tof_sigma=meas.tof_sigma * tof_scale)
    scaled.tof_map = meas.tof_map
    am = assign_measurements(state, scaled)
    if am.tof_cells is None or am.tof_frame is None or am.tof_q is None or am.tof_sigma is None:
        return out
    kept = (meas.tof_t >= state.t[0]) & (meas.tof_t <= state.t[-1])  # the points assign_measurements keeps
    sens = sensor[kept]
    T = state.T.reshape(-1, 4, 4)
    eps = state.eps.reshape(-1, 6)
    varpi = state.varpi.reshape(-1, 6)
    details: list[TofEvaluation] = []
    tof_factor(T, eps, varpi, am.tof_cells, am.tof_frame, am.tof_q, am.tof_sigma, meas.tof_map,
               sigma_extra=sigma_extra * tof_scale, cauchy=cauchy, gate=gate, details=details)  # fmt: skip
    ev = details[0]
    assert ev.normal is not None
    nodes4, ut, dt, us, h = am.tof_cells
    Ts, jacs = pose_st(T, eps, varpi, nodes4, ut, dt, us, h)
    m = ev.matched
    frame = am.tof_frame[m]
    q = am.tof_q[m]
    R = Ts[frame, :3, :3]
    s_m = sens[m]
    g = -np.einsum("pi,pij->pj", ev.normal, point_jacobian(R, q))  # d r / d frame pose (P, 6)
    hm = -np.einsum("pi,pij->pj", ev.normal, point_jacobian(R, q - origins[s_m]))  # d r / d mounting (P, 6)
    wg = ev.weight[:, None] * g
    n_sensors = origins.shape[0]
    F = nodes4[0].size
    # per (frame, sensor): sum of w g^T h; each frame holds one sensor's points
    key = frame * n_sensors + s_m
    C = np.zeros((F * n_sensors, 6, 6))
    np.add.at(C, key, wg[:, :, None] * hm[:, None, :])
    used = np.flatnonzero(np.any(C.reshape(len(C), -1) != 0, axis=1))
    fr, sj = np.divmod(used, n_sensors)
    G = np.concatenate(jacs, axis=2)  # (F, 6, 72): the frame's pose against its four nodes' 18 coordinates
    blocks = np.swapaxes(G[fr], 1, 2) @ C[used]  # (U, 72, 6)
    Bm = np.zeros((nvar, 6 * n_sensors))
    for c in range(4):
        rows = (nodes4[c][fr] * DOF)[:, None] + np.arange(DOF)[None, :]  # (U, 18)
        cols = (sj * 6)[:, None] + np.arange(6)[None, :]  # (U, 6)
        np.add.at(Bm, (rows[:, :, None], cols[:, None, :]), blocks[:, c * DOF : (c + 1) * DOF, :])
    keep_cols = np.flatnonzero(np.any(Bm != 0, axis=0))
    if keep_cols.size == 0:
        return out
    Bm = Bm[:, keep_cols]
    # with H = L L^T: the nodes' rows of H^-1 B are (L^-1 E_i)^T (L^-1 B)
    cols_e = (idx[:, None] * DOF + np.arange(6)[None, :]).reshape(-1)
    E = np.zeros((nvar, cols_e.size))
    E[cols_e, np.arange(cols_e.size)] = 1.0
    with blas_single_thread():
        cb = cholesky_banded(ab, lower=True, check_finite=False)
        Z, info = dtbtrs(cb, np.concatenate([E, Bm], axis=1), uplo="L")
    if info != 0:
        raise ContinuumError("information matrix is singular: no consider covariance")
    # dx = -H^-1 B dm
    out[:, :, keep_cols] = -(Z[:, : cols_e.size].T @ Z[:, cols_e.size :]).reshape(idx.size, 6, -1)
    return out


def sensor_origins(mounts: list[Any]) -> FloatArray:
    """Each mounting's origin in its ring's backbone frame ``(S, 3)``."""
    return np.array([np.asarray(m.T_ring_sensor, dtype=np.float64)[:3, 3] for m in mounts]).reshape(-1, 3)
