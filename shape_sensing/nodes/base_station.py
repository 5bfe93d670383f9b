"""``base_station`` node: the vine robot's base station over a serial line (seed 004).

Thin rclpy layer over :class:`shape_sensing.drivers.base_station.BaseStationDriver`. A timer at
``poll_rate`` drains the port; every STATE frame is published, stamped with the host's read time:

* ``base/state`` (shape_sensing/BaseStationState: counts, pressure, switches, cap bitmask, counters),
* ``base/length`` (sensor_msgs/JointState, position[0] = grown length in m),
* ``base/pressure`` (sensor_msgs/FluidPressure, Pa),

all sensor-data QoS in ``frame_prefix + frame_id``; ``/diagnostics`` once a second (stale port, CRC
errors, dropped frames). A port that fails is reopened with backoff; bad frames are counted and
skipped.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from shape_sensing.config import ConfigError
from shape_sensing.drivers.base_station import SCHEMA, BaseStationDriver, calibration_from_params, open_port
from shape_sensing.drivers.errors import BusError
from shape_sensing.messages import collision as cmsgs
from shape_sensing.messages.factory import MessageFactory
from shape_sensing.nodes._common import declare_schema, diagnostics_msg, reliable_qos, run, sensor_qos, warn_throttled
from shape_sensing.pipelines.vine_imu import length_message
from shape_sensing.types import DiagnosticLevel

__all__ = ["NODE_NAME", "BaseStationNode", "main"]

NODE_NAME = "base_station"


class BaseStationNode:
    """Polls the base station and publishes its frames.

    Raises:
        ConfigError: a bad parameter, or a port that cannot be opened at start.
    """

    def __init__(self, node: Any) -> None:
        self.node = node
        p = self.params = declare_schema(node, SCHEMA)
        try:
            port = open_port(p["port"], p["baud"])
        except BusError as exc:
            raise ConfigError(f"node {node.get_name()}: parameter 'port' = {p['port']!r}: {exc}") from exc
        self.driver = BaseStationDriver(port, calibration_from_params(p), clock=self._now_ns)
        self.frame = p["frame_prefix"] + p["frame_id"]
        f = self.factory = MessageFactory("rclpy")
        self.pubs = {
            "state": node.create_publisher(f.cls("shape_sensing/msg/BaseStationState"), "base/state", sensor_qos()),
            "length": node.create_publisher(f.cls("sensor_msgs/msg/JointState"), "base/length", sensor_qos()),
            "pressure": node.create_publisher(f.cls("sensor_msgs/msg/FluidPressure"), "base/pressure", sensor_qos()),
            "diag": node.create_publisher(f.cls("diagnostic_msgs/msg/DiagnosticArray"), "/diagnostics",
                                          reliable_qos()),
        }  # fmt: skip
        self.failures = 0
        self._retry_at = 0.0
        self._delay = 0.1
        self.last_error = ""
        self.poll_timer = node.create_timer(1.0 / p["poll_rate"], self._on_poll)
        self.diag_timer = node.create_timer(1.0, self._on_diagnostics)
        node.get_logger().info(
            f"base station on {p['port']} at {p['baud']} bit/s, {p['metres_per_count'] * 1000:.4g} mm per count"
        )

    def _now_ns(self) -> int:
        return int(self.node.get_clock().now().nanoseconds)

    def _on_poll(self) -> None:
        import serial

        if self.last_error:
            if time.monotonic() < self._retry_at:
                return
            try:
                self.driver.port = open_port(self.params["port"], self.params["baud"])
                self.last_error, self._delay = "", 0.1
            except BusError as exc:
                self._fail(exc)
                return
        try:
            readings = self.driver.poll()
        except (serial.SerialException, OSError) as exc:
            self._fail(exc)
            return
        f, frame = self.factory, self.frame
        for r in readings:
            self.pubs["state"].publish(cmsgs.base_station_state_msg(r, self.driver.parser.stats, frame, f))
            self.pubs["length"].publish(length_message(r.stamp_ns, frame, r.length, 0.0, f))
            self.pubs["pressure"].publish(cmsgs.fluid_pressure_msg(r.stamp_ns, frame, r.pressure, 0.0, f))

    def _fail(self, exc: BaseException) -> None:
        self.failures += 1
        self.last_error = f"{type(exc).__name__}: {exc}"
        self._retry_at = time.monotonic() + self._delay
        self._delay = min(self._delay * 2.0, 5.0)
        warn_throttled(self.node, "serial port failed", f"serial port failed ({self.last_error}); retrying")

    def _on_diagnostics(self) -> None:
        now = self._now_ns()
        status = self.driver.diagnostics(now, round(self.params["stale_timeout"] * 1e9))
        status.values["port_failures"] = str(self.failures)
        if self.last_error:
            status.level, status.message = DiagnosticLevel.ERROR, f"port failed: {self.last_error}"
        self.pubs["diag"].publish(diagnostics_msg(self.node, now, [status], self.factory))


def main(args: Sequence[str] | None = None) -> int:
    """Console-script entry: run the node until shut down; non-zero exit on a bad configuration."""
    return run(NODE_NAME, BaseStationNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
