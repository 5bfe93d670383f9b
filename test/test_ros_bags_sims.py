"""Bag round trips of the other simulation launches on a real ROS 2 (skipped where ROS 2 is not sourced).

As ``test_ros_bags.py`` does for ``vine_imu_sim.launch.xml``: the simulation launch records a few seconds with
``record:=true``; ``ros2 bag info`` reads the bag; ``ros2 bag play --clock`` of only its inputs into the robot's
launch file (estimator only, ``use_sim_time:=true``) gives the estimates ``shape-sensing replay`` computes from
the same bag, at the same stamps, within a tolerance; tf2 connects ``world`` to the estimate's frames meanwhile.

* ``hyper_redundant_sim.launch.xml``: inputs ``/hyper_redundant/imu/platform_<i>`` (the
  :mod:`shape_sensing.pipelines.hyper_redundant` input contract) into ``hyper_redundant.launch.xml drivers:=false``
  (``config/hyper_redundant.yaml``: no rods calibration at start, so replay runs with ``--hr-rods-seconds 0``).
  The end-effector estimate depends on stamps only (the newest reading of each platform up to the tick), so the
  live estimate equals replay unless a played sample is lost or arrives after the tick it belongs to (best-effort
  sensor-data QoS, one executor, 2 shared cores); the estimate at that tick then uses that platform's previous
  sample, 10 ms older. A 10 ms older reading of a rig that bends at most a few degrees per second moves the end
  effector by well under a millimetre, so :data:`HR_MAX_TOLERANCE_M` is 2 mm, and the median must be 0.1 mm.
  Measured on 2 shared cores, play at half speed (5 runs): every live stamp is a replay stamp, 74-92 % of the
  estimates bit-equal, the others within 0.0001 mm.
* ``vine_collision_sim.launch.xml``: inputs ``/vine/base/state``, ``base/length``, ``base/pressure``,
  ``cap/state``, ``cap/imu``, ``obstacle/wrench`` (:mod:`shape_sensing.pipelines.vine_collision`'s inputs) into
  ``vine_collision.launch.xml drivers:=false`` (its ``config/vine_collision.yaml``, also given to replay). The
  estimator steps on every length message with the latest pressure, cap state, heading and force; played on six
  topics through separate best-effort subscriptions and one executor, an input stamped before a length message
  can be delivered after it, and that step then uses the input's previous value (a heading or contact one frame
  older), which moves the tip by up to a few millimetres at that step. Measured (5 runs): every live stamp is a
  replay stamp, 78-96 % of the tips bit-equal, median 0, max 0.7-2.3 mm; tolerances median 0.1 mm, max 5 mm.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import launch_harness as h
import numpy as np
import pytest
from test_ros_bags import Launch, _bag_info, _play_inputs

pytestmark = pytest.mark.skipif(not h.AVAILABLE, reason=h.REASON)

RECORD_S = 4.0  # seconds of simulation recorded
MIN_MATCHED = 0.8  # fraction of the live estimates that must have a replay estimate at the same stamp
HR_NS = "/hyper_redundant"
HR_INPUTS = [f"{HR_NS}/imu/platform_{i}" for i in range(5)]  # 4 modules: 5 platforms
HR_MEDIAN_TOLERANCE_M = 1e-4
HR_MAX_TOLERANCE_M = 2e-3


def _record(tmp_path_factory: pytest.TempPathFactory, launch_file: str) -> Path:
    cwd = tmp_path_factory.mktemp("record")
    launch = Launch(launch_file, "record:=true", cwd=cwd)
    try:
        end = time.monotonic() + 60.0
        while not list(cwd.glob("rosbag2_*/*.mcap")) and time.monotonic() < end:
            time.sleep(0.2)
        time.sleep(RECORD_S)
    finally:
        rc = launch.stop()
    text = launch.text()
    assert rc == 0, f"launch exited {rc}:\n{text}"
    assert "Traceback" not in text, text
    (bag,) = cwd.glob("rosbag2_*")
    return bag


@pytest.fixture(scope="module")
def hr_recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield _record(tmp_path_factory, "hyper_redundant_sim.launch.xml")


def _position(msg: Any) -> np.ndarray:
    p = msg.pose.pose.position
    return np.array([p.x, p.y, p.z])


def test_hyper_redundant_sim_bag_plays_into_the_estimator_like_replay(hr_recorded: Path, tmp_path: Path) -> None:
    from geometry_msgs.msg import PoseWithCovarianceStamped
    from rclpy.qos import QoSProfile
    from rclpy.time import Time

    from shape_sensing.io.bag import read_bag

    counts = _bag_info(hr_recorded)
    assert all(counts.get(t, 0) > 100 for t in HR_INPUTS), counts
    assert counts.get(f"{HR_NS}/shape/end_effector", 0) > 30 and counts.get("/tf", 0) > 30, counts

    live: dict[int, np.ndarray] = {}
    launch = Launch("hyper_redundant.launch.xml", "drivers:=false", "use_sim_time:=true", cwd=tmp_path)
    probe = h.Probe("bag_test_probe")
    try:

        def on_tip(msg: Any) -> None:
            live[msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec] = _position(msg)

        topic = f"{HR_NS}/shape/end_effector"
        probe.node.create_subscription(PoseWithCovarianceStamped, topic, on_tip, QoSProfile(depth=1000))
        buffer = probe.tf_buffer()
        _play_inputs(probe, hr_recorded, HR_INPUTS, HR_INPUTS[0], require=HR_INPUTS)
        frames = ["base_link", "end_effector"] + [f"platform_{i}" for i in range(5)]
        assert probe.spin_until(lambda: all(buffer.can_transform("world", f, Time()) for f in frames), 10.0), (
            buffer.all_frames_as_string()
        )
    finally:
        probe.close()
        rc = launch.stop()
    assert rc == 0 and "Traceback" not in launch.text(), launch.text()

    out = tmp_path / "replay.mcap"
    config = str(h.share("config", "hyper_redundant.yaml"))
    cmd = [str(h.executable("shape-sensing")), "replay", str(hr_recorded), "--out", str(out), "--pipeline",
           "hyper-redundant", "--config", config, "--hr-rods-seconds", "0"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    replayed = {m.stamp_ns: _position(m.msg) for m in read_bag(out, [f"{HR_NS}/shape/end_effector"])}
    assert len(live) > 30 and len(live) >= 0.9 * len(replayed), f"{len(live)} live, {len(replayed)} replayed estimates"
    common = sorted(set(live) & set(replayed))
    assert len(common) >= MIN_MATCHED * len(live), f"{len(common)} of {len(live)} live stamps in the replay"
    diff = np.array([np.linalg.norm(live[s] - replayed[s]) for s in common])
    print(
        f"hyper-redundant bag play vs replay: {len(common)}/{len(live)} live estimates at replay stamps; end effector "
        f"difference median {np.median(diff) * 1e3:.4f} mm, max {diff.max() * 1e3:.4f} mm, "
        f"{np.mean(diff == 0) * 100:.0f} % equal"
    )
    assert np.median(diff) <= HR_MEDIAN_TOLERANCE_M and diff.max() <= HR_MAX_TOLERANCE_M


VC_NS = "/vine"
VC_INPUTS = [f"{VC_NS}/{t}" for t in ("base/state", "base/length", "base/pressure", "cap/state", "cap/imu",
                                      "obstacle/wrench")]  # fmt: skip
VC_MEDIAN_TOLERANCE_M = 1e-4
# Played live, an input that reaches the node after the step it belongs to joins the next one (the collision
# filter steps at 50 Hz, and a contact moves the pivot, and so the tip, by up to centimetres in a step). A live tip
# may then differ from replay's by the tip's move over the neighbouring steps, and no more.
VC_STEP_SLACK_M = 1e-4


@pytest.fixture(scope="module")
def vc_recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield _record(tmp_path_factory, "vine_collision_sim.launch.xml")


def test_vine_collision_sim_bag_plays_into_the_estimator_like_replay(vc_recorded: Path, tmp_path: Path) -> None:
    from geometry_msgs.msg import PoseStamped
    from rclpy.qos import QoSProfile
    from rclpy.time import Time

    from shape_sensing.io.bag import read_bag

    counts = _bag_info(vc_recorded)
    assert all(counts.get(t, 0) > 20 for t in VC_INPUTS), counts
    assert counts.get(f"{VC_NS}/collision/tip", 0) > 20 and counts.get("/tf", 0) > 20, counts

    config = str(h.share("config", "vine_collision.yaml"))
    live: dict[int, np.ndarray] = {}
    launch = Launch("vine_collision.launch.xml", "drivers:=false", "use_sim_time:=true", cwd=tmp_path)
    probe = h.Probe("bag_test_probe")
    try:

        def on_tip(msg: Any) -> None:
            p = msg.pose.position
            live[msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec] = np.array([p.x, p.y, p.z])

        probe.node.create_subscription(PoseStamped, f"{VC_NS}/collision/tip", on_tip, QoSProfile(depth=1000))
        buffer = probe.tf_buffer()
        # base/state is recorded for the bag's completeness; the estimator reads the other five
        _play_inputs(probe, vc_recorded, VC_INPUTS, f"{VC_NS}/base/length", require=VC_INPUTS[1:])
        assert probe.spin_until(lambda: buffer.can_transform("world", "vine_tip", Time()), 10.0), (
            buffer.all_frames_as_string()
        )
    finally:
        probe.close()
        rc = launch.stop()
    assert rc == 0 and "Traceback" not in launch.text(), launch.text()

    out = tmp_path / "replay.mcap"
    cmd = [str(h.executable("shape-sensing")), "replay", str(vc_recorded), "--out", str(out), "--pipeline",
           "vine-collision", "--config", config]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    replayed = {
        m.stamp_ns: np.array([m.msg.pose.position.x, m.msg.pose.position.y, m.msg.pose.position.z])
        for m in read_bag(out, [f"{VC_NS}/collision/tip"])
    }
    assert len(live) > 20 and len(live) >= 0.9 * len(replayed), f"{len(live)} live, {len(replayed)} replayed estimates"
    common = sorted(set(live) & set(replayed))
    assert len(common) >= MIN_MATCHED * len(live), f"{len(common)} of {len(live)} live stamps in the replay"
    diff = np.array([np.linalg.norm(live[s] - replayed[s]) for s in common])
    print(
        f"vine-collision bag play vs replay: {len(common)}/{len(live)} live estimates at replay stamps; tip "
        f"difference median {np.median(diff) * 1e3:.4f} mm, max {diff.max() * 1e3:.4f} mm, "
        f"{np.mean(diff == 0) * 100:.0f} % equal"
    )
    # each live tip against the replayed tip's move to and from the neighbouring steps at its stamp
    stamps = np.array(sorted(replayed))
    path = np.array([replayed[int(t)] for t in stamps])
    move = np.zeros(len(stamps))
    step = np.linalg.norm(np.diff(path, axis=0), axis=1)
    move[1:] = step
    move[:-1] = np.maximum(move[:-1], step)
    bound = move[np.searchsorted(stamps, common)] + VC_STEP_SLACK_M
    print(f"  beyond a step's move: {int(np.sum(diff > bound))}; largest step move {step.max() * 1e3:.1f} mm")
    assert np.median(diff) <= VC_MEDIAN_TOLERANCE_M and np.all(diff <= bound)
