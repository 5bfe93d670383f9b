"""The live input stage of the estimator nodes: stamp order, backlog and lag, a drop policy, gaps.

ROS-free; the nodes (:mod:`shape_sensing.nodes._input`) feed it every message they take and hand
what it releases to their tracker, so a live estimate does not depend on the order in which the
executor delivers topics, and a node that falls behind says so.

Stamp order (a bounded reorder window, as message_filters' sequencers do)
    Each input (topic) is delivered in its own stamp order, but the executor interleaves topics
    in no particular order (round robin over ready subscriptions, one message each, so after a
    stall a slow topic runs ahead of a fast one). The stage merges the inputs: an item is released
    once every input heard has reached its stamp (the watermark: the least of the inputs' newest
    stamps), in (stamp, input rank, arrival) order, the order ``shape-sensing replay`` reads a
    recording in. An input not heard yet is waited for as if it had been silent since the first input
    of any kind, for 2 s (``NEVER_HEARD_NS``); then not at all (a topic nobody publishes; should it start
    later, its first inputs older than what was released count as late). An input that delivered nothing
    for ``reorder_window`` seconds of the stage's
    active time is not waited for; time in which the stage itself took nothing (a stall of the
    whole process) does not count against an input. An input older than what was already
    released is *late*: counted and dropped (it would join the wrong step). A node releases once per
    wake, after it has taken every queued message (``offer(..., release=False)``, then :meth:`release`):
    released per message, its estimator's step ran between one topic's messages and the next's, and a
    step longer than the window made the topics not taken yet look silent, so the watermark ran past
    their queued messages and those were dropped as late.

Lag and the drop policy when behind
    The lag of an input is the time from its publication (the DDS source timestamp) to the moment
    the node takes it: the time it spent queued, whatever the header stamps are (bag replay, sim
    time). Policy, oldest first: of the inputs whose lag exceeds ``max_lag``, three in four of each
    topic are dropped without being processed (they are the oldest in their queue, so dropping them
    is what brings the node back within ``max_lag``) and the fourth is processed, so the estimate
    goes on even where taking the messages alone cannot keep up; inputs marked decimable (ToF frames)
    are decimated 1:2 once the lag exceeds half of ``max_lag``, before anything else is lost. The node
    recovers by itself when the load falls: inputs within the lag bound are processed again.

Gaps
    Losses before the node (a queue that overflowed during a stall, a sensor that skipped) are
    seen in each input's header stamps: a step longer than 1.8 times the input's period (the median
    of its last 15 steps, once it has 5) counts ``round(step / period) - 1`` missing inputs.

:meth:`InputStage.report` gives one status per reporting period: WARN while anything was dropped,
decimated, late or missing in the period, or the lag exceeded half of ``max_lag``; OK only
otherwise. Every counter is kept per input and in total.
"""

from __future__ import annotations

import collections
import heapq
import itertools
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from shape_sensing.config import LIVE_PARAMS
from shape_sensing.types import DiagnosticLevel, DiagnosticStatus

__all__ = ["GAP_FACTOR", "KEEP_WHEN_BEHIND", "LIVE_PARAMS", "InputCounters", "InputStage", "Released"]

#: Beyond max_lag, one input of each topic in this many is still processed (the estimate goes on while the
#: queue drains, even where taking the messages alone cannot keep up); the others are dropped.
KEEP_WHEN_BEHIND = 4

#: A stamp step longer than this many running periods of an input counts missing inputs.
GAP_FACTOR = 1.8
#: An input never heard for this long (the stage's active time since its first input) is no longer waited for.
NEVER_HEARD_NS = 2_000_000_000
#: An input's period is the median of its last this many stamp steps, once it has PERIOD_MIN_STEPS of them.
PERIOD_STEPS = 15
PERIOD_MIN_STEPS = 5

@dataclass
class InputCounters:
    """What happened to the inputs of one key (or of all): counts since start or since a report."""

    received: int = 0  # offered to the stage
    processed: int = 0  # released to the tracker
    dropped_behind: int = 0  # lag > max_lag: dropped, oldest first
    decimated: int = 0  # decimable inputs left out while lag > max_lag / 2
    late: int = 0  # stamped before what was already released: dropped
    missing: int = 0  # gaps in the stamps (lost before the node)
    forced: int = 0  # released past a waiting input because the stage was full

    def add(self, other: InputCounters) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    @property
    def discarded(self) -> int:
        """Inputs the node did not use (dropped, decimated, late) or never got (missing)."""
        return self.dropped_behind + self.decimated + self.late + self.missing


@dataclass(frozen=True)
class Released:
    """An input the stage lets through, in stamp order."""

    key: Hashable
    stamp_ns: int
    item: Any


class _Input:
    __slots__ = (
        "active_ns",
        "behind",
        "count",
        "decimate",
        "latest_ns",
        "period_ns",
        "prev_ns",
        "rank",
        "since",
        "steps",
        "total",
    )

    def __init__(self, rank: int, decimate: bool) -> None:
        self.rank = rank
        self.latest_ns = -1  # newest stamp offered
        self.active_ns = 0  # stage-active time of the last arrival
        self.period_ns = 0.0  # running period of the stamps (0: not known yet)
        self.prev_ns = -1
        self.steps: collections.deque[int] = collections.deque(maxlen=PERIOD_STEPS)  # recent stamp steps
        self.count = 0  # inputs seen, for decimation
        self.behind = 0  # inputs in a row beyond max_lag
        self.total = InputCounters()
        self.since = InputCounters()
        self.decimate = decimate


class InputStage:
    """Merges inputs into stamp order, measures their lag, drops by policy and counts what was lost.

    Args:
        keys: the inputs in rank order (ties of equal stamps are released in this order).
        reorder_window_s: longest wait for an input that delivered nothing (stage-active time).
        max_lag_s: lag beyond which an input is dropped (oldest first).
        decimate: keys of inputs that may be decimated 1:2 when the lag exceeds ``max_lag_s / 2``.
        capacity: most items held; beyond it the oldest is released past a waiting input (counted).
        names: display name per key (diagnostics); default ``str(key)``.
    """

    def __init__(
        self,
        keys: Sequence[Hashable],
        *,
        reorder_window_s: float = 0.2,
        max_lag_s: float = 0.5,
        decimate: Iterable[Hashable] = (),
        capacity: int = 100000,
        names: dict[Hashable, str] | None = None,
    ) -> None:
        if not keys:
            raise ValueError("the input stage needs at least one input")
        if len(set(keys)) != len(keys):
            raise ValueError("input keys must be unique")
        if reorder_window_s < 0 or max_lag_s <= 0 or capacity < 1:
            raise ValueError("reorder_window_s >= 0, max_lag_s > 0 and capacity >= 1 are required")
        dec = set(decimate)
        unknown = dec - set(keys)
        if unknown:
            raise ValueError(f"decimable inputs {sorted(map(str, unknown))} are not among the inputs")
        self.inputs = {k: _Input(r, k in dec) for r, k in enumerate(keys)}
        self.names = {k: (names or {}).get(k, str(k)) for k in keys}
        self.window_ns = round(reorder_window_s * 1e9)
        self.max_lag_ns = round(max_lag_s * 1e9)
        self.decimate_lag_ns = self.max_lag_ns // 2
        self.capacity = capacity
        self._heap: list[tuple[int, int, int, Hashable, Any]] = []
        self._seq = itertools.count()
        self.released_ns = -1  # stamp of the last released item
        self._active_ns = 0  # the stage's active clock (wall time minus its own stalls)
        self._last_wall_ns: int | None = None
        self.max_lag_period_ns = 0  # largest lag since the last report
        self.lag_ns = 0  # lag of the last input taken
        self.period_start_ns: int | None = None
        self._first_ns: int | None = None  # stamp of the first input taken (inputs not heard yet wait from it)
        self._first_active_ns = 0

    # -- clock ----------------------------------------------------------------
    def _advance(self, now_ns: int) -> int:
        """The stage's active clock: wall time, less any pause longer than the reorder window."""
        if self._last_wall_ns is not None:
            step = max(0, now_ns - self._last_wall_ns)
            # a pause in which nothing was taken is the process's own stall: it counts as a window at most
            self._active_ns += min(step, self.window_ns)
        self._last_wall_ns = now_ns
        if self.period_start_ns is None:
            self.period_start_ns = now_ns
        return self._active_ns

    # -- input ------------------------------------------------------------------
    def offer(
        self, key: Hashable, stamp_ns: int, item: Any, *, sent_ns: int | None, now_ns: int, release: bool = True
    ) -> list[Released]:
        """Account for one input taken at wall time ``now_ns`` (published at ``sent_ns``, if known).

        Returns the items this makes due, in stamp order (possibly none, possibly this one and others); with
        ``release=False`` none: the caller releases with :meth:`release` once it has taken all that is queued.
        """
        inp = self.inputs[key]
        active = self._advance(now_ns)
        inp.total.received += 1
        inp.since.received += 1
        self._count_gap(inp, stamp_ns)
        lag = max(0, now_ns - sent_ns) if sent_ns is not None and sent_ns > 0 else 0
        self.lag_ns = lag
        self.max_lag_period_ns = max(self.max_lag_period_ns, lag)
        inp.count += 1
        if lag > self.max_lag_ns:
            inp.behind += 1
            if inp.behind % KEEP_WHEN_BEHIND:  # the oldest queued: dropped; one in KEEP_WHEN_BEHIND goes on
                self._bump(inp, "dropped_behind")
                return self.release(now_ns) if release else []
        else:
            inp.behind = 0
        if inp.decimate and lag > self.decimate_lag_ns and inp.count % 2 == 0:
            self._bump(inp, "decimated")
            return self.release(now_ns) if release else []
        if stamp_ns < self.released_ns:
            self._bump(inp, "late")
            return self.release(now_ns) if release else []
        if self._first_ns is None:
            self._first_ns, self._first_active_ns = stamp_ns, active
        inp.latest_ns = max(inp.latest_ns, stamp_ns)
        inp.active_ns = active
        heapq.heappush(self._heap, (stamp_ns, inp.rank, next(self._seq), key, item))
        return self.release(now_ns) if release else []

    def _count_gap(self, inp: _Input, stamp_ns: int) -> None:
        prev, inp.prev_ns = inp.prev_ns, stamp_ns
        if prev < 0 or stamp_ns <= prev:
            return
        step = stamp_ns - prev
        steps = inp.steps
        if len(steps) >= PERIOD_MIN_STEPS:
            # the period: the median of the recent steps (a burst at start-up or a lost input does not move it; a rate
            # that changes for good moves it within PERIOD_STEPS / 2 steps)
            inp.period_ns = float(sorted(steps)[len(steps) // 2])
            if step > GAP_FACTOR * inp.period_ns:
                lost = max(1, round(step / inp.period_ns) - 1)
                inp.total.missing += lost
                inp.since.missing += lost
        steps.append(step)

    @staticmethod
    def _bump(inp: _Input, name: str) -> None:
        setattr(inp.total, name, getattr(inp.total, name) + 1)
        setattr(inp.since, name, getattr(inp.since, name) + 1)

    # -- release ----------------------------------------------------------------
    def watermark(self, now_ns: int | None = None) -> int:
        """Least newest stamp over the inputs heard and not silent (``2**63 - 1``: none to wait for)."""
        active = self._active_ns if now_ns is None else self._advance(now_ns)
        mark = (1 << 63) - 1
        for inp in self.inputs.values():
            if inp.latest_ns < 0:
                if self._first_ns is None:
                    continue
                # never heard: waited for as if silent since the first input of any kind, and no longer after
                # NEVER_HEARD_S of that (a topic with no publisher, e.g. no base encoder fitted, would otherwise
                # delay every estimate by a window for good; the heartbeat names it)
                silent = active - self._first_active_ns
                if silent > NEVER_HEARD_NS:
                    continue
                mark = min(mark, self._first_ns - 1 + silent - self.window_ns)
                continue
            silent = active - inp.active_ns
            # a silent input is waited for as if its stamps went on with the clock, one window behind: a
            # sporadic input is not late by its transport delay, and a dead one delays the others by a window
            expected = inp.latest_ns if silent <= self.window_ns else inp.latest_ns + silent - self.window_ns
            mark = min(mark, expected)
        return mark

    def release(self, now_ns: int, *, flush: bool = False) -> list[Released]:
        """The items due at wall time ``now_ns`` (all of them with ``flush``), in stamp order."""
        heap = self._heap
        if not heap:
            self._advance(now_ns)
            return []
        mark = (1 << 63) - 1 if flush else self.watermark(now_ns)
        out: list[Released] = []
        while heap and (heap[0][0] <= mark or len(heap) > self.capacity):
            stamp, _rank, _, key, item = heapq.heappop(heap)
            if stamp > mark:
                inp = self.inputs[key]
                self._bump(inp, "forced")
            self.released_ns = max(self.released_ns, stamp)
            inp = self.inputs[key]
            inp.total.processed += 1
            inp.since.processed += 1
            out.append(Released(key, stamp, item))
        return out

    @property
    def backlog(self) -> int:
        """Items held for stamp order."""
        return len(self._heap)

    # -- accounting -------------------------------------------------------------
    def totals(self) -> InputCounters:
        out = InputCounters()
        for inp in self.inputs.values():
            out.add(inp.total)
        return out

    def report(self, name: str, now_ns: int, hardware_id: str = "") -> DiagnosticStatus:
        """The inputs' status since the last report (then starts a new period).

        WARN while inputs were dropped, decimated, late or missing in the period, or the lag exceeded half of
        ``max_lag``; OK otherwise. Values: the period's and the total counts, lag, backlog, the policy.
        """
        since = InputCounters()
        worst: list[tuple[int, str]] = []
        for key, inp in self.inputs.items():
            since.add(inp.since)
            if inp.since.discarded:
                worst.append((inp.since.discarded, self.names[key]))
        total = self.totals()
        seconds = max(1e-9, (now_ns - (self.period_start_ns or now_ns)) * 1e-9)
        lag_ms = self.max_lag_period_ns * 1e-6
        behind = self.max_lag_period_ns > self.decimate_lag_ns
        problems = []
        if since.dropped_behind:
            problems.append(f"dropped {since.dropped_behind} inputs older than {self.max_lag_ns * 1e-9:g} s")
        if since.decimated:
            problems.append(f"decimated {since.decimated} frames")
        if since.late:
            problems.append(f"{since.late} late inputs (stamped before what was already processed)")
        if since.missing:
            problems.append(f"{since.missing} missing inputs (gaps in stamps)")
        if since.forced:
            problems.append(f"{since.forced} released past a waiting input (stage full)")
        if behind and not problems:
            problems.append("falling behind")
        if problems:
            worst.sort(key=lambda t: (-t[0], t[1]))
            named = ", ".join(f"{n} {c}" for c, n in worst[:3])
            message = f"behind or losing inputs (lag up to {lag_ms:.0f} ms): " + "; ".join(problems)
            message += f" [most on: {named}]" if named else ""
            level = DiagnosticLevel.WARN
        else:
            message = f"keeping up: lag up to {lag_ms:.0f} ms, nothing dropped"
            level = DiagnosticLevel.OK
        values = {
            "lag_max_ms": f"{lag_ms:.1f}",
            "backlog": str(self.backlog),
            "input_rate_hz": f"{since.received / seconds:.1f}",
            "period_s": f"{seconds:.2f}",
        }
        values |= {f"{f.name}_period": str(getattr(since, f.name)) for f in fields(since)}
        values |= {f"{f.name}_total": str(getattr(total, f.name)) for f in fields(total)}
        values["policy"] = (
            f"lag > {self.max_lag_ns * 1e-9:g} s: drop oldest first, {KEEP_WHEN_BEHIND - 1} in {KEEP_WHEN_BEHIND}"
            + (f"; lag > {self.decimate_lag_ns * 1e-9:g} s: decimate ToF frames 1:2" if self._decimable() else "")
            + f"; stamp order within a {self.window_ns * 1e-9:g} s window, later inputs dropped as late"
        )
        for inp in self.inputs.values():
            inp.since = InputCounters()
        self.max_lag_period_ns = 0
        self.period_start_ns = now_ns
        return DiagnosticStatus(name=name, level=level, message=message, hardware_id=hardware_id, values=values)

    def _decimable(self) -> bool:
        return any(inp.decimate for inp in self.inputs.values())
