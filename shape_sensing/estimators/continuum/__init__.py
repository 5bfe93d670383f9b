"""Continuous-time continuum-robot state estimator.

Gaussian-process priors in arc length and in time over poses, strains and
velocities on a grid of nodes; pose and gyroscope factors interpolated in
time; Gauss-Newton on the block-banded system; a fixed-lag sliding window with
Schur-complement marginalisation; Laplace covariances.
"""

from __future__ import annotations
