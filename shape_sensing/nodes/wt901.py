"""``wt901`` node: WitMotion WT901 attitude sensors over UART or CAN -> sensor_msgs/Imu.

Thin rclpy layer over :mod:`shape_sensing.drivers.wt901_serial` (one sensor
per serial port) and :mod:`shape_sensing.drivers.wt901_can` (one CAN ID per
module board), configured by :data:`shape_sensing.drivers.wt901_config.SCHEMA`.

Publishes:
    ``imu/<frame_id>`` (sensor_msgs/Imu, sensor-data QoS), stamped with the
    host's read time (the node clock), orientation covariance from the stated
    accuracy (0.05 deg roll/pitch, 1 deg yaw); ``/diagnostics`` once per
    second: per-sensor freshness, bad frames, port or bus failures.

Services (UART mode):
    ``~/set_angle_reference`` (std_srvs/Trigger): unlock, CALSW = 8 (the
    present attitude becomes the zero), save -- on every sensor.
    ``~/calibrate_accelerometer`` (std_srvs/Trigger): unlock, CALSW = 1; after
    5 s CALSW = 0 and save. Keep the sensors still and level meanwhile. A
    call while a calibration is still running is refused (success false).

Bad frames are counted and skipped; a failed port or bus is retried with
backoff while the other sensors keep streaming.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shape_sensing.config import ConfigError
from shape_sensing.drivers.errors import BusError
from shape_sensing.drivers.wt901 import SAVE, UNLOCK, CalibrationMode, Register, command
from shape_sensing.drivers.wt901_config import SCHEMA, Wt901NodeConfig, build_can_reader, build_serial_group
from shape_sensing.drivers.wt901_serial import Wt901SerialGroup
from shape_sensing.messages import common as msgs
from shape_sensing.messages.factory import MessageFactory
from shape_sensing.messages.imu_array import IMU_ARRAY_TYPE, imu_array_msg
from shape_sensing.nodes._common import declare_schema, diagnostics_msg, reliable_qos, run, sensor_qos

__all__ = ["NODE_NAME", "Wt901Node", "main"]

NODE_NAME = "wt901"
ACC_CALIBRATION_S = 5.0


class Wt901Node:
    """Polls the WT901 readers on a timer and publishes their samples.

    Raises:
        ConfigError: bad or inconsistent parameters, or a CAN bus that cannot be opened.
    """

    def __init__(self, node: Any) -> None:
        from std_srvs.srv import Trigger

        self.node = node
        self.cfg = Wt901NodeConfig.from_params(declare_schema(node, SCHEMA))
        p = self.cfg.params
        clock = self._now_ns
        try:
            self.reader: Any = (
                build_serial_group(self.cfg, clock) if p["mode"] == "uart" else build_can_reader(self.cfg, clock)
            )
        except (BusError, OSError, ValueError) as exc:
            raise ConfigError(f"node {node.get_name()}: cannot open the {p['mode']} interface: {exc}") from exc
        self.factory = MessageFactory("rclpy")
        imu_cls = self.factory.cls("sensor_msgs/msg/Imu")
        self.publishers = {
            fid: node.create_publisher(imu_cls, f"imu/{raw}", sensor_qos())
            for fid, raw in zip(self.cfg.frame_ids(), p["frame_ids"], strict=True)
        }
        array_topic = p["imu_array_topic"]
        self.array_frame = p["frame_prefix"] + NODE_NAME  # the ImuArray header's frame: the bus, not a TF frame
        self.array_pub = (
            node.create_publisher(self.factory.cls(IMU_ARRAY_TYPE), array_topic, sensor_qos()) if array_topic else None
        )
        self.diag_pub = node.create_publisher(
            self.factory.cls("diagnostic_msgs/msg/DiagnosticArray"), "/diagnostics", reliable_qos()
        )
        self.poll_timer = node.create_timer(1.0 / p["poll_rate"], self._on_poll)
        self.diag_timer = node.create_timer(1.0, self._on_diagnostics)
        self._acc_timer: Any = None
        if isinstance(self.reader, Wt901SerialGroup):
            self.services = [
                node.create_service(Trigger, "~/set_angle_reference", self._on_angle_reference),
                node.create_service(Trigger, "~/calibrate_accelerometer", self._on_calibrate_accelerometer),
            ]
        node.get_logger().info(f"{len(self.publishers)} WT901 sensor(s) over {p['mode'].upper()}")

    def _now_ns(self) -> int:
        return int(self.node.get_clock().now().nanoseconds)

    def _on_poll(self) -> None:
        samples = [s for s in self.reader.poll() if s.frame_id in self.publishers]
        for sample in samples:
            self.publishers[sample.frame_id].publish(msgs.imu_to_msg(sample, self.factory))
        if self.array_pub is not None and samples:  # the poll's samples as one message, stamped with the newest
            stamp = max(s.stamp_ns for s in samples)
            self.array_pub.publish(imu_array_msg(stamp, self.array_frame, samples, self.factory))

    def _on_diagnostics(self) -> None:
        now = self._now_ns()
        stale = round(self.cfg.params["stale_timeout"] * 1e9)
        self.diag_pub.publish(diagnostics_msg(self.node, now, self.reader.diagnostics(now, stale), self.factory))

    def _write_all(self, commands: list[bytes]) -> list[str]:
        failed = []
        for sensor in self.reader.sensors:
            try:
                for c in commands:
                    sensor.port.write(c)
            except OSError as exc:
                failed.append(f"{sensor.frame_id}: {exc}")
        return failed

    def _on_angle_reference(self, request: Any, response: Any) -> Any:
        failed = self._write_all([UNLOCK, command(Register.CALSW, CalibrationMode.ANGLE_REFERENCE), SAVE])
        response.success = not failed
        response.message = "angle reference set on every sensor" if not failed else f"failed on {failed}"
        return response

    def _on_calibrate_accelerometer(self, request: Any, response: Any) -> Any:
        if self._acc_timer is not None:
            response.success = False
            response.message = (
                "an accelerometer calibration is already running; call again after it has finished and saved"
            )
            return response
        failed = self._write_all([UNLOCK, command(Register.CALSW, CalibrationMode.ACCELEROMETER)])
        timer: Any = None

        def finish() -> None:
            # One shot: this call's own timer is cancelled and destroyed the first time it fires.
            if self._acc_timer is not timer:
                return  # already finished
            self._acc_timer = None
            timer.cancel()
            self.node.destroy_timer(timer)
            rest = self._write_all([UNLOCK, command(Register.CALSW, CalibrationMode.NORMAL), SAVE])
            if rest:
                self.node.get_logger().error(f"accelerometer calibration: finishing failed on {rest}")
            else:
                self.node.get_logger().info("accelerometer calibration finished and saved")

        # Scheduled even when some sensors failed: the others are in calibration mode and must be put back.
        timer = self._acc_timer = self.node.create_timer(ACC_CALIBRATION_S, finish)
        response.success = not failed
        response.message = (
            f"accelerometer calibration running for {ACC_CALIBRATION_S:g} s: keep the sensors still and level"
            if not failed
            else f"failed on {failed}"
        )
        return response


def main(args: Sequence[str] | None = None) -> int:
    """Console-script entry: run the node until shut down; non-zero exit on a bad configuration."""
    return run(NODE_NAME, Wt901Node, args)


if __name__ == "__main__":
    raise SystemExit(main())
