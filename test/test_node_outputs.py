"""What the estimator nodes publish, checked on the ROS-free core they share with bags and replay.

* No two estimates carry the same stamp (``/tf`` entries with a repeated stamp
  are dropped by tf2): when data arrive in a burst that spans several
  publishing ticks, only the first tick's estimate is made from it.
* ``/diagnostics`` comes about once per second of data (as diagnostic_updater
  does), not with every estimate; status names carry the node's fully
  qualified name and ``hardware_id`` is set, so two robots report distinct
  statuses; a warning raised between two releases is still released.
* The vine tip pose's covariance gives its unestimated orientation block a
  huge variance (1e6 rad^2 on the diagonal) and stays positive definite, as
  robot_localization, nav2 and RViz read a covariance (no negative mark).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from shape_sensing.estimators.hinge_arc import SCHEMA
from shape_sensing.messages.factory import default_factory
from shape_sensing.pipelines.common import DiagnosticsThrottle, qualify_status
from shape_sensing.pipelines.hyper_redundant import EstimateMessages, HyperRedundantTracker
from shape_sensing.pipelines.vine_imu import ShapeMessages, VineImuTracker
from shape_sensing.sim.vine import VineSimConfig, VineSimulator
from shape_sensing.types import DiagnosticLevel, DiagnosticStatus, ImuSample


def _vine_estimates(stamps_s: list[float], **params: object) -> list:
    sim = VineSimulator(VineSimConfig(scenario="active", duration=4.0, rate=100.0))
    tracker = VineImuTracker(SCHEMA.defaults() | {"length_topic": ""} | params)
    out = []
    for t in stamps_s:
        for i, sample in enumerate(sim.imu_samples(t)):
            out += tracker.push_imu(i, sample)
    return out


def test_vine_estimates_never_repeat_a_stamp_across_a_burst_gap() -> None:
    # 100 Hz data with a 0.25 s hole: the first sample after it makes 7-8 publishing ticks (30 Hz) due at once,
    # all from the same newest data. Only one estimate may come from that data.
    stamps = [k / 100.0 for k in range(100)] + [1.25 + k / 100.0 for k in range(50)]
    est = _vine_estimates(stamps)
    s = [e.stamp_ns for e in est]
    assert len(s) > 40
    assert all(b > a for a, b in itertools.pairwise(s)), "an estimate repeated the previous one's stamp"
    # about 30 Hz over the 1.5 s of data, one (not eight) across the hole
    assert 40 <= len(s) <= 48


def test_rigid_module_estimates_never_repeat_a_stamp() -> None:
    tr = HyperRedundantTracker({"n_modules": 4, "publish_rate": 20.0}, rods_s=0.0)
    q = np.array([0.0, 0.0, 0.0, 1.0])
    out = []
    stamps = [k * 10_000_000 for k in range(1, 50)] + [1_000_000_000 + k * 10_000_000 for k in range(50)]
    for stamp in stamps:
        for i in range(5):
            out += tr.push_imu(ImuSample(stamp, f"platform_{i}", q), i)
    s = [e.shape.stamp_ns for e in out]
    assert len(s) > 15
    assert all(b > a for a, b in itertools.pairwise(s))


def test_diagnostics_about_once_per_second_named_after_the_node() -> None:
    est = _vine_estimates([k / 100.0 for k in range(301)])  # 3 s of data, 30 Hz of estimates
    messages = ShapeMessages(
        default_factory(), diagnostics=DiagnosticsThrottle(node="/vine/hinge_arc_estimator", hardware_id="/vine")
    )
    diag = [msg for e in est for topic, msg in messages.build(e) if topic == "/diagnostics"]
    assert len(est) > 80
    assert len(diag) == 3  # at 0, 1 and 2 s of data stamps
    names = {s.name for d in diag for s in d.status}
    # the shape status and the straight reference's status, both under the node's qualified name
    assert names == {"/vine/hinge_arc_estimator: shape", "/vine/hinge_arc_estimator: straight reference"}
    assert {s.hardware_id for d in diag for s in d.status} == {"/vine"}


def test_two_robots_report_distinct_status_names() -> None:
    s = DiagnosticStatus("hinge_arc_estimator: shape", DiagnosticLevel.OK, "ok")
    a = qualify_status(s, "/robot_a/hinge_arc_estimator", "/robot_a")
    b = qualify_status(s, "/robot_b/hinge_arc_estimator", "/robot_b")
    assert (a.name, b.name) == ("/robot_a/hinge_arc_estimator: shape", "/robot_b/hinge_arc_estimator: shape")
    other = qualify_status(DiagnosticStatus("rigid_module/inputs", DiagnosticLevel.WARN, "x"), "/hr/rigid", "/hr")
    assert other.name == "/hr/rigid: rigid_module/inputs" and other.hardware_id == "/hr"


def test_a_warning_between_releases_is_released() -> None:
    throttle = DiagnosticsThrottle(node="/n/x")
    ok = DiagnosticStatus("x: shape", DiagnosticLevel.OK, "ok")
    warn = DiagnosticStatus("x: shape", DiagnosticLevel.WARN, "bent past L/D")
    assert throttle.add(0, [ok]) is not None
    assert throttle.add(300_000_000, [warn]) is None
    assert throttle.add(600_000_000, [ok]) is None
    out = throttle.add(1_000_000_000, [ok])
    assert out is not None and [(s.level, s.message) for s in out] == [(DiagnosticLevel.WARN, "bent past L/D")]


def test_rigid_module_diagnostics_throttled() -> None:
    tr = HyperRedundantTracker({"n_modules": 4, "publish_rate": 20.0}, rods_s=0.0)
    q = np.array([0.0, 0.0, 0.0, 1.0])
    messages = EstimateMessages(default_factory(), diagnostics=DiagnosticsThrottle(node="/hr/rigid_module_estimator"))
    topics = []
    for k in range(1, 251):  # 2.5 s at 100 Hz
        for i in range(5):
            for est in tr.push_imu(ImuSample(k * 10_000_000, f"platform_{i}", q), i):
                topics += [t for t, _ in messages.build(est)]
    assert topics.count("shape/path") > 40
    assert topics.count("/diagnostics") == 3


def test_vine_tip_covariance_marks_orientation_unobserved_and_is_positive_definite() -> None:
    # readings taken as exact (no noise, no drift): nothing shortens the straight robot by chance
    (est,) = _vine_estimates([0.0, 0.01, 0.02, 0.05], orientation_noise_deg=0.0, drift_deg_per_min=0.0)[:1]
    tip = dict(ShapeMessages(default_factory()).build(est))["shape/tip"]
    cov = np.asarray(tip.pose.covariance).reshape(6, 6)
    assert np.array_equal(cov[3:, 3:], np.diag([1e6] * 3))  # sigma 1000 rad: no orientation information
    assert not cov[:3, 3:].any() and not cov[3:, :3].any()
    assert est.position_covariance is not None
    # the first estimate is of a straight robot: with exact readings no spread at all, a rank-deficient position
    # block whose computed eigenvalues may lie a rounding error below zero (RViz: "Negative eigenvalue found")
    assert np.linalg.eigvalsh(est.position_covariance[-1]).min() < 1e-20
    # published: the same block within the 1e-12 m^2 floor, symmetric, every eigenvalue positive
    np.testing.assert_allclose(cov[:3, :3], est.position_covariance[-1], rtol=0, atol=1.01e-12)
    assert np.array_equal(cov, cov.T)
    assert np.linalg.eigvalsh(cov[:3, :3]).min() >= 0.99e-12
    assert np.linalg.eigvalsh(cov).min() > 0.0


def test_throttle_period_must_be_positive() -> None:
    with pytest.raises(ValueError, match="diagnostics period 0.0 s: expected a positive period"):
        DiagnosticsThrottle(0.0)


def test_continuum_slice_grid_does_not_depend_on_the_first_sample_received() -> None:
    """A node that misses the first samples of a bag play slices at the same stamps as a replay of the whole bag.

    The slice grid sits on whole multiples of the slice period in the stamps' clock; before, it started at the
    first sample received, so a late start shifted every slice (by 12 ms in the first ROS 2 run).
    """
    from shape_sensing.pipelines.continuum_tracker import ContinuumTracker

    params = {"gyro_topics": ["g_mid", "g_tip"], "gyro_arc_lengths": [0.2, 0.4], "pose_topics": ["p_base", "p_tip"],
              "pose_arc_lengths": [0.0, 0.4], "length": 0.4, "nodes": 5, "rate": 30.0, "window_size": 4}  # fmt: skip
    t0 = 1_795_480_407_611_966_894  # a wall-clock stamp, not on the grid
    tip = np.eye(4)
    tip[2, 3] = 0.4
    events = []
    for k in range(120):  # 1.2 s of 100 Hz poses and gyros, straight and still
        stamp = t0 + k * 10_000_000
        events += [("pose", 0, stamp, np.eye(4)), ("pose", 1, stamp, tip)]
        events += [("gyro", 0, stamp + 3_000_000, np.zeros(3)), ("gyro", 1, stamp + 3_000_000, np.zeros(3))]

    def run(skip: int) -> dict[int, np.ndarray]:
        tr = ContinuumTracker(params)
        out = []
        for kind, i, stamp, v in events[skip:]:
            out += tr.push_pose(i, stamp, v) if kind == "pose" else tr.push_gyro(i, stamp, v)
        return {e.stamp_ns: e.poses for e in out}

    whole, late = run(0), run(4 * 5 + 2)  # the late node missed the first 5 cycles and half of the 6th
    assert len(whole) > 20 and len(late) > 20
    common = sorted(set(whole) & set(late))
    assert common == sorted(late)[: len(common)] and len(common) >= len(late) - 1, "slices at other stamps"
    # on the absolute grid k / 30 s (within the 1 ns of rounding a stamp): s * 30 is a whole number of seconds
    assert all(min((s * 30) % 10**9, 10**9 - (s * 30) % 10**9) <= 30 for s in whole)
    for s in common[-5:]:  # a still robot: both agree once the window has moved on
        assert np.abs(whole[s][:, :3, 3] - late[s][:, :3, 3]).max() < 1e-6


def test_chained_goal_to_vertical_reports_direction_not_an_undefined_heading() -> None:
    """The 138.6 deg "heading error" of a chained goal: Eq. 27's azimuth difference at a vertical goal direction.

    The predicted tip is a fraction of a degree off the vertical goal direction, yet the azimuths differ by
    tens of degrees; the log reports the direction error and calls the heading undefined there.
    """
    import yaml

    from shape_sensing.config import flatten
    from shape_sensing.planning.executor import describe_errors
    from shape_sensing.planning.growth_planner import SCHEMA as PLANNER_SCHEMA
    from shape_sensing.planning.growth_planner import GrowthPlanner

    path = Path(__file__).resolve().parents[1] / "config" / "growth_planner.yaml"
    config = yaml.safe_load(path.read_text())["/**/growth_planner"]["ros__parameters"]
    planner = GrowthPlanner(PLANNER_SCHEMA.validate(flatten(config)))
    first = planner.plan(np.array([0.4, 0.3, 0.1]), np.array([1.0, 0.0, 0.0]))
    planner.advance(first)
    up = np.array([0.0, 0.0, 1.0])
    chained = planner.plan(np.array([0.6, 0.6, 0.3]), up)
    e = chained.execution.errors
    assert e["direction_deg"] < 1.0 and e["position"] < 2e-3  # the prediction reaches the goal
    assert e["heading_deg"] > 20.0  # while Eq. 27's azimuth difference is meaningless there
    line = describe_errors(e, up)
    assert "heading undefined (goal direction 0.0 deg from vertical)" in line
    assert f"direction {e['direction_deg']:.2f} deg" in line
    level = describe_errors(first.execution.errors, [1.0, 0.0, 0.0])
    assert f"heading {first.execution.errors['heading_deg']:.2f} deg" in level


def test_positive_definite_floors_only_what_is_below_the_floor() -> None:
    from shape_sensing.messages.common import VARIANCE_FLOOR, positive_definite

    rng = np.random.default_rng(3)
    a = rng.normal(size=(3, 3))
    full = a @ a.T + np.eye(3) * 1e-4  # well conditioned: returned as given
    assert np.array_equal(positive_definite(full), full)
    u = a[:, :2]
    rank2 = u @ u.T * 1e-5  # PSD with a zero eigenvalue (rounding may make it slightly negative)
    out = positive_definite(rank2)
    w = np.linalg.eigvalsh(out)
    assert w.min() >= 0.999 * VARIANCE_FLOOR and np.allclose(np.sort(w)[1:], np.linalg.eigvalsh(rank2)[1:])
    assert np.abs(out - rank2).max() <= 1.001 * VARIANCE_FLOOR
    batch = positive_definite(np.stack([full, rank2]))
    assert batch.shape == (2, 3, 3) and np.linalg.eigvalsh(batch).min() > 0
