"""The package's layers import downwards only.

The ROS-free core's lower layers (estimators, drivers, simulators, planning and the shared geometry, types and
configuration modules) take arrays and return core types: they must not import the message layer, file and bag I/O,
the pipelines, the nodes, the demos or the command line. Every import statement counts, also one inside a function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "shape_sensing"

LOWER = ["estimators", "drivers", "sim", "planning", "geometry.py", "types.py", "config.py"]
HIGHER = ["messages", "io", "pipelines", "nodes", "demos", "cli", "replay", "reanalyse", "eval_continuum",
          "eval_tof", "capture_reference", "calibrate_bno055", "calibrate_base_station", "figure4", "viz", "runtime"]


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            # "from shape_sensing import io" names the layer in the alias
            if node.module == "shape_sensing":
                found += [(node.lineno, f"shape_sensing.{alias.name}") for alias in node.names]
    return found


def _files(layer: str) -> list[Path]:
    path = PKG / layer
    return sorted(path.rglob("*.py")) if path.is_dir() else [path]


@pytest.mark.parametrize("layer", LOWER)
def test_lower_layer_imports_no_higher_layer(layer: str) -> None:
    bad = []
    for path in _files(layer):
        for line, name in _imports(path):
            parts = name.split(".")
            if parts[0] == "shape_sensing" and len(parts) > 1 and parts[1] in HIGHER:
                bad.append(f"{path.relative_to(PKG.parent)}:{line} imports {name}")
    assert not bad, "lower layer imports a higher one:\n" + "\n".join(bad)


def test_only_the_nodes_import_ros() -> None:
    ros = {"rclpy", "rosidl_runtime_py", "tf2_ros", "launch", "launch_ros", "rosbag2_py", "message_filters"}
    bad = []
    for path in sorted(PKG.rglob("*.py")):
        if path.is_relative_to(PKG / "nodes"):
            continue
        for line, name in _imports(path):
            if name.split(".")[0] in ros:
                bad.append(f"{path.relative_to(PKG.parent)}:{line} imports {name}")
    assert not bad, "ROS imported outside shape_sensing/nodes/:\n" + "\n".join(bad)


def test_the_checker_sees_a_function_level_import(tmp_path: Path) -> None:
    # the checker itself: an import inside a function is found (as online.py's message imports were)
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from shape_sensing.messages.tof import x\n    import shape_sensing.io.maps\n")
    assert [n for _, n in _imports(f)] == ["shape_sensing.messages.tof", "shape_sensing.io.maps"]
