"""``shape-sensing calibrate-bno055``: capture every BNO055's calibration profile and save it to YAML.

Runs the chain driver on the bus (or on the register-level simulator with
``--simulate``), prints the calibration levels as they change, captures each
sensor's 22-byte profile as soon as it reports full calibration (system, gyro,
accel and mag all 3), and saves the profiles to ``--out``. Profiles already in
``--out`` are kept unless recaptured. Move the robot as the datasheet asks
(still for the gyro; several still poses for the accelerometer; figure-eights
for the magnetometer) until every sensor is captured. The ``bno055_chain``
node restores the file at start (``calibration_file``) and on its
``~/restore_calibration`` service.

Exit status: 0 when every sensor was captured, 1 on timeout (what was captured
is saved), 2 on a bad argument or configuration, 130/143 on Ctrl-C/SIGTERM (what
was captured is saved too). ``--out`` is checked before the calibration starts
and written atomically.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from shape_sensing.demos.common import non_negative_int, positive_float
from shape_sensing.drivers.bno055_chain import SCHEMA, Bno055Chain, CalibrationStore, ChainOptions
from shape_sensing.drivers.i2c_topology import Topology

__all__ = ["MOTIONS", "add_arguments", "motions_needed", "run"]

#: What to do for each calibration level that is not yet 3 (BNO055 datasheet 3.11 "Calibration"), in the order
#: of CALIB_STAT: system, gyroscope, accelerometer, magnetometer.
MOTIONS: dict[str, str] = {
    "gyr": "hold the robot still for a few seconds",
    "acc": (
        "hold still in 6 different poses for a few seconds each, moving slowly between them, with each axis "
        "once up and once down (as the faces of a cube)"
    ),
    "mag": "move the sensor in figure-eights (random movements in all directions) away from steel and magnets",
    "sys": "keep going: system reaches 3 once gyroscope, accelerometer and magnetometer are calibrated",
}


def motions_needed(levels: tuple[int, int, int, int] | list[int]) -> list[str]:
    """The motions still to make for calibration levels ``(sys, gyr, acc, mag)``, in the datasheet's order."""
    sys_l, gyr, acc, mag = levels
    sensors = (("gyr", gyr), ("acc", acc), ("mag", mag))
    out = [f"{name} {level}/3: {MOTIONS[name]}" for name, level in sensors if level < 3]
    if sys_l < 3 and not out:
        out.append(f"sys {sys_l}/3: {MOTIONS['sys']}")
    return out


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the command."""
    parser.add_argument("--out", type=Path, required=True, help="calibration YAML to write (kept profiles are merged)")
    parser.add_argument("--config", type=Path, help="bno055_chain parameter file (default: the 18-sensor example tree)")
    parser.add_argument("--bus", type=non_negative_int, help="I2C adapter number, overrides the config's 'bus'")
    parser.add_argument(
        "--timeout", type=positive_float, default=300.0, help="give up after this many seconds (default 300)"
    )
    parser.add_argument(
        "--rate", type=positive_float, default=20.0, help="sweep rate while calibrating, Hz (default 20)"
    )
    parser.add_argument("--simulate", action="store_true", help="use simulated chips that calibrate over a few seconds")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="seed of the simulation, >= 0 (default 0)")


def check_writable(out: Path) -> None:
    """Fail now, not after minutes of hand motion, if ``out`` cannot be written (a directory, a parent that is a
    file, no permission, a read-only file system)."""
    if out.is_dir():
        raise ValueError(f"--out {out} is a directory; give the calibration file's name (e.g. {out / 'bno055.yaml'})")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(prefix=f".{out.name}.", suffix=".probe", dir=out.parent):
            pass
    except OSError as exc:
        raise ValueError(f"--out {out}: cannot write there ({exc.strerror or exc})") from None
    if out.exists() and not os.access(out, os.R_OK):
        raise ValueError(f"--out {out}: cannot read the profiles already in it (permission)")


def run(args: argparse.Namespace) -> int:
    """Capture, print progress, save; see the module docstring for the exit status."""
    check_writable(args.out)
    params = SCHEMA.load_yaml(args.config) if args.config else SCHEMA.defaults()
    if args.bus is not None:
        params["bus"] = args.bus
    if args.timeout <= 0 or args.rate <= 0:
        raise ValueError(f"--timeout {args.timeout} and --rate {args.rate} must be > 0")
    topology = Topology.from_params(params)
    base = ChainOptions.from_params(params)
    options = ChainOptions(
        mode=base.mode,
        imu_fields=("orientation",),
        mag_rate=0.0,
        status_rate=max(base.status_rate, 4.0),
        axis_map=base.axis_map,
        retry_initial=base.retry_initial,
        retry_max=base.retry_max,
        mux_verify_period=base.mux_verify_period,
        capture_calibration=True,
    )
    store = CalibrationStore.load(args.out) if args.out.exists() else CalibrationStore()
    kept = set(store.profiles)
    bus: Any
    advance: Callable[[float], None]
    clock: Callable[[], int]
    sleep: Callable[[float], None]
    if args.simulate:
        from shape_sensing.sim.register_level import build_simulated_hardware

        hw = build_simulated_hardware(topology, seed=args.seed)
        bus, clock, sleep = hw.bus, hw.bus.clock, hw.bus.sleep
        rng = np.random.default_rng(args.seed)
        ready_at = {name: float(rng.uniform(0.5, 4.0)) for name in hw.sensors}

        def advance(elapsed: float) -> None:
            for name, chip in hw.sensors.items():
                if elapsed >= ready_at[name] and chip.levels != (3, 3, 3, 3):
                    chip.calibrate()
                elif elapsed >= ready_at[name] / 2 and chip.levels == (0, 0, 0, 0):
                    chip.calibrate((0, 3, 1, 2))
    else:
        import smbus2

        try:
            bus = smbus2.SMBus(params["bus"])
        except FileNotFoundError:
            raise RuntimeError(
                f"no I2C adapter /dev/i2c-{params['bus']} on this machine: give the adapter number with --bus "
                "(ls /dev/i2c-*; on a Raspberry Pi enable I2C first), or run with --simulate to try the "
                "calibration on simulated chips"
            ) from None
        except PermissionError:
            raise RuntimeError(
                f"no permission to open /dev/i2c-{params['bus']}: add your user to the 'i2c' group "
                "(sudo usermod -aG i2c $USER, then log in again)"
            ) from None
        clock, sleep = time.monotonic_ns, time.sleep

        def advance(elapsed: float) -> None:
            return None

    chain = Bno055Chain(bus, topology, options, calibration=store, clock=clock, sleep=sleep)
    chain.request_capture()  # recapture every sensor in this session, even those kept from the file
    names = [s.name for s in topology.sensors]
    captured: set[str] = set()
    shown: dict[str, str] = {}
    t0 = clock()
    period = 1.0 / args.rate
    print("BNO055 calibration (datasheet 3.11); for each level below 3:")
    for name in ("gyr", "acc", "mag", "sys"):
        print(f"  {name}: {MOTIONS[name]}")
    interrupted: KeyboardInterrupt | None = None
    try:
        while True:
            elapsed = (clock() - t0) / 1e9
            advance(elapsed)
            tick = clock()
            chain.sweep()
            for name in names:
                h = chain.health[name]
                if h.captures and name not in captured:
                    captured.add(name)
                    print(f"{elapsed:7.1f} s  {name}: profile captured ({len(captured)}/{len(names)})")
                cal = h.calibration
                text = (
                    "no answer"
                    if h.stale
                    else ("-" if cal is None else "sys {} gyr {} acc {} mag {}".format(*cal.as_list()))
                )
                if shown.get(name) != text:
                    shown[name] = text
                    todo = motions_needed(cal.as_list()) if cal is not None and not h.stale else []
                    print(f"{elapsed:7.1f} s  {name}: {text}" + (f"  -> next: {todo[0]}" if todo else ""))
            if captured >= set(names) or elapsed >= args.timeout:
                break
            sleep(max(0.0, period - (clock() - tick) / 1e9))
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: keep what was captured
        interrupted = exc
    finally:
        chain.close()
        bus.close()
    if interrupted is not None:
        got = sorted(n for n in names if chain.health[n].captures)
        if got:
            path = chain.save_calibration(args.out)
            print(f"saved the {len(got)} profile(s) captured before the interruption to {path}: {got}")
        raise interrupted
    path = chain.save_calibration(args.out)
    missing = [n for n in names if n not in captured]
    print(f"saved {len(chain.calibration.profiles)} profile(s) to {path}"
          + (f" ({len(kept & set(missing))} kept from before)" if kept & set(missing) else ""))  # fmt: skip
    if missing:
        print(f"not fully calibrated within {args.timeout:g} s: {missing}", file=sys.stderr)
        return 1
    return 0
