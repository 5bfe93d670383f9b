"""One frame convention across every bag the CLI writes: every output frame connects to ``world`` through the
bag's own ``/tf_static`` and ``/tf``, and the continuum frames are the node's (``continuum_base`` ->
``continuum_node_NN``), as the launch files and the README name them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shape_sensing.cli import main
from shape_sensing.io.bag import bag_topics, read_bag

_REL = Path("shared") / "datasets" / "space_time_continuum"
# The shared dataset, from this checkout or a worktree of it (any parent's shared/datasets).
DATASET = next((p / _REL for p in Path(__file__).resolve().parents if (p / _REL).is_dir()), Path("/nonexistent"))

_OUTPUT_TYPES = {
    "nav_msgs/msg/Path",
    "geometry_msgs/msg/PoseWithCovarianceStamped",
    "geometry_msgs/msg/PoseStamped",
    "geometry_msgs/msg/PoseArray",
    "visualization_msgs/msg/MarkerArray",
    "sensor_msgs/msg/PointCloud2",
}
_INPUT_TOPICS = re.compile(r"(base_pose|tip_pose|/pose)$")  # continuum pose-sensor inputs (also in the base frame)


def _frames(bag: Path) -> tuple[dict[str, str], set[str]]:
    """Parent of every TF child (static and dynamic), and the frame ids of the output messages."""
    parent: dict[str, str] = {}
    used: set[str] = set()
    topics = bag_topics(bag)
    for m in read_bag(bag):
        if m.topic in ("/tf", "/tf_static"):
            for t in m.msg.transforms:
                parent[t.child_frame_id] = t.header.frame_id
        elif topics[m.topic] in _OUTPUT_TYPES or _INPUT_TOPICS.search(m.topic):
            if topics[m.topic] == "visualization_msgs/msg/MarkerArray":
                used.update(mk.header.frame_id for mk in m.msg.markers)
            else:
                used.add(m.msg.header.frame_id)
    return parent, used


def _root_of(frame: str, parent: dict[str, str]) -> str:
    seen = set()
    while frame in parent and frame not in seen:
        seen.add(frame)
        frame = parent[frame]
    return frame


@pytest.fixture(scope="module")
def bags(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("frames")
    found = {}
    demos = (("vine-imu", "1"), ("hyper-redundant", "2"), ("growing", "1"), ("tof-rings", "1"), ("vine-collision", "2"),
             ("tof-continuum", "1.5"))  # fmt: skip
    for demo, duration in demos:
        assert main(["demo", demo, "--duration", duration, "--out", str(out / demo), "--json"]) == 0
        found[demo] = out / demo / f"{demo}.mcap"
    if DATASET.is_dir():
        assert main([
            "eval-continuum", str(DATASET), "slow_free_space", "--duration", "1", "--out", str(out / "ec"), "--json",
        ]) == 0  # fmt: skip
        found["eval-continuum"] = out / "ec" / "slow_free_space_batch_bag"
    for name in [n for n in found if n not in ("growing", "tof-rings", "tof-continuum")]:
        replayed = out / f"{name}-replayed.mcap"
        assert main(["replay", str(found[name]), "--out", str(replayed), "--json"]) == 0
        found[f"replay of {name}"] = replayed
    return found


def test_every_bag_connects_every_output_frame_to_world(bags: dict[str, Path]) -> None:
    assert len(bags) >= 5 and {"tof-rings", "vine-collision", "replay of vine-collision", "tof-continuum"} <= set(bags)
    for name, bag in bags.items():
        assert "/tf_static" in bag_topics(bag), f"{name}: no /tf_static"
        parent, used = _frames(bag)
        assert used, name
        loose = {f: _root_of(f, parent) for f in used if _root_of(f, parent) != "world"}
        assert not loose, f"{name}: frames not connected to world (frame -> its root): {loose}"


def test_continuum_bags_use_the_node_frames(bags: dict[str, Path]) -> None:
    if "eval-continuum" not in bags:
        pytest.skip("shared dataset not present")
    for name in ("eval-continuum", "replay of eval-continuum"):
        parent, used = _frames(bags[name])
        tf_children = {c for c, p in parent.items() if p == "continuum_base"}
        assert tf_children and all(re.fullmatch(r"continuum_node_\d\d", c) for c in tf_children), (name, tf_children)
        assert parent["continuum_base"] == "world"
        assert used == {"continuum_base"}, (name, used)
