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

import numpy as np

from shape_sensing.io.bag import _resolve, read_bag
from shape_sensing.io.errors import BagError

__all__ = ["TopicArrays", "read_topics"]

_MSG_HEADER = 31  # opcode 1, record length 8, channel 2, sequence 4, log time 8, publish time 8
_INDEX_ENTRY = np.dtype([("log_time", "<u8"), ("offset", "<u8")])


@dataclass
class TopicArrays:
    """The messages of one topic.

    Attributes:
        msgtype: ROS 2 type name.
        log_time: ``(N,)`` int64 log times (ns).
        rank: ``(N,)`` int64 place of each message among all messages returned by :func:`read_topics`.
        data: ``(N, size)`` uint8 CDR bytes when every message has the same size, else a list of ``bytes``.
    """

    msgtype: str
    log_time: np.ndarray
    rank: np.ndarray
    data: np.ndarray | list[bytes]

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


def _read_indexed_mcap(
    path: Path, wanted: set[str], progress: Callable[[float], None] | None
) -> dict[str, TopicArrays] | None:
    """The fast path, or ``None`` when the file does not allow it (compressed chunks, no index)."""
    from mcap.exceptions import McapError
    from mcap.reader import make_reader

    try:
        with path.open("rb") as stream:
            summary = make_reader(stream).get_summary()
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
    buf = np.memmap(path, dtype=np.uint8, mode="r")
    size = len(buf)
    if size < 64:
        return None
    words = np.lib.stride_tricks.sliding_window_view(buf, 8)  # words[i]: the 8 bytes at i, without a copy
    parts: dict[int, list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]] = {cid: [] for cid in channels}
    chunks = sorted(summary.chunk_indexes, key=lambda ci: ci.chunk_start_offset)
    try:
        for n_done, ci in enumerate(chunks):
            if progress is not None and n_done % 64 == 0:
                progress(n_done / len(chunks))
            start = ci.chunk_start_offset
            # chunk record: opcode, length, start time, end time, uncompressed size, crc, compression, records
            comp_len = int(buf[start + 37 : start + 41].view("<u4")[0])
            records = start + 41 + comp_len + 8
            for cid, index_at in ci.message_index_offsets.items():
                if cid not in channels:
                    continue
                n_bytes = int(buf[index_at + 11 : index_at + 15].view("<u4")[0])
                entries = np.frombuffer(buf, _INDEX_ENTRY, n_bytes // 16, index_at + 15)
                at = records + entries["offset"].astype(np.int64)
                if len(at) and (at[-1] + _MSG_HEADER > size or buf[at].min() != 0x05 or buf[at].max() != 0x05):
                    raise BagError(f"bag {path}: a message index points outside its chunk")
                rec_len = words[at + 1].view("<u8")[:, 0].astype(np.int64)
                parts[cid].append((entries["log_time"].astype(np.int64), np.full(len(at), start), at, rec_len))
    except (IndexError, ValueError) as exc:
        raise BagError(f"bag {path} is malformed or truncated: {type(exc).__name__}: {exc}") from exc
    if progress is not None:
        progress(1.0)
    # Rank: the order of read_bag (mcap's log-time order: log time, then chunk offset, then place in the chunk).
    per_channel = {}
    for cid, pieces in parts.items():
        if pieces:
            per_channel[cid] = tuple(np.concatenate(p) for p in zip(*pieces, strict=True))
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
            rows = np.lib.stride_tricks.sliding_window_view(buf, int(data_len[0]))
            data: np.ndarray | list[bytes] = rows[at + _MSG_HEADER]
        else:
            data = [bytes(buf[a + _MSG_HEADER : a + _MSG_HEADER + n]) for a, n in zip(at, data_len, strict=True)]
        out[ch.topic] = TopicArrays(summary.schemas[ch.schema_id].name, t, r, data)
    return out
