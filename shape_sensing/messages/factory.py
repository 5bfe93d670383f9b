"""Where message classes are looked up, and the one way messages are built.

Two backends give the same classes by ROS 2 type name:

* ``"rosbags"``: the pure-Python ROS 2 definitions shipped by ``rosbags``
  (per distro). Used for bag writing and tests, and everywhere without ROS 2.
* ``"rclpy"``: the generated classes of a sourced ROS 2 installation, looked
  up through ``rosidl_runtime_py``. Used by the nodes; it does not need
  ``rosbags`` (imported only when the rosbags definitions are first used).

:meth:`MessageFactory.make` takes keyword fields. Fields left out get their
ROS default (zero, empty string, empty sequence, default sub-message); this is
what lets one builder serve distros whose definitions differ (Marker gained
fields after Humble). Unknown field names are an error.
"""

from __future__ import annotations

import array
import importlib
import re
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

import numpy as np

from shape_sensing.messages.errors import MessageError

if TYPE_CHECKING:
    from rosbags.typesys.store import Typestore

__all__ = ["DISTROS", "MessageFactory", "default_factory", "published_type"]

# ROS 2 distro -> name of its definitions in ``rosbags.typesys.Stores`` (looked up when first used).
DISTROS: dict[str, str] = {
    "humble": "ROS2_HUMBLE",
    "iron": "ROS2_IRON",
    "jazzy": "ROS2_JAZZY",
    "kilted": "ROS2_KILTED",
}

_DTYPES: dict[str, Any] = {
    "bool": np.bool_,
    "byte": np.uint8,
    "char": np.uint8,
    "int8": np.int8,
    "uint8": np.uint8,
    "int16": np.int16,
    "uint16": np.uint16,
    "int32": np.int32,
    "uint32": np.uint32,
    "int64": np.int64,
    "uint64": np.uint64,
    "float32": np.float32,
    "float64": np.float64,
}

# Every ROS 2 type a builder in this package produces, filled by @published_type.
PUBLISHED_TYPES: dict[str, list[str]] = {}


def published_type(typename: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a builder function as producing ``typename`` (tests round-trip each)."""

    def deco(func: Callable[..., Any]) -> Callable[..., Any]:
        PUBLISHED_TYPES.setdefault(typename, []).append(f"{func.__module__}.{func.__qualname__}")
        return func

    return deco


class MessageFactory:
    """Looks up message classes and builds messages with every field set.

    Args:
        backend: ``"rosbags"`` or ``"rclpy"``.
        distro: ROS 2 distro whose definitions the rosbags backend uses.
    """

    def __init__(self, backend: str = "rosbags", distro: str = "jazzy") -> None:
        if backend not in ("rosbags", "rclpy"):
            raise MessageError(f"message backend {backend!r} unknown; expected 'rosbags' or 'rclpy'")
        if distro not in DISTROS:
            raise MessageError(f"ROS 2 distro {distro!r} unknown; expected one of {sorted(DISTROS)}")
        self.backend = backend
        self.distro = distro
        self._typestore: Typestore | None = None
        self._plans: dict[str, Any] = {}
        self._rclpy_plans: dict[str, tuple[Any, dict[str, tuple[str, bool, str | None]]]] = {}
        self._classes: dict[str, Any] = {}

    @property
    def typestore(self) -> Typestore:
        """The rosbags definitions of :attr:`distro` plus this package's ``msg/`` (bags, CDR); imported on first use."""
        if self._typestore is None:
            from rosbags.typesys import Stores, get_typestore

            store = getattr(Stores, DISTROS[self.distro], None)
            if store is None:
                raise MessageError(f"the installed rosbags has no {self.distro} definitions; upgrade rosbags")
            typestore = get_typestore(store)
            from shape_sensing.messages.interfaces import register_interfaces

            register_interfaces(typestore)
            self._typestore = typestore
        return self._typestore

    # -- classes ---------------------------------------------------------
    def cls(self, typename: str) -> Any:
        """The message class for ``pkg/msg/Name``."""
        found = self._classes.get(typename)
        if found is None:
            found = self._classes[typename] = self._lookup(typename)
        return found

    def _lookup(self, typename: str) -> Any:
        if self.backend == "rosbags":
            try:
                return self.typestore.types[typename]
            except KeyError:
                raise MessageError(f"message type {typename!r} is not in the {self.distro} definitions") from None
        utilities = importlib.import_module("rosidl_runtime_py.utilities")
        return utilities.get_message(typename)

    # -- building --------------------------------------------------------
    def make(self, typename: str, **fields: Any) -> Any:
        """Build ``typename`` from keyword fields (missing fields take ROS defaults)."""
        if self.backend == "rclpy":
            return self._make_rclpy(typename, fields)
        return self._make_rosbags(typename, fields)

    def _plan(self, typename: str) -> tuple[Any, frozenset[str], tuple[tuple[str, Any, bool], ...], bool]:
        """Per type (cached): class, field names, per field (name, descriptor, is an array), no arrays at all."""
        plan = self._plans.get(typename)
        if plan is None:
            try:
                _consts, fielddefs = self.typestore.fielddefs[typename]
            except KeyError:
                raise MessageError(f"message type {typename!r} is not in the {self.distro} definitions") from None
            fields = tuple((name, desc, int(desc[0]) in (3, 4)) for name, desc in fielddefs)
            simple = not any(is_array for _, _, is_array in fields)
            plan = (self.typestore.types[typename], frozenset(n for n, _ in fielddefs), fields, simple)
            self._plans[typename] = plan
        return plan

    def _make_rosbags(self, typename: str, fields: dict[str, Any]) -> Any:
        cls, known, plan, simple = self._plan(typename)
        if simple and len(fields) == len(known) and known.issuperset(fields):
            return cls(**fields)  # every field given, nothing to coerce
        if not known.issuperset(fields):
            unknown = set(fields) - known
            raise MessageError(f"{typename} has no field(s) {sorted(unknown)}; fields are {sorted(known)}")
        kwargs = {}
        for name, desc, is_array in plan:
            if name in fields:
                value = fields[name]
                kwargs[name] = self._coerce(typename, name, desc, value) if is_array else value
            else:
                kwargs[name] = self._default(desc)
        return cls(**kwargs)

    def _coerce(self, typename: str, name: str, desc: Any, value: Any) -> Any:
        kind = int(desc[0])
        if kind in (3, 4):  # ARRAY, SEQUENCE
            (sub_kind, sub), size = desc[1]
            if int(sub_kind) == 1 and sub[0] in _DTYPES:
                arr = np.asarray(value, dtype=_DTYPES[sub[0]]).reshape(-1)
                if kind == 3 and arr.size != size:
                    raise MessageError(f"{typename}.{name} needs {size} values, got {arr.size}")
                return arr
            return list(value)
        return value

    def _default(self, desc: Any) -> Any:
        kind = int(desc[0])
        if kind == 1:  # BASE
            base = desc[1][0]
            if base == "string":
                return ""
            if base == "bool":
                return False
            if base.startswith("float"):
                return 0.0
            return 0
        if kind == 2:  # NAME
            return self._make_rosbags(desc[1], {})
        (sub_kind, sub), size = desc[1]
        if int(sub_kind) == 1:
            if sub[0] in _DTYPES:
                return np.zeros(size if kind == 3 else 0, dtype=_DTYPES[sub[0]])
            return [""] * size if kind == 3 else []
        if kind == 3:
            return [self._make_rosbags(sub, {}) for _ in range(size)]
        return []

    def _make_rclpy(self, typename: str, fields: dict[str, Any]) -> Any:
        plan = self._rclpy_plans.get(typename)
        if plan is None:  # per type (cached): the class and each field's IDL type parsed once
            cls = self.cls(typename)
            plan = (cls, {name: _field_kind(ftype) for name, ftype in cls.get_fields_and_field_types().items()})
            self._rclpy_plans[typename] = plan
        cls, kinds = plan
        try:
            return cls(**{name: _rclpy_field(kinds[name], value) for name, value in fields.items()})
        except KeyError:
            unknown = set(fields) - set(kinds)
            if not unknown:
                raise
            raise MessageError(f"{typename} has no field(s) {sorted(unknown)}; fields are {sorted(kinds)}") from None


# IDL basic types held in array.array (sequences) and numpy arrays (fixed arrays) by rclpy's generated classes.
_NUMERIC: dict[str, tuple[str, Any]] = {
    "float": ("f", np.float32), "double": ("d", np.float64),
    "int8": ("b", np.int8), "uint8": ("B", np.uint8), "int16": ("h", np.int16), "uint16": ("H", np.uint16),
    "int32": ("i", np.int32), "uint32": ("I", np.uint32), "int64": ("q", np.int64), "uint64": ("Q", np.uint64),
}  # fmt: skip
_SEQUENCE = re.compile(r"sequence<(.+?)(?:,\s*\d+)?>")
_ARRAY = re.compile(r"(.+)\[(\d+)\]")


def _field_kind(ftype: str) -> tuple[str, bool, str | None]:
    """An IDL field type as ``(kind, is a sequence, base type)``; ``kind`` one of ``single``, ``octet`` (a single
    byte), ``octets`` (their array or sequence), ``array`` (any other array or sequence)."""
    match = _SEQUENCE.fullmatch(ftype)
    is_sequence = match is not None
    if match is None:
        match = _ARRAY.fullmatch(ftype)
    if match is None:
        return ("octet" if ftype == "octet" else "single", False, None)
    base = match.group(1)
    return ("octets" if base == "octet" else "array", is_sequence, base)


def _rclpy_field(kind: tuple[str, bool, str | None], value: Any) -> Any:
    """:func:`_rclpy_value` with the field's type parsed (:func:`_field_kind`)."""
    if isinstance(value, np.generic):
        value = value.item()
    what, is_sequence, base = kind
    if what == "single":
        return value
    if what == "octet":
        return bytes([value]) if isinstance(value, int) else value
    if what == "octets":
        return [v if isinstance(v, bytes) else bytes([int(v)]) for v in value]
    if not isinstance(value, np.ndarray):
        return value
    numeric = _NUMERIC.get(base or "")
    if numeric is None:
        return value.tolist()
    code, dtype = numeric
    flat = np.ascontiguousarray(value, dtype=dtype).reshape(-1)
    return array.array(code, flat.tobytes()) if is_sequence else flat


def _rclpy_value(ftype: str, value: Any) -> Any:
    """``value`` in the form the setter of an rclpy-generated field of IDL type ``ftype`` accepts.

    The generated setters check types (AssertionError otherwise): ``octet`` (msg ``byte``) takes ``bytes`` of
    length 1 and its arrays and sequences a sequence of those (not ints, not one ``bytes`` object); numeric
    sequences take ``array.array`` of the matching type code; numeric fixed arrays take a numpy array of the
    matching dtype; other arrays and sequences (boolean, string, messages) take a list, not a numpy array.
    """
    return _rclpy_field(_field_kind(ftype), value)


@cache
def default_factory(distro: str = "jazzy") -> MessageFactory:
    """The shared rosbags-backed factory for ``distro``."""
    return MessageFactory("rosbags", distro)
