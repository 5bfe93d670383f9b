"""Launch test of ``launch/hyper_redundant.launch.xml`` (launch_testing; skipped where ROS 2 is not sourced).

The hardware launch (wt901 driver + rigid-module estimator), its five WT901s
emulated: the test opens a pseudo-terminal per sensor and runs the project's
WT901 protocol emulator on the master side (100 output cycles a second of a
level, still robot), and the launch gets a parameter file in UART mode with the
pty paths as ports, so the driver reads real serial ports through pyserial.
Checked: topics with types and rates, tf2 from ``world`` to every platform and
the end effector, ``ros2 param dump`` of both nodes against that file, the
WT901 calibration services (the emulated sensors must receive unlock, CALSW and
save), the rods ``calibrate`` service, a CAN configuration without a CAN bus
(the error names interface and channel), and a clean SIGINT shutdown.
"""

from __future__ import annotations

import contextlib
import os
import select
import tempfile
import threading
import time
import unittest
from pathlib import Path
from typing import Any

import launch_harness as h
import pytest
import yaml

N_SENSORS = 5
NS = "/hyper_redundant"

if not h.AVAILABLE:

    def test_launch_hyper_redundant() -> None:
        pytest.skip(h.REASON)

else:
    import launch_testing

    from shape_sensing.sim.wt901_emulator import Wt901Emulator, open_pty

    class EmulatedSensors:
        """WT901 emulators on the master ends of ptys, pumped by a thread (100 Hz, commands read back)."""

        def __init__(self, n: int) -> None:
            self.emulators = [Wt901Emulator() for _ in range(n)]
            for e in self.emulators:
                e.rsw = 0x000E | 0x0200  # accel, gyro, angle, quaternion
            self.ptys = [open_pty() for _ in range(n)]
            for fd, _ in self.ptys:
                os.set_blocking(fd, False)
            self.stop = threading.Event()
            self.thread = threading.Thread(target=self._pump, daemon=True)
            self.thread.start()

        @property
        def ports(self) -> list[str]:
            return [path for _, path in self.ptys]

        def _pump(self) -> None:
            fds = [fd for fd, _ in self.ptys]
            cycle = [e.cycle_bytes([0.0, 0.0, 0.0]) for e in self.emulators]
            while not self.stop.is_set():
                t0 = time.monotonic()
                readable, _, _ = select.select(fds, [], [], 0)
                for fd in readable:
                    k = fds.index(fd)
                    with contextlib.suppress(OSError):
                        self.emulators[k].write(os.read(fd, 4096))
                for fd, data in zip(fds, cycle, strict=True):
                    with contextlib.suppress(OSError):  # buffer full before the driver opened its port: drop it
                        os.write(fd, data)
                self.stop.wait(max(0.0, 0.01 - (time.monotonic() - t0)))

    SENSORS: EmulatedSensors | None = None

    TOPICS: dict[str, tuple[str, float | None]] = {
        f"{NS}/imu/platform_{i}": ("sensor_msgs/msg/Imu", 100.0 if i in (0, N_SENSORS - 1) else None)
        for i in range(N_SENSORS)
    }
    TOPICS |= {
        f"{NS}/imu/array": ("shape_sensing/msg/ImuArray", None),  # each poll's samples: what the estimator reads
        f"{NS}/joint_states": ("sensor_msgs/msg/JointState", 20.0),
        f"{NS}/shape/path": ("nav_msgs/msg/Path", 20.0),
        f"{NS}/shape/end_effector": ("geometry_msgs/msg/PoseWithCovarianceStamped", 20.0),
        f"{NS}/shape/markers": ("visualization_msgs/msg/MarkerArray", 5.0),
        "/tf": ("tf2_msgs/msg/TFMessage", 20.0),
        "/diagnostics": ("diagnostic_msgs/msg/DiagnosticArray", 3.0),  # driver, estimator, estimator's heartbeat
    }
    FRAMES = ["base_link", "end_effector"] + [f"platform_{i}" for i in range(N_SENSORS)]

    @pytest.mark.launch_test
    def generate_test_description() -> Any:
        global SENSORS
        SENSORS = EmulatedSensors(N_SENSORS)
        data = yaml.safe_load(h.share("config", "hyper_redundant.yaml").read_text())
        wt = data["/**/wt901"]["ros__parameters"]
        for key in ("can_interface", "can_channel", "can_ids", "extended_ids"):
            wt.pop(key)
        wt.update({"mode": "uart", "ports": SENSORS.ports, "baud": 115200})
        config = Path(tempfile.mkdtemp(prefix="hyper_redundant_launch_"), "hyper_redundant.yaml")
        config.write_text(yaml.safe_dump(data))
        return h.description("hyper_redundant.launch.xml", {"config": str(config)}), {"config": config}

    class TestHyperRedundant(h.RobotChecks, unittest.TestCase):
        TOPICS, FRAMES = TOPICS, FRAMES

        def test_3_parameters_equal_the_file(self, config: Path) -> None:
            # with drivers:=true the launch points both at the driver's ImuArray topic (imu_array_topic:=imu/array)
            array = {"imu_array_topic": "imu/array"}
            h.check_param_dump(f"{NS}/wt901", h.expected_parameters("wt901", config, array))
            h.check_param_dump(f"{NS}/rigid_module_estimator",
                               h.expected_parameters("rigid_module_estimator", config, array))  # fmt: skip

        def test_4_wt901_calibration_services_reach_the_sensors(self) -> None:
            assert SENSORS is not None
            saved = [e.saved for e in SENSORS.emulators]
            response = h.call_trigger(self.probe, f"{NS}/wt901/set_angle_reference")
            assert response.success, response.message
            assert self.probe.spin_until(
                lambda: all(e.saved > s for e, s in zip(SENSORS.emulators, saved, strict=True)), 5.0
            )
            assert {e.calibration for e in SENSORS.emulators} == {8}  # CALSW = 8: angle reference
            response = h.call_trigger(self.probe, f"{NS}/wt901/calibrate_accelerometer")
            assert response.success, response.message
            assert self.probe.spin_until(lambda: {e.calibration for e in SENSORS.emulators} == {1}, 5.0)
            again = h.call_trigger(self.probe, f"{NS}/wt901/calibrate_accelerometer")
            assert not again.success and "already running" in again.message
            assert self.probe.spin_until(lambda: {e.calibration for e in SENSORS.emulators} == {0}, 10.0)

        def test_5_rods_calibration_service_answers(self) -> None:
            response = h.call_trigger(self.probe, f"{NS}/rigid_module_estimator/calibrate")
            assert response.success, response.message

        def test_6_can_without_a_bus_names_interface_and_channel(self) -> None:
            section = {"mode": "can", "can_interface": "socketcan", "can_channel": "vcan_missing",
                       "can_ids": [257, 258, 259, 260, 261]}  # fmt: skip
            out = h.check_bad_parameter_file("wt901", "/bad_hr", section, "can_channel")
            assert "socketcan" in out and "vcan_missing" in out, out

    @launch_testing.post_shutdown_test()
    class TestHyperRedundantShutdown(unittest.TestCase):
        def test_sigint_exits_cleanly(self, proc_info: Any, proc_output: Any) -> None:
            if SENSORS is not None:
                SENSORS.stop.set()
            h.check_clean_shutdown(proc_info, proc_output)
