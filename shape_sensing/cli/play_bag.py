"""``shape-sensing play-bag``: ``ros2 bag play`` once the estimator subscribes to the bag's topics.

A launch file that starts an estimator and a bag together (``bag:=``) would otherwise play the first
seconds of the bag before the node is up: they are lost (best-effort inputs are not queued for a
subscriber that does not exist yet). This waits until the node ``--node`` subscribes to at least
one topic of the bag and, if ``--topics`` are given, to every one of them, then runs
``ros2 bag play`` with the remaining arguments and ``--delay`` so that the player's publishers are
matched with the node's subscriptions before the first message goes out.

    shape-sensing play-bag --node /continuum/continuum_estimator BAG -- --clock 100
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bag", type=Path, help="the bag to play (directory or .mcap/.db3 file)")
    parser.add_argument("--node", required=True, help="fully qualified name of the node to wait for, e.g. /ns/name")
    parser.add_argument(
        "--topics", nargs="*", default=None, help="topics the node must subscribe to first (default: any of the bag's)"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="longest wait for the node (s)")
    parser.add_argument(
        "--delay", type=float, default=1.0, help="ros2 bag play --delay: seconds for the player's discovery (s)"
    )
    parser.add_argument("play_args", nargs=argparse.REMAINDER, help="after --: further ros2 bag play arguments")


def run(args: argparse.Namespace) -> int:
    if not args.bag.exists():
        print(f"play-bag: no bag at {args.bag}", file=sys.stderr)
        return 2
    ros2 = shutil.which("ros2")
    if ros2 is None or "ROS_DISTRO" not in os.environ:
        print("play-bag: ros2 is not on PATH (source /opt/ros/<distro>/setup.bash)", file=sys.stderr)
        return 2
    try:  # a ROS 2 command (the launch files' bag:=): rclpy only in the nodes' layer, imported here
        from shape_sensing.nodes.graph import wait_for_subscriptions

        subscribed = wait_for_subscriptions(args.node, set(args.topics or ()), args.timeout)
    except TimeoutError as exc:
        print(f"play-bag: {exc}", file=sys.stderr)
        return 1
    except RuntimeError as exc:  # ROS 2 on PATH, but this interpreter has no rclpy
        print(f"play-bag: {exc}", file=sys.stderr)
        return 2
    print(f"play-bag: {args.node} subscribes to {len(subscribed)} topics; playing {args.bag}", flush=True)
    extra = [a for a in args.play_args if a != "--"]
    cmd = [ros2, "bag", "play", str(args.bag), "--delay", f"{args.delay:g}", *extra]  # the bag before list options
    os.execv(ros2, cmd)  # the launch's process: SIGINT and exit status are ros2 bag play's
    return 0  # pragma: no cover
