"""Online tracker (core of the continuum_estimator node): same output as the offline window, bad samples skipped."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from shape_sensing.config import ConfigError
from shape_sensing.estimators.continuum.model import Weights
from shape_sensing.estimators.continuum.synthetic import bending_strain, sample_measurements
from shape_sensing.estimators.continuum.window import SlidingWindow
from shape_sensing.messages.factory import default_factory
from shape_sensing.pipelines.continuum_tracker import SCHEMA, ContinuumMessages, ContinuumTracker

PARAMS = {
    "gyro_topics": ["g_mid", "g_tip"],
    "gyro_arc_lengths": [0.2, 0.4],
    "pose_topics": ["p_base", "p_tip"],
    "pose_arc_lengths": [0.0, 0.4],
    "length": 0.4,
    "nodes": 5,
    "rate": 20.0,
    "window_size": 4,
    "iterations": 2,
}


def _stream():
    fn = bending_strain(amplitude=2.0, frequency=0.5)
    rng = np.random.default_rng(5)
    pt = np.arange(0.0, 1.0, 1 / 47) + 0.003
    gt = np.arange(0.0, 1.0, 1 / 29) + 0.011
    return sample_measurements(fn, pt, [0.0, 0.4], gt, [0.2, 0.4], pose_sigma=(1e-3, 1e-2), gyro_sigma=1e-2, rng=rng)


@pytest.mark.parametrize("marginal", ["chain", "exact"])
def test_tracker_matches_offline_window(marginal: str) -> None:
    meas = _stream()
    tr = ContinuumTracker({**PARAMS, "marginal": marginal})
    t0_ns = 1_000_000_000_000
    # the first sample fixes the time origin: feed a base pose exactly at t = 0 first
    events = [(0.0, "pose", 0, np.eye(4))]
    events += [(t, "pose", int(s > 0), T) for t, s, T in zip(meas.pose_t, meas.pose_s, meas.pose_mat, strict=True)]
    events += [(t, "gyro", int(s > 0.3), w) for t, s, w in zip(meas.gyro_t, meas.gyro_s, meas.gyro_w, strict=True)]
    events.sort(key=lambda e: e[0])
    out = []
    for t, kind, i, v in events:
        stamp = t0_ns + round(t * 1e9)
        out += tr.push_pose(i, stamp, v) if kind == "pose" else tr.push_gyro(i, stamp, v)
    assert len(out) > 10
    assert all(b.stamp_ns - a.stamp_ns == 50_000_000 for a, b in itertools.pairwise(out))
    # offline: the same samples through the window directly
    w = tr.weights
    win = SlidingWindow(w, tr.s_nodes, 20.0, 0.0, size=4, iterations=2, marginal=marginal)
    from shape_sensing.estimators.continuum.model import Measurements

    m0 = Measurements(pose_t=np.array([0.0]), pose_s=np.array([0.0]), pose_mat=np.eye(4)[None])
    ref = win.run(Measurements.concat([m0, meas]), 1.0)
    for est in out:
        k = round((est.stamp_ns - t0_ns) / 50_000_000)
        assert np.abs(est.poses - ref.T[k]).max() < 1e-9
    cov = tr.tip_covariance(0)
    assert cov is not None and cov.shape == (6, 6) and np.all(np.linalg.eigvalsh(cov) > 0)
    assert out[0].position_covariance is not None


def test_bad_samples_are_counted_and_skipped() -> None:
    tr = ContinuumTracker(PARAMS)
    assert tr.push_gyro(0, 0, np.array([np.nan, 0, 0])) == []
    assert tr.push_gyro(7, 0, np.zeros(3)) == []
    bad_rot = np.eye(4)
    bad_rot[0, 0] = 2.0
    assert tr.push_pose(1, 0, bad_rot) == []
    assert tr.stats.skipped_bad == 3 and tr.stats.gyro == 0
    # saturated axes are counted and left out (NaN: not measured); the reading's other axis is kept
    tr.push_gyro(1, 0, np.array([6.0, -5.0, 0.25]))
    assert tr.stats.gyro == 1 and tr.stats.saturated_axes == 2 and tr.stats.skipped_bad == 3
    assert np.array_equal(tr._pending[-1].gyro_w[0], [np.nan, np.nan, 0.25], equal_nan=True)
    for k in range(40):
        tr.push_pose(1, k * 10_000_000, np.eye(4))
    assert tr.stats.steps > 4
    tr.push_gyro(0, 0, np.zeros(3))  # older than the window
    assert tr.stats.skipped_late == 1


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"gyro_arc_lengths": [0.2]}, "gyro_arc_lengths must have one entry per gyro_topics"),
        ({"pose_arc_lengths": [0.0, 0.5]}, r"sensor at 0.5 m is beyond the robot length 0.4 m"),
        ({"Q1": [1.0] * 5}, "Q1 must have 6 entries"),
        ({"R_gyro": [1.0, 0.0, 1.0]}, "R_gyro"),
        ({"window_size": 1}, "window_size"),
        ({"marginal": "dense"}, "marginal"),
        ({"marginal_band": 0}, "marginal_band"),
    ],
)
def test_bad_parameters(change: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        ContinuumTracker({**PARAMS, **change})


def test_schema_defaults_are_the_real_robot() -> None:
    d = SCHEMA.defaults()
    assert d["length"] == 0.466 and d["nodes"] == 5 and d["prior_factor"] == 0.15
    tr = ContinuumTracker(d)
    assert isinstance(tr.weights, Weights)


def test_messages_round_trip_through_cdr() -> None:
    meas = _stream()
    tr = ContinuumTracker(PARAMS)
    out = []
    for t, s, T in zip(meas.pose_t, meas.pose_s, meas.pose_mat, strict=True):
        out += tr.push_pose(int(s > 0), round(t * 1e9), T)
    est = out[0]
    f = default_factory()
    built = ContinuumMessages(f, frame_prefix="r1/").build(est, tr.tip_covariance(0))
    topics = [t for t, _ in built]
    assert topics == ["/tf", "shape/path", "shape/tip", "shape/markers"]
    types = {
        "/tf": "tf2_msgs/msg/TFMessage",
        "shape/path": "nav_msgs/msg/Path",
        "shape/tip": "geometry_msgs/msg/PoseWithCovarianceStamped",
        "shape/markers": "visualization_msgs/msg/MarkerArray",
    }
    for topic, msg in built:
        raw = f.typestore.serialize_cdr(msg, types[topic])
        back = f.typestore.deserialize_cdr(raw, types[topic])
        if topic == "/tf":
            assert [t.child_frame_id for t in back.transforms] == [f"r1/continuum_node_{i:02d}" for i in range(5)]
            assert back.transforms[0].header.frame_id == "r1/continuum_base"
            p = back.transforms[-1].transform.translation
            assert np.allclose([p.x, p.y, p.z], est.poses[-1, :3, 3])
        if topic == "shape/tip":
            cov = np.asarray(back.pose.covariance).reshape(6, 6)
            assert np.allclose(cov, tr.tip_covariance(0)) and cov[0, 0] > 0
        if topic == "shape/path":
            assert len(back.poses) == 30 and back.header.frame_id == "r1/continuum_base"
