"""The bno055_chain node's wiring without ROS 2: a stand-in node object and stand-in rclpy modules.

What it publishes is built by the tested message layer (ChainMessages); this checks the node plumbing around it:
parameters declared from the schema, one publisher per sensor topic, the timers, and the two services.
"""

from __future__ import annotations

import types
from typing import Any

import pytest
from ros_stand_ins import FakeNode, install

from shape_sensing.drivers.bno055_chain import SCHEMA, CalibrationStore


class Trigger:
    Request = types.SimpleNamespace

    class Response:
        success = False
        message = ""


@pytest.fixture
def ros_stand_ins(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, "shape_sensing.nodes.bno055_chain", {"std_srvs": {}, "std_srvs.srv": {"Trigger": Trigger}})


def _node(overrides: dict[str, Any]) -> FakeNode:
    return FakeNode("bno055_chain", overrides)


def test_node_wiring_topics_timers_and_services(ros_stand_ins: None, tmp_path) -> None:
    from shape_sensing.nodes.bno055_chain import Bno055ChainNode

    cal = tmp_path / "cal.yaml"
    node = _node({"simulate": True, "calibration_file": str(cal), "rate": 50.0})
    app = Bno055ChainNode(node)
    assert sorted(p for p in node.publishers if p.startswith("imu_00/")) == [
        "imu_00/calibration_status", "imu_00/data", "imu_00/mag", "imu_00/temperature"]  # fmt: skip
    assert node.publishers["imu_00/data"].qos == "sensor_data"
    assert node.publishers["imu_00/calibration_status"].qos["durability"] == "transient_local"
    assert set(node.services) == {"~/save_calibration", "~/restore_calibration"}
    (period, tick), (diag_period, diag) = node.timers
    assert period == pytest.approx(1 / 50.0) and diag_period == SCHEMA["diagnostics_period"].default
    for _ in range(60):
        tick()
        node.now_ns += 20_000_000
    diag()
    imu = node.publishers["imu_00/data"].sent
    assert len(imu) > 40 and imu[-1].header.frame_id == "vine_imu_00"
    assert node.publishers["/diagnostics"].sent[-1].status[-1].message == "18/18 sensors streaming"
    # Services: save the captured profiles, then restore them.
    response = node.services["~/save_calibration"](None, Trigger.Response())
    assert response.success, response.message
    assert len(CalibrationStore.load(cal).profiles) == 18
    response = node.services["~/restore_calibration"](None, Trigger.Response())
    assert response.success and "18 profile" in response.message
    app.close()


def test_node_refuses_a_bad_topology(ros_stand_ins: None) -> None:
    from shape_sensing.config import ConfigError
    from shape_sensing.nodes.bno055_chain import Bno055ChainNode

    bad = {"simulate": True, "sensor_channels": [0] * 18}  # 9 pairs of sensors on one path and address
    with pytest.raises(ConfigError, match="have the same path"):
        Bno055ChainNode(_node(bad))


def test_imu_array_carries_the_per_sensor_messages_and_feeds_the_estimator(
    ros_stand_ins: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``imu_array_topic`` the driver also sends each sweep as one ImuArray: row i is sensor i of the
    configuration, with the orientation, rates, stamps and covariances of its ``imu_NN/data`` message of the same
    sweep (read back by the message layer's parser, a round trip). The hinge-arc estimator fed the arrays gives the
    estimates it gives fed the per-sensor topics, and a driver listing its sensors in another order is refused row
    by row (frame mismatch), never estimated from."""
    import numpy as np

    from shape_sensing.messages.common import imu_from_msg
    from shape_sensing.messages.imu_array import imu_samples_from_sweep, imu_sweep_from_msg
    from shape_sensing.nodes.bno055_chain import Bno055ChainNode

    node = _node({"simulate": True, "rate": 50.0, "imu_array_topic": "imus"})
    app = Bno055ChainNode(node)
    (_, tick), _ = node.timers
    for _ in range(80):
        tick()
        node.now_ns += 20_000_000
    arrays = node.publishers["imus"].sent
    assert len(arrays) == 80 and node.publishers["imus"].qos == "sensor_data"
    names = [f"imu_{i:02d}" for i in range(18)]
    per_sensor = {n: {imu_from_msg(m).stamp_ns: imu_from_msg(m) for m in node.publishers[f"{n}/data"].sent}
                  for n in names}  # fmt: skip
    rows = 0
    for msg in arrays[-30:]:
        for i, sample in enumerate(imu_samples_from_sweep(imu_sweep_from_msg(msg))):
            assert sample.frame_id == f"vine_imu_{i:02d}"
            if sample.orientation is None:  # not read in this sweep: no per-sensor message either
                assert sample.stamp_ns not in per_sensor[names[i]] or per_sensor[names[i]][sample.stamp_ns] is None
                continue
            ref = per_sensor[names[i]][sample.stamp_ns]
            np.testing.assert_allclose(sample.orientation, ref.orientation, atol=1e-12)
            np.testing.assert_allclose(sample.angular_velocity, ref.angular_velocity, atol=1e-12)
            np.testing.assert_allclose(sample.orientation_covariance, ref.orientation_covariance)
            rows += 1
    assert rows >= 0.9 * 30 * 18, rows
    app.close()

    # the estimator: arrays and per-sensor messages give the same estimates (same tracker, same stamps)
    from shape_sensing.pipelines.vine_imu import VineImuTracker

    def track(use_arrays: bool, order: list[int] | None = None) -> tuple[list[Any], Any]:
        tracker = VineImuTracker({"publish_rate": 10.0})
        out: list[Any] = []
        if use_arrays:
            for msg in arrays:
                sweep = imu_sweep_from_msg(msg)
                quats, usable = sweep.unit_orientations()
                ids = sweep.frame_ids if order is None else [sweep.frame_ids[j] for j in order]
                if order is not None:
                    quats, usable = quats[order], usable[order]
                out += tracker.push_orientations(sweep.stamps_ns, quats, usable, ids)
        else:
            events = sorted((s.stamp_ns, i, s) for i, n in enumerate(names) for s in per_sensor[n].values())
            for stamp, i, s in events:
                out += tracker.push_orientation(i, stamp, s.orientation, s.frame_id)
        return out, tracker

    from_arrays, _ = track(True)
    from_topics, _ = track(False)
    assert len(from_arrays) >= 10 and len(from_arrays) == len(from_topics)
    for a, b in zip(from_arrays, from_topics, strict=True):
        assert a.stamp_ns == b.stamp_ns
        np.testing.assert_allclose(a.tip_pose, b.tip_pose, atol=1e-9)
    swapped = list(range(18))
    swapped[3], swapped[4] = 4, 3
    _, tracker = track(True, swapped)
    assert tracker.stats.frame_mismatch >= 2 * 70 and "sensor 3: frame 'vine_imu_04'" in tracker.stats.last_rejection
