"""Planar Dubins paths against easydubins and against a geometric brute force over the six words."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shape_sensing.planning.dubins2d import WORDS, all_paths, normalised_word, shortest_path
from shape_sensing.planning.errors import PlanningError


@pytest.fixture
def easydubins_path():
    """easydubins' path module, or skip this test (a module-level skip would abort a run under ROS's plugins)."""
    return pytest.importorskip("easydubins.dubin_path")


TWO_PI = 2.0 * math.pi


def _m2p(a: float) -> float:
    return a % TWO_PI


def _brute_force(start, goal, r):
    """Every word built from circle and tangent geometry (both CCC branches); word -> length or None."""
    x0, y0, h0 = start
    x1, y1, h1 = goal

    def centre(x, y, h, turn):
        s = 1.0 if turn == "L" else -1.0
        return np.array([x - s * r * math.sin(h), y + s * r * math.cos(h)])

    def arc(h_from, h_to, turn):
        return _m2p(h_to - h_from) if turn == "L" else _m2p(h_from - h_to)

    out = {}
    for w in WORDS:
        a, m, b = w
        c0, c1 = centre(x0, y0, h0, a), centre(x1, y1, h1, b)
        dv = c1 - c0
        dist = float(np.hypot(*dv))
        if m == "S":
            if a == b:  # outer tangent: the straight is parallel to the centre line
                if dist < 1e-12:
                    out[w] = r * arc(h0, h1, a)
                    continue
                h = math.atan2(dv[1], dv[0])
                out[w] = r * arc(h0, h, a) + dist + r * arc(h, h1, b)
            else:  # inner tangent
                if dist < 2.0 * r - 1e-12:
                    out[w] = None
                    continue
                s = 1.0 if a == "L" else -1.0
                h = math.atan2(dv[1], dv[0]) + s * math.asin(min(1.0, 2.0 * r / dist))
                out[w] = r * arc(h0, h, a) + math.sqrt(max(dist * dist - 4 * r * r, 0.0)) + r * arc(h, h1, b)
        else:  # CCC: a middle circle of radius r tangent to both
            if dist > 4.0 * r + 1e-12 or dist < 1e-12:
                out[w] = None
                continue
            best = math.inf
            base = math.atan2(dv[1], dv[0])
            for sgn in (1.0, -1.0):
                ang = base + sgn * math.acos(min(1.0, dist / (4.0 * r)))
                cm = c0 + 2.0 * r * np.array([math.cos(ang), math.sin(ang)])
                # Tangent headings where the circles touch (midpoints of the centre segments).
                sa = 1.0 if a == "L" else -1.0
                t1 = (cm - c0) / 2.0  # from c0 to the contact point
                h_a = math.atan2(t1[1], t1[0]) + sa * math.pi / 2.0
                t2 = (c1 - cm) / 2.0
                h_b = math.atan2(-t2[1], -t2[0]) - sa * math.pi / 2.0 + math.pi
                length = r * (arc(h0, h_a, a) + arc(h_a, h_b, m) + arc(h_b, h1, b))
                best = min(best, length)
            out[w] = best
    return out


def _random_queries(n, seed):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        s = (rng.uniform(-5, 5), rng.uniform(-5, 5), rng.uniform(-math.pi, math.pi))
        g = (rng.uniform(-5, 5), rng.uniform(-5, 5), rng.uniform(-math.pi, math.pi))
        yield s, g, rng.uniform(0.2, 3.0)


def test_lengths_agree_with_easydubins_on_random_queries(easydubins_path):
    worst = 0.0
    for s, g, r in _random_queries(3000, 1):
        ours = shortest_path(s, g, r)
        _mode, lengths, _radii = easydubins_path.dubins_path(s, g, r)
        ref = sum(lengths)
        worst = max(worst, abs(ours.length - ref) / ref)
    assert worst < 1e-6


def test_every_word_ends_at_the_goal():
    for s, g, r in _random_queries(400, 2):
        for word, path in all_paths(s, g, r).items():
            if path is None:
                continue
            x, y, h = path.end
            assert math.hypot(x - g[0], y - g[1]) < 1e-9, word
            assert abs(math.remainder(h - g[2], TWO_PI)) < 1e-9, word


def test_shortest_matches_brute_force_on_random_queries():
    for s, g, r in _random_queries(500, 3):
        brute = _brute_force(s, g, r)
        best = min(v for v in brute.values() if v is not None)
        assert shortest_path(s, g, r).length == pytest.approx(best, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize(
    ("name", "start", "goal"),
    [
        # Goal on the start's left circle: LSL with a zero straight (coincident circles).
        ("coincident_left", (0.0, 0.0, 0.0), (math.sin(1.0), 1.0 - math.cos(1.0), 1.0)),
        ("coincident_right", (0.0, 0.0, 0.0), (math.sin(2.0), -(1.0 - math.cos(2.0)), -2.0)),
        # Start and goal circles touching: LSR straight of zero length (rounding may make p^2 slightly < 0).
        ("touching_inner", (0.0, 0.0, 0.0), (0.0, 4.0, 0.0)),
        # Mirror-symmetric query: LSL and RSR (and the CCC pair) have equal lengths.
        ("tie", (0.0, 0.0, 0.0), (0.0, 0.0, math.pi)),
        ("tie_far", (0.0, 0.0, 0.0), (-3.0, 0.0, math.pi)),
        # Close goals where the inner-tangent words do not exist and CCC is the answer.
        ("close_ccc", (0.0, 0.0, 0.0), (0.5, 0.0, 0.0 + math.pi / 2)),
        ("straight_ahead", (0.0, 0.0, 0.3), (2.0 * math.cos(0.3), 2.0 * math.sin(0.3), 0.3)),
        ("behind", (0.0, 0.0, 0.0), (-0.1, 0.0, 0.0)),
    ],
)
def test_edge_cases_against_brute_force(name, start, goal):
    r = 1.0
    brute = _brute_force(start, goal, r)
    paths = all_paths(start, goal, r)
    for w in ("LSL", "RSR", "LSR", "RSL"):  # CSC: one tangent each; CCC words take the long middle arc by design
        if paths[w] is not None and brute[w] is not None:
            assert paths[w].length <= brute[w] + 1e-9, (name, w)
            x, y, _h = paths[w].end
            assert math.hypot(x - goal[0], y - goal[1]) < 1e-9, (name, w)
    best = min(v for v in brute.values() if v is not None)
    p = shortest_path(start, goal, r)
    assert p.length == pytest.approx(best, abs=1e-9), name
    if name.startswith("coincident"):
        assert p.length == pytest.approx(1.0 if "left" in name else 2.0, abs=1e-12)
        assert p.lengths[1] == pytest.approx(0.0, abs=1e-9)
    if name == "touching_inner":
        assert paths["LSR"] is not None and paths["LSR"].lengths[1] == pytest.approx(0.0, abs=1e-6)
    if name == "straight_ahead":
        assert p.length == pytest.approx(2.0, abs=1e-12)
    lengths = {w: q.length for w, q in paths.items() if q is not None}
    first_best = next(w for w in WORDS if w in lengths and lengths[w] <= min(lengths.values()) * (1 + 1e-12) + 1e-15)
    assert p.word == first_best  # ties go to the first word in WORDS order, deterministically
    if name.startswith("tie"):
        mirrored = shortest_path((start[0], -start[1], -start[2]), (goal[0], -goal[1], -goal[2]), r)
        assert mirrored.length == pytest.approx(p.length, abs=1e-12)
    if name == "close_ccc":
        assert paths["LSR"] is None and paths["RSL"] is None and brute["LSR"] is None


def test_start_equal_to_goal_is_a_zero_path():
    p = shortest_path((1.0, 2.0, 0.5), (1.0, 2.0, 0.5), 0.3)
    assert p.length == 0.0
    assert np.allclose(p.sample(0.1), [[1.0, 2.0, 0.5]])


def test_nonexistent_words_return_none():
    # d = 0 with a heading change: the inner-tangent words need the circles >= 2r apart.
    assert normalised_word("LSR", 0.0, math.pi, 0.0) is None
    assert normalised_word("RLR", 0.0, 0.0, 10.0) is None


def test_sampling_spacing_curvature_and_ends():
    s, g, r = (0.0, 0.0, 0.0), (1.0, 1.5, -2.0), 0.7
    p = shortest_path(s, g, r)
    q = p.sample(0.01)
    assert np.allclose(q[0], s)
    assert np.allclose(q[-1, :2], g[:2], atol=1e-12)
    chords = np.hypot(*np.diff(q[:, :2], axis=0).T)
    assert chords.max() <= 0.01 + 1e-12
    steps = np.full(len(q) - 1, p.length / (len(q) - 1))  # arc length between samples
    # Heading changes at most ds / r (the curvature bound), and the tangent matches the motion.
    dh = np.abs(np.diff(q[:, 2]))
    assert np.all(dh <= steps / r + 1e-9)
    mid = 0.5 * (q[1:, 2] + q[:-1, 2])
    motion = np.arctan2(np.diff(q[:, 1]), np.diff(q[:, 0]))
    # (exact at mid-chord inside a segment; a chord across a segment boundary is off by under half a sample turn)
    assert np.allclose(np.remainder(motion - mid + math.pi, TWO_PI) - math.pi, 0.0, atol=0.5 * dh.max() + 1e-9)


@pytest.mark.parametrize(
    ("start", "goal", "radius", "match"),
    [
        ((math.nan, 0.0, 0.0), (1.0, 0.0, 0.0), 1.0, "start"),
        ((0.0, 0.0, 0.0), (1.0, math.inf, 0.0), 1.0, "goal"),
        ((0.0, 0.0), (1.0, 0.0, 0.0), 1.0, "start"),
        ((0.0, 0.0, 0.0), (1.0, 0.0, 0.0), 0.0, "turning radius"),
        ((0.0, 0.0, 0.0), (1.0, 0.0, 0.0), -1.0, "turning radius"),
        ((0.0, 0.0, 0.0), (1.0, 0.0, 0.0), "wide", "turning radius"),
    ],
)
def test_bad_queries_raise(start, goal, radius, match):
    with pytest.raises(PlanningError, match=match):
        shortest_path(start, goal, radius)


def test_bad_word_and_step_raise():
    with pytest.raises(PlanningError, match="word"):
        normalised_word("SSS", 0.0, 0.0, 1.0)
    with pytest.raises(PlanningError, match="sampling step"):
        shortest_path((0, 0, 0), (1, 0, 0), 1.0).sample(0.0)
