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

A base registered from the data (``LocaliseConfig.base_registration="still"``) is another such parameter: the batch
clamps every slice's base node to it (the base prior, ``Weights.T0``), so a base error ``db`` (left perturbation)
moves the estimate by ``G db = -H^-1 B_b db``, ``B_b = -H_0 U`` the base prior's cross information (``H_0`` its part
of ``H``, ``U`` the state's response to a rigid left motion of the whole robot: ``Ad(T_i^-1)`` on every pose). The
base is fitted to the same sensors' points, so its error follows the mountings as well as the points' noise:

* the still start's registration (:func:`~.registration.register_base`): ``db_0 = K_0 dm + n_0``, ``K_0`` from
  its own normal matrix and the still points (:func:`~.registration.registration_mount_sensitivity`), ``n_0`` of
  its covariance;
* each registration round after it re-fits the base to every point of the run placed by the last estimate and
  solves the batch again. Linearised, a round leaves ``M = I - (L_p + A)^-1 (L_p + I_d)`` of the base's distance
  to the rounds' fixed point ``db*``, with ``L_p`` the registration's prior, ``A = U^T Y`` the points' information
  on a rigid motion of the robot (``Y = H U - H_0 U``, the other factors' response to it: only the ToF factors are
  not invariant) and ``I_d = A - Y^T H^-1 Y`` what the batch does not take up by bending. ``db*`` is the base of
  the joint system ``[[H, B_b], [B_b^T, U^T H_0 U + L_p]]``: covariance ``S* = (L_p + I_d)^-1``, following the
  mountings by ``S* B_b^T H^-1 B_m``.

After ``R`` rounds ``db = (I - M^R) db* + M^R db_0`` (the still start's and the rounds' noise taken as independent),
and with ``K`` its mounting part and ``S_b`` its noise the mountings move the estimate by ``D = -H^-1 B_m + G K``;
the covariance gains ``D S_m D^T + G S_b G^T`` (:func:`base_sensitivity`). Where the batch bends to take up a
base error (a tilt of the base against the first rings), ``M`` is near the identity and the still start's base
stays; the roll about the robot's axis, which the still start barely fixes, the first round takes up. ``Y`` is
taken as a product with ``H``, not through its inverse, so the stiff base prior (``P0``) does not cancel to
rounding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import cholesky_banded
from scipy.linalg.lapack import dtbtrs

from shape_sensing.estimators.continuum import lie
from shape_sensing.estimators.continuum.errors import ContinuumError
from shape_sensing.estimators.continuum.factors import base_prior, pose_st
from shape_sensing.estimators.continuum.model import DOF, GridState, Measurements, Weights
from shape_sensing.estimators.continuum.solver import assign_measurements, banded_matvec, blas_single_thread
from shape_sensing.estimators.continuum.tof import TofEvaluation, point_jacobian, tof_factor
from shape_sensing.geometry import FloatArray

__all__ = [
    "BaseSensitivity",
    "RegisteredBase",
    "base_sensitivity",
    "mount_consider_covariance",
    "mount_sensitivity",
    "registered_consider_covariance",
    "rigid_motion_basis",
    "sensor_origins",
]


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
    its ring's frame (``dx = D dm``, ``dm`` stacked per sensor), the base held where the batch held it.

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
    _check_system(state, ab)
    if idx.size == 0:
        return out
    Bm = _mount_cross(state, ab, meas, sensor, origins, sigma_extra=sigma_extra, cauchy=cauchy, gate=gate,
                      tof_scale=tof_scale)  # fmt: skip
    keep_cols = np.flatnonzero(np.any(Bm != 0, axis=0))
    if keep_cols.size == 0:
        return out
    # with H = L L^T: the nodes' rows of H^-1 B are (L^-1 E_i)^T (L^-1 B)
    E = _selector(ab.shape[1], idx)
    Z = _forward(ab, np.concatenate([E, Bm[:, keep_cols]], axis=1))
    # dx = -H^-1 B dm
    out[:, :, keep_cols] = -(Z[:, : E.shape[1]].T @ Z[:, E.shape[1] :]).reshape(idx.size, 6, -1)
    return out


@dataclass
class BaseSensitivity:
    """What a base registered from the data does to the poses at some nodes (right perturbation ``[rho; phi]``;
    the base's error a left perturbation ``[translation, rotation]`` of ``Weights.T0``, as
    :attr:`~.registration.BaseRegistration.cov`)."""

    #: ``(n, 6, 6)``: how each node's pose moves with the base, ``-H^-1 B_b``
    base: FloatArray
    #: ``(6, 6)``: the base's covariance from the points' noise and the registration's prior (the joint system's
    #: base marginal)
    cov: FloatArray
    #: ``(n, 6, 6 S)``: how each node's pose moves with the mountings, the base following them
    mount: FloatArray
    #: ``(6, 6 S)``: how the base follows the mountings
    base_mount: FloatArray
    #: ``(6, 6)``: ``M``, the share of a base error that one registration round leaves (:func:`base_sensitivity`)
    contraction: FloatArray


@dataclass(frozen=True)
class RegisteredBase:
    """How the batch's base was registered (``LocaliseConfig.base_registration="still"``): the registration's
    prior (m and rad per axis), the rounds over the whole run after the still start (``registration_rounds``), and
    the still start's registration: its covariance (the points' noise and the prior) and how it moves with the
    sensors' mountings (``(6, 6 S)``, :func:`~.registration.registration_mount_sensitivity`; ``None``: not at all)."""

    prior_translation: float
    prior_rotation: float
    rounds: int
    still_cov: FloatArray
    still_mount: FloatArray | None = None

    def __post_init__(self) -> None:
        for name in ("prior_translation", "prior_rotation"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v > 0):
                raise ContinuumError(f"the registration's {name} must be a finite sigma > 0, got {v!r}")
        if not (isinstance(self.rounds, (int, np.integer)) and self.rounds >= 0):
            raise ContinuumError(f"registration rounds must be an integer >= 0, got {self.rounds!r}")
        cov = np.asarray(self.still_cov, dtype=np.float64)
        if cov.shape != (6, 6) or not np.all(np.isfinite(cov)):
            raise ContinuumError(f"the still start's registration covariance must be a finite 6x6, got {cov.shape}")


def base_sensitivity(
    state: GridState,
    ab: FloatArray,
    weights: Weights,
    nodes: NDArray[np.int64],
    registered: RegisteredBase,
    *,
    meas: Measurements | None = None,
    sensor: NDArray[np.int64] | None = None,
    origins: FloatArray | None = None,
    sigma_extra: float = 0.0,
    cauchy: float | None = None,
    gate: float = 0.3,
    tof_scale: float = 1.0,
) -> BaseSensitivity:
    """The base registered from the data (see the module docstring) at flat nodes ``nodes``: the batch's solution
    ``state``, its final system ``ab`` and ``weights`` (``T0`` the registered base), and how it was registered.
    With ``meas``, ``sensor`` and ``origins`` (as :func:`mount_sensitivity`, with the ToF factor's ``sigma_extra``,
    ``cauchy``, ``gate`` and ``tof_scale``) also how the base and the nodes follow the mountings; else ``mount`` and
    ``base_mount`` have no columns.

    The rounds' model (the module docstring) is linearised at the batch's final solution and takes the rounds'
    registrations to weigh the points as the final system does: they leave out the map's planarity, add its point
    noise and ran before the ToF noise scale was estimated (``test_tof_registration_covariance.py`` compares ``M``
    with the registration's own rounds). ``registered.rounds`` 0: the still start's registration alone.
    """
    _check_system(state, ab)
    idx = np.asarray(nodes, dtype=np.int64).reshape(-1)
    nvar = ab.shape[1]
    if meas is not None and sensor is not None and origins is not None:
        Bm = _mount_cross(state, ab, meas, sensor, origins, sigma_extra=sigma_extra, cauchy=cauchy, gate=gate,
                          tof_scale=tof_scale)  # fmt: skip
    else:
        Bm = np.zeros((nvar, 0))
    K0 = np.zeros((6, Bm.shape[1])) if registered.still_mount is None else np.asarray(registered.still_mount)
    if K0.shape != (6, Bm.shape[1]):
        raise ContinuumError(f"the still start's mounting sensitivity is {K0.shape}, the mountings {(6, Bm.shape[1])}")
    U = rigid_motion_basis(state)
    # Y = (H - H_0) U: the response of every factor but the base prior to moving the whole robot
    Y = np.stack([banded_matvec(ab, U[:, c]) for c in range(6)], axis=1) - _base_prior_info(state, weights) @ U
    E = _selector(nvar, idx)
    Z = _forward(ab, np.concatenate([E, Y, Bm], axis=1))
    ne = E.shape[1]
    ZE, ZY, ZM = Z[:, :ne], Z[:, ne : ne + 6], Z[:, ne + 6 :]
    prior = np.diag([registered.prior_translation**-2] * 3 + [registered.prior_rotation**-2] * 3)
    A = U.T @ Y
    A = 0.5 * (A + A.T)
    # the base's information from the data at the fixed point: U^T (H_0 - H_0 H^-1 H_0) U = U^T Y - Y^T H^-1 Y
    info = A - ZY.T @ ZY
    info = 0.5 * (info + info.T) + prior
    try:
        step = np.linalg.inv(prior + A)
    except np.linalg.LinAlgError as exc:
        raise ContinuumError("the registration rounds' system is singular: no consider covariance") from exc
    M = np.eye(6) - step @ info
    MR = np.linalg.matrix_power(M, int(registered.rounds))
    Q = sum((np.linalg.matrix_power(M, k) for k in range(int(registered.rounds))), np.zeros((6, 6)))
    # (I - M^R) db* = Q (I - M) db* = Q step (info db*): the fixed point's noise and mountings through the rounds
    Qs = Q @ step
    C = -(U.T @ Bm - ZY.T @ ZM)  # B_b^T H^-1 B_m
    base_mount = Qs @ C + MR @ K0
    S0 = np.asarray(registered.still_cov, dtype=np.float64)
    cov = Qs @ info @ Qs.T + MR @ S0 @ MR.T
    cov = 0.5 * (cov + cov.T)
    G = U[_pose_rows(idx)] - ZE.T @ ZY  # -H^-1 B_b = H^-1 H_0 U = U - H^-1 Y, at the nodes
    mount = -(ZE.T @ ZM) + G @ base_mount
    return BaseSensitivity(G.reshape(idx.size, 6, 6), cov, mount.reshape(idx.size, 6, -1),
                           np.asarray(base_mount, dtype=np.float64), M)  # fmt: skip


def registered_consider_covariance(
    sens: BaseSensitivity, sigma_translation: float, sigma_rotation: float
) -> FloatArray:
    """The pose covariance ``(n, 6, 6)`` that a registered base and the mountings' tolerance (``sigma_translation``
    m, ``sigma_rotation`` rad per axis, every sensor alike) add: ``D S_m D^T + G S_b G^T`` with ``D``
    (:attr:`BaseSensitivity.mount`, the base following the mountings), ``G`` (:attr:`BaseSensitivity.base`) and
    ``S_b`` (:attr:`BaseSensitivity.cov`) of :func:`base_sensitivity`."""
    G = sens.base
    out = G @ sens.cov[None] @ np.swapaxes(G, 1, 2)
    if sens.mount.shape[2] and (sigma_translation or sigma_rotation):
        sd = np.tile(np.array([sigma_translation] * 3 + [sigma_rotation] * 3), sens.mount.shape[2] // 6)
        Ds = sens.mount * sd[None, None, :]
        out = out + Ds @ np.swapaxes(Ds, 1, 2)
    return np.asarray(0.5 * (out + np.swapaxes(out, 1, 2)))


def rigid_motion_basis(state: GridState) -> FloatArray:
    """``U`` ``(18 K N, 6)``: the state's right perturbations when the whole robot moves by a left perturbation
    ``d`` (``T_i <- exp(d^) T_i``, strains and velocities unchanged): ``Ad(T_i^-1) d`` on every pose."""
    T = state.T.reshape(-1, 4, 4)
    U = np.zeros((DOF * T.shape[0], 6))
    U[_pose_rows(np.arange(T.shape[0]))] = lie.adj(lie.inv(T)).reshape(-1, 6)
    return U


def _base_prior_info(state: GridState, weights: Weights) -> Any:
    """The base prior's part ``H_0`` of the batch's system (sparse, ``18 K N`` square), as the solver builds it:
    on every slice's base node with a fixed base (else the first slice's), ``P0`` times ``prior_factor``."""
    from scipy.sparse import coo_matrix

    K, N = state.K, state.N
    bi = np.arange(K if weights.fixed_base else min(K, 1), dtype=np.int64) * N
    w = weights
    fb = base_prior(state.T.reshape(-1, 4, 4), state.eps.reshape(-1, 6), state.varpi.reshape(-1, 6), bi, w.T0,
                    w.epsilon0, w.varpi0, w.prior_factor * w.P0, w.cauchy_prior)  # fmt: skip
    J = fb.jac[0]
    if fb.cauchy is not None:  # the solver's IRLS weight
        J = J * np.sqrt(1.0 / (1.0 + np.einsum("md,md->m", fb.r, fb.r) / fb.cauchy**2))[:, None, None]
    blocks = np.einsum("mdi,mdj->mij", J, J)
    rows = bi[:, None] * DOF + np.arange(DOF)[None, :]
    n = DOF * K * N
    ii = np.broadcast_to(rows[:, :, None], blocks.shape).reshape(-1)
    jj = np.broadcast_to(rows[:, None, :], blocks.shape).reshape(-1)
    return coo_matrix((blocks.reshape(-1), (ii, jj)), shape=(n, n)).tocsr()


def _check_system(state: GridState, ab: FloatArray) -> None:
    if ab.shape[1] != DOF * state.K * state.N:
        raise ContinuumError(f"the system has {ab.shape[1]} variables, the state {DOF * state.K * state.N}")


def _pose_rows(idx: NDArray[np.int64]) -> NDArray[np.int64]:
    return np.asarray((idx[:, None] * DOF + np.arange(6)[None, :]).reshape(-1), dtype=np.int64)


def _selector(nvar: int, idx: NDArray[np.int64]) -> FloatArray:
    """The columns of the identity at the nodes' pose coordinates ``(nvar, 6 n)``."""
    cols = _pose_rows(idx)
    E = np.zeros((nvar, cols.size))
    E[cols, np.arange(cols.size)] = 1.0
    return E


def _forward(ab: FloatArray, X: FloatArray) -> FloatArray:
    """``L^-1 X`` with ``H = L L^T`` (``ab`` lower banded)."""
    with blas_single_thread():
        cb = cholesky_banded(ab, lower=True, check_finite=False)
        Z, info = dtbtrs(cb, X, uplo="L")
    if info != 0:
        raise ContinuumError("information matrix is singular: no consider covariance")
    return np.asarray(Z)


def _mount_cross(
    state: GridState,
    ab: FloatArray,
    meas: Measurements,
    sensor: NDArray[np.int64],
    origins: FloatArray,
    *,
    sigma_extra: float,
    cauchy: float | None,
    gate: float,
    tof_scale: float,
) -> FloatArray:
    """``B_m`` ``(18 K N, 6 S)``: the ToF factors' cross information between the state and the mountings (see the
    module docstring; arguments as :func:`mount_sensitivity`); zero without matched points."""
    nvar = ab.shape[1]
    n_sensors = origins.shape[0]
    Bm = np.zeros((nvar, 6 * n_sensors))
    if meas.tof_map is None or meas.tof_t.size == 0:
        return Bm
    sensor = np.asarray(sensor, dtype=np.int64).reshape(-1)
    if sensor.size != meas.tof_t.size:
        raise ContinuumError(f"{sensor.size} sensor indices for {meas.tof_t.size} ToF points")
    scaled = Measurements(tof_t=meas.tof_t, tof_s=meas.tof_s, tof_q=meas.tof_q, tof_sigma=meas.tof_sigma * tof_scale)
    scaled.tof_map = meas.tof_map
    am = assign_measurements(state, scaled)
    if am.tof_cells is None or am.tof_frame is None or am.tof_q is None or am.tof_sigma is None:
        return Bm
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
    F = nodes4[0].size
    # per (frame, sensor): sum of w g^T h; each frame holds one sensor's points
    key = frame * n_sensors + s_m
    C = np.zeros((F * n_sensors, 6, 6))
    np.add.at(C, key, wg[:, :, None] * hm[:, None, :])
    used = np.flatnonzero(np.any(C.reshape(len(C), -1) != 0, axis=1))
    fr, sj = np.divmod(used, n_sensors)
    G = np.concatenate(jacs, axis=2)  # (F, 6, 72): the frame's pose against its four nodes' 18 coordinates
    blocks = np.swapaxes(G[fr], 1, 2) @ C[used]  # (U, 72, 6)
    for c in range(4):
        rows = (nodes4[c][fr] * DOF)[:, None] + np.arange(DOF)[None, :]  # (U, 18)
        cols = (sj * 6)[:, None] + np.arange(6)[None, :]  # (U, 6)
        np.add.at(Bm, (rows[:, :, None], cols[:, None, :]), blocks[:, c * DOF : (c + 1) * DOF, :])
    return Bm


def sensor_origins(mounts: list[Any]) -> FloatArray:
    """Each mounting's origin in its ring's backbone frame ``(S, 3)``."""
    return np.array([np.asarray(m.T_ring_sensor, dtype=np.float64)[:3, 3] for m in mounts]).reshape(-1, 3)
