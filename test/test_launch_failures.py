"""Launch files as a user starts them (``ros2 launch`` in a subprocess) when something is wrong.

* ``rviz:=true`` where RViz 2 is not installed (its packages hidden from the ament index), ``record:=yes``,
  ``config:=`` naming a missing file: the launch ends non-zero with one ``[ERROR]`` line naming the argument, and
  no process of it is left running (before, the nodes started first stayed on as orphans of PID 1, or ran on their
  defaults).
* A node that exits (here the estimator, refusing a misspelt parameter) ends the whole launch: the simulator beside
  it does not keep publishing.
* RViz closed by the user (a stand-in ``rviz2`` that exits after a second) leaves the robot's nodes running.
* A robot-wide ``/**:`` parameter file with parameters of other nodes is accepted by a node; a misspelt parameter
  in its own section still stops it (exit 2).

Each launch gets a unique namespace, so its processes are found by their command line. Skipped where ROS 2 or the
built package is absent.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import launch_harness as h
import pytest
import yaml

pytestmark = pytest.mark.skipif(not h.AVAILABLE, reason=h.REASON)

RVIZ_PACKAGES = ["rviz2", "rviz_common", "rviz_default_plugins", "rviz_rendering", "rviz_ogre_vendor",
                 "rviz_assimp_vendor"]  # fmt: skip
# launch file -> extra arguments it needs to get as far as its checks
RVIZ_LAUNCHES = {
    "vine_imu_sim.launch.xml": [],
    "vine_imu.launch.xml": [],
    "hyper_redundant_sim.launch.xml": [],
    "hyper_redundant.launch.xml": [],
    "vine_collision_sim.launch.xml": [],
    "vine_collision.launch.xml": [],
    "continuum_estimator.launch.xml": [],
    "continuum_tof.launch.xml": ["map:={config}"],
    "growth_planner.launch.xml": [],
    "tof_rings.launch.xml": [],
}
EXIT_S = 60.0


def _marker() -> str:
    return f"lt{uuid.uuid4().hex[:10]}"


def _launch(file: str, args: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["ros2", "launch", "shape_sensing", file, *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True,
    )  # fmt: skip


def _finish(proc: subprocess.Popen[str], timeout: float = EXIT_S) -> tuple[int | None, str]:
    """Exit status (None: still running after ``timeout``, then stopped) and output of a launch."""
    try:
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)  # launch passes it on to its processes
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        return None, out


def _no_orphans(marker: str) -> None:
    time.sleep(1.0)
    left = h.processes_with(marker)
    h.stop_processes_with(marker)
    assert not left, "processes of the launch left running:\n" + "\n".join(left)


def _errors(out: str) -> list[str]:
    return [line for line in out.splitlines() if "[ERROR]" in line]


def test_rviz_absent_is_one_line_and_nothing_left_running(tmp_path: Path) -> None:
    env = h.prefix_without(RVIZ_PACKAGES, tmp_path)
    check = subprocess.run(["ros2", "pkg", "prefix", "rviz2"], capture_output=True, text=True, env=env, timeout=60)
    assert check.returncode != 0, "rviz2 is still visible in the mirrored ament index"
    config = h.share("config", "vine_imu.yaml")
    runs = {}
    for file, extra in RVIZ_LAUNCHES.items():
        marker = _marker()
        args = ["rviz:=true", f"namespace:={marker}", *(a.format(config=config) for a in extra)]
        runs[file] = (marker, _launch(file, args, env))  # all at once: each ends within its checks
    for file, (marker, proc) in runs.items():
        code, out = _finish(proc)
        errors = _errors(out)
        assert code not in (0, None), f"{file} rviz:=true without RViz exited {code}:\n{out}"
        assert len(errors) == 1 and "rviz:=true but RViz 2 is not installed" in errors[0], f"{file}:\n{out}"
        assert "process started" not in out, f"{file} started processes before failing:\n{out}"
        _no_orphans(marker)


@pytest.mark.parametrize(
    ("args", "wanted"),
    [
        (["record:=yes"], "record:='yes': expected true or false"),
        (["config:=/nonexistent/vine_imu.yaml"], "config:=/nonexistent/vine_imu.yaml: no such file"),
        (["namespace:=/vine"], "namespace:='/vine'"),
    ],
    ids=["record-yes", "config-missing", "namespace-absolute"],
)
def test_bad_argument_is_one_line_and_nothing_left_running(args: list[str], wanted: str) -> None:
    marker = _marker()
    ns = [] if any(a.startswith("namespace:=") for a in args) else [f"namespace:={marker}"]
    proc = _launch("vine_imu_sim.launch.xml", [*ns, *args, f"frame_prefix:={marker}_"])
    code, out = _finish(proc)
    errors = _errors(out)
    assert code not in (0, None), out
    assert len(errors) == 1 and wanted in errors[0], out
    assert "process started" not in out, out
    _no_orphans(marker)


def test_a_node_that_exits_ends_the_whole_launch(tmp_path: Path) -> None:
    config = tmp_path / "vine_misspelt.yaml"
    data = yaml.safe_load(h.share("config", "vine_imu.yaml").read_text())
    data["/**/hinge_arc_estimator"]["ros__parameters"]["publish_rat"] = 30.0
    config.write_text(yaml.safe_dump(data))
    marker = _marker()
    proc = _launch("vine_imu_sim.launch.xml", [f"namespace:={marker}", f"config:={config}"])
    code, out = _finish(proc)
    assert code is not None, f"the launch kept running after its estimator exited:\n{out}"
    assert "publish_rat" in out and "vine_imu_simulator-1" in out, out
    _no_orphans(marker)


def _rviz_stand_in(where: Path, seconds: float) -> dict[str, str]:
    """An environment where ``rviz2`` is a stand-in that runs ``seconds`` and exits 0 (the user closed it)."""
    prefix = where / "fake_rviz"
    (prefix / "share" / "ament_index" / "resource_index" / "packages").mkdir(parents=True)
    (prefix / "share" / "ament_index" / "resource_index" / "packages" / "rviz2").write_text("")
    (prefix / "share" / "rviz2").mkdir(parents=True)
    exe = prefix / "lib" / "rviz2" / "rviz2"
    exe.parent.mkdir(parents=True)
    exe.write_text(f"#!/bin/sh\nsleep {seconds}\nexit 0\n")
    exe.chmod(0o755)
    env = dict(os.environ)
    env["AMENT_PREFIX_PATH"] = os.pathsep.join([str(prefix), env.get("AMENT_PREFIX_PATH", "")])
    return env


def test_rviz_closed_by_the_user_leaves_the_robot_running(tmp_path: Path) -> None:
    marker = _marker()
    proc = _launch("hyper_redundant_sim.launch.xml", [f"namespace:={marker}", "rviz:=true"],
                   _rviz_stand_in(tmp_path, 1.0))  # fmt: skip
    try:
        deadline = time.monotonic() + EXIT_S
        closed = False
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
            closed = closed or not any("lib/rviz2/rviz2" in p for p in h.processes_with(str(tmp_path)))
            if closed and len(h.processes_with(marker)) >= 2:
                time.sleep(3.0)  # the robot keeps running after RViz is gone
                break
        running = h.processes_with(marker)
        assert proc.poll() is None, f"the launch ended when RViz was closed:\n{_finish(proc, 1)[1]}"
        assert any("hyper_redundant_simulator" in p for p in running), running
        assert any("rigid_module_estimator" in p for p in running), running
    finally:
        _code, out = _finish(proc, 0.1)
        _no_orphans(marker)
    assert "[rviz2-4]: process has finished cleanly" in out, out


def _run_node(node: str, namespace: str, params_file: Path, seconds: float) -> tuple[int | None, str]:
    proc = subprocess.Popen(
        [str(h.executable(node)), "--ros-args", "-r", f"__ns:={namespace}", "--params-file", str(params_file)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        out, _ = proc.communicate(timeout=seconds)
        return proc.returncode, out
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        return None, out


def test_robot_wide_parameter_file_is_accepted_and_own_typos_stay_fatal(tmp_path: Path) -> None:
    ns = _marker()
    robot_wide = tmp_path / "robot.yaml"
    robot_wide.write_text(  # the example, plus a wildcard section of the node's namespace and its own
        "/**:\n  ros__parameters:\n    publish_rate: 20.0\n"
        f"/{ns}/*:\n  ros__parameters:\n    stale_timeout: 0.5\n"
        "/**/vine_imu_simulator:\n  ros__parameters:\n    rate: 50.0\n"
    )
    code, out = _run_node("vine_imu_simulator", f"/{ns}", robot_wide, 8.0)
    assert code is None, f"vine_imu_simulator on a robot-wide parameter file exited {code}:\n{out}"
    assert "'publish_rate', 'stale_timeout'" in out and "ignored" in out, out
    own_typo = tmp_path / "typo.yaml"
    own_typo.write_text("/**:\n  ros__parameters:\n    publish_rate: 20.0\n"
                        "/**/vine_imu_simulator:\n  ros__parameters:\n    rat: 50.0\n")  # fmt: skip
    code, out = _run_node("vine_imu_simulator", f"/{_marker()}", own_typo, 30.0)
    (error,) = [line for line in out.splitlines() if "unknown parameter" in line]
    assert code == 2 and "unknown parameter(s) ['rat']" in error, out
