"""``/diagnostics`` of the driver nodes and the collision-pivot estimator (stand-in rclpy, no ROS 2).

As diagnostic_updater does: about once per second (the estimator by its data's stamps, the drivers on a 1 s
timer), status names qualified by the node's full name and ``hardware_id`` set to the node's namespace, so
two robots in two namespaces report distinct statuses (what diagnostic_aggregator needs).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
from ros_stand_ins import FakeNode, install

NS = "/robot_b"


def _statuses(node: FakeNode) -> list[Any]:
    return [s for msg in node.publishers["/diagnostics"].sent for s in msg.status]


# Drivers whose statuses name their own device in hardware_id (kept: qualify_status sets only an empty one).
OWN_HARDWARE_IDS = {"tof_ring", "bno055_chain"}


def _assert_named_after(node: FakeNode, name: str) -> None:
    statuses = _statuses(node)
    assert statuses, "no diagnostics published"
    full = f"{NS}/{name}"
    assert all(s.name.startswith(f"{full}: ") for s in statuses), [s.name for s in statuses]
    ids = {s.hardware_id for s in statuses}
    if name in OWN_HARDWARE_IDS:
        assert "" not in ids, ids
    else:
        assert ids == {NS}


def test_collision_pivot_estimator_diagnostics_once_per_second_named_after_the_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install(monkeypatch, "shape_sensing.nodes.vine_collision_simulator")
    install(monkeypatch, "shape_sensing.nodes.collision_pivot_estimator")
    from shape_sensing.nodes.collision_pivot_estimator import CollisionPivotEstimatorNode
    from shape_sensing.nodes.vine_collision_simulator import VineCollisionSimulatorNode

    sim_node = FakeNode("vine_collision_simulator", {"course": "single", "speed": 0.1, "rate": 50.0})
    VineCollisionSimulatorNode(sim_node)
    est_node = FakeNode("collision_pivot_estimator", {"heading_drift_per_metre": math.radians(2.0)}, NS)
    CollisionPivotEstimatorNode(est_node)
    seen: dict[str, int] = {}
    for k in range(175):  # 3.5 s of data at 50 Hz
        sim_node.now_ns = est_node.now_ns = 1_000_000_000 + k * 20_000_000  # one clock, as on a robot
        sim_node.timers[0][1]()
        for topic, pub in sim_node.publishers.items():
            for msg in pub.sent[seen.get(topic, 0) :]:
                if topic in est_node.subscriptions:
                    est_node.subscriptions[topic][1](msg)
            seen[topic] = len(pub.sent)
    steps = est_node.publishers["collision/pivot"].sent
    diag = est_node.publishers["/diagnostics"].sent
    assert len(steps) > 150
    span_s = (steps[-1].header.stamp.sec - steps[0].header.stamp.sec) + 1e-9 * (
        steps[-1].header.stamp.nanosec - steps[0].header.stamp.nanosec
    )
    assert len(diag) == math.floor(span_s) + 1  # one at the first step, then one per second of stamps
    _assert_named_after(est_node, "collision_pivot_estimator")
    names = {s.name for s in _statuses(est_node)}
    assert names == {f"{NS}/collision_pivot_estimator: collision: inputs",
                     f"{NS}/collision_pivot_estimator: collision: estimator"}  # fmt: skip


def _contact_cap(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeNode, Callable[[], None], Callable[[], None]]:
    install(monkeypatch, "shape_sensing.nodes.contact_cap")
    from shape_sensing.nodes.contact_cap import ContactCapNode

    node = FakeNode("contact_cap", {"i2c_bus": -1}, NS)
    ContactCapNode(node)
    return node, node.timers[-1][1], lambda: None


def _tof_ring(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeNode, Callable[[], None], Callable[[], None]]:
    install(monkeypatch, "shape_sensing.nodes.tof_ring", {})
    from shape_sensing.nodes.tof_ring import TofRingNode

    node = FakeNode("tof_ring", {"simulate": True}, NS)
    app = TofRingNode(node)
    return node, node.timers[1][1], app.close


def _bno055_chain(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeNode, Callable[[], None], Callable[[], None]]:
    install(monkeypatch, "shape_sensing.nodes.bno055_chain", {"std_srvs": {}, "std_srvs.srv": {"Trigger": object}})
    from shape_sensing.nodes.bno055_chain import Bno055ChainNode

    node = FakeNode("bno055_chain", {"simulate": True}, NS)
    Bno055ChainNode(node)
    return node, node.timers[1][1], lambda: None


def _wt901(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeNode, Callable[[], None], Callable[[], None]]:
    install(monkeypatch, "shape_sensing.nodes.wt901", {"std_srvs": {}, "std_srvs.srv": {"Trigger": object}})
    from shape_sensing.nodes.wt901 import Wt901Node

    node = FakeNode("wt901", {"mode": "uart", "frame_ids": ["a", "b"], "ports": ["loop://", "loop://"]}, NS)
    Wt901Node(node)
    return node, node.timers[1][1], lambda: None


def _netft(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeNode, Callable[[], None], Callable[[], None]]:
    install(monkeypatch, "shape_sensing.nodes.netft")
    from shape_sensing.nodes.netft import NetFtNode

    node = FakeNode("netft", {"address": "127.0.0.1", "port": 49152, "bind_address": "127.0.0.1"}, NS)
    app = NetFtNode(node)
    return node, node.timers[1][1], app.close


def _base_station(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeNode, Callable[[], None], Callable[[], None]]:
    install(monkeypatch, "shape_sensing.nodes.base_station")
    from shape_sensing.nodes.base_station import BaseStationNode
    from shape_sensing.sim.base_station_emulator import PtyLink

    link = PtyLink().__enter__()
    node = FakeNode("base_station", {"port": link.path}, NS)
    app = BaseStationNode(node)

    def close() -> None:
        app.driver.port.close()
        link.__exit__(None, None, None)

    return node, node.timers[1][1], close


@pytest.mark.parametrize(
    ("name", "make"),
    [
        ("contact_cap", _contact_cap),
        ("tof_ring", _tof_ring),
        ("bno055_chain", _bno055_chain),
        ("wt901", _wt901),
        ("netft", _netft),
        ("base_station", _base_station),
    ],
)
def test_driver_diagnostics_named_after_the_node(
    name: str, make: Callable[..., tuple[FakeNode, Callable[[], None], Callable[[], None]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    node, diagnostics, close = make(monkeypatch)
    try:
        diagnostics()
    finally:
        close()
    _assert_named_after(node, name)
