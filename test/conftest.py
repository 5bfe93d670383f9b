"""Shared test fixtures."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# SHAPE_SENSING_TEST_INSTALLED=1 (the ROS stage of .ci/run, on a sourced colcon install): test the installed package
# (which holds the rosidl-generated shape_sensing.msg) instead of this source tree.
TEST_INSTALLED = os.environ.get("SHAPE_SENSING_TEST_INSTALLED") == "1"
if not TEST_INSTALLED and str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def pytest_report_header(config: pytest.Config) -> str:
    import shape_sensing

    where = Path(shape_sensing.__file__).absolute().parent  # not resolved: a symlink install links to ROOT
    if TEST_INSTALLED and where.parent == ROOT:
        raise pytest.UsageError(f"SHAPE_SENSING_TEST_INSTALLED=1 but shape_sensing imports from the sources {where}")
    return f"shape_sensing from {where}"

SHARED = ROOT.parent / "shared"


# -- ROS 2's pytest plugins ---------------------------------------------------------------------------------------
# Where ROS 2 is sourced, pytest also loads launch_testing's and launch_pytest's plugins. Two of their effects matter
# here: launch_testing imports every test module from its own collection hook, so a module-level skip
# (``pytest.importorskip`` at the top of a file) or import error aborts the WHOLE session ("collected 0 items / 1
# skipped", exit 5) - test files skip per test instead; and importing ``launch`` makes every logger created afterwards
# a LaunchLogger with ``propagate = False``, so records of this package never reach the root logger where ``caplog``
# listens.

PACKAGE_LOGGER = "shape_sensing"


def propagate_package_loggers() -> list[str]:
    """Let every ``shape_sensing*`` logger propagate to the root logger again; returns the names it changed."""
    changed = []
    for name, logger in list(logging.root.manager.loggerDict.items()):
        ours = name == PACKAGE_LOGGER or name.startswith(PACKAGE_LOGGER + ".")
        if ours and isinstance(logger, logging.Logger) and not logger.propagate:
            logger.propagate = True
            changed.append(name)
    return changed



@pytest.fixture(autouse=True)
def _package_logs_reach_caplog() -> None:
    propagate_package_loggers()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A run that collected nothing fails (exit 1), also under runners that accept pytest's exit 5 (colcon test)."""
    if session.testscollected == 0 and exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("shape_sensing: no test was collected; that is a failure", red=True)
