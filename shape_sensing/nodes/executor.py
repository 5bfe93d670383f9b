"""A single-threaded rclpy executor that keeps its wait set and takes every ready message in one wake.

rclpy's :class:`~rclpy.executors.SingleThreadedExecutor` (Jazzy) builds a new wait set in Python for every callback:
it walks every node's entities, enters each handle, creates an ``rcl`` wait set (which the RMW then attaches every
entity to again), waits, and wraps the one callback it runs in a :class:`~rclpy.task.Task` whose end triggers the
executor's guard condition, so the next wait returns at once and the wait set is built a second time. Measured on
the hinge-arc node at 230 messages a second, that is about 40 % of the node's CPU (``docs/results/live_ros.md``).
A C++ ``EventsExecutor`` that avoids it exists in later rclpy releases, not in Jazzy's.

:class:`LeanExecutor` runs the same callbacks, in the same thread, with the same rclpy code taking each message,
timer, request, response and event (the executor's own ``_take_*`` methods, so a distribution's semantics, such as
what a timer callback is passed, are kept), but

* builds its wait set once, and again only when an entity was created or destroyed (rclpy wakes the executor
  then, see :meth:`wake`), so the RMW sees the same wait set with the same entities on every wait;
* on each wake runs every ready timer, then takes every ready subscription's messages up to ``drain`` of them
  (the queued ones of a burst in one wake, not one wake each), then services, clients, node guard conditions and
  waitables (QoS events);
* runs callbacks directly; a coroutine callback that awaits becomes a task, resumed once per spin as rclpy's
  executor resumes its tasks;
* calls what was registered with :meth:`~LeanExecutor.after_takes` once per wake in which it took messages, after
  it has taken them all: the nodes' input stage releases its inputs there, so an estimator's step never runs
  between one topic's messages and the next's.

Callback groups are not consulted: in one thread no two synchronous callbacks ever run at once, which is all a
mutually exclusive group asks of them. A coroutine callback that awaits does not hold its group meanwhile (rclpy's
executor would keep the group's other callbacks, and itself, waiting until it ends); the package's nodes have none.
Other differences a user may see: one :meth:`spin_once` runs every callback that is ready, not one; up to ``drain``
messages of a topic are taken before the next topic's (the nodes' input stage orders them by stamp); a timer whose
period is shorter than ``min_wake_interval`` fires once per wake (rcl skips the periods missed);
``spin_until_future_complete`` runs on rclpy's own path.

``SHAPE_SENSING_EXECUTOR=rclpy`` makes :func:`make_executor` return rclpy's own executor instead (to compare, or
should a distribution change what this one relies on); an rclpy without the parts used here gets rclpy's own
executor with a warning.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["ENV_EXECUTOR", "lean_executor_class", "make_executor"]  # and LeanExecutor, made on first use

#: environment variable choosing the executor of the nodes: ``lean`` (default) or ``rclpy``
ENV_EXECUTOR = "SHAPE_SENSING_EXECUTOR"

_NEEDED = ("_take_timer", "_take_subscription", "_take_service", "_take_client", "_take_guard_condition",
           "_take_waitable", "_guard", "_sigint_gc", "_context", "_tasks", "_tasks_lock", "_is_shutdown")  # fmt: skip


def _base() -> type:
    from rclpy.executors import SingleThreadedExecutor

    return SingleThreadedExecutor


def make_executor(context: Any = None) -> Any:
    """The executor a node spins on: a :class:`LeanExecutor`, or rclpy's ``SingleThreadedExecutor`` when
    ``SHAPE_SENSING_EXECUTOR=rclpy`` is set or this rclpy lacks what the lean one uses (with a warning)."""
    choice = os.environ.get(ENV_EXECUTOR, "lean").strip().lower() or "lean"
    if choice not in ("lean", "rclpy"):
        raise ValueError(f"{ENV_EXECUTOR}={choice!r}: expected 'lean' or 'rclpy'")
    if choice == "rclpy":
        return _base()(context=context)
    executor = lean_executor_class()(context=context)
    missing = [name for name in _NEEDED if not hasattr(executor, name)]
    if missing:
        warnings.warn(f"this rclpy's executor lacks {missing}: using rclpy's SingleThreadedExecutor", stacklevel=2)
        executor.shutdown()
        return _base()(context=context)
    return executor


class _WaitSet:
    """One persistent wait set and the entities in it (the same ones, in the same order, on every wait)."""

    def __init__(self, executor: Any, subs: list[Any], timers: list[Any], services: list[Any], clients: list[Any],
                 node_guards: list[Any], waitables: list[Any]) -> None:  # fmt: skip
        from rclpy.impl.implementation_singleton import rclpy_implementation as _rclpy

        self.subs, self.timers, self.services, self.clients = subs, timers, services, clients
        self.node_guards, self.waitables = node_guards, waitables
        self.guards = [*node_guards, executor._guard, executor._sigint_gc]
        counts = [len(subs), len(self.guards), len(timers), len(clients), len(services), 0]
        for w in waitables:
            e = w.get_num_entities()
            for i, k in enumerate(("num_subscriptions", "num_guard_conditions", "num_timers", "num_clients",
                                   "num_services", "num_events")):  # fmt: skip
                counts[i] += int(getattr(e, k))
        context = executor._context
        #: what must stay valid while waiting (rclpy enters each entity's handle around its wait too)
        self.holds = [x.handle for x in (*subs, *timers, *services, *clients, *self.guards)]
        self.holds += [*waitables, context.handle]
        with context.handle:
            self.wait_set = _rclpy.WaitSet(*counts, context.handle)
        self.sub_by_ptr = {x.handle.pointer: x for x in subs}
        self.timer_by_ptr = {x.handle.pointer: x for x in timers}
        self.service_by_ptr = {x.handle.pointer: x for x in services}
        self.client_by_ptr = {x.handle.pointer: x for x in clients}
        self.guard_by_ptr = {x.handle.pointer: x for x in node_guards}

    def wait(self, timeout_ns: int) -> None:
        """Fill the wait set and wait, every entity's handle held (entered) meanwhile.

        Raises:
            InvalidHandle: an entity was destroyed since the wait set was built.
        """
        entered = []
        try:
            for h in self.holds:
                h.__enter__()
                entered.append(h)
            ws = self.wait_set
            ws.clear_entities()
            for x in self.subs:
                ws.add_subscription(x.handle)
            for x in self.clients:
                ws.add_client(x.handle)
            for x in self.services:
                ws.add_service(x.handle)
            for x in self.timers:
                ws.add_timer(x.handle)
            for x in self.guards:
                ws.add_guard_condition(x.handle)
            for w in self.waitables:
                w.add_to_wait_set(ws)
            ws.wait(timeout_ns)
        finally:
            for h in reversed(entered):
                h.__exit__(None, None, None)

    def ready(self, kind: str, by_ptr: dict[int, Any]) -> list[Any]:
        if not by_ptr:
            return []
        return [by_ptr[p] for p in self.wait_set.get_ready_entities(kind) if p in by_ptr]


class _Entities:
    """The wait sets and what is in them, as of the last rebuild.

    ``full`` holds every entity of the executor's nodes; ``fast`` only their subscriptions, timers and guard
    conditions, what a node's data and clocks need. Most waits use ``fast``; at least every :data:`SLOW_PERIOD_S`
    one uses ``full``, so services, clients and QoS events (a parameter request, an incompatible peer) wait at most
    that long: they would otherwise be added to, and checked in, every wait (16 QoS event handlers, 9 services on
    an estimator node: most of a wake's cost).
    """

    def __init__(self, executor: Any) -> None:
        nodes = executor.get_nodes()
        subs = [x for n in nodes for x in n.subscriptions]
        timers = [x for n in nodes for x in n.timers]
        guards = [x for n in nodes for x in n.guards]
        services = [x for n in nodes for x in n.services]
        clients = [x for n in nodes for x in n.clients]
        waitables = [x for n in nodes for x in n.waitables]
        self.full = _WaitSet(executor, subs, timers, services, clients, guards, waitables)
        slow = services or clients or waitables
        self.fast = _WaitSet(executor, subs, timers, [], [], guards, []) if slow else self.full


#: seconds a service request, a client's response or a QoS event waits at most for the executor to look (see
#: ``_Entities``); subscriptions, timers and guard conditions are looked at on every wake
SLOW_PERIOD_S = 0.1


def _lean_executor_class() -> type:
    base = _base()

    class _LeanExecutor(base):  # type: ignore[misc, valid-type]
        """A single-threaded executor with a persistent wait set that takes every ready message per wake.

        See :mod:`shape_sensing.nodes.executor`. ``drain``: at most this many messages of one subscription per
        wake (the rest wait for the next wake, which comes at once), so a flooded topic cannot starve timers and
        other topics. ``counts`` holds the wakes, callbacks and wait-set builds so far.
        """

        def __init__(self, *, context: Any = None, drain: int = 256, min_wake_interval: float = 0.0) -> None:
            super().__init__(context=context)
            if drain < 1:
                raise ValueError(f"drain={drain}: expected at least 1 message per subscription and wake")
            self.drain = int(drain)
            self._min_wake_ns = 0
            self._next_wake_ns = 0  # monotonic ns: no wake before it (min_wake_interval after the last one)
            self._slow_ns = round(SLOW_PERIOD_S * 1e9)
            self._next_full_ns = 0  # monotonic ns: the next wait is on every entity from then on
            self.min_wake_interval = min_wake_interval
            self._entities: _Entities | None = None
            self._dirty = True
            self._after_takes: list[Callable[[], None]] = []
            #: wakes, callbacks run and wait-set builds, for benchmarks and tests
            self.counts = {"wakes": 0, "callbacks": 0, "rebuilds": 0}

        @property
        def min_wake_interval(self) -> float:
            """Seconds from one wake to the next at least (0: wake on every message); what arrives in between is
            taken at the next wake, in one go. Fewer wakes cost less CPU at high message rates, and add at most
            this much latency."""
            return self._min_wake_ns * 1e-9

        @min_wake_interval.setter
        def min_wake_interval(self, seconds: float) -> None:
            seconds = float(seconds)
            if not 0.0 <= seconds <= 1.0:
                raise ValueError(f"min_wake_interval={seconds}: expected 0 to 1 s")
            self._min_wake_ns = round(seconds * 1e9)
            self._next_wake_ns = 0

        def after_takes(self, callback: Callable[[], None]) -> None:
            """Call ``callback()`` once per wake in which messages were taken, after every ready subscription's
            messages were taken (before services, clients, guard conditions and events)."""
            if callback not in self._after_takes:
                self._after_takes.append(callback)

        def wake(self) -> None:
            """An entity was created or destroyed (rclpy calls this), or the executor is to look again."""
            self._dirty = True
            super().wake()

        def add_node(self, node: Any) -> bool:
            self._dirty = True
            return bool(super().add_node(node))

        def remove_node(self, node: Any) -> None:
            self._dirty = True
            super().remove_node(node)

        def shutdown(self, timeout_sec: float | None = None) -> bool:
            self._entities = None
            return bool(super().shutdown(timeout_sec))

        def spin_once(self, timeout_sec: float | None = None) -> None:
            """Wait up to ``timeout_sec`` (None: for ever) for work, then do all the work that is ready."""
            from rclpy.exceptions import InvalidHandle
            from rclpy.executors import ExternalShutdownException

            if self._is_shutdown:
                return
            if not self._context.ok():  # rclpy's says so after its wait; no wait set can be made on it now
                raise ExternalShutdownException()
            self._resume_tasks()  # coroutine callbacks awaiting a future: resumed once per spin, as rclpy does
            if self._is_shutdown or self._guard is None:
                return
            if self._dirty or self._entities is None:
                self._dirty = False
                self._entities = _Entities(self)
                self.counts["rebuilds"] += 1
            ents = self._entities
            for gc in ents.full.node_guards:  # triggered, but its callback did not run (an exception came first)
                if getattr(gc, "_executor_triggered", False):
                    gc.trigger()
            if self._min_wake_ns:
                now = time.monotonic_ns()
                hold = self._next_wake_ns - now
                if hold > 0:  # batch: what arrives meanwhile is taken in the next wake
                    if timeout_sec is not None and 0 <= timeout_sec * 1e9 < hold:
                        time.sleep(timeout_sec)
                        return
                    time.sleep(hold * 1e-9)
                    if self._is_shutdown:  # shut down from another thread meanwhile
                        return
                    if timeout_sec is not None and timeout_sec >= 0:
                        timeout_sec = max(0.0, timeout_sec - hold * 1e-9)
            forever = timeout_sec is None or timeout_sec < 0
            deadline = None if forever else time.monotonic_ns() + round(float(timeout_sec) * 1e9)  # type: ignore[arg-type]
            while True:
                now = time.monotonic_ns()
                left = -1 if deadline is None else max(0, deadline - now)
                if now >= self._next_full_ns or ents.fast is ents.full:
                    spec, capped = ents.full, False
                    self._next_full_ns = now + self._slow_ns
                else:  # back to the full set in time for what only it holds
                    spec = ents.fast
                    until_full = self._next_full_ns - now
                    capped = left < 0 or until_full < left
                    left = until_full if capped else left
                try:
                    spec.wait(left)
                except InvalidHandle:  # an entity destroyed since the rebuild, or the executor shut down
                    if self._is_shutdown:
                        return
                    if not self._context.ok():
                        raise ExternalShutdownException() from None
                    self._dirty = True
                    return
                if self._is_shutdown:
                    return
                if not self._context.ok():
                    raise ExternalShutdownException()
                timers = spec.ready("timer", spec.timer_by_ptr)
                subs = spec.ready("subscription", spec.sub_by_ptr)
                guards = spec.ready("guard_condition", spec.guard_by_ptr)
                # a guard of the executor's own (woken: an entity changed) ends the wait for the caller too
                if timers or subs or guards or not capped or spec.wait_set.get_ready_entities("guard_condition"):
                    break
            self.counts["wakes"] += 1
            if self._min_wake_ns:
                self._next_wake_ns = time.monotonic_ns() + self._min_wake_ns
            services = spec.ready("service", spec.service_by_ptr)
            clients = spec.ready("client", spec.client_by_ptr)
            waitables = [w for w in spec.waitables if w.is_ready(spec.wait_set)]
            if services or clients or waitables:
                self._next_full_ns = 0  # one request or response each per wake: look at them again at once
            for gc in guards:
                gc._executor_triggered = True  # until its callback has run (as rclpy marks it)
            for tmr in timers:
                try:  # rclpy's check too: a cancelled timer can show as ready
                    ready = tmr.handle.is_timer_ready()
                except Exception:  # destroyed meanwhile
                    ready = False
                if ready:
                    self._run(self._take_timer(tmr))
            for sub in subs:
                for _ in range(self.drain):
                    execute = self._take_subscription(sub)
                    if execute is None:
                        break
                    self._run(execute)
            if subs:
                for callback in self._after_takes:
                    callback()
            for srv in services:
                self._run(self._take_service(srv))
            for cli in clients:
                self._run(self._take_client(cli))
            for gc in guards:
                if gc.callback is None:
                    gc._executor_triggered = False
                else:
                    self._run(self._take_guard_condition(gc))
            for wt in waitables:
                self._run(self._take_waitable(wt))

        def _resume_tasks(self) -> None:
            """Run each task not done (a coroutine awaiting a future, a task created with :meth:`create_task`)
            once, raising what it raised, as rclpy's executor does before it waits."""
            with self._tasks_lock:
                self._tasks = [t for t in self._tasks if not t[0].done()]
                tasks = [t[0] for t in self._tasks]
            for task in tasks:
                if task.executing() or task.done():
                    continue
                task()
                if task.exception() is not None:
                    raise task.exception()

        def _run(self, execute: Callable[[], Any] | None) -> None:
            """Run one callback that a ``_take_*`` method made (an ``async def`` without arguments)."""
            if execute is None:
                return
            self.counts["callbacks"] += 1
            coro = execute()
            try:
                coro.send(None)
            except StopIteration:
                return
            # the callback awaits a future: rclpy's task machinery resumes the started coroutine from here on
            self.create_task(coro)

    return _LeanExecutor


_CLASS: type | None = None


def lean_executor_class() -> type:
    """:class:`LeanExecutor` (made on first use: its base class is rclpy's, which a ROS-free import must not need)."""
    global _CLASS
    if _CLASS is None:
        _CLASS = _lean_executor_class()
        _CLASS.__name__ = _CLASS.__qualname__ = "LeanExecutor"
        _CLASS.__module__ = __name__
    return _CLASS


def __getattr__(name: str) -> Any:
    if name == "LeanExecutor":
        return lean_executor_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
