"""rclpy and rosbags serialise the same message to the same CDR bytes.

For every message type of this package (``msg/*.msg``: rosidl's generated classes on one side, the rosbags
typestore registered from the same files on the other) and every standard type a builder in
``shape_sensing/messages`` publishes (``PUBLISHED_TYPES``): one message with a distinct value in every field, built
once through ``MessageFactory("rclpy")`` and once through ``MessageFactory("rosbags")``, must serialise to identical
bytes with ``rclpy.serialization.serialize_message`` and ``typestore.serialize_cdr``. So bags written without ROS
carry exactly what a node publishes, and the two definitions of each type agree field by field.

Needs a sourced ROS 2 and, for this package's types, its colcon install (the ROS stage of .ci/run); each test
skips elsewhere.
"""

from __future__ import annotations

import importlib
import itertools
import os
import pkgutil
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import shape_sensing.messages as messages_pkg
from shape_sensing.messages import DISTROS, PUBLISHED_TYPES, MessageFactory
from shape_sensing.messages.interfaces import interface_types

for _mod in pkgutil.iter_modules(messages_pkg.__path__):  # every builder registers its type on import
    importlib.import_module(f"{messages_pkg.__name__}.{_mod.name}")

OWN_TYPES = sorted(interface_types())
STANDARD_TYPES = sorted(PUBLISHED_TYPES)
DISTRO = os.environ.get("ROS_DISTRO", "jazzy") if os.environ.get("ROS_DISTRO") in DISTROS else "jazzy"

_NUMPY = {
    "bool": np.bool_, "byte": np.uint8, "char": np.uint8, "int8": np.int8, "uint8": np.uint8, "int16": np.int16,
    "uint16": np.uint16, "int32": np.int32, "uint32": np.uint32, "int64": np.int64, "uint64": np.uint64,
    "float32": np.float32, "float64": np.float64,
}  # fmt: skip


def _scalar(base: str, k: int) -> Any:
    """A value of ROS base type ``base``, different for each ``k`` (exactly representable in float32)."""
    if base == "bool":
        return k % 2 == 1
    if base == "string":
        return f"s{k}-é"  # non-ASCII: the UTF-8 length prefix must agree too
    if base in ("float32", "float64"):
        return 0.25 * k - 3.5
    if base.startswith("int"):
        return k % 100 - 50
    return k % 200 + 1  # uint*, byte, char


def _tree(factory: MessageFactory, typename: str, counter: Iterator[int]) -> tuple[str, str, dict[str, Any]]:
    """Backend-free field values of ``typename``: ``("msg", type, {field: value})``; nested messages likewise."""
    _consts, fielddefs = factory.typestore.fielddefs[typename]
    fields: dict[str, Any] = {}
    for name, desc in fielddefs:
        kind = int(desc[0])
        if kind == 1:  # base type
            fields[name] = _scalar(desc[1][0], next(counter))
        elif kind == 2:  # message
            fields[name] = _tree(factory, desc[1], counter)
        else:  # 3 array (fixed length), 4 sequence (bound or 0)
            (sub_kind, sub), size = desc[1]
            n = size if kind == 3 else (min(3, size) if size else 3)
            if int(sub_kind) == 1 and sub[0] in _NUMPY:
                fields[name] = np.array([_scalar(sub[0], next(counter)) for _ in range(n)], dtype=_NUMPY[sub[0]])
            elif int(sub_kind) == 1:
                fields[name] = [_scalar(sub[0], next(counter)) for _ in range(n)]
            else:
                fields[name] = [_tree(factory, sub, counter) for _ in range(n)]
    return ("msg", typename, fields)


def _build(factory: MessageFactory, value: Any) -> Any:
    if isinstance(value, tuple) and value[:1] == ("msg",):
        _, typename, fields = value
        return factory.make(typename, **{name: _build(factory, v) for name, v in fields.items()})
    if isinstance(value, list):
        return [_build(factory, v) for v in value]
    return value


@pytest.fixture(scope="module")
def serialize_message() -> Callable[[Any], bytes]:
    try:
        from rclpy.serialization import serialize_message
    except ImportError:
        pytest.skip("needs rclpy (a sourced ROS 2)")
    return serialize_message  # type: ignore[no-any-return]


def _check(typename: str, serialize_message: Callable[[Any], bytes]) -> None:
    rosbags = MessageFactory("rosbags", DISTRO)
    rclpy_factory = MessageFactory("rclpy", DISTRO)
    tree = _tree(rosbags, typename, itertools.count(1))
    ours = bytes(rosbags.typestore.serialize_cdr(_build(rosbags, tree), typename))
    theirs = bytes(serialize_message(_build(rclpy_factory, tree)))
    assert len(ours) > 4
    if theirs != ours:
        first = next(i for i, (a, b) in enumerate(zip(theirs + b"\0", ours + b"\1", strict=False)) if a != b)
        pytest.fail(f"{typename}: rclpy {len(theirs)} bytes, rosbags {len(ours)} bytes; first differing byte {first}")
    # and back: rosbags reads what rclpy wrote into the same values
    again = rosbags.typestore.deserialize_cdr(theirs, typename)
    assert bytes(rosbags.typestore.serialize_cdr(again, typename)) == ours


@pytest.mark.parametrize("typename", OWN_TYPES)
def test_own_messages_serialise_identically(typename: str, serialize_message: Callable[[Any], bytes]) -> None:
    try:
        importlib.import_module("shape_sensing.msg")
    except ImportError:
        pytest.skip("shape_sensing.msg not built here: colcon build, then source install/setup.bash")
    _check(typename, serialize_message)


@pytest.mark.parametrize("typename", STANDARD_TYPES)
def test_published_standard_messages_serialise_identically(
    typename: str, serialize_message: Callable[[Any], bytes]
) -> None:
    _check(typename, serialize_message)


def test_every_own_type_and_some_standard_ones_are_covered() -> None:
    names = {t.rsplit("/", 1)[1] for t in OWN_TYPES}
    assert {"TofFrame", "Bno055Calibration", "ShapeSamples", "BaseStationState", "ContactCapState", "ContactEvent",
            "PivotEstimate"} <= names
    assert {"sensor_msgs/msg/Imu", "nav_msgs/msg/Path", "tf2_msgs/msg/TFMessage"} <= set(STANDARD_TYPES)
