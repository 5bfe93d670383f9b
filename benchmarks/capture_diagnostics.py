"""Falling behind, seen from outside: a launch under a CPU hog, the estimator's /diagnostics over time.

Runs ``ros2 launch shape_sensing LAUNCH [ARG:=VALUE ...]``, starts ``--hog`` busy processes from
``--hog-from`` to ``--hog-until`` seconds after the first status of ``--node``, and prints every status
of that node (level, message, lag, the period's dropped / decimated / late / missing inputs) with the
time it arrived, for ``--seconds``. What the node says while it keeps up, while it cannot, and after
the load falls.

    python3 benchmarks/capture_diagnostics.py --node /vine/hinge_arc_estimator --hog 4 --hog-from 10 \
        --hog-until 25 --seconds 40 vine_imu_sim.launch.xml

Prints a timeline; asserts nothing.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from typing import Any

LEVELS = {0: "OK", 1: "WARN", 2: "ERROR", 3: "STALE"}


def _hog(stop: Any) -> None:
    x = 0
    while not stop.is_set():
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("launch", help="launch file of the package")
    parser.add_argument("args", nargs="*", help="launch arguments NAME:=VALUE")
    parser.add_argument("--node", required=True, help="fully qualified name of the estimator")
    parser.add_argument("--hog", type=int, default=2, help="busy processes")
    parser.add_argument("--hog-from", type=float, default=5.0, help="s after the first status")
    parser.add_argument("--hog-until", type=float, default=20.0, help="s after the first status")
    parser.add_argument("--seconds", type=float, default=30.0, help="s after the first status")
    a = parser.parse_args(argv)
    if "ROS_DISTRO" not in os.environ:
        print("capture_diagnostics: skipped: ROS 2 is not sourced")
        return 0
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray

    launch = subprocess.Popen(["ros2", "launch", "shape_sensing", a.launch, *a.args], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    rclpy.init()
    node = rclpy.create_node(f"capture_diagnostics_{os.getpid()}")
    t0: list[float] = []
    stop = multiprocessing.Event()
    hogs = [multiprocessing.Process(target=_hog, args=(stop,), daemon=True) for _ in range(a.hog)]
    hog_state = ["off"]

    def on_diag(msg: Any) -> None:
        for st in msg.status:
            if not st.name.startswith(a.node + ":"):
                continue
            now = time.monotonic()
            if not t0:
                t0.append(now)
            v = {kv.key: kv.value for kv in st.values}
            level = LEVELS.get(st.level[0] if isinstance(st.level, bytes) else int(st.level), "?")
            extra = ""
            if st.name.endswith(": inputs"):
                extra = (f" lag_max {v.get('lag_max_ms')} ms, in {v.get('input_rate_hz')}/s, period: dropped "
                         f"{v.get('dropped_behind_period')}, decimated {v.get('decimated_period')}, late "
                         f"{v.get('late_period')}, missing {v.get('missing_period')}")  # fmt: skip
            print(f"{now - t0[0]:6.1f} s [hog {hog_state[0]:>3}] {st.name}: {level} {st.message}{extra}", flush=True)

    node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 100)
    try:
        end = time.monotonic() + 120
        while not t0 and time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.1)
        if not t0:
            print(f"no status of {a.node} within 120 s", file=sys.stderr)
            return 1
        while (elapsed := time.monotonic() - t0[0]) < a.seconds:
            if hog_state[0] == "off" and a.hog_from <= elapsed < a.hog_until and not stop.is_set():
                for h in hogs:
                    h.start()
                hog_state[0] = "on"
                print(f"{elapsed:6.1f} s: {a.hog} hog processes started, load {os.getloadavg()[0]:.1f}", flush=True)
            if hog_state[0] == "on" and elapsed >= a.hog_until:
                stop.set()
                hog_state[0] = "off"
                print(f"{elapsed:6.1f} s: hog processes stopped, load {os.getloadavg()[0]:.1f}", flush=True)
            rclpy.spin_once(node, timeout_sec=0.1)
    finally:
        stop.set()
        node.destroy_node()
        rclpy.try_shutdown()
        os.killpg(launch.pid, signal.SIGINT)
        try:
            launch.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(launch.pid, signal.SIGKILL)
            launch.wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
