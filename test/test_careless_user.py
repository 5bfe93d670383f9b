"""What a careless user could break: data lost, signals, results that mean nothing, bags no command reads, missing
optional parts and messages that do not name the problem. Each case is one a user met; the test checks the command
now refuses it clearly (rc 2, one line naming the option or file), keeps what was recorded, or ends as a signal
should (130 on SIGINT, 143 on SIGTERM, no traceback, no temporary file)."""

from __future__ import annotations

import argparse
import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from shape_sensing.cli import main
from shape_sensing.cli.reanalyse import reanalyse
from shape_sensing.cli.replay import replay_bag
from shape_sensing.demos.vine_imu import run_demo
from shape_sensing.io.bag import BagWriter, bag_topics
from shape_sensing.io.errors import BagError
from shape_sensing.pipelines import contracts

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT.parent.parent / "shared" / "datasets" / "space_time_continuum"
if not DATASET.is_dir():
    DATASET = Path("/work/shared/datasets/space_time_continuum")


@pytest.fixture(scope="module")
def vine_bag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("careless")
    run_demo(out, scenario="passive", duration=3.0, seed=4, progress=False, picture=False)
    return out / "vine-imu.mcap"


@pytest.fixture(scope="module")
def hr_bag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from shape_sensing.demos.hyper_redundant import run_demo as hyper_redundant

    out = tmp_path_factory.mktemp("careless-hr")
    hyper_redundant(out, modules=4, duration=1.5, progress=False, picture=False)
    return out / "hyper-redundant.mcap"


def _python(code: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (signals and failed imports must not reach the test process)."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def _leftovers(directory: Path) -> list[str]:
    """Hidden or temporary entries a command left in ``directory``."""
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".") or p.name.endswith(".tmp"))


# --- data lost -------------------------------------------------------------------------------------------------


def test_capture_reference_never_overwrites_its_input_or_an_existing_output(
    vine_bag: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    bag = tmp_path / "straight.mcap"
    shutil.copy(vine_bag, bag)
    before = bag.read_bytes()
    assert main(["capture-reference", str(bag), "--at", "0.5", "--out", str(bag)]) == 2
    assert "is the input recording" in capsys.readouterr().err
    assert bag.read_bytes() == before  # was replaced by a 5 KB YAML, rc 0
    kept = tmp_path / "kept.yaml"
    kept.write_text("a reference captured last week\n")
    assert main(["capture-reference", str(bag), "--at", "0.5", "--out", str(kept)]) == 2
    assert "--overwrite" in capsys.readouterr().err and kept.read_text() == "a reference captured last week\n"
    assert main(["capture-reference", str(bag), "--at", "0.5", "--out", str(kept), "--overwrite", "--json"]) == 0
    assert "format" in kept.read_text()


def test_capture_reference_on_a_bag_without_vine_imus_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bag = tmp_path / "other.mcap"
    with BagWriter(bag) as w:
        w.write("/chatter", w.factory.make("std_msgs/msg/String", data="hi"), 1)
    assert main(["capture-reference", str(bag), "--out", str(tmp_path / "r.yaml")]) == 2
    err = capsys.readouterr().err
    assert "no vine IMU topic" in err and "/chatter" in err and "every_k" not in err


def test_calibrate_bno055_checks_its_output_before_the_calibration(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    assert main(["calibrate-bno055", "--simulate", "--out", str(blocker / "c.yaml")]) == 2
    out, err = capsys.readouterr()
    assert "cannot write there" in err and "--out" in err
    assert "profile captured" not in out  # found before minutes of hand motion, not after


def test_calibrate_bno055_saves_what_was_captured_when_interrupted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ctrl-C after some sensors were captured: those profiles are in the file (they were all lost)."""
    from shape_sensing.drivers import bno055_chain

    original = bno055_chain.Bno055Chain.sweep

    def sweep(self: bno055_chain.Bno055Chain) -> None:
        original(self)
        captured = [n for n, h in self.health.items() if h.captures]
        if len(captured) >= 3:
            raise KeyboardInterrupt  # the user gives up half way

    monkeypatch.setattr(bno055_chain.Bno055Chain, "sweep", sweep)
    out = tmp_path / "cal.yaml"
    assert main(["calibrate-bno055", "--simulate", "--out", str(out), "--seed", "1"]) == 130
    stdout = capsys.readouterr().out
    saved = bno055_chain.CalibrationStore.load(out)
    assert 3 <= len(saved.profiles) < 18 and "captured before the interruption" in stdout
    assert _leftovers(tmp_path) == []


def test_a_full_disk_leaves_no_empty_calibration_or_reference_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shape_sensing.drivers import bno055_chain

    real_fdopen = os.fdopen

    class FullDisk:
        def __init__(self, fd: int, mode: str) -> None:
            self.f = real_fdopen(fd, mode)

        def __enter__(self) -> FullDisk:
            return self

        def __exit__(self, *exc: object) -> None:
            self.f.close()

        def write(self, text: str) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(bno055_chain.os, "fdopen", lambda fd, mode: FullDisk(fd, mode))
    with pytest.raises(OSError, match="No space"):
        bno055_chain.CalibrationStore().save(tmp_path / "cal.yaml")
    monkeypatch.setattr(bno055_chain.os, "fdopen", real_fdopen)
    assert list(tmp_path.iterdir()) == []  # was a 0-byte temporary file


def test_sigterm_ends_a_command_as_ctrl_c_does(tmp_path: Path) -> None:
    """SIGTERM (ros2 launch, systemd, timeout) exits 143 quietly; it killed the command with rc -15."""
    import signal
    import time

    err_file = tmp_path / "stderr.txt"
    with err_file.open("w") as err_out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "shape_sensing.cli", "figure4", "--pairs", "400", "--k-pairs", "100"],
            stdout=subprocess.DEVNULL,
            stderr=err_out,
            text=True,
        )
        deadline = time.monotonic() + 120
        while "figure4:" not in err_file.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    err = err_file.read_text()
    assert proc.returncode == 143, err
    assert "Traceback" not in err and "interrupted by SIGTERM" in err


def test_sigterm_during_a_replay_leaves_no_temporary_bag(vine_bag: Path, tmp_path: Path) -> None:
    code = f"""
        import os, signal
        from shape_sensing.pipelines import vine_imu_bulk
        from shape_sensing.cli import main
        real = vine_imu_bulk.replay_bulk
        def replay_bulk(*args, **kw):
            os.kill(os.getpid(), signal.SIGTERM)  # half way: the output bag is open
            return real(*args, **kw)
        vine_imu_bulk.replay_bulk = replay_bulk
        raise SystemExit(main(["replay", {str(vine_bag)!r}, "--out", "out/replayed.mcap", "--json"]))
    """
    (tmp_path / "out").mkdir()
    done = _python(code, tmp_path)
    assert done.returncode == 143, done.stderr
    assert "Traceback" not in done.stderr
    assert list((tmp_path / "out").iterdir()) == []  # left a hidden directory with the partial bag


def test_reanalyse_replaces_its_outputs_together_or_not_at_all(vine_bag: Path, tmp_path: Path) -> None:
    """SIGTERM while the plots are written: the previous run's files stay as they were, nothing else is left."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "reanalysis.json").write_text("previous run\n")
    (out / "drift.png").write_text("previous run\n")
    code = f"""
        import os, signal
        from shape_sensing.cli import main, reanalyse
        real = reanalyse._plots
        def plots(directory, result):
            files = real(directory, result)
            os.kill(os.getpid(), signal.SIGTERM)
            return files
        reanalyse._plots = plots
        raise SystemExit(main(["reanalyse", {str(vine_bag)!r}, "--out", "out", "--subsets", "every-k=2", "--json"]))
    """
    done = _python(code, tmp_path)
    assert done.returncode == 143, done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["drift.png", "reanalysis.json"]
    assert (out / "reanalysis.json").read_text() == "previous run\n"


def test_reanalyse_on_a_full_disk_leaves_no_empty_picture(
    vine_bag: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import matplotlib.figure

    def savefig(self: object, path: Path, **kw: object) -> None:
        Path(path).write_bytes(b"")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", savefig)
    out = tmp_path / "out"
    assert main(["reanalyse", str(vine_bag), "--out", str(out), "--subsets", "every-k=2", "--json"]) == 2
    assert "No space left" in capsys.readouterr().err
    assert list(out.iterdir()) == []  # was a 0-byte PNG


def test_ctrl_c_while_the_command_is_still_importing_prints_no_traceback(tmp_path: Path) -> None:
    code = """
        import importlib
        from shape_sensing import cli
        def interrupted(name, package=None):
            raise KeyboardInterrupt  # Ctrl-C in the first second: the subcommand's modules are being imported
        cli.importlib.import_module = interrupted
        raise SystemExit(cli.main(["replay", "x.mcap", "--out", "y.mcap"]))
    """
    done = _python(code, tmp_path)
    assert done.returncode == 130 and "Traceback" not in done.stderr, done.stderr


def test_the_tof_estimate_stops_at_the_next_iteration_when_asked() -> None:
    """localise reports its iterations and ends when the caller's callback raises (Ctrl-C in the demo's estimate
    stage was honoured only after the whole estimate, 245 s)."""
    from shape_sensing.demos.tof_continuum import sensor_data, simulate_run
    from shape_sensing.estimators.continuum.tof_localise import localise
    from shape_sensing.io.maps import PriorMap
    from shape_sensing.sim.tof_scene import compressor_scene

    class StopError(Exception):
        pass

    calls: list[tuple[int, str]] = []

    def progress(done: int, unit: str) -> None:
        calls.append((done, unit))
        raise StopError

    run = simulate_run("S0", "kinematic", 1.2, 0, 0)
    prior = PriorMap.from_mesh(compressor_scene("S0").mesh(include_added=False), spacing=0.03)
    with pytest.raises(StopError):
        localise(sensor_data(run), prior, progress=progress)
    assert calls == [(1, "iteration")]


def test_a_tof_estimate_ended_before_the_last_frame_leaves_the_later_frames_out() -> None:
    """``localise(..., t_end)`` before the recording's end: frames after it were kept and scored against an estimate
    that ends earlier ("time 2.02 outside the estimate's span [0.0, 2.0]"); a ``t_end`` that is no time is named."""
    from shape_sensing.demos.tof_continuum import sensor_data, simulate_run
    from shape_sensing.estimators.continuum.errors import ContinuumError
    from shape_sensing.estimators.continuum.tof_localise import LocaliseConfig, localise
    from shape_sensing.io.maps import PriorMap
    from shape_sensing.sim.tof_scene import compressor_scene

    run = simulate_run("S0", "kinematic", 1.6, 0, 0)
    data = sensor_data(run)
    assert data.tof_t.max() > 1.3 and data.gyro_t.max() > 1.3
    prior = PriorMap.from_mesh(compressor_scene("S0").mesh(include_added=False), spacing=0.03)
    res = localise(data, prior, LocaliseConfig(iterations=3), t_end=1.2)
    assert res.state.t[-1] == pytest.approx(1.2)
    assert res.meas.tof_t.max() <= 1.2 and res.meas.gyro_t.max() <= 1.2
    assert 0.9 < res.tof_matched_fraction <= 1.0
    for bad in (-1.0, float("nan")):
        with pytest.raises(ContinuumError, match="t_end"):
            localise(data, prior, t_end=bad)


# --- results that mean nothing --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("option", "value"), [("--max-dt", "-1"), ("--max-dt", "nan"), ("--length-bins", "0"), ("--length-bins", "-3")]
)
def test_reanalyse_refuses_options_that_score_nothing(
    vine_bag: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["reanalyse", str(vine_bag), "--out", str(tmp_path / "o"), option, value])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert option in err and "cannot convert" not in err and not (tmp_path / "o").exists()


def test_reanalyse_uses_the_parameters_recorded_in_the_bag(vine_bag: Path, tmp_path: Path) -> None:
    """As replay and the node that recorded it: the same tip error (it ran with the defaults instead)."""
    replayed = replay_bag(vine_bag, tmp_path / "r.mcap", argparse.Namespace(namespace="/vine"))
    assert replayed is not None
    ours = reanalyse(vine_bag, subsets=["every-k=1"], progress=False)
    row = ours["spacing"][0]
    assert ours["parameters"] == "recorded in the bag"
    assert row["scored"] == replayed["estimates_scored"]
    assert row["tip_error_mean_m"] == pytest.approx(replayed["tip_error_mean_m"], rel=1e-12)
    defaults = reanalyse(vine_bag, subsets=["every-k=1"], progress=False, bag_parameters=False)
    assert defaults["parameters"] == "defaults"


def test_calibrate_base_station_refuses_trials_that_disagree(capsys: pytest.CaptureFixture[str]) -> None:
    # three trials at 1e-4 m/count and one whose length was typed in cm: a 4.5 m residual was accepted
    trials = ["--trial", "0", "10000", "1.0", "--trial", "0", "20000", "2.0", "--trial", "0", "5000", "50"]
    assert main(["calibrate-base-station", *trials]) == 2
    err = capsys.readouterr().err
    assert "trial 3" in err and "disagree" in err
    assert main(["calibrate-base-station", *trials[:8], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["metres_per_count"] == pytest.approx(1e-4)


@pytest.mark.skipif(not DATASET.is_dir(), reason="space_time_continuum dataset not available")
def test_eval_continuum_refuses_a_robot_the_trial_is_not_of() -> None:
    from shape_sensing.io.space_time_dataset import DatasetError, load_trial

    trial = load_trial(DATASET, "fast_contact")
    other = "robot1" if trial.robot.name == "robot2" else "robot2"
    with pytest.raises(DatasetError, match="not of that robot"):
        load_trial(DATASET, "fast_contact", other)
    assert load_trial(DATASET, "fast_contact", trial.robot.name).robot.name == trial.robot.name


@pytest.mark.skipif(not DATASET.is_dir(), reason="space_time_continuum dataset not available")
def test_eval_continuum_without_ground_truth_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "dataset"
    (root / "data" / "fast_contact").mkdir(parents=True)
    (root / "config").symlink_to(DATASET / "config")
    for f in (DATASET / "data" / "fast_contact").glob("*.csv"):
        if not f.name.startswith("vicon"):
            (root / "data" / "fast_contact" / f.name).symlink_to(f)
    from shape_sensing.io.space_time_dataset import load_trial

    robot = load_trial(DATASET, "fast_contact").robot.name
    argv = ["eval-continuum", str(root), "fast_contact", "--robot", robot, "--duration", "0.3", "--no-outputs"]
    rc = main([*argv, "--json"])
    captured = capsys.readouterr()
    assert rc == 2 and "nothing scored" in captured.err and captured.out == ""


def test_tof_demo_without_any_sensor_is_refused_before_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["demo", "tof-continuum", "--no-tof", "--no-gyro", "--no-strain", "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    assert "no sensor to estimate from" in capsys.readouterr().err and not (tmp_path / "o").exists()


def test_demos_that_estimate_nothing_fail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "hyper-redundant", "--duration", "0.05", "--out", str(tmp_path / "hr"), "--json"]) == 2
    assert "no estimate was made" in capsys.readouterr().err
    assert not (tmp_path / "hr" / "hyper-redundant.mcap").exists()
    assert main(["demo", "vine-collision", "--duration", "0.01", "--no-sweep", "--out", str(tmp_path / "vc")]) == 2
    err = capsys.readouterr().err
    assert "--duration" in err and "nan" not in err


def test_a_configuration_for_another_robot_is_refused(
    hr_bag: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 7-module configuration on a 4-module bag: tip error 240 mm, NEES 1.6e10, rc 0."""
    cfg = tmp_path / "seven.yaml"
    cfg.write_text("rigid_module_estimator:\n  ros__parameters:\n    n_modules: 7\n")
    bag = hr_bag
    assert main(["replay", str(bag), "--config", str(cfg), "--out", str(tmp_path / "r.mcap"), "--json"]) == 2
    err = capsys.readouterr().err
    assert "another robot" in err and "[5, 6, 7] missing" in err and not (tmp_path / "r.mcap").exists()
    assert main(["replay", str(bag), "--out", str(tmp_path / "r.mcap"), "--json"]) == 0


# --- bags and commands that do not fit together ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("topics", "command"),
    [
        ({"/tof_rig": "std_msgs/msg/String", "/tof/tof_0_0": "shape_sensing/msg/TofFrame"}, "eval-tof"),
        (
            {
                "/tof_rings/tof_0_0/frame": "shape_sensing/msg/TofFrame",
                "/tof_rings/imu_0/data": "sensor_msgs/msg/Imu",
            },
            "ros2 bag play",
        ),
        ({"/growing/plan/path": "nav_msgs/msg/Path", "/tf": "tf2_msgs/msg/TFMessage"}, "ros2 bag play"),
    ],
)
def test_replay_names_the_command_that_reads_a_demo_bag_it_does_not(topics: dict[str, str], command: str) -> None:
    """The ToF demo bag was sent to the continuum pipeline ("gyro_mid" missing), the rings' bag too."""
    with pytest.raises(ValueError, match="does not read this bag") as exc:
        contracts.select(topics)
    assert command in str(exc.value)


def test_replay_of_the_growing_demo_bag_names_what_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from shape_sensing.demos.growing import run_demo as growing

    growing(tmp_path / "g", duration=1.0, progress=False, picture=False)
    bag = tmp_path / "g" / "growing.mcap"
    assert main(["replay", str(bag), "--out", str(tmp_path / "r.mcap")]) == 2
    err = capsys.readouterr().err
    assert "ros2 bag play" in err and err.count("\n") == 1


def test_missing_optional_module_is_one_line_naming_the_extra(tmp_path: Path) -> None:
    code = """
        import sys
        class NoCan:
            def find_spec(self, name, path=None, target=None):
                if name == "can" or name.startswith("can."):
                    raise ModuleNotFoundError("No module named 'can'", name="can")
        sys.meta_path.insert(0, NoCan())
        sys.modules.pop("can", None)
        from shape_sensing.cli import main
        raise SystemExit(main(["demo", "hyper-redundant", "--duration", "1", "--out", "o"]))
    """
    done = _python(code, tmp_path)
    assert done.returncode == 2, done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "shape_sensing[hardware]" in lines[0] and "python-can" in lines[0], done.stderr


def test_a_node_without_ros_says_so_in_one_line(tmp_path: Path) -> None:
    code = """
        import sys
        class NoRos:
            def find_spec(self, name, path=None, target=None):
                if name == "rclpy" or name.startswith("rclpy."):
                    raise ModuleNotFoundError("No module named 'rclpy'", name="rclpy")
        sys.meta_path.insert(0, NoRos())
        for m in [m for m in sys.modules if m == "rclpy" or m.startswith("rclpy.")]:
            del sys.modules[m]
        from shape_sensing.nodes.hinge_arc_estimator import main
        raise SystemExit(main([]))
    """
    done = _python(code, tmp_path)
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert "ROS 2" in lines[0] and "setup.bash" in lines[0]


# --- messages that name the problem ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "growing", "--seed", "-1"],
        ["figure4", "--seed", "-1"],
        ["calibrate-bno055", "--simulate", "--out", "c.yaml", "--seed", "-1"],
    ],
)
def test_a_negative_seed_names_the_option(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2 and "--seed" in capsys.readouterr().err


def test_a_demo_out_that_is_a_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results.txt"
    out.write_text("keep me\n")
    assert main(["demo", "growing", "--duration", "1", "--out", str(out), "--json"]) == 2
    err = capsys.readouterr().err
    assert "is a file" in err and "Errno" not in err and out.read_text() == "keep me\n"


def test_a_spacing_beyond_any_robot_names_the_parameter() -> None:
    from shape_sensing.config import ConfigError
    from shape_sensing.estimators.hinge_arc import SCHEMA

    with pytest.raises((ConfigError, ValueError), match="spacing"):
        SCHEMA.validate({"imu_topics": ["imu_00/data", "imu_01/data"], "spacing": 1e300})


def test_a_truncated_bag_is_one_error_whatever_the_cut(hr_bag: Path, tmp_path: Path) -> None:
    """A recording cut anywhere (a full disk, a pulled cable) is a BagError naming it, never a struct.error
    traceback from inside the MCAP reader (one of these 40 cuts of the unchunked hyper-redundant bag gave one)."""
    import random

    data = hr_bag.read_bytes()
    rng = random.Random(1)
    for k in range(40):
        cut = tmp_path / f"cut{k}.mcap"
        cut.write_bytes(data[: rng.randrange(len(data) // 10, len(data))])
        with pytest.raises(BagError, match="malformed or truncated|no summary"):
            bag_topics(cut)


@pytest.mark.skipif(not DATASET.is_dir(), reason="space_time_continuum dataset not available")
def test_a_deleted_gyroscope_file_is_reported(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """gyro_mid.csv deleted from one trial: said loudly (it was dropped silently)."""
    from shape_sensing.io.space_time_dataset import load_trial

    root = tmp_path / "dataset"
    root.mkdir()
    (root / "config").symlink_to(DATASET / "config")
    for trial in ("fast_contact", "impulse_1"):
        (root / "data" / trial).mkdir(parents=True)
        for f in (DATASET / "data" / trial).glob("*.csv"):
            if not (trial == "fast_contact" and f.name == "gyro_mid.csv"):
                (root / "data" / trial / f.name).symlink_to(f)
    with caplog.at_level("WARNING"):
        trial = load_trial(root, "fast_contact")
    assert "gyro_mid" not in trial.streams
    assert any("no gyro_mid.csv" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level("WARNING"):
        load_trial(root, "impulse_1")
    assert not any("gyro" in r.getMessage() for r in caplog.records)


def test_an_error_after_a_progress_bar_starts_on_a_line_of_its_own(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from shape_sensing.cli import calibrate_base_station
    from shape_sensing.demos.common import Progress

    held: list[Progress] = []  # the command still holds its bar when the error comes

    def failing(*args: object, **kw: object) -> None:
        held.append(Progress("working", 10))
        held[-1].update(3)
        raise ValueError("something named")

    monkeypatch.setattr(calibrate_base_station, "calibrate_metres_per_count", failing)
    assert main(["calibrate-base-station", "--trial", "0", "100", "1.0"]) == 2
    err = capsys.readouterr().err
    assert "\nshape-sensing: error: something named\n" in err, repr(err)
