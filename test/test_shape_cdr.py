"""The CDR bytes written straight from an estimate's arrays (messages/cdr.py) equal rosbags' serialize_cdr of the
messages built the normal way, for every output type, on the demo's estimates and on edge cases."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from shape_sensing.demos.vine_imu import run_demo
from shape_sensing.estimators.hinge_arc import SCHEMA, HingeArcConfig, HingeArcEstimator
from shape_sensing.io.bag import bag_metadata
from shape_sensing.messages import cdr
from shape_sensing.messages import common as msgs
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import MessageFactory, default_factory
from shape_sensing.pipelines.vine_imu import ShapeMessages
from shape_sensing.types import DiagnosticLevel, DiagnosticStatus, ShapeEstimate


def _cdr(msg) -> bytes:  # type: ignore[no-untyped-def]
    return bytes(default_factory().typestore.serialize_cdr(msg, msg.__msgtype__))


def _same(shape: ShapeEstimate, marker_rate: float = 1000.0) -> int:
    """Compare every message of one estimate; returns how many were compared."""
    built = ShapeMessages(default_factory(), marker_rate).build(shape)
    direct = cdr.ShapeCdr(marker_rate).build(shape)
    assert [(t, m.__msgtype__) for t, m in built] == [(t, ty) for t, ty, _ in direct]
    for (topic, msg), (_, _, raw) in zip(built, direct, strict=True):
        assert raw == _cdr(msg), topic
    return len(built)


def _estimate(n: int, frames: list[str] | None = None, seed: int = 2, length: float | None = 1.5) -> ShapeEstimate:
    params = SCHEMA.defaults() | {"imu_topics": [f"imu_{i:02d}/data" for i in range(n)]}
    frames = frames or [f"imu_{i}" for i in range(n)]
    est = HingeArcEstimator(HingeArcConfig.from_params(params), frames)
    est.capture_offset(Rotation.random(n, random_state=seed).as_quat(), np.ones(n, dtype=bool), 0)
    rng = np.random.default_rng(seed)
    q = Rotation.from_rotvec(np.cumsum(rng.normal(0, 0.2, (n, 3)), axis=0)).as_quat()
    return est.update(q, np.ones(n, dtype=bool), 123_456_789_012, length)


def test_every_estimate_of_a_demo_bag_serialises_to_the_same_bytes(tmp_path: Path) -> None:
    """The estimates a replay of the growth demo makes (sensors not yet everted, a growing length)."""
    from shape_sensing.io.bag_bulk import read_topics
    from shape_sensing.pipelines.vine_imu import VineImuTracker, apply_recorded_reference
    from shape_sensing.pipelines.vine_imu_bulk import decode_inputs, estimates, tick_states

    run_demo(tmp_path, scenario="growth", duration=1.5, seed=3, progress=False, picture=False)
    bag = tmp_path / "vine-imu.mcap"
    imu = [f"/vine/imu_{i:02d}/data" for i in range(18)]
    tracker = VineImuTracker({"imu_topics": [t[len("/vine/") :] for t in imu]})
    apply_recorded_reference(tracker, argparse.Namespace(bag_metadata=bag_metadata(bag)))
    arrays = read_topics(bag, [*imu, "/vine/base/length"])
    states = tick_states(decode_inputs(arrays, imu, "/vine/base/length", None), tracker.ticker.period_ns)
    shapes = [est for _, est in estimates(tracker, states)]
    assert len(shapes) > 30
    built = ShapeMessages(default_factory(), 5.0)
    sizes = {(len(s.poses), len(s.backbone)) for s in shapes}
    assert len(sizes) > 1  # growing: blocks of several sizes
    views = cdr.ShapeCdr(5.0, views=True).build_many(shapes)  # the bulk replay's: views of each block's bytes
    for shape, b, v in zip(shapes, cdr.ShapeCdr(5.0).build_many(shapes), views, strict=True):
        a = built.build(shape)
        assert [(t, m.__msgtype__) for t, m in a] == [(t, ty) for t, ty, _ in b]
        assert [_cdr(m) for _, m in a] == [raw for _, _, raw in b] == [bytes(raw) for _, _, raw in v]
        assert all(isinstance(raw, bytes) for _, _, raw in b)


def test_block_numbers_equal_one_estimate_at_a_time() -> None:
    """Random shapes of one size, and bends at the edges (straight, fully reversed tangents)."""
    shapes = [_estimate(18, seed=k) for k in range(40)] + [_estimate(5, seed=k) for k in range(3)] + [_estimate(4)]
    shapes[3].backbone = np.array(
        [[0.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 0.5]] + [[0, 0, 0.5]] * (len(shapes[3].backbone) - 3)
    )
    frames = ["a", "bb", "ccc", "dddd", "eeeee", "ffffff", "ggggggg", "ünï"]
    for parent in ("", "x", "xyz", "vine_base"):  # blocks of frame ids and parents of every length mod 8
        odd = [_estimate(8, frames, seed=k) for k in range(3)]
        for k, shape in enumerate(odd):
            shape.parent_frame = parent
            shape.stamp_ns = [0, 2**31 * 10**9 - 1, 999_999_999][k]
        odd[1].position_covariance = None
        shapes += odd
    single = cdr.ShapeCdr(1000.0)
    many = list(cdr.ShapeCdr(1000.0).build_many(shapes))
    assert [single.build(s) for s in shapes] == many


@pytest.mark.parametrize("n", [2, 3, 7, 18])
def test_estimates_of_every_size(n: int) -> None:
    assert _same(_estimate(n)) == 5
    assert _same(_estimate(n, length=None, seed=n)) == 5


def test_frame_ids_of_every_length_and_string_padding() -> None:
    # frame ids of lengths 1..8 (NUL included: every remainder mod 4 and 8), a non-ASCII one, an empty parent
    frames = ["a", "bb", "ccc", "dddd", "eeeee", "ffffff", "ggggggg", "ünï"]
    shape = _estimate(8, frames)
    assert _same(shape) == 5
    for parent in ("", "x", "xy", "xyz", "base_link_12345"):
        shape.parent_frame = parent
        assert _same(shape) == 5
    shape.diagnostics = [
        DiagnosticStatus(name="", level=DiagnosticLevel.ERROR, message="m" * k, hardware_id="h" * (k % 3),
                         values={"k" * j: "v" * (k + j) for j in range(k % 4)})
        for k in range(6)
    ]  # fmt: skip
    assert _same(shape) == 5
    shape.diagnostics = []
    assert _same(shape) == 4  # no status to report: no /diagnostics message


def test_empty_and_short_paths_no_covariance_and_markers_throttled() -> None:
    shape = _estimate(3)
    for points in (np.zeros((0, 3)), np.zeros((1, 3)), np.array([[0.0, 0.0, 0.0], [0.0, 0.0, -1.0]])):
        for stamp, frame in ((0, ""), (5, "f"), (2**31 * 10**9 - 1, "frame_ab")):
            assert cdr.path_cdr(stamp, frame, points) == _cdr(msgs.path_msg(stamp, frame, points))
    shape.position_covariance = None  # no tip covariance: zero covariance, no ellipsoid marker
    assert _same(shape) == 5
    # markers at 5 Hz by stamps, as ShapeMessages throttles them
    from shape_sensing.pipelines.common import DiagnosticsThrottle

    def throttle() -> DiagnosticsThrottle:  # as the replay's ShapeWriter names the statuses
        return DiagnosticsThrottle(node="/vine/hinge_arc_estimator", hardware_id="/vine")

    built, direct = ShapeMessages(default_factory(), 5.0, throttle()), cdr.ShapeCdr(5.0, throttle())
    for k in range(40):
        shape.stamp_ns = 10**9 + k * 33_333_333
        a, b = built.build(shape), direct.build(shape)
        assert [t for t, _ in a] == [t for t, _, _ in b]
        assert [_cdr(m) for _, m in a] == [raw for _, _, raw in b]
        if k % 10 == 0:
            shape.diagnostics = [
                *shape.diagnostics,
                DiagnosticStatus(name="x", level=DiagnosticLevel.WARN, message=str(k)),
            ]


def test_bad_stamps_and_covariances_are_errors_as_in_the_builders() -> None:
    shape = _estimate(3)
    with pytest.raises(MessageError, match="negative"):
        cdr.path_cdr(-1, "f", shape.backbone)
    with pytest.raises(MessageError, match="int32 seconds"):
        cdr.path_cdr(2**31 * 10**9, "f", shape.backbone)
    with pytest.raises(MessageError, match="6x6"):
        cdr.tip_cdr(0, "f", np.eye(4), np.zeros((3, 3)))


def test_supported_only_for_the_definitions_it_writes() -> None:
    assert cdr.supported(default_factory().typestore)
    assert cdr.supported(MessageFactory("rosbags", "humble").typestore)  # the same definitions in rosbags

    other = type("Other", (), {"fielddefs": {t: ((), [("x", (1, ("float64", 0)))]) for t in cdr.LAYOUT_TYPES}})
    assert not cdr.supported(other())
    assert not cdr.supported(type("Empty", (), {"fielddefs": {}})())


def test_scatter_writes_what_fancy_indexing_writes() -> None:
    """Items placed at offsets in runs of one stride (and odd ones out) land where column indexing puts them."""
    rng = np.random.default_rng(3)
    for at in ([4, 16, 28, 40, 50, 70], [0], [3, 9], [0, 8, 16, 24], [5, 20, 35, 47, 59, 80, 90]):
        offsets = np.array(at)
        items = rng.integers(0, 256, size=(7, len(at), 6), dtype=np.uint8)
        got = np.zeros((7, 100), dtype=np.uint8)
        cdr._scatter(got, offsets, items)
        want = np.zeros((7, 100), dtype=np.uint8)
        want[:, (offsets[:, None] + np.arange(6)).reshape(-1)] = items.reshape(7, -1)
        assert np.array_equal(got, want), at


def _rigid_estimates(n_modules: int, covariance: bool = True, k: int = 12) -> list:  # type: ignore[type-arg]
    from shape_sensing.estimators.rigid_module import SCHEMA as RIGID_SCHEMA
    from shape_sensing.estimators.rigid_module import RigidModuleConfig, RigidModuleEstimator

    params = RIGID_SCHEMA.validate({"n_modules": n_modules, "covariance": covariance})
    est = RigidModuleEstimator(RigidModuleConfig.from_params(params))
    rng = np.random.default_rng(n_modules)
    out = []
    for j in range(k):
        stamp = 1_700_000_000_000_000_000 + j * 50_000_000
        for i in range(n_modules + 1):
            if j and i == 2:
                continue  # one platform falls silent: a stale status, its reading held
            est.push_euler(i, rng.normal(0.0, 0.3, 3), stamp)
        out.append(est.estimate(stamp + 3_000_000))
    return out


@pytest.mark.parametrize("n_modules", [4, 20])
def test_rigid_module_estimates_serialise_to_the_messages_bytes(n_modules: int) -> None:
    """The rigid-module node's CDR (EstimateCdr) equals serialize_cdr of EstimateMessages' messages: every topic,
    a frame prefix, stale platforms' statuses, markers and diagnostics at their throttled rates, with and without
    the covariance."""
    from shape_sensing.pipelines.common import DiagnosticsThrottle
    from shape_sensing.pipelines.hyper_redundant import EstimateCdr, EstimateMessages

    compared = set()
    for covariance in (True, False):
        throttles = [DiagnosticsThrottle(node="/hr/rigid", hardware_id="/hr") for _ in range(2)]
        made = EstimateMessages(default_factory(), "arm_", 5.0, throttles[0])
        direct = EstimateCdr("arm_", 5.0, throttles[1])
        for est in _rigid_estimates(n_modules, covariance):
            a, b = made.build(est), direct.build(est)
            assert [t for t, _ in a] == [t for t, _ in b]
            for (topic, msg), (_, raw) in zip(a, b, strict=True):
                assert raw == _cdr(msg), topic
                compared.add(topic)
    assert compared == {"/tf", "joint_states", "shape/path", "shape/end_effector", "/diagnostics", "shape/markers"}


def test_joint_states_of_every_length() -> None:
    """Names whose lengths pad every way, and no joints at all."""
    from shape_sensing.messages import hyper_redundant as hmsgs

    f = default_factory()
    for names in ([], ["a"], ["ab", "abc", "abcd", "abcde"], [f"m_{i}" * (i % 4 + 1) for i in range(9)]):
        pos = np.linspace(-1.0, 1.0, len(names))
        want = _cdr(hmsgs.joint_state_msg(987_654_321, names, pos, f, frame_id="base"))
        assert cdr.joint_state_cdr(987_654_321, "base", names, pos) == want
        again = _cdr(hmsgs.joint_state_msg(5, names, -pos, f, frame_id="base"))
        assert cdr.joint_state_cdr(5, "base", names, -pos) == again  # the names' bytes kept from the first
    with pytest.raises(MessageError, match="2 names but 1 positions"):
        cdr.joint_state_cdr(0, "b", ["a", "b"], np.zeros(1))
