"""``netft`` node: an ATI Net F/T force/torque sensor over UDP (RDT), as geometry_msgs/WrenchStamped.

Thin rclpy layer over :class:`shape_sensing.drivers.netft.NetFtReceiver`. At start it asks the
sensor for high-speed real-time (or buffered) streaming (and a software bias if configured); a
timer at ``poll_rate`` drains the socket and publishes ``wrench`` (sensor-data QoS, frame
``frame_prefix + frame_id``, stamped with the receive time); ``/diagnostics`` once a second (stale,
lost and reordered records, sensor status). Streaming is stopped at shutdown. Any other force
source can publish the same message type for the estimator.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import Any

from shape_sensing.config import ConfigError
from shape_sensing.drivers.errors import BusError, DriverConfigError
from shape_sensing.drivers.netft import SCHEMA, NetFtReceiver, open_socket
from shape_sensing.messages import collision as cmsgs
from shape_sensing.messages.factory import MessageFactory
from shape_sensing.nodes._common import declare_schema, diagnostics_msg, reliable_qos, run, sensor_qos, warn_throttled

__all__ = ["NODE_NAME", "NetFtNode", "main"]

NODE_NAME = "netft"


class NetFtNode:
    """Streams one Net F/T.

    Raises:
        ConfigError: a bad parameter or a socket that cannot be opened.
    """

    def __init__(self, node: Any) -> None:
        self.node = node
        p = self.params = declare_schema(node, SCHEMA)
        try:
            self.sock = open_socket(0, bind_address=p["bind_address"])
            self.rx = NetFtReceiver(self.sock, (p["address"], p["port"]), p["counts_per_force"],
                                    p["counts_per_torque"], clock=self._now_ns)  # fmt: skip
            self.rx.start(buffered=p["buffered"])
            if p["bias_on_start"]:
                self.rx.bias()
        except (BusError, DriverConfigError, OSError) as exc:
            raise ConfigError(f"node {node.get_name()}: {exc}") from exc
        self.frame = p["frame_prefix"] + p["frame_id"]
        f = self.factory = MessageFactory("rclpy")
        self.pub = node.create_publisher(f.cls("geometry_msgs/msg/WrenchStamped"), "wrench", sensor_qos())
        self.diag_pub = node.create_publisher(f.cls("diagnostic_msgs/msg/DiagnosticArray"), "/diagnostics",
                                              reliable_qos())  # fmt: skip
        self.poll_timer = node.create_timer(1.0 / p["poll_rate"], self._on_poll)
        self.diag_timer = node.create_timer(1.0, self._on_diagnostics)
        node.get_logger().info(f"Net F/T at {p['address']}:{p['port']}, streaming requested")

    def _now_ns(self) -> int:
        return int(self.node.get_clock().now().nanoseconds)

    def _on_poll(self) -> None:
        try:
            readings = self.rx.poll()
        except OSError as exc:
            warn_throttled(self.node, "receive failed", f"UDP receive failed: {exc}")
            return
        for r in readings:
            self.pub.publish(cmsgs.wrench_stamped_msg(r.stamp_ns, self.frame, r.force, r.torque, self.factory))

    def _on_diagnostics(self) -> None:
        now = self._now_ns()
        st = self.rx.diagnostics(now, round(self.params["stale_timeout"] * 1e9))
        self.diag_pub.publish(diagnostics_msg(self.node, now, [st], self.factory))

    def close(self) -> None:
        """Stop the stream and close the socket."""
        with contextlib.suppress(OSError):
            self.rx.stop()
        self.sock.close()


def main(args: Sequence[str] | None = None) -> int:
    """Console-script entry: run the node until shut down; non-zero exit on a bad configuration."""
    return run(NODE_NAME, NetFtNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
