"""The tof_ring node's wiring without ROS 2: stand-in node and rclpy modules, simulated buses."""

from __future__ import annotations

from typing import Any

import pytest
from ros_stand_ins import FakeNode, install


@pytest.fixture
def ros_stand_ins(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, "shape_sensing.nodes.tof_ring", {})


def _node(overrides: dict[str, Any]) -> FakeNode:
    return FakeNode("tof_ring", overrides)


def test_node_boots_the_simulated_rings_and_publishes(ros_stand_ins: None) -> None:
    from shape_sensing.nodes.tof_ring import TofRingNode

    node = _node({"simulate": True, "bias_duration": 0.5})
    app = TofRingNode(node)
    assert {"ring_0_tof_0/frame", "ring_0_tof_0/points", "ring_2_imu/imu", "/diagnostics", "/tf_static",
            "fov_markers"} <= set(node.publishers)  # fmt: skip
    assert node.publishers["ring_0_tof_0/frame"].qos == "sensor_data"
    assert node.publishers["/tf_static"].qos["durability"] == "transient_local"
    tf = node.publishers["/tf_static"].sent[0]
    assert len(tf.transforms) == 12 and tf.transforms[0].header.frame_id == "ring_0"
    assert len(node.publishers["fov_markers"].sent[0].markers) == 9
    (period, tick), (_, diag) = node.timers
    assert period == pytest.approx(0.002)
    for _ in range(2500):  # 5 s: firmware uploads at 1 MHz, then streaming
        tick()
        node.now_ns += 2_000_000
    diag()
    frames = node.publishers["ring_1_tof_2/frame"].sent
    assert len(frames) > 10 and frames[-1].header.frame_id == "ring_1_tof_2_optical" and frames[-1].zones_per_side == 8
    assert len(node.publishers["ring_1_tof_2/points"].sent) == len(frames)
    assert len(node.publishers["ring_0_imu/imu"].sent) > 300
    status = {s.name: s for s in node.publishers["/diagnostics"].sent[-1].status}
    assert status["/tof_ring: ring_2_tof_1"].message == "streaming"  # named after the node (at the root here)
    app.close()


def test_node_refuses_bad_parameters(ros_stand_ins: None) -> None:
    from shape_sensing.config import ConfigError
    from shape_sensing.nodes.tof_ring import TofRingNode

    with pytest.raises(ConfigError, match="ring_buses has 1 entries"):
        TofRingNode(_node({"simulate": True, "ring_buses": [1]}))
    with pytest.raises(ConfigError, match="firmware directory '/nonexistent' lacks"):
        TofRingNode(_node({"simulate": True, "firmware_dir": "/nonexistent"}))
