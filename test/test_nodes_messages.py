"""What the vine-IMU nodes publish, checked without ROS 2.

The nodes publish exactly what :class:`ShapeMessages`, :func:`truth_messages`
and :func:`length_message` build; here those are round-tripped through CDR
with the real ROS 2 definitions (rosbags) and compared with the estimate or
ground truth they came from. The ROS-free helpers of ``nodes/_common.py``
(parameter types, value normalisation) are checked against every registered
schema.
"""

from __future__ import annotations

import array
import sys
from typing import Any

import numpy as np
import pytest
from ros_stand_ins import FakeNode, Logger, install

from shape_sensing.config import Param
from shape_sensing.estimators.hinge_arc import SCHEMA
from shape_sensing.io.bag import BagWriter, read_bag
from shape_sensing.messages import common as msgs
from shape_sensing.messages.factory import default_factory
from shape_sensing.nodes._common import PARAMETER_TYPES, describe, from_ros_value, unknown_overrides
from shape_sensing.pipelines.vine_imu import (
    SHAPE_TOPICS,
    TRUTH_TOPICS,
    ShapeMessages,
    ShapeWriter,
    VineImuTracker,
    length_message,
    truth_messages,
)
from shape_sensing.schemas import NODE_SCHEMAS, schema_for
from shape_sensing.sim.vine import VineSimConfig, VineSimulator
from shape_sensing.types import ImuSample, ShapeEstimate


@pytest.fixture(scope="module")
def estimates() -> list[ShapeEstimate]:
    """Two seconds of the simulated active-steering run through the tracker (30 Hz estimates)."""
    sim = VineSimulator(VineSimConfig(scenario="active", duration=4.0, rate=100.0))
    tracker = VineImuTracker(SCHEMA.defaults() | {"length_topic": ""})
    out: list[ShapeEstimate] = []
    for k in range(201):
        for i, sample in enumerate(sim.imu_samples(k / 100.0)):
            out += tracker.push_imu(i, sample)
    assert len(out) > 40
    return out


def _round_trip(msg: Any, typename: str) -> Any:
    ts = default_factory().typestore
    return ts.deserialize_cdr(ts.serialize_cdr(msg, typename), typename)


def _xyz(p: Any) -> np.ndarray:
    return np.array([p.x, p.y, p.z])


def test_estimate_messages_round_trip_and_match_the_estimate(estimates: list[ShapeEstimate]) -> None:
    est = estimates[-1]
    built = dict(ShapeMessages(default_factory()).build(est))
    assert set(built) == set(SHAPE_TOPICS)  # the first estimate also carries markers
    back = {topic: _round_trip(msg, SHAPE_TOPICS[topic]) for topic, msg in built.items()}
    tf = back["/tf"].transforms
    assert [t.child_frame_id for t in tf] == est.frame_ids
    assert {t.header.frame_id for t in tf} == {est.parent_frame}
    for t, pose in zip(tf, est.poses, strict=True):
        assert _xyz(t.transform.translation) == pytest.approx(pose[:3, 3], abs=1e-12)
        assert t.header.stamp.sec * 10**9 + t.header.stamp.nanosec == est.stamp_ns
    path = np.array([_xyz(p.pose.position) for p in back["shape/path"].poses])
    assert path == pytest.approx(est.backbone, abs=1e-12)
    tip = back["shape/tip"].pose
    assert _xyz(tip.pose.position) == pytest.approx(est.tip_pose[:3, 3], abs=1e-12)
    cov = np.array(tip.covariance).reshape(6, 6)
    assert est.position_covariance is not None
    assert cov[:3, :3] == pytest.approx(est.position_covariance[-1], abs=1.01e-12)  # floored to 1e-12 m^2
    # orientation covariance is not estimated: a huge variance on its diagonal, the cross blocks zero
    assert np.array_equal(cov[3:, 3:], np.diag([1e6] * 3))
    assert not cov[:3, 3:].any() and not cov[3:, :3].any()
    assert np.linalg.eigvalsh(cov).min() > 0.0
    names = [s.name for s in back["/diagnostics"].status]
    assert names == [d.name for d in est.diagnostics]
    assert len(back["shape/markers"].markers) >= 3


def test_markers_throttled_to_marker_rate(estimates: list[ShapeEstimate]) -> None:
    shapes = ShapeMessages(default_factory(), marker_rate=5.0)
    marker_stamps = []
    for est in estimates:
        topics = [t for t, _ in shapes.build(est)]
        assert topics[:3] == ["/tf", "shape/path", "shape/tip"]  # /diagnostics about 1 Hz (test_node_outputs.py)
        if "shape/markers" in topics:
            marker_stamps.append(est.stamp_ns)
    gaps = np.diff(marker_stamps)
    period = round(1e9 / 30.0)  # estimate ticks
    assert gaps.min() >= 200_000_000 and gaps.max() < 200_000_000 + period
    assert marker_stamps[0] == estimates[0].stamp_ns


def test_shape_writer_writes_the_same_messages_under_the_namespace(
    estimates: list[ShapeEstimate], tmp_path: Any
) -> None:
    bag = tmp_path / "w.mcap"
    with BagWriter(bag, overwrite=True) as writer:
        sw = ShapeWriter(writer, "/left/vine", 5.0)
        for est in estimates[:10]:
            sw.write(est)
    got = [(m.topic, m.stamp_ns) for m in read_bag(bag)]
    shapes = ShapeMessages(default_factory(), 5.0)
    want = []
    for est in estimates[:10]:
        for topic, _ in shapes.build(est):
            want.append((topic if topic.startswith("/") else f"/left/vine/{topic}", est.stamp_ns))
    assert sorted(got) == sorted(want)


def test_truth_and_length_messages_round_trip() -> None:
    sim = VineSimulator(VineSimConfig(scenario="growth", duration=10.0))
    truth = sim.truth(3.0)
    f = default_factory()
    full = dict(truth_messages(truth, 3_000_000_000, sim.base_frame, f, full=True))
    assert set(full) == set(TRUTH_TOPICS)
    assert [t for t, _ in truth_messages(truth, 3_000_000_000, sim.base_frame, f, full=False)] == ["truth/tip"]
    back = {t: _round_trip(m, TRUTH_TOPICS[t]) for t, m in full.items()}
    assert _xyz(back["truth/tip"].pose.position) == pytest.approx(truth.tip_pose[:3, 3], abs=1e-12)
    assert len(back["truth/sensors"].poses) == int(truth.everted.sum()) < sim.config.n_sensors  # growing
    path = np.array([_xyz(p.pose.position) for p in back["truth/path"].poses])
    assert path == pytest.approx(truth.backbone[::5], abs=1e-12)
    assert back["truth/path"].header.frame_id == "vine_imu_base"
    js = _round_trip(length_message(5, "vine_base", truth.length, 0.25, f), "sensor_msgs/msg/JointState")
    assert (list(js.name), float(js.position[0]), float(js.velocity[0])) == (["vine_length"], truth.length, 0.25)
    assert js.header.stamp.nanosec == 5 and len(js.effort) == 0


# -- nodes/_common.py, ROS-free parts --------------------------------------------------------------------------------


def test_every_registered_schema_uses_declarable_parameter_types() -> None:
    for node in NODE_SCHEMAS:
        for p in schema_for(node).params:
            assert p.type in PARAMETER_TYPES, f"{node}: parameter {p.name} has type {p.type!r}"


def test_from_ros_value_gives_plain_python() -> None:
    assert from_ros_value(array.array("d", [1.0, 2.5])) == [1.0, 2.5]
    assert from_ros_value(np.array([1, 2], dtype=np.int64)) == [1, 2]
    assert type(from_ros_value(np.array([1, 2], dtype=np.int64))[0]) is int
    assert from_ros_value(("a", "b")) == ["a", "b"]
    assert from_ros_value(0.5) == 0.5 and from_ros_value("x") == "x"
    # what rclpy hands over from a parameter file validates like a YAML list
    assert SCHEMA.validate({"first_mount_rpy": from_ros_value(array.array("d", [0.0, 0.1, 0.0]))})[
        "first_mount_rpy"
    ] == [0.0, 0.1, 0.0]


def test_unknown_overrides_ignores_rclpy_own_parameters() -> None:
    overrides = {"spacing": 0.1, "use_sim_time": True, "qos_overrides./tf.publisher.depth": 10, "spaceing": 0.1}
    assert unknown_overrides(SCHEMA, overrides) == ["spaceing"]


def test_describe_shows_unit() -> None:
    assert describe(SCHEMA["spacing"]) == "IMU spacing L along the outer wall [m]"
    assert describe(Param("x", int, 1, "no unit")) == "no unit"


class _CallSiteThrottledLogger(Logger):
    """Throttles like rclpy's logger: per call site (file and line of the caller), here within one frozen instant."""

    def __init__(self) -> None:
        super().__init__()
        self.sites: set[tuple[str, int]] = set()

    def warning(self, text: str, throttle_duration_sec: float | None = None, **_: Any) -> None:
        caller = sys._getframe(1)
        site = (caller.f_code.co_filename, caller.f_lineno)
        if throttle_duration_sec and site in self.sites:
            return
        self.sites.add(site)
        self.lines.append(text)


def test_bad_length_messages_do_not_throttle_away_imu_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, "shape_sensing.nodes.hinge_arc_estimator", {"std_srvs": {}, "std_srvs.srv": {"Trigger": 0}})
    from shape_sensing.nodes.hinge_arc_estimator import HingeArcEstimatorNode

    node = FakeNode("hinge_arc_estimator", {"length_topic": "base/length"})
    node.logger = _CallSiteThrottledLogger()
    app = HingeArcEstimatorNode(node)
    f = default_factory()
    no_position = f.make("sensor_msgs/msg/JointState")
    bad_imu = msgs.imu_to_msg(ImuSample(1, "imu", np.array([0.0, 0.0, 0.0, 1.0])), f)
    bad_imu.orientation.w = 0.0  # not a unit quaternion
    imu_topic = app.params["imu_topics"][0]
    node.subscriptions["base/length"][1](no_position)
    node.subscriptions["base/length"][1](no_position)  # within 5 s of the first: throttled
    node.subscriptions[imu_topic][1](bad_imu)
    warnings = node.logger.lines[1:]  # after the start-up line
    assert len(warnings) == 2, warnings
    assert "with no position" in warnings[0] and f"bad sample on {imu_topic}" in warnings[1]
    assert app.tracker.stats.bad_samples == 3


@pytest.mark.parametrize("node_name", sorted(NODE_SCHEMAS))
def test_help_prints_every_parameter_and_exits_0_without_ros(
    node_name: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``NODE -h`` prints usage with every schema parameter and returns 0 before rclpy is touched."""
    from shape_sensing.nodes._common import run

    monkeypatch.setitem(sys.modules, "rclpy", None)  # importing rclpy now raises: the node must not start

    def build(node: Any) -> None:
        raise AssertionError("the node must not be built under --help")

    for flag in ("-h", "--help"):
        assert run(node_name, build, [node_name, flag]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"usage: ros2 run shape_sensing {node_name}")
        for p in schema_for(node_name).params:
            assert f"\n  {p.name} (" in out
    # a -h meant for ROS (after --ros-args) is not ours: rclpy is tried (and is blocked here)
    # without ROS 2 that is one line saying so and exit 1, not an ImportError traceback
    assert run(node_name, build, [node_name, "--ros-args", "-h"]) == 1
    assert "ROS 2 is needed" in capsys.readouterr().err


@pytest.mark.parametrize("ending", ["context shut down", "sigint before shutdown", "real error"])
def test_an_error_from_a_take_cut_by_ctrl_c_ends_quietly(monkeypatch: pytest.MonkeyPatch, ending: str) -> None:
    """SIGINT can shut the context down in the middle of a take; rclpy then raises a RuntimeError from spin.

    Seen on ROS 2 Jazzy in the hyper-redundant launch test ("Unable to convert call argument to Python
    object" from ``take_message`` after Ctrl-C). With the context shut down that ends the node quietly
    (exit 0). rclpy's shutdown on SIGINT is deferred to its own thread, so the error can also come while the
    context is still up: the KeyboardInterrupt that Python's handler raised inside the message's
    ``__init__`` became the RuntimeError (seen in CI, collision-pivot estimator). A SIGINT seen by the
    handler :func:`run` chains in ends quietly too; with neither, the same error is a real one and propagates.
    """
    import os
    import signal
    import time
    import types

    from shape_sensing.nodes._common import run

    class Node(FakeNode):
        def get_logger(self) -> Logger:
            return self.logger

        def destroy_node(self) -> None:
            pass

    def spin(node: Any, executor: Any = None) -> None:
        if ending == "sigint before shutdown":
            try:  # what rclpy's take does when the KeyboardInterrupt lands in the message's __init__
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(5.0)  # the handler raises KeyboardInterrupt here
            except KeyboardInterrupt:
                raise RuntimeError("Unable to convert call argument to Python object") from None
            raise AssertionError("SIGINT did not reach the handler")
        raise RuntimeError("Unable to convert call argument to Python object")

    fake = types.ModuleType("rclpy")
    fake.__dict__.update(init=lambda args=None: None, create_node=lambda name: Node(name), spin=spin,
                         ok=lambda: ending != "context shut down", try_shutdown=lambda: None)  # fmt: skip
    executors = types.ModuleType("rclpy.executors")
    executors.ExternalShutdownException = type("ExternalShutdownException", (Exception,), {})  # type: ignore[attr-defined]
    executors.SingleThreadedExecutor = type(  # type: ignore[attr-defined]
        "SingleThreadedExecutor", (), {"__init__": lambda self, context=None: None, "shutdown": lambda self: True}
    )
    monkeypatch.setenv("SHAPE_SENSING_EXECUTOR", "rclpy")  # rclpy's executor (here the fake's)
    monkeypatch.setitem(sys.modules, "rclpy", fake)
    monkeypatch.setitem(sys.modules, "rclpy.executors", executors)
    logging_mod = types.ModuleType("rclpy.logging")
    logging_mod.LoggingSeverity = types.SimpleNamespace(DEBUG=10)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "rclpy.logging", logging_mod)
    fake.executors, fake.logging = executors, logging_mod  # type: ignore[attr-defined]
    before = signal.getsignal(signal.SIGINT)
    if ending == "real error":
        with pytest.raises(RuntimeError, match="Unable to convert call argument"):
            run("hinge_arc_estimator", lambda node: None, ["hinge_arc_estimator"])
    else:
        assert run("hinge_arc_estimator", lambda node: None, ["hinge_arc_estimator"]) == 0
    assert signal.getsignal(signal.SIGINT) is before  # the handler run() chained in is gone again


def test_a_storm_of_bad_messages_logs_one_warning_per_kind_and_period(monkeypatch: pytest.MonkeyPatch) -> None:
    """warn_throttled checks its throttle before touching the logger (rclpy's own throttle inspects the caller's
    frames first, about a millisecond per suppressed call); one warning per key and period, keys apart, per node."""
    import shape_sensing.nodes._common as common

    now = [100.0]
    monkeypatch.setattr(common.time, "monotonic", lambda: now[0])

    class Node:
        def __init__(self) -> None:
            self.logger = Logger()

        def get_logger(self) -> Logger:
            return self.logger

    a, b = Node(), Node()
    logged = [common.warn_throttled(a, "bad sample", f"bad sample {i}") for i in range(1000)]
    assert logged.count(True) == 1 and a.logger.lines == ["bad sample 0"]
    assert common.warn_throttled(a, "bad length", "bad length")  # another kind is not hidden by the first
    assert common.warn_throttled(b, "bad sample", "on b")  # nor another node's
    now[0] += common.WARN_PERIOD_S - 0.01
    assert not common.warn_throttled(a, "bad sample", "still within the period")
    now[0] += 0.02
    assert common.warn_throttled(a, "bad sample", "after the period")
    assert a.logger.lines == ["bad sample 0", "bad length", "after the period"]
