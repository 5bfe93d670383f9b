"""Pieces every pipeline shares: topic resolution, stamp-driven ticks, rate throttles."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from shape_sensing.types import DiagnosticStatus

__all__ = ["DiagnosticsThrottle", "RateThrottle", "StampTicker", "qualify_status", "resolve_topic"]


def resolve_topic(name: str, namespace: str) -> str:
    """A topic name as seen in a bag: absolute names stay, relative ones get ``namespace``."""
    if name.startswith("/"):
        return name
    return f"{namespace.rstrip('/')}/{name}" if namespace.strip("/") else f"/{name}"


class StampTicker:
    """Publishing ticks driven by message stamps only (no wall clock).

    The first stamp sets the first tick (the next multiple of the period);
    later, :meth:`due` returns every tick strictly before the new stamp, so an
    estimate for a tick is made when the first message stamped after it
    arrives, from all data up to it. Live runs and replays of the same
    messages therefore fire the same ticks.
    """

    def __init__(self, rate_hz: float) -> None:
        if not rate_hz > 0:
            raise ValueError(f"tick rate {rate_hz} Hz: expected a positive rate")
        self.period_ns = round(1e9 / rate_hz)
        self.next_tick: int | None = None

    @property
    def started(self) -> bool:
        """Whether a first stamp was seen."""
        return self.next_tick is not None

    def due(self, stamp_ns: int) -> list[int]:
        """Ticks that fire on a message stamped ``stamp_ns`` (none for the first message)."""
        if self.next_tick is None:
            self.next_tick = (stamp_ns // self.period_ns + 1) * self.period_ns
            return []
        ticks = []
        while self.next_tick < stamp_ns:
            ticks.append(self.next_tick)
            self.next_tick += self.period_ns
        return ticks

    def flush(self) -> list[int]:
        """The pending tick (end of a recording), or none before the first stamp."""
        if self.next_tick is None:
            return []
        return self.due(self.next_tick + 1)


class RateThrottle:
    """Lets an event through at most once per period, by message stamps (e.g. markers)."""

    def __init__(self, rate_hz: float) -> None:
        if not rate_hz > 0:
            raise ValueError(f"throttle rate {rate_hz} Hz: expected a positive rate")
        self.period_ns = round(1e9 / rate_hz)
        self._last_ns: int | None = None

    def ready(self, stamp_ns: int) -> bool:
        """True (and the period restarts) when at least one period passed since the last pass."""
        if self._last_ns is None or stamp_ns - self._last_ns >= self.period_ns:
            self._last_ns = stamp_ns
            return True
        return False


def qualify_status(status: DiagnosticStatus, node: str, hardware_id: str) -> DiagnosticStatus:
    """``status`` named after the node's fully qualified name ``node`` (``/ns/name``), with ``hardware_id`` if unset.

    A core status named ``"<bare node name>: task"`` becomes ``"/ns/name: task"``;
    any other name gets ``"/ns/name: "`` in front. Two robots in two
    namespaces then report distinct names, as diagnostic_aggregator needs.
    """
    if not node:
        return status
    bare = node.rsplit("/", 1)[-1]
    head, sep, task = status.name.partition(": ")
    name = f"{node}: {task}" if sep and head == bare else f"{node}: {status.name}"
    return replace(status, name=name, hardware_id=status.hardware_id or hardware_id)


class DiagnosticsThrottle:
    """Collects the statuses of a stream of estimates and lets them out about once per ``period_s`` (by stamps).

    diagnostic_updater publishes at 1 Hz; an estimator updating at 30 Hz would
    otherwise flood ``/diagnostics``. Between two releases the most severe
    status of each name is kept (the latest among equals), so a warning raised
    by a single estimate is not lost.

    Args:
        period_s: release period in seconds of the estimates' stamps.
        node: fully qualified node name for :func:`qualify_status` ('' keeps the core's names).
        hardware_id: set on statuses that carry none.
    """

    def __init__(self, period_s: float = 1.0, node: str = "", hardware_id: str = "") -> None:
        if not period_s > 0:
            raise ValueError(f"diagnostics period {period_s} s: expected a positive period")
        self.throttle = RateThrottle(1.0 / period_s)
        self.node = node
        self.hardware_id = hardware_id
        self._pending: dict[str, DiagnosticStatus] = {}  # by qualified name; qualified when released
        self._names: dict[str, str] = {}  # a core status name -> its qualified name

    def add(self, stamp_ns: int, statuses: Iterable[DiagnosticStatus]) -> list[DiagnosticStatus] | None:
        """Add the statuses of one estimate; returns the statuses to publish now, or None when not due."""
        pending = self._pending
        for s in statuses:
            name = self._names.get(s.name)
            if name is None:
                name = self._names[s.name] = qualify_status(s, self.node, self.hardware_id).name
            kept = pending.get(name)
            if kept is None or s.level >= kept.level:
                pending[name] = s
        if not pending or not self.throttle.ready(stamp_ns):
            return None
        out = [qualify_status(s, self.node, self.hardware_id) for s in pending.values()]
        pending.clear()
        return out
