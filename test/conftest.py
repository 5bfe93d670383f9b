"""Shared test fixtures."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


# The long end-to-end runs (full demos, MuJoCo scenes, recorded-dataset solver runs; each tens of seconds to
# minutes on a 2-core machine): `make test` leaves them out (`-m "not slow"`) so it can run before every commit,
# `make test-slow` and CI's own stage run them, and the ROS stage runs the whole suite. Listed here (file, or
# file::test prefix) rather than decorated in each file; `--durations` shows what belongs here.
SLOW_TESTS = (
    "test/test_tof_demo.py",
    "test/test_tof_mujoco.py",
    "test/test_frames.py::test_every_bag_connects_every_output_frame_to_world",
    "test/test_continuum_convergence.py::test_recorded_trial",
    "test/test_continuum_tof_tracker.py::test_reconstruction_and_anomalies_of_a_scene_with_an_added_object",
    "test/test_continuum_tof_tracker.py::test_gyro_bias_from_the_still_start_is_the_simulated_bias",
    "test/test_vine_collision_demo.py::test_demo_bag_opens_with_an_independent_mcap_reader",
    "test/test_vine_collision_demo.py::test_replay_reproduces_the_live_estimates",
    "test/test_rigid_module_pipeline.py::test_tip_covariance_is_consistent_on_a_monte_carlo",
    "test/test_bno055_demo.py::test_register_level_demo_runs_end_to_end_and_matches_the_direct_run",
    "test/test_demo_outputs.py::test_tof_continuum_stops_on_sigint",
    "test/test_tof_continuum.py::test_tof_residual_scale_measures",
    "test/test_tof_continuum.py::test_wall_of_unmodelled_points_does_not_pull_the_pose",
    "test/test_tof_continuum.py::test_straight_robot_between_known_planes_recovers_its_pose",
    "test/test_continuum_replay.py::test_eval_bag_and_parameter_file_replay_to_the_window_estimate",
    "test/test_continuum_eval.py::test_window_converges_on_extensible_when_iterated",
    "test/test_continuum_eval.py::test_gyro_readings_missing_at_impacts_do_not_flip_a_node",
    "test/test_collision_faults.py::test_calibrate_heading_drift_recovers_the_simulated_drift_from_a_straight_growth_bag",
    "test/test_vine_frames.py",
    "test/test_tof_real_recording.py::test_layout_from_tf_static",
    "test/test_tof_real_recording.py::test_real_style_recording",
    "test/test_tof_real_recording.py::test_replay_of_the_recording",
    "test/test_tof_range_convention_localise.py::test_radial_chips",
    "test/test_tof_imperfections.py::test_a_base_placed_off_the_map_is_localised_only_when_registered",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.nodeid.startswith(SLOW_TESTS):
            item.add_marker(pytest.mark.slow)


# SHAPE_SENSING_TEST_FILES=FILE (scripts/test_ros.sh, for `colcon test`, whose ctest command takes no pytest
# arguments): collect only the test files FILE lists, one path per line relative to the repository. The ROS stage runs
# the whole suite once on the plain build; the symlink build's `colcon test` runs the files that need ROS 2 again.
_SELECTED = os.environ.get("SHAPE_SENSING_TEST_FILES")


def _selected_files() -> set[str]:
    assert _SELECTED is not None
    try:
        lines = Path(_SELECTED).read_text().split()
    except OSError as exc:
        raise pytest.UsageError(f"SHAPE_SENSING_TEST_FILES={_SELECTED}: {exc}") from exc
    if not lines:
        raise pytest.UsageError(f"SHAPE_SENSING_TEST_FILES={_SELECTED} lists no test file")
    return {Path(line).name for line in lines}


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if _SELECTED is None or collection_path.is_dir() or not collection_path.name.startswith("test_"):
        return None
    return collection_path.name not in _selected_files() or None


@pytest.fixture
def context() -> Iterator[Any]:
    """A ROS 2 context of the test's own, initialised and shut down around it (rclpy tests only: needs rclpy)."""
    import rclpy
    from rclpy.context import Context

    ctx = Context()
    rclpy.init(context=ctx)
    try:
        yield ctx
    finally:
        rclpy.try_shutdown(context=ctx)
