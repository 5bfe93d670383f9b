"""The bno055_chain node's wiring without ROS 2: a stand-in node object and stand-in rclpy modules.

What it publishes is built by the tested message layer (ChainMessages); this checks the node plumbing around it:
parameters declared from the schema, one publisher per sensor topic, the timers, and the two services.
"""

from __future__ import annotations

import types
from typing import Any

import pytest
from ros_stand_ins import FakeNode, install

from shape_sensing.drivers.bno055_chain import SCHEMA, CalibrationStore


class Trigger:
    Request = types.SimpleNamespace

    class Response:
        success = False
        message = ""


@pytest.fixture
def ros_stand_ins(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, "shape_sensing.nodes.bno055_chain", {"std_srvs": {}, "std_srvs.srv": {"Trigger": Trigger}})


def _node(overrides: dict[str, Any]) -> FakeNode:
    return FakeNode("bno055_chain", overrides)


def test_node_wiring_topics_timers_and_services(ros_stand_ins: None, tmp_path) -> None:
    from shape_sensing.nodes.bno055_chain import Bno055ChainNode

    cal = tmp_path / "cal.yaml"
    node = _node({"simulate": True, "calibration_file": str(cal), "rate": 50.0})
    app = Bno055ChainNode(node)
    assert sorted(p for p in node.publishers if p.startswith("imu_00/")) == [
        "imu_00/calibration_status", "imu_00/data", "imu_00/mag", "imu_00/temperature"]  # fmt: skip
    assert node.publishers["imu_00/data"].qos == "sensor_data"
    assert node.publishers["imu_00/calibration_status"].qos["durability"] == "transient_local"
    assert set(node.services) == {"~/save_calibration", "~/restore_calibration"}
    (period, tick), (diag_period, diag) = node.timers
    assert period == pytest.approx(1 / 50.0) and diag_period == SCHEMA["diagnostics_period"].default
    for _ in range(60):
        tick()
        node.now_ns += 20_000_000
    diag()
    imu = node.publishers["imu_00/data"].sent
    assert len(imu) > 40 and imu[-1].header.frame_id == "vine_imu_00"
    assert node.publishers["/diagnostics"].sent[-1].status[-1].message == "18/18 sensors streaming"
    # Services: save the captured profiles, then restore them.
    response = node.services["~/save_calibration"](None, Trigger.Response())
    assert response.success, response.message
    assert len(CalibrationStore.load(cal).profiles) == 18
    response = node.services["~/restore_calibration"](None, Trigger.Response())
    assert response.success and "18 profile" in response.message
    app.close()


def test_node_refuses_a_bad_topology(ros_stand_ins: None) -> None:
    from shape_sensing.config import ConfigError
    from shape_sensing.nodes.bno055_chain import Bno055ChainNode

    bad = {"simulate": True, "sensor_channels": [0] * 18}  # 9 pairs of sensors on one path and address
    with pytest.raises(ConfigError, match="have the same path"):
        Bno055ChainNode(_node(bad))
