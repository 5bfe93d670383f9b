"""Launch test of ``launch/bno055_chain.launch.xml`` (launch_testing; skipped where ROS 2 is not sourced).

The driver alone, simulated (``simulate:=true``: register-level BNO055 and
TCA9548A simulators on the project's simulated I2C bus), with a copy of the
package's parameter file that sets ``calibration_file``: per-sensor topics and
rates, ``ros2 param dump`` against that file, the save and restore calibration
services (the saved file must hold a profile for every sensor and load back),
a bad parameter file, and a clean SIGINT shutdown.
"""

from __future__ import annotations

import tempfile
import unittest
from pathlib import Path
from typing import Any

import launch_harness as h
import pytest
import yaml

N_IMUS = 18

if not h.AVAILABLE:

    def test_launch_bno055_chain() -> None:
        pytest.skip(h.REASON)

else:
    import launch_testing

    TOPICS: dict[str, tuple[str, float | None]] = {
        f"/vine/imu_{i:02d}/data": ("sensor_msgs/msg/Imu", 100.0 if i in (0, 9) else None) for i in range(N_IMUS)
    }
    TOPICS |= {f"/vine/imu_{i:02d}/mag": ("sensor_msgs/msg/MagneticField", None) for i in range(N_IMUS)}
    TOPICS |= {f"/vine/imu_{i:02d}/temperature": ("sensor_msgs/msg/Temperature", None) for i in range(N_IMUS)}
    CALIBRATION = "shape_sensing/msg/Bno055Calibration"
    TOPICS |= {f"/vine/imu_{i:02d}/calibration_status": (CALIBRATION, None) for i in range(N_IMUS)}
    TOPICS["/vine/imu_05/mag"] = ("sensor_msgs/msg/MagneticField", 5.0)
    TOPICS["/vine/imu_05/temperature"] = ("sensor_msgs/msg/Temperature", 1.0)
    TOPICS["/diagnostics"] = ("diagnostic_msgs/msg/DiagnosticArray", 1.0)

    @pytest.mark.launch_test
    def generate_test_description() -> Any:
        tmp = Path(tempfile.mkdtemp(prefix="bno055_launch_"))
        data = yaml.safe_load(h.share("config", "bno055_chain.yaml").read_text())
        data["/**/bno055_chain"]["ros__parameters"]["calibration_file"] = str(tmp / "calibration.yaml")
        config = tmp / "bno055_chain.yaml"
        config.write_text(yaml.safe_dump(data))
        ld = h.description("bno055_chain.launch.xml", {"simulate": "true", "config": str(config)})
        return ld, {"config": config, "calibration": tmp / "calibration.yaml"}

    class TestBno055Chain(unittest.TestCase):
        @classmethod
        def setUpClass(cls) -> None:
            cls.probe = h.Probe()

        @classmethod
        def tearDownClass(cls) -> None:
            cls.probe.close()

        def test_1_topics_types_and_rates(self) -> None:
            h.check_topics(self.probe, TOPICS)

        def test_2_parameters_equal_the_file(self, config: Path) -> None:
            h.check_param_dump("/vine/bno055_chain", h.expected_parameters("bno055_chain", config, {"simulate": True}))

        def test_3_calibration_save_and_restore(self, calibration: Path) -> None:
            from shape_sensing.drivers.bno055_chain import CalibrationStore

            saved = h.call_trigger(self.probe, "/vine/bno055_chain/save_calibration")
            assert saved.success, saved.message
            assert saved.message.startswith(f"saved {N_IMUS} profile(s) to {calibration}")
            store = CalibrationStore.load(calibration)
            assert sorted(store.profiles) == [f"imu_{i:02d}" for i in range(N_IMUS)]
            restored = h.call_trigger(self.probe, "/vine/bno055_chain/restore_calibration")
            assert restored.success and restored.message == f"re-applying {N_IMUS} profile(s)", restored.message

        def test_4_bad_parameter_file_stops_the_node_naming_it(self) -> None:
            h.check_bad_parameter_file("bno055_chain", "/bad_vine", {"simulate": True, "mode": "NDFO"}, "mode")

    @launch_testing.post_shutdown_test()
    class TestBno055ChainShutdown(unittest.TestCase):
        def test_sigint_exits_cleanly(self, proc_info: Any, proc_output: Any) -> None:
            h.check_clean_shutdown(proc_info, proc_output)
