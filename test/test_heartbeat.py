"""Heartbeat diagnostics: every second on a steady timer of the node's own, the inputs at fault named.

``InputWatch`` (ROS-free) against a fake monotonic clock; then the collision-pivot and hinge-arc estimators on
stand-in rclpy (``ros_stand_ins``), fed by the simulators (independent models): before any input the heartbeat names
every input as never heard; when the length input stops (the issue's case: the last status stayed OK "all inputs
fresh") it names base/length as stale with its age; an IMU stamped 3 s ahead of the clock is named; two IMUs dead
from the start are named (the status used to say "16/18 IMUs heard"). Before, there was no heartbeat at all.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from ros_stand_ins import FakeNode, install

from shape_sensing.nodes._common import InputWatch
from shape_sensing.types import DiagnosticLevel

NS = "/robot_h"


class Clock:
    def __init__(self) -> None:
        self.ns = 10_000_000_000

    def __call__(self) -> int:
        return self.ns


def test_input_watch_names_never_heard_stale_and_future_stamped_inputs() -> None:
    clock = Clock()
    w = InputWatch(["a", "b", "c"], stale_s=1.0, required=2, monotonic_ns=clock)
    s = w.status("x: inputs")
    assert s.level == DiagnosticLevel.ERROR and s.message.startswith("0/3 inputs fresh; never heard: a, b, c")
    w.seen(0, 5_000_000_000, 5_000_000_000)
    w.seen(1, 5_000_000_000, 5_000_000_000)
    w.seen(2, 5_000_000_000, 5_000_000_000)
    assert w.status("x").level == DiagnosticLevel.OK and w.status("x").message == "3/3 inputs fresh: all inputs fresh"
    clock.ns += 1_500_000_000
    w.seen(0, 6_500_000_000, 6_500_000_000)
    w.seen(1, 9_500_000_000, 6_500_000_000)  # 3 s ahead of the node's clock
    s = w.status("x")
    assert s.level == DiagnosticLevel.WARN
    assert s.message == "2/3 inputs fresh; stale: c (1.5 s); stamped ahead of the clock: b (+3.0 s, 1 messages skipped)"
    clock.ns += 2_000_000_000
    assert w.status("x").level == DiagnosticLevel.ERROR  # nothing fresh now: fewer than the 2 required


def _collision(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeNode, FakeNode, Any]:
    install(monkeypatch, "shape_sensing.nodes.vine_collision_simulator")
    install(monkeypatch, "shape_sensing.nodes.collision_pivot_estimator")
    from shape_sensing.nodes.collision_pivot_estimator import CollisionPivotEstimatorNode
    from shape_sensing.nodes.vine_collision_simulator import VineCollisionSimulatorNode

    sim = FakeNode("vine_collision_simulator", {"course": "single", "speed": 0.1, "rate": 50.0})
    VineCollisionSimulatorNode(sim)
    est = FakeNode("collision_pivot_estimator", {"heading_drift_per_metre": math.radians(2.0)}, NS)
    app = CollisionPivotEstimatorNode(est)
    return sim, est, app


def _beat(node: FakeNode) -> Any:
    ((period, beat),) = node.steady_timers
    assert period == 1.0
    before = len(node.publishers["/diagnostics"].sent)
    beat()
    (msg,) = node.publishers["/diagnostics"].sent[before:]
    (status,) = [s for s in msg.status if s.name.endswith(": sensors heard")]
    return status


def test_collision_estimator_heartbeat_names_a_stopped_length_input(monkeypatch: pytest.MonkeyPatch) -> None:
    sim, est, app = _collision(monkeypatch)
    clock = Clock()
    app.watch._now = clock
    first = _beat(est)
    assert first.name == f"{NS}/collision_pivot_estimator: sensors heard" and first.hardware_id == NS
    assert first.level == DiagnosticLevel.ERROR.value
    assert "never heard: base/length, base/pressure, cap/state, cap/imu, obstacle/wrench" in first.message
    seen: dict[str, int] = {}
    for k in range(120):  # 2.4 s of data at 50 Hz; base/length stops after 1 s
        sim.now_ns = est.now_ns = 1_000_000_000 + k * 20_000_000
        clock.ns += 20_000_000
        sim.timers[0][1]()
        for topic, pub in sim.publishers.items():
            for msg in pub.sent[seen.get(topic, 0) :]:
                if topic in est.subscriptions and not (topic == "base/length" and k >= 50):
                    est.subscriptions[topic][1](msg)
            seen[topic] = len(pub.sent)
    status = _beat(est)
    assert status.level == DiagnosticLevel.ERROR.value
    assert status.message.startswith("4/5 inputs fresh; stale: base/length (1.4 s)"), status.message


def test_hinge_arc_heartbeat_names_dead_and_future_stamped_imus(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, "shape_sensing.nodes.vine_imu_simulator")
    srv = {"std_srvs": {}, "std_srvs.srv": {"Trigger": object}}
    install(monkeypatch, "shape_sensing.nodes.hinge_arc_estimator", srv)
    from shape_sensing.nodes.hinge_arc_estimator import HingeArcEstimatorNode
    from shape_sensing.nodes.vine_imu_simulator import VineImuSimulatorNode

    sim = FakeNode("vine_imu_simulator", {"rate": 50.0})
    VineImuSimulatorNode(sim)
    est = FakeNode("hinge_arc_estimator", {}, NS)
    app = HingeArcEstimatorNode(est)
    clock = Clock()
    app.watch._now = clock
    seen: dict[str, int] = {}
    for k in range(50):  # 1 s at 50 Hz; imu_03 and imu_11 dead, imu_05 stamped 3 s ahead
        sim.now_ns = est.now_ns = 1_000_000_000 + k * 20_000_000
        clock.ns += 20_000_000
        sim.timers[0][1]()
        for topic, pub in sim.publishers.items():
            for msg in pub.sent[seen.get(topic, 0) :]:
                if topic in ("imu_03/data", "imu_11/data") or topic not in est.subscriptions:
                    continue
                if topic == "imu_05/data":
                    msg.header.stamp.sec += 3
                est.subscriptions[topic][1](msg)
            seen[topic] = len(pub.sent)
    ((_, beat),) = est.steady_timers
    before = len(est.publishers["/diagnostics"].sent)
    beat()
    (status,) = [s for m in est.publishers["/diagnostics"].sent[before:] for s in m.status]
    assert status.name == f"{NS}/hinge_arc_estimator: sensors heard"
    assert status.level == DiagnosticLevel.WARN.value
    assert status.message.startswith(
        "17/19 inputs fresh; never heard: imu_03/data, imu_11/data; stamped ahead of the clock: imu_05/data (+3.0 s"
    ), status.message
    assert "estimates in the last second; straight reference:" in status.message


def test_hinge_arc_keeps_estimating_past_an_imu_stamped_in_the_future(monkeypatch: pytest.MonkeyPatch) -> None:
    """Messages stamped 3 s ahead on one IMU: before, the stamp-ordered input stage held them until the other IMUs'
    stamps caught up and then fed them to the tracker as current readings, 3 s old (and a stream of them from the
    start held the straight reference's capture, so nothing was estimated, the issue's stall). Here imu_05 sends half a
    second of such messages a second into the run: they are skipped, counted and named, and the estimate goes on at
    its 10 Hz through and after them. (A stream of them from the start still holds the automatic capture, which waits
    for every used IMU: the heartbeat names the IMU.)"""
    install(monkeypatch, "shape_sensing.nodes.vine_imu_simulator")
    srv = {"std_srvs": {}, "std_srvs.srv": {"Trigger": object}}
    install(monkeypatch, "shape_sensing.nodes.hinge_arc_estimator", srv)
    from shape_sensing.nodes.hinge_arc_estimator import HingeArcEstimatorNode
    from shape_sensing.nodes.vine_imu_simulator import VineImuSimulatorNode

    sim = FakeNode("vine_imu_simulator", {"rate": 50.0})
    VineImuSimulatorNode(sim)
    est = FakeNode("hinge_arc_estimator", {"publish_rate": 10.0}, NS)
    app = HingeArcEstimatorNode(est)
    seen: dict[str, int] = {}
    per_second = []
    for k in range(250):  # 5 s at 50 Hz; imu_05 stamped 3 s ahead from 1.2 s to 1.7 s
        sim.now_ns = est.now_ns = 1_000_000_000 + k * 20_000_000
        sim.timers[0][1]()
        for topic, pub in sim.publishers.items():
            for msg in pub.sent[seen.get(topic, 0) :]:
                if topic not in est.subscriptions:
                    continue
                if topic == "imu_05/data" and 60 <= k < 85:
                    msg.header.stamp.sec += 3
                est.subscriptions[topic][1](msg)
            seen[topic] = len(pub.sent)
        if k % 50 == 49:
            for _, release in est.timers:  # the input stage's release timer and the status timer
                release()
            per_second.append(app.tracker.stats.estimates)
    counts = list(np.diff([0, *per_second]))
    assert all(c >= 8 for c in counts[1:]), f"estimates per second of data: {counts}"  # 10 Hz, less the start
    assert app.tracker.stats.bad_samples == 25, app.tracker.stats  # every future-stamped message skipped, counted
    assert "stamped ahead of the clock: imu_05/data (+3.0 s, 25 messages skipped)" in app.watch.status("x").message
