"""Pieces every pipeline shares: topic resolution, stamp-driven ticks, rate throttles."""

from __future__ import annotations

__all__ = ["RateThrottle", "StampTicker", "resolve_topic"]


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
