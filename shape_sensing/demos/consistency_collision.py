"""Monte Carlo of the collision-pivot filters' covariance on the vine-collision simulator, every fault on.

Each run is the three-obstacle course with an independent seed and :meth:`SensorFaults.all_faults` (the paper's
faults, bursts of contact loss, an unconfigured heading drift of 2 deg/m). Per run and filter:

* pivot NEES: ``e^2 / var`` of the pivot length (1 DoF) over the samples where the simulator and the filter are
  both in contact;
* tip NEES: ``e^T P^-1 e`` of the tip position (2 DoF, base frame) over every sample past 5 cm of growth, with
  the tip covariance built from a chosen subset of :data:`TIP_COVARIANCE_TERMS` (cumulative subsets give what
  each term contributes).

A run's samples share its fixed errors (drift, pressure drop), so only the runs are independent: the band is
that of the mean of ``M`` chi-square draws for ``M`` runs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from shape_sensing.demos.consistency import nees_band
from shape_sensing.drivers.contact_cap import ContactCap
from shape_sensing.estimators.collision_pivot import (
    TIP_COVARIANCE_TERMS,
    CollisionPivotConfig,
    CollisionPivotEstimator,
    CollisionSample,
)
from shape_sensing.sim.vine_collision import SensorFaults, VineCollisionSim, three_course

__all__ = ["CUMULATIVE_TERMS", "collision_nees", "nees_band"]

START_NS = 1_000_000_000
#: cumulative subsets of the tip covariance's terms, in the order they were added
CUMULATIVE_TERMS = tuple(TIP_COVARIANCE_TERMS[: i + 1] for i in range(len(TIP_COVARIANCE_TERMS)))


def collision_nees(
    runs: int,
    seed0: int = 0,
    filters: tuple[str, ...] = ("improved", "paper"),
    burst_fraction: float = 0.15,
    drift_deg_per_m: float = 2.0,
) -> dict[str, dict[str, Any]]:
    """Per filter: ``{"pivot": [per-run mean], "tip": {term subset label: [per-run mean]}}``.

    The estimator is told the nominal pressure drop and the sensor noises, not the drift (as the robot's
    calibration would give it); the cap holds contact for 0.15 s.
    """
    faults = SensorFaults.all_faults(burst_fraction, drift_deg_per_m)
    params: dict[str, Any] = {"pressure_drop_per_metre": faults.pressure_drop_per_metre, "heading_drift_per_metre": 0.0,
              "force_noise": faults.force_noise, "pressure_noise": faults.pressure_noise,
              "force_slip": faults.force_slip}  # fmt: skip
    res: dict[str, dict[str, Any]] = {f: {"pivot": [], "tip": {"+".join(t): [] for t in CUMULATIVE_TERMS}}
                                      for f in filters}  # fmt: skip
    for seed in range(seed0, seed0 + runs):
        sim = VineCollisionSim(three_course(), faults, seed=seed)
        cap = ContactCap(sim.n_switches, sim.sensing_arc, 0.15)
        ests = {f: CollisionPivotEstimator(CollisionPivotConfig(**params, filter=f)) for f in filters}
        piv: dict[str, list[float]] = {f: [] for f in filters}
        tip: dict[str, dict[str, list[float]]] = {f: {"+".join(t): [] for t in CUMULATIVE_TERMS} for f in filters}
        for s in sim.run():
            ns = START_NS + round(s.t * 1e9)
            r = cap.update(ns, s.cap_mask)
            sample = CollisionSample(ns, s.length_measured, s.pressure_measured, s.force_measured, r.contact_angle,
                                     r.in_contact, r.in_contact and not r.held, s.heading_measured)  # fmt: skip
            for f, est in ests.items():
                out = est.update(sample)
                if s.in_contact and out.in_contact and out.covariance[0] > 0:
                    e = out.pivot_length - s.pivot_length
                    piv[f].append(e * e / out.covariance[0])
                if s.length < 0.05:
                    continue
                e2 = np.asarray(out.tip) - s.tip
                for sub in CUMULATIVE_TERMS:
                    c = [sum(out.tip_covariance_terms.get(k, (0.0, 0.0, 0.0))[i] for k in sub) for i in range(3)]
                    det = c[0] * c[2] - c[1] * c[1]
                    ex, ey = float(e2[0]), float(e2[1])
                    ok = det > 1e-9 * (c[0] + c[2]) ** 2  # a rank-1 covariance (one term alone): infinite NEES
                    q = (c[2] * ex * ex - 2 * c[1] * ex * ey + c[0] * ey * ey) / det if ok else float("inf")
                    tip[f]["+".join(sub)].append(q)
        for f in filters:
            res[f]["pivot"].append(float(np.mean(piv[f])) if piv[f] else float("nan"))
            for k, v in tip[f].items():
                res[f]["tip"][k].append(float(np.mean(v)))
    return res
