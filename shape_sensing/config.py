"""Typed configuration: one schema per node.

A :class:`Schema` is used three ways: the node declares its ROS parameters
from it, YAML files (ROS 2 parameter-file layout or a flat mapping) are
validated by it, and the validated mapping builds the core objects. A bad
value names the parameter, the value and what was expected.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "LIVE_PARAMS",
    "ConfigError",
    "Param",
    "Schema",
    "flatten",
    "load_node_params",
    "load_param_file",
    "param_file_text",
]


class ConfigError(ValueError):
    """A configuration value is missing, unknown or invalid."""


_TYPE_NAMES = {
    bool: "bool",
    int: "int",
    float: "float",
    str: "string",
    "float[]": "list of floats",
    "int[]": "list of ints",
    "str[]": "list of strings",
    "bool[]": "list of bools",
}

ParamType = Any  # bool | int | float | str | "float[]" | "int[]" | "str[]" | "bool[]"


@dataclass(frozen=True)
class Param:
    """One parameter of a node.

    Args:
        name: ROS parameter name (dots for nesting, e.g. ``sensors.spacing``).
        type: ``bool``, ``int``, ``float``, ``str`` or ``"float[]"``, ``"int[]"``,
            ``"str[]"``, ``"bool[]"``.
        default: value when not given (typed as above).
        description: shown in ``ros2 param describe``.
        min, max: inclusive numeric bounds (applied to each element of arrays).
        choices: allowed values for strings or ints.
        check: extra check returning an error text, or ``None`` if fine.
        unit: SI unit, for documentation.
    """

    name: str
    type: ParamType
    default: Any
    description: str
    min: float | None = None
    max: float | None = None
    choices: Sequence[Any] | None = None
    check: Callable[[Any], str | None] | None = None
    unit: str = ""

    def expected(self) -> str:
        """Human-readable description of what is accepted."""
        text = _TYPE_NAMES.get(self.type, str(self.type))
        if self.choices is not None:
            text += f" in {list(self.choices)}"
        if self.min is not None:
            text += f" >= {self.min}"
        if self.max is not None:
            text += f" <= {self.max}"
        return text

    def coerce(self, value: Any, where: str = "") -> Any:
        """Validate and normalise one value; raise :class:`ConfigError` naming it."""
        loc = f"{where}: " if where else ""

        def fail(reason: str = "") -> ConfigError:
            extra = f" ({reason})" if reason else ""
            return ConfigError(f"{loc}parameter '{self.name}' = {value!r}: expected {self.expected()}{extra}")

        if isinstance(self.type, str):
            if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
                raise fail()
            elem_type = {"float[]": float, "int[]": int, "str[]": str, "bool[]": bool}[self.type]
            out_list = [self._scalar(v, elem_type, fail) for v in value]
            result: Any = out_list
        else:
            result = self._scalar(value, self.type, fail)
        if self.choices is not None:
            vals = result if isinstance(result, list) else [result]
            if any(v not in self.choices for v in vals):
                raise fail()
        if self.check is not None:
            reason = self.check(result)
            if reason:
                raise fail(reason)
        return result

    def _scalar(self, v: Any, t: type, fail: Callable[..., ConfigError]) -> Any:
        if t is bool:
            if not isinstance(v, bool):
                raise fail()
            return v
        if t is int:
            if isinstance(v, bool) or not isinstance(v, int):
                raise fail()
            out: Any = v
        elif t is float:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise fail()
            out = float(v)
            if not math.isfinite(out):
                raise fail("not finite")
        elif t is str:
            if not isinstance(v, str):
                raise fail()
            return v
        else:  # pragma: no cover - schema author error
            raise TypeError(f"unsupported parameter type {t!r}")
        if self.min is not None and out < self.min:
            raise fail()
        if self.max is not None and out > self.max:
            raise fail()
        return out


@dataclass(frozen=True)
class Schema:
    """The parameters of one node (executable)."""

    node: str
    params: tuple[Param, ...]
    description: str = ""
    _index: dict[str, Param] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, Param] = {}
        for p in self.params:
            if p.name in index:
                raise TypeError(f"schema {self.node}: parameter {p.name} declared twice")
            index[p.name] = p
            p.coerce(p.default, where=f"schema {self.node} default")
        object.__setattr__(self, "_index", index)

    def __getitem__(self, name: str) -> Param:
        return self._index[name]

    def names(self) -> list[str]:
        """All parameter names."""
        return list(self._index)

    def defaults(self) -> dict[str, Any]:
        """Parameter name -> default value."""
        return {p.name: p.default for p in self.params}

    def validate(self, values: Mapping[str, Any], where: str = "") -> dict[str, Any]:
        """Return a complete, typed mapping; unknown names and bad values raise."""
        flat = flatten(values)
        unknown = sorted(set(flat) - set(self._index) - {"use_sim_time"})
        loc = f"{where}: " if where else ""
        if unknown:
            raise ConfigError(
                f"{loc}unknown parameter(s) {unknown} for node '{self.node}'; known: {sorted(self._index)}"
            )
        out = {}
        for p in self.params:
            out[p.name] = p.coerce(flat[p.name], where) if p.name in flat else p.default
        return out

    def load_yaml(self, path: str | os.PathLike[str]) -> dict[str, Any]:
        """Validate a YAML parameter file for this node (see :func:`load_node_params`)."""
        return self.validate(load_node_params(path, self), where=str(path))


def flatten(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings to ROS-style dotted names."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def load_param_file(path: str | os.PathLike[str], node: str | None = None) -> dict[str, Any]:
    """Read parameters for ``node`` from a YAML file.

    Accepts the ROS 2 parameter-file layout (``node: {ros__parameters: ...}``,
    with ``/**`` wildcards and namespaced node keys) or a flat mapping of
    parameters. With several nodes in a ROS 2 file, ``node`` picks one.
    """
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {p} does not exist") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {p} is not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"config file {p}: expected a mapping at the top level, got {type(data).__name__}")
    sections = {k: v for k, v in data.items() if isinstance(v, Mapping) and "ros__parameters" in v}
    if not sections:
        return dict(data)
    merged: dict[str, Any] = {}
    for key, section in sections.items():
        short = str(key).rstrip("/").split("/")[-1]
        if node is None or short in ("**", node):
            params = section["ros__parameters"]
            if not isinstance(params, Mapping):
                raise ConfigError(f"config file {p}: {key}.ros__parameters must be a mapping")
            merged.update(flatten(params))
    if node is not None and not merged:
        raise ConfigError(f"config file {p} has no section for node '{node}' (sections: {sorted(map(str, sections))})")
    return merged


def load_node_params(path: str | os.PathLike[str], schema: Schema) -> dict[str, Any]:
    """The parameters a file gives ``schema``'s node, checked as ROS 2 would load them.

    As :func:`load_param_file`, and also: an empty file (or one with no parameters for the
    node) is an error, not "all defaults"; and an integer where the node declares a float
    (``publish_rate: 30``) is refused as ROS 2 refuses it at node start, so a file that
    replays is a file the node accepts.

    Raises:
        ConfigError: naming the file, the parameter, the value and what was expected.
    """
    values = load_param_file(path, schema.node)
    if not values:
        raise ConfigError(
            f"config file {path} holds no parameters for node '{schema.node}': expected "
            f"'{schema.node}: {{ros__parameters: {{...}}}}' (or '/**/{schema.node}') or a flat mapping; "
            "leave out --config to use the defaults"
        )
    for name, value in flatten(values).items():
        if name not in schema.names():
            continue  # unknown names are reported by validate()
        p = schema[name]
        kind = p.type if isinstance(p.type, str) else None
        is_float = p.type is float or kind == "float[]"
        items = value if isinstance(value, list) else [value]
        if is_float and any(isinstance(v, int) and not isinstance(v, bool) for v in items):
            raise ConfigError(
                f"{path}: parameter '{name}' = {value!r}: expected {p.expected()} (write floating-point "
                "values with a decimal point, e.g. 30.0: ROS 2 refuses an integer for a float parameter)"
            )
    return values


def param_file_text(node: str, params: Mapping[str, Any], comment: str = "") -> str:
    """A ROS 2 parameter file (``/**/node: ros__parameters: ...``) holding ``params``.

    Floats stay floats (``30.0``), so the file loads in the node as it loads here.
    """
    body = yaml.safe_dump(
        {f"/**/{node}": {"ros__parameters": dict(params)}}, sort_keys=False, width=110, default_flow_style=None
    )
    return "".join(f"# {line}\n" for line in comment.splitlines()) + body


#: Parameters of the live input stage (``pipelines/input_stage.py``), declared by every estimator node (and
#: accepted, unused, by replay). Here, with the other parameter definitions, so an estimator's schema can hold them
#: without importing the pipelines.
LIVE_PARAMS: tuple[Param, ...] = (
    Param(
        "input_queue_depth",
        int,
        200,
        "messages each input subscription queues (keep last): 200 holds a 2 s stall of a 100 Hz topic",
        min=1,
        max=100000,
    ),
    Param(
        "reorder_window",
        float,
        0.2,
        "stamp-ordered input stage: longest wait (s of the node's active time) for an input that delivered "
        "nothing before the others are released past it",
        min=0.0,
        max=10.0,
        unit="s",
    ),
    Param(
        "input_batch_period",
        float,
        0.02,
        "the node wakes for its inputs at most this often and takes everything queued meanwhile in one go (fewer "
        "wakes: less CPU at high message rates; adds at most this much latency); 0 wakes on every message; at "
        "most the input stage's 0.05 s release period (a node's timers fire at most once per wake)",
        min=0.0,
        max=0.05,
        unit="s",
    ),
    Param(
        "max_lag",
        float,
        0.5,
        "an input queued longer than this (publication to processing) is dropped, oldest first; ToF frames "
        "are decimated 1:2 beyond half of it",
        min=0.01,
        max=60.0,
        unit="s",
    ),
)
