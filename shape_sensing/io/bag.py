"""rosbag2 I/O: write MCAP bags, read MCAP and sqlite3 bags.

Writing goes through ``rosbags``' rosbag2 writer with MCAP storage and the
ROS 2 CDR serialisation of the chosen distro's definitions, with each topic's
offered QoS recorded (``/tf_static`` transient-local, so ``ros2 bag play``
latches it for RViz).

A path ending in ``.mcap`` is written as one self-contained MCAP file (the
rosbag2 metadata is embedded in it, as rosbag2 itself does): ``ros2 bag play
FILE.mcap`` (Iron and newer; ``-s mcap`` on Humble), Foxglove and the ``mcap``
tools open it. Any other path becomes a rosbag2 directory (``metadata.yaml``
plus the ``.mcap``). Until :meth:`BagWriter.close` the data sits in a rosbag2
directory beside the target, so a crash loses nothing already written.

Reading accepts a rosbag2 directory (MCAP or sqlite3 storage) or a bare
``.mcap`` file. Messages are decoded with the definitions stored in the bag
itself, so types this package does not know still decode.
"""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Iterable, Iterator
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from shape_sensing.io.errors import BagError
from shape_sensing.messages.factory import default_factory

__all__ = [
    "PARAMETERS_KEY",
    "BagMessage",
    "BagWriter",
    "bag_message_count",
    "bag_metadata",
    "bag_parameters",
    "bag_topics",
    "read_bag",
]

#: custom_data key of a node's parameters (a ROS 2 parameter file's text), ``.format(node=...)``.
PARAMETERS_KEY = "shape_sensing.parameters.{node}"

#: the bag writer's QoS profiles (offered QoS recorded per topic), by name.
QOS_PROFILE_NAMES = ("default", "sensor", "static")


@cache
def _rosbags() -> SimpleNamespace:
    """rosbags, imported on first use: only bag reading and writing need it, so the nodes (which import the
    pipelines, which import this module) run on a ROS 2 distribution's packages alone."""
    try:
        from rosbags.interfaces import Qos, QosDurability, QosHistory, QosLiveliness, QosReliability, QosTime
        from rosbags.rosbag2 import Reader, ReaderError, StoragePlugin, Writer, WriterError
        from rosbags.typesys import get_types_from_msg
    except ImportError as exc:
        raise BagError(
            f"reading or writing bags needs the rosbags package ({exc}): pip install 'rosbags>=0.11.9,<0.12' "
            "(see docs/guides/install.md)"
        ) from exc
    inf = QosTime(sec=0x7FFFFFFF, nsec=0xFFFFFFFF)

    def qos(reliability: Any, durability: Any, depth: int) -> Any:
        return Qos(
            history=QosHistory.KEEP_LAST,
            depth=depth,
            reliability=reliability,
            durability=durability,
            deadline=inf,
            lifespan=inf,
            liveliness=QosLiveliness.AUTOMATIC,
            liveliness_lease_duration=inf,
            avoid_ros_namespace_conventions=False,
        )

    profiles = {
        "default": qos(QosReliability.RELIABLE, QosDurability.VOLATILE, 10),
        "sensor": qos(QosReliability.BEST_EFFORT, QosDurability.VOLATILE, 5),
        "static": qos(QosReliability.RELIABLE, QosDurability.TRANSIENT_LOCAL, 1),
    }
    return SimpleNamespace(
        Reader=Reader,
        ReaderError=ReaderError,
        StoragePlugin=StoragePlugin,
        Writer=Writer,
        WriterError=WriterError,
        get_types_from_msg=get_types_from_msg,
        qos_profiles=profiles,
    )


class BagMessage:
    """One message read from a bag: topic, type, log time (ns), raw CDR bytes, decoded on demand.

    ``msg`` decodes (once) with the definitions stored in the bag; ``raw`` is
    the serialised message, which :meth:`BagWriter.write_raw` copies unchanged.
    """

    __slots__ = ("_msg", "_path", "_typestore", "msgtype", "raw", "stamp_ns", "topic")

    def __init__(self, topic: str, msgtype: str, stamp_ns: int, raw: bytes, typestore: Any, path: Path) -> None:
        self.topic = topic
        self.msgtype = msgtype
        self.stamp_ns = stamp_ns
        self.raw = raw
        self._typestore = typestore
        self._path = path
        self._msg: Any = None

    @property
    def msg(self) -> Any:
        """The decoded message (raises :class:`BagError` if it does not decode)."""
        if self._msg is None:
            self._msg = _decode(self._typestore, self.raw, self.msgtype, self._path, self.topic)
        return self._msg


class BagWriter:
    """Write a rosbag2 MCAP bag from message objects (rosbags backend).

    Args:
        path: ``*.mcap`` for a single file, anything else for a rosbag2 directory.
        distro: ROS 2 distro whose message definitions are written.
        overwrite: replace an existing bag at ``path``.
        storage: ``"mcap"`` (default) or ``"sqlite3"`` (directory bags only).

    Topics are added on first write, typed by the message's ``__msgtype__``.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, distro: str = "jazzy", overwrite: bool = False, storage: str = "mcap"
    ) -> None:
        self.path = Path(path)
        self.factory = default_factory(distro)
        self.single_file = self.path.suffix == ".mcap"
        if storage not in ("mcap", "sqlite3"):
            raise BagError(f"bag storage {storage!r} unknown; expected 'mcap' or 'sqlite3'")
        if self.single_file and storage != "mcap":
            raise BagError(f"{self.path}: a single-file bag must use mcap storage")
        self._dir = self.path.with_suffix("") if self.single_file else self.path
        targets = [self.path, self._dir] if self.single_file else [self.path]
        for target in targets:
            if target.exists():
                if not overwrite:
                    raise BagError(f"{target} already exists; choose another output or allow overwriting")
                shutil.rmtree(target) if target.is_dir() else target.unlink()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        rb = _rosbags()
        self._writer_error = rb.WriterError
        plugin = rb.StoragePlugin.MCAP if storage == "mcap" else rb.StoragePlugin.SQLITE3
        self._writer = rb.Writer(self._dir, version=9, storage_plugin=plugin)
        try:
            self._writer.open()
        except self._writer_error as exc:
            raise BagError(f"cannot open bag {self._dir} for writing: {exc}") from exc
        self._connections: dict[str, Any] = {}
        self._types: dict[str, str] = {}
        self.count = 0
        self._closed = False

    def write(self, topic: str, msg: Any, stamp_ns: int, *, qos: str = "default") -> None:
        """Serialise ``msg`` (ROS 2 CDR) and append it on ``topic`` at ``stamp_ns``."""
        msgtype = msg.__msgtype__
        conn = self._connection(topic, msgtype, qos)
        self._writer.write(conn, int(stamp_ns), self.factory.typestore.serialize_cdr(msg, msgtype))
        self.count += 1

    def _connection(self, topic: str, msgtype: str, qos: str) -> Any:
        conn = self._connections.get(topic)
        if conn is None:
            if qos not in QOS_PROFILE_NAMES:
                raise BagError(f"QoS profile {qos!r} unknown; expected one of {sorted(QOS_PROFILE_NAMES)}")
            if msgtype not in self.factory.typestore.fielddefs:
                raise BagError(f"cannot write {msgtype} on {topic}: not in the {self.factory.distro} definitions")
            conn = self._writer.add_connection(
                topic, msgtype, typestore=self.factory.typestore, offered_qos_profiles=[_rosbags().qos_profiles[qos]]
            )
            self._connections[topic] = conn
            self._types[topic] = msgtype
        elif self._types[topic] != msgtype:
            raise BagError(f"topic {topic} holds {self._types[topic]}, cannot also write {msgtype}")
        return conn

    def connection_id(self, topic: str, msgtype: str, *, qos: str = "default") -> int:
        """The id of ``topic``'s connection (added now if new), for bulk writing (:mod:`shape_sensing.io.bag_bulk`)."""
        return int(self._connection(topic, msgtype, qos).id)

    def write_raw(self, topic: str, msgtype: str, raw: bytes, stamp_ns: int, *, qos: str = "default") -> None:
        """Append an already serialised (ROS 2 CDR) message of ``msgtype``, e.g. copied from another bag."""
        conn = self._connection(topic, msgtype, qos)
        self._writer.write(conn, int(stamp_ns), raw)
        self.count += 1

    def copy(self, message: BagMessage, *, qos: str = "default") -> None:
        """Copy a message read from a bag unchanged."""
        self.write_raw(message.topic, message.msgtype, message.raw, message.stamp_ns, qos=qos)

    def set_metadata(self, key: str, value: str) -> None:
        """Store ``key: value`` in the bag's rosbag2 ``custom_data``.

        rosbag2 keeps it in ``metadata.yaml`` and, in MCAP storage, in the file's ``rosbag2``
        metadata record, so a single ``.mcap`` file carries it too (``ros2 bag info`` shows it;
        :func:`bag_metadata` reads it). Set before :meth:`close`.
        """
        if self._closed:
            raise BagError(f"{self.path}: cannot set metadata {key!r} after the bag was closed")
        try:
            self._writer.set_custom_data(key, value)
        except self._writer_error as exc:
            raise BagError(f"{self.path}: metadata {key!r}: {exc}") from exc

    def record_parameters(self, node: str, params: dict[str, Any], comment: str = "") -> str:
        """Store ``node``'s parameters in the bag (:data:`PARAMETERS_KEY`); returns the parameter file's text."""
        from shape_sensing.config import param_file_text

        text = param_file_text(node, params, comment)
        self.set_metadata(PARAMETERS_KEY.format(node=node), text)
        return text

    def close(self) -> None:
        """Finish the bag (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._writer.close()
        if self.single_file:
            inner = self._dir / f"{self._dir.name}.mcap"
            os.replace(inner, self.path)
            (self._dir / "metadata.yaml").unlink(missing_ok=True)
            self._dir.rmdir()

    def __enter__(self) -> BagWriter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is not None and not self._closed:
            # Finish a readable bag even when writing stopped on an error, and say so inside it.
            self._writer.set_custom_data("shape_sensing.partial", f"writing stopped by {exc_type.__name__}")
        self.close()


def _resolve(path: Path) -> tuple[str, Path]:
    if not path.exists():
        raise BagError(f"bag {path} does not exist")
    if path.is_dir():
        if not (path / "metadata.yaml").exists():
            mcaps = sorted(path.glob("*.mcap"))
            if len(mcaps) == 1:
                return "mcap-file", mcaps[0]
            raise BagError(f"{path} is not a rosbag2 directory: no metadata.yaml")
        return "rosbag2", path
    if path.suffix == ".mcap":
        return "mcap-file", path
    if path.suffix == ".db3" and (path.parent / "metadata.yaml").exists():
        return "rosbag2", path.parent
    raise BagError(f"{path} is neither a rosbag2 directory nor an .mcap file")


def read_bag(path: str | os.PathLike[str], topics: Iterable[str] | None = None) -> Iterator[BagMessage]:
    """Iterate over a bag's messages in log-time order, decoded.

    Args:
        path: rosbag2 directory (mcap or sqlite3), or a single ``.mcap`` file.
        topics: only these topics (all if ``None``).

    Raises:
        BagError: missing, malformed or truncated bag, or undecodable message;
            the message names the bag and what was wrong.
    """
    kind, real = _resolve(Path(path))
    wanted = None if topics is None else set(topics)
    if kind == "rosbag2":
        yield from _read_rosbag2(real, wanted)
    else:
        yield from _read_mcap(real, wanted)


def _read_rosbag2(path: Path, wanted: set[str] | None) -> Iterator[BagMessage]:
    typestore = default_factory().typestore
    rb = _rosbags()
    try:
        reader = rb.Reader(path)
        reader.open()
    except (rb.ReaderError, OSError, ValueError, KeyError) as exc:
        raise BagError(f"cannot open bag {path}: {exc}") from exc
    try:
        conns = [c for c in reader.connections if wanted is None or c.topic in wanted]
        _register_from_bag(typestore, [(c.msgtype, c.msgdef.data) for c in conns if c.msgdef.data], path)
        if not conns:
            return
        try:
            for conn, stamp, raw in reader.messages(connections=conns):
                yield BagMessage(conn.topic, conn.msgtype, stamp, raw, typestore, path)
        except (rb.ReaderError, OSError, ValueError, KeyError, AssertionError) as exc:
            raise BagError(f"bag {path} is malformed or truncated: {exc}") from exc
    finally:
        reader.close()


def _read_mcap(path: Path, wanted: set[str] | None) -> Iterator[BagMessage]:
    from mcap.exceptions import McapError
    from mcap.reader import make_reader

    typestore = default_factory().typestore
    with path.open("rb") as stream:
        try:
            reader = make_reader(stream)
            registered: set[int] = set()
            for schema, channel, message in reader.iter_messages(
                topics=None if wanted is None else sorted(wanted), log_time_order=True
            ):
                if schema is None:
                    raise BagError(f"{path}: channel {channel.topic} has no schema; cannot decode")
                if channel.message_encoding != "cdr":
                    raise BagError(f"{path}: channel {channel.topic} is {channel.message_encoding!r}, expected 'cdr'")
                if schema.id not in registered:
                    _register_from_bag(typestore, [(schema.name, schema.data.decode())], path)
                    registered.add(schema.id)
                yield BagMessage(channel.topic, schema.name, message.log_time, message.data, typestore, path)
        except _DAMAGED + (McapError,) as exc:
            raise BagError(f"bag {path} is malformed or truncated: {_what(exc)}") from exc


def _register_from_bag(typestore: Any, defs: list[tuple[str, str]], path: Path) -> None:
    """Add the definitions stored in the bag for types the typestore lacks."""
    for msgtype, text in defs:
        if msgtype in typestore.fielddefs:
            continue
        try:
            typestore.register(_rosbags().get_types_from_msg(text, msgtype))
        except Exception as exc:  # rosbags raises several types for bad definitions
            raise BagError(f"{path}: cannot parse the stored definition of {msgtype}: {exc}") from exc


def _decode(typestore: Any, raw: bytes, msgtype: str, path: Path, topic: str) -> Any:
    try:
        return typestore.deserialize_cdr(raw, msgtype)
    except Exception as exc:  # CDR decoding raises assorted errors on bad bytes
        raise BagError(f"{path}: a {msgtype} message on {topic} does not decode: {_what(exc)}") from exc


_SUMMARY: dict[tuple[str, int, int, int], Any] = {}


#: what the MCAP reader raises on a damaged or truncated file besides its own McapError
_DAMAGED: tuple[type[Exception], ...] = (
    EOFError, ValueError, OSError, KeyError, AssertionError, IndexError, struct.error,
)  # fmt: skip


def _what(exc: BaseException) -> str:
    """An exception as a reader of the message needs it (``struct.error`` says "error": name it)."""
    name = "struct.error" if isinstance(exc, struct.error) else type(exc).__name__
    return f"{name}: {exc}"


def mcap_summary(path: Path) -> Any:
    """The summary section of the MCAP file ``path`` (``None`` when it has none), read once per version of the file.

    A replay asks for the same file's topics, metadata, message count and index in turn; the summary of a
    long recording takes tens of milliseconds to parse. The last file's is kept, keyed by its path, inode,
    size and modification time.

    Raises:
        BagError: a file the MCAP reader cannot parse (truncated, damaged), with what it found.
    """
    from mcap.exceptions import McapError
    from mcap.reader import make_reader

    st = path.stat()
    key = (str(path.resolve()), st.st_ino, st.st_size, st.st_mtime_ns)
    if key not in _SUMMARY:
        with path.open("rb") as stream:
            try:
                summary = make_reader(stream).get_summary()
            except _DAMAGED + (McapError,) as exc:  # e.g. struct.error from a record cut short
                raise BagError(f"bag {path} is malformed or truncated: {_what(exc)}") from exc
        _SUMMARY.clear()
        _SUMMARY[key] = summary
    return _SUMMARY[key]


def bag_topics(path: str | os.PathLike[str]) -> dict[str, str]:
    """Topic -> message type of a bag, without decoding messages."""
    kind, real = _resolve(Path(path))
    if kind == "rosbag2":
        rb = _rosbags()
        try:
            with rb.Reader(real) as reader:
                return {c.topic: c.msgtype for c in reader.connections}
        except (rb.ReaderError, OSError, ValueError, KeyError) as exc:
            raise BagError(f"cannot open bag {real}: {exc}") from exc
    from mcap.exceptions import McapError

    try:
        summary = mcap_summary(real)
    except _DAMAGED + (McapError,) as exc:
        raise BagError(f"bag {real} is malformed or truncated: {_what(exc)}") from exc
    if summary is None:
        raise BagError(f"bag {real} has no summary section (truncated?)")
    return {ch.topic: summary.schemas[ch.schema_id].name for ch in summary.channels.values()}


def bag_metadata(path: str | os.PathLike[str]) -> dict[str, str]:
    """The rosbag2 ``custom_data`` of a bag (see :meth:`BagWriter.set_metadata`); ``{}`` if none."""
    import yaml

    kind, where = _resolve(Path(path))
    if kind == "mcap-file":
        from mcap.exceptions import McapError
        from mcap.reader import make_reader

        summary = mcap_summary(where)
        with open(where, "rb") as f:
            try:
                for record in make_reader(f).iter_metadata() if summary is None else _metadata_records(f, summary):
                    if record.name == "rosbag2" and "serialized_metadata" in record.metadata:
                        info: dict[str, Any] = yaml.safe_load(record.metadata["serialized_metadata"]) or {}
                        info = info.get("rosbag2_bagfile_information") or info  # the record holds the inner mapping
                        data = info.get("custom_data") or {}
                        return {str(k): str(v) for k, v in data.items()}
            except _DAMAGED + (McapError,) as exc:
                raise BagError(f"bag {where} is malformed or truncated: {_what(exc)}") from exc
        return {}
    meta = Path(where) / "metadata.yaml"
    if not meta.is_file():
        return {}
    info = yaml.safe_load(meta.read_text()) or {}
    data = info.get("rosbag2_bagfile_information", {}).get("custom_data") or {}
    return {str(k): str(v) for k, v in data.items()}


def _metadata_records(stream: Any, summary: Any) -> Iterator[Any]:
    """The metadata records an MCAP summary indexes (as ``SeekingReader.iter_metadata``, summary given)."""
    from mcap.records import Metadata
    from mcap.stream_reader import StreamReader

    for index in summary.metadata_indexes:
        stream.seek(index.offset)
        record = next(StreamReader(stream, skip_magic=True).records)
        if isinstance(record, Metadata):
            yield record


def bag_parameters(path: str | os.PathLike[str], node: str) -> str | None:
    """The parameter file text recorded for ``node`` in a bag (:meth:`BagWriter.record_parameters`), or ``None``."""
    return bag_metadata(path).get(PARAMETERS_KEY.format(node=node))


def bag_message_count(path: str | os.PathLike[str]) -> int | None:
    """Number of messages from the bag's summary (for progress), or ``None`` when it has none."""
    kind, where = _resolve(Path(path))
    try:
        if kind == "mcap-file":
            summary = mcap_summary(where)
            return None if summary is None or summary.statistics is None else int(summary.statistics.message_count)
        import yaml

        info = yaml.safe_load((Path(where) / "metadata.yaml").read_text()) or {}
        return int(info["rosbag2_bagfile_information"]["message_count"])
    except Exception:  # a summary is a convenience: any problem means "unknown"
        return None
