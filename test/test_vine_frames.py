"""One vine base frame for both vine pipelines: a bag holding the IMU chain's and the collision estimates has one
connected TF tree, and ``vine_base`` has REP-103 axes (x along the initial growth, z up) in both."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from shape_sensing.cli import main
from shape_sensing.io.bag import BagWriter, bag_topics, read_bag
from shape_sensing.pipelines.contracts import R_VINE_BASE_IMU_BASE, VINE_BASE_FRAME, VINE_IMU_BASE_FRAME

_OUTPUTS = ("shape/", "collision/", "collision_paper/", "truth/tip", "truth/path", "truth/pivot")


def _transform(t: object) -> np.ndarray:
    tr = t.transform  # type: ignore[attr-defined]
    T = np.eye(4)
    q = tr.rotation
    T[:3, :3] = Rotation.from_quat([q.x, q.y, q.z, q.w]).as_matrix()
    T[:3, 3] = [tr.translation.x, tr.translation.y, tr.translation.z]
    return T


@pytest.fixture(scope="module")
def combined(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The IMU demo's and the collision demo's bags in one: every TF and every estimate topic of both."""
    out = tmp_path_factory.mktemp("vine-frames")
    assert main(["demo", "vine-imu", "--duration", "1", "--out", str(out / "imu"), "--json"]) == 0
    assert main(["demo", "vine-collision", "--duration", "2", "--out", str(out / "vc"), "--json"]) == 0
    path = out / "both.mcap"
    with BagWriter(path) as writer:
        for bag in (out / "imu" / "vine-imu.mcap", out / "vc" / "vine-collision.mcap"):
            for m in read_bag(bag):
                if m.topic in ("/tf", "/tf_static") or any(k in m.topic for k in _OUTPUTS):
                    writer.copy(m, qos="static" if m.topic == "/tf_static" else "default")
    return path


def test_a_bag_with_both_estimates_has_one_connected_tree(combined: Path) -> None:
    parents: dict[str, set[str]] = {}
    used: set[str] = set()
    topics = bag_topics(combined)
    assert any(t.endswith("/shape/tip") for t in topics) and any(t.endswith("/collision/tip") for t in topics)
    for m in read_bag(combined):
        if m.topic in ("/tf", "/tf_static"):
            for t in m.msg.transforms:
                parents.setdefault(t.child_frame_id, set()).add(t.header.frame_id)
        elif topics[m.topic] == "visualization_msgs/msg/MarkerArray":
            used.update(mk.header.frame_id for mk in m.msg.markers)
        else:
            used.add(m.msg.header.frame_id)
    # every frame has one parent (two estimators publishing one frame name would give it two)
    assert all(len(p) == 1 for p in parents.values()), {c: p for c, p in parents.items() if len(p) > 1}
    parent = {c: next(iter(p)) for c, p in parents.items()}
    roots = set()
    for frame in set(parent) | used:
        seen = set()
        while frame in parent:
            assert frame not in seen, f"a cycle through {frame}"
            seen.add(frame)
            frame = parent[frame]
        roots.add(frame)
    assert roots == {"world"}
    assert parent[VINE_IMU_BASE_FRAME] == VINE_BASE_FRAME and parent[VINE_BASE_FRAME] == "world"
    assert {"vine_tip", "vine_tip_paper", "vine_imu_tip", "vine_imu_00"} <= set(parent)
    assert {VINE_BASE_FRAME, VINE_IMU_BASE_FRAME} <= used  # collision estimates in vine_base, the chain's in its base


def test_vine_base_has_rep103_axes_for_both_pipelines(combined: Path) -> None:
    statics = {}
    first_tip = None
    for m in read_bag(combined):
        if m.topic == "/tf_static":
            for t in m.msg.transforms:
                statics[(t.header.frame_id, t.child_frame_id)] = _transform(t)
        elif m.topic.endswith("/truth/tip") and m.msg.header.frame_id == VINE_BASE_FRAME:  # the last one
            p = m.msg.pose.position
            first_tip = np.array([p.x, p.y, p.z])
    T = statics[(VINE_BASE_FRAME, VINE_IMU_BASE_FRAME)]
    np.testing.assert_allclose(T[:3, :3], np.asarray(R_VINE_BASE_IMU_BASE), atol=1e-9)
    # the chain grows along its z and carries its IMUs on its +x side (on top): vine_base's +x and +z
    np.testing.assert_allclose(T[:3, :3] @ [0.0, 0.0, 1.0], [1.0, 0.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(T[:3, :3] @ [1.0, 0.0, 0.0], [0.0, 0.0, 1.0], atol=1e-9)
    assert np.linalg.det(T[:3, :3]) == pytest.approx(1.0)
    # both demos place the robot growing along world x with its top up: world -> vine_base is the identity
    np.testing.assert_allclose(statics[("world", VINE_BASE_FRAME)][:3, :3], np.eye(3), atol=1e-9)
    # 2 s into the three-obstacle course (6 cm grown, no contact yet) the collision robot's tip lies ahead along
    # vine_base's x, in the plane z = 0
    assert first_tip is not None and first_tip[0] > 0.05 and abs(first_tip[1]) < 1e-9 and abs(first_tip[2]) < 1e-9
