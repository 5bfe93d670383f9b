"""The ROS graph as a command sees it: wait until a node subscribes to topics (``shape-sensing play-bag``)."""

from __future__ import annotations

import time

__all__ = ["wait_for_subscriptions"]


def _split(fq: str) -> tuple[str, str]:
    ns, _, name = fq.rstrip("/").rpartition("/")
    return name, ns or "/"


def wait_for_subscriptions(node_fq: str, topics: set[str], timeout: float) -> set[str]:
    """Block until ``node_fq`` subscribes to every topic of ``topics`` (``topics`` empty: to any topic).

    Returns the topics it subscribes to. Raises TimeoutError naming what is missing, RuntimeError without ROS 2.
    """
    try:  # imported here, so the module imports without ROS 2 (the CLI's -h)
        import rclpy
    except ImportError as exc:
        raise RuntimeError("play-bag needs ROS 2: source /opt/ros/<distro>/setup.bash first") from exc

    name, ns = _split(node_fq)
    rclpy.init(args=[])
    probe = rclpy.create_node(f"play_bag_waiting_for_{name}")
    try:
        end = time.monotonic() + timeout
        subscribed: set[str] = set()
        while time.monotonic() < end:
            try:
                subscribed = {t for t, _ in probe.get_subscriber_names_and_types_by_node(name, ns)}
            except Exception:  # the node is not discovered yet
                subscribed = set()
            if subscribed and (topics <= subscribed if topics else True):
                return subscribed
            rclpy.spin_once(probe, timeout_sec=0.1)
        missing = sorted(topics - subscribed) if topics else ["any topic"]
        raise TimeoutError(f"{node_fq} did not subscribe to {missing} within {timeout:g} s")
    finally:
        probe.destroy_node()
        rclpy.try_shutdown()
