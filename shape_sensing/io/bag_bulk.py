"""Whole topics of a bag at once: raw messages as arrays, in the order :func:`~shape_sensing.io.bag.read_bag` gives.

Bulk replay and re-analysis read hundreds of thousands of small messages;
one Python object per message is most of their cost. For a bare ``.mcap``
file with uncompressed chunks and message indexes (what this package and
rosbag2 write by default), the message indexes give every message's place in
its chunk, so the records of one topic in one chunk are gathered with one
numpy indexing operation; a topic whose messages all have the same size (a
sensor_msgs/Imu with a fixed frame id does) comes back as one ``(N, size)``
byte array. Any other bag (rosbag2 directory, sqlite3, compressed chunks, no
index) is read with :func:`~shape_sensing.io.bag.read_bag` and gives the same
result, only slower.

Order: ``rank`` numbers the returned messages in the order ``read_bag``
yields them (log time, then position in the file), so a bulk consumer can
replay the exact interleaving a streaming consumer sees.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from shape_sensing.io.bag import _resolve, mcap_summary, read_bag
from shape_sensing.io.errors import BagError

__all__ = ["FixedRows", "RecordBatch", "RecordStream", "TopicArrays", "read_topics", "write_records"]

_MSG_HEADER = 31  # opcode 1, record length 8, channel 2, sequence 4, log time 8, publish time 8
_INDEX_ENTRY = np.dtype([("log_time", "<u8"), ("offset", "<u8")])


class FixedRows:
    """``(N, size)`` bytes of same-size messages left where they are in a buffer; columns gathered on demand.

    Indexing as a 2-D ``uint8`` array: ``rows[i]`` is message ``i`` (a view), ``rows[:, a:b]`` and ``rows[:, c]``
    gather those bytes of every message (a decoder needs a few dozen of an Imu's 300), anything else works on
    the whole array (``np.asarray(rows)``). Saves copying every message of a topic out of the bag's memory map.
    """

    ndim = 2
    dtype = np.dtype(np.uint8)

    def __init__(self, buf: np.ndarray, starts: np.ndarray, size: int) -> None:
        self.buf = buf
        self.starts = np.asarray(starts, dtype=np.int64)
        self.size = int(size)
        self.shape = (len(self.starts), self.size)

    def __len__(self) -> int:
        return len(self.starts)

    def _row(self, i: int) -> np.ndarray:
        start = int(self.starts[i])
        return self.buf[start : start + self.size]

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, (int, np.integer)):
            return self._row(int(key))
        if isinstance(key, tuple) and len(key) == 2:
            rows, cols = key
            if isinstance(rows, (int, np.integer)):
                return self._row(int(rows))[cols]
            if isinstance(rows, slice) and rows == slice(None):
                if isinstance(cols, (int, np.integer)):
                    c = int(cols)
                    if not -self.size <= c < self.size:
                        raise IndexError(f"column {c} is out of bounds for rows of {self.size} bytes")
                    return self.buf[self.starts + c % self.size]
                if isinstance(cols, slice) and cols.step in (None, 1):
                    a, b, _ = cols.indices(self.size)
                    if b <= a:
                        return np.zeros((len(self), 0), dtype=np.uint8)
                    return np.lib.stride_tricks.sliding_window_view(self.buf, b - a)[self.starts + a]
        return np.asarray(self)[key]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = np.lib.stride_tricks.sliding_window_view(self.buf, self.size)[self.starts] if len(self) else (
            np.zeros((0, self.size), dtype=np.uint8)
        )  # fmt: skip
        return out if dtype is None else out.astype(dtype)


@dataclass
class TopicArrays:
    """The messages of one topic.

    Attributes:
        msgtype: ROS 2 type name.
        log_time: ``(N,)`` int64 log times (ns).
        rank: ``(N,)`` int64 place of each message among all messages returned by :func:`read_topics`.
        data: ``(N, size)`` uint8 CDR bytes when every message has the same size (an array, or
            :class:`FixedRows` left in the file's memory map), else a list of ``bytes``.
        source: the file's bytes (a read-only memory map) when read through the index, else ``None``.
        record_at: ``(N,)`` int64 offset of each message's whole MCAP record (opcode 0x05) in ``source``,
            so :func:`write_records` can copy the records without touching the messages; ``None`` with ``source``.
    """

    msgtype: str
    log_time: np.ndarray
    rank: np.ndarray
    data: np.ndarray | FixedRows | list[bytes]
    source: np.ndarray | None = None
    record_at: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.log_time)

    def raw(self, i: int) -> bytes:
        """The CDR bytes of message ``i``."""
        return bytes(self.data[i])


def read_topics(
    path: str | os.PathLike[str], topics: Iterable[str], progress: Callable[[float], None] | None = None
) -> dict[str, TopicArrays]:
    """Read whole topics (those present of ``topics``) of a bag; see the module docstring.

    ``progress`` gets the fraction read so far, now and then.

    Raises:
        BagError: missing, malformed or truncated bag.
    """
    wanted = set(topics)
    kind, real = _resolve(Path(path))
    if kind == "mcap-file":
        fast = _read_indexed_mcap(real, wanted, progress)
        if fast is not None:
            return fast
    return _read_streaming(path, wanted)


def _read_streaming(path: str | os.PathLike[str], wanted: set[str]) -> dict[str, TopicArrays]:
    times: dict[str, list[int]] = {}
    ranks: dict[str, list[int]] = {}
    raws: dict[str, list[bytes]] = {}
    types: dict[str, str] = {}
    for k, bm in enumerate(read_bag(path, wanted)):
        if bm.topic not in types:
            types[bm.topic] = bm.msgtype
            times[bm.topic], ranks[bm.topic], raws[bm.topic] = [], [], []
        times[bm.topic].append(bm.stamp_ns)
        ranks[bm.topic].append(k)
        raws[bm.topic].append(bytes(bm.raw))
    return {t: _arrays(types[t], np.array(times[t], dtype=np.int64), np.array(ranks[t]), raws[t]) for t in types}


def _arrays(msgtype: str, log_time: np.ndarray, rank: np.ndarray, raws: list[bytes]) -> TopicArrays:
    sizes = {len(r) for r in raws}
    if len(sizes) == 1 and raws:
        data: np.ndarray | list[bytes] = np.frombuffer(b"".join(raws), np.uint8).reshape(len(raws), -1)
    else:
        data = raws
    return TopicArrays(msgtype, log_time, rank.astype(np.int64), data)


def _map_file(path: Path) -> np.ndarray:
    """The file's bytes as a plain read-only array over a memory map (not an ``np.memmap``, whose indexing goes
    through a Python ``__getitem__`` and wraps every result)."""
    import mmap

    with path.open("rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return np.zeros(0, dtype=np.uint8)
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return np.frombuffer(mm, dtype=np.uint8)


def _read_indexed_mcap(
    path: Path, wanted: set[str], progress: Callable[[float], None] | None
) -> dict[str, TopicArrays] | None:
    """The fast path, or ``None`` when the file does not allow it (compressed chunks, no index)."""
    from mcap.exceptions import McapError

    try:
        summary = mcap_summary(path)
    except (McapError, EOFError, ValueError, OSError, struct.error) as exc:
        raise BagError(f"bag {path} is malformed or truncated: {type(exc).__name__}: {exc}") from exc
    if summary is None or not summary.chunk_indexes:
        return None
    if any(ci.compression or not ci.message_index_offsets for ci in summary.chunk_indexes):
        return None
    channels = {cid: ch for cid, ch in summary.channels.items() if ch.topic in wanted}
    for ch in channels.values():
        if ch.message_encoding != "cdr" or ch.schema_id not in summary.schemas:
            return None  # let the streaming reader report it
    buf = _map_file(path)
    size = len(buf)
    if size < 64:
        return None
    words = np.lib.stride_tricks.sliding_window_view(buf, 8)  # words[i]: the 8 bytes at i, without a copy
    chunks = sorted(summary.chunk_indexes, key=lambda ci: ci.chunk_start_offset)
    # Every (chunk, wanted channel) message index, in chunk order; then all their entries in one numpy pass.
    pair_chunk: list[int] = []
    pair_index: list[int] = []
    pair_cid: list[int] = []
    for n_done, ci in enumerate(chunks):
        if progress is not None and n_done % 256 == 0:
            progress(0.5 * n_done / len(chunks))
        for cid, where in ci.message_index_offsets.items():
            if cid in channels:
                pair_chunk.append(ci.chunk_start_offset)
                pair_index.append(where)
                pair_cid.append(cid)
    try:
        starts = np.array(pair_chunk, dtype=np.int64)
        index_at = np.array(pair_index, dtype=np.int64)
        # chunk record: opcode, length, start time, end time, uncompressed size, crc, compression, records
        comp_len = words[starts + 37][:, :4].copy().view("<u4")[:, 0].astype(np.int64)
        records = starts + 41 + comp_len + 8
        # message index record: opcode, length, channel id, entries' byte count, entries (log time, offset)
        n_entries = words[index_at + 11][:, :4].copy().view("<u4")[:, 0].astype(np.int64) // 16
        total = int(n_entries.sum())
        first_entry = np.cumsum(n_entries) - n_entries
        pair_of = np.repeat(np.arange(len(n_entries)), n_entries)
        entry_at = index_at[pair_of] + 15 + 16 * (np.arange(total) - first_entry[pair_of])
        log_time = words[entry_at].view("<u8")[:, 0].astype(np.int64)
        at = records[pair_of] + words[entry_at + 8].view("<u8")[:, 0].astype(np.int64)
        if total and (at.max() + _MSG_HEADER > size or at.min() < 0 or np.any(buf[at] != 0x05)):
            raise BagError(f"bag {path}: a message index points outside its chunk")
        rec_len = words[at + 1].view("<u8")[:, 0].astype(np.int64)
    except (IndexError, ValueError) as exc:
        raise BagError(f"bag {path} is malformed or truncated: {type(exc).__name__}: {exc}") from exc
    if progress is not None:
        progress(1.0)
    # Rank: the order of read_bag (mcap's log-time order: log time, then chunk offset, then place in the chunk).
    entry_cid = np.array(pair_cid, dtype=np.int64)[pair_of]
    entry_chunk = starts[pair_of]
    by_cid = np.argsort(entry_cid, kind="stable")  # each channel's entries in chunk order, then index order
    cids, cid_first, cid_count = np.unique(entry_cid[by_cid], return_index=True, return_counts=True)
    span = {int(c): (int(f), int(f + n)) for c, f, n in zip(cids, cid_first, cid_count, strict=True)}
    per_channel = {}
    for cid in channels:
        if cid in span:
            sel = by_cid[span[cid][0] : span[cid][1]]
            per_channel[cid] = (log_time[sel], entry_chunk[sel], at[sel], rec_len[sel])
    if not per_channel:
        return {}
    all_t = np.concatenate([v[0] for v in per_channel.values()])
    all_chunk = np.concatenate([v[1] for v in per_channel.values()])
    all_at = np.concatenate([v[2] for v in per_channel.values()])
    order = np.lexsort((all_at, all_chunk, all_t))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    out: dict[str, TopicArrays] = {}
    first = 0
    for cid, (t, _chunk, at, rec_len) in per_channel.items():
        ch = channels[cid]
        r = rank[first : first + len(t)]
        first += len(t)
        # keep each topic in read order
        o = np.argsort(r, kind="stable")
        t, at, rec_len, r = t[o], at[o], rec_len[o], r[o]
        data_len = rec_len - (_MSG_HEADER - 9)
        if len(data_len) and np.all(data_len == data_len[0]) and data_len[0] > 0:
            data: np.ndarray | FixedRows | list[bytes] = FixedRows(buf, at + _MSG_HEADER, int(data_len[0]))
        else:
            data = [bytes(buf[a + _MSG_HEADER : a + _MSG_HEADER + n]) for a, n in zip(at, data_len, strict=True)]
        out[ch.topic] = TopicArrays(summary.schemas[ch.schema_id].name, t, r, data, buf, at)
    return out


class RecordBatch:
    """MCAP message records to append to a bag in a given order, for :func:`write_records`.

    A record is what the MCAP format stores per message: opcode ``0x05``, record length, channel id,
    sequence, log time, publish time, then the serialised message. Records are taken from existing
    buffers (the input bag's memory map, via :attr:`TopicArrays.record_at`: :meth:`copy`) or made
    here (:meth:`add`). Every record has a sort key of three integers; they are written in key order.
    :func:`write_records` sets every record's channel id, sequence (0) and publish time (= log time),
    as :meth:`~shape_sensing.io.bag.BagWriter.write` would.
    """

    def __init__(self) -> None:
        self.sources: list[np.ndarray] = []
        self._parts: list[tuple[np.ndarray, ...]] = []  # (source, pos, size, conn, log_time), keys (N, 3)
        self._keys: list[np.ndarray] = []
        self._new = bytearray()
        self._added: list[tuple[int, int, int, int, int, int, int]] = []

    def __len__(self) -> int:
        return sum(len(p[1]) for p in self._parts) + len(self._added)

    def copy(self, buf: np.ndarray, record_at: np.ndarray, conn: int, log_time: np.ndarray, key: np.ndarray) -> None:
        """Records already in ``buf`` at ``record_at`` (lengths read from them); ``key``: ``(N, 3)`` int64."""
        k = next((i for i, b in enumerate(self.sources) if b is buf), None)
        if k is None:
            self.sources.append(buf)
            k = len(self.sources) - 1
        at = np.asarray(record_at, dtype=np.int64)
        size = np.zeros(0, dtype=np.int64)
        if len(at):
            if at.min() < 0 or at.max() + 31 > len(buf) or not np.all(buf[at] == 0x05):
                raise BagError("a message record to copy is not where its index says")
            size = np.lib.stride_tricks.sliding_window_view(buf, 8)[at + 1].view("<u8")[:, 0].astype(np.int64) + 9
        n = len(at)
        self._parts.append((np.full(n, k), at, size, np.full(n, conn), np.asarray(log_time, dtype=np.int64)))
        self._keys.append(np.asarray(key, dtype=np.int64).reshape(n, 3))

    def add(self, conn: int, log_time: int, data: bytes | bytearray | memoryview, key: tuple[int, int, int]) -> None:
        """A new record of ``data`` (the serialised message) on connection ``conn`` at ``log_time``."""
        pos = len(self._new)
        self._new += _RECORD_HEAD.pack(0x05, 22 + len(data), conn, 0, log_time, log_time)
        self._new += data
        self._added.append((pos, 31 + len(data), conn, log_time, *key))

    def add_many(self, records: Iterable[tuple[int, int, bytes | memoryview, tuple[int, int, int]]]) -> None:
        """:meth:`add` of every ``(conn, log_time, data, key)`` of ``records``, in order (same bytes), the data
        appended as it comes (no block of them held at once)."""
        new = self._new
        head = _RECORD_HEAD.pack
        added = self._added
        for conn, log_time, data, key in records:
            added.append((len(new), 31 + len(data), conn, log_time, *key))
            new += head(0x05, 22 + len(data), conn, 0, log_time, log_time)
            new += data

    def _close_new(self) -> None:
        if not self._added:
            return
        self.sources.append(np.frombuffer(self._new, np.uint8))  # the buffer itself (replaced below), no copy
        cols = np.array(self._added, dtype=np.int64)
        n = len(cols)
        self._parts.append((np.full(n, len(self.sources) - 1), cols[:, 0], cols[:, 1], cols[:, 2], cols[:, 3]))
        self._keys.append(cols[:, 4:7])
        self._added, self._new = [], bytearray()

    def ordered(self) -> tuple[np.ndarray, ...]:
        """``(source, pos, size, conn, log_time)`` of every record, in key order (stable)."""
        self._close_new()
        if not self._parts:
            e = np.zeros(0, dtype=np.int64)
            return e, e, e, e, e
        key = np.concatenate(self._keys)
        cols = [np.concatenate([p[i] for p in self._parts]).astype(np.int64) for i in range(5)]
        order = np.lexsort((key[:, 2], key[:, 1], key[:, 0]))
        return tuple(c[order] for c in cols)


_RECORD_HEAD = struct.Struct("<BQHIQQ")
_CHUNK_TARGET = 1 << 20  # as rosbags' writer: a chunk closes past 1 MiB
_INDEX_DTYPE = np.dtype([("log_time", "<u8"), ("offset", "<u8")])


def _fast_storage(writer: Any) -> Any:
    """rosbags' MCAP storage writer behind a BagWriter, or ``None`` if it is not the layout this module knows."""
    storage = getattr(getattr(writer, "_writer", None), "storage", None)
    needed = ("bio", "chunk", "chunks", "channel_stats", "message_start_time", "message_end_time", "close_chunk")
    if storage is None or type(storage).__name__ != "McapWriter" or not all(hasattr(storage, a) for a in needed):
        return None
    if getattr(storage, "compression", None) != "":
        return None
    chunk = storage.chunk
    if not all(hasattr(chunk, a) for a in ("bio", "msgs", "message_start_time", "message_end_time")):
        return None
    return storage


def write_records(writer: Any, batch: RecordBatch) -> int:
    """Append the records of ``batch`` to the bag of ``writer`` (a :class:`~shape_sensing.io.bag.BagWriter`).

    With rosbags' MCAP storage the records are copied into chunks of about 1 MiB with their message
    indexes, chunk indexes and statistics, as rosbags' writer makes them, without a Python step per
    message; with any other storage each message goes through the writer. Returns the number written.
    """
    stream = RecordStream(writer)
    stream.write(batch)
    return stream.close()


class RecordStream:
    """Appends the records of successive :class:`RecordBatch` es to a bag, each batch's after the earlier ones'.

    Chunks are made as :func:`write_records` makes them; the records of a batch's last, unfilled chunk wait
    for the next batch (or :meth:`close`), so a long recording is written a window at a time and no more
    than one window's new records are held at once.
    """

    def __init__(self, writer: Any) -> None:
        self.writer = writer
        self.count = 0
        # the records waiting to fill a chunk: their sources, then (src, pos, size, conn, log_time)
        self._tail_sources: list[np.ndarray] = []
        self._tail: tuple[np.ndarray, ...] | None = None

    def write(self, batch: RecordBatch) -> None:
        """Append the records of ``batch`` (in its key order) after everything written before."""
        src, pos, size, conn, log_time = batch.ordered()
        sources = batch.sources
        if self._tail is not None:
            t_src, t_pos, t_size, t_conn, t_lt = self._tail
            sources = [*self._tail_sources, *sources]
            src = np.concatenate([t_src, src + len(self._tail_sources)])
            pos, size = np.concatenate([t_pos, pos]), np.concatenate([t_size, size])
            conn, log_time = np.concatenate([t_conn, conn]), np.concatenate([t_lt, log_time])
            self._tail, self._tail_sources = None, []
        if not len(pos):
            return
        storage = _fast_storage(self.writer)
        if storage is None:
            self._write(None, sources, src, pos, size, conn, log_time)
            return
        # the records of the last chunk _write_chunks would make wait for more
        prefix = 0 if storage.chunk.msgs else len(storage.chunk.bio.getvalue())
        start = np.concatenate([[0], np.cumsum(size)[:-1]]) + prefix
        chunk_of = start // _CHUNK_TARGET
        cut = int(np.searchsorted(chunk_of, chunk_of[-1]))
        used = sorted(set(src[cut:].tolist()))
        remap = np.zeros(len(sources), dtype=np.int64)
        remap[used] = np.arange(len(used))
        self._tail_sources = [sources[k] for k in used]
        self._tail = (remap[src[cut:]], pos[cut:], size[cut:], conn[cut:], log_time[cut:])
        if cut:
            self._write(storage, sources, src[:cut], pos[:cut], size[:cut], conn[:cut], log_time[:cut])

    def close(self) -> int:
        """Write the waiting records; returns the number of records written in all."""
        if self._tail is not None:
            src, pos, size, conn, log_time = self._tail
            sources, self._tail, self._tail_sources = self._tail_sources, None, []
            self._write(_fast_storage(self.writer), sources, src, pos, size, conn, log_time)
        return self.count

    def _write(
        self,
        storage: Any,
        sources: list[np.ndarray],
        src: np.ndarray,
        pos: np.ndarray,
        size: np.ndarray,
        conn: np.ndarray,
        log_time: np.ndarray,
    ) -> None:
        writer = self.writer
        rb = writer._writer
        n = len(pos)
        if storage is None:
            by_id = {c.id: c for c in rb.connections}
            for s, p, z, c, t in zip(
                src.tolist(), pos.tolist(), size.tolist(), conn.tolist(), log_time.tolist(), strict=True
            ):
                rb.write(by_id[c], t, bytes(sources[s][p + 31 : p + z]))
        else:
            _write_chunks(storage, sources, src, pos, size, conn, log_time)
            for c, k in zip(*np.unique(conn, return_counts=True), strict=True):
                rb.counts[int(c)] += int(k)
                storage.channel_stats[int(c)] += int(k)
            lo, hi = int(log_time.min()), int(log_time.max())
            rb.min_timestamp = min(rb.min_timestamp, lo)
            rb.max_timestamp = max(rb.max_timestamp, hi)
            storage.message_start_time = min(storage.message_start_time, lo)
            storage.message_end_time = max(storage.message_end_time, hi)
        writer.count += n
        self.count += n


def _write_chunks(
    storage: Any,
    sources: list[np.ndarray],
    src: np.ndarray,
    pos: np.ndarray,
    size: np.ndarray,
    conn: np.ndarray,
    log_time: np.ndarray,
) -> None:
    from io import BytesIO

    if storage.chunk.msgs:
        storage.close_chunk()
    prefix = storage.chunk.bio.getvalue()  # schema and channel records not yet in a chunk
    storage.chunk.bio = BytesIO()
    start = np.concatenate([[0], np.cumsum(size)[:-1]]) + len(prefix)
    chunk_of = start // _CHUNK_TARGET
    # runs of records contiguous in one source and one chunk: one slice each
    new_run = np.ones(len(pos), dtype=bool)
    new_run[1:] = (src[1:] != src[:-1]) | (pos[1:] != pos[:-1] + size[:-1]) | (chunk_of[1:] != chunk_of[:-1])
    runs = np.flatnonzero(new_run)
    run_bytes = np.add.reduceat(size, runs)
    bounds = np.flatnonzero(np.concatenate([[True], chunk_of[1:] != chunk_of[:-1]]))
    bounds_end = np.concatenate([bounds[1:], [len(pos)]])
    run_chunk = chunk_of[runs]
    views = [memoryview(s) for s in sources]  # type: ignore[arg-type]
    r = 0
    bio = storage.bio
    for a, b in zip(bounds.tolist(), bounds_end.tolist(), strict=True):
        pieces: list[Any] = [prefix] if a == 0 else []
        c = chunk_of[a]
        while r < len(runs) and run_chunk[r] == c:
            p0 = int(pos[runs[r]])
            pieces.append(views[int(src[runs[r]])][p0 : p0 + int(run_bytes[r])])
            r += 1
        body = bytearray().join(pieces)  # one copy, writable
        arr = np.frombuffer(body, np.uint8)
        at = start[a:b] - (0 if a == 0 else start[a])
        cid = conn[a:b]
        lt = log_time[a:b].astype("<u8")
        arr[at + 9] = cid & 0xFF
        arr[at + 10] = cid >> 8
        for j in range(11, 15):
            arr[at + j] = 0  # sequence
        ltb = lt.view(np.uint8).reshape(-1, 8)
        for j in range(8):
            arr[at + 23 + j] = ltb[:, j]  # publish time = log time
        t_lo, t_hi = int(lt.min()), int(lt.max())
        head = struct.pack("<BQQQQII", 0x06, 8 * 3 + 4 + 4 + 8 + len(body), t_lo, t_hi, len(body), 0, 0)
        chunk_start = bio.tell()
        bio.write(head)
        bio.write(struct.pack("<Q", len(body)))
        bio.write(body)
        chunk_end = bio.tell()
        # one message index per channel, in channel order: the chunk's entries sorted by channel (stable), cut
        order = np.argsort(cid, kind="stable")
        ids, first = np.unique(cid[order], return_index=True)
        entries = np.empty(len(order), _INDEX_DTYPE)
        entries["log_time"] = lt[order]
        entries["offset"] = at[order]
        entry_bytes = memoryview(entries.tobytes())
        offsets = []
        bounds_ch = [*first.tolist(), len(order)]
        for k, ch in enumerate(ids.tolist()):
            n_bytes = 16 * (bounds_ch[k + 1] - bounds_ch[k])
            offsets.append((ch, bio.tell()))
            bio.write(struct.pack("<BQHI", 0x07, 2 + 4 + n_bytes, ch, n_bytes))
            bio.write(entry_bytes[16 * bounds_ch[k] : 16 * bounds_ch[k + 1]])
        index = BytesIO()
        index.write(struct.pack("<QQQQI", t_lo, t_hi, chunk_start, chunk_end - chunk_start, 10 * len(offsets)))
        for ch, off in offsets:
            index.write(struct.pack("<HQ", ch, off))
        index.write(struct.pack("<QIQQ", bio.tell() - chunk_end, 0, len(body), len(body)))
        storage.chunks.append(index)
