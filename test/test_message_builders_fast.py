"""The shape message builders that call message classes directly give the bytes of the plain per-field way."""

from __future__ import annotations

import numpy as np
from scipy.spatial.transform import Rotation

from shape_sensing.estimators.hinge_arc import SCHEMA, HingeArcConfig, HingeArcEstimator
from shape_sensing.geometry import matrix_to_quat
from shape_sensing.messages import common as msgs
from shape_sensing.messages.factory import default_factory
from shape_sensing.viz import tube_mesh, tube_mesh_indexed


def _shape(n: int = 18):  # type: ignore[no-untyped-def]
    params = SCHEMA.defaults() | {"imu_topics": [f"imu_{i:02d}/data" for i in range(n)]}
    est = HingeArcEstimator(HingeArcConfig.from_params(params), [f"imu_{i}" for i in range(n)])
    est.capture_offset(Rotation.random(n, random_state=1).as_quat(), np.ones(n, dtype=bool), 0)
    rng = np.random.default_rng(2)
    return est.update(Rotation.from_rotvec(np.cumsum(rng.normal(0, 0.2, (n, 3)), axis=0)).as_quat(),
                      np.ones(n, dtype=bool), 123_456_789, 1.5)  # fmt: skip


def _cdr(msg) -> bytes:  # type: ignore[no-untyped-def]
    return bytes(default_factory().typestore.serialize_cdr(msg, msg.__msgtype__))


def test_path_and_tf_equal_the_per_field_build() -> None:
    f = default_factory()
    shape = _shape()
    poses = msgs._poses_along(shape.backbone)
    # the path's quaternions in closed form are those of its frames' matrices
    quats = msgs._path_values(shape.backbone)[:, 3:]
    assert np.allclose(quats, matrix_to_quat(poses[:, :3, :3]), atol=1e-15, rtol=0)
    hdr = msgs.header(shape.stamp_ns, "vine_base", f)
    plain_path = f.make(
        "nav_msgs/msg/Path",
        header=hdr,
        poses=[
            f.make("geometry_msgs/msg/PoseStamped", header=hdr, pose=msgs.pose_msg(T, f, q))
            for T, q in zip(poses, quats, strict=True)
        ],
    )
    assert _cdr(msgs.path_msg(shape.stamp_ns, "vine_base", shape.backbone, f)) == _cdr(plain_path)
    tfs = msgs.shape_transforms(shape)
    plain_tf = f.make("tf2_msgs/msg/TFMessage", transforms=[msgs.transform_stamped(t, f) for t in tfs])
    assert _cdr(msgs.tf_message(tfs, f)) == _cdr(plain_tf)


def test_body_marker_lists_the_tube_mesh_corners() -> None:
    shape = _shape()
    body = msgs.shape_markers(shape, factory=default_factory()).markers[0]
    pts = np.array([[p.x, p.y, p.z] for p in body.points])
    ref = tube_mesh(msgs._decimate(shape.backbone, 48), shape.radius, 8)
    assert pts.shape == ref.shape and np.array_equal(pts, ref)
    vertices, corners = tube_mesh_indexed(shape.backbone[:10], 0.05, 6)
    assert len(vertices) == 10 * 6 and np.array_equal(vertices[corners], tube_mesh(shape.backbone[:10], 0.05, 6))


def test_orientation_readers_equal_the_full_readers() -> None:
    import pytest

    from shape_sensing.messages.errors import MessageError
    from shape_sensing.types import ImuSample

    f = default_factory()
    rng = np.random.default_rng(4)
    for k in range(200):
        q = rng.normal(size=4)
        q *= rng.choice([0.6, 0.97, 1.0, 1.03, 3.0]) / np.linalg.norm(q)
        msg = msgs.imu_to_msg(ImuSample(k * 7_000_001, "vine_imu_03", None if k % 9 == 0 else q), f)
        raw = _cdr(msg)
        if k % 9 and abs(np.linalg.norm(q) - 1.0) > msgs.UNIT_QUATERNION_TOLERANCE:
            # a norm this far from 1 is a corrupted reading: every reader refuses it, none normalises it
            readers = ((msgs.imu_from_msg, msg), (msgs.imu_from_cdr, raw),
                       (msgs.imu_orientation_from_msg, msg), (msgs.imu_orientation_from_cdr, raw))  # fmt: skip
            for reader, arg in readers:
                with pytest.raises(MessageError, match="expected a unit quaternion"):
                    reader(arg)
            continue
        full, full_cdr = msgs.imu_from_msg(msg), msgs.imu_from_cdr(raw)
        for stamp, o in (msgs.imu_orientation_from_msg(msg), msgs.imu_orientation_from_cdr(raw)):
            assert stamp == full.stamp_ns == full_cdr.stamp_ns
            if full.orientation is None:
                assert o is None and full_cdr.orientation is None
            else:
                assert o is not None and o.tobytes() == full.orientation.tobytes() == full_cdr.orientation.tobytes()
    bad = msgs.imu_to_msg(ImuSample(1, "vine_imu_03", np.array([0.0, 0.0, np.inf, 1.0])), f)
    with pytest.raises(MessageError, match="expected a unit quaternion"):
        msgs.imu_orientation_from_msg(bad)
    with pytest.raises(MessageError, match="expected a unit quaternion"):
        msgs.imu_orientation_from_cdr(_cdr(bad))
    with pytest.raises(MessageError, match="truncated"):
        msgs.imu_orientation_from_cdr(_cdr(bad)[:60])


def test_path_quaternions_in_closed_form_equal_the_frames_matrices_on_hard_polylines() -> None:
    # tangents along +z, -z (the half turn), near -z, along x, a repeated point (zero tangent), random
    pts = np.array([[0, 0, 0], [0, 0, 1], [0, 0, 0], [0, 0, -1], [1e-6, 0, -2], [1, 0, -2], [1, 0, -2], [2, 3, 4.0]])
    pts = np.concatenate([pts, np.cumsum(np.random.default_rng(2).normal(size=(50, 3)), axis=0)])
    values = msgs._path_values(pts)
    frames = msgs._poses_along(pts)
    assert np.array_equal(values[:, :3], pts)
    assert np.allclose(values[:, 3:], matrix_to_quat(frames[:, :3, :3]), atol=1e-15, rtol=0)
    # a block of polylines gets each one's bits
    block = np.stack([pts, pts[::-1], pts * 2])
    assert msgs._path_values(block)[1].tobytes() == msgs._path_values(pts[::-1]).tobytes()


def test_one_polylines_tube_frames_are_the_batched_ones_bit_for_bit() -> None:
    """One polyline's frames go through a Python-float loop, a stack of them through numpy: the same operations,
    so the same bits (a live node's markers equal the bulk replay's), also where the transported normal vanishes
    (a repeated point, a polyline collapsed to a point) or the tube doubles back on itself."""
    from shape_sensing.viz import _frames_along

    rng = np.random.default_rng(9)
    cases = [np.cumsum(rng.normal(size=(int(rng.integers(2, 120)), 3)) * 0.01, axis=0) for _ in range(12)]
    cases[3][5] = cases[3][4]
    cases.append(np.zeros((7, 3)))
    cases.append(np.array([[0, 0, 0], [0, 0, 1.0], [0, 0, 0], [1e-3, 0, 1.0]]))
    for pts in cases:
        one = _frames_along(pts)
        many = _frames_along(np.stack([pts, pts[::-1]]))
        for a, b in zip(one, many, strict=True):
            assert np.array_equal(a, b[0], equal_nan=True)
        assert np.all(np.isfinite(one[0])) or not np.any(pts)
