"""ROS 2 benchmark: the hinge-arc estimator node under the vine simulation (CPU share, output rate, latency).

Runs ``ros2 launch shape_sensing vine_imu_sim.launch.xml`` (18 IMUs at 100 Hz, estimator
publishing at 30 Hz), lets it warm up, then for ``--seconds`` measures

* the CPU share of the ``hinge_arc_estimator`` process (user + system time over wall
  time, from /proc via psutil; 100 % = one core) and, as the reference measured in the
  same run, that of the ``vine_imu_simulator`` process feeding it;
* the estimator's output rate on ``/vine/shape/path``;
* the latency of each estimate: receive time minus the estimate's stamp (the stamp of
  the newest IMU sample it used), median and p95, against the reference latency of
  the raw ``/vine/imu_17/data`` stream (receive time minus its stamp) in the same run.

Run, with ROS 2 sourced and the package built (colcon):
    python3 benchmarks/bench_ros_nodes.py [--seconds 10] [--warmup 5] [--json]
Prints figures; asserts nothing about speed. Skips with a message where ROS 2 is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from typing import Any


def _ros_ready() -> str:
    """'' when ROS 2 and the built package are usable here, else why not."""
    if "ROS_DISTRO" not in os.environ:
        return "ROS 2 is not sourced (source /opt/ros/<distro>/setup.bash and the workspace's install/setup.bash)"
    try:
        import psutil  # noqa: F401
        import rclpy  # noqa: F401
        from ament_index_python.packages import get_package_share_directory

        get_package_share_directory("shape_sensing")
    except Exception as exc:
        return f"ROS 2 or the built shape_sensing package is not usable here: {exc!r}"
    return ""


def _find(children: list[Any], name: str) -> Any:
    for proc in children:
        try:
            if any(name in part for part in proc.cmdline()):
                return proc
        except Exception:  # a process that just ended
            continue
    raise RuntimeError(f"no {name} process under the launch")


def _cpu(proc: Any) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


def _percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = min(len(s) - 1, max(0, round(q / 100.0 * (len(s) - 1))))
    return s[k]


def measure(seconds: float, warmup: float, quiet: bool) -> dict[str, float]:
    """Launch the vine simulation, measure, shut it down (SIGINT); return the figures."""
    import psutil
    import rclpy
    from nav_msgs.msg import Path
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Imu

    launch = subprocess.Popen(
        ["ros2", "launch", "shape_sensing", "vine_imu_sim.launch.xml"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    rclpy.init()
    node = rclpy.create_node("bench_ros_nodes_probe")
    path_latency: list[float] = []
    imu_latency: list[float] = []

    def stamp_s(msg: Any) -> float:
        return msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9

    def on_path(msg: Any) -> None:
        path_latency.append(time.time() - stamp_s(msg))

    def on_imu(msg: Any) -> None:
        imu_latency.append(time.time() - stamp_s(msg))

    node.create_subscription(Path, "/vine/shape/path", on_path, 50)
    node.create_subscription(Imu, "/vine/imu_17/data", on_imu, qos_profile_sensor_data)
    try:
        end = time.monotonic() + 60.0
        while not path_latency and time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.1)
        if not path_latency:
            raise RuntimeError("no /vine/shape/path within 60 s of the launch")
        if not quiet:
            print(f"warming up {warmup:g} s ...", file=sys.stderr)
        end = time.monotonic() + warmup
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.05)
        children = psutil.Process(launch.pid).children(recursive=True)
        estimator, simulator = _find(children, "hinge_arc_estimator"), _find(children, "vine_imu_simulator")
        path_latency.clear()
        imu_latency.clear()
        cpu0 = (_cpu(estimator), _cpu(simulator))
        t0 = time.monotonic()
        next_report = t0 + 5.0
        while (now := time.monotonic()) < t0 + seconds:
            rclpy.spin_once(node, timeout_sec=0.05)
            if not quiet and now >= next_report:
                print(f"measuring: {now - t0:.0f}/{seconds:g} s", file=sys.stderr)
                next_report += 5.0
        wall = time.monotonic() - t0
        cpu1 = (_cpu(estimator), _cpu(simulator))
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
        os.killpg(launch.pid, signal.SIGINT)
        try:
            launch.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(launch.pid, signal.SIGKILL)
            launch.wait()
    est_cpu = 100.0 * (cpu1[0] - cpu0[0]) / wall
    sim_cpu = 100.0 * (cpu1[1] - cpu0[1]) / wall
    med, p95 = _percentile(path_latency, 50) * 1e3, _percentile(path_latency, 95) * 1e3
    imu_med, imu_p95 = _percentile(imu_latency, 50) * 1e3, _percentile(imu_latency, 95) * 1e3
    return {
        "seconds": wall,
        "estimator_cpu_percent": est_cpu,
        "simulator_cpu_percent": sim_cpu,
        "cpu_ratio_estimator_to_simulator": est_cpu / sim_cpu if sim_cpu > 0 else float("nan"),
        "output_rate_hz": len(path_latency) / wall,
        "imu_rate_hz": len(imu_latency) / wall,
        "latency_median_ms": med,
        "latency_p95_ms": p95,
        "imu_latency_median_ms": imu_med,
        "imu_latency_p95_ms": imu_p95,
        "latency_ratio_median": med / imu_med if imu_med > 0 else float("nan"),
        "load_average_1min": os.getloadavg()[0],
        "cpus": float(os.cpu_count() or 0),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measurement window (s)")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds after the first estimate before measuring")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON only")
    args = parser.parse_args(argv)
    why = _ros_ready()
    if why:
        print(f"bench_ros_nodes: skipped: {why}")
        return 0
    r = measure(args.seconds, args.warmup, args.json)
    if args.json:
        print(json.dumps(r, indent=2))
        return 0
    print(f"vine_imu_sim on ROS 2 {os.environ.get('ROS_DISTRO')}: {r['seconds']:.1f} s measured, "
          f"{r['cpus']:.0f} CPUs, load average {r['load_average_1min']:.1f}")  # fmt: skip
    print(
        f"  hinge_arc_estimator CPU     {r['estimator_cpu_percent']:6.1f} % of one core "
        f"(simulator {r['simulator_cpu_percent']:.1f} %; ratio {r['cpu_ratio_estimator_to_simulator']:.2f})"
    )
    print(
        f"  output rate /vine/shape/path {r['output_rate_hz']:6.1f} Hz (nominal 30; /vine/imu_17/data "
        f"{r['imu_rate_hz']:.1f} Hz, nominal 100)"
    )
    print(
        f"  latency (receive - stamp)    median {r['latency_median_ms']:.1f} ms, p95 {r['latency_p95_ms']:.1f} ms "
        f"(raw IMU median {r['imu_latency_median_ms']:.1f} ms, p95 {r['imu_latency_p95_ms']:.1f} ms; "
        f"median ratio {r['latency_ratio_median']:.1f})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
