"""Config schemas: typed validation, ROS 2 parameter files, errors that name the parameter."""

from __future__ import annotations

from pathlib import Path

import pytest

from shape_sensing.config import ConfigError, Param, Schema, load_param_file
from shape_sensing.estimators.hinge_arc import SCHEMA as HINGE

SCHEMA = Schema(
    "demo_node",
    (
        Param("rate", float, 10.0, "rate", min=0.1),
        Param("mode", str, "a", "mode", choices=("a", "b")),
        Param("count", int, 3, "count", min=1),
        Param("names", "str[]", ["x"], "names"),
        Param("gains", "float[]", [1.0], "gains", min=0.0),
        Param("enabled", bool, True, "switch"),
    ),
)


def test_defaults_and_coercion() -> None:
    out = SCHEMA.validate({"rate": 5, "gains": [1, 2.5]})
    assert out["rate"] == 5.0 and isinstance(out["rate"], float)
    assert out["gains"] == [1.0, 2.5]
    assert out["mode"] == "a" and out["count"] == 3


@pytest.mark.parametrize(
    ("values", "pattern"),
    [
        ({"rate": -1.0}, r"parameter 'rate' = -1.0: expected float >= 0.1"),
        ({"rate": "fast"}, r"parameter 'rate' = 'fast': expected float"),
        ({"rate": float("nan")}, r"parameter 'rate' = nan: expected float >= 0.1 \(not finite\)"),
        ({"mode": "c"}, r"parameter 'mode' = 'c': expected string in \['a', 'b'\]"),
        ({"count": 2.5}, r"parameter 'count' = 2.5: expected int"),
        ({"count": True}, r"parameter 'count' = True: expected int"),
        ({"names": "x"}, r"parameter 'names' = 'x': expected list of strings"),
        ({"gains": [1.0, -2.0]}, r"parameter 'gains' = \[1.0, -2.0\]: expected list of floats >= 0.0"),
        ({"enabled": "yes"}, r"parameter 'enabled' = 'yes': expected bool"),
        ({"rates": 1.0}, r"unknown parameter\(s\) \['rates'\] for node 'demo_node'"),
    ],
)
def test_bad_values_name_parameter_value_and_expectation(values: dict[str, object], pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        SCHEMA.validate(values)


def test_ros2_parameter_file_layout(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text(
        "/**:\n  ros__parameters:\n    rate: 2.0\n"
        "/robot/demo_node:\n  ros__parameters:\n    mode: b\n    nested:\n      x: 1\n"
        "other_node:\n  ros__parameters:\n    rate: 99.0\n"
    )
    assert load_param_file(f, "demo_node") == {"rate": 2.0, "mode": "b", "nested.x": 1}
    with pytest.raises(ConfigError, match=r"unknown parameter\(s\) \['nested.x'\]"):
        SCHEMA.load_yaml(f)


def test_flat_file_and_file_errors(tmp_path: Path) -> None:
    f = tmp_path / "flat.yaml"
    f.write_text("rate: 3.0\n")
    assert SCHEMA.load_yaml(f)["rate"] == 3.0
    with pytest.raises(ConfigError, match="does not exist"):
        SCHEMA.load_yaml(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("rate: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        SCHEMA.load_yaml(bad)
    top = tmp_path / "list.yaml"
    top.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="expected a mapping at the top level"):
        SCHEMA.load_yaml(top)
    other = tmp_path / "other.yaml"
    other.write_text("someone:\n  ros__parameters:\n    rate: 1.0\n")
    with pytest.raises(ConfigError, match="no section for node 'demo_node'"):
        SCHEMA.load_yaml(other)


def test_error_names_the_file(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text("hinge_arc_estimator:\n  ros__parameters:\n    diameter: -0.1\n")
    with pytest.raises(ConfigError, match=r"p.yaml: parameter 'diameter' = -0.1: expected float >= 0.001"):
        HINGE.load_yaml(f)


def test_schema_defaults_are_validated() -> None:
    with pytest.raises(ConfigError, match="parameter 'x' = -1"):
        Schema("n", (Param("x", int, -1, "x", min=0),))
