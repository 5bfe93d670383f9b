"""Monte Carlo of the continuum estimator's Laplace tip covariance on a synthetic robot with known truth.

The robot (:func:`~shape_sensing.estimators.continuum.synthetic.bending_strain`, 0.4 m, curvature swinging at
0.5 Hz) is measured by noisy poses at ``pose_s`` and gyroscopes at ``gyro_s`` with exactly the noise the estimator's
weights state; each run draws new noise (independent seeds). Per run: the batch estimate, the Laplace covariance
of the tip pose at every time slice (``node_covariances``), and the mean over the slices of the tip position NEES
``e^T P^-1 e`` against the true tip (3 DoF). Slices of one run share their neighbours' noise (the smoother), so only
the runs are independent.
"""

from __future__ import annotations

import numpy as np

from shape_sensing.estimators.continuum.covariance import node_covariances, residual_inflation
from shape_sensing.estimators.continuum.estimator import BatchEstimator
from shape_sensing.estimators.continuum.model import Measurements, Weights
from shape_sensing.estimators.continuum.solver import assign_measurements, build_factors
from shape_sensing.estimators.continuum.synthetic import bending_strain, sample_grid, sample_measurements

__all__ = ["continuum_nees"]

S = np.linspace(0.0, 0.4, 5)


def _weights() -> Weights:
    return Weights(
        P0=np.array([1e-8] * 6 + [1e-2, 1e-2, 1e-2, 1e2, 1e2, 1e-4] + [1e-2] * 6),
        Q1=np.array([1.0, 1, 1, 10, 10, 10]),
        Q2=np.array([1e-2, 1e-2, 1e-2, 10, 10, 10]),
        Q3=np.array([1e-2, 1e-2, 1e-2, 10, 10, 10]),
        R_pose=np.array([1e-6] * 3 + [1e-4] * 3),
        R_gyro=np.array([1e-4] * 3),
    )


def continuum_nees(runs: int, seed0: int = 0, span: float = 1.0, rate: float = 20.0,
                   pose_s: tuple[float, ...] = (0.0, 0.2), gyro_s: tuple[float, ...] = (0.2, 0.4),
                   noise_scale: float = 1.0, burst: tuple[float, float] | None = None,
                   inflate: bool = False) -> list[float]:  # fmt: skip
    """Per run, the mean tip position NEES over the batch's time slices (3 DoF).

    ``noise_scale``: the measurements' noise is this times what the weights state (1: as stated); with ``burst``
    ``(t0, t1)`` only there (an episode the model does not explain, as a contact), the rest as stated, and the NEES is
    the mean over the slices of the burst. ``inflate``: the covariance scaled by
    :func:`~shape_sensing.estimators.continuum.covariance.residual_inflation`.
    """
    fn = bending_strain(amplitude=2.0, frequency=0.5)
    w = _weights()
    pt = np.arange(0.0, span, 1 / 47) + 0.003
    gt = np.arange(0.0, span, 1 / 29) + 0.011
    out = []
    for seed in range(seed0, seed0 + runs):
        rng = np.random.default_rng(seed)

        def draw(scale: float, rng: np.random.Generator = rng) -> Measurements:
            return sample_measurements(fn, pt, list(pose_s), gt, list(gyro_s), pose_sigma=(1e-3 * scale, 1e-2 * scale),
                                       gyro_sigma=1e-2 * scale, rng=rng)  # fmt: skip

        if burst is None:
            meas = draw(noise_scale)
        else:
            quiet, loud = draw(1.0), draw(noise_scale)
            pin = (quiet.pose_t >= burst[0]) & (quiet.pose_t < burst[1])
            gin = (quiet.gyro_t >= burst[0]) & (quiet.gyro_t < burst[1])
            meas = Measurements(
                quiet.pose_t, quiet.pose_s, np.where(pin[:, None, None], loud.pose_mat, quiet.pose_mat),
                quiet.gyro_t, quiet.gyro_s, np.where(gin[:, None], loud.gyro_w, quiet.gyro_w),
            )  # fmt: skip
        res = BatchEstimator(w, S, rate, max_iterations=40).solve(meas, 0.0, span)
        st = res.state
        if res.ab is None:
            raise RuntimeError(f"run {seed}: the batch returned no information matrix (no Laplace covariance)")
        truth = sample_grid(fn, st.t, S)
        nodes = np.arange(st.K) * st.N + st.N - 1
        cov = node_covariances(res.ab, nodes, slice(0, 6))
        if inflate:
            batches = build_factors(st, w, assign_measurements(st, meas))
            cov = cov * residual_inflation(batches, st.K, st.N)[:, None, None]
        R = st.T[:, -1, :3, :3]
        P = R @ cov[:, :3, :3] @ np.swapaxes(R, -1, -2)
        e = truth.T[:, -1, :3, 3] - st.T[:, -1, :3, 3]
        nees = np.einsum("ki,ki->k", e, np.linalg.solve(P, e[..., None])[..., 0])
        if burst is not None:
            nees = nees[(st.t >= burst[0]) & (st.t <= burst[1])]
        out.append(float(np.mean(nees)))
    return out
