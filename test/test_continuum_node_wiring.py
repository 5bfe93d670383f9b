"""The continuum_estimator node's wiring without ROS 2 (stand-in node and rclpy modules, real message classes).

The estimator core is tested elsewhere; this checks the plumbing around it: subscriptions and publishers
from the schema with their QoS, messages in and estimates out, bad messages counted and skipped (never an
exception out of a callback, which would stop the node), and the status timer.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ros_stand_ins import FakeNode, install

from shape_sensing.messages import common as msgs
from shape_sensing.messages.factory import default_factory
from shape_sensing.pipelines.continuum_tracker import CONTINUUM_TOPICS, SCHEMA
from shape_sensing.types import DiagnosticLevel

LENGTH = 0.466
ROOT = Path(__file__).resolve().parents[1]


def _shipped_config() -> dict[str, Any]:
    """The parameters of config/continuum_estimator.yaml (base and tip pose topics, two gyros)."""
    return SCHEMA.load_yaml(ROOT / "config" / "continuum_estimator.yaml")


@pytest.fixture
def stand_ins(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, "shape_sensing.nodes.continuum_estimator")


def _pose_msg(stamp_ns: int, z: float, quat: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 1.0)) -> Any:
    f = default_factory()
    m = f.make("geometry_msgs/msg/PoseWithCovarianceStamped")
    m.header.stamp.sec, m.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
    m.header.frame_id = "continuum_base"
    m.pose.pose.position.z = z
    o = m.pose.pose.orientation
    o.x, o.y, o.z, o.w = quat
    return m


def _gyro_msg(stamp_ns: int, w: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> Any:
    m = default_factory().make("sensor_msgs/msg/Imu")
    m.header.stamp.sec, m.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
    m.orientation.w = 1.0
    m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z = w
    return m


def test_straight_robot_in_tf_path_and_tip_out(stand_ins: None) -> None:
    from shape_sensing.nodes.continuum_estimator import ContinuumEstimatorNode

    node = FakeNode("continuum_estimator", _shipped_config())
    app = ContinuumEstimatorNode(node)
    assert set(node.subscriptions) == {"gyro_mid/data", "gyro_tip/data", "base_pose", "tip_pose"}
    # best effort, deep enough for a stall (input_queue_depth)
    assert all(qos["reliability"] == "best_effort" and qos["depth"] == 200 for _, _, qos in node.subscriptions.values())
    assert set(node.publishers) == set(CONTINUUM_TOPICS)
    assert node.publishers["shape/path"].qos["reliability"] == "reliable"
    gyro_mid, gyro_tip, base, tip = (node.subscriptions[t][1] for t in ("gyro_mid/data", "gyro_tip/data",
                                                                       "base_pose", "tip_pose"))  # fmt: skip
    # the heartbeat (steady timer) before any input: every input named, nothing fresh
    ((beat_period, beat),) = node.steady_timers
    assert beat_period == 1.0
    beat()
    (heard,) = node.publishers["/diagnostics"].sent[-1].status
    assert heard.name == "/continuum_estimator: sensors heard" and heard.level == DiagnosticLevel.ERROR.value
    assert heard.message.startswith("0/4 inputs fresh; never heard: gyro_mid/data, gyro_tip/data, base_pose, tip_pose")
    for k in range(60):  # 1.2 s at 50 Hz of a straight, still robot
        stamp = 5_000_000_000 + 20_000_000 * k
        node.now_ns = stamp + 10_000_000  # the node's clock, just after the stamps (one clock, as on a robot)
        base(_pose_msg(stamp, 0.0))
        tip(_pose_msg(stamp, LENGTH))
        gyro_mid(_gyro_msg(stamp + 7_000_000))
        gyro_tip(_gyro_msg(stamp + 9_000_000))
    app.inputs.flush()  # the inputs the stamp-ordered stage still holds for the next ones
    tfs = node.publishers["/tf"].sent
    assert len(tfs) > 20, "about one estimate per slice at 30 Hz once the window is full"
    last = tfs[-1].transforms
    assert [t.child_frame_id for t in last] == [f"continuum_node_{i:02d}" for i in range(5)]
    assert {t.header.frame_id for t in last} == {"continuum_base"}
    z = [t.transform.translation.z for t in last]
    assert z == pytest.approx(np.linspace(0.0, LENGTH, 5), abs=1e-4)
    assert all(abs(t.transform.translation.x) < 1e-4 and abs(t.transform.translation.y) < 1e-4 for t in last)
    tip_msg = node.publishers["shape/tip"].sent[-1]
    assert tip_msg.pose.pose.position.z == pytest.approx(LENGTH, abs=1e-4)
    cov = np.asarray(tip_msg.pose.covariance).reshape(6, 6)
    assert np.all(np.diag(cov) > 0) and np.allclose(cov, cov.T)
    path = node.publishers["shape/path"].sent[-1]
    assert path.header.frame_id == "continuum_base" and len(path.poses) >= 5
    # estimates are stamped on the slice grid, behind the newest data by the window's lag
    stamp = msgs.stamp_from_msg(path)
    assert 5_000_000_000 < stamp < 5_000_000_000 + 20_000_000 * 60
    assert node.publishers["shape/markers"].sent, "markers at marker_rate"
    # the status timer reports the counts
    ((period, status),) = [(p, cb) for p, cb in node.timers if cb == app._on_status]
    assert period == pytest.approx(1.0)
    status()
    diag, inputs = node.publishers["/diagnostics"].sent[-1].status  # the estimator's and its inputs' status
    values = {kv.key: kv.value for kv in diag.values}
    assert diag.message == "estimating" and values["pose"] == "120" and values["gyro"] == "120"
    assert inputs.name == "/continuum_estimator: inputs" and inputs.message.startswith("keeping up")
    assert app.tracker.stats.skipped_bad == 0
    beat()
    (heard,) = node.publishers["/diagnostics"].sent[-1].status
    assert heard.level == DiagnosticLevel.OK.value, heard.message
    assert heard.message.startswith("4/4 inputs fresh: all inputs fresh; ") and "estimates in the last second" in (
        heard.message
    )
    # a pose stamped 3 s ahead of the node's clock is skipped, counted and named
    tip(_pose_msg(node.now_ns + 3_000_000_000, LENGTH))
    assert app.tracker.stats.skipped_bad == 1
    beat()
    (heard,) = node.publishers["/diagnostics"].sent[-1].status
    assert heard.level == DiagnosticLevel.WARN.value
    assert "stamped ahead of the clock: tip_pose (+3.0 s, 1 messages skipped)" in heard.message


def test_bad_messages_are_counted_and_skipped(stand_ins: None) -> None:
    from shape_sensing.nodes.continuum_estimator import ContinuumEstimatorNode

    node = FakeNode("continuum_estimator", _shipped_config())
    app = ContinuumEstimatorNode(node)
    node.now_ns = 6_000_000_000  # the node's clock, after the stamps
    base = node.subscriptions["base_pose"][1]
    gyro = node.subscriptions["gyro_mid/data"][1]
    base(_pose_msg(5_000_000_000, 0.0, quat=(0.0, 0.0, 0.0, 0.0)))  # the all-zero quaternion of a default message
    base(_pose_msg(5_010_000_000, 0.0, quat=(0.0, 0.0, 0.0, math.nan)))
    gyro(_gyro_msg(5_020_000_000, (math.nan, 0.0, 0.0)))
    app.inputs.flush()
    assert app.tracker.stats.skipped_bad == 3
    assert app.tracker.stats.pose == 0 and app.tracker.stats.gyro == 0
    assert any("skipped a bad pose" in line for line in node.logger.lines)
    base(_pose_msg(5_030_000_000, 0.0))
    app.inputs.flush()
    assert app.tracker.stats.pose == 1
    status = app._on_status
    status()
    assert node.publishers["/diagnostics"].sent[-1].status[0].message == "no estimate in the last second"


def test_prior_map_goes_out_again_after_the_clock_starts_or_jumps_back(
    stand_ins: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RViz on a bag's /clock resets itself when that clock starts (its log: "Detected jump back in time"), dropping
    the latched prior map it already had, so the map did not show in RViz (test_rviz.py counts its points). The
    node now sends the map again 1 and 3 s (steady) after its own clock starts or jumps back, on its heartbeat."""
    import yaml

    from shape_sensing.io.maps import write_ply
    from shape_sensing.nodes import continuum_estimator as mod

    (section,) = yaml.safe_load(
        (Path(__file__).resolve().parents[1] / "config/continuum_tof.yaml").read_text()
    ).values()
    params = section["ros__parameters"]
    rng = np.random.default_rng(0)
    pts = rng.uniform(-0.2, 0.2, (300, 3))
    write_ply(tmp_path / "map.ply", pts, normals=np.tile([0.0, 0.0, 1.0], (300, 1)))
    params["map_file"] = str(tmp_path / "map.ply")
    steady = [100.0]
    monkeypatch.setattr(mod.time, "monotonic", lambda: steady[0])
    node = FakeNode("continuum_estimator", params)
    node.now_ns = 0  # use_sim_time before /clock
    mod.ContinuumEstimatorNode(node)
    maps = node.publishers["tof/prior_map"].sent
    assert len(maps) == 1 and node.publishers["tof/prior_map"].qos["durability"] == "transient_local"
    ((_, beat),) = node.steady_timers

    def run(seconds: int) -> None:
        for _ in range(seconds):
            beat()
            steady[0] += 1.0
            if node.now_ns > 0:
                node.now_ns += 400_000_000  # the bag's clock at 0.4x

    run(3)
    assert len(maps) == 1, "no clock yet: nothing to send again"
    node.now_ns = 1  # the bag's /clock starts
    run(5)
    assert len(maps) == 3, "1 and 3 s after the clock started"
    run(5)
    assert len(maps) == 3, "not again while the clock runs on"
    node.now_ns = 1_000  # the bag played again from its start: a jump back
    run(5)
    assert len(maps) == 5
