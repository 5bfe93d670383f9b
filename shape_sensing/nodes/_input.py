"""The live input stage of an estimator node: subscriptions through :class:`InputStage`, and its diagnostics.

A node creates one :class:`LiveInputs`, subscribes through :meth:`LiveInputs.subscribe` (sensor-data QoS, best
effort, with the queue depth of its ``input_queue_depth`` parameter) and, in its callbacks, hands each parsed
input to :meth:`LiveInputs.offer` with the message info rclpy passes (its DDS source timestamp measures the
lag). What the stage releases, in stamp order, goes to the node's ``sink``: on the package's executor once per
wake, after every queued message was taken (so an estimator's step never runs between one topic's messages and
the next's, where the topics not taken yet would look silent for its duration); on another executor, which has
no such hook, after each message. A timer releases inputs held for a silent input, and publishes the status of
the inputs on ``/diagnostics`` once per second: ``<node>: inputs`` with lag, backlog, dropped, decimated, late
and missing inputs, WARN while anything is lost (see :mod:`shape_sensing.pipelines.input_stage`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any

from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.imu_array import (
    CdrEncodingError,
    ImuSweep,
    ImuSweepFrames,
    imu_sweep_from_cdr,
    imu_sweep_from_msg,
)
from shape_sensing.nodes._common import fq_name, node_namespace
from shape_sensing.pipelines.input_stage import InputStage, Released
from shape_sensing.types import DiagnosticLevel, DiagnosticStatus

__all__ = ["RELEASE_PERIOD_S", "STATUS_PERIOD_S", "LiveInputs", "SweepReader", "input_qos"]

RELEASE_PERIOD_S = 0.05  # a held input waits at most this beyond its window for a silent input
STATUS_PERIOD_S = 1.0  # diagnostic_updater's rate


def input_qos(depth: int) -> Any:
    """Sensor-data QoS (best effort, volatile) keeping the last ``depth`` messages."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.VOLATILE,
    )


class SweepReader:
    """Reads the messages of one shape_sensing/ImuArray subscription taken raw (``subscribe(..., raw=True)``) into
    :class:`ImuSweep`: straight from the CDR bytes (no message objects; the frame ids compared with the last
    sweep's, not read again), or decoded by rclpy where the bytes are not plain little-endian CDR (another rmw's
    encoding). Raises :class:`~shape_sensing.messages.errors.MessageError` for a bad message, as reading a decoded
    one does."""

    def __init__(self, msg_cls: Any) -> None:
        self.msg_cls = msg_cls
        self.frames = ImuSweepFrames()

    def __call__(self, raw: bytes) -> ImuSweep:
        try:
            return imu_sweep_from_cdr(raw, self.frames)
        except CdrEncodingError:
            from rclpy.serialization import deserialize_message

            try:
                msg = deserialize_message(raw, self.msg_cls)
            except Exception as exc:  # rclpy's own error types vary by version
                raise MessageError(f"shape_sensing/ImuArray bytes that rclpy cannot decode: {exc}") from exc
            return imu_sweep_from_msg(msg)


class LiveInputs:
    """Subscriptions of a node through a stamp-ordered :class:`InputStage` with lag, drops and gaps reported.

    Args:
        node: the ``rclpy.node.Node``.
        params: the node's validated parameters (``input_queue_depth``, ``reorder_window``, ``max_lag``).
        keys: the inputs in rank order (equal stamps are released in this order).
        sink: called with each :class:`Released` input, in stamp order.
        diagnostics: publisher of ``/diagnostics`` for the stage's own 1 s status timer (``factory`` builds the
            array); ``None``: the node sends :meth:`status` with its own statuses (one array per second).
        names: display name per key.
        decimate: keys that may be decimated when behind (ToF frames).
    """

    def __init__(
        self,
        node: Any,
        params: Mapping[str, Any],
        keys: Sequence[Hashable],
        sink: Callable[[Released], None],
        diagnostics: Any,
        factory: Any,
        *,
        names: dict[Hashable, str] | None = None,
        decimate: Iterable[Hashable] = (),
    ) -> None:
        self.node = node
        self.depth = int(params["input_queue_depth"])
        self.stage = InputStage(
            keys,
            reorder_window_s=float(params["reorder_window"]),
            max_lag_s=float(params["max_lag"]),
            decimate=decimate,
            names=names,
        )
        self.sink = sink
        self.diagnostics = diagnostics
        self.factory = factory
        self.last_status: DiagnosticStatus | None = None
        self._per_wake: bool | None = None  # released once per wake (the lean executor's hook); known at first input
        self.release_timer = node.create_timer(RELEASE_PERIOD_S, self._on_release)
        self.status_timer = node.create_timer(STATUS_PERIOD_S, self._on_status) if diagnostics is not None else None

    def qos(self) -> Any:
        return input_qos(self.depth)

    def subscribe(self, msg_cls: Any, topic: str, callback: Callable[[Any, Any], None], *, raw: bool = False) -> Any:
        """Subscribe ``callback(msg, info)`` to ``topic`` with the stage's QoS (rclpy passes the message info);
        ``raw``: the message as its serialised bytes."""
        if raw:
            return self.node.create_subscription(msg_cls, topic, callback, self.qos(), raw=True)
        return self.node.create_subscription(msg_cls, topic, callback, self.qos())

    def offer(self, key: Hashable, stamp_ns: int, item: Any, info: Any = None) -> None:
        """Hand one parsed input to the stage; what becomes due goes to the sink."""
        sent = info.get("source_timestamp") if isinstance(info, Mapping) else None
        if self._per_wake is None:
            self._per_wake = self._release_per_wake()
        released = self.stage.offer(key, stamp_ns, item, sent_ns=sent, now_ns=time.time_ns(),
                                    release=not self._per_wake)  # fmt: skip
        for r in released:
            self.sink(r)

    def _release_per_wake(self) -> bool:
        """Register the release with the node's executor once per wake, where it offers that (the lean one)."""
        register = getattr(getattr(self.node, "executor", None), "after_takes", None)
        if register is None:
            return False
        register(self._on_release)
        return True

    @property
    def degraded(self) -> bool:
        """The last status reported inputs lost or the node behind."""
        return self.last_status is not None and self.last_status.level != DiagnosticLevel.OK

    def flush(self) -> None:
        """Release everything held, in stamp order (end of the inputs, shutdown)."""
        for r in self.stage.release(time.time_ns(), flush=True):
            self.sink(r)

    def _on_release(self) -> None:
        """After a wake's takes (the executor's hook) and on the timer: what is due, in stamp order, to the sink.
        The timer runs before a wake's takes; a long step before it counts as one reorder window at most (the
        stage's clock), so the inputs not taken yet do not look silent for its length."""
        for r in self.stage.release(time.time_ns()):
            self.sink(r)

    def status(self, *, bare: bool = False) -> DiagnosticStatus:
        """The inputs' status since the last one (starts a new period), named ``/ns/node: inputs`` (``bare``:
        ``node: inputs``, for a :class:`~shape_sensing.pipelines.common.DiagnosticsThrottle` that qualifies it)."""
        name = f"{self.node.get_name() if bare else fq_name(self.node)}: inputs"
        self.last_status = self.stage.report(name, time.time_ns(), "" if bare else node_namespace(self.node))
        return self.last_status

    def _on_status(self) -> None:
        from shape_sensing.messages.common import diagnostic_array

        if self.diagnostics is None:
            return

        status = self.status()
        now_ns = self.node.get_clock().now().nanoseconds
        self.diagnostics.publish(diagnostic_array(now_ns, [status], self.factory))
