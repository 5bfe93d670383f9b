"""Bag I/O: round trips read back by rosbags' own reader and the mcap library's ROS 2 decoder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from rosbags.rosbag2 import Reader

from shape_sensing.io.bag import BagError, BagWriter, bag_topics, read_bag
from shape_sensing.messages import common as c
from shape_sensing.messages import default_factory
from shape_sensing.types import ImuSample, TransformStamped


def _write(path: Path, n: int = 20, **kw: object) -> list[ImuSample]:
    samples = []
    with BagWriter(path, **kw) as w:  # type: ignore[arg-type]
        w.write("/tf_static", c.tf_message([TransformStamped(0, "world", "base", np.eye(4))]), 0, qos="static")
        for i in range(n):
            q = np.array([0.0, np.sin(0.01 * i), 0.0, np.cos(0.01 * i)])
            s = ImuSample(1_000_000 * i + 5, f"imu_{i % 2}", q, np.array([i, 0.0, 0.0]), np.zeros(3))
            samples.append(s)
            w.write(f"/imu_{i % 2}/data", c.imu_to_msg(s), s.stamp_ns, qos="sensor")
    return samples


def test_single_file_mcap_read_by_mcap_ros2_decoder(tmp_path: Path) -> None:
    path = tmp_path / "x.mcap"
    samples = _write(path)
    assert path.is_file() and not (tmp_path / "x").exists()
    seen = []
    with path.open("rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        summary = reader.get_summary()
        assert summary is not None
        for ch in summary.channels.values():
            qos = yaml.safe_load(ch.metadata["offered_qos_profiles"])
            if ch.topic == "/tf_static":
                assert qos[0]["durability"] in (1, "transient_local")
        for _schema, channel, message, decoded in reader.iter_decoded_messages(topics=["/imu_0/data", "/imu_1/data"]):
            seen.append((channel.topic, message.log_time, decoded.angular_velocity.x, decoded.header.frame_id))
    assert seen == [(f"/imu_{i % 2}/data", s.stamp_ns, float(i), s.frame_id) for i, s in enumerate(samples)]


def test_directory_bag_read_by_rosbags_reader(tmp_path: Path) -> None:
    path = tmp_path / "dirbag"
    samples = _write(path)
    ts = default_factory().typestore
    with Reader(path) as r:
        assert r.message_count == len(samples) + 1
        got = [ts.deserialize_cdr(raw, conn.msgtype) for conn, _t, raw in r.messages() if conn.topic != "/tf_static"]
    assert [m.header.stamp.nanosec for m in got] == [s.stamp_ns % 1_000_000_000 for s in samples]


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_read_bag_round_trip(tmp_path: Path, storage: str) -> None:
    path = tmp_path / "b"
    samples = _write(path, storage=storage)
    msgs = list(read_bag(path, topics=["/imu_0/data", "/imu_1/data"]))
    back = [c.imu_from_msg(m.msg) for m in msgs]
    assert [b.stamp_ns for b in back] == [s.stamp_ns for s in samples]
    assert all(np.allclose(b.orientation, s.orientation) for b, s in zip(back, samples, strict=True))
    assert bag_topics(path)["/tf_static"] == "tf2_msgs/msg/TFMessage"


def test_copy_keeps_bytes(tmp_path: Path) -> None:
    _write(tmp_path / "a.mcap")
    with BagWriter(tmp_path / "b.mcap") as w:
        for m in read_bag(tmp_path / "a.mcap"):
            w.copy(m)
    a = [(m.topic, m.stamp_ns, m.raw) for m in read_bag(tmp_path / "a.mcap")]
    b = [(m.topic, m.stamp_ns, m.raw) for m in read_bag(tmp_path / "b.mcap")]
    assert a == b


def test_foreign_types_decode_from_stored_definitions(tmp_path: Path) -> None:
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    ts = get_typestore(Stores.ROS2_JAZZY)
    ts.register(get_types_from_msg("float64 pressure\nstring label", "my_pkg/msg/Custom"))
    with Writer(tmp_path / "foreign", version=9, storage_plugin=StoragePlugin.MCAP) as w:
        conn = w.add_connection("/custom", "my_pkg/msg/Custom", typestore=ts)
        cls = ts.types["my_pkg/msg/Custom"]
        w.write(conn, 10, ts.serialize_cdr(cls(pressure=101.3, label="x"), "my_pkg/msg/Custom"))
    (m,) = list(read_bag(tmp_path / "foreign"))
    assert m.msg.pressure == 101.3 and m.msg.label == "x"


def test_bad_bags_give_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(BagError, match="does not exist"):
        list(read_bag(tmp_path / "none.mcap"))
    (tmp_path / "notabag").mkdir()
    with pytest.raises(BagError, match="not a rosbag2 directory"):
        list(read_bag(tmp_path / "notabag"))
    (tmp_path / "garbage.mcap").write_bytes(b"\x89MCAP0\r\n" + b"\x00" * 40)
    with pytest.raises(BagError, match="malformed or truncated"):
        list(read_bag(tmp_path / "garbage.mcap"))
    (tmp_path / "file.txt").write_text("hello")
    with pytest.raises(BagError, match="neither a rosbag2 directory nor an .mcap file"):
        list(read_bag(tmp_path / "file.txt"))


def test_truncated_mcap_keeps_what_was_read_then_fails_clearly(tmp_path: Path) -> None:
    path = tmp_path / "t.mcap"
    _write(path, n=200)
    data = path.read_bytes()
    cut = tmp_path / "cut.mcap"
    cut.write_bytes(data[: len(data) // 2])
    got = []
    with pytest.raises(BagError, match="cut.mcap is malformed or truncated"):
        for m in read_bag(cut):
            got.append(m)
    assert len(got) < 201


def test_writer_errors(tmp_path: Path) -> None:
    _write(tmp_path / "a.mcap")
    with pytest.raises(BagError, match="already exists"):
        BagWriter(tmp_path / "a.mcap")
    with BagWriter(tmp_path / "a.mcap", overwrite=True) as w:
        w.write("/x", c.header(0, "f"), 0)
        with pytest.raises(BagError, match="holds std_msgs/msg/Header, cannot also write"):
            w.write("/x", c.tf_message([]), 1)
        with pytest.raises(BagError, match="QoS profile 'fast' unknown"):
            w.write("/y", c.header(0, "f"), 0, qos="fast")
    with pytest.raises(BagError, match="single-file bag must use mcap"):
        BagWriter(tmp_path / "s.mcap", storage="sqlite3")


def test_data_written_before_a_crash_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "crash.mcap"
    with pytest.raises(RuntimeError, match="boom"), BagWriter(path) as w:
        w.write("/x", c.header(5, "f"), 5)
        raise RuntimeError("boom")
    assert [m.stamp_ns for m in read_bag(path)] == [5]
