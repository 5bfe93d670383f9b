"""The ``shape-sensing`` command: demos, replay and evaluation without ROS.

Subcommands are looked up in :data:`COMMANDS` (name -> module); each module
of this package provides ``add_arguments(parser)`` and ``run(args) -> int``.
Demos are looked up in :data:`shape_sensing.demos.DEMOS` the same way.
A new subcommand: one module here and one line in the table.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from shape_sensing import __version__
from shape_sensing.demos import DEMOS

__all__ = ["COMMANDS", "EXTRAS", "main", "missing_module"]

COMMANDS: dict[str, tuple[str, str]] = {
    "replay": ("shape_sensing.cli.replay", "re-estimate a recorded bag and write the same topics as a live run"),
    "eval-continuum": (
        "shape_sensing.cli.eval_continuum",
        "score the continuum estimator on a space_time_continuum trial",
    ),
    "calibrate-bno055": (
        "shape_sensing.cli.calibrate_bno055",
        "capture the BNO055 chain's calibration profiles to YAML",
    ),
    "eval-tof": (
        "shape_sensing.cli.eval_tof",
        "score a ToF continuum run (bag or demo output) at the rings, as Table II",
    ),
    "capture-reference": (
        "shape_sensing.cli.capture_reference",
        "vine robot: capture the hinge-arc straight reference from a recording of the robot everted and straight",
    ),
    "figure4": (
        "shape_sensing.cli.figure4",
        "growth planner: the seed paper's Figure 4 (robot A), open and closed loop",
    ),
    "reanalyse": (
        "shape_sensing.cli.reanalyse",
        "vine-IMU recording: tip error per sensor subset, drift, error vs length",
    ),
    "calibrate-base-station": (
        "shape_sensing.cli.calibrate_base_station",
        "vine robot base station: metres per encoder count from tape-measured growth trials",
    ),
    "probe": ("shape_sensing.cli.probe", "find the sensors: I2C trees behind TCA9548A switches, serial ports, CAN"),
    "play-bag": ("shape_sensing.cli.play_bag", "ros2 bag play once a node subscribes (launch files' bag:= argument)"),
    "calibrate-heading-drift": (
        "shape_sensing.cli.calibrate_heading_drift",
        "vine robot cap: heading drift per metre grown from a recorded straight growth",
    ),
}


#: Optional modules: import name -> (distribution, the extra of setup.py that installs it).
EXTRAS: dict[str, tuple[str, str]] = {
    "can": ("python-can", "hardware"),
    "serial": ("pyserial", "hardware"),
    "smbus2": ("smbus2", "hardware"),
    "mujoco": ("mujoco", "sim"),
}


def missing_module(exc: ModuleNotFoundError) -> str:
    """One line for a module that is not installed: the extra that installs it, or the package to reinstall."""
    top = (exc.name or "").split(".")[0]
    if top in EXTRAS:
        dist, extra = EXTRAS[top]
        return f"this needs {dist} (module {top!r}), an optional part: pip install 'shape_sensing[{extra}]'"
    if top == "rclpy":
        return "this needs ROS 2 (module 'rclpy'): source /opt/ros/<distro>/setup.bash first"
    return f"module {exc.name!r} is not installed: reinstall shape_sensing (pip install .) or install {top}"


def _chosen(argv: Sequence[str]) -> tuple[str | None, str | None]:
    """The subcommand and demo named on the command line (the top level's options take no value)."""
    words = [a for a in argv if not a.startswith("-")]
    command = words[0] if words else None
    demo = words[1] if command == "demo" and len(words) > 1 else None
    return command, demo


def _build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command's parser; only the chosen subcommand's module is imported to add its options (importing every
    demo and command took about a second, before any of them ran). ``argv=None``: all of them."""
    command, demo_name = _chosen(argv) if argv is not None else (None, None)
    every = argv is None
    parser = argparse.ArgumentParser(prog="shape-sensing", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a simulated robot end to end: bag, picture, metrics")
    demos = demo.add_subparsers(dest="demo", required=True)
    for name, (module, help_text) in DEMOS.items():
        p = demos.add_parser(name, help=help_text, description=help_text)
        if every or (command == "demo" and name == demo_name):
            mod = importlib.import_module(module)
            mod.add_arguments(p)
            p.set_defaults(_run=mod.run)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if every or name == command:
            mod = importlib.import_module(module)
            mod.add_arguments(p)
            p.set_defaults(_run=mod.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``shape-sensing``: exit 0 on success, 2 on an error (one line naming it), 130 on SIGINT and
    143 on SIGTERM (both end the same way: what the command was writing is removed or kept whole, no traceback)."""
    import signal

    from shape_sensing.demos.common import Progress, exit_status, raise_on_sigterm

    previous = raise_on_sigterm()
    try:
        argv = list(sys.argv[1:] if argv is None else argv)
        # building the parser imports the chosen subcommand (about a second): inside the try, so that Ctrl-C or
        # SIGTERM then ends as quietly as later
        args = _build_parser(argv).parse_args(argv)
        logging.basicConfig(
            level=logging.DEBUG if args.verbose else logging.WARNING,
            format="%(levelname)s %(name)s: %(message)s",
        )
        return int(args._run(args))
    except KeyboardInterrupt as exc:
        # Ctrl-C or SIGTERM: what each command has written is closed by its own handlers; no traceback.
        Progress.close_all()
        name = getattr(exc, "signal_name", "SIGINT")
        print(f"shape-sensing: interrupted by {name}" + (f": {exc}" if str(exc) else ""), file=sys.stderr)
        return exit_status(exc)
    except ModuleNotFoundError as exc:
        Progress.close_all()
        print(f"shape-sensing: error: {missing_module(exc)}", file=sys.stderr)
        return 2
    except (ValueError, RuntimeError, OSError) as exc:
        # Library errors name what was wrong; show them without a traceback, on a line of their own.
        Progress.close_all()
        print(f"shape-sensing: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
