"""Stand-ins for the few rclpy pieces a node's constructor touches, to test node wiring without ROS 2.

A test installs them with :func:`install` (stand-in modules ``rclpy``, ``rclpy.parameter``, ``rclpy.qos``,
``rcl_interfaces.msg`` and any extra ones) and builds the node class on a :class:`FakeNode`, which records
publishers, subscriptions, services and timers so the test can call the callbacks and read what was sent.
Messages come from the rosbags backend of the same conversion layer (the real ROS 2 definitions).
"""

from __future__ import annotations

import functools
import inspect
import sys
import types
from typing import Any, ClassVar

import pytest

from shape_sensing.messages.factory import default_factory

PARAMETER_TYPES = ["BOOL", "INTEGER", "DOUBLE", "STRING", "BOOL_ARRAY", "INTEGER_ARRAY", "DOUBLE_ARRAY", "STRING_ARRAY"]


class Publisher:
    def __init__(self, cls: Any, topic: str, qos: Any) -> None:
        self.cls, self.topic, self.qos, self.sent = cls, topic, qos, []

    def publish(self, msg: Any) -> None:
        self.sent.append(msg)


class Logger:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, text: str, **_: Any) -> None:
        self.lines.append(text)

    warning = error = debug = fatal = info


class ParameterType(str):
    """What the stand-in ``Parameter.Type`` members are (a declared type, not a value)."""


class StandInParameter:
    """The stand-in ``rclpy.parameter.Parameter``: only what the nodes use (setting typed empty arrays)."""

    Type: Any = None

    def __init__(self, name: str, type_: Any, value: Any) -> None:
        self.name, self.type, self.value = name, type_, value


class StandInTfBuffer:
    """The stand-in ``tf2_ros.Buffer``: ``transforms[(target, source)]`` holds geometry_msgs/TransformStamped."""

    instances: ClassVar[list[StandInTfBuffer]] = []

    def __init__(self) -> None:
        self.transforms: dict[tuple[str, str], Any] = {}
        StandInTfBuffer.instances.append(self)

    def lookup_transform(self, target: str, source: str, time: Any, timeout: Any = None) -> Any:
        try:
            return self.transforms[(target, source)]
        except KeyError:
            raise LookupError(f'"{source}" passed to lookupTransform argument source_frame does not exist.') from None


def _with_info(callback: Any, msg: Any) -> Any:
    return callback(msg, {"source_timestamp": 0, "received_timestamp": 0})


class FakeNode:
    """Records what a node object is asked to create."""

    def __init__(self, name: str, overrides: dict[str, Any] | None = None, namespace: str = "/") -> None:
        self.name = name
        self.namespace = namespace
        self._parameter_overrides = dict(overrides or {})
        self.publishers: dict[str, Publisher] = {}
        self.subscriptions: dict[str, tuple[Any, Any, Any]] = {}  # topic -> (class, callback, qos)
        self.services: dict[str, Any] = {}
        self.timers: list[tuple[float, Any]] = []
        self.steady_timers: list[tuple[float, Any]] = []  # those on the steady clock (heartbeats)
        self.now_ns = 1_000_000_000
        self.logger = Logger()

    def get_name(self) -> str:
        return self.name

    def get_namespace(self) -> str:
        return self.namespace

    def get_fully_qualified_name(self) -> str:
        return f"{self.namespace.rstrip('/')}/{self.name}"

    def declare_parameter(self, name: str, default: Any, descriptor: Any) -> Any:
        value = self._parameter_overrides.get(name, default)
        return types.SimpleNamespace(value=None if isinstance(value, ParameterType) else value)

    def set_parameters(self, parameters: list[Any]) -> None:
        for param in parameters:
            self._parameter_overrides.setdefault(param.name, param.value)

    def create_publisher(self, cls: Any, topic: str, qos: Any) -> Publisher:
        self.publishers[topic] = Publisher(cls, topic, qos)
        return self.publishers[topic]

    def create_subscription(self, cls: Any, topic: str, callback: Any, qos: Any) -> None:
        try:  # as rclpy: a callback taking two arguments gets the message info too (no source timestamp here)
            inspect.signature(callback).bind(object())
        except TypeError:
            callback = functools.partial(_with_info, callback)
        self.subscriptions[topic] = (cls, callback, qos)

    def create_service(self, srv: Any, name: str, callback: Any) -> None:
        self.services[name] = callback

    def create_timer(self, period: float, callback: Any, clock: Any = None) -> None:
        self.timers.append((period, callback))
        if clock is not None:
            self.steady_timers.append((period, callback))

    def get_clock(self) -> Any:
        return types.SimpleNamespace(now=lambda: types.SimpleNamespace(nanoseconds=self.now_ns))

    def get_logger(self) -> Logger:
        return self.logger


def install(
    monkeypatch: pytest.MonkeyPatch, node_module: str, extra_modules: dict[str, dict[str, Any]] | None = None
) -> None:
    """Stand-in ROS modules for the duration of a test, and the rosbags message backend in ``node_module``.

    ``extra_modules`` maps further module names (e.g. ``"std_srvs.srv"``) to their attributes.
    """

    def module(name: str, **attrs: Any) -> None:
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, m)

    module("rclpy")
    module("rclpy.exceptions")
    declared = types.SimpleNamespace(**{n: ParameterType(n) for n in PARAMETER_TYPES})
    parameter = type("Parameter", (StandInParameter,), {"Type": declared})
    module("rclpy.parameter", Parameter=parameter)
    module("rclpy.qos", qos_profile_sensor_data="sensor_data", QoSProfile=lambda **kw: kw,
           DurabilityPolicy=types.SimpleNamespace(VOLATILE="volatile", TRANSIENT_LOCAL="transient_local"),
           HistoryPolicy=types.SimpleNamespace(KEEP_LAST="keep_last"),
           ReliabilityPolicy=types.SimpleNamespace(RELIABLE="reliable", BEST_EFFORT="best_effort"))  # fmt: skip
    module("rclpy.duration", Duration=lambda **kw: kw)
    module("rclpy.time", Time=lambda **kw: kw)
    module("rclpy.clock", Clock=lambda **kw: kw, ClockType=types.SimpleNamespace(STEADY_TIME="steady_time"))
    StandInTfBuffer.instances.clear()
    module("tf2_ros", Buffer=StandInTfBuffer, TransformListener=lambda *args, **kwargs: None)
    module("rcl_interfaces")
    codes = types.SimpleNamespace(**{f"PARAMETER_{n}": i for i, n in enumerate(PARAMETER_TYPES)})
    module("rcl_interfaces.msg", ParameterDescriptor=lambda **kw: kw, ParameterType=codes)
    for name, attrs in (extra_modules or {}).items():
        module(name, **attrs)
    mod = __import__(node_module, fromlist=["MessageFactory"])
    monkeypatch.setattr(mod, "MessageFactory", lambda backend: default_factory())
