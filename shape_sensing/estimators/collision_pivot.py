"""Vine robot localisation from collisions (seed 004): buckling model, pivot Kalman filter, online PathRecon.

A vine robot grows from its tip; touching an obstacle at a contact angle below the transverse
buckling limit (Eq. 1) makes it pivot about the last point where its body is held (the pivot). The
obstacle's force and the internal pressure then give the free length beyond the pivot:

* Eq. 1: ``theta_max = pi/2 - atan((R + mu L_free) / (L_free - mu R))``; transverse buckling needs
  ``theta_contact <= theta_max`` (``theta_contact``: heading to obstacle surface, 90 deg = head-on).
* Eq. 2-3: ``F_tr L_free = pi P R^3``, so ``L_free = pi P R^3 / F_tr``.
* Eq. 7: ``F_tr = F_N sin(pi/2 - theta_contact)``.
* ``L_pivot = L_total - L_free``, smoothed by a Kalman filter on ``x = [L_pivot, L_pivot']``
  (Eq. 8-9): ``A = [[1, dt], [0, eps]]``, ``C = I``, ``R_w`` the variances of the last 10 raw
  values of ``L_pivot`` and its finite difference, ``R_v = diag(k1, k2)``; ``eps, k1, k2 = 0.1, 0.1, 1``.
* Algorithm 1 (PathRecon), here online: in free growth the tip extends along the heading from the
  last pivot; in contact it is the pivot plus ``L_free`` along the heading; when contact ends, the
  tip becomes the new pivot.

Two filters share this module and the same inputs:

* ``"paper"``: as written. Moving averages of 5 over every sample of ``F_N`` and ``P`` (zeros of
  a lost contact included); Algorithm 1's ``isContact`` is "a switch is pressed" (the paper holds
  only the contact angle through a loss of contact), and every such sample is a measurement (a
  force reading near zero gives ``L_free`` at least ``L_total`` after clipping to ``[0, L_total]``,
  i.e. ``L_pivot = 0``: the paper's bias toward zero). The filter runs on ``[L_pivot, L_pivot']``
  over each collision (the held contact), starting from the last known pivot (the ramp of the
  paper's Fig. 6d). The paper's figures are in centimetres, so the filter runs in ``kf_unit``
  (default 0.01 m) for ``R_v`` to mean what it did.
* ``"improved"``: removes the two biases the paper names. The tip pressure is modelled as the
  sensed pressure less a drop along the body (``pressure_drop_per_metre``, a fraction per metre of
  grown length); contact dropouts (no switch pressed, force below ``force_min``), stale force and
  samples violating Eq. 1 are missing measurements, not zeros; each new contact is a discrete pivot
  event that restarts a constant-pivot filter from the last fixed pivot, weighting each sample by
  its propagated sensor noise and gating outliers; Algorithm 1 uses the held contact flag (and
  bridges a loss of contact over less than ``contact_gap`` of growth), so a brief loss of contact
  fixes no pivot, and a pivot is fixed where contact was last live, not where the hold ran out.

Both correct the heading for a calibrated drift per metre grown (the paper subtracted the drift
measured in separate calibration runs). Axes: the robot's base frame has x along the initial
growth direction and z up; the heading ``theta`` is the yaw about z, so the direction of growth is
``[cos theta, sin theta]``. (The paper writes ``[sin theta, cos theta]`` with y forward; the same
equations with the axes renamed.)
"""

from __future__ import annotations

import copy
import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from shape_sensing.config import LIVE_PARAMS, ConfigError, Param, Schema
from shape_sensing.estimators.heading_drift import HeadingDriftEstimator

__all__ = [
    "EVENT_CONTACT_END",
    "EVENT_CONTACT_START",
    "EVENT_PIVOT_CANDIDATE",
    "EVENT_PIVOT_FIXED",
    "EVENT_PIVOT_WITHDRAWN",
    "FILTERS",
    "IMPROVEMENTS",
    "SCHEMA",
    "CollisionPivotConfig",
    "CollisionPivotEstimator",
    "CollisionSample",
    "MovingAverage",
    "PaperPivotFilter",
    "PathRecon",
    "PivotEvent",
    "PivotOutput",
    "buckling_max_contact_angle",
    "free_length",
    "transverse_force",
]

FILTERS = ("paper", "improved")
EVENT_CONTACT_START, EVENT_CONTACT_END, EVENT_PIVOT_FIXED = 0, 1, 2
EVENT_PIVOT_CANDIDATE, EVENT_PIVOT_WITHDRAWN = 3, 4


def buckling_max_contact_angle(l_free: float, radius: float, mu: float) -> float:
    """Eq. 1: the largest contact angle (rad) that buckles the body transversely.

    For ``L_free <= mu R`` the denominator is not positive and no angle buckles transversely: 0.
    """
    den = l_free - mu * radius
    if den <= 0:
        return 0.0
    return math.pi / 2 - math.atan((radius + mu * l_free) / den)


def free_length(pressure: float, radius: float, f_tr: float) -> float:
    """Eq. 3: ``L_free = pi P R^3 / F_tr`` (inf for ``F_tr <= 0``)."""
    if f_tr <= 0:
        return math.inf
    return math.pi * pressure * radius**3 / f_tr


def transverse_force(normal_force: float, contact_angle: float) -> float:
    """Eq. 7: ``F_tr = F_N sin(pi/2 - theta_contact)``."""
    return normal_force * math.sin(math.pi / 2 - contact_angle)


class MovingAverage:
    """Mean of the last ``n`` values (running sum, O(1) per value)."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ConfigError(f"parameter 'moving_average' = {n!r}: expected >= 1")
        self.n = n
        self.values: deque[float] = deque()
        self.total = 0.0

    def add(self, value: float) -> float:
        self.values.append(value)
        self.total += value
        if len(self.values) > self.n:
            self.total -= self.values.popleft()
        return self.total / len(self.values)

    def clear(self) -> None:
        self.values.clear()
        self.total = 0.0

    def __len__(self) -> int:
        return len(self.values)


class PaperPivotFilter:
    """The Kalman filter of Eq. 8-9 on ``[L_pivot, L_pivot']``, in the paper's predictor form.

    ``x_{i+1} = A x_i + L_i (z_i - C x_i)``, ``L_i = A P_i C^T (R_w + C P_i C^T)^-1``,
    ``P_{i+1} = (A - L_i C) P_i (A - L_i C)^T + R_v + L_i R_w L_i^T`` with ``C = I``; ``z_i`` is the
    raw ``L_pivot`` and its finite difference. Lengths are in ``unit`` metres inside the filter.
    Written with scalars (2x2 by hand): one update costs a few microseconds.
    """

    def __init__(
        self,
        eps: float = 0.1,
        k1: float = 0.1,
        k2: float = 1.0,
        window: int = 10,
        unit: float = 0.01,
        min_variance: float = 1e-6,
    ) -> None:
        self.eps, self.k1, self.k2, self.unit = eps, k1, k2, unit
        self.window = window
        self.min_variance = min_variance
        self.x0 = self.x1 = 0.0
        self.p00, self.p01, self.p11 = k1, 0.0, k2
        self.z_hist: deque[float] = deque(maxlen=window)
        self.d_hist: deque[float] = deque(maxlen=window)
        self._z_prev: float | None = None

    def reset(self, l_pivot: float = 0.0) -> None:
        """Start again at ``[l_pivot, 0]`` (m) with ``P = R_v`` and an empty variance window."""
        self.x0, self.x1 = l_pivot / self.unit, 0.0
        self.p00, self.p01, self.p11 = self.k1, 0.0, self.k2
        self.z_hist.clear()
        self.d_hist.clear()
        self._z_prev = None

    @staticmethod
    def _var(values: deque[float]) -> float:
        n = len(values)
        if n < 2:
            return 0.0
        m = sum(values) / n
        return sum((v - m) * (v - m) for v in values) / (n - 1)

    def update(self, l_pivot_raw: float, dt: float) -> tuple[float, float, tuple[float, float, float, float]]:
        """One raw ``L_pivot`` (m) after ``dt`` s: returns the estimate ``(L_pivot, rate, covariance)`` in SI."""
        z0 = l_pivot_raw / self.unit
        z1 = 0.0 if self._z_prev is None or dt <= 0 else (z0 - self._z_prev) / dt
        self._z_prev = z0
        self.z_hist.append(z0)
        self.d_hist.append(z1)
        rw0 = max(self._var(self.z_hist), self.min_variance)
        rw1 = max(self._var(self.d_hist), self.min_variance)
        a01, a11 = dt, self.eps
        p00, p01, p11 = self.p00, self.p01, self.p11
        # S = R_w + P; L = A P S^-1
        s00, s01, s11 = p00 + rw0, p01, p11 + rw1
        det = s00 * s11 - s01 * s01
        i00, i01, i11 = s11 / det, -s01 / det, s00 / det
        ap00, ap01 = p00 + a01 * p01, p01 + a01 * p11  # A P
        ap10, ap11 = a11 * p01, a11 * p11
        l00, l01 = ap00 * i00 + ap01 * i01, ap00 * i01 + ap01 * i11
        l10, l11 = ap10 * i00 + ap11 * i01, ap10 * i01 + ap11 * i11
        r0, r1 = z0 - self.x0, z1 - self.x1
        x0 = self.x0 + a01 * self.x1 + l00 * r0 + l01 * r1
        x1 = a11 * self.x1 + l10 * r0 + l11 * r1
        # M = A - L, P' = M P M^T + R_v + L R_w L^T
        m00, m01, m10, m11 = 1.0 - l00, a01 - l01, -l10, a11 - l11
        mp00, mp01 = m00 * p00 + m01 * p01, m00 * p01 + m01 * p11
        mp10, mp11 = m10 * p00 + m11 * p01, m10 * p01 + m11 * p11
        n00 = mp00 * m00 + mp01 * m01 + self.k1 + l00 * l00 * rw0 + l01 * l01 * rw1
        n01 = mp00 * m10 + mp01 * m11 + l00 * l10 * rw0 + l01 * l11 * rw1
        n11 = mp10 * m10 + mp11 * m11 + self.k2 + l10 * l10 * rw0 + l11 * l11 * rw1
        self.x0, self.x1, self.p00, self.p01, self.p11 = x0, x1, n00, n01, n11
        u = self.unit
        return x0 * u, x1 * u, (n00 * u * u, n01 * u * u, n01 * u * u, n11 * u * u)


Cov2 = tuple[float, float, float]  # a symmetric 2x2 covariance: (xx, xy, yy)

# The sources of error the tip covariance (PivotOutput.tip_covariance) is made of, each kept apart
# (PivotOutput.tip_covariance_terms) so that what each contributes can be measured:
# length: the grown length's noise (length_noise) along the heading;
# pivot: the pivot filter's variance of the pivot length;
# heading_noise: the heading sensor's noise (heading_noise) on the free length and on the segment behind the pivot;
# drift: the heading drift estimate's variance times the grown length squared;
# hypothesis: while a candidate pivot is open, the spread between its two tips (grown free from the candidate
#     or still turning about the held pivot), as a variance along the line between them.
TIP_COVARIANCE_TERMS = ("length", "pivot", "heading_noise", "drift", "hypothesis")


@dataclass
class PathRecon:
    """Algorithm 1 (PathRecon), online: one sample in, the tip out.

    ``pivot_at_last_live``: fix a pivot at the tip of the last sample whose contact was live (a
    switch pressed) instead of the last held one (the paper's).
    """

    pivot_at_last_live: bool = False
    p_prev: tuple[float, float] = (0.0, 0.0)
    l_prev: float = 0.0
    v_prev: tuple[float, float] | None = None
    pivots: list[tuple[float, float, float]] = field(default_factory=lambda: [(0.0, 0.0, 0.0)])
    _was_contact: bool = False
    _last_tip: tuple[float, float] = (0.0, 0.0)
    _last_total: float = 0.0
    _live_tip: tuple[float, float] | None = None
    _live_total: float = 0.0
    # Tip covariance, linearised and split by source (see TIP_COVARIANCE_TERMS): each term's covariance of the
    # last fixed pivot, each term's heading variance of the segment behind the pivot (v_prev), and each term's
    # tip covariance of the last step (a term absent from the step's variances contributes nothing)
    base_cov: dict[str, Cov2] = field(default_factory=dict)
    v_var: dict[str, float] = field(default_factory=dict)
    tip_cov: dict[str, Cov2] = field(default_factory=dict)
    _last_cov: dict[str, Cov2] = field(default_factory=dict)
    _live_cov: dict[str, Cov2] = field(default_factory=dict)

    def step(
        self, l_total: float, l_free: float, heading: float, is_contact: bool, live: bool = True,
        variances: dict[str, tuple[float, float]] | None = None,
    ) -> tuple[tuple[float, float], bool]:  # fmt: skip
        """The tip for this sample; second item: a pivot was fixed before it (contact ended).

        ``variances``: per source of error, ``(variance of the pivot length (m^2), variance of this
        sample's heading (rad^2))``; when given, :attr:`tip_cov` holds each source's tip covariance (first
        order: the fixed pivot's covariance carried on, the heading error swinging the free length and the
        segment behind the pivot, the pivot-length error moving the tip along the difference of the two
        directions).
        """
        c, s = math.cos(heading), math.sin(heading)
        if self.v_prev is None:
            self.v_prev = (c, s)
        fixed = False
        if self._was_contact and not is_contact:
            if self.pivot_at_last_live and self._live_tip is not None:
                self.p_prev, self.l_prev = self._live_tip, self._live_total
                self.base_cov = dict(self._live_cov)
            else:
                self.p_prev, self.l_prev = self._last_tip, self._last_total
                self.base_cov = dict(self._last_cov)
            self.pivots.append((self.p_prev[0], self.p_prev[1], self.l_prev))
            fixed = True
        px, py = self.p_prev
        if is_contact:
            d = l_total - l_free - self.l_prev
            vx, vy = self.v_prev
            tip = (px + d * vx + l_free * c, py + d * vy + l_free * s)
            if variances is not None:
                self.tip_cov = {}
                for k, (var_l, var_h) in variances.items():
                    b = self.base_cov.get(k, (0.0, 0.0, 0.0))
                    gx, gy = vx - c, vy - s  # d tip / d L_pivot
                    vv = self.v_var.get(k, 0.0) * d * d
                    hh = var_h * l_free * l_free
                    self.tip_cov[k] = (b[0] + var_l * gx * gx + vv * vy * vy + hh * s * s,
                                       b[1] + var_l * gx * gy - vv * vx * vy - hh * c * s,
                                       b[2] + var_l * gy * gy + vv * vx * vx + hh * c * c)  # fmt: skip
            if live:
                self._live_tip, self._live_total = tip, l_total
                self._live_cov = dict(self.tip_cov)
        else:
            d = l_total - self.l_prev
            tip = (px + d * c, py + d * s)
            self.v_prev = (c, s)
            self._live_tip = None
            if variances is not None:
                self.tip_cov = {}
                for k, (_var_l, var_h) in variances.items():
                    b = self.base_cov.get(k, (0.0, 0.0, 0.0))
                    hh = var_h * d * d
                    self.tip_cov[k] = (b[0] + hh * s * s, b[1] - hh * c * s, b[2] + hh * c * c)
                    self.v_var[k] = var_h
        self._was_contact = is_contact
        self._last_tip, self._last_total = tip, l_total
        self._last_cov = self.tip_cov
        return tip, fixed

    def current_pivot(self, l_pivot: float) -> tuple[float, float]:
        """Where the current pivot is (in contact: ``l_pivot`` along the body from the last fixed pivot)."""
        vx, vy = self.v_prev if self.v_prev is not None else (1.0, 0.0)
        d = l_pivot - self.l_prev
        return self.p_prev[0] + d * vx, self.p_prev[1] + d * vy


@dataclass(frozen=True)
class CollisionSample:
    """The inputs of one estimator step, already synchronised.

    Attributes:
        stamp_ns: time of the step.
        total_length: grown length from the base encoder (m).
        pressure: internal pressure sensed at the base (Pa); NaN when unknown.
        normal_force: obstacle normal force (N); NaN when the force sensor is stale.
        cap_angle: mean pressed-switch angle on the cap (rad, ``phi``); NaN before any contact.
        in_contact: the cap's contact flag (including the hold).
        live_contact: a switch is pressed now (not held).
        heading: tip heading (rad, yaw about z).
    """

    stamp_ns: int
    total_length: float
    pressure: float
    normal_force: float
    cap_angle: float
    in_contact: bool
    live_contact: bool
    heading: float


@dataclass(frozen=True)
class PivotEvent:
    """A contact or pivot event (kinds as in shape_sensing/ContactEvent)."""

    stamp_ns: int
    kind: int
    pivot_index: int
    position: tuple[float, float]
    arc_length: float
    contact_angle: float
    normal_force: float


@dataclass
class PivotOutput:
    """One estimator step's result."""

    stamp_ns: int
    tip: tuple[float, float]
    heading: float
    total_length: float
    free_length_measured: float  # m, Eq. 3 on this sample (NaN when not measured)
    pivot_length: float
    pivot_length_rate: float
    covariance: tuple[float, float, float, float]
    pivot: tuple[float, float]
    pivot_index: int
    in_contact: bool
    held: bool
    buckling_condition_met: bool
    measurement_used: bool
    events: list[PivotEvent] = field(default_factory=list)
    heading_drift: float = 0.0  # rad/m, the drift per metre in use (estimated online or configured)
    heading_drift_variance: float = 0.0  # (rad/m)^2
    candidate_open: bool = False  # contact lost beyond contact_gap, the pivot not decided yet
    # the tip's position covariance in the base frame, (xx, xy, yy) m^2: the sum of tip_covariance_terms
    tip_covariance: tuple[float, float, float] = (0.0, 0.0, 0.0)
    tip_covariance_terms: dict[str, tuple[float, float, float]] = field(default_factory=dict)


# The improvements over the paper's filter, each switchable for the ablation:
# model_pressure_drop: tip pressure = sensed (1 - pressure_drop_per_metre L_total);
# dropouts_missing: a lost contact (no switch, or force below force_min) is a missing measurement, Algorithm 1
#     uses the held contact flag (bridging losses over less than contact_gap of growth) and fixes a pivot where
#     contact was last live;
# pivot_events: each collision restarts a constant-pivot filter from the last fixed pivot (a discrete event),
#     weighting samples by their propagated sensor noise, gating outliers and samples violating Eq. 1;
# pivot_hypotheses (with dropouts_missing): a contact lost for more than contact_gap of growth opens a candidate
#     pivot instead of fixing one; renewed contact with the same wall (the obstacle's normal in the base frame,
#     heading + cap angle, within wall_angle_tol, and a force that puts the pivot nearer the held one than the
#     candidate) merges it back, another wall or confirm_length of free growth fixes it; and the pivot of a
#     collision may lie behind the last fixed one (no clamp), so a pivot fixed by mistake is withdrawn;
# drift_online: the heading drift per metre is estimated from the straight stretches of free growth, the
#     configured heading_drift_per_metre its prior (heading_drift_prior_sigma).
IMPROVEMENTS = ("model_pressure_drop", "dropouts_missing", "pivot_events", "pivot_hypotheses", "drift_online")


@dataclass(frozen=True)
class CollisionPivotConfig:
    """Validated estimator settings (see :data:`SCHEMA`).

    ``filter`` sets all of :data:`IMPROVEMENTS` off (``"paper"``) or on (``"improved"``); ``improvements``
    overrides that with an explicit subset (the ablation).
    """

    filter: str = "improved"
    radius: float = 0.035
    mu: float = 0.095
    eps: float = 0.1
    k1: float = 0.1
    k2: float = 1.0
    kf_unit: float = 0.01
    moving_average: int = 5
    variance_window: int = 10
    pressure_drop_per_metre: float = 0.0
    heading_drift_per_metre: float = 0.0
    force_min: float = 0.1
    force_noise: float = 0.05
    force_slip: float = 0.12
    pressure_noise: float = 100.0
    contact_angle_noise: float = 0.05
    pivot_process_noise: float = 1e-4
    gate_sigma: float = 4.0
    contact_gap: float = 0.02
    confirm_length: float = 0.1
    wall_angle_tol: float = 0.26
    withdraw_margin: float = 0.05
    heading_noise: float = 0.0087
    heading_drift_prior_sigma: float = 0.052
    length_noise: float = 1e-4  # m, 1 sigma of the grown length (encoder resolution): the tip's along-track variance
    improvements: tuple[str, ...] | None = None

    @classmethod
    def from_params(cls, p: dict[str, Any]) -> CollisionPivotConfig:
        return cls(**{k: p[k] for k in cls.__dataclass_fields__ if k in p})

    def enabled(self) -> frozenset[str]:
        """The improvements in use."""
        if self.improvements is not None:
            unknown = sorted(set(self.improvements) - set(IMPROVEMENTS))
            if unknown:
                raise ConfigError(f"improvements {unknown}: expected names from {list(IMPROVEMENTS)}")
            return frozenset(self.improvements)
        return frozenset(IMPROVEMENTS) if self.filter == "improved" else frozenset()


class CollisionPivotEstimator:
    """The collision-pivot estimator, one synchronised sample at a time (no I/O, pure-Python scalars)."""

    def __init__(self, config: CollisionPivotConfig) -> None:
        if config.filter not in FILTERS:
            raise ConfigError(f"parameter 'filter' = {config.filter!r}: expected one of {list(FILTERS)}")
        self.config = config
        on = config.enabled()
        self.model_pressure_drop = "model_pressure_drop" in on
        self.dropouts_missing = "dropouts_missing" in on
        self.pivot_events = "pivot_events" in on
        self.hypotheses = "pivot_hypotheses" in on and self.dropouts_missing
        self.drift = HeadingDriftEstimator(
            config.heading_drift_per_metre, config.heading_drift_prior_sigma if "drift_online" in on else 0.0,
            config.heading_noise)
        # the open candidate pivot: (world angle of the wall's normal at the last live contact, last live length)
        # and Algorithm 1's state before it was fixed (restored when the candidate merges back)
        self._candidate: tuple[float, float] | None = None
        self._snapshot: PathRecon | None = None
        self._headings: deque[float] = deque(maxlen=5)  # the last few headings (drift-corrected)
        self._live_heading = 0.0  # their mean at the last live contact
        self._held_pivot = 0.0  # the pivot length at the last contact sample
        self._wall_normal = math.nan  # heading + cap angle at the last live contact (rad)
        self._withdrawn = False  # the last fixed pivot was withdrawn during this collision
        self._floor = 0.0  # the lowest pivot length of this collision (the pivot before the last fixed one)
        self.ma_force = MovingAverage(config.moving_average)
        self.ma_pressure = MovingAverage(config.moving_average)
        self.kf = PaperPivotFilter(config.eps, config.k1, config.k2, config.variance_window, config.kf_unit)
        self.recon = PathRecon(pivot_at_last_live=self.dropouts_missing)
        self.pivot_index = 0
        self._last_stamp: int | None = None
        self._was_contact = False
        self._was_episode = False
        self._episode_l_prev = 0.0  # the pivot fixed before the current collision
        self._last_live_total = -math.inf
        self._mean = 0.0  # constant-pivot filter (pivot_events)
        self._var = 0.0
        self._accepted = 0
        self._slope = 0.0  # d L_free / d theta_contact / L_free at the last accepted sample: tan(theta_contact)
        self.counts = {"samples": 0, "contact_samples": 0, "held_samples": 0, "measurements": 0,
                       "dropouts_skipped": 0, "buckling_violations": 0, "gated": 0, "pivots": 0, "candidates": 0,
                       "merged": 0, "withdrawn": 0}  # fmt: skip

    def _start_episode(self, s: CollisionSample) -> None:
        """A new collision: the pivot may have moved (the paper filters each collision's series separately)."""
        l_prev = self.recon.l_prev
        self._episode_l_prev = l_prev
        self.kf.reset(l_prev)
        self._mean = l_prev
        self._var = max(s.total_length - l_prev, 0.05) ** 2
        self._accepted = 0
        self._withdrawn = False
        pivots = self.recon.pivots
        self._floor = pivots[-2][2] if len(pivots) >= 2 else 0.0
        if self.dropouts_missing:
            self.ma_force.clear()
            self.ma_pressure.clear()

    def _event(self, stamp_ns: int, kind: int, index: int, position: tuple[float, float], arc: float,
               angle: float = math.nan, force: float = math.nan) -> PivotEvent:  # fmt: skip
        return PivotEvent(stamp_ns, kind, index, position, arc, angle, force)

    def _same_wall(self, s: CollisionSample, heading: float, l_candidate: float) -> bool:
        """Renewed contact after a gap: the same wall as before the gap?

        The wall's normal in the base frame (heading + cap angle) within ``wall_angle_tol`` of the one at
        the last live contact, and, when the force reads, the pivot it gives nearer the held pivot than the
        candidate's (the force continuous with the held collision).
        """
        cfg = self.config
        if not (math.isfinite(s.cap_angle) and math.isfinite(self._wall_normal)):
            return False
        d = (heading + s.cap_angle - self._wall_normal + math.pi) % (2 * math.pi) - math.pi
        if abs(d) > cfg.wall_angle_tol:
            return False
        pressure = s.pressure
        if self.model_pressure_drop and math.isfinite(pressure):
            pressure *= max(1.0 - cfg.pressure_drop_per_metre * s.total_length, 0.0)
        if not (math.isfinite(s.normal_force) and s.normal_force >= cfg.force_min and pressure > 0):
            return True
        l_free, _theta, met = self._measure(s, s.normal_force, pressure)
        if not (met and math.isfinite(l_free)):
            return True
        z = s.total_length - min(max(l_free, 0.0), s.total_length)
        return abs(z - self._mean) <= abs(z - l_candidate)

    def update(self, s: CollisionSample) -> PivotOutput:
        """One step."""
        cfg, c = self.config, self.counts
        c["samples"] += 1
        dt = 0.0 if self._last_stamp is None else (s.stamp_ns - self._last_stamp) * 1e-9
        self._last_stamp = s.stamp_ns
        drift, drift_var = self.drift.estimate
        heading = s.heading - drift * s.total_length
        events: list[PivotEvent] = []
        self._headings.append(heading)
        turning, h_smooth = False, heading
        if self.hypotheses:
            h_smooth = _mean_angle(self._headings)
            # since the last live contact the heading turned more than its noise allows: the body still pivots
            turned = (h_smooth - self._live_heading + math.pi) % (2 * math.pi) - math.pi
            turning = abs(turned) > 3.0 * cfg.heading_noise / math.sqrt(len(self._headings)) + 1e-3
        # the collision ("episode"): the cap's held flag; the improved filter also bridges a loss of contact
        # longer than the hold while the robot grew less than contact_gap (the same obstacle, touched again);
        # with pivot hypotheses a longer loss opens a candidate pivot that renewed contact decides
        episode = s.in_contact
        merged = opened = False
        if self.dropouts_missing:
            gap = s.total_length - self._last_live_total
            episode = episode or (self._was_episode and gap <= cfg.contact_gap)
            if self._candidate is not None:
                if s.live_contact and self._same_wall(s, heading, self._candidate[1]):
                    merged = True
                elif s.live_contact or (gap > cfg.confirm_length and not turning):
                    px, py, pl = self.recon.pivots[-1]
                    events.append(self._event(s.stamp_ns, EVENT_PIVOT_FIXED, self.pivot_index, (px, py), pl))
                    self._candidate = None
            elif self.hypotheses and self._was_episode and not episode:
                opened = True  # contact lost for longer than contact_gap: the pivot becomes a candidate
            if s.live_contact:
                self._last_live_total = s.total_length
                self._live_heading = h_smooth
                if math.isfinite(s.cap_angle):
                    self._wall_normal = heading + s.cap_angle
        if merged:
            # the same wall touched again: the candidate is withdrawn and the held collision goes on
            assert self._candidate is not None and self._snapshot is not None
            px, py, pl = self.recon.pivots[-1]
            events.append(self._event(s.stamp_ns, EVENT_PIVOT_WITHDRAWN, self.pivot_index, (px, py), pl,
                                      s.cap_angle, s.normal_force))  # fmt: skip
            self.recon = self._snapshot
            self.pivot_index -= 1
            c["merged"] += 1
            c["pivots"] -= 1
            self._candidate = self._snapshot = None
            self._was_episode = self._was_contact = True
        elif opened:
            self._snapshot = copy.deepcopy(self.recon)
            self._candidate = (self._wall_normal, self._last_live_total)
            c["candidates"] += 1
        held = episode and not s.live_contact
        if episode and not self._was_episode:
            self._start_episode(s)
        self._was_episode = episode
        if episode:
            c["contact_samples"] += 1
            c["held_samples"] += held
        # Algorithm 1's isContact: the paper's is "a switch is pressed" (it holds only the contact angle)
        contact = episode if self.dropouts_missing else s.live_contact
        force = s.normal_force if math.isfinite(s.normal_force) else (math.nan if self.dropouts_missing else 0.0)
        pressure = s.pressure
        if self.model_pressure_drop and math.isfinite(pressure):
            pressure *= max(1.0 - cfg.pressure_drop_per_metre * s.total_length, 0.0)
        if not math.isfinite(pressure):
            pressure = math.nan if self.dropouts_missing else 0.0
        measurable = contact
        if self.dropouts_missing and contact:
            measurable = s.live_contact and force >= cfg.force_min and math.isfinite(pressure)
            if not measurable:
                c["dropouts_skipped"] += 1
        if self.dropouts_missing:  # averages over valid readings only
            f_avg = self.ma_force.add(force) if measurable else (self.ma_force.total / max(len(self.ma_force), 1))
            p_avg = (
                self.ma_pressure.add(pressure) if measurable else self.ma_pressure.total / max(len(self.ma_pressure), 1)
            )
            n_avg = len(self.ma_force)
        else:
            f_avg = self.ma_force.add(force)
            p_avg = self.ma_pressure.add(pressure)
            n_avg = len(self.ma_force)
        l_free_meas, met, used = math.nan, True, False
        if measurable:
            l_free_meas, theta_c, met = self._measure(s, f_avg, p_avg)
            if not met:
                c["buckling_violations"] += 1
            z = s.total_length - min(max(l_free_meas, 0.0), s.total_length)
            if self.pivot_events:
                # unclipped: clipping L_free to [0, L_total] biases a pivot at the base (or behind the last fixed
                # one) forward; the estimate is clamped instead
                z_raw = s.total_length - l_free_meas if math.isfinite(l_free_meas) else z
                used = self._constant_update(z_raw, l_free_meas, theta_c, f_avg, p_avg, n_avg, met, dt)
            else:
                self.kf.update(z, dt)
                used = True
            c["measurements"] += used
        if self.pivot_events:
            if contact:
                self._var += cfg.pivot_process_noise**2 * max(dt, 0.0)
            # the contact angle comes from the cap's switches: its error is the same over many samples (the same
            # switches pressed) and does not average down; it bounds the pivot's variance from below
            floor = (max(s.total_length - self._mean, 0.0) * self._slope * cfg.contact_angle_noise) ** 2
            l_pivot, rate, cov = self._mean, 0.0, (self._var + floor, 0.0, 0.0, 0.0)
        else:
            u = cfg.kf_unit
            k = self.kf
            l_pivot, rate, cov = k.x0 * u, k.x1 * u, (k.p00 * u * u, k.p01 * u * u, k.p01 * u * u, k.p11 * u * u)
        if self.hypotheses:
            # no clamp at the last fixed pivot: the pivot may lie behind it, back to the one before it; a
            # collision whose pivot settles clearly behind the last fixed pivot withdraws that pivot
            floor = self._floor
            if (contact and self.pivot_events and not self._withdrawn and self._accepted >= 50
                    and len(self.recon.pivots) > 1
                    and self._mean + 4.0 * math.sqrt(self._var) < self.recon.l_prev - cfg.withdraw_margin):  # fmt: skip
                px, py, pl = self.recon.pivots.pop()
                events.append(self._event(s.stamp_ns, EVENT_PIVOT_WITHDRAWN, self.pivot_index, (px, py), pl))
                self.pivot_index -= 1
                c["withdrawn"] += 1
                self._withdrawn = True
        else:
            floor = self._episode_l_prev if self.pivot_events else 0.0
        l_pivot_c = min(max(l_pivot, floor), s.total_length)
        variances = {"pivot": (cov[0], 0.0), "heading_noise": (0.0, cfg.heading_noise**2),
                     "drift": (0.0, drift_var * s.total_length**2)}  # fmt: skip
        tip, fixed = self.recon.step(s.total_length, s.total_length - l_pivot_c, heading, contact, s.live_contact,
                                     variances)  # fmt: skip
        terms = dict(self.recon.tip_cov)
        ln, ch, sh = cfg.length_noise**2, math.cos(heading), math.sin(heading)
        terms["length"] = (ln * ch * ch, ln * ch * sh, ln * sh * sh)
        hyp = (0.0, 0.0, 0.0)
        free = tip  # the tip grown free from the last fixed pivot
        if contact:
            self._held_pivot = l_pivot_c
        elif self._candidate is not None and self._snapshot is not None and turning:
            # undecided: a body that grows free from the candidate keeps its heading; one still turning (more
            # than the heading noise allows) is sliding along the wall unseen, about the held pivot
            sp = self._snapshot
            vx, vy = sp.v_prev if sp.v_prev is not None else (1.0, 0.0)
            d, lf = self._held_pivot - sp.l_prev, s.total_length - self._held_pivot
            tip = (sp.p_prev[0] + d * vx + lf * math.cos(heading), sp.p_prev[1] + d * vy + lf * math.sin(heading))
        if self._candidate is not None and self._snapshot is not None and not contact:
            # undecided: the other hypothesis's tip is as likely; its offset is a variance along the line between them
            sp = self._snapshot
            vx, vy = sp.v_prev if sp.v_prev is not None else (1.0, 0.0)
            d, lf = self._held_pivot - sp.l_prev, s.total_length - self._held_pivot
            held_tip = (sp.p_prev[0] + d * vx + lf * math.cos(heading),
                        sp.p_prev[1] + d * vy + lf * math.sin(heading))  # fmt: skip
            other = free if turning else held_tip
            dx, dy = other[0] - tip[0], other[1] - tip[1]
            hyp = (dx * dx, dx * dy, dy * dy)
        if fixed:
            self.pivot_index += 1
            c["pivots"] += 1
            px, py, pl = self.recon.pivots[-1]
            events.append(PivotEvent(s.stamp_ns, EVENT_CONTACT_END, self.pivot_index - 1, tip, s.total_length,
                                     s.cap_angle, s.normal_force))  # fmt: skip
            kind = EVENT_PIVOT_CANDIDATE if opened else EVENT_PIVOT_FIXED
            events.append(PivotEvent(s.stamp_ns, kind, self.pivot_index, (px, py), pl, math.nan, math.nan))
        if contact and not self._was_contact:
            events.append(PivotEvent(s.stamp_ns, EVENT_CONTACT_START, self.pivot_index, tip, s.total_length,
                                     s.cap_angle, s.normal_force))  # fmt: skip
        self._was_contact = contact
        self.drift.add(s.total_length, s.heading, not contact and self._candidate is None)
        pivot = self.recon.current_pivot(l_pivot_c) if contact else self.recon.p_prev
        return PivotOutput(
            stamp_ns=s.stamp_ns, tip=tip, heading=heading, total_length=s.total_length,
            free_length_measured=l_free_meas, pivot_length=l_pivot_c if contact else self.recon.l_prev,
            pivot_length_rate=rate, covariance=cov, pivot=pivot, pivot_index=self.pivot_index,
            in_contact=contact, held=held, buckling_condition_met=met, measurement_used=used, events=events,
            heading_drift=drift, heading_drift_variance=drift_var, candidate_open=self._candidate is not None,
            tip_covariance=tuple(sum(v[i] for v in terms.values()) + hyp[i] for i in range(3)),  # type: ignore[arg-type]
            tip_covariance_terms={**terms, "hypothesis": hyp},
        )  # fmt: skip

    def _measure(self, s: CollisionSample, force: float, pressure: float) -> tuple[float, float, bool]:
        """``(L_free, theta_contact, Eq. 1 met)`` from averaged force and pressure."""
        theta_c = math.pi / 2 - abs(s.cap_angle) if math.isfinite(s.cap_angle) else math.pi / 2
        f_tr = transverse_force(force, theta_c)
        l_free = free_length(pressure, self.config.radius, f_tr) if pressure > 0 else math.inf
        met = theta_c <= buckling_max_contact_angle(min(l_free, s.total_length), self.config.radius, self.config.mu)
        return l_free, theta_c, met

    def _constant_update(
        self, z: float, l_free: float, theta_c: float, f_avg: float, p_avg: float, n: int, met: bool, dt: float
    ) -> bool:
        """One measurement of the constant pivot; returns whether it was used."""
        cfg = self.config
        if not met or not math.isfinite(l_free):
            return False
        # Each sample's relative error of L_free: the force's additive noise and stick-slip, the pressure's noise,
        # the contact angle's. Not divided by the moving average's n: successive averages share n - 1 samples, so
        # each brings about one sample's information (dividing by n counted every sample n times).
        rel = (cfg.force_noise / max(f_avg, 1e-9)) ** 2 + cfg.force_slip**2
        rel += (cfg.pressure_noise / max(p_avg, 1e-9)) ** 2
        rel += (math.tan(theta_c) * cfg.contact_angle_noise) ** 2
        r = l_free * l_free * rel + 1e-6
        innov = z - self._mean
        S = self._var + r
        if self._accepted >= 5 and innov * innov > cfg.gate_sigma**2 * S:
            self.counts["gated"] += 1
            return False
        k = self._var / S
        self._mean += k * innov
        self._var *= 1.0 - k
        self._accepted += 1
        self._slope = math.tan(theta_c)
        return True


def _mean_angle(angles: deque[float]) -> float:
    """Circular mean."""
    return math.atan2(sum(math.sin(a) for a in angles), sum(math.cos(a) for a in angles))


def _check_filter(value: str) -> str | None:
    return None if value in FILTERS else f"one of {list(FILTERS)}"


SCHEMA = Schema(
    node="collision_pivot_estimator",
    description="Vine robot tip localisation from collisions (seed 004): pivot Kalman filter and online PathRecon.",
    params=(
        Param("filter", str, "improved", "'paper' (Eq. 8-9 as written) or 'improved' (bias-aware)",
              choices=FILTERS),
        Param("radius", float, 0.035, "body radius R", min=1e-4, max=1.0, unit="m"),
        Param("mu", float, 0.095, "friction coefficient body/obstacle in Eq. 1", min=0.0, max=2.0),
        Param("eps", float, 0.1, "Eq. 9: velocity attenuation in A (0 < eps <= 1)", min=1e-9, max=1.0),
        Param("k1", float, 0.1, "Eq. 9: R_v[0,0], confidence in a constant pivot (kf_unit^2)", min=1e-12),
        Param("k2", float, 1.0, "Eq. 9: R_v[1,1] (kf_unit^2/s^2)", min=1e-12),
        Param("kf_unit", float, 0.01, "length unit of the paper filter (0.01: centimetres, as the paper's data)",
              min=1e-6, max=1.0, unit="m"),
        Param("moving_average", int, 5, "moving-average window on F_N and P (samples)", min=1, max=1000),
        Param("variance_window", int, 10, "samples behind R_w (Eq. 9)", min=2, max=1000),
        Param("pressure_drop_per_metre", float, 0.05, "improved: tip pressure = sensed (1 - drop * L_total)",
              min=0.0, max=1.0, unit="1/m"),
        Param("heading_drift_per_metre", float, 0.0, "heading drift per metre grown (shape-sensing "
              "calibrate-heading-drift); the paper's filter subtracts it, the improved one uses it as the prior of "
              "its online estimate", min=-1.0, max=1.0, unit="rad/m"),
        Param("force_min", float, 0.1, "improved: a contact reading below this force is a dropout", min=0.0,
              unit="N"),
        Param("force_noise", float, 0.05, "improved: force sensor noise (1 sigma)", min=0.0, unit="N"),
        Param("force_slip", float, 0.12, "improved: force sensor stick-slip, relative (1 sigma)", min=0.0),
        Param("length_noise", float, 1e-4, "improved: grown length noise (1 sigma; the tip covariance's along-track "
              "part)", min=0.0, unit="m"),
        Param("pressure_noise", float, 100.0, "improved: pressure sensor noise (1 sigma)", min=0.0, unit="Pa"),
        Param("contact_angle_noise", float, 0.05, "improved: contact angle noise (1 sigma)", min=0.0, unit="rad"),
        Param("pivot_process_noise", float, 1e-4, "improved: pivot random walk", min=0.0, unit="m/sqrt(s)"),
        Param("gate_sigma", float, 4.0, "improved: innovations beyond this many sigma are rejected", min=1.0),
        Param("contact_gap", float, 0.02, "improved: a contact lost for less growth than this is the same collision; "
              "longer, its pivot becomes a candidate", min=0.0, unit="m"),
        Param("confirm_length", float, 0.1, "improved: a candidate pivot is fixed after this much free growth with "
              "the heading steady (or at contact with another wall)", min=0.0, unit="m"),
        Param("wall_angle_tol", float, 0.26, "improved: renewed contact is the same wall when the wall's normal "
              "(heading + cap angle) is within this of the one before the gap", min=0.0, max=3.2, unit="rad"),
        Param("withdraw_margin", float, 0.05, "improved: a fixed pivot is withdrawn when a settled collision puts its "
              "pivot this far (and 4 sigma) behind it", min=0.0, unit="m"),
        Param("heading_noise", float, 0.0087, "improved: cap heading noise (1 sigma): drift fit, turning test",
              min=1e-6, unit="rad"),
        Param("heading_drift_prior_sigma", float, 0.052, "improved: sigma of heading_drift_per_metre as the prior of "
              "the online drift estimate (0: use it as given)", min=0.0, unit="rad/m"),
        Param("length_topic", str, "base/length", "sensor_msgs/JointState, position[0] = grown length (ticks)"),
        Param("pressure_topic", str, "base/pressure", "sensor_msgs/FluidPressure, internal pressure"),
        Param("cap_topic", str, "cap/state", "shape_sensing/ContactCapState"),
        Param("imu_topic", str, "cap/imu", "sensor_msgs/Imu of the cap's BNO055 (heading = yaw)"),
        Param("wrench_topic", str, "obstacle/wrench", "geometry_msgs/WrenchStamped, normal force"),
        Param("force_axis", str, "z", "wrench force component that is the obstacle normal force, or 'norm'",
              choices=("x", "y", "z", "norm")),
        Param("stale_timeout", float, 0.25, "an input older than this at a step is stale", min=0.0, unit="s"),
        Param("base_frame", str, "vine_base", "frame of the path, pivots and tip"),
        Param("tip_frame", str, "vine_tip", "child frame of the tip transform"),
        Param("frame_prefix", str, "", "prefix of the published frame ids"),
        Param("path_rate", float, 5.0, "rate of nav_msgs/Path and markers (the full path grows)", min=0.1,
              unit="Hz"),
        Param("output_prefix", str, "collision", "topic prefix of the outputs (e.g. 'collision' -> collision/tip)"),
        *LIVE_PARAMS,
    ),
)  # fmt: skip
del _check_filter
