"""The simulated collision robot's hardware, end to end: emulators -> real drivers -> raw ROS messages.

One :class:`SimulatedRig` step turns a simulator sample into the messages the robot's driver nodes
would publish: the base station's STATE frame is built by the byte-level emulator (with line faults)
and parsed by :class:`~shape_sensing.drivers.base_station.BaseStationDriver`; the cap's switches go
through :class:`~shape_sensing.drivers.contact_cap.ContactCap`; the heading is read by the BNO055
driver from the simulated chip over the simulated I2C bus; the force travels as a Net F/T RDT record
decoded by :class:`~shape_sensing.drivers.netft.NetFtReceiver`. The demo writes these messages to
its bag and the ``vine_collision_simulator`` node publishes them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from shape_sensing.drivers.base_station import BaseStationDriver
from shape_sensing.drivers.contact_cap import CapHeading, ContactCap
from shape_sensing.drivers.netft import NetFtReceiver, RdtRecord, encode_record
from shape_sensing.estimators.collision_pivot import PivotOutput
from shape_sensing.messages import collision as cmsgs
from shape_sensing.messages import common as msgs
from shape_sensing.messages.factory import MessageFactory
from shape_sensing.messages.growth import pose_stamped_msg
from shape_sensing.pipelines.vine_imu import length_message
from shape_sensing.sim.base_station_emulator import BaseStationEmulator, LineFaults
from shape_sensing.sim.bno055_sim import SimBNO055
from shape_sensing.sim.i2c_bus import SimI2CBus
from shape_sensing.sim.vine_collision import SimSample, VineCollisionSim
from shape_sensing.types import ImuSample

__all__ = ["RawMessage", "SimulatedRig", "truth_output"]


@dataclass(frozen=True)
class RawMessage:
    """A message of one step: relative topic, message, log time (ns) and QoS profile name."""

    topic: str
    msg: Any
    log_ns: int
    qos: str


def truth_output(s: SimSample, stamp: int) -> PivotOutput:
    """The simulator's truth in the estimator's output form (published as ``truth/pivot``)."""
    return PivotOutput(
        stamp_ns=stamp, tip=(float(s.tip[0]), float(s.tip[1])), heading=s.heading, total_length=s.length,
        free_length_measured=s.length - s.pivot_length, pivot_length=s.pivot_length, pivot_length_rate=0.0,
        covariance=(0.0, 0.0, 0.0, 0.0), pivot=(float(s.pivot[0]), float(s.pivot[1])), pivot_index=len(s.body) - 2,
        in_contact=s.in_contact, held=False, buckling_condition_met=s.buckling_met, measurement_used=False,
    )  # fmt: skip


class SimulatedRig:
    """Base station, contact cap, cap BNO055 and force sensor of a simulated robot.

    Args:
        sim: the simulator (its ``pressure`` is the regulator setpoint).
        params: validated ``collision_pivot_estimator`` parameters (topic names, frames).
        factory: message factory.
        hold_time: the cap's hold (s).
        line_faults: serial line faults between the emulator and the driver.
        seed: seed of the line faults and the I2C bus.
    """

    def __init__(self, sim: VineCollisionSim, params: dict[str, Any], factory: MessageFactory, *,
                 hold_time: float = 0.15, line_faults: LineFaults | None = None, seed: int = 0) -> None:  # fmt: skip
        self.sim, self.p, self.f = sim, params, factory
        self.frame = params["frame_prefix"] + params["base_frame"]
        self.cap_frame = params["frame_prefix"] + "vine_cap"
        self.emulator = BaseStationEmulator(faults=line_faults or LineFaults(), seed=seed + 1)
        self.driver = BaseStationDriver(port=None)  # type: ignore[arg-type]  # fed the emulator's bytes
        self.cap = ContactCap(sim.n_switches, sim.sensing_arc, hold_time)
        self.bus = SimI2CBus(seed=seed + 2)
        self.chip = SimBNO055(0x28, "cap")
        self.bus.host.attach(self.chip)
        self.heading_reader = CapHeading(self.bus, 0x28, sleep=self.bus.sleep)
        self.netft = NetFtReceiver(sock=None, address=("127.0.0.1", 0))  # type: ignore[arg-type]  # fed records
        self.ft_seq = 0
        self.k = 0

    def static_messages(self, stamp: int, world_frame: str = "world") -> list[RawMessage]:
        """Once at start: ``world_frame -> vine_base`` (none if ``world_frame`` is '') and the obstacles (truth)."""
        from shape_sensing.types import TransformStamped

        out = []
        if world_frame:
            tf = msgs.tf_message([TransformStamped(stamp, world_frame, self.frame, np.eye(4))], self.f)
            out.append(RawMessage("/tf_static", tf, stamp, "static"))
        obstacles = cmsgs.obstacle_markers(stamp, self.frame, self.sim.course.obstacles, self.f)
        # transient local, as /tf_static: a late RViz and a record:=true bag get them too
        return out + [RawMessage("truth/obstacles", obstacles, stamp, "static")]

    def step(self, s: SimSample, stamp: int) -> list[RawMessage]:
        """The raw and truth messages of one sample, in the order (and log times) a robot would produce them."""
        p, f, frame = self.p, self.f, self.frame
        out: list[RawMessage] = []
        # cap BNO055 and the force sensor, read just before the base frame
        h = s.heading_measured
        self.chip.set_motion(np.array([0.0, 0.0, math.sin(h / 2), math.cos(h / 2)]))
        q, gyro, _heading = self.heading_reader.read()
        t_imu = stamp - 400_000
        out.append(RawMessage(p["imu_topic"], msgs.imu_to_msg(ImuSample(t_imu, self.cap_frame, q, gyro), f), t_imu,
                              "sensor"))  # fmt: skip
        self.ft_seq += 1
        counts = (0, 0, round(s.force_measured * self.netft.counts_per_force), 0, 0, 0)
        t_ft = stamp - 300_000
        for wr in self.netft.handle(encode_record(RdtRecord(self.ft_seq, self.ft_seq, 0, counts)), t_ft):
            wrench = cmsgs.wrench_stamped_msg(t_ft, "force_sensor", wr.force, wr.torque, f)
            out.append(RawMessage(p["wrench_topic"], wrench, t_ft, "sensor"))
        # the base station's frame over the (faulty) serial line; the cap node derives its state from it
        line = self.emulator.step(s.t, s.length, s.pressure_measured, self.sim.pressure, True, s.cap_mask)
        for r in self.driver.feed(line, stamp):
            stats = self.driver.parser.stats
            out.append(RawMessage("base/state", cmsgs.base_station_state_msg(r, stats, frame, f), stamp - 200_000,
                                  "sensor"))  # fmt: skip
            out.append(RawMessage(p["pressure_topic"], cmsgs.fluid_pressure_msg(stamp, frame, r.pressure, 0.0, f),
                                  stamp - 100_000, "sensor"))  # fmt: skip
            cr = self.cap.update(stamp, r.cap_switches)
            out.append(RawMessage(p["cap_topic"], cmsgs.contact_cap_state_msg(cr, self.sim.n_switches,
                                                                              self.cap_frame, f), stamp - 50_000,
                                  "sensor"))  # fmt: skip
            out.append(RawMessage(p["length_topic"], length_message(stamp, frame, r.length, self.sim.speed, f), stamp,
                                  "sensor"))  # fmt: skip
        # ground truth, after the estimates of this step (log time + 2)
        T = cmsgs.planar_pose(s.tip[0], s.tip[1], s.heading)
        out.append(RawMessage("truth/tip", pose_stamped_msg(stamp, frame, T, f), stamp + 2, "default"))
        out.append(RawMessage("truth/pivot", cmsgs.pivot_estimate_msg(truth_output(s, stamp), frame, f), stamp + 2,
                              "default"))  # fmt: skip
        if self.k % max(1, round(self.sim.rate / 2)) == 0:
            body = np.column_stack([s.body, np.zeros(len(s.body))])
            out.append(RawMessage("truth/path", msgs.path_msg(stamp, frame, body, f), stamp + 2, "default"))
        self.k += 1
        return out
