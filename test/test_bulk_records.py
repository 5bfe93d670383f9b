"""Bulk record writing (io/bag_bulk.write_records) makes the bag the per-message writer makes: same messages in the
same order for rosbags' reader, the mcap reader and its ROS 2 decoder, same counts in the rosbag2 metadata."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import yaml
from mcap.reader import make_reader
from mcap_ros2.decoder import DecoderFactory
from rosbags.rosbag2 import Reader

from shape_sensing.io.bag import BagWriter, bag_message_count, bag_metadata, read_bag
from shape_sensing.io.bag_bulk import RecordBatch, _fast_storage, read_topics, write_records
from shape_sensing.messages import common as msgs
from shape_sensing.types import ImuSample


def _source(path: Path) -> Path:
    """A bag with IMU messages of two frame-id lengths, a string topic of varying sizes and equal log times."""
    rng = np.random.default_rng(3)
    with BagWriter(path) as w:
        f = w.factory
        for k in range(6000):  # about 2 MiB: several chunks
            t = 1_000_000 + 5_000_000 * (k // 3)
            frame = "imu_a" if k % 2 else "imu_longer_frame_b"
            s = ImuSample(t, frame, rng.normal(size=4))
            w.write(f"/imu_{k % 3}", msgs.imu_to_msg(s, f), t, qos="sensor")
            if k % 50 == 0:
                w.write("/note", f.make("std_msgs/msg/String", data="x" * (k % 7)), t)
    return path


def _bulk_copy(src: Path, out: Path, storage: str = "mcap") -> int:
    topics = ["/imu_0", "/imu_1", "/imu_2", "/note"]
    arrays = read_topics(src, topics)
    with BagWriter(out, storage=storage) as w:
        w.set_metadata("k", "v")
        w.write("/first", w.factory.make("std_msgs/msg/String", data="per message, before"), 0)
        batch = RecordBatch()
        for topic, ta in arrays.items():
            cid = w.connection_id(topic, ta.msgtype, qos="sensor" if topic != "/note" else "default")
            key = np.zeros((len(ta), 3), dtype=np.int64)
            key[:, 0] = ta.rank
            assert ta.source is not None and ta.record_at is not None
            batch.copy(ta.source, ta.record_at, cid, ta.log_time, key)
        extra = w.connection_id("/extra", "std_msgs/msg/String")
        for j in range(40):  # new records between the copied ones (after the message of rank 150 j)
            cdr = w.factory.typestore.serialize_cdr(
                w.factory.make("std_msgs/msg/String", data="e" * j), "std_msgs/msg/String"
            )
            batch.add(extra, 1_000_000 + j, cdr, (150 * j, 1, j))
        assert (_fast_storage(w) is not None) == (storage == "mcap")
        return write_records(w, batch)


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_bulk_records_read_back_as_written(tmp_path: Path, storage: str) -> None:
    src = _source(tmp_path / "src.mcap")
    out = tmp_path / ("out.mcap" if storage == "mcap" else "out")
    n = _bulk_copy(src, out, storage)
    copied = [(m.topic, m.stamp_ns, bytes(m.raw)) for m in read_bag(src)]
    assert n == len(copied) + 40
    # the per-message writer, the same order
    ref = tmp_path / ("ref.mcap" if storage == "mcap" else "ref")
    with BagWriter(ref, storage=storage) as w:
        w.write("/first", w.factory.make("std_msgs/msg/String", data="per message, before"), 0)
        j = 0
        for r, (topic, t, raw) in enumerate(copied):
            ty = "std_msgs/msg/String" if topic == "/note" else "sensor_msgs/msg/Imu"
            w.write_raw(topic, ty, raw, t)
            while j < 40 and 150 * j == r:
                cdr = w.factory.typestore.serialize_cdr(
                    w.factory.make("std_msgs/msg/String", data="e" * j), "std_msgs/msg/String"
                )
                w.write_raw("/extra", "std_msgs/msg/String", bytes(cdr), 1_000_000 + j)
                j += 1
    got = [(m.topic, m.stamp_ns, bytes(m.raw)) for m in read_bag(out)]
    want = [(m.topic, m.stamp_ns, bytes(m.raw)) for m in read_bag(ref)]
    assert got == want
    assert bag_metadata(out) == {"k": "v"}
    assert bag_message_count(out) == len(want)
    # rosbags' own reader, with its connection counts
    with Reader(out if storage == "sqlite3" else _as_dir(out, tmp_path)) as reader:
        rows = [(c.topic, t, bytes(raw)) for c, t, raw in reader.messages()]
        counts = {c.topic: c.msgcount for c in reader.connections}
    assert sorted(rows, key=lambda r: r[1]) == sorted(want, key=lambda r: r[1])
    assert counts["/extra"] == 40 and counts["/imu_0"] == 2000 and counts["/note"] == 120


def _as_dir(mcap: Path, tmp: Path) -> Path:
    """rosbags' Reader opens directories: the single file with the metadata.yaml its embedded record holds."""
    d = tmp / "asdir"
    d.mkdir()
    (d / mcap.name).symlink_to(mcap)
    with mcap.open("rb") as f:
        rec = next(r for r in make_reader(f).iter_metadata() if r.name == "rosbag2")
    info = yaml.safe_load(rec.metadata["serialized_metadata"])
    info["relative_file_paths"] = [mcap.name]
    info["files"][0]["path"] = mcap.name
    (d / "metadata.yaml").write_text(yaml.safe_dump({"rosbag2_bagfile_information": info}))
    return d


def test_bulk_records_decode_with_the_mcap_ros2_decoder_and_keep_statistics(tmp_path: Path) -> None:
    src = _source(tmp_path / "src.mcap")
    _bulk_copy(src, tmp_path / "out.mcap")
    with (tmp_path / "out.mcap").open("rb") as f:
        reader = make_reader(f, decoder_factories=[DecoderFactory()])
        summary = reader.get_summary()
        assert summary is not None and summary.statistics is not None
        assert len(summary.chunk_indexes) >= 2  # the copy is split into chunks of about 1 MiB
        decoded = list(reader.iter_decoded_messages())
    imu = [m for _, ch, _, m in decoded if ch.topic == "/imu_1"]
    extra = [m.data for _, ch, _, m in decoded if ch.topic == "/extra"]
    assert len(imu) == 2000 and imu[0].header.frame_id == "imu_a" and extra == ["e" * j for j in range(40)]
    by_topic = {summary.channels[c].topic: n for c, n in summary.statistics.channel_message_counts.items()}
    assert by_topic == {"/first": 1, "/imu_0": 2000, "/imu_1": 2000, "/imu_2": 2000, "/note": 120, "/extra": 40}
    assert summary.statistics.message_start_time == 0
    # every message record: sequence 0 and publish time = log time, as the per-message writer writes them
    with (tmp_path / "out.mcap").open("rb") as f:
        for _, _, m in make_reader(f).iter_messages():
            assert m.sequence == 0 and m.publish_time == m.log_time


def test_bulk_reader_refuses_a_message_index_that_points_outside_its_chunk(tmp_path: Path) -> None:
    from shape_sensing.io.errors import BagError

    src = _source(tmp_path / "src.mcap")
    good = read_topics(src, ["/imu_0"])
    assert len(good["/imu_0"]) > 0
    with open(src, "rb") as fh:
        summary = make_reader(fh).get_summary()
    assert summary is not None
    chunk = summary.chunk_indexes[0]
    cid = next(c for c, ch in summary.channels.items() if ch.topic == "/imu_0")
    index_at = chunk.message_index_offsets[cid]
    data = bytearray(src.read_bytes())
    data[index_at + 15 + 8 : index_at + 15 + 16] = (len(data) * 4).to_bytes(8, "little")  # first entry's offset
    bad = tmp_path / "bad.mcap"
    bad.write_bytes(bytes(data))
    with pytest.raises(BagError, match="bad.mcap"):
        read_topics(bad, ["/imu_0"])


def test_add_many_makes_the_records_add_makes_one_by_one() -> None:
    rng = np.random.default_rng(3)
    datas = [rng.integers(0, 256, int(n), dtype=np.uint8).tobytes() for n in rng.integers(0, 90, 40)]
    conns = [int(c) for c in rng.integers(1, 300, 40)]
    times = [int(t) for t in rng.integers(0, 2**62, 40)]
    keys = np.stack([rng.integers(0, 5, 40), np.ones(40, dtype=np.int64), np.arange(40)], axis=1)
    one, many = RecordBatch(), RecordBatch()
    one.add(7, 5, b"first", (2, 0, 0))
    many.add(7, 5, b"first", (2, 0, 0))  # a single record before the block: positions continue after it
    for c, t, d, k in zip(conns, times, datas, keys.tolist(), strict=True):
        one.add(c, t, d, tuple(k))
    many.add_many((c, t, d, (k[0], k[1], k[2])) for c, t, d, k in zip(conns, times, datas, keys.tolist(), strict=True))
    assert len(one) == len(many) == 41
    a, b = one.ordered(), many.ordered()
    for col_a, col_b in zip(a[1:], b[1:], strict=True):
        assert col_a.tolist() == col_b.tolist()
    assert bytes(one.sources[-1]) == bytes(many.sources[-1])


def test_a_rewritten_bag_is_read_anew_not_from_the_kept_summary(tmp_path: Path) -> None:
    import shutil

    from shape_sensing.io.bag import bag_topics

    path = tmp_path / "b.mcap"
    for topic, n in (("/first", 3), ("/second", 5)):
        with BagWriter(tmp_path / f"{n}.mcap") as w:
            w.set_metadata("topic", topic)
            for j in range(n):
                w.write(topic, w.factory.make("std_msgs/msg/String", data="x"), j)
        shutil.copyfile(tmp_path / f"{n}.mcap", path)  # the same file (inode) rewritten
        assert bag_topics(path) == {topic: "std_msgs/msg/String"}
        assert bag_metadata(path) == {"topic": topic}
        assert bag_message_count(path) == n
        assert len(read_topics(path, [topic])[topic]) == n


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_records_streamed_in_windows_read_back_as_one_batch_writes_them(tmp_path: Path, storage: str) -> None:
    """RecordStream: the copied records split into windows by rank, each window with new records (one on a
    connection first made midway), read back as the same records written as one batch."""
    from shape_sensing.io.bag_bulk import RecordStream

    src = _source(tmp_path / "src.mcap")
    arrays = read_topics(src, ["/imu_0", "/imu_1", "/imu_2", "/note"])
    typ = "std_msgs/msg/String"
    cuts = [0, 700, 701, 2500, 4100, 10_000]  # rank windows, one holding a single rank

    def window(w: BagWriter, cids: dict[str, int], lo: int, hi: int, batch: RecordBatch) -> None:
        for t, ta in arrays.items():
            sel = (ta.rank >= lo) & (ta.rank < hi)
            key = np.zeros((int(sel.sum()), 3), dtype=np.int64)
            key[:, 0] = ta.rank[sel]
            assert ta.source is not None and ta.record_at is not None
            batch.copy(ta.source, ta.record_at[sel], cids[t], ta.log_time[sel], key)
        for j in range(lo, min(hi, 4000), 97):
            cid = w.connection_id("/late" if j >= 2500 else "/early", typ)
            data = w.factory.typestore.serialize_cdr(w.factory.make(typ, data="n" * (j % 11)), typ)
            batch.add(cid, 2_000_000 + j, data, (j, 1, 0))

    outs = {}
    for mode in ("one", "windows"):
        out = tmp_path / (f"{mode}.mcap" if storage == "mcap" else mode)
        with BagWriter(out, storage=storage) as w:
            cids = {t: w.connection_id(t, ta.msgtype) for t, ta in arrays.items()}
            stream = RecordStream(w)
            if mode == "one":
                batch = RecordBatch()
                for lo, hi in itertools.pairwise(cuts):
                    window(w, cids, lo, hi, batch)
                stream.write(batch)
            else:
                for lo, hi in itertools.pairwise(cuts):
                    batch = RecordBatch()
                    window(w, cids, lo, hi, batch)
                    stream.write(batch)
            written = stream.close()
        outs[mode] = ([(m.topic, m.stamp_ns, bytes(m.raw)) for m in read_bag(out)], written)
    assert outs["one"][1] == outs["windows"][1] == len(outs["one"][0]) > 6000
    assert outs["windows"][0] == outs["one"][0]
    assert {t for t, _, _ in outs["windows"][0]} >= {"/late", "/early", "/note"}
