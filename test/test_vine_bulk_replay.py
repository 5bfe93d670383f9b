"""Bulk replay of vine-IMU bags gives the streaming replay's output to the last bit, and the bulk reader
gives what read_bag gives."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest

from shape_sensing.cli.replay import replay_bag
from shape_sensing.demos.vine_imu import run_demo
from shape_sensing.io.bag import BagWriter, bag_metadata, read_bag
from shape_sensing.io.bag_bulk import FixedRows, _read_streaming, read_topics
from shape_sensing.messages import common as msgs
from shape_sensing.messages.errors import MessageError
from shape_sensing.pipelines.vine_imu_bulk import _imu_stream
from shape_sensing.types import ImuSample

IMU = [f"/vine/imu_{i:02d}/data" for i in range(18)]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bulk")
    run_demo(out, scenario="growth", duration=2.5, seed=4, progress=False, picture=False)
    return out / "vine-imu.mcap"


def _all(bag: Path) -> list[tuple[str, int, bytes]]:
    return [(m.topic, m.stamp_ns, bytes(m.raw)) for m in read_bag(bag)]


def _replay(bag: Path, out: Path, streaming: bool) -> tuple[list[tuple[str, int, bytes]], dict | None]:
    args = argparse.Namespace(namespace="/vine", streaming=streaming, json=True)
    metrics = replay_bag(bag, out, args)
    return _all(out), metrics


def _troubled(demo: Path, out: Path, storage: str = "mcap") -> Path:
    """The demo bag with a gap, out-of-order stamps, a sensor that drops out and bad samples of every kind."""
    with BagWriter(out, storage=storage) as w:
        f = w.factory
        for key, value in bag_metadata(demo).items():  # recorded parameters and straight reference travel along
            w.set_metadata(key, value)
        count: dict[str, int] = {}
        for m in read_bag(demo):
            if m.topic.startswith(("/vine/shape", "/tf", "/diagnostics")) and m.topic != "/tf_static":
                continue  # estimates of the live run: replay writes its own
            t = m.stamp_ns
            if 800_000_000 <= t < 1_300_000_000:
                continue  # a gap in the whole recording
            if m.topic == "/vine/imu_10/data" and t >= 1_000_000_000:
                continue  # a sensor that drops out for good
            k = count[m.topic] = count.get(m.topic, 0) + 1
            if m.topic == "/vine/imu_03/data" and k % 7 == 0:
                # stamped 40 ms in the past: out of order for the tracker
                msg = m.msg
                s = msgs.imu_from_msg(msg)
                s.stamp_ns -= 40_000_000
                w.write(m.topic, msgs.imu_to_msg(s, f), t, qos="sensor")
                continue
            if m.topic == "/vine/imu_05/data" and k % 11 == 0:
                s = ImuSample(msgs.stamp_from_msg(m.msg), "vine_imu_05", None)  # orientation absent
                w.write(m.topic, msgs.imu_to_msg(s, f), t, qos="sensor")
                continue
            if m.topic == "/vine/imu_06/data" and k % 13 == 0:
                msg = m.msg  # a zero quaternion: undecodable
                msg.orientation.x = msg.orientation.y = msg.orientation.z = msg.orientation.w = 0.0
                w.write(m.topic, msg, t, qos="sensor")
                continue
            if m.topic == "/vine/base/length" and k % 17 == 0:
                msg = m.msg  # no position: counted and skipped
                msg.position = np.zeros(0)
                w.write(m.topic, msg, t, qos="sensor")
                continue
            if m.topic == "/vine/base/length" and k % 19 == 0:
                msg = m.msg
                msg.position = np.array([-1.0])  # a negative length: bad
                w.write(m.topic, msg, t, qos="sensor")
                continue
            w.copy(m)
        # a late sensor with frame ids of another length (the per-message reader path) and equal log times
        for j in range(5):
            stamp = 2_000_000_000 + j * 10_000_000
            s = ImuSample(stamp, "imu_ff_longer_frame", np.array([0.0, 0.0, 0.1 * j, 1.0]))
            w.write("/vine/imu_17/data", msgs.imu_to_msg(s, f), stamp, qos="sensor")
    return out


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_bulk_equals_streaming_on_a_troubled_bag(demo: Path, tmp_path: Path, storage: str) -> None:
    bag = _troubled(demo, tmp_path / ("t.mcap" if storage == "mcap" else "t"), storage)
    bulk, m_bulk = _replay(bag, tmp_path / "bulk.mcap", streaming=False)
    stream, m_stream = _replay(bag, tmp_path / "stream.mcap", streaming=True)
    assert len(bulk) == len(stream) and bulk == stream
    assert m_bulk == m_stream and m_bulk is not None and m_bulk["estimates_scored"] > 30
    diags = [m for m in read_bag(tmp_path / "bulk.mcap", ["/diagnostics"])]
    inputs = [s for m in diags for s in msgs.diagnostics_from_msg(m.msg) if s.name.endswith("inputs")]
    assert inputs and int(inputs[-1].values["out_of_order"]) > 0 and int(inputs[-1].values["bad_samples"]) > 0
    missing = [s for m in diags for s in msgs.diagnostics_from_msg(m.msg) if "vine_imu_10" in s.message]
    assert missing  # the dropped sensor is bridged and reported


def test_bulk_equals_streaming_and_the_live_run_on_the_demo_bag(demo: Path, tmp_path: Path) -> None:
    bulk, m_bulk = _replay(demo, tmp_path / "bulk.mcap", streaming=False)
    stream, m_stream = _replay(demo, tmp_path / "stream.mcap", streaming=True)
    assert bulk == stream and m_bulk == m_stream
    estimate_topics = ("/vine/shape/tip", "/vine/shape/path", "/tf", "/diagnostics", "/vine/shape/markers")
    live = [x for x in _all(demo) if x[0] in estimate_topics]
    # 2.5 s at 30 estimates per second (/diagnostics comes about once per second, not with every estimate)
    assert sum(x[0] == "/vine/shape/tip" for x in live) > 60 and live == [x for x in bulk if x[0] in estimate_topics]


def test_bulk_reader_matches_read_bag(demo: Path) -> None:
    topics = [*IMU, "/vine/base/length", "/vine/truth/tip", "/not/there"]
    fast = read_topics(demo, topics)
    slow = _read_streaming(demo, set(topics))
    assert fast.keys() == slow.keys() and "/not/there" not in fast
    for topic, a in fast.items():
        b = slow[topic]
        assert a.msgtype == b.msgtype and np.array_equal(a.log_time, b.log_time) and np.array_equal(a.rank, b.rank)
        assert isinstance(a.data, FixedRows) and [a.raw(i) for i in range(len(a))] == [b.raw(i) for i in range(len(b))]
        # the rows left in the memory map gather the same bytes as the whole array, column by column
        whole = np.asarray(a.data)
        assert np.array_equal(whole, np.asarray(b.data)) and np.array_equal(a.data[:, 4:16], whole[:, 4:16])
        assert np.array_equal(a.data[:, -1], whole[:, -1]) and np.array_equal(a.data[3, 2:9], whole[3, 2:9])
        assert np.array_equal(a.data[::2, 1], whole[::2, 1]) and a.data[:, 7:7].shape == (len(a), 0)
        with pytest.raises(IndexError, match=f"column {whole.shape[1]} is out of bounds"):
            a.data[:, whole.shape[1]]


def test_vectorised_imu_decode_equals_the_per_message_reader(demo: Path) -> None:
    rng = np.random.default_rng(5)
    with BagWriter(demo.parent / "q.mcap", overwrite=True) as w:
        for k in range(400):
            q = rng.normal(size=4)
            q *= rng.choice([1e-3, 0.3, 0.98, 1.0, 1.02, 7.0]) / np.linalg.norm(q)
            if k % 50 == 0:
                q[2] = np.nan
            s = ImuSample(k * 1_000_000, "vine_imu_00", None if k % 37 == 0 else q)
            w.write("/vine/imu_00/data", msgs.imu_to_msg(s, w.factory), k)
    ta = read_topics(demo.parent / "q.mcap", ["/vine/imu_00/data"])["/vine/imu_00/data"]
    assert isinstance(ta.data, FixedRows)
    bulk = _imu_stream(ta)
    ta.data = [ta.raw(i) for i in range(len(ta))]  # force the per-message path
    one = _imu_stream(ta)
    assert np.array_equal(bulk.stamp, one.stamp) and np.array_equal(bulk.status, one.status)
    assert np.array_equal(bulk.values, one.values)  # bit for bit
    assert set(np.unique(bulk.status)) == {0, 1, 2}


def test_tick_states_equal_the_streaming_trackers_state_at_every_tick(demo: Path, tmp_path: Path) -> None:
    """What the tracker holds when each tick fires, recorded from the streaming path, against tick_states."""
    from shape_sensing.io.bag_bulk import read_topics
    from shape_sensing.pipelines.vine_imu import VineImuTracker
    from shape_sensing.pipelines.vine_imu_bulk import decode_inputs, tick_states

    bag = _troubled(demo, tmp_path / "t.mcap")
    params = {"imu_topics": [t[len("/vine/") :] for t in IMU]}
    seen: list[tuple] = []
    first: list[int] = []

    class Recording(VineImuTracker):
        def _estimate(self, tick: int):  # type: ignore[no-untyped-def]
            seen.append((tick, self.quats.copy(), self.last_ns.copy(), self.latest_ns, self.length,
                         self.stats.bad_samples, self.stats.out_of_order, first[0] if first else -1))  # fmt: skip
            return super()._estimate(tick)

        def push_orientation(self, index, stamp_ns, q):  # type: ignore[no-untyped-def]
            before = self.last_ns[index]
            out = super().push_orientation(index, stamp_ns, q)
            if not first and self.last_ns[index] != before:
                first.append(stamp_ns)
            return out

        def push_length(self, stamp_ns, length):  # type: ignore[no-untyped-def]
            out = super().push_length(stamp_ns, length)
            if not first and self.length is not None:
                first.append(stamp_ns)
            return out

    tracker = Recording(params)
    for m in read_bag(bag):
        if m.topic in IMU:
            try:
                stamp, q = msgs.imu_orientation_from_cdr(m.raw)
            except MessageError:
                tracker.stats.bad_samples += 1
                continue
            tracker.push_orientation(IMU.index(m.topic), stamp, q)
        elif m.topic == "/vine/base/length":
            pos = list(m.msg.position)
            if pos:
                tracker.push_length(msgs.stamp_from_msg(m.msg), float(pos[0]))
            else:
                tracker.stats.bad_samples += 1
    tracker.flush()
    arrays = read_topics(bag, [*IMU, "/vine/base/length"])
    states = tick_states(decode_inputs(arrays, IMU, "/vine/base/length", None), tracker.ticker.period_ns)
    assert len(seen) == len(states.ticks) > 50
    for t, (tick, quats, last_ns, latest, length, bad, ooo, first_ns) in enumerate(seen):
        assert tick == states.ticks[t]
        assert np.array_equal(quats, states.quats[t]) and np.array_equal(last_ns, states.last_ns[t])
        assert latest == states.latest_ns[t] and bad == states.bad[t] and ooo == states.out_of_order[t]
        assert (length is None and np.isnan(states.length[t])) or length == states.length[t]
        assert first_ns == states.first_ns[t]


def test_bulk_replay_builds_and_serialises_for_other_definitions(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With definitions the direct CDR writer does not know, the messages are built and serialised: same output."""
    from shape_sensing.messages import cdr

    fast, _ = _replay(demo, tmp_path / "fast.mcap", streaming=False)
    monkeypatch.setattr(cdr, "supported", lambda typestore: False)
    monkeypatch.setattr(cdr.ShapeCdr, "build", lambda *a, **k: pytest.fail("direct CDR used"))
    built, _ = _replay(demo, tmp_path / "built.mcap", streaming=False)
    assert built == fast and len(built) > 1000


def test_vectorised_length_and_truth_decode_equal_the_per_message_reader(demo: Path, tmp_path: Path) -> None:
    from shape_sensing.pipelines.vine_imu_bulk import _length_stream, _truth

    arrays = read_topics(demo, ["/vine/base/length", "/vine/truth/tip"])
    ln, tip = arrays["/vine/base/length"], arrays["/vine/truth/tip"]
    assert isinstance(ln.data, FixedRows) and isinstance(tip.data, FixedRows) and len(ln) > 100
    from shape_sensing.pipelines.vine_imu_bulk import _header_layout, _length_fixed_layout

    assert _length_fixed_layout(ln.data) is not None and _header_layout(tip.data) is not None  # the fast paths
    fast_len, fast_tip = _length_stream(ln), _truth(tip)
    ln.data = [ln.raw(i) for i in range(len(ln))]  # force the per-message paths
    tip.data = [tip.raw(i) for i in range(len(tip))]
    slow_len, slow_tip = _length_stream(ln), _truth(tip)
    for a, b in (
        (fast_len.stamp, slow_len.stamp),
        (fast_len.status, slow_len.status),
        (fast_len.values, slow_len.values),
    ):
        assert np.array_equal(a, b)
    assert np.array_equal(fast_tip[0], slow_tip[0]) and np.array_equal(fast_tip[1], slow_tip[1])
    # bad lengths (negative, NaN) and repeated truth stamps, in same-size messages
    with BagWriter(tmp_path / "b.mcap") as w:
        f = w.factory
        for k, value in enumerate([0.5, -1.0, np.nan, 0.7, np.inf, 0.0]):
            msg = f.make("sensor_msgs/msg/JointState", header=msgs.header(k, "base", f), name=["vine_length"],
                         position=np.array([value]), velocity=np.array([0.0]), effort=np.zeros(0))  # fmt: skip
            w.write("/l", msg, k)
            pose = msgs.pose_msg(np.eye(4) + np.eye(4) * k, f)
            w.write("/t", f.make("geometry_msgs/msg/PoseStamped", header=msgs.header(k // 2, "base", f), pose=pose), k)
    arrays = read_topics(tmp_path / "b.mcap", ["/l", "/t"])
    assert _length_fixed_layout(arrays["/l"].data) is not None  # type: ignore[arg-type]
    fast_len, fast_tip = _length_stream(arrays["/l"]), _truth(arrays["/t"])
    for ta in arrays.values():
        ta.data = [ta.raw(i) for i in range(len(ta))]
    slow_len, slow_tip = _length_stream(arrays["/l"]), _truth(arrays["/t"])
    assert list(fast_len.status) == list(slow_len.status) == [0, 1, 1, 0, 1, 0]
    assert np.array_equal(fast_len.values, slow_len.values, equal_nan=True)
    assert np.array_equal(fast_tip[0], slow_tip[0]) and np.array_equal(fast_tip[1], slow_tip[1])
    assert list(fast_tip[0]) == [0, 1, 2]


def test_nearest_stamp_by_sorted_search_is_argmin() -> None:
    from shape_sensing.pipelines.vine_imu_bulk import _nearest_first

    rng = np.random.default_rng(8)
    for size in (1, 2, 5, 50):
        ref = np.unique(rng.integers(0, 100, size) * 2)  # even stamps: odd queries tie between two
        queries = np.concatenate([rng.integers(-20, 220, 300), ref, ref + 1, ref - 1])
        want = [int(np.argmin(np.abs(ref - q))) for q in queries]
        assert _nearest_first(ref, queries).tolist() == want


def test_bulk_equals_streaming_with_small_update_batches(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The troubled bag's ticks in many batches of the vectorised update (and ticks of one batch in several
    # groups of sensors): still the streaming replay's bytes.
    from shape_sensing.pipelines import vine_imu_bulk

    monkeypatch.setattr(vine_imu_bulk, "_BATCH", 7)
    bag = _troubled(demo, tmp_path / "t.mcap")
    bulk, m_bulk = _replay(bag, tmp_path / "bulk.mcap", streaming=False)
    stream, m_stream = _replay(bag, tmp_path / "stream.mcap", streaming=True)
    assert len(bulk) > 1000 and bulk == stream and m_bulk == m_stream
