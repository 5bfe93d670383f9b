"""Executor dispatch on ROS 2: CPU per message of rclpy's SingleThreadedExecutor against the package's LeanExecutor.

A publisher process sends ``--topics`` topics of sensor_msgs/Imu at ``--rate`` Hz each (so the messages arrive as
they do from a simulator or a driver: in bursts, over DDS, from another process). This process holds one node
shaped like an estimator node (those subscriptions, best effort; a 20 Hz and two 1 Hz timers; two Trigger
services beside rclpy's parameter services) with callbacks that only count, and spins it on each executor in
turn for ``--seconds`` (the lean one also with the wakes batched, ``min_wake_interval``, as the estimator
nodes run it: their ``input_batch_period``). Printed per executor: the CPU of this process per message received
(user + system, all threads: DDS's receive thread too), its share of one core, messages received against sent,
and the executor's wakes and wait-set builds where it counts them. The callbacks do nothing, so this is the cost
of the executor and of rclpy's take (the message converted to Python), not of any node's work.

    python3 benchmarks/bench_executor.py [--topics 2] [--rate 100] [--seconds 10] [--batch 0.01 ...] [--json]

Prints figures; asserts nothing about speed. Skips with a message where rclpy is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any

PUBLISHER = r"""
import sys, time, rclpy
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import Imu
topics, rate, seconds = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
rclpy.init()
node = rclpy.create_node("bench_executor_publisher")
pubs = [node.create_publisher(Imu, f"bench_executor/imu_{i}", qos_profile_sensor_data) for i in range(topics)]
while min(p.get_subscription_count() for p in pubs) < 1:
    time.sleep(0.05)
print("ready", flush=True)
msg = Imu()
period = 1.0 / rate
t0 = time.monotonic()
k = 0
while time.monotonic() - t0 < seconds:
    k += 1
    now = time.time_ns()
    msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(now, 1_000_000_000)
    for p in pubs:
        p.publish(msg)
    time.sleep(max(0.0, t0 + k * period - time.monotonic()))
print(k * topics, flush=True)
node.destroy_node()
rclpy.shutdown()
"""


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(kind: str, topics: int, rate: float, seconds: float, batch: float = 0.0) -> dict[str, Any]:
    import rclpy
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import Imu
    from std_srvs.srv import Trigger

    from shape_sensing.nodes.executor import ENV_EXECUTOR, make_executor

    os.environ[ENV_EXECUTOR] = kind
    node = rclpy.create_node(f"bench_executor_{kind}")
    got = [0]

    def count(msg: Any, info: Any = None) -> None:
        got[0] += 1

    for i in range(topics):
        node.create_subscription(Imu, f"bench_executor/imu_{i}", count, qos_profile_sensor_data)
    for period in (0.05, 1.0, 1.0):
        node.create_timer(period, lambda: None)
    for name in ("~/offset", "~/save_reference"):
        node.create_service(Trigger, name, lambda req, resp: resp)
    executor = make_executor()
    if batch:
        executor.min_wake_interval = batch
    executor.add_node(node)
    pub = subprocess.Popen([sys.executable, "-c", PUBLISHER, str(topics), str(rate), str(seconds)],
                           stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert pub.stdout is not None
    while pub.stdout.readline().strip() != "ready":
        executor.spin_once(0.05)
    got[0] = 0
    t0, c0 = time.monotonic(), _cpu()
    while pub.poll() is None and time.monotonic() - t0 < seconds + 5:
        executor.spin_once(0.1)
    wall, cpu = time.monotonic() - t0, _cpu() - c0
    sent = int((pub.stdout.read() or "0").strip().splitlines()[-1])
    counts = dict(getattr(executor, "counts", {}))
    executor.shutdown()
    node.destroy_node()
    return {
        "executor": kind + (f", {1e3 * batch:g} ms batches" if batch else ""), "topics": topics, "rate_hz": rate,
        "sent": sent, "received": got[0], "cpu_s": cpu, "wall_s": wall,
        "cpu_ms_per_msg": 1e3 * cpu / max(1, got[0]), "core_share_pct": 100.0 * cpu / wall, **counts,
    }  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--topics", type=int, default=2, help="topics (one message each per period)")
    ap.add_argument("--rate", type=float, default=100.0, help="messages per second per topic")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument(
        "--batch",
        type=float,
        action="append",
        default=[],
        help="also the lean executor with this min_wake_interval (s); repeatable (default 0.01, 0.02)",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    args.batch = args.batch or [0.01, 0.02]
    try:
        import rclpy
    except ImportError as exc:
        print(f"bench_executor: skipped, rclpy is not importable ({exc}); source ROS 2 first")
        return 0
    rclpy.init()
    try:
        cases = [("rclpy", 0.0), ("lean", 0.0)] + [("lean", b) for b in args.batch]
        rows = [measure(kind, args.topics, args.rate, args.seconds, batch) for kind, batch in cases]
    finally:
        rclpy.shutdown()
    if args.json:
        print(json.dumps(rows))
        return 0
    print(f"executor dispatch: {args.topics} topics x {args.rate:g} Hz for {args.seconds:g} s, empty callbacks; "
          f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip
    for r in rows:
        extra = f"; {r['wakes']} wakes, {r['rebuilds']} wait-set builds" if "wakes" in r else ""
        print(f"  {r['executor']:22s}: {r['cpu_ms_per_msg']:.3f} ms CPU per message, {r['core_share_pct']:.1f} % of "
              f"a core; received {r['received']} of {r['sent']}{extra}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
