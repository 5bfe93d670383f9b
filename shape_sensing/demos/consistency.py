"""Covariance consistency of the hinge-arc estimator by Monte Carlo on the vine simulator (NEES of the tip).

NEES (normalised estimation error squared) of the tip position, ``e^T P^-1 e``, averages 3 for a consistent 3-DoF
estimate. Samples within one run share their sensors' fixed errors (mountings, drift axes, the first IMU's heading
reference), so they are not independent: each run gives one mean, and the mean over ``M`` independent runs is
compared with the band of the mean of ``M`` chi-square(3) draws (:func:`nees_band`), as a filter's consistency
test over Monte Carlo runs does.

Used by ``benchmarks/bench_consistency.py`` (the measurement) and ``test/test_hinge_arc_consistency.py`` (a small
Monte Carlo as a guard against regressions).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import chi2

from shape_sensing.demos.vine_imu import _placement_rpy
from shape_sensing.estimators.hinge_arc import SCHEMA
from shape_sensing.estimators.straight_reference import capture_reference
from shape_sensing.pipelines.vine_imu import VineImuTracker
from shape_sensing.sim.vine import VineSimConfig, VineSimulator

__all__ = ["HingeArcRun", "hinge_arc_run", "nees_band"]


def nees_band(runs: int, dof: int = 3, level: float = 0.95) -> tuple[float, float]:
    """Two-sided ``level`` band of the mean of ``runs`` independent chi-square(``dof``) draws."""
    lo, hi = chi2.ppf([(1 - level) / 2, (1 + level) / 2], dof * runs) / runs
    return float(lo), float(hi)


@dataclass(frozen=True)
class HingeArcRun:
    """One simulated run's tip NEES and errors."""

    nees: float  # mean over the run's estimates
    error_mean: float  # m
    error_max: float  # m
    sigma_mean: float  # m, mean of sqrt(trace P)
    estimates: int


def hinge_arc_run(
    seed: int,
    scenario: str = "passive",
    duration: float = 30.0,
    placement: bool = True,
    drop: tuple[int, ...] = (),
    drop_after: float = 0.3,
    params: dict[str, object] | None = None,
    rate: float = 10.0,
) -> HingeArcRun:
    """Run the vine simulator through the hinge-arc tracker and score every estimate's tip against the truth.

    Args:
        placement: give the estimator the base's placement in the world (the demo and a surveyed robot do); else
            the first IMU's mounting is assumed (``first_mount_rpy``).
        drop: sensor indices that fall silent after ``drop_after`` of the run (bridged once stale).
        params: estimator parameters over the defaults.
    """
    sim = VineSimulator(VineSimConfig(scenario=scenario, duration=duration, rate=rate, seed=seed))
    p = SCHEMA.defaults()
    # the sensors' noise as characterised (a static recording gives it): the simulator's stated 0.1 deg, where the
    # estimator's default, 0.5 deg for messages that carry none, is a margin for an uncharacterised BNO055
    p["orientation_noise_deg"] = sim.config.orientation_noise_deg
    if placement:
        p["base_orientation_world"] = _placement_rpy()
    p.update(params or {})
    tracker = VineImuTracker(p)
    if scenario == "growth":  # captured before the run, fully everted and straight (as the demo and the robot)
        quats = np.array([s.orientation for s in sim.straight_samples(0.0)])
        tracker.set_reference(
            capture_reference(quats, np.ones(len(quats), dtype=bool), 0, tracker.frame_ids,
                              first_mount=tracker.config.first_mount, placement=tracker.config.base_placement)
        )  # fmt: skip
    nees, errs, sig = [], [], []
    truths = {}
    for k in range(round(duration * rate) + 1):
        t = k / rate
        stamp = round(t * 1e9)
        truths[stamp] = sim.truth(t)
        out = tracker.push_length(stamp, sim.length(t))
        for i, s in enumerate(sim.imu_samples(t)):
            if i in drop and t > drop_after * duration:
                continue
            out += tracker.push_imu(i, s)
        for est in out:
            if est.position_covariance is None or est.stamp_ns not in truths:
                continue  # estimates are stamped with the data they used: the step's stamp
            e = est.tip_pose[:3, 3] - truths[est.stamp_ns].tip_pose[:3, 3]
            P = est.position_covariance[-1]
            nees.append(float(e @ np.linalg.solve(P, e)))
            errs.append(float(np.linalg.norm(e)))
            sig.append(float(np.sqrt(np.trace(P))))
    if not nees:
        raise RuntimeError(f"hinge-arc run (seed {seed}, {scenario}) made no estimate to score")
    return HingeArcRun(float(np.mean(nees)), float(np.mean(errs)), float(np.max(errs)), float(np.mean(sig)),
                       len(nees))  # fmt: skip
