"""Bad command-line input ends in one readable error naming the option and a non-zero exit, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from shape_sensing.cli import main


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["demo", "vine-imu", "--duration", "inf"], "--duration"),
        (["demo", "vine-imu", "--duration", "nan"], "--duration"),
        (["demo", "vine-imu", "--duration", "-1"], "--duration"),
        (["demo", "vine-imu", "--rate", "0"], "--rate"),
        (["demo", "vine-imu", "--rate", "inf"], "--rate"),
        (["demo", "vine-imu", "--every-k", "0"], "--every-k"),
        (["demo", "hyper-redundant", "--duration", "inf"], "--duration"),
        (["demo", "growing", "--rate", "nan"], "--rate"),
        (["demo", "tof-rings", "--duration", "inf"], "--duration"),
        (["demo", "tof-rings", "--bitrate", "0"], "--bitrate"),
        (["demo", "tof-rings", "--bitrate", "nan"], "--bitrate"),
        (["demo", "vine-collision", "--duration", "nan"], "--duration"),
        (["demo", "vine-collision", "--rate", "0"], "--rate"),
        (["demo", "vine-collision", "--rate", "inf"], "--rate"),
        (["demo", "vine-collision", "--pivot", "0"], "--pivot"),
        (["demo", "vine-collision", "--pivot", "nan"], "--pivot"),
        (["demo", "vine-collision", "--angle", "inf"], "--angle"),
        (["demo", "tof-continuum", "--duration", "inf"], "--duration"),
        (["demo", "tof-continuum", "--duration", "nan"], "--duration"),
        (["demo", "tof-continuum", "--duration", "0"], "--duration"),
        (["demo", "tof-continuum", "--window", "-1"], "--window"),
        (["demo", "tof-continuum", "--trajectory", "-1"], "--trajectory"),
        (["calibrate-bno055", "--out", "x.yaml", "--rate", "0"], "--rate"),
        (["calibrate-bno055", "--out", "x.yaml", "--timeout", "inf"], "--timeout"),
    ],
)
def test_bad_numbers_name_the_option(
    argv: list[str], option: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--out", str(tmp_path / "o")] if argv[0] == "demo" else argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}" in err and "Traceback" not in err


def test_run_demo_rejects_non_finite_values_from_python(tmp_path: Path) -> None:
    from shape_sensing.demos.vine_imu import run_demo

    with pytest.raises(ValueError, match="--duration inf"):
        run_demo(tmp_path, duration=float("inf"), progress=False, picture=False)
    with pytest.raises(ValueError, match="--rate 0"):
        run_demo(tmp_path, duration=1.0, rate=0.0, progress=False, picture=False)


def test_calibrate_without_an_i2c_adapter_says_so_and_how_to_simulate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["calibrate-bno055", "--out", str(tmp_path / "c.yaml"), "--bus", "97"]) == 2
    err = capsys.readouterr().err
    assert "no I2C adapter /dev/i2c-97" in err and "--simulate" in err


def test_ctrl_c_ends_without_a_traceback(tmp_path: Path) -> None:
    """SIGINT to a running command: exit 130 and one line, not a KeyboardInterrupt traceback."""
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
        deadline = time.monotonic() + 60
        while "figure4:" not in err_file.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)  # until its progress bar shows it is computing
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    err = err_file.read_text()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "interrupted" in err


def test_the_command_imports_only_the_chosen_subcommand() -> None:
    """Building the parser for one subcommand loads that subcommand's module, not every demo and command."""
    code = (
        "import sys\n"
        "from shape_sensing import cli\n"
        "tables = {m for m, _ in [*cli.COMMANDS.values(), *cli.DEMOS.values()]} - {'shape_sensing.cli.figure4'}\n"
        "for argv in (['-v', 'replay', 'b.mcap', '--out', 'o'], ['demo', 'growing', '--json'], ['demo']):\n"
        "    before = set(sys.modules)\n"
        "    cli._build_parser(argv)\n"
        "    print(sorted((set(sys.modules) - before) & tables))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    # (the growing demo's own module imports the figure4 command's, which is left out of the check)
    assert out == ["['shape_sensing.cli.replay']", "['shape_sensing.demos.growing']", "[]"]
    # every subcommand still parses its own options
    args = main.__globals__["_build_parser"](["demo", "vine-imu", "--duration", "2", "--out", "x"]).parse_args(
        ["demo", "vine-imu", "--duration", "2", "--out", "x"]
    )
    assert args.duration == 2.0 and callable(args._run)
