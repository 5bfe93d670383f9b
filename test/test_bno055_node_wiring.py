"""The bno055_chain node's wiring without ROS 2: a stand-in node object and stand-in rclpy modules.

What it publishes is built by the tested message layer (ChainMessages); this checks the node plumbing around it:
parameters declared from the schema, one publisher per sensor topic, the timers, and the two services.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from shape_sensing.drivers.bno055_chain import SCHEMA, CalibrationStore
from shape_sensing.messages.factory import default_factory


class _Publisher:
    def __init__(self, cls: Any, topic: str, qos: Any) -> None:
        self.cls, self.topic, self.qos, self.sent = cls, topic, qos, []

    def publish(self, msg: Any) -> None:
        self.sent.append(msg)


class _Logger:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, text: str) -> None:
        self.lines.append(text)

    warning = error = debug = fatal = info


class _FakeNode:
    def __init__(self, overrides: dict[str, Any]) -> None:
        self._parameter_overrides = overrides
        self.publishers: dict[str, _Publisher] = {}
        self.services: dict[str, Any] = {}
        self.timers: list[tuple[float, Any]] = []
        self.now_ns = 1_000_000_000
        self.logger = _Logger()

    def get_name(self) -> str:
        return "bno055_chain"

    def declare_parameter(self, name: str, default: Any, descriptor: Any) -> Any:
        value = self._parameter_overrides.get(name, default)
        return types.SimpleNamespace(value=None if isinstance(value, _Type) else value)

    def create_publisher(self, cls: Any, topic: str, qos: Any) -> _Publisher:
        self.publishers[topic] = _Publisher(cls, topic, qos)
        return self.publishers[topic]

    def create_service(self, srv: Any, name: str, callback: Any) -> None:
        self.services[name] = callback

    def create_timer(self, period: float, callback: Any) -> None:
        self.timers.append((period, callback))

    def get_clock(self) -> Any:
        return types.SimpleNamespace(now=lambda: types.SimpleNamespace(nanoseconds=self.now_ns))

    def get_logger(self) -> _Logger:
        return self.logger


class _Type(str):
    pass


@pytest.fixture
def ros_stand_ins(monkeypatch: pytest.MonkeyPatch) -> None:
    def module(name: str, **attrs: Any) -> types.ModuleType:
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, m)
        return m

    names = ["BOOL", "INTEGER", "DOUBLE", "STRING", "BOOL_ARRAY", "INTEGER_ARRAY", "DOUBLE_ARRAY", "STRING_ARRAY"]
    module("rclpy")
    module("rclpy.exceptions")
    parameter_types = types.SimpleNamespace(**{n: _Type(n) for n in names})
    module("rclpy.parameter", Parameter=types.SimpleNamespace(Type=parameter_types))
    module("rclpy.qos", qos_profile_sensor_data="sensor_data", QoSProfile=lambda **kw: kw,
           DurabilityPolicy=types.SimpleNamespace(VOLATILE="volatile", TRANSIENT_LOCAL="transient_local"),
           HistoryPolicy=types.SimpleNamespace(KEEP_LAST="keep_last"),
           ReliabilityPolicy=types.SimpleNamespace(RELIABLE="reliable"))  # fmt: skip
    module("rcl_interfaces")
    module("rcl_interfaces.msg", ParameterDescriptor=lambda **kw: kw,
           ParameterType=types.SimpleNamespace(**{f"PARAMETER_{n}": i for i, n in enumerate(names)}))  # fmt: skip

    class Trigger:
        Request = types.SimpleNamespace

        class Response:
            success = False
            message = ""

    module("std_srvs")
    module("std_srvs.srv", Trigger=Trigger)
    import shape_sensing.nodes.bno055_chain as node_module

    monkeypatch.setattr(node_module, "MessageFactory", lambda backend: default_factory())


def test_node_wiring_topics_timers_and_services(ros_stand_ins: None, tmp_path) -> None:
    from shape_sensing.nodes.bno055_chain import Bno055ChainNode

    cal = tmp_path / "cal.yaml"
    node = _FakeNode({"simulate": True, "calibration_file": str(cal), "rate": 50.0})
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
    response = node.services["~/save_calibration"](None, sys.modules["std_srvs.srv"].Trigger.Response())
    assert response.success, response.message
    assert len(CalibrationStore.load(cal).profiles) == 18
    response = node.services["~/restore_calibration"](None, sys.modules["std_srvs.srv"].Trigger.Response())
    assert response.success and "18 profile" in response.message
    app.close()


def test_node_refuses_a_bad_topology(ros_stand_ins: None) -> None:
    from shape_sensing.config import ConfigError
    from shape_sensing.nodes.bno055_chain import Bno055ChainNode

    bad = {"simulate": True, "sensor_channels": [0] * 18}  # 9 pairs of sensors on one path and address
    with pytest.raises(ConfigError, match="have the same path"):
        Bno055ChainNode(_FakeNode(bad))
