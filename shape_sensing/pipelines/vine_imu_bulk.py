"""Vine-IMU bags in bulk: whole topics decoded at once, every tick's inputs found in one vectorised pass.

:class:`~shape_sensing.pipelines.vine_imu.VineImuTracker` (the node's path)
takes one message at a time: it keeps the latest orientation of each IMU, and
on a stamp-driven publishing tick runs the estimator. A recording holds
everything up front, so here the same rules are applied to whole arrays:

* every IMU topic is decoded with numpy views (a sensor_msgs/Imu has a fixed
  CDR layout once its frame id is known; topics that do not, fall back to the
  per-message reader), with the same operations as the per-message reader,
  so the same bits;
* what the tracker would hold at each tick (latest accepted orientation and
  stamp of every IMU, robot length, newest stamp, skipped-sample counts) is
  found with sorted searches over the message order, following the tracker's
  rules: ticks fire on the first message stamped after them, a reading older
  than the sensor's last is out of order, a bad reading is counted and
  skipped, an undecodable one is counted without driving the ticks;
* each tick's estimate is then made by the tracker's own estimate step
  (:meth:`~shape_sensing.pipelines.vine_imu.VineImuTracker._estimate`) on
  that state, so bulk and streaming estimates are the same to the last bit.

:func:`replay` writes the same bag as the streaming replay; :func:`tick_states`
and :func:`estimates` serve ``shape-sensing reanalyse``, which runs several
sensor subsets over one decoded recording.
"""

from __future__ import annotations

import itertools
import math
import struct
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from shape_sensing.io.bag import BagWriter
from shape_sensing.io.bag_bulk import FixedRows, RecordBatch, RecordStream, TopicArrays, read_topics
from shape_sensing.io.errors import BagError
from shape_sensing.messages import cdr
from shape_sensing.messages import common as msgs
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import default_factory
from shape_sensing.pipelines.vine_imu import ShapeWriter, TipErrors, VineImuTracker, resolve_topic
from shape_sensing.types import ShapeEstimate

__all__ = ["BulkInputs", "TickStates", "decode_inputs", "estimates", "replay_bulk", "tick_states"]

# status of a message: accepted candidate, bad but drives the ticks, undecodable (does not drive the ticks)
_OK, _BAD, _UNDECODABLE = 0, 1, 2


@dataclass
class _Stream:
    """One input stream in message order: rank, header stamp, status, values (quaternions or lengths)."""

    rank: np.ndarray
    stamp: np.ndarray
    status: np.ndarray
    values: np.ndarray


@dataclass
class BulkInputs:
    """Decoded inputs of a recording: one stream per IMU, the length stream, ground-truth tips."""

    imus: list[_Stream]
    length: _Stream
    truth_stamps: np.ndarray  # (K,) int64, sorted
    truth_tips: np.ndarray  # (K, 3)


@dataclass
class TickStates:
    """What the tracker holds at every tick (arrays over ticks)."""

    ticks: np.ndarray  # (T,) int64
    fire_rank: np.ndarray  # (T,) rank of the message each tick fires on (a large value for the flush)
    quats: np.ndarray  # (T, n, 4)
    last_ns: np.ndarray  # (T, n) int64, -1 before the first accepted reading
    latest_ns: np.ndarray  # (T,) int64
    length: np.ndarray  # (T,) float, NaN when no length was received
    bad: np.ndarray  # (T,) int64 bad samples so far
    out_of_order: np.ndarray  # (T,) int64
    first_ns: np.ndarray  # (T,) int64 stamp of the first accepted reading (IMU or length), -1 before it


def _imu_stream(ta: TopicArrays) -> _Stream:
    """Decode a whole sensor_msgs/Imu topic: header stamps, statuses, unit orientations."""
    n = len(ta)
    data = ta.data
    if isinstance(data, (np.ndarray, FixedRows)) and n:
        fast = _imu_fixed_layout(data)
        if fast is not None:
            stamp, q, status = fast
            return _Stream(ta.rank, stamp, status, q)
    stamp = np.zeros(n, dtype=np.int64)
    q = np.zeros((n, 4))
    status = np.full(n, _OK, dtype=np.int8)
    for i in range(n):
        raw = ta.raw(i)
        try:
            s, o = msgs.imu_orientation_from_cdr(raw)
        except MessageError:
            try:  # not plain little-endian CDR: the full decoder judges it (as the streaming replay does)
                s, o = msgs.imu_orientation_from_msg(_decode(raw, ta.msgtype))
            except (MessageError, BagError):
                status[i] = _UNDECODABLE
                continue
        stamp[i] = s
        if o is None or not _norm_ok(o):
            status[i] = _BAD
        else:
            q[i] = o
    return _Stream(ta.rank, stamp, status, q)


def _norm_ok(q: np.ndarray) -> bool:
    # the tracker's check, same operations
    norm = math.sqrt(float(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]))
    return abs(norm - 1.0) <= msgs.UNIT_QUATERNION_TOLERANCE


def _imu_fixed_layout(data: np.ndarray | FixedRows) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Vectorised :func:`~shape_sensing.messages.common.imu_orientation_from_cdr` for same-size messages."""
    size = data.shape[1]
    if size < 20:
        return None
    first = np.asarray(data[:, 0:16])  # encapsulation, stamp, frame id length: one gather
    if not (np.all(first[:, 0] == 0) and np.all(first[:, 1] == 1)):
        return None
    head = np.ascontiguousarray(first[:, 4:16]).view("<u4")  # sec, nanosec, frame id length
    if not np.all(head[:, 2] == head[0, 2]):
        return None
    n_frame = int(head[0, 2])
    pos = 4 + -(-(16 + n_frame - 4) // 8) * 8
    if n_frame == 0 or pos + 37 * 8 > size:
        return None
    sec = head[:, 0].view("<i4").astype(np.int64)
    stamp = sec * 1_000_000_000 + head[:, 1].astype(np.int64)
    v = np.ascontiguousarray(data[:, pos : pos + 40]).view("<f8")
    q = np.ascontiguousarray(v[:, :4])
    absent = v[:, 4] == -1.0
    # norm as one dot per row (matmul of 1x4 by 4x1 is the same dot as the per-message reader's q @ q)
    sq = (q[:, None, :] @ q[:, :, None])[:, 0, 0]
    with np.errstate(invalid="ignore"):
        norm = np.where(sq >= 0.0, np.sqrt(np.where(sq >= 0.0, sq, 0.0)), np.nan)
        undecodable = ~absent & ~(np.isfinite(norm) & (np.abs(norm - 1.0) <= msgs.UNIT_QUATERNION_TOLERANCE))
        qn = q / np.where(undecodable | absent, 1.0, norm)[:, None]
        check = np.sqrt(qn[:, 0] * qn[:, 0] + qn[:, 1] * qn[:, 1] + qn[:, 2] * qn[:, 2] + qn[:, 3] * qn[:, 3])
    status = np.full(len(data), _OK, dtype=np.int8)
    status[~(np.abs(check - 1.0) <= msgs.UNIT_QUATERNION_TOLERANCE)] = _BAD
    status[absent] = _BAD
    status[undecodable] = _UNDECODABLE
    qn[status != _OK] = 0.0
    stamp[undecodable] = 0  # no stamp is read from an undecodable message
    return stamp, qn, status


def _decode(raw: bytes, msgtype: str) -> Any:
    try:
        return default_factory().typestore.deserialize_cdr(raw, msgtype)
    except Exception as exc:  # CDR decoding raises assorted errors on bad bytes
        raise BagError(f"a {msgtype} message does not decode: {type(exc).__name__}: {exc}") from exc


def _header_layout(data: np.ndarray | FixedRows) -> tuple[np.ndarray, int] | None:
    """Stamps and the offset after the header of same-size CDR messages that start with one std_msgs/Header.

    ``None`` unless every row is little-endian CDR with the same frame id length.
    """
    if data.shape[1] < 16:
        return None
    first = np.asarray(data[:, 0:16])  # encapsulation, stamp, frame id length: one gather
    if not (np.all(first[:, 0] == 0) and np.all(first[:, 1] == 1)):
        return None
    head = np.ascontiguousarray(first[:, 4:16]).view("<u4")
    if not np.all(head[:, 2] == head[0, 2]) or head[0, 2] == 0:
        return None
    end = 16 + int(head[0, 2])
    if end > data.shape[1]:
        return None
    stamp = head[:, 0].view("<i4").astype(np.int64) * 1_000_000_000 + head[:, 1].astype(np.int64)
    return stamp, end


def _length_fixed_layout(data: np.ndarray | FixedRows) -> tuple[np.ndarray, np.ndarray] | None:
    """Stamps and position[0] of same-size sensor_msgs/JointState messages with the same names, or ``None``."""
    found = _header_layout(data)
    if found is None:
        return None
    stamp, at = found
    row = data[0].tobytes()
    try:
        at += -(at - 4) % 4
        (count,) = struct.unpack_from("<I", row, at)
        at += 4
        for _ in range(count):  # the names
            at += -(at - 4) % 4
            (size,) = struct.unpack_from("<I", row, at)
            at += 4 + size
        at += -(at - 4) % 4
        (n_pos,) = struct.unpack_from("<I", row, at)
    except struct.error:
        return None
    pos_at = at + 4 + (-(at + 4 - 4) % 8)
    if n_pos == 0 or pos_at + 8 > data.shape[1]:
        return None
    if not np.all(data[:, 16 : at + 4] == data[0, 16 : at + 4]):  # frame id, names and position count alike
        return None
    return stamp, np.ascontiguousarray(data[:, pos_at : pos_at + 8]).view("<f8")[:, 0].copy()


def _length_stream(ta: TopicArrays | None) -> _Stream:
    if ta is None:
        e = np.zeros(0, dtype=np.int64)
        return _Stream(e, e, np.zeros(0, dtype=np.int8), np.zeros(0))
    if isinstance(ta.data, (np.ndarray, FixedRows)) and len(ta) and ta.msgtype == "sensor_msgs/msg/JointState":
        fast = _length_fixed_layout(ta.data)
        if fast is not None:
            stamp, value = fast
            status = np.where(np.isfinite(value) & (value >= 0), _OK, _BAD).astype(np.int8)
            return _Stream(ta.rank, stamp, status, value)
    n = len(ta)
    stamp = np.zeros(n, dtype=np.int64)
    value = np.zeros(n)
    status = np.full(n, _OK, dtype=np.int8)
    for i in range(n):
        msg = _decode(ta.raw(i), ta.msgtype)  # a few per second in a recording: decoded one by one
        pos = list(msg.position)
        if not pos:
            status[i] = _UNDECODABLE  # counted, does not drive the ticks (as in the streaming replay)
            continue
        stamp[i] = msgs.stamp_from_msg(msg)
        value[i] = float(pos[0])
        if not (np.isfinite(value[i]) and value[i] >= 0):
            status[i] = _BAD
    return _Stream(ta.rank, stamp, status, value)


def _truth(ta: TopicArrays | None) -> tuple[np.ndarray, np.ndarray]:
    if ta is None:
        return np.zeros(0, dtype=np.int64), np.zeros((0, 3))
    if isinstance(ta.data, (np.ndarray, FixedRows)) and len(ta) and ta.msgtype == "geometry_msgs/msg/PoseStamped":
        found_layout = _header_layout(ta.data)
        if found_layout is not None:
            stamp, at = found_layout
            at += -(at - 4) % 8
            if at + 56 == ta.data.shape[1]:
                xyz = np.ascontiguousarray(ta.data[:, at : at + 24]).view("<f8")
                # as the per-message path: sorted stamps, the last message of a repeated stamp
                u, first_rev = np.unique(stamp[::-1], return_index=True)
                return u.astype(np.int64), xyz[len(stamp) - 1 - first_rev].reshape(-1, 3)
    found: dict[int, np.ndarray] = {}
    for i in range(len(ta)):
        msg = _decode(ta.raw(i), ta.msgtype)
        p = msg.pose.position
        found[msgs.stamp_from_msg(msg)] = np.array([p.x, p.y, p.z])
    stamps = np.array(sorted(found), dtype=np.int64)
    return stamps, np.array([found[int(s)] for s in stamps]).reshape(-1, 3)


def decode_inputs(
    arrays: dict[str, TopicArrays], imu_topics: list[str], length_topic: str | None, truth_topic: str | None
) -> BulkInputs:
    """Decode the topics read by :func:`~shape_sensing.io.bag_bulk.read_topics` (absent topics: empty streams)."""
    empty = TopicArrays("sensor_msgs/msg/Imu", np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), [])
    imus = [_imu_stream(arrays.get(t, empty)) for t in imu_topics]
    length = _length_stream(arrays.get(length_topic) if length_topic else None)
    ts, tips = _truth(arrays.get(truth_topic) if truth_topic else None)
    return BulkInputs(imus, length, ts, tips)


def tick_states(inputs: BulkInputs, period_ns: int, stale_ns: int = 0) -> TickStates:
    """The tracker's state at every tick it would fire on these inputs (see the module docstring)."""
    del stale_ns  # freshness is judged by the tracker at each tick from last_ns
    streams = [*inputs.imus, inputs.length]
    rank = np.concatenate([s.rank for s in streams])
    stamp = np.concatenate([s.stamp for s in streams])
    status = np.concatenate([s.status for s in streams])
    order = np.argsort(rank, kind="stable")
    rank, stamp, status = rank[order], stamp[order], status[order]
    drives = status != _UNDECODABLE
    d_rank, d_stamp = rank[drives], stamp[drives]
    n = len(inputs.imus)
    if not len(d_stamp):
        return _no_ticks(n)
    running = np.maximum.accumulate(d_stamp)
    t0 = (int(d_stamp[0]) // period_ns + 1) * period_ns
    last = int(running[-1])
    k_fired = max(0, -(-(last - t0) // period_ns))  # ticks t0 + k P < last
    ticks = t0 + period_ns * np.arange(k_fired + 1, dtype=np.int64)  # the last one is the flush
    j = np.searchsorted(running, ticks[:-1], side="right")
    end = np.iinfo(np.int64).max
    fire_rank = np.concatenate([d_rank[j], [end]]).astype(np.int64)

    # accepted readings per IMU: a good reading no older than the newest good one before it
    quats = np.tile(np.array([0.0, 0.0, 0.0, 1.0]), (len(ticks), n, 1))
    last_ns = np.full((len(ticks), n), -1, dtype=np.int64)
    acc_ranks, acc_stamps, ooo_ranks = [], [], []
    for i, s in enumerate(inputs.imus):
        good = s.status == _OK
        g_rank, g_stamp, g_q = s.rank[good], s.stamp[good], s.values[good]
        if len(g_stamp):
            prev_max = np.concatenate([[-1], np.maximum.accumulate(g_stamp)[:-1]])
            ok = g_stamp >= prev_max
        else:
            ok = np.zeros(0, dtype=bool)
        ooo_ranks.append(g_rank[~ok])
        a_rank, a_stamp, a_q = g_rank[ok], g_stamp[ok], g_q[ok]
        acc_ranks.append(a_rank)
        acc_stamps.append(a_stamp)
        k = np.searchsorted(a_rank, fire_rank, side="left") - 1
        has = k >= 0
        quats[has, i] = a_q[k[has]]
        last_ns[has, i] = a_stamp[k[has]]
    ls = inputs.length
    l_ok = ls.status == _OK
    l_rank, l_stamp, l_val = ls.rank[l_ok], ls.stamp[l_ok], ls.values[l_ok]
    k = np.searchsorted(l_rank, fire_rank, side="left") - 1
    length = np.where(k >= 0, l_val[np.maximum(k, 0)] if len(l_val) else np.nan, np.nan)
    # newest accepted stamp (IMU or length) before each tick
    all_rank = np.concatenate([*acc_ranks, l_rank])
    all_stamp = np.concatenate([*acc_stamps, l_stamp])
    o = np.argsort(all_rank, kind="stable")
    all_rank, run_stamp = all_rank[o], np.maximum.accumulate(all_stamp[o]) if len(o) else all_stamp
    k = np.searchsorted(all_rank, fire_rank, side="left") - 1
    latest = np.where(k >= 0, run_stamp[np.maximum(k, 0)] if len(run_stamp) else -1, -1).astype(np.int64)
    first = np.where(k >= 0, all_stamp[o][0] if len(o) else -1, -1).astype(np.int64)
    bad_rank = np.sort(rank[status != _OK])
    ooo = np.sort(np.concatenate(ooo_ranks)) if ooo_ranks else np.zeros(0, dtype=np.int64)
    return TickStates(
        ticks=ticks,
        fire_rank=fire_rank,
        quats=quats,
        last_ns=last_ns,
        latest_ns=latest,
        length=length,
        bad=np.searchsorted(bad_rank, fire_rank, side="left").astype(np.int64),
        out_of_order=np.searchsorted(ooo, fire_rank, side="left").astype(np.int64),
        first_ns=first,
    )


def _no_ticks(n: int) -> TickStates:
    e = np.zeros(0, dtype=np.int64)
    return TickStates(e, e, np.zeros((0, n, 4)), np.zeros((0, n), dtype=np.int64), e, np.zeros(0), e, e, e)


def estimates(
    tracker: VineImuTracker, states: TickStates, progress: Callable[[float], None] | None = None
) -> Iterator[tuple[int, ShapeEstimate]]:
    """``(tick index, estimate)`` for every tick that gives one, as the tracker's own estimate step would.

    At each tick the tracker's state is set and its estimate step is run up to the estimator's update
    (:meth:`~shape_sensing.pipelines.vine_imu.VineImuTracker._prepare`: capture, freshness, diagnostics); the
    updates of up to :data:`_BATCH` ticks are then made in one vectorised pass
    (:meth:`~shape_sensing.estimators.hinge_arc.HingeArcEstimator.update_many`, the same bits as one
    update per tick). Pending updates are made before any tick at which the straight reference may be
    captured, so each uses the reference the tracker had at its tick.

    The flush tick (the last) counts only when the recording gave the tracker any reading, as in
    :meth:`~shape_sensing.pipelines.vine_imu.VineImuTracker.flush`.
    """
    total = len(states.ticks)
    pending: list[tuple[int, np.ndarray, list[Any]]] = []

    def run() -> list[tuple[int, ShapeEstimate]]:
        if not pending:
            return []
        rows = np.array([t for t, _, _ in pending], dtype=np.intp)
        made = tracker.estimator.update_many(
            states.quats[rows], np.stack([v for _, v, _ in pending]), states.latest_ns[rows], states.length[rows]
        )
        out = []
        for (t, _, extra), est in zip(pending, made, strict=True):
            est.diagnostics.extend(extra)
            out.append((t, est))
        pending.clear()
        return out

    # the tracker's freshness rule (_fresh) at every tick at once
    fresh = (states.last_ns >= 0) & (states.ticks[:, None] - states.last_ns <= tracker.stale_ns)
    ticks = states.ticks.tolist()
    latest = states.latest_ns.tolist()
    lengths = states.length.tolist()
    bad = states.bad.tolist()
    ooo = states.out_of_order.tolist()
    first = states.first_ns.tolist()
    for t in range(total):
        if progress is not None and t % 512 == 0:
            progress(t / total)
        if t == total - 1 and latest[t] < 0:
            break
        tracker.latest_ns = latest[t]
        tracker.length = None if math.isnan(lengths[t]) else lengths[t]
        tracker.stats.bad_samples = bad[t]
        tracker.stats.out_of_order = ooo[t]
        tracker.first_ns = first[t]
        if tracker._offset_requested or tracker.capture_at_ns is not None:
            yield from run()  # the reference may change at this tick: the capture reads the tracker's arrays
            tracker.quats[:] = states.quats[t]
            tracker.last_ns[:] = states.last_ns[t]
        job = tracker._prepare(ticks[t], fresh[t])
        if job is not None:
            pending.append((t, job[0], job[1]))
            if len(pending) >= _BATCH:
                yield from run()
    yield from run()
    if progress is not None:
        progress(1.0)


_BATCH = 256  # ticks whose estimator updates are made in one pass


def replay_bulk(
    bag: Path,
    writer: BagWriter,
    tracker: VineImuTracker,
    namespace: str,
    *,
    progress: Callable[[str, float], None] | None = None,
    timings: dict[str, float] | None = None,
) -> dict[str, Any] | None:
    """The streaming replay's output and metrics, computed in bulk (see the module docstring).

    ``timings``, when given, receives the CPU seconds of each stage (read, decode and ticks, estimate,
    build and write the estimates' messages, copy the inputs).
    """
    clock = time.process_time
    t0 = clock()
    imu_topics = [resolve_topic(t, namespace) for t in tracker.params["imu_topics"]]
    length_topic = tracker.params["length_topic"]
    length_name = resolve_topic(length_topic, namespace) if length_topic else None
    truth_tip = resolve_topic("truth/tip", namespace)
    passthrough = [truth_tip, resolve_topic("truth/path", namespace), resolve_topic("truth/sensors", namespace)]
    passthrough.append("/tf_static")
    wanted = [*imu_topics, *([length_name] if length_name else []), *passthrough]

    def step(label: str) -> Callable[[float], None] | None:
        return None if progress is None else (lambda frac: progress(label, frac))

    arrays = read_topics(bag, wanted, step("read"))
    t1 = clock()
    inputs = decode_inputs(arrays, imu_topics, length_name, truth_tip)
    states = tick_states(inputs, tracker.ticker.period_ns)
    t2 = clock()
    # Copies in read order, each tick's estimate after the message it fires on (as the streaming replay writes).
    qos = {t: "sensor" for t in imu_topics}
    if length_name:
        qos[length_name] = "sensor"
    qos["/tf_static"] = "static"
    # Copies' connections first, in topic order, then the estimates' as they first appear (as the one-pass
    # replay made them); then a window of estimates at a time, with the input copies up to the message the
    # window's last tick fires on, written in key order (RecordStream): no more than one window is held.
    copies = [
        (writer.connection_id(topic, ta.msgtype, qos=qos.get(topic, "default")), ta) for topic, ta in arrays.items()
    ]
    # the messages of the streaming replay's ShapeWriter (its marker and diagnostics throttles)
    shape_messages = ShapeWriter(writer, namespace, tracker.params["marker_rate"]).messages
    direct = None
    if cdr.supported(writer.factory.typestore):  # the bytes straight from the estimates' arrays
        # views of each block's bytes: add_many copies them into the batch before the next block is made
        direct = cdr.ShapeCdr(tracker.params["marker_rate"], shape_messages.diagnostics, views=True)
    serialize = writer.factory.typestore.serialize_cdr
    conns: dict[str, int] = {}
    stream = RecordStream(writer)
    est_iter = estimates(tracker, states, step("estimate"))
    seq = 0
    placed = -1  # input copies of rank <= placed are written
    tips: list[tuple[int, np.ndarray, float]] = []  # stamp, tip position, length of every estimate (metrics)
    spent = {"estimate": 0.0, "build_and_serialise_estimates": 0.0, "gather_inputs": 0.0, "write_records": 0.0}
    while True:
        c0 = clock()
        window = list(itertools.islice(est_iter, _WINDOW))
        c1 = clock()
        upto = int(states.fire_rank[window[-1][0]]) if window else None  # None: the rest of the inputs
        batch = RecordBatch()
        for cid, ta in copies:
            lo = int(np.searchsorted(ta.rank, placed, side="right"))
            hi = len(ta) if upto is None else int(np.searchsorted(ta.rank, upto, side="right"))
            if hi <= lo:
                continue
            key = np.zeros((hi - lo, 3), dtype=np.int64)
            key[:, 0] = ta.rank[lo:hi]
            if ta.source is not None and ta.record_at is not None:
                batch.copy(ta.source, ta.record_at[lo:hi], cid, ta.log_time[lo:hi], key)
            else:
                for i in range(lo, hi):
                    batch.add(cid, int(ta.log_time[i]), ta.raw(i), (int(ta.rank[i]), 0, 0))
        c2 = clock()
        shapes = [est for _, est in window]
        messages: Iterable[list[tuple[str, str, bytes | memoryview]]]
        if direct is not None:
            messages = direct.build_many(shapes)
        else:  # other definitions: build the messages and serialise them
            messages = (
                [(t, m.__msgtype__, bytes(serialize(m, m.__msgtype__))) for t, m in shape_messages.build(est)]
                for est in shapes
            )

        def records(first: int) -> Iterator[tuple[int, int, bytes | memoryview, tuple[int, int, int]]]:
            seq = first
            for (t, est), built in zip(window, messages, strict=True):  # noqa: B023 (consumed at once, below)
                fire = int(states.fire_rank[t])
                for topic, msgtype, raw in built:
                    cid = conns.get(topic)
                    if cid is None:
                        cid = conns[topic] = writer.connection_id(resolve_topic(topic, namespace), msgtype)
                    yield cid, est.stamp_ns, raw, (fire, 1, seq)
                    seq += 1

        before = len(batch)
        batch.add_many(records(seq))
        seq += len(batch) - before
        tips += [(est.stamp_ns, np.array(est.tip_pose[:3, 3]), est.length) for est in shapes]
        c3 = clock()
        stream.write(batch)
        del batch, window, shapes
        c4 = clock()
        spent["estimate"] += c1 - c0
        spent["gather_inputs"] += c2 - c1
        spent["build_and_serialise_estimates"] += c3 - c2
        spent["write_records"] += c4 - c3
        if upto is None:
            break
        placed = upto
    c5 = clock()
    stream.close()
    spent["write_records"] += clock() - c5
    if timings is not None:
        timings |= {"read": t1 - t0, "decode_and_ticks": t2 - t1, **spent}
    tracker.stats.bad_samples = int(states.bad[-1]) if len(states.bad) else 0
    tracker.stats.out_of_order = int(states.out_of_order[-1]) if len(states.out_of_order) else 0
    return tip_metrics(tips, inputs, length_name is not None)


_WINDOW = 1024  # estimates whose messages (and the input copies before them) are made and written at once


def _nearest_first(sorted_stamps: np.ndarray, stamps: np.ndarray) -> np.ndarray:
    """``argmin(|sorted_stamps - s|)`` for each ``s`` (the first index on a tie), by sorted search."""
    j = np.searchsorted(sorted_stamps, stamps)
    left = np.maximum(j - 1, 0)
    right = np.minimum(j, len(sorted_stamps) - 1)
    take_left = np.abs(stamps - sorted_stamps[left]) <= np.abs(sorted_stamps[right] - stamps)
    return np.where(take_left, left, right)


def tip_metrics(
    ests: list[tuple[int, np.ndarray, float]], inputs: BulkInputs, use_length: bool
) -> dict[str, Any] | None:
    """The streaming replay's tip metrics: nearest truth within 20 ms, length from the nearest length message.

    ``ests``: every estimate's stamp, tip position and length.
    """
    if not len(inputs.truth_stamps):
        return None
    errors = TipErrors()
    ls = inputs.length
    ok = ls.status != _UNDECODABLE
    lengths = {int(s): float(v) for s, v in zip(ls.stamp[ok], ls.values[ok], strict=True)}
    length_stamps = np.array(sorted(lengths), dtype=np.int64) if (use_length and lengths) else None
    truth_stamps = inputs.truth_stamps
    est_stamps = np.array([stamp for stamp, _, _ in ests], dtype=np.int64)
    j_truth = _nearest_first(truth_stamps, est_stamps)
    j_len = _nearest_first(length_stamps, est_stamps) if length_stamps is not None else None
    for k, (stamp, tip, est_length) in enumerate(ests):
        j = int(j_truth[k])
        if abs(int(truth_stamps[j]) - stamp) > 20_000_000:
            continue
        length = (
            lengths[int(length_stamps[j_len[k]])] if length_stamps is not None and j_len is not None else est_length
        )
        errors.add(stamp, tip, inputs.truth_tips[j], length)
    return errors.metrics()


def replay(
    bag: Path, writer: BagWriter, config: Path | None, args: Any, progress: Callable[[str, float], None] | None = None
) -> dict[str, Any] | None:
    """``shape-sensing replay`` of a vine-IMU bag in bulk: same arguments, output and metrics as
    :func:`shape_sensing.pipelines.vine_imu.replay` (the streaming path)."""
    from shape_sensing.pipelines.vine_imu import (
        DEFAULT_NAMESPACE,
        _params_from,
        apply_recorded_reference,
        check_inputs,
        check_made_estimates,
    )
    from shape_sensing.runtime import retain_heap

    retain_heap()  # freed blocks of the passes (hundreds of MB in all) reused, not page-faulted in again
    topics: dict[str, str] | None = getattr(args, "bag_topics", None)
    namespace = getattr(args, "namespace", DEFAULT_NAMESPACE)
    tracker = VineImuTracker(_params_from(config, (topics or {}).keys(), namespace))
    apply_recorded_reference(tracker, args)
    check_inputs(tracker, topics, namespace)
    metrics = replay_bulk(Path(bag), writer, tracker, namespace, progress=progress)
    check_made_estimates(tracker)
    return metrics
