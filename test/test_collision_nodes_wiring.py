"""The collision nodes' wiring without ROS 2 (stand-in rclpy): drivers on a pty and on loopback UDP, the
simulator node feeding the estimator node, bad configuration refused with the parameter named."""

from __future__ import annotations

import math
import time

import pytest
from ros_stand_ins import FakeNode, install

from shape_sensing.config import ConfigError
from shape_sensing.sim.base_station_emulator import BaseStationEmulator, PtyLink
from shape_sensing.sim.netft_emulator import NetFtEmulator


def _tick(node: FakeNode, index: int = 0) -> None:
    node.timers[index][1]()


def test_base_station_node_publishes_frames_read_from_a_pty(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, "shape_sensing.nodes.base_station")
    from shape_sensing.nodes.base_station import BaseStationNode

    emu = BaseStationEmulator()
    with PtyLink() as link:
        node = FakeNode("base_station", {"port": link.path, "metres_per_count": 0.00025})
        app = BaseStationNode(node)
        for k in range(10):
            link.write(emu.step(0.02 * k, 0.5 + 0.01 * k, 9_000.0, 9_000.0, True, 0b110))
        deadline = time.monotonic() + 3.0
        while len(node.publishers["base/length"].sent) < 10 and time.monotonic() < deadline:
            _tick(node)
            time.sleep(0.005)
        app.driver.port.close()
    lengths = [m.position[0] for m in node.publishers["base/length"].sent]
    assert lengths == pytest.approx([0.5 + 0.01 * k for k in range(10)], abs=1.25e-4)
    assert node.publishers["base/state"].sent[0].cap_switches == 0b110
    assert node.publishers["base/pressure"].sent[0].fluid_pressure == pytest.approx(9_000.0, abs=20.0)
    _tick(node, 1)
    assert node.publishers["/diagnostics"].sent[-1].status[0].message.startswith("streaming")


def test_base_station_node_refuses_a_missing_port(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, "shape_sensing.nodes.base_station")
    from shape_sensing.nodes.base_station import BaseStationNode

    with pytest.raises(ConfigError, match="parameter 'port' = '/dev/nonexistent-tty'"):
        BaseStationNode(FakeNode("base_station", {"port": "/dev/nonexistent-tty"}))
    with pytest.raises(ConfigError, match="parameter 'baud' = 10"):
        BaseStationNode(FakeNode("base_station", {"baud": 10}))


def test_netft_node_streams_from_the_loopback_emulator(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, "shape_sensing.nodes.netft")
    from shape_sensing.nodes.netft import NetFtNode

    with NetFtEmulator() as emu:
        node = FakeNode("netft", {"address": "127.0.0.1", "port": emu.address[1], "bind_address": "127.0.0.1"})
        app = NetFtNode(node)
        deadline = time.monotonic() + 3.0
        while not emu.streaming and time.monotonic() < deadline:
            emu.serve()
            time.sleep(0.002)
        for k in range(5):
            emu.send([0.0, 0.0, 1.0 + k])
        while len(node.publishers["wrench"].sent) < 5 and time.monotonic() < deadline:
            _tick(node)
            time.sleep(0.002)
        app.close()
        time.sleep(0.01)
        emu.serve()
        assert not emu.streaming  # stopped at shutdown
    assert [m.wrench.force.z for m in node.publishers["wrench"].sent] == pytest.approx([1, 2, 3, 4, 5], abs=1e-6)


def test_simulator_node_feeds_the_estimator_node(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, "shape_sensing.nodes.vine_collision_simulator")
    install(monkeypatch, "shape_sensing.nodes.collision_pivot_estimator")
    install(monkeypatch, "shape_sensing.nodes.contact_cap")
    from shape_sensing.nodes.collision_pivot_estimator import CollisionPivotEstimatorNode
    from shape_sensing.nodes.contact_cap import ContactCapNode
    from shape_sensing.nodes.vine_collision_simulator import VineCollisionSimulatorNode

    sim_node = FakeNode("vine_collision_simulator", {"course": "single", "speed": 0.1, "rate": 50.0})
    VineCollisionSimulatorNode(sim_node)
    est_node = FakeNode("collision_pivot_estimator", {"heading_drift_per_metre": math.radians(2.0),
                                                      "pressure_drop_per_metre": 0.06})  # fmt: skip
    est = CollisionPivotEstimatorNode(est_node)
    cap_node = FakeNode("contact_cap", {"i2c_bus": -1})
    ContactCapNode(cap_node)
    assert set(est_node.subscriptions) == {"base/length", "base/pressure", "cap/state", "cap/imu", "obstacle/wrench"}
    seen = {topic: 0 for topic in sim_node.publishers}
    for k in range(700):  # 14 s at 10 cm/s: past the obstacle
        sim_node.now_ns = est_node.now_ns = 1_000_000_000 + k * 20_000_000  # one clock, as on a robot
        _tick(sim_node)
        for topic, pub in sim_node.publishers.items():
            for msg in pub.sent[seen.get(topic, 0):]:
                if topic in est_node.subscriptions:
                    est_node.subscriptions[topic][1](msg)
                if topic in cap_node.subscriptions:
                    cap_node.subscriptions[topic][1](msg)
            seen[topic] = len(pub.sent)
    pivots = est_node.publishers["collision/pivot"].sent
    assert len(pivots) > 600 and any(m.in_contact for m in pivots)
    truth = sim_node.publishers["truth/tip"].sent[-1].pose.position
    tip = pivots[-1].tip.position
    assert math.hypot(tip.x - truth.x, tip.y - truth.y) < 0.05
    assert est_node.publishers["/tf"].sent[-1].transforms[0].child_frame_id == "vine_tip"
    kinds = [m.kind for m in est_node.publishers["collision/events"].sent]
    assert kinds[:1] == [0] and 2 in kinds  # contact start, then a pivot fixed
    # the cap node derives the same contact state from the base station's frames
    assert [m.switch_mask for m in cap_node.publishers["cap/state"].sent] == [
        m.switch_mask for m in sim_node.publishers["cap/state"].sent
    ]
    assert est.tracker.bad_samples == 0
    with pytest.raises(ConfigError, match="parameter 'filter' = 'kalman'"):
        CollisionPivotEstimatorNode(FakeNode("collision_pivot_estimator", {"filter": "kalman"}))
