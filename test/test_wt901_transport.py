"""WT901 over real pyserial (loop://, pty) and real python-can (virtual bus), with faults.

Also the node's accelerometer calibration service, on stand-in rclpy and emulated sensors.
"""

from __future__ import annotations

import math
import os
import select
import sys
import types
from typing import Any

import can
import numpy as np
import pytest
import serial
from ros_stand_ins import FakeNode, install

from shape_sensing.drivers.errors import BusError, DriverConfigError
from shape_sensing.drivers.wt901 import CalibrationMode, quat_to_euler
from shape_sensing.drivers.wt901_can import Wt901Can, can_data_to_frame, frame_to_can_data, frame_to_can_message
from shape_sensing.drivers.wt901_serial import Wt901Serial, Wt901SerialGroup, open_port
from shape_sensing.sim.wt901_emulator import Wt901CanEmulator, Wt901Emulator, open_pty
from shape_sensing.types import DiagnosticLevel

LSB = math.radians(180 / 32768)


def _clock() -> Any:
    t = iter(range(1_000_000_000, 10**12, 10_000_000))
    return lambda: next(t)


def test_loop_url_configure_then_stream() -> None:
    port = open_port("loop://", 921600)
    drv = Wt901Serial(port, "platform_0", clock=_clock())
    emu = Wt901Emulator()
    for cmd in drv.configure(output=["accel", "gyro", "angle"], rate_hz=100):
        emu.write(cmd)
    assert (emu.rsw, emu.rate_hz, emu.saved) == (0x0E, 100.0, 1)
    euler = [[0.1, -0.2, 0.3], [0.2, 0.1, -1.0]]
    for e in euler:
        port.write(emu.cycle_bytes(e))
    samples = drv.poll()
    # The echoed configuration commands (loop://) are skipped as garbage.
    assert drv.parser.stats.skipped_bytes == 20
    assert [s.frame_id for s in samples] == ["platform_0", "platform_0"]
    np.testing.assert_allclose([quat_to_euler(s.orientation) for s in samples], euler, atol=LSB)
    assert drv.diagnostics(samples[-1].stamp_ns).level == DiagnosticLevel.OK


@pytest.mark.skipif(sys.platform != "linux", reason="pty test needs Linux")
def test_pty_stream_split_across_reads() -> None:
    master, path = open_pty()
    try:
        port = serial.Serial(path, 115200, timeout=0)
        drv = Wt901Serial(port, "platform_1")
        data = Wt901Emulator().cycle_bytes([0.5, 0.25, -0.75]) * 3
        os.write(master, data[:17])
        got = []
        for _ in range(2000):  # bounded wait for the tty to deliver (each round waits until readable, <= 5 ms)
            select.select([port.fileno()], [], [], 0.005)
            got += drv.poll()
            if drv.parser.stats.frames >= 1:
                break
        os.write(master, data[17:])
        for _ in range(2000):
            select.select([port.fileno()], [], [], 0.005)
            got += drv.poll()
            if len(got) == 3:
                break
        assert len(got) == 3
        np.testing.assert_allclose(quat_to_euler(got[-1].orientation), [0.5, 0.25, -0.75], atol=LSB)
        port.close()
    finally:
        os.close(master)


class _BrokenPort:
    @property
    def in_waiting(self) -> int:
        raise serial.SerialException("device reports readiness to read but returned no data")

    def read(self, size: int = 1) -> bytes:
        return b""

    def write(self, data: bytes) -> int:
        return len(data)


def test_group_keeps_streaming_when_one_port_fails() -> None:
    good = open_port("loop://", 9600)
    group = Wt901SerialGroup(
        [Wt901Serial(_BrokenPort(), "platform_0"), Wt901Serial(good, "platform_1")], backoff_s=60.0
    )
    good.write(Wt901Emulator().cycle_bytes([0.0, 0.1, 0.0]))
    samples = group.poll()
    assert [s.frame_id for s in samples] == ["platform_1"]
    assert group.failed == [True, False] and group.errors == [1, 0]
    diags = group.diagnostics(samples[0].stamp_ns)
    assert diags[0].level == DiagnosticLevel.ERROR and "port failed" in diags[0].message
    assert diags[1].level == DiagnosticLevel.OK
    good.write(Wt901Emulator().cycle_bytes([0.0, 0.2, 0.0]))
    assert len(group.poll()) == 1  # the failed port waits for its backoff; the other goes on


def test_group_reopens_failed_port() -> None:
    fresh = open_port("loop://", 9600)
    group = Wt901SerialGroup([Wt901Serial(_BrokenPort(), "platform_0")], reopen=lambda i: fresh, backoff_s=0.0)
    assert group.poll() == [] and group.failed == [True]
    fresh.write(Wt901Emulator().cycle_bytes([0.0, 0.0, 0.1]))
    assert len(group.poll()) == 1 and group.failed == [False]


def test_open_port_errors_are_named() -> None:
    with pytest.raises(BusError, match="baud 12345"):
        open_port("loop://", 12345)
    with pytest.raises(BusError, match="cannot open serial port '/dev/does-not-exist"):
        open_port("/dev/does-not-exist-wt901", 9600)


# -- CAN ---------------------------------------------------------------------------------------------------------------


def test_can_layout_round_trip() -> None:
    frame = Wt901Emulator().frames([0.1, 0.2, 0.3])[2]  # the angle frame
    data = frame_to_can_data(frame)
    assert data == frame[:8] and data[0] == 0x55 and data[1] == 0x53
    back = can_data_to_frame(data)
    expected = tuple(int.from_bytes(frame[k : k + 2], "little", signed=True) for k in (2, 4, 6))
    assert back is not None and back.raw[:3] == expected
    assert can_data_to_frame(b"\x55\x59" + bytes(6)) is None  # quaternions do not fit the CAN layout
    assert can_data_to_frame(b"\x54\x53" + bytes(6)) is None
    with pytest.raises(DriverConfigError, match="11-byte frame"):
        frame_to_can_data(b"\x55\x53")


@pytest.mark.parametrize("extended", [False, True])
def test_can_virtual_bus_several_modules(extended: bool) -> None:
    channel = f"wt901-modules-{extended}"
    ids = [0x101, 0x102, 0x103] if not extended else [0x18FF0101, 0x18FF0102, 0x18FF0103]
    tx = can.Bus(interface="virtual", channel=channel)
    rx = can.Bus(interface="virtual", channel=channel)
    try:
        reader = Wt901Can(rx, {cid: f"platform_{k}" for k, cid in enumerate(ids)}, extended=extended, clock=_clock())
        emu = Wt901CanEmulator(tx, ids, extended=extended)
        eulers = np.array([[0.1, 0.0, 0.5], [0.0, -0.3, 0.2], [0.4, 0.2, -0.1]])
        emu.send_cycle(eulers)
        # Noise on the bus: an error frame, a foreign ID, and a message in the wrong layout.
        tx.send(can.Message(is_error_frame=True, arbitration_id=0, is_extended_id=extended))
        tx.send(can.Message(arbitration_id=0x7F, is_extended_id=extended, data=bytes(8)))
        tx.send(can.Message(arbitration_id=ids[0], is_extended_id=extended, data=b"\x00\x53\x00\x00"))
        emu.send_cycle(eulers + 0.01, skip=[1])  # module 1 silent this cycle
        samples = reader.poll()
        assert [s.frame_id for s in samples] == ["platform_0", "platform_1", "platform_2", "platform_0", "platform_2"]
        np.testing.assert_allclose(quat_to_euler(samples[1].orientation), eulers[1], atol=LSB)
        assert (reader.stats.error_frames, reader.stats.unknown_id, reader.stats.bad_layout) == (1, 1, 1)
        diags = reader.diagnostics(samples[-1].stamp_ns, stale_after_ns=100_000_000)
        assert diags[0].level == DiagnosticLevel.WARN  # error frames seen, bus still up
        assert [d.level for d in diags[1:]] == [DiagnosticLevel.OK, DiagnosticLevel.WARN, DiagnosticLevel.OK]
    finally:
        tx.shutdown()
        rx.shutdown()


def test_can_standard_reader_ignores_extended_ids() -> None:
    tx = can.Bus(interface="virtual", channel="wt901-mixed")
    rx = can.Bus(interface="virtual", channel="wt901-mixed")
    try:
        reader = Wt901Can(rx, {0x101: "platform_0"})
        frame = Wt901Emulator().frames([0.0, 0.0, 0.0])[2]
        tx.send(frame_to_can_message(frame, 0x101, extended=True))
        assert reader.poll() == [] and reader.stats.unknown_id == 1
    finally:
        tx.shutdown()
        rx.shutdown()


class _BusOff(can.BusABC):
    """A bus whose controller went bus-off: every receive raises."""

    def __init__(self) -> None:
        super().__init__(channel="bus-off")

    def _recv_internal(self, timeout: float | None) -> tuple[can.Message | None, bool]:
        raise can.CanOperationError("bus-off")

    def send(self, msg: can.Message, timeout: float | None = None) -> None:
        raise can.CanOperationError("bus-off")


def test_can_bus_off_is_reported_and_recovered() -> None:
    tx = can.Bus(interface="virtual", channel="wt901-recover")
    rx = can.Bus(interface="virtual", channel="wt901-recover")
    dead = _BusOff()
    try:
        reader = Wt901Can(dead, {0x101: "platform_0", 0x102: "platform_1"}, reopen=lambda: rx, backoff_s=0.0)
        assert reader.poll() == []
        assert not reader.bus_ok and reader.stats.bus_errors == 1
        diag = reader.diagnostics(0)[0]
        assert diag.level == DiagnosticLevel.ERROR and "bus-off" in diag.message
        Wt901CanEmulator(tx, [0x101, 0x102]).send_cycle([[0.0, 0.0, 0.0], [0.1, 0.0, 0.0]])
        samples = reader.poll()
        assert reader.bus_ok and [s.frame_id for s in samples] == ["platform_0", "platform_1"]
    finally:
        tx.shutdown()
        rx.shutdown()


def test_can_bad_ids_are_named() -> None:
    with pytest.raises(DriverConfigError, match=r"CAN ID 0x800 does not fit a standard \(11-bit\)"):
        Wt901Can(None, {0x800: "platform_0"})
    with pytest.raises(DriverConfigError, match="at least one CAN ID"):
        Wt901Can(None, {})


# -- the node's accelerometer calibration service (stand-in rclpy, emulated sensors) ----------------------------------


class _Timer:
    def __init__(self, period: float, callback: Any) -> None:
        self.period, self.callback = period, callback
        self.cancelled = self.destroyed = False

    def cancel(self) -> None:
        self.cancelled = True


class _TimerNode(FakeNode):
    """A stand-in node whose timers can be cancelled and destroyed, as rclpy's."""

    def __init__(self, name: str, overrides: dict[str, Any]) -> None:
        super().__init__(name, overrides)
        self.live: list[_Timer] = []

    def create_timer(self, period: float, callback: Any) -> _Timer:
        timer = _Timer(period, callback)
        self.live.append(timer)
        return timer

    def destroy_timer(self, timer: _Timer) -> None:
        timer.destroyed = True
        self.live.remove(timer)


class _EmulatedPort:
    """Commands written go to a WT901 emulator; nothing to read."""

    def __init__(self) -> None:
        self.emulator = Wt901Emulator()
        self.writes = 0
        self.in_waiting = 0

    def write(self, data: bytes) -> int:
        self.writes += 1
        self.emulator.write(data)
        return len(data)

    def read(self, size: int = 1) -> bytes:
        return b""


def test_accelerometer_calibration_refuses_a_second_call_and_finishes_once(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, "shape_sensing.nodes.wt901", {"std_srvs": {}, "std_srvs.srv": {"Trigger": object}})
    from shape_sensing.nodes.wt901 import ACC_CALIBRATION_S, Wt901Node

    node = _TimerNode("wt901", {"mode": "uart", "frame_ids": ["a", "b"], "ports": ["loop://", "loop://"]})
    app = Wt901Node(node)
    ports = [_EmulatedPort(), _EmulatedPort()]
    for sensor, port in zip(app.reader.sensors, ports, strict=True):
        sensor.port = port
    calibrate = node.services["~/calibrate_accelerometer"]
    others = list(node.live)  # poll and diagnostics timers

    def call() -> Any:
        return calibrate(None, types.SimpleNamespace(success=None, message=None))

    first = call()
    assert first.success is True
    assert [p.emulator.calibration for p in ports] == [CalibrationMode.ACCELEROMETER] * 2
    pending = [t for t in node.live if t not in others]
    assert len(pending) == 1 and pending[0].period == ACC_CALIBRATION_S
    writes = [p.writes for p in ports]

    second = call()  # within the 5 s
    assert second.success is False and "already running" in second.message
    assert [p.writes for p in ports] == writes  # nothing sent to the sensors
    assert [t for t in node.live if t not in others] == pending  # no second timer

    timer = pending[0]
    timer.callback()
    assert [p.emulator.calibration for p in ports] == [CalibrationMode.NORMAL] * 2
    assert [p.emulator.saved for p in ports] == [1, 1]
    assert timer.cancelled and timer.destroyed and node.live == others
    timer.callback()  # a tick already queued when it was cancelled: the finish step does not run again
    assert [p.emulator.saved for p in ports] == [1, 1]
    assert "finished and saved" in node.logger.lines[-1]

    third = call()  # after the finish a new calibration is accepted, on a new timer
    assert third.success is True
    assert [t for t in node.live if t not in others] not in ([], pending)


def test_node_publishes_each_poll_as_one_imu_array_equal_to_its_per_sensor_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With ``imu_array_topic`` the WT901 node also sends the samples of each poll in one ImuArray, rows by frame
    id: read back by the message layer, each row equals the sample of the per-sensor ``imu/<frame>`` message (real
    pyserial loop:// ports carrying the emulator's bytes)."""
    install(monkeypatch, "shape_sensing.nodes.wt901", {"std_srvs": {}, "std_srvs.srv": {"Trigger": object}})
    from shape_sensing.messages.common import imu_from_msg
    from shape_sensing.messages.imu_array import imu_samples_from_sweep, imu_sweep_from_msg
    from shape_sensing.nodes.wt901 import Wt901Node

    frames = [f"platform_{i}" for i in range(3)]
    node = _TimerNode("wt901", {"mode": "uart", "frame_ids": frames, "ports": ["loop://"] * 3,
                                "imu_array_topic": "imu/array"})  # fmt: skip
    app = Wt901Node(node)
    emus = [Wt901Emulator() for _ in frames]
    rng = np.random.default_rng(3)
    for _ in range(20):
        for sensor, emu in zip(app.reader.sensors, emus, strict=True):
            sensor.port.write(emu.cycle_bytes(rng.uniform(-0.5, 0.5, 3)))
        node.now_ns += 10_000_000
        app._on_poll()
    arrays = node.publishers["imu/array"].sent
    assert len(arrays) == 20
    per_sensor = {
        (f, imu_from_msg(m).stamp_ns): imu_from_msg(m) for f in frames for m in node.publishers[f"imu/{f}"].sent
    }
    rows = [s for msg in arrays for s in imu_samples_from_sweep(imu_sweep_from_msg(msg))]
    assert len(rows) == len(per_sensor) == 60 and {s.frame_id for s in rows} == set(frames)
    for s in rows:
        ref = per_sensor[(s.frame_id, s.stamp_ns)]
        np.testing.assert_allclose(s.orientation, ref.orientation, atol=1e-12)
        np.testing.assert_allclose(s.angular_velocity, ref.angular_velocity, atol=1e-12)
