"""Planar Dubins paths: the six words, the shortest path, sampling along it.

A pose is ``(x, y, heading)`` with the heading in radians from the x axis. A
path is three segments of one word: ``L`` (counter-clockwise arc of radius
``radius``), ``R`` (clockwise arc) or ``S`` (straight). The six candidate words
of Dubins (1957) are ``LSL, RSR, LSR, RSL, RLR, LRL``; the shortest of those
that exist is the shortest bounded-curvature path.

The words are solved in the normalised frame (start at the origin, goal on the
+x axis at distance ``d = D / radius``; ``alpha``/``beta`` are the start/goal
headings in that frame), the standard closed forms from the tangent-line
geometry of the start and goal circles.

Numerical edge cases, decided here and tested:

* ``LSL``/``RSR`` with coincident circles (the goal on the start's circle):
  the tangent direction is undefined (``atan2`` of rounding noise would add a
  full loop); the path is the single arc from the start to the goal heading.
* A word whose squared straight length is negative only by rounding
  (``> -1e-10``) exists with a zero-length straight (the two circles touch, or
  coincide for ``LSL``/``RSR``), instead of being dropped.
* A ``CCC`` word whose cosine is outside ``[-1, 1]`` only by rounding is clamped.
* Outer arc angles within ``1e-9`` rad of a full turn are snapped to zero (a
  rounding artefact, never a wanted loop); the middle arc of ``CCC`` words is
  the long one, in ``(pi, 2 pi]``, and is never snapped.
* Start equal to goal gives the zero-length path ``LSL`` (0, 0, 0).
* Ties between words (equal lengths to ``1e-12`` relative) go to the first in
  :data:`WORDS` order, so the choice is deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from shape_sensing.planning.errors import PlanningError

__all__ = ["WORDS", "DubinsPath2D", "all_paths", "normalised_word", "shortest_path"]

WORDS: tuple[str, ...] = ("LSL", "RSR", "LSR", "RSL", "RLR", "LRL")

TWO_PI = 2.0 * math.pi
_NEG_TOL = 1e-10
_ANGLE_SNAP = 1e-9
_COINCIDENT = 1e-12  # centre distance over r below which two circles are one


def _mod2pi(a: float) -> float:
    r = a - TWO_PI * math.floor(a / TWO_PI)
    return 0.0 if r > TWO_PI - _ANGLE_SNAP else r


def normalised_word(word: str, alpha: float, beta: float, d: float) -> tuple[float, float, float] | None:
    """Segment parameters ``(t, p, q)`` of one word in the normalised frame, or ``None`` if it does not exist.

    Args:
        word: one of :data:`WORDS`.
        alpha: start heading relative to the start-goal line (rad).
        beta: goal heading relative to the start-goal line (rad).
        d: start-goal distance over the turning radius.

    Returns:
        Arc angles (rad) for ``C`` segments and the straight length over the
        radius for ``S``; each in ``[0, 2 pi)``.
    """
    sa, sb = math.sin(alpha), math.sin(beta)
    ca, cb = math.cos(alpha), math.cos(beta)
    c_ab = math.cos(alpha - beta)
    # The straight's length comes from the distance between the circle centres (hypot), which keeps
    # short straights accurate where the expanded p^2 formulas cancel.
    if word == "LSL":
        x, y = d + sa - sb, cb - ca
        p = math.hypot(x, y)
        # Coincident circles (p = 0): the tangent direction is undefined; one arc from alpha to beta.
        tmp = beta if p < _COINCIDENT else math.atan2(y, x)
        return _mod2pi(tmp - alpha), p, _mod2pi(beta - tmp)
    if word == "RSR":
        x, y = d - sa + sb, ca - cb
        p = math.hypot(x, y)
        tmp = beta if p < _COINCIDENT else math.atan2(y, x)
        return _mod2pi(alpha - tmp), p, _mod2pi(tmp - beta)
    if word == "LSR":
        x, y = d + sa + sb, -ca - cb
        h = math.hypot(x, y)
        p2 = (h - 2.0) * (h + 2.0)
        if p2 < -_NEG_TOL:
            return None
        p = math.sqrt(max(p2, 0.0))
        tmp = math.atan2(y, x) - math.atan2(-2.0, p)
        return _mod2pi(tmp - alpha), p, _mod2pi(tmp - beta)
    if word == "RSL":
        x, y = d - sa - sb, ca + cb
        h = math.hypot(x, y)
        p2 = (h - 2.0) * (h + 2.0)
        if p2 < -_NEG_TOL:
            return None
        p = math.sqrt(max(p2, 0.0))
        tmp = math.atan2(y, x) - math.atan2(2.0, p)
        return _mod2pi(alpha - tmp), p, _mod2pi(beta - tmp)
    if word == "RLR":
        c = (6.0 - d * d + 2.0 * c_ab + 2.0 * d * (sa - sb)) / 8.0
        if abs(c) > 1.0 + _NEG_TOL:
            return None
        p = TWO_PI - math.acos(min(1.0, max(-1.0, c)))  # the long middle arc, in (pi, 2 pi]: never snapped
        t = _mod2pi(alpha - math.atan2(ca - cb, d - sa + sb) + p / 2.0)
        return t, p, _mod2pi(alpha - beta - t + p)
    if word == "LRL":
        c = (6.0 - d * d + 2.0 * c_ab + 2.0 * d * (sb - sa)) / 8.0
        if abs(c) > 1.0 + _NEG_TOL:
            return None
        p = TWO_PI - math.acos(min(1.0, max(-1.0, c)))  # the long middle arc, in (pi, 2 pi]: never snapped
        t = _mod2pi(-alpha - math.atan2(ca - cb, d + sa - sb) + p / 2.0)
        return t, p, _mod2pi(beta - alpha - t + p)
    raise PlanningError(f"Dubins word {word!r} unknown; expected one of {list(WORDS)}")


@dataclass(frozen=True)
class DubinsPath2D:
    """A planar Dubins path.

    Attributes:
        start: start pose ``(x, y, heading)``.
        word: three letters from ``L``, ``R``, ``S``.
        lengths: arc length of each segment (same unit as the positions).
        radius: turning radius of the arcs.
    """

    start: tuple[float, float, float]
    word: str
    lengths: tuple[float, float, float]
    radius: float

    @property
    def length(self) -> float:
        """Total path length."""
        return self.lengths[0] + self.lengths[1] + self.lengths[2]

    def segment_starts(self) -> list[tuple[float, float, float]]:
        """Pose at the start of each segment, then the end pose (four poses)."""
        out = [self.start]
        x, y, h = self.start
        r = self.radius
        for kind, s in zip(self.word, self.lengths, strict=True):
            x, y, h = _advance(kind, x, y, h, s, r)
            out.append((x, y, h))
        return out

    @property
    def end(self) -> tuple[float, float, float]:
        """End pose (heading wrapped to ``(-pi, pi]``)."""
        x, y, h = self.segment_starts()[-1]
        return x, y, math.atan2(math.sin(h), math.cos(h))

    def pose_at(self, s: ArrayLike) -> NDArray[np.float64]:
        """Poses ``(N, 3)`` at arc lengths ``s`` (clipped to ``[0, length]``), vectorised."""
        s_arr = np.clip(np.atleast_1d(np.asarray(s, dtype=float)), 0.0, self.length)
        starts = np.array(self.segment_starts()[:3])
        bounds = np.cumsum((0.0, *self.lengths))
        idx = np.clip(np.searchsorted(bounds, s_arr, side="right") - 1, 0, 2)
        ds = s_arr - bounds[idx]
        x0, y0, h0 = starts[idx, 0], starts[idx, 1], starts[idx, 2]
        sign = np.array([1.0 if k == "L" else (-1.0 if k == "R" else 0.0) for k in self.word])[idx]
        r = self.radius
        dh = sign * ds / r
        h = h0 + dh
        straight = sign == 0.0
        # Arc about the centre at r * sign * (-sin h0, cos h0).
        with np.errstate(invalid="ignore", divide="ignore"):
            x_arc = x0 + sign * r * (np.sin(h) - np.sin(h0))
            y_arc = y0 - sign * r * (np.cos(h) - np.cos(h0))
        x = np.where(straight, x0 + ds * np.cos(h0), x_arc)
        y = np.where(straight, y0 + ds * np.sin(h0), y_arc)
        return np.stack([x, y, h], axis=-1)

    def sample(self, step: float) -> NDArray[np.float64]:
        """Poses ``(N, 3)`` every ``step`` along the path, both ends included."""
        if not (math.isfinite(step) and step > 0.0):
            raise PlanningError(f"sampling step = {step!r}: expected a finite value > 0")
        n = max(1, math.ceil(self.length / step))
        return self.pose_at(np.linspace(0.0, self.length, n + 1))


def _advance(kind: str, x: float, y: float, h: float, s: float, r: float) -> tuple[float, float, float]:
    if kind == "S":
        return x + s * math.cos(h), y + s * math.sin(h), h
    sign = 1.0 if kind == "L" else -1.0
    h1 = h + sign * s / r
    return x + sign * r * (math.sin(h1) - math.sin(h)), y - sign * r * (math.cos(h1) - math.cos(h)), h1


def _check_pose(name: str, pose: Sequence[float]) -> tuple[float, float, float]:
    try:
        x, y, h = (float(v) for v in pose)
    except (TypeError, ValueError):
        raise PlanningError(f"{name} = {pose!r}: expected (x, y, heading) as three numbers") from None
    if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(h)):
        raise PlanningError(f"{name} = {(x, y, h)!r}: expected finite (x, y, heading)")
    return x, y, h


def _check_radius(radius: float) -> float:
    try:
        r = float(radius)
    except (TypeError, ValueError):
        raise PlanningError(f"turning radius = {radius!r}: expected a number > 0") from None
    if not (math.isfinite(r) and r > 0.0):
        raise PlanningError(f"turning radius = {radius!r}: expected a finite value > 0")
    return r


def _normalise(
    start: tuple[float, float, float], goal: tuple[float, float, float], r: float
) -> tuple[float, float, float]:
    dx, dy = goal[0] - start[0], goal[1] - start[1]
    dist = math.hypot(dx, dy)
    theta = math.atan2(dy, dx) if dist > 0.0 else 0.0
    return _mod2pi(start[2] - theta), _mod2pi(goal[2] - theta), dist / r


def all_paths(start: Sequence[float], goal: Sequence[float], radius: float) -> dict[str, DubinsPath2D | None]:
    """Every word's path from ``start`` to ``goal`` (``None`` where the word does not exist)."""
    s, g, r = _check_pose("start", start), _check_pose("goal", goal), _check_radius(radius)
    alpha, beta, d = _normalise(s, g, r)
    out: dict[str, DubinsPath2D | None] = {}
    for word in WORDS:
        tpq = normalised_word(word, alpha, beta, d)
        out[word] = None if tpq is None else DubinsPath2D(s, word, (tpq[0] * r, tpq[1] * r, tpq[2] * r), r)
    return out


def shortest_path(start: Sequence[float], goal: Sequence[float], radius: float) -> DubinsPath2D:
    """The shortest Dubins path from ``start`` to ``goal`` with turning radius ``radius``.

    Raises:
        PlanningError: a pose is not three finite numbers, or the radius is not finite and > 0.
    """
    s, g, r = _check_pose("start", start), _check_pose("goal", goal), _check_radius(radius)
    alpha, beta, d = _normalise(s, g, r)
    if d == 0.0 and alpha == beta:
        return DubinsPath2D(s, "LSL", (0.0, 0.0, 0.0), r)
    best: tuple[float, float, float] | None = None
    best_word = ""
    best_len = math.inf
    for word in WORDS:
        tpq = normalised_word(word, alpha, beta, d)
        if tpq is None:
            continue
        total = tpq[0] + tpq[1] + tpq[2]
        if total < best_len * (1.0 - 1e-12):
            best, best_word, best_len = tpq, word, total
    if best is None:  # pragma: no cover - some word always exists (Dubins 1957)
        raise PlanningError(f"no Dubins word exists from {s} to {g} with radius {r}")
    return DubinsPath2D(s, best_word, (best[0] * r, best[1] * r, best[2] * r), r)
