"""``bno055_chain`` node: BNO055 IMUs behind layered TCA9548A I2C multiplexers.

Thin rclpy layer over :class:`shape_sensing.drivers.bno055_chain.Bno055Chain`.
A timer at ``rate`` (node clock, so ``use_sim_time`` is honoured) runs one
sweep and publishes, per sensor ``NAME`` (relative topics; stamps = read time):

* ``NAME/data`` sensor_msgs/Imu (sensor-data QoS; fields not read carry
  covariance element 0 = -1),
* ``NAME/mag`` sensor_msgs/MagneticField (sensor-data QoS, at ``mag_rate``),
* ``NAME/temperature`` sensor_msgs/Temperature (sensor-data QoS, at ``status_rate``),
* ``NAME/calibration_status`` shape_sensing/Bno055Calibration (the four levels by name, the sensor, whether a
  saved profile was restored)
  (reliable, transient local: the last levels stay available),
* ``/diagnostics`` diagnostic_msgs/DiagnosticArray every ``diagnostics_period``.

Services (std_srvs/Trigger): ``~/save_calibration`` writes the captured
profiles to ``calibration_file``; ``~/restore_calibration`` reloads that file
and re-applies it to every sensor. With ``simulate:=true`` the register-level
simulators stand in for the bus (a still robot, fully calibrated chips).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shape_sensing.config import ConfigError
from shape_sensing.drivers.bno055_chain import SCHEMA, Bno055Chain, CalibrationStore, ChainOptions
from shape_sensing.drivers.errors import DriverConfigError
from shape_sensing.drivers.i2c_topology import Topology
from shape_sensing.messages import hardware as hw_msgs
from shape_sensing.messages.factory import MessageFactory
from shape_sensing.messages.imu_array import IMU_ARRAY_TYPE
from shape_sensing.nodes._common import declare_schema, diagnostics_msg, reliable_qos, run, sensor_qos, static_qos

__all__ = ["NODE_NAME", "Bno055ChainNode", "main"]

NODE_NAME = "bno055_chain"


class Bno055ChainNode:
    """Runs a :class:`Bno055Chain` on an rclpy node.

    Raises:
        ConfigError: a bad parameter or an I2C bus that cannot be opened (named).
    """

    def __init__(self, node: Any) -> None:
        self.node = node
        p = self.params = declare_schema(node, SCHEMA)
        try:
            topology = Topology.from_params(p)
            options = ChainOptions.from_params(p)
        except DriverConfigError as exc:
            raise ConfigError(f"node {node.get_name()}: {exc}") from exc
        self.calibration_path = Path(p["calibration_file"]) if p["calibration_file"] else None
        store = CalibrationStore()
        if self.calibration_path is not None and self.calibration_path.exists():
            try:
                store = CalibrationStore.load(self.calibration_path)
            except DriverConfigError as exc:
                raise ConfigError(f"node {node.get_name()}: parameter 'calibration_file': {exc}") from exc
            n_profiles = len(store.profiles)
            node.get_logger().info(f"restoring {n_profiles} calibration profile(s) from {self.calibration_path}")
        self.sim = None
        if p["simulate"]:
            from shape_sensing.sim.register_level import build_simulated_hardware

            self.sim = build_simulated_hardware(topology)
            for chip in self.sim.sensors.values():
                chip.calibrate()
            self.bus: Any = self.sim.bus
        else:
            import smbus2

            try:
                self.bus = smbus2.SMBus(p["bus"])
            except OSError as exc:
                raise ConfigError(f"node {node.get_name()}: parameter 'bus' = {p['bus']}: cannot open "
                                  f"/dev/i2c-{p['bus']} ({exc})") from exc  # fmt: skip
        self.chain = Bno055Chain(self.bus, topology, options, calibration=store, clock=self._now)
        f = self.factory = MessageFactory("rclpy")
        self.messages = hw_msgs.ChainMessages(p, f, lambda name: name in self.chain.calibration.profiles)
        latched = {"calibration_status"}  # the last levels stay available to late subscribers
        self.pubs: dict[str, Any] = {
            f"{s.name}/{suffix}": node.create_publisher(
                f.cls(typename), f"{s.name}/{suffix}", static_qos() if suffix in latched else sensor_qos()
            )
            for s in topology.sensors
            for suffix, typename in hw_msgs.CHAIN_TOPICS.items()
        }
        self.sensors = list(topology.sensors)
        array_topic = p["imu_array_topic"]
        self.array_pub = (
            node.create_publisher(f.cls(IMU_ARRAY_TYPE), array_topic, sensor_qos()) if array_topic else None
        )
        self.diag_pub = node.create_publisher(
            f.cls("diagnostic_msgs/msg/DiagnosticArray"), "/diagnostics", reliable_qos()
        )
        from std_srvs.srv import Trigger

        node.create_service(Trigger, "~/save_calibration", self._on_save)
        node.create_service(Trigger, "~/restore_calibration", self._on_restore)
        self.timer = node.create_timer(1.0 / p["rate"], self._on_tick)
        self.diag_timer = node.create_timer(p["diagnostics_period"], self._on_diagnostics)
        where = "the simulated bus" if self.sim else "/dev/i2c-{}".format(p["bus"])
        node.get_logger().info(
            f"{len(topology.sensors)} BNO055s behind {len(topology.muxes)} TCA9548A(s) on {where} at {p['rate']:g} Hz"
        )

    def _now(self) -> int:
        return int(self.node.get_clock().now().nanoseconds)

    def _on_tick(self) -> None:
        now = self._now()
        if now <= 0:
            return  # use_sim_time without a /clock yet
        if self.sim is not None:
            self.sim.bus.now_ns = max(self.sim.bus.now_ns, now)
        readings = self.chain.sweep().readings
        for topic, msg in self.messages.sweep(readings):
            self.pubs[topic].publish(msg)
        if self.array_pub is not None:  # the sweep as one message, stamped with its newest reading
            stamp = max((r.stamp_ns for r in readings), default=now)
            self.array_pub.publish(self.messages.imu_array(readings, self.sensors, stamp))

    def _on_diagnostics(self) -> None:
        now = self._now()
        if now > 0:
            self.diag_pub.publish(diagnostics_msg(self.node, now, self.chain.diagnostics(), self.factory))

    def _on_save(self, request: Any, response: Any) -> Any:
        if self.calibration_path is None:
            response.success, response.message = False, "parameter 'calibration_file' is empty: nowhere to save"
            return response
        try:
            path = self.chain.save_calibration(self.calibration_path)
        except OSError as exc:
            response.success, response.message = False, f"could not write {self.calibration_path}: {exc}"
            return response
        names = sorted(self.chain.calibration.profiles)
        missing = [s.name for s in self.chain.topology.sensors if s.name not in self.chain.calibration.profiles]
        response.success = not missing
        response.message = f"saved {len(names)} profile(s) to {path}" + (
            f"; not yet fully calibrated: {missing}" if missing else ""
        )
        return response

    def _on_restore(self, request: Any, response: Any) -> Any:
        if self.calibration_path is None:
            response.success, response.message = False, "parameter 'calibration_file' is empty: nothing to restore"
            return response
        try:
            store = CalibrationStore.load(self.calibration_path)
        except DriverConfigError as exc:
            response.success, response.message = False, str(exc)
            return response
        self.chain.restore_calibration(store)
        response.success, response.message = True, f"re-applying {len(store.profiles)} profile(s)"
        return response

    def close(self) -> None:
        """Close the mux channels and the bus."""
        self.chain.close()
        self.bus.close()


def main(args: Sequence[str] | None = None) -> int:
    """Console-script entry: run the node until shut down; non-zero exit on a bad configuration."""
    return run(NODE_NAME, Bno055ChainNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
