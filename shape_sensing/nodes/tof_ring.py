"""``tof_ring`` node: sensor rings of VL53L5CX time-of-flight sensors and ISM330BX IMUs on I2C.

Thin rclpy layer over :class:`shape_sensing.drivers.tof_ring.TofRingSet`
(one per I2C adapter in ``ring_buses``). A 2 ms timer (node clock) gives
every due sensor one step and publishes, per sensor ``NAME`` (relative
topics, sensor-data QoS, stamps = host read time):

* ``NAME/frame`` shape_sensing/TofFrame (every zone: distance, sigma, status,
  signal, ambient) and ``NAME/points`` sensor_msgs/PointCloud2 of the valid
  zones in the sensor frame, per VL53L5CX;
* ``NAME/imu`` sensor_msgs/Imu per ISM330BX (no orientation: covariance
  element 0 = -1; gyroscope bias from the stationary start removed);
* ``/tf_static`` ring -> sensor mountings (transient local), ``fov_markers``
  visualization_msgs/MarkerArray of the fields of view (transient local);
* ``/diagnostics`` every ``diagnostics_period``: per-sensor rate, invalid-zone
  fraction, boot failures, re-inits, NACKs, timeouts, FIFO overruns.

With ``simulate:=true`` register-level simulators (and the demo's box scene
seen by a straight, still robot) stand in for the buses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from shape_sensing.config import ConfigError
from shape_sensing.drivers.errors import DriverConfigError, DriverError
from shape_sensing.drivers.tof_ring import SCHEMA, TofRingSet, layout_from_params, split_by_bus
from shape_sensing.messages.common import imu_to_msg, tf_message
from shape_sensing.messages.factory import MessageFactory
from shape_sensing.messages.tof import fov_markers, tof_frame_msg, tof_points_msg
from shape_sensing.nodes._common import declare_schema, diagnostics_msg, reliable_qos, run, sensor_qos, static_qos
from shape_sensing.types import ImuSample, TransformStamped

__all__ = ["NODE_NAME", "TofRingNode", "main"]

NODE_NAME = "tof_ring"


class TofRingNode:
    """Runs the ring sets on an rclpy node.

    Raises:
        ConfigError: a bad parameter, missing VL53L5CX firmware, or an I2C bus that cannot be opened (named).
    """

    def __init__(self, node: Any) -> None:
        self.node = node
        p = self.params = declare_schema(node, SCHEMA)
        try:
            self.layout = layout_from_params(p)
            per_bus = split_by_bus(p)
            from shape_sensing.drivers.vl53l5cx import load_buffers

            buffers = load_buffers(p["firmware_dir"])
        except DriverConfigError as exc:
            raise ConfigError(f"node {node.get_name()}: {exc}") from exc
        now = self._now()
        self.sims: list[Any] = []
        self.buses: list[Any] = []
        self.sets: list[TofRingSet] = []
        for number, q in per_bus.items():
            if p["simulate"]:
                bus, clock, sleep = self._simulated(q, buffers, now)
            else:
                import smbus2

                try:
                    bus = smbus2.SMBus(number)
                except OSError as exc:
                    raise ConfigError(f"node {node.get_name()}: parameter 'ring_buses' names {number}: cannot open "
                                      f"/dev/i2c-{number} ({exc})") from exc  # fmt: skip
                clock, sleep = self._now, None
            self.buses.append(bus)
            try:
                kw = {"sleep": sleep} if sleep is not None else {}
                self.sets.append(TofRingSet(bus, q, buffers, clock=clock, **kw))
            except (DriverConfigError, DriverError) as exc:
                raise ConfigError(f"node {node.get_name()}: {exc}") from exc
        f = self.factory = MessageFactory("rclpy")
        self.mounts = {m.name: m for m in [*self.layout.tofs, *self.layout.imus]}
        self.pubs: dict[str, Any] = {}
        for m in self.layout.tofs:
            self.pubs[f"{m.name}/frame"] = node.create_publisher(
                f.cls("shape_sensing/msg/TofFrame"), f"{m.name}/frame", sensor_qos()
            )
            self.pubs[f"{m.name}/points"] = node.create_publisher(
                f.cls("sensor_msgs/msg/PointCloud2"), f"{m.name}/points", sensor_qos()
            )
        for m in self.layout.imus:
            self.pubs[f"{m.name}/imu"] = node.create_publisher(
                f.cls("sensor_msgs/msg/Imu"), f"{m.name}/imu", sensor_qos()
            )
        self.diag_pub = node.create_publisher(f.cls("diagnostic_msgs/msg/DiagnosticArray"), "/diagnostics",
                                              reliable_qos())  # fmt: skip
        static = node.create_publisher(f.cls("tf2_msgs/msg/TFMessage"), "/tf_static", static_qos())
        prefix = p["frame_prefix"]
        mountings = [
            TransformStamped(now, f"{prefix}{m.ring}", m.spec.frame_id, m.T_ring_sensor) for m in self.mounts.values()
        ]
        static.publish(tf_message(mountings, f))
        self.fov_pub = node.create_publisher(f.cls("visualization_msgs/msg/MarkerArray"), "fov_markers", static_qos())
        self.fov_pub.publish(fov_markers([m.spec.frame_id for m in self.layout.tofs], now, factory=f))
        self.timer = node.create_timer(0.002, self._on_tick)
        self.diag_timer = node.create_timer(p["diagnostics_period"], self._on_diagnostics)
        where = "simulated buses" if p["simulate"] else ", ".join(f"/dev/i2c-{b}" for b in per_bus)
        node.get_logger().info(
            f"{len(self.layout.tofs)} VL53L5CX and {len(self.layout.imus)} ISM330BX in {len(self.layout.rings)} "
            f"ring(s) on {where}; booting (the VL53L5CX firmware upload takes seconds)"
        )

    def _simulated(self, q: dict[str, Any], buffers: Any, now: int) -> tuple[Any, Any, Any]:
        import numpy as np

        from shape_sensing.demos.tof_rings import T_world_ring
        from shape_sensing.sim.tof_rings import build_ring_hardware, demo_scene

        lay = layout_from_params(q)
        hw = build_ring_hardware(
            lay, buffers, bitrate=float(q["bitrate"]), seed=len(self.sims), range_convention=str(q["range_convention"])
        )
        hw.bus.now_ns = now
        scene = demo_scene()
        for m in lay.tofs:
            T = T_world_ring(float(lay.rings[m.ring]), 0.0) @ m.T_ring_sensor
            hw.tofs[m.name].set_zones(scene.zone_distances(T, int(q["resolution"])))
        for m in lay.imus:
            R = T_world_ring(float(lay.rings[m.ring]), 0.0)[:3, :3]
            hw.imus[m.name].set_motion(np.zeros(3), R.T @ np.array([0.0, 0.0, 9.80665]))
        self.sims.append(hw)
        return hw.bus, hw.bus.clock, hw.bus.sleep

    def _now(self) -> int:
        return int(self.node.get_clock().now().nanoseconds)

    def _on_tick(self) -> None:
        now = self._now()
        if now <= 0:
            return  # use_sim_time without a /clock yet
        for hw in self.sims:
            hw.bus.now_ns = max(hw.bus.now_ns, now)
        f = self.factory
        p = self.params
        for rings in self.sets:
            result = rings.poll()
            for name, reading in result.tof:
                fid = self.mounts[name].spec.frame_id
                kw = {"min_range": p["min_range"], "max_range": p["max_range"], "factory": f}
                self.pubs[f"{name}/frame"].publish(tof_frame_msg(reading, fid, **kw))
                self.pubs[f"{name}/points"].publish(tof_points_msg(reading, fid, **kw))
            for name, samples in result.imu:
                fid = self.mounts[name].spec.frame_id
                pub = self.pubs[f"{name}/imu"]
                for s in samples:
                    pub.publish(imu_to_msg(ImuSample(s.stamp_ns, fid, None, s.angular_velocity,
                                                     s.linear_acceleration), f))  # fmt: skip

    def _on_diagnostics(self) -> None:
        now = self._now()
        if now > 0:
            statuses = [s for rings in self.sets for s in rings.diagnostics()]
            self.diag_pub.publish(diagnostics_msg(self.node, now, statuses, self.factory))

    def close(self) -> None:
        """Close the buses."""
        for bus in self.buses:
            bus.close()


def main(args: Sequence[str] | None = None) -> int:
    """Console-script entry: run the node until shut down; non-zero exit on a bad configuration."""
    return run(NODE_NAME, TofRingNode, args)


if __name__ == "__main__":
    raise SystemExit(main())
