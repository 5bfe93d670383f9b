"""Heading drift per metre grown, from straight stretches of growth (online, and offline for calibration).

A vine robot's body is straight between pivots: in free growth the tip moves along a fixed
direction, so its true heading is constant. The tip IMU's yaw then reads
``h(L) = h0 + b L + noise`` over the stretch, with ``b`` the drift per metre grown. Each straight
stretch is a line fit of the heading against the grown length with its own intercept ``h0``; its
slope estimates ``b`` with variance ``sigma_h^2 / Sxx`` (``Sxx``: the sum of squared length
deviations, ``sigma_h``: the heading noise, or the fit's residual scatter when larger). The slopes
of all stretches and a prior (the configured value) are combined by their information (a scalar
Kalman filter on a constant ``b``). A stretch whose residual scatter is well above the heading noise
was not straight (the body still turning about a pivot, an undetected contact) and is left out.

:func:`fit_heading_drift` is the same fit over one recorded straight growth (the calibration step).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["DriftFit", "HeadingDriftEstimator", "LineFit", "fit_heading_drift"]


def _wrap(a: float) -> float:
    return (a + math.pi) % (2.0 * math.pi) - math.pi


class LineFit:
    """Running least-squares line ``h = h0 + b L`` (sums about the first sample for numerical range).

    Headings are unwrapped against the previous sample, so a stretch across +-pi fits as one line.
    """

    def __init__(self) -> None:
        self.n = 0
        self.l0 = self.h0 = 0.0
        self.sl = self.sh = self.sll = self.slh = self.shh = 0.0
        self._last_h = 0.0
        self.l_first = self.l_last = 0.0

    def add(self, length: float, heading: float) -> None:
        if self.n == 0:
            self.l0, self.h0, self._last_h = length, heading, heading
            self.l_first = length
        h = self._last_h + _wrap(heading - self._last_h)
        self._last_h = h
        x, y = length - self.l0, h - self.h0
        self.n += 1
        self.sl += x
        self.sh += y
        self.sll += x * x
        self.slh += x * y
        self.shh += y * y
        self.l_last = length

    @property
    def span(self) -> float:
        return self.l_last - self.l_first if self.n else 0.0

    def sxx(self) -> float:
        return self.sll - self.sl * self.sl / self.n if self.n else 0.0

    def slope(self) -> float:
        sxx = self.sxx()
        return (self.slh - self.sl * self.sh / self.n) / sxx if sxx > 0 else math.nan

    def residual_variance(self) -> float:
        """``RSS / (n - 2)`` of the line fit (NaN below three samples)."""
        if self.n < 3:
            return math.nan
        sxx = self.sxx()
        syy = self.shh - self.sh * self.sh / self.n
        sxy = self.slh - self.sl * self.sh / self.n
        rss = syy - (sxy * sxy / sxx if sxx > 0 else 0.0)
        return max(rss, 0.0) / (self.n - 2)

    def intercept(self) -> float:
        """Heading at zero length of the fitted line (rad)."""
        b = self.slope()
        return self.h0 + self.sh / self.n - b * (self.sl / self.n + self.l0)


@dataclass(frozen=True)
class DriftFit:
    """One straight stretch's drift: slope (rad/m), its standard deviation, and how straight the stretch was."""

    drift_per_metre: float
    sigma: float
    heading_at_zero: float
    residual_rms: float
    samples: int
    span: float
    straight: bool


def _fit(line: LineFit, heading_noise: float, straightness: float) -> DriftFit:
    res = line.residual_variance()
    noise2 = heading_noise * heading_noise
    var_h = max(noise2, res) if math.isfinite(res) else noise2
    sxx = line.sxx()
    sigma = math.sqrt(var_h / sxx) if sxx > 0 else math.inf
    straight = math.isfinite(res) and res <= straightness * max(noise2, 1e-12)
    rms = math.sqrt(res) if math.isfinite(res) else math.nan
    return DriftFit(line.slope(), sigma, line.intercept() if sxx > 0 else math.nan, rms, line.n, line.span, straight)


def fit_heading_drift(
    lengths: Sequence[float], headings: Sequence[float], heading_noise: float = math.radians(0.5),
    straightness: float = 4.0,
) -> DriftFit:  # fmt: skip
    """The drift per metre of one recorded straight growth (grown length in m, heading in rad).

    Raises:
        ValueError: fewer than three samples, unequal lengths, non-finite values or no growth.
    """
    if len(lengths) != len(headings):
        raise ValueError(f"{len(lengths)} lengths but {len(headings)} headings: expected one heading per length")
    line = LineFit()
    for length, heading in zip(lengths, headings, strict=True):
        if not (math.isfinite(length) and math.isfinite(heading)):
            raise ValueError(f"length {length}, heading {heading}: expected finite numbers")
        line.add(float(length), float(heading))
    if line.n < 3:
        raise ValueError(f"{line.n} samples: a drift fit needs at least three")
    if line.sxx() <= 0:
        raise ValueError("the grown length never changed: the drift per metre needs growth")
    return _fit(line, heading_noise, straightness)


class HeadingDriftEstimator:
    """Online drift per metre from the straight stretches of free growth, with the configured value as prior.

    Args:
        prior: the configured drift (rad/m).
        prior_sigma: its standard deviation (rad/m); 0 fixes the drift at the prior.
        heading_noise: heading noise (rad, 1 sigma).
        settle: growth after leaving a contact before a stretch starts (m).
        min_span: shortest stretch used (m).
        straightness: a stretch is straight while its residual variance is below this times the noise variance.
    """

    def __init__(self, prior: float = 0.0, prior_sigma: float = math.radians(3.0),
                 heading_noise: float = math.radians(0.5), settle: float = 0.01, min_span: float = 0.05,
                 straightness: float = 4.0) -> None:  # fmt: skip
        self.prior, self.prior_sigma = prior, prior_sigma
        self.heading_noise, self.settle = heading_noise, settle
        self.min_span, self.straightness = min_span, straightness
        self.info = math.inf if prior_sigma <= 0 else 1.0 / (prior_sigma * prior_sigma)
        self.weighted = self.info * prior if math.isfinite(self.info) else prior
        self.line: LineFit | None = None
        self._free_since: float | None = None
        self.stretches_used = 0
        self.stretches_rejected = 0
        self._estimate = (prior, prior_sigma * prior_sigma)

    def add(self, length: float, heading: float, free: bool) -> None:
        """One sample: ``free`` when the robot grows free (no contact, no pivot undecided)."""
        if not math.isfinite(self.info):
            return
        if not free:
            self._close()
            self._free_since = None
            return
        if self._free_since is None:
            self._free_since = length
        if length - self._free_since < self.settle:
            return
        if self.line is None:
            self.line = LineFit()
        self.line.add(length, heading)
        if self.line.n % 10 == 0:  # the open stretch's share, refreshed every 10 samples (it changes slowly)
            self._estimate = self._combine(self.line)

    def _usable(self, line: LineFit) -> DriftFit | None:
        if line.span < self.min_span or line.n < 3:
            return None
        fit = _fit(line, self.heading_noise, self.straightness)
        return fit if fit.straight and math.isfinite(fit.sigma) else None

    def _combine(self, line: LineFit | None) -> tuple[float, float]:
        info, weighted = self.info, self.weighted
        fit = self._usable(line) if line is not None else None
        if fit is not None:
            w = 1.0 / (fit.sigma * fit.sigma)
            info += w
            weighted += w * fit.drift_per_metre
        return weighted / info, 1.0 / info

    def _close(self) -> None:
        line, self.line = self.line, None
        if line is None:
            return
        fit = self._usable(line)
        if fit is None:
            self.stretches_rejected += line.span >= self.min_span
        else:
            w = 1.0 / (fit.sigma * fit.sigma)
            self.info += w
            self.weighted += w * fit.drift_per_metre
            self.stretches_used += 1
        self._estimate = (self.weighted / self.info, 1.0 / self.info)

    @property
    def estimate(self) -> tuple[float, float]:
        """``(drift per metre, variance)`` now (rad/m, rad^2/m^2)."""
        if not math.isfinite(self.info):
            return self.prior, 0.0
        return self._estimate
