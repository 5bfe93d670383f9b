"""The suite under ROS 2's pytest plugins (launch_testing, launch_pytest), which load wherever ROS 2 is sourced.

launch_testing imports every test module from its own collection hook, outside pytest's per-module guard, so a
module-level skip or import error ends the whole session with nothing run (``collected 0 items / 1 skipped``).
Importing ``launch`` sets a logger class whose loggers do not propagate, which empties ``caplog``. These checks run
everywhere; the ROS stage of .ci/run runs the whole suite with the plugins loaded.
"""

from __future__ import annotations

import ast
import logging
import os
from pathlib import Path

import pytest
from conftest import propagate_package_loggers

TEST_DIR = Path(__file__).resolve().parent
MODULE_LEVEL_SKIPS = {"importorskip", "skip"}


def _module_level_skips(path: Path) -> list[str]:
    """``pytest.importorskip``/``pytest.skip`` calls executed when the module is imported (outside any def)."""
    found = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.ClassDef):
            return  # runs when called, not at import (also inside an ``if`` at module level)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in MODULE_LEVEL_SKIPS
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "pytest"
        ):
            found.append(f"{path.name}:{node.lineno}")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return found


def test_the_scan_finds_a_module_level_importorskip(tmp_path: Path) -> None:
    bad = tmp_path / "test_bad.py"
    bad.write_text(
        'import pytest\nmod = pytest.importorskip("nope")\n\ndef test_x():\n    pytest.skip("fine")\n'
        'if mod is None:\n    def test_y():\n        pytest.skip("fine")\nelse:\n    pytest.skip("not fine")\n'
    )
    assert _module_level_skips(bad) == ["test_bad.py:2", "test_bad.py:10"]


def test_no_test_module_skips_at_import() -> None:
    offenders = [hit for path in sorted(TEST_DIR.glob("*.py")) for hit in _module_level_skips(path)]
    assert offenders == [], "skip per test (a fixture or skipif mark), not at module level: " + ", ".join(offenders)


def test_package_loggers_reach_caplog_under_a_non_propagating_logger_class(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    class NonPropagating(logging.Logger):  # what launch.logging installs with logging.setLoggerClass
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, **kwargs)  # type: ignore[arg-type]
            self.propagate = False

    name = "shape_sensing._probe_under_launch_logging"
    monkeypatch.setattr(logging.root.manager, "loggerClass", NonPropagating)
    monkeypatch.delitem(logging.root.manager.loggerDict, name, raising=False)
    logger = logging.getLogger(name)
    assert isinstance(logger, NonPropagating) and not logger.propagate
    with caplog.at_level("WARNING"):
        logger.warning("lost")
    assert "lost" not in caplog.text  # what happened to three tests under launch_pytest
    assert name in propagate_package_loggers()
    with caplog.at_level("WARNING"):
        logger.warning("seen")
    assert "seen" in caplog.text
    monkeypatch.delitem(logging.root.manager.loggerDict, name)


_IMPORTING_PLUGIN = '''
import importlib.util, pytest

def pytest_pycollect_makemodule(module_path, parent):
    # as launch_testing's hook does: import the module itself, outside pytest's per-module guard
    spec = importlib.util.spec_from_file_location(module_path.stem, module_path)
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    return pytest.Module.from_parent(parent, path=module_path)
'''


def test_a_run_that_collects_nothing_fails(tmp_path: Path) -> None:
    """A module-level importorskip under a plugin that imports test modules itself (launch_testing does) ends the
    session with nothing collected; pytest says exit 5, which colcon test accepts; this suite's conftest makes it 1."""
    import subprocess
    import sys

    (tmp_path / "importing_plugin.py").write_text(_IMPORTING_PLUGIN)
    (tmp_path / "test_a.py").write_text('import pytest\npytest.importorskip("no_such_module_x")\n\ndef test_a():\n'
                                        '    pass\n')
    (tmp_path / "test_b.py").write_text("def test_b():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k != "SHAPE_SENSING_TEST_INSTALLED"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), str(TEST_DIR), os.environ.get("PYTHONPATH")]))
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "importing_plugin", str(tmp_path)]
    plain = subprocess.run([*base, "--rootdir", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                           env=env, check=False)
    assert plain.returncode == 5, plain.stdout  # test_b never ran: the whole session was skipped
    ours = subprocess.run([*base, "-p", "conftest", "--rootdir", str(tmp_path)], cwd=tmp_path, capture_output=True,
                          text=True, env=env, check=False)
    assert ours.returncode == 1, ours.stdout
    assert "no test was collected; that is a failure" in ours.stdout
