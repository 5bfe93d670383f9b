"""The ToF sensors' mounting tolerance in the covariance (``estimators/continuum/rig.py``): the consider term's
sensitivity of the solution to a sensor's mounting against the solver's own Newton step when that mounting moves
(the gradient's change by finite differences through the whole factor code, not the term's Jacobians)."""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.spatial.transform import Rotation


def test_sensitivity_matches_the_solvers_step_when_a_mounting_moves() -> None:
    from shape_sensing.demos.tof_continuum import sensor_data, simulate_run
    from shape_sensing.estimators.continuum.rig import mount_consider_covariance, mount_sensitivity, sensor_origins
    from shape_sensing.estimators.continuum.solver import assemble, assign_measurements, linearise, solve_banded
    from shape_sensing.estimators.continuum.tof_localise import LocaliseConfig, build_measurements, localise
    from shape_sensing.io.maps import PriorMap
    from shape_sensing.sim.tof_scene import compressor_scene

    run = simulate_run("S0", "kinematic", 1.6, 0, 0)
    data = sensor_data(run)
    prior = PriorMap.from_mesh(compressor_scene("S0").mesh(include_added=False), spacing=0.03)
    # the points' Cauchy loss made quadratic (scale 1000): the solver's step from a finite difference of its
    # gradient then has the weights the term uses (with the loss's bend in play it also carries the loss's second
    # derivative, which the system matrix, reweighted least squares, does not)
    cfg = LocaliseConfig(tof_noise="fixed", gyro_bias="still", cauchy_tof=1000.0)
    base = localise(data, prior, cfg)
    st = base.state
    assert base.ab is not None
    j = 4  # a sensor of the second ring
    ring = int(np.argmin(np.abs(st.s - data.mounts[j].s)))
    nodes = np.arange(st.K) * st.N + ring
    kw = {"sigma_extra": base.weights.tof_sigma_extra, "cauchy": base.weights.cauchy_tof,
          "gate": base.weights.tof_gate}  # fmt: skip
    origins = sensor_origins(data.mounts)
    D = mount_sensitivity(st, base.ab, base.meas, base.stats.tof_sensor, origins, nodes, **kw)

    def gradient(d: object) -> np.ndarray:
        meas, _ = build_measurements(d, prior, cfg)  # type: ignore[arg-type]
        _, (batches, _) = linearise(st, base.weights, assign_measurements(st, meas))
        return assemble(st.K * st.N, st.N, batches)[1]

    g0 = gradient(data)
    # steps of about a millimetre and a milliradian: much smaller ones are lost in the jumps of the gradient as
    # points change their nearest map point (1e-4 rad about the ring's axis moved the step by 20 times the term)
    for dm in (np.array([4e-4, -3e-4, 2e-4, 0.0, 0.0, 0.0]), np.array([0.0, 0.0, 0.0, 0.0, 1e-3, 0.0])):
        m = data.mounts[j]
        T = np.array(m.T_ring_sensor, dtype=np.float64)
        T[:3, :3] = Rotation.from_rotvec(dm[3:]).as_matrix() @ T[:3, :3]  # turned about its origin, in the ring frame
        T[:3, 3] = T[:3, 3] + dm[:3]
        moved = list(data.mounts)
        moved[j] = dataclasses.replace(m, T_ring_sensor=T)
        # the step the solver takes from its solution when the mounting moves: -H^-1 (g(m + dm) - g(m))
        step = solve_banded(base.ab, gradient(dataclasses.replace(data, mounts=moved)) - g0)
        actual = step.reshape(st.K, st.N, -1)[:, ring, :6]
        predicted = D[:, :, 6 * j : 6 * j + 6] @ dm
        err = np.linalg.norm(actual - predicted, axis=1) / np.linalg.norm(actual, axis=1)
        assert float(np.median(err)) < 0.3, (actual[:2], predicted[:2])
    # the covariance is D S D^T with the stated tolerance: symmetric, positive semi-definite, zero at zero
    P = mount_consider_covariance(st, base.ab, base.meas, base.stats.tof_sensor, origins, nodes, 0.001,
                                  np.deg2rad(1.0), **kw)  # fmt: skip
    assert np.allclose(P, np.swapaxes(P, 1, 2)) and np.all(np.linalg.eigvalsh(P) > -1e-15)
    zero = mount_consider_covariance(st, base.ab, base.meas, base.stats.tof_sensor, origins, nodes, 0.0, 0.0, **kw)
    assert not zero.any()
    # the result's own covariance: the Laplace marginal, and the term once a tolerance is configured
    from shape_sensing.estimators.continuum.covariance import node_covariances

    assert np.array_equal(base.pose_covariances(nodes), node_covariances(base.ab, nodes, slice(0, 6)))
    told = dataclasses.replace(base, mount_tolerance=(0.001, float(np.deg2rad(1.0))))
    assert np.allclose(told.pose_covariances(nodes) - node_covariances(base.ab, nodes, slice(0, 6)), P)


def test_a_mounting_tolerance_that_is_no_tolerance_is_named() -> None:
    import pytest

    from shape_sensing.demos.tof_continuum import sensor_data, simulate_run
    from shape_sensing.estimators.continuum.errors import ContinuumError
    from shape_sensing.estimators.continuum.tof_localise import LocaliseConfig, localise

    data = sensor_data(simulate_run("S0", "kinematic", 1.2, 0, 0))
    for bad in (-0.001, float("nan")):
        with pytest.raises(ContinuumError, match="mount_tolerance "):
            localise(data, None, LocaliseConfig(mount_tolerance=bad))
    with pytest.raises(ContinuumError, match="mount_tolerance_deg"):
        localise(data, None, LocaliseConfig(mount_tolerance_deg=float("inf")))
    with pytest.raises(ContinuumError, match="window"):
        localise(data, None, LocaliseConfig(window=4, mount_tolerance=0.001))
