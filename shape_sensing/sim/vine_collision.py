"""Planar vine robot growing among polygon obstacles, pivoting at contacts by transverse buckling (seed 004).

Kinematics (a line body, the tip at the cap's centre):

* The body is a polyline from the base; its last vertex is the current pivot. In free growth the
  tip extends along the heading from the pivot.
* When the tip reaches an obstacle face (offset outward by the cap radius), the body pivots about the
  last vertex and the tip slides along the face in the direction that makes an acute angle with the
  heading, keeping ``|tip - pivot| = L_total - L_pivot``; the heading is the direction pivot -> tip.
* When the tip passes the end of the face, contact ends; the tip point becomes a body vertex (the
  new pivot, where the body wraps the obstacle's corner) and growth continues along the heading.
* Pivot posts (the paper's hand-placed pivot block) become vertices when the tip grows past them.

Forces follow the buckling model: the obstacle's normal force is ``F_N = pi P_tip R^3 /
(L_free cos theta_contact)`` (Eq. 2-3 and 7 solved for ``F_N``) with the pressure at the tip below the
base's by ``pressure_drop_per_metre`` (a fraction per metre grown).

Sensor faults: encoder quantisation (``metres_per_count``), pressure noise, force noise (additive
and multiplicative stick-slip) and contact dropouts (no switch, no force for 40-300 ms), switch
quantisation of the contact angle, BNO055 heading drift per metre grown plus noise.

Burst contact loss (``burst_fraction``): the cap bounces off or slides along a wall and loses its
switches and force for bursts of about 0.3 s (exponential, clipped to 0.1-1 s) over a given fraction
of the contact time; the body stays where the kinematics put it (straight from its last pivot).

Courses: :func:`single_course` (the paper's sweep: obstacle angle 130-170 deg, pivot-to-obstacle
35-75 cm, R = 3.5 cm), :func:`three_course` (three obstacles turning left, right, left; each
collision pivots about the previous obstacle's corner, as in the paper's Fig. 9) and
:func:`straight_course` (no obstacle: a heading drift calibration run).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from shape_sensing.config import Param, Schema

__all__ = [
    "COURSES",
    "PAPER_OBSTACLE_ANGLES",
    "PAPER_PIVOT_DISTANCES",
    "SCHEMA",
    "Course",
    "SensorFaults",
    "SimSample",
    "VineCollisionSim",
    "course_by_name",
    "single_course",
    "straight_course",
    "three_course",
]

PAPER_OBSTACLE_ANGLES = (130.0, 140.0, 150.0, 160.0, 170.0)  # deg
PAPER_PIVOT_DISTANCES = (0.35, 0.45, 0.55, 0.65, 0.75)  # m, pivot to the obstacle's face centre
COURSES = ("single", "three", "straight")


def _u(h: float) -> np.ndarray:
    return np.array([math.cos(h), math.sin(h)])


def _transverse_buckling_limit(l_free: float, radius: float, mu: float) -> float:
    """The largest contact angle (rad) at which the tip's contact buckles the body sideways: the seed's buckling
    condition (its Eq. 1) stated here in its own form, not taken from the estimator, ``tan(theta) <= (L - mu R) /
    (R + mu L)`` for a free length ``L``, body radius ``R`` and friction ``mu``; with ``L <= mu R`` no angle buckles
    the body sideways (0). ``test_sim_independence.py`` checks it against the estimator's form."""
    along = l_free - mu * radius
    if along <= 0.0:
        return 0.0
    return math.atan2(along, radius + mu * l_free)


@dataclass
class Course:
    """Obstacles (convex polygons, counter-clockwise vertices), pivot posts and the length to grow."""

    name: str
    obstacles: list[np.ndarray]
    posts: list[np.ndarray]
    max_length: float
    radius: float = 0.035
    description: str = ""


def _box_on_ray(
    v: np.ndarray,
    h: float,
    dist: float,
    contact_angle: float,
    turn: int,
    extent: float,
    radius: float,
    back: float = 0.25,
    depth: float = 0.2,
) -> tuple[np.ndarray, float, np.ndarray]:
    """A rectangle whose face the ray from ``v`` along ``h`` hits (tip centre) at ``dist``.

    The face makes ``contact_angle`` with the heading; the tip slides toward ``turn`` (+1 left, -1
    right) for ``extent`` beyond the hit point. Returns ``(polygon, heading at exit, exit point)``.
    """
    hit = v + dist * _u(h)
    w = _u(h + turn * contact_angle)  # sliding direction along the face
    n_robot = np.array([w[1], -w[0]]) * turn  # face normal toward the robot's side (away from the box)
    if float(n_robot @ _u(h)) > 0:
        n_robot = -n_robot
    face_a = hit - back * w - radius * n_robot
    face_b = hit + extent * w - radius * n_robot
    poly = np.array([face_a, face_b, face_b - depth * n_robot, face_a - depth * n_robot])
    if _signed_area(poly) < 0:
        poly = poly[::-1]
    exit_pt = hit + extent * w
    d = exit_pt - v
    return poly, math.atan2(d[1], d[0]), exit_pt


def _signed_area(p: np.ndarray) -> float:
    x, y = p[:, 0], p[:, 1]
    return 0.5 * float(np.sum(x * np.roll(y, -1) - np.roll(x, -1) * y))


def single_course(
    obstacle_angle_deg: float = 150.0,
    pivot_distance: float = 0.55,
    *,
    base_to_pivot: float = 0.5,
    extent: float = 0.3,
    grow_after: float = 0.3,
    radius: float = 0.035,
) -> Course:
    """The paper's single-obstacle setup: a pivot post ``base_to_pivot`` from the base, then an angled wall.

    ``obstacle_angle_deg`` in [90, 180): the contact angle at first touch is ``obstacle_angle - 90`` deg
    (170 deg: 80 deg, nearly head-on). ``pivot_distance``: pivot post to the face centre (m).
    """
    if not 90.0 < obstacle_angle_deg < 180.0:
        raise ValueError(f"obstacle angle {obstacle_angle_deg} deg: expected 90 < angle < 180")
    if pivot_distance <= 0 or base_to_pivot <= 0:
        raise ValueError(f"pivot distance {pivot_distance} m, base to pivot {base_to_pivot} m: expected > 0")
    theta_c = math.radians(obstacle_angle_deg - 90.0)
    post = np.array([base_to_pivot, 0.0])
    poly, _h, exit_pt = _box_on_ray(post, 0.0, pivot_distance, theta_c, +1, extent, radius)
    total = base_to_pivot + float(np.linalg.norm(exit_pt - post)) + grow_after
    return Course(
        f"single-{obstacle_angle_deg:g}deg-{pivot_distance * 100:g}cm",
        [poly],
        [post],
        total,
        radius,
        f"obstacle {obstacle_angle_deg:g} deg, pivot {pivot_distance * 100:g} cm from the face",
    )


def three_course(radius: float = 0.035, grow_after: float = 0.4) -> Course:
    """Three obstacles: left turn about the base, right about obstacle 1's corner, left about obstacle 2's."""
    v, h, length = np.zeros(2), 0.0, 0.0
    obstacles = []
    # (free length at touch, contact angle at touch, turn, face extent beyond the touch point)
    plan = [(0.85, 55.0, +1, 0.40), (0.60, 62.0, -1, 0.40), (0.55, 60.0, +1, 0.35)]
    for dist, angle, turn, extent in plan:
        poly, h_exit, exit_pt = _box_on_ray(v, h, dist, math.radians(angle), turn, extent, radius)
        obstacles.append(poly)
        length += float(np.linalg.norm(exit_pt - v))
        v, h = exit_pt, h_exit
    return Course(
        "three",
        obstacles,
        [],
        length + grow_after,
        radius,
        "three obstacles: left, right, left; each contact pivots about the previous corner",
    )


def straight_course(length: float = 1.5, radius: float = 0.035) -> Course:
    """No obstacle: the robot grows straight to ``length`` (a heading drift calibration run)."""
    if not length > 0:
        raise ValueError(f"length {length} m: expected > 0")
    return Course("straight", [], [], length, radius, f"no obstacle, straight growth to {length:g} m")


def course_by_name(name: str, obstacle_angle_deg: float = 150.0, pivot_distance: float = 0.55) -> Course:
    """A course of :data:`COURSES` by name (the single course's angle and distance as given)."""
    if name == "three":
        return three_course()
    if name == "straight":
        return straight_course()
    if name == "single":
        return single_course(obstacle_angle_deg, pivot_distance)
    raise ValueError(f"course {name!r}: expected one of {list(COURSES)}")


@dataclass
class SensorFaults:
    """Sensor error model (defaults: the faults the paper reports, at magnitudes of its hardware)."""

    metres_per_count: float = 2.5e-4  # encoder quantisation
    pressure_noise: float = 100.0  # Pa, 1 sigma
    pressure_drop_per_metre: float = 0.06  # tip pressure = base (1 - drop L_total)
    force_noise: float = 0.05  # N, additive 1 sigma
    force_slip: float = 0.12  # multiplicative stick-slip, 1 sigma
    dropout_rate: float = 1.5  # contact dropouts per second of contact
    dropout_min: float = 0.02  # s
    dropout_max: float = 0.12  # s
    heading_drift_per_metre: float = math.radians(2.0)  # rad per metre grown (BNO055 yaw drift)
    heading_drift_spread: float = 0.2  # the true drift is nominal (1 + spread N(0,1))
    heading_noise: float = math.radians(0.5)
    switch_patch: float = math.radians(6.0)  # switches within this of the contact normal are pressed
    pressure_drop_spread: float = 0.15  # the true drop is nominal (1 + spread N(0,1))
    # Burst contact loss: the cap bounces off or slides along a wall and loses its switches and force for
    # bursts of ``burst_duration`` s on average (exponential, at least ``burst_min``, at most ``burst_max``)
    # over ``burst_fraction`` of the contact time. 0: none (the paper's intermittent dropouts only).
    burst_fraction: float = 0.0
    burst_duration: float = 0.3
    burst_min: float = 0.1
    burst_max: float = 1.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.burst_fraction < 1.0:
            raise ValueError(f"burst_fraction {self.burst_fraction}: expected 0 <= fraction < 1")
        if not 0.0 < self.burst_min <= self.burst_max or self.burst_duration <= 0:
            raise ValueError(f"burst durations {self.burst_min}, {self.burst_duration}, {self.burst_max} s: expected "
                             "0 < min <= max and mean > 0")  # fmt: skip

    @classmethod
    def all_faults(cls, burst_fraction: float = 0.15, heading_drift_deg_per_m: float = 2.0) -> SensorFaults:
        """Every fault on: the paper's, bursts of contact loss over ``burst_fraction`` of the contact time and a
        heading drift of ``heading_drift_deg_per_m`` (the estimator is told none of it)."""
        return cls(burst_fraction=burst_fraction, heading_drift_per_metre=math.radians(heading_drift_deg_per_m))

    @classmethod
    def clean(cls) -> SensorFaults:
        """No noise, no drop, no dropouts, no drift (switch quantisation stays: it is the sensor)."""
        return cls(metres_per_count=1e-9, pressure_noise=0.0, pressure_drop_per_metre=0.0, force_noise=0.0,
                   force_slip=0.0, dropout_rate=0.0, heading_drift_per_metre=0.0, heading_drift_spread=0.0,
                   heading_noise=0.0, pressure_drop_spread=0.0)  # fmt: skip


@dataclass(frozen=True)
class SimSample:
    """Truth and sensor readings at one step."""

    t: float
    # truth
    length: float
    tip: np.ndarray
    heading: float
    pivot: np.ndarray
    pivot_length: float
    in_contact: bool
    contact_angle: float  # rad, heading to surface (NaN in free growth)
    cap_angle: float  # rad, obstacle normal seen from the tip (NaN in free growth)
    normal_force: float  # N
    pressure_base: float  # Pa
    pressure_tip: float  # Pa
    buckling_met: bool
    body: np.ndarray  # (k, 2) vertices base..pivot, then the tip
    # sensors
    length_measured: float
    pressure_measured: float
    force_measured: float
    cap_mask: int
    heading_measured: float
    dropout: bool  # no switch, no force (a brief dropout or a burst)
    burst: bool = False  # inside a burst of contact loss


@dataclass
class VineCollisionSim:
    """The simulator.

    Args:
        course: obstacles and posts.
        faults: sensor error model.
        rate: sample rate (Hz).
        speed: growth speed (m/s).
        pressure: base pressure setpoint (Pa).
        mu: friction coefficient (Eq. 1, for the truth's buckling flag).
        n_switches, sensing_arc: the cap.
        seed: random seed.
    """

    course: Course
    faults: SensorFaults = field(default_factory=SensorFaults)
    rate: float = 50.0
    speed: float = 0.03
    pressure: float = 10_000.0
    mu: float = 0.095
    n_switches: int = 19
    sensing_arc: float = math.pi
    seed: int = 0

    def __post_init__(self) -> None:
        if self.rate <= 0 or self.speed <= 0:
            raise ValueError(f"rate {self.rate} Hz, speed {self.speed} m/s: expected > 0")
        self.rng = np.random.default_rng(self.seed)
        f = self.faults
        self.true_drift = f.heading_drift_per_metre * (1.0 + f.heading_drift_spread * self.rng.standard_normal())
        spread = 1.0 + f.pressure_drop_spread * self.rng.standard_normal()
        self.true_drop = max(0.0, f.pressure_drop_per_metre * spread)
        # the cap's switches, equally spaced over the sensing arc and centred on the cap axis
        if self.n_switches < 1 or not 0 < self.sensing_arc <= 2 * math.pi:
            raise ValueError(
                f"cap with {self.n_switches} switches over {self.sensing_arc} rad: expected >= 1 and (0, 2 pi]"
            )
        half = self.sensing_arc / 2 if self.n_switches > 1 else 0.0
        self.switches = np.linspace(-half, half, self.n_switches)
        # offset faces: (point a, direction w unit, length, normal toward outside, obstacle index)
        self._faces = []
        r = self.course.radius
        for k, poly in enumerate(self.course.obstacles):
            for i in range(len(poly)):
                a, b = poly[i], poly[(i + 1) % len(poly)]
                e = b - a
                # ccw polygon: outward normal is (e_y, -e_x)
                n = np.array([e[1], -e[0]]) / np.linalg.norm(e)
                self._faces.append((a + r * n, b + r * n, n, k))
        self.n_steps = math.ceil(self.course.max_length / self.speed * self.rate) + 1

    def run(self) -> Iterator[SimSample]:
        """The samples, one per step, until the course's length is grown."""
        f, rng = self.faults, self.rng
        verts: list[np.ndarray] = [np.zeros(2)]
        arcs: list[float] = [0.0]
        heading = 0.0
        contact: tuple[np.ndarray, np.ndarray, float, np.ndarray] | None = None  # a, w, length, n
        posts = [np.asarray(p, dtype=float) for p in self.course.posts]
        dropout_until = burst_until = -1.0
        # bursts start at this rate per second of contact outside a burst, so that they cover burst_fraction
        bf = f.burst_fraction
        burst_rate = bf / ((1.0 - bf) * self._burst_mean()) if bf > 0 else 0.0
        prev_tip = np.zeros(2)
        for k in range(self.n_steps):
            t = k / self.rate
            length = min(self.speed * t, self.course.max_length)
            v, lv = verts[-1], arcs[-1]
            lf = length - lv
            if contact is None:
                tip = v + lf * _u(heading)
                # posts passed by the tip become vertices
                for p in list(posts):
                    d = tip - prev_tip
                    dd = float(d @ d)
                    s = float((p - prev_tip) @ d / dd) if dd > 0 else -1.0
                    if 0.0 <= s <= 1.0 and np.linalg.norm(prev_tip + s * d - p) < 0.01:
                        verts.append(p.copy())
                        arcs.append(lv + float(np.linalg.norm(p - v)))
                        posts.remove(p)
                        v, lv = verts[-1], arcs[-1]
                        lf = length - lv
                hit = self._first_hit(prev_tip, tip, heading)
                if hit is not None and k > 0:
                    a, w, flen, n = hit
                    contact = (a, w, flen, n)
            if contact is not None:
                a, w, flen, n = contact
                d = a - v
                dw = float(d @ w)
                disc = dw * dw - float(d @ d) + lf * lf
                sigma = -dw + math.sqrt(max(disc, 0.0))
                if sigma > flen:  # past the face end: the exit point becomes the new pivot
                    exit_pt = a + flen * w
                    lexit = lv + float(np.linalg.norm(exit_pt - v))
                    de = exit_pt - v
                    heading = math.atan2(de[1], de[0])
                    verts.append(exit_pt)
                    arcs.append(lexit)
                    contact = None
                    v, lv = exit_pt, lexit
                    lf = length - lv
                    tip = v + lf * _u(heading)
                else:
                    tip = a + sigma * w
                    dt_ = tip - v
                    heading = math.atan2(dt_[1], dt_[0])
            prev_tip = tip
            in_contact = contact is not None
            p_base = self.pressure * (1.0 + 0.02 * math.sin(2 * math.pi * 0.05 * t))
            p_tip = p_base * max(1.0 - self.true_drop * length, 0.0)
            u = _u(heading)
            if in_contact:
                assert contact is not None
                w, n = contact[1], contact[3]
                theta_c = math.acos(min(1.0, abs(float(u @ w))))
                cap = math.atan2(u[0] * -n[1] - u[1] * -n[0], float(u @ -n))
                lf_true = length - lv
                f_n = math.pi * p_tip * self.course.radius**3 / (lf_true * max(math.cos(theta_c), 1e-6))
                met = theta_c <= _transverse_buckling_limit(lf_true, self.course.radius, self.mu)
                if t >= dropout_until and f.dropout_rate and rng.random() < f.dropout_rate / self.rate:
                    dropout_until = t + rng.uniform(f.dropout_min, f.dropout_max)
                if t >= burst_until and burst_rate and rng.random() < burst_rate / self.rate:
                    burst_until = t + self._burst_length()
            else:
                theta_c = cap = math.nan
                f_n = 0.0
                met = True
                dropout_until = burst_until = -1.0
            burst = in_contact and t < burst_until
            dropout = in_contact and (t < dropout_until or burst)
            # sensors
            q = f.metres_per_count
            l_meas = round(length / q) * q
            p_meas = p_base + f.pressure_noise * rng.standard_normal()
            f_meas = 0.0 if (dropout or not in_contact) else f_n * (1.0 + f.force_slip * rng.standard_normal())
            f_meas += f.force_noise * rng.standard_normal()
            mask = 0
            if in_contact and not dropout:
                pressed = np.abs(self.switches - cap) <= f.switch_patch
                if not pressed.any():
                    pressed[int(np.argmin(np.abs(self.switches - cap)))] = True
                mask = int(sum(1 << int(i) for i in np.flatnonzero(pressed)))
            h_meas = heading + self.true_drift * length + f.heading_noise * rng.standard_normal()
            body = np.vstack([*verts, tip])
            yield SimSample(
                t=t, length=length, tip=tip.copy(), heading=heading, pivot=verts[-1].copy(), pivot_length=arcs[-1],
                in_contact=in_contact, contact_angle=theta_c, cap_angle=cap, normal_force=f_n, pressure_base=p_base,
                pressure_tip=p_tip, buckling_met=met, body=body, length_measured=l_meas, pressure_measured=p_meas,
                force_measured=f_meas, cap_mask=mask, heading_measured=h_meas, dropout=dropout, burst=burst,
            )  # fmt: skip

    def _burst_length(self) -> float:
        """One burst's duration: exponential about ``burst_duration``, kept within ``[burst_min, burst_max]``."""
        f = self.faults
        return float(min(max(self.rng.exponential(f.burst_duration), f.burst_min), f.burst_max))

    def _burst_mean(self) -> float:
        """The mean of :meth:`_burst_length` (the clipped exponential), for the rate that gives the fraction."""
        f = self.faults
        m, lo, hi = f.burst_duration, f.burst_min, f.burst_max
        # E[min(max(X, lo), hi)] for X ~ Exp(mean m)
        return lo + m * (math.exp(-lo / m) - math.exp(-hi / m))

    def _first_hit(
        self, p0: np.ndarray, p1: np.ndarray, heading: float
    ) -> tuple[np.ndarray, np.ndarray, float, np.ndarray] | None:
        """The offset face the tip crossed between ``p0`` and ``p1`` (the first along the way)."""
        d = p1 - p0
        best: tuple[float, np.ndarray, np.ndarray, float, np.ndarray] | None = None
        for a, b, n, _k in self._faces:
            if float(d @ n) >= 0:  # moving away from or along this face
                continue
            e = b - a
            den = d[0] * e[1] - d[1] * e[0]
            if abs(den) < 1e-15:
                continue
            ap = a - p0
            s = (ap[0] * e[1] - ap[1] * e[0]) / den
            r = (ap[0] * d[1] - ap[1] * d[0]) / den
            if 0.0 <= s <= 1.0 and 0.0 <= r <= 1.0 and (best is None or s < best[0]):
                hit = p0 + s * d
                u = _u(heading)
                el = float(np.linalg.norm(e))
                w = e / el
                if float(u @ w) >= 0:
                    best = (s, hit, w, el * (1.0 - r), n)
                else:
                    best = (s, hit, -w, el * r, n)
        if best is None:
            return None
        _s, hit, w, remaining, n = best
        return hit, w, remaining, n


def _schema() -> Schema:
    return Schema(
        node="vine_collision_simulator",
        description="Simulated vine robot among obstacles (seed 004) publishing its base station, cap and force "
        "topics through the real drivers, with ground truth.",
        params=(
            Param("course", str, "three", "obstacle course: 'single' (the paper's sweep setup), 'three' or "
                  "'straight' (no obstacle: a drift calibration run)", choices=COURSES),
            Param("obstacle_angle", float, 150.0, "single course: obstacle angle", min=90.5, max=179.5, unit="deg"),
            Param("pivot_distance", float, 0.55, "single course: pivot post to the obstacle face", min=0.05,
                  max=3.0, unit="m"),
            Param("rate", float, 50.0, "base station frame rate", min=1.0, max=1000.0, unit="Hz"),
            Param("speed", float, 0.03, "growth speed", min=1e-4, max=1.0, unit="m/s"),
            Param("pressure", float, 10_000.0, "regulator setpoint", min=100.0, max=1e6, unit="Pa"),
            Param("hold_time", float, 0.15, "the cap's hold of a lost contact", min=0.0, unit="s"),
            Param("line_garbage", float, 0.02, "probability of garbage bytes before a serial frame", min=0.0,
                  max=1.0),
            Param("line_corrupt", float, 0.005, "probability of a corrupted serial frame", min=0.0, max=1.0),
            Param("seed", int, 0, "random seed of the sensor faults"),
            Param("burst_fraction", float, 0.0, "contact lost in bursts of about 0.3 s over this fraction of the "
                  "contact time (bounce, sliding along a wall)", min=0.0, max=0.9),
            Param("heading_drift", float, 2.0, "the cap heading's drift per metre grown", min=-90.0, max=90.0,
                  unit="deg/m"),
            Param("loop", bool, True, "start the course again when it ends"),
            Param("frame_prefix", str, "", "prefix of the published frame ids"),
            Param("world_frame", str, "world", "parent of the base in the static transform the node publishes; "
                  "'' for none"),
        ),
    )  # fmt: skip


SCHEMA = _schema()
