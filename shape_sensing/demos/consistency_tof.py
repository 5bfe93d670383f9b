"""Covariance consistency of the ToF continuum estimator by Monte Carlo on the kinematic simulator (ring NEES).

One run: simulate a scene of the compressor duct (``sim/tof_continuum.py``, the ``--sim kinematic`` of
``benchmarks/table2_tof_continuum.py``), localise it against the S0 map with the batch estimator (its defaults:
ToF, gyroscopes and strain, joint gyro biases, estimated ToF noise), and score every ring at every truth time
against the simulator's truth with the Laplace covariance of the batch's final system (``LocaliseResult.ab``).

Where the covariance is taken: the rings' arc lengths are nodes of the grid (``s_nodes`` adds every mounting's
arc length), and the estimate is run to the first multiple of its slice period after the last ToF frame (``t_end``
of :func:`~shape_sensing.estimators.continuum.tof_localise.localise`; the default ends at the last frame's time),
so its slices fall at ``k / rate``; only truth times that are slice times are scored (truth at 30 Hz, slices at
5 Hz: every sixth truth sample). Every score so uses the marginal of exactly the node it scores: no nearest-node
approximation in arc length or time.

The covariance's parametrisation (:mod:`~shape_sensing.estimators.continuum.lie`,
:func:`~shape_sensing.estimators.continuum.covariance.node_covariances`): a node's pose is perturbed on the
right, ``T exp(d^)`` with ``d = [rho; phi]`` (translation first) in the node's own (body) frame. To first order the
position moves by ``R rho``, so the world-frame position covariance is ``R P_rho R^T``; the rotation error in the
body frame is ``log(R_est^T R_true)`` (the ``d`` that takes the estimate to the truth), whose covariance is
``P_phi`` as it is.

NEES per run is the mean over its rings and times; the samples of one run share the gyroscopes' biases and the
trajectory, so the mean over ``M`` independent runs (seeds: independent sensor-noise draws) is compared with the
band of the mean of ``M`` chi-square(3) draws (:func:`~shape_sensing.demos.consistency.nees_band`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from shape_sensing.estimators.continuum import lie
from shape_sensing.geometry import FloatArray

if TYPE_CHECKING:
    from shape_sensing.sim.tof_continuum import Imperfections

__all__ = ["TofNeesRun", "ring_nees", "tof_continuum_run"]


@dataclass(frozen=True)
class TofNeesRun:
    """One simulated run's ring NEES and errors."""

    position_nees: float  # mean over rings and scored times (3 DoF)
    rotation_nees: float  # mean over rings and scored times (3 DoF)
    position_error: float  # m, mean
    position_sigma: float  # m, mean of sqrt(trace P) of the position
    samples: int  # rings x scored times
    #: ``(samples,)`` the position errors ``(samples, 3)`` and covariances ``(samples, 3, 3)``, world frame, and
    #: the rotation errors and covariances (body frame), kept so that a caller can score a scaled covariance
    e_pos: FloatArray
    P_pos: FloatArray
    e_rot: FloatArray
    P_rot: FloatArray


def ring_nees(e: FloatArray, P: FloatArray) -> FloatArray:
    """``e_i^T P_i^-1 e_i`` for ``(n, 3)`` errors and ``(n, 3, 3)`` covariances."""
    return np.einsum("ni,ni->n", e, np.linalg.solve(P, e[:, :, None])[:, :, 0])


def tof_continuum_run(
    seed: int,
    scene: str = "S1",
    duration: float = 6.0,
    trajectory: int = 0,
    imperfections: Imperfections | None = None,
    mount_tolerance: tuple[float, float] | None = None,
    base_registration: str | None = None,
) -> TofNeesRun:
    """Simulate ``scene`` with noise seed ``seed``, localise (batch, defaults) and score the rings' NEES.

    ``imperfections``: the real rig's (:class:`~shape_sensing.sim.tof_continuum.Imperfections`). With any on, the
    map is a simulated scan of the duct when the map group is on (its noise), and the base is registered to the map
    from the still start (``base_registration="still"``), as a real recording is estimated; the covariance stays
    the estimator's own, which models none of them, so the NEES says what they cost it.

    ``mount_tolerance``: (m, rad) the sensors' mounting tolerance stated to the estimator, whose consider covariance
    (:func:`~shape_sensing.estimators.continuum.rig.mount_consider_covariance`) is then added to the Laplace one.
    ``base_registration``: the estimator's (default: "fixed" on the ideal rig, "still" with any imperfection).
    """
    from shape_sensing.demos.tof_continuum import MAP_SPACING, sensor_data, simulate_run
    from shape_sensing.estimators.continuum.tof_localise import LocaliseConfig, localise
    from shape_sensing.io.maps import PriorMap
    from shape_sensing.sim.tof_continuum import Imperfections
    from shape_sensing.sim.tof_scene import compressor_scene, scanned_points

    imp = imperfections or Imperfections()
    sim = simulate_run(scene, "kinematic", duration, trajectory, seed, imperfections=imp)
    if imp.map_noise > 0:
        tof_map = PriorMap(scanned_points(compressor_scene("S0"), MAP_SPACING, imp.map_noise, 0),
                           source=f"S0 scan, {1000 * imp.map_noise:g} mm noise")  # fmt: skip
    else:
        tof_map = PriorMap.from_mesh(compressor_scene("S0").mesh(include_added=False), spacing=MAP_SPACING, seed=0,
                                     source="S0 mesh")  # fmt: skip
    if base_registration is None:
        base_registration = "fixed" if imp == Imperfections() else "still"
    tol = (0.0, 0.0) if mount_tolerance is None else mount_tolerance
    cfg = LocaliseConfig(base_registration=base_registration, mount_tolerance=tol[0],
                         mount_tolerance_deg=float(np.rad2deg(tol[1])))  # fmt: skip
    data = sensor_data(sim)
    # the estimate ends on the first multiple of the slice period at or after the last ToF frame (its slices are
    # then k / rate, as every sixth truth time; frames after an earlier end would be left out)
    t_end = np.ceil(float(np.max(data.tof_t)) * cfg.rate - 1e-9) / cfg.rate
    res = localise(data, tof_map, cfg, t_end=t_end)
    if res.ab is None:
        raise RuntimeError(f"ToF continuum run (seed {seed}, {scene}) gave no Laplace system")
    st = res.state
    ring_s = sim.truth_s[1:]
    n = np.array([int(np.argmin(np.abs(st.s - s))) for s in ring_s])
    if np.max(np.abs(st.s[n] - ring_s)) > 1e-6:
        raise RuntimeError("a ring's arc length is not a node of the estimate's grid")
    kt, tt = [], []
    for i, t in enumerate(sim.truth_t):
        k = int(np.argmin(np.abs(st.t - t)))
        if abs(st.t[k] - t) < 1e-6:
            kt.append(k)
            tt.append(i)
    if not kt:
        raise RuntimeError("no truth time is a slice time of the estimate")
    k_idx = np.repeat(np.array(kt), n.size)
    n_idx = np.tile(n, len(kt))
    cov6 = res.pose_covariances(k_idx * st.N + n_idx)  # the Laplace marginals and the mountings' tolerance
    Te = st.T[k_idx, n_idx]
    Tt = sim.truth_pose[np.array(tt)][:, 1:].reshape(-1, 4, 4)
    R = Te[:, :3, :3]
    e_pos = Te[:, :3, 3] - Tt[:, :3, 3]
    P_pos = R @ cov6[:, :3, :3] @ np.swapaxes(R, -1, -2)
    e_rot = lie.so3_log(np.swapaxes(R, -1, -2) @ Tt[:, :3, :3])
    P_rot = cov6[:, 3:, 3:]
    return TofNeesRun(
        float(ring_nees(e_pos, P_pos).mean()),
        float(ring_nees(e_rot, P_rot).mean()),
        float(np.linalg.norm(e_pos, axis=1).mean()),
        float(np.sqrt(np.trace(P_pos, axis1=1, axis2=2)).mean()),
        int(e_pos.shape[0]),
        e_pos,
        P_pos,
        e_rot,
        P_rot,
    )
