"""The nodes' input layer (shape_sensing.nodes._input.LiveInputs) on a stand-in node and executor, without ROS.

On an executor with the ``after_takes`` hook (the package's), inputs are released once per wake, after the takes,
and the release timer lets out what waits for an input that went silent; without the hook (rclpy's own executor)
each input is released as it is offered, as before.
"""

from __future__ import annotations

import types
from typing import Any

import pytest

from shape_sensing.nodes import _input
from shape_sensing.nodes._input import RELEASE_PERIOD_S, LiveInputs

MS = 1_000_000
PARAMS = {"input_queue_depth": 10, "reorder_window": 0.2, "max_lag": 10.0}


class _Executor:
    def __init__(self) -> None:
        self.hooks: list[Any] = []

    def after_takes(self, callback: Any) -> None:
        self.hooks.append(callback)

    def end_of_wake(self) -> None:
        for h in self.hooks:
            h()


class _Node:
    def __init__(self, executor: Any) -> None:
        self.executor = executor
        self.timers: list[tuple[float, Any]] = []

    def create_timer(self, period: float, callback: Any) -> None:
        self.timers.append((period, callback))

    def get_name(self) -> str:
        return "node"


class _Clock:
    """time.time_ns and time.monotonic_ns of the module under test, stepped by hand."""

    def __init__(self) -> None:
        self.ns = 10**18

    def time_ns(self) -> int:
        return self.ns

    monotonic_ns = time_ns


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    c = _Clock()
    monkeypatch.setattr(_input, "time", types.SimpleNamespace(time_ns=c.time_ns, monotonic_ns=c.monotonic_ns))
    return c


def _inputs(executor: Any) -> tuple[LiveInputs, list[tuple[str, int]], _Node]:
    out: list[tuple[str, int]] = []
    node = _Node(executor)
    li = LiveInputs(node, PARAMS, ["a", "b"], lambda r: out.append((r.key, r.stamp_ns)), None, None)
    return li, out, node


def _release_timer(node: _Node) -> Any:
    (callback,) = [cb for period, cb in node.timers if period == RELEASE_PERIOD_S]
    return callback


def test_released_once_per_wake_after_the_takes(clock: _Clock) -> None:
    ex = _Executor()
    li, out, _ = _inputs(ex)
    for stamp in (0, 10 * MS, 20 * MS):
        li.offer("a", stamp, None)
        li.offer("b", stamp, None)
    assert out == []  # nothing released in the middle of the wake
    assert len(ex.hooks) == 1
    ex.end_of_wake()
    assert out == [("a", 0), ("b", 0), ("a", 10 * MS), ("b", 10 * MS), ("a", 20 * MS), ("b", 20 * MS)]


def test_the_release_timer_lets_out_what_waits_for_an_input_that_went_silent(clock: _Clock) -> None:
    ex = _Executor()
    li, out, node = _inputs(ex)
    li.offer("a", 0, None)
    li.offer("b", 0, None)
    li.offer("a", 10 * MS, None)
    ex.end_of_wake()
    assert out == [("a", 0), ("b", 0)]  # a(10 ms) waits for b, which sends nothing more
    for _ in range(10):  # 0.5 s of timer ticks and no message: b is no longer waited for after its window
        clock.ns += 50 * MS
        _release_timer(node)()
    assert out == [("a", 0), ("b", 0), ("a", 10 * MS)]


def test_without_the_hook_each_input_is_released_as_offered(clock: _Clock) -> None:
    li, out, _ = _inputs(None)
    li.offer("a", 0, None)
    li.offer("b", 0, None)
    assert out == [("a", 0), ("b", 0)]
