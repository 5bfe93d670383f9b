"""``contact_cap`` node: the vine robot's tip cap, switches -> contact state, BNO055 -> heading (seed 004).

Thin rclpy layer over :class:`shape_sensing.drivers.contact_cap.ContactCap` and
:class:`~shape_sensing.drivers.contact_cap.CapHeading`. The cap's limit switches reach the host in
the base station's frames, so the node subscribes ``base/state`` (shape_sensing/BaseStationState)
and publishes, per frame, ``cap/state`` (shape_sensing/ContactCapState: contact flag, held flag,
mean switch angle). With ``i2c_bus >= 0`` it reads the cap's BNO055 (behind a TCA9548A when
``mux_address`` is set) at ``imu_rate`` and publishes ``cap/imu`` (sensor_msgs/Imu; the heading is
its yaw). ``/diagnostics`` once a second: stale switch state, I2C errors, stray switch bits.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shape_sensing.config import ConfigError
from shape_sensing.drivers.contact_cap import SCHEMA, CapHeading, ContactCap
from shape_sensing.drivers.errors import DriverError
from shape_sensing.messages import collision as cmsgs
from shape_sensing.messages import common as msgs
from shape_sensing.messages.factory import MessageFactory
from shape_sensing.nodes._common import declare_schema, diagnostics_msg, reliable_qos, run, sensor_qos, warn_throttled
from shape_sensing.types import DiagnosticLevel, DiagnosticStatus, ImuSample

__all__ = ["NODE_NAME", "ContactCapNode", "main"]

NODE_NAME = "contact_cap"


class ContactCapNode:
    """Cap state from the base station's frames, heading from the cap's BNO055.

    Raises:
        ConfigError: a bad parameter, or a BNO055 that does not answer at start.
    """

    def __init__(self, node: Any) -> None:
        self.node = node
        p = self.params = declare_schema(node, SCHEMA)
        self.cap = ContactCap(p["n_switches"], p["sensing_arc"], p["hold_time"])
        self.frame = p["frame_prefix"] + p["frame_id"]
        f = self.factory = MessageFactory("rclpy")
        self.state_pub = node.create_publisher(f.cls("shape_sensing/msg/ContactCapState"), "cap/state", sensor_qos())
        self.imu_pub = node.create_publisher(f.cls("sensor_msgs/msg/Imu"), "cap/imu", sensor_qos())
        self.diag_pub = node.create_publisher(f.cls("diagnostic_msgs/msg/DiagnosticArray"), "/diagnostics",
                                              reliable_qos())  # fmt: skip
        self.sub = node.create_subscription(f.cls("shape_sensing/msg/BaseStationState"), "base/state",
                                            self._on_state, sensor_qos())  # fmt: skip
        self.last_state_ns = -1
        self.i2c_errors = 0
        self.heading: CapHeading | None = None
        if p["i2c_bus"] >= 0:
            try:
                import smbus2

                self.bus = smbus2.SMBus(p["i2c_bus"])
                self.heading = CapHeading(self.bus, p["bno055_address"], mux_address=p["mux_address"] or None,
                                          mux_channel=p["mux_channel"])  # fmt: skip
            except (OSError, DriverError) as exc:
                where = f"node {node.get_name()}: BNO055 on bus {p['i2c_bus']}"
                raise ConfigError(f"{where} did not answer: {exc}") from exc
            self.imu_timer = node.create_timer(1.0 / p["imu_rate"], self._on_imu)
        self.diag_timer = node.create_timer(1.0, self._on_diagnostics)
        node.get_logger().info(f"contact cap: {p['n_switches']} switches, hold {p['hold_time']} s, "
                               + ("BNO055 heading" if self.heading else "no BNO055"))  # fmt: skip

    def _on_state(self, msg: Any) -> None:
        stamp = msgs.stamp_from_msg(msg)
        self.last_state_ns = stamp
        r = self.cap.update(stamp, int(msg.cap_switches))
        self.state_pub.publish(cmsgs.contact_cap_state_msg(r, self.params["n_switches"], self.frame, self.factory))

    def _on_imu(self) -> None:
        assert self.heading is not None
        stamp = int(self.node.get_clock().now().nanoseconds)
        try:
            q, gyro, _ = self.heading.read()
        except (OSError, DriverError, ValueError) as exc:
            self.i2c_errors += 1
            warn_throttled(self.node, "read failed", f"BNO055 read failed: {exc}")
            return
        self.imu_pub.publish(msgs.imu_to_msg(ImuSample(stamp, self.frame, q, gyro), self.factory))

    def _on_diagnostics(self) -> None:
        now = int(self.node.get_clock().now().nanoseconds)
        stale = self.last_state_ns < 0 or now - self.last_state_ns > self.params["stale_timeout"] * 1e9
        level = DiagnosticLevel.WARN if stale or self.i2c_errors or self.cap.stray_bits else DiagnosticLevel.OK
        message = "no base/state (stale)" if stale else "switch state fresh"
        values = {"i2c_errors": str(self.i2c_errors), "stray_switch_bits": str(self.cap.stray_bits)}
        status = DiagnosticStatus("contact_cap", level, message, values=values)
        self.diag_pub.publish(diagnostics_msg(self.node, now, [status], self.factory))


def main(args: Sequence[str] | None = None) -> int:
    """Console-script entry: run the node until shut down; non-zero exit on a bad configuration."""
    return run(NODE_NAME, ContactCapNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
