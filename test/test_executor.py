"""The nodes' executor (shape_sensing.nodes.executor) on a real ROS 2 against rclpy's own (skipped without rclpy).

Every kind of entity is served as rclpy's SingleThreadedExecutor serves it: messages (each one, in order per
topic), timers, a service called by a client, a coroutine callback that awaits a service call, an entity created
while spinning, a subscription destroyed while spinning; a burst of queued messages is taken in one wake; a
flooded topic does not starve a timer; batched wakes keep to their interval; shutdown ends the spin; the
environment switch picks rclpy's executor and a bad value is refused by name.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

try:
    import rclpy
except ImportError:  # no ROS 2: each test skips (a module-level skip aborts the whole run under ROS's pytest plugins)
    rclpy = None

pytestmark = [pytest.mark.rclpy, pytest.mark.skipif(rclpy is None, reason="needs rclpy (a sourced ROS 2)")]

MAX_ROUNDS = 500  # spin rounds before giving up (not a time limit)


def _lean(context: Any, **kw: Any) -> Any:
    from shape_sensing.nodes.executor import lean_executor_class

    return lean_executor_class()(context=context, **kw)


def _spin_until(executor: Any, done: Callable[[], bool], timeout: float = 0.02) -> bool:
    for _ in range(MAX_ROUNDS):
        executor.spin_once(timeout_sec=timeout)
        if done():
            return True
    return False


def _reliable(depth: int) -> Any:
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    return QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE)


def _wait_matched(pub: Any, executor: Any, n: int = 1) -> None:
    assert _spin_until(executor, lambda: pub.get_subscription_count() >= n), "the subscription never matched"


def _rig(context: Any, name: str, callback: Any, depth: int, **executor_args: Any) -> tuple[Any, Any, Any]:
    """A node on a lean executor with one subscription to its own publisher of std_msgs/Int32, matched."""
    from std_msgs.msg import Int32

    node = rclpy.create_node(f"executor_{name}", context=context)
    executor = _lean(context, **executor_args)
    executor.add_node(node)
    node.create_subscription(Int32, f"exec/{name}", callback, _reliable(depth))
    pub = node.create_publisher(Int32, f"exec/{name}", _reliable(depth))
    _wait_matched(pub, executor)
    return node, executor, pub


@pytest.mark.parametrize("kind", ["lean", "rclpy"])
def test_messages_timers_and_services_are_served_as_by_rclpy(context: Any, kind: str) -> None:
    """The same script on both executors gives the same deliveries (each message once, in order per topic)."""
    from rclpy.executors import SingleThreadedExecutor
    from std_msgs.msg import Int32
    from std_srvs.srv import Trigger

    node = rclpy.create_node("executor_script", context=context)
    executor = _lean(context) if kind == "lean" else SingleThreadedExecutor(context=context)
    executor.add_node(node)
    got: dict[str, list[int]] = {"a": [], "b": []}
    for name in got:
        node.create_subscription(Int32, f"exec/{name}", lambda m, n=name: got[n].append(m.data), _reliable(100))
    pubs = {name: node.create_publisher(Int32, f"exec/{name}", _reliable(100)) for name in got}
    ticks: list[float] = []
    node.create_timer(0.01, lambda: ticks.append(time.monotonic()))
    served: list[str] = []

    def serve(request: Any, response: Any) -> Any:
        served.append("trigger")
        response.success, response.message = True, "done"
        return response

    node.create_service(Trigger, "exec/trigger", serve)
    for pub in pubs.values():
        _wait_matched(pub, executor)
    for i in range(40):
        pubs["a"].publish(Int32(data=i))
        pubs["b"].publish(Int32(data=100 + i))
    assert _spin_until(executor, lambda: len(got["a"]) == 40 and len(got["b"]) == 40)
    assert got == {"a": list(range(40)), "b": list(range(100, 140))}
    assert _spin_until(executor, lambda: len(ticks) >= 5)

    # a client's call from a coroutine callback that awaits the response
    client = node.create_client(Trigger, "exec/trigger")
    assert _spin_until(executor, client.service_is_ready)
    answers: list[str] = []

    async def call() -> None:
        response = await client.call_async(Trigger.Request())
        answers.append(response.message)

    executor.create_task(call)
    assert _spin_until(executor, lambda: answers == ["done"])
    assert served == ["trigger"]

    # an entity created while spinning is waited on; a destroyed one is not called again
    later: list[int] = []

    async def on_later(msg: Any) -> None:  # a coroutine subscription callback
        later.append(msg.data)

    sub = node.create_subscription(Int32, "exec/later", on_later, _reliable(10))
    pub = node.create_publisher(Int32, "exec/later", _reliable(10))
    _wait_matched(pub, executor)
    pub.publish(Int32(data=7))
    assert _spin_until(executor, lambda: later == [7])
    node.destroy_subscription(sub)
    pub.publish(Int32(data=8))
    for _ in range(20):
        executor.spin_once(timeout_sec=0.01)
    assert later == [7]
    executor.shutdown()
    node.destroy_node()


def test_a_burst_is_taken_in_one_wake_and_the_wait_set_is_built_once(context: Any) -> None:
    from std_msgs.msg import Int32

    got: list[int] = []
    node, executor, pub = _rig(context, "burst", lambda m: got.append(m.data), 200)
    builds = executor.counts["rebuilds"]
    for i in range(150):
        pub.publish(Int32(data=i))
    time.sleep(0.2)  # all delivered into the subscription's queue
    wakes = executor.counts["wakes"]
    executor.spin_once(timeout_sec=1.0)
    assert got == list(range(150))  # every queued message in one wake, in order
    assert executor.counts["wakes"] == wakes + 1
    assert executor.counts["rebuilds"] == builds  # no entity changed: the same wait set
    executor.shutdown()
    node.destroy_node()


def test_a_flooded_topic_does_not_starve_a_timer(context: Any) -> None:
    """With at most ``drain`` messages per subscription and wake, a timer still fires between chunks of a flood."""
    from std_msgs.msg import Int32

    order: list[str] = []

    def on_message(msg: Any) -> None:
        order.append("m")
        time.sleep(0.001)  # a chunk of 10 takes 10 ms: the 5 ms timer is due after every chunk

    node, executor, pub = _rig(context, "flood", on_message, 500, drain=10)
    node.create_timer(0.005, lambda: order.append("t"))
    for i in range(300):
        pub.publish(Int32(data=i))
    time.sleep(0.2)
    assert _spin_until(executor, lambda: order.count("m") == 300)
    runs = "".join(order).strip("t").split("t")
    assert max(len(r) for r in runs) <= 10, f"{max(len(r) for r in runs)} messages in a row: the timer waited"
    assert len([r for r in runs if r]) >= 30  # the timer ran between every chunk of the flood
    with pytest.raises(ValueError, match="drain=0"):
        _lean(context, drain=0)
    executor.shutdown()
    node.destroy_node()


def test_batched_wakes_keep_their_interval_and_lose_nothing(context: Any) -> None:
    from std_msgs.msg import Int32

    got: list[int] = []
    node, executor, pub = _rig(context, "batch", lambda m: got.append(m.data), 100, min_wake_interval=0.05)
    wakes, t0 = executor.counts["wakes"], time.monotonic()
    sent = 0
    while time.monotonic() - t0 < 1.0:
        pub.publish(Int32(data=sent))
        sent += 1
        executor.spin_once(timeout_sec=0.005)  # a wake is due at most every 50 ms whatever the timeout
    assert _spin_until(executor, lambda: len(got) == sent)
    assert got == list(range(sent))
    elapsed = time.monotonic() - t0
    assert sent > 60  # far more messages than wakes
    assert executor.counts["wakes"] - wakes <= elapsed / 0.05 + 2
    for bad in (-0.1, 2.0, float("nan")):
        with pytest.raises(ValueError, match="min_wake_interval"):
            executor.min_wake_interval = bad
    executor.shutdown()
    node.destroy_node()


def test_shutdown_and_a_context_shut_down_end_the_spin(context: Any) -> None:
    from rclpy.executors import ExternalShutdownException

    node = rclpy.create_node("executor_end", context=context)
    executor = _lean(context)
    executor.add_node(node)
    executor.spin_once(timeout_sec=0.01)
    threading.Timer(0.2, rclpy.try_shutdown, kwargs={"context": context}).start()
    t0 = time.monotonic()
    with pytest.raises(ExternalShutdownException):
        executor.spin_once(timeout_sec=5.0)  # woken by the shutdown while waiting, not after 5 s
    assert time.monotonic() - t0 < 2.0
    with pytest.raises(ExternalShutdownException):
        executor.spin_once(timeout_sec=5.0)  # and at once on a context shut down before
    executor.shutdown()
    executor.spin_once(timeout_sec=5.0)  # a shut-down executor returns at once


def test_the_environment_picks_the_executor(monkeypatch: pytest.MonkeyPatch, context: Any) -> None:
    from rclpy.executors import SingleThreadedExecutor

    from shape_sensing.nodes.executor import ENV_EXECUTOR, lean_executor_class, make_executor

    monkeypatch.delenv(ENV_EXECUTOR, raising=False)
    assert isinstance(make_executor(context), lean_executor_class())
    monkeypatch.setenv(ENV_EXECUTOR, "rclpy")
    chosen = make_executor(context)
    assert type(chosen) is SingleThreadedExecutor
    monkeypatch.setenv(ENV_EXECUTOR, "fast")
    with pytest.raises(ValueError, match=f"{ENV_EXECUTOR}='fast'"):
        make_executor(context)
    assert os.environ[ENV_EXECUTOR] == "fast"


def test_queued_service_requests_are_answered_one_wake_after_another(context: Any) -> None:
    """Services are in the full wait set (every 0.1 s); once one was ready the next wakes look at it again at once,
    so eight queued requests are answered by eight quick spins, not one per 0.1 s."""
    from rclpy.executors import SingleThreadedExecutor
    from std_srvs.srv import Trigger

    server = rclpy.create_node("executor_server", context=context)
    executor = _lean(context, min_wake_interval=0.0)
    executor.add_node(server)
    served: list[int] = []

    def serve(request: Any, response: Any) -> Any:
        served.append(1)
        response.success = True
        return response

    server.create_service(Trigger, "exec/queued", serve)
    caller = rclpy.create_node("executor_caller", context=context)
    other = SingleThreadedExecutor(context=context)
    other.add_node(caller)
    client = caller.create_client(Trigger, "exec/queued")
    for _ in range(MAX_ROUNDS):
        executor.spin_once(0.01)
        other.spin_once(0.01)
        if client.service_is_ready():
            break
    futures = [client.call_async(Trigger.Request()) for _ in range(8)]
    time.sleep(0.3)  # the requests reach the server's queue; its full wait is due now, then come quick spins
    served.clear()
    for _ in range(12):
        executor.spin_once(0.0)
    assert len(served) == 8, f"{len(served)} of 8 queued requests answered in 12 quick spins"
    for _ in range(MAX_ROUNDS):
        other.spin_once(0.01)
        if all(f.done() for f in futures):
            break
    assert all(f.done() and f.result().success for f in futures)
    other.shutdown()
    executor.shutdown()
    caller.destroy_node()
    server.destroy_node()


def test_shutdown_from_another_thread_ends_the_spin_quietly(context: Any) -> None:
    """A node spun in a thread (batched wakes: the executor often sleeps) and shut down from another ends without
    an exception, every time."""
    import threading

    from std_msgs.msg import Int32

    def spin(executor: Any, errors: list[BaseException]) -> None:
        try:
            while not executor._is_shutdown:
                executor.spin_once(0.1)
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    for trial in range(10):
        node, executor, pub = _rig(context, f"threaded_{trial}", lambda m: None, 10, min_wake_interval=0.02)
        errors: list[BaseException] = []
        thread = threading.Thread(target=spin, args=(executor, errors))
        thread.start()
        pub.publish(Int32(data=trial))
        time.sleep(0.01 * (trial % 4))
        executor.shutdown()
        thread.join(timeout=5.0)
        assert not thread.is_alive() and not errors, errors
        node.destroy_node()


def test_a_callback_awaiting_a_future_does_not_busy_loop(context: Any) -> None:
    """A coroutine callback waiting half a second for a future is resumed once per wake, as rclpy's executor does,
    not in a loop of empty wakes (it took most of a core)."""
    from rclpy.task import Future
    from std_msgs.msg import Int32

    future = Future()
    done: list[int] = []

    async def waits(msg: Any) -> None:
        await future
        done.append(msg.data)

    node, executor, pub = _rig(context, "awaits", waits, 10)
    node.create_timer(0.1, lambda: None)
    pub.publish(Int32(data=5))
    assert _spin_until(executor, lambda: len(executor._tasks) == 1)
    wakes, t0 = executor.counts["wakes"], time.monotonic()
    while time.monotonic() - t0 < 0.5:
        executor.spin_once(0.2)
    assert executor.counts["wakes"] - wakes <= 20, "empty wakes while the callback waited"
    future.set_result(True)
    assert _spin_until(executor, lambda: done == [5])
    executor.shutdown()
    node.destroy_node()


def test_a_guard_condition_triggered_beside_a_failing_callback_still_runs(context: Any) -> None:
    """A subscription callback raises before the guard condition's callback of the same wake ran; the caller goes
    on spinning and the guard's callback runs (the trigger is kept until it has, as rclpy keeps it)."""
    from std_msgs.msg import Int32

    ran: list[str] = []

    def fails(msg: Any) -> None:
        raise RuntimeError("a callback's own error")

    node, executor, pub = _rig(context, "guarded", fails, 10)
    guard = node.create_guard_condition(lambda: ran.append("guard"))
    executor.spin_once(0.05)  # the guard in the wait set
    pub.publish(Int32(data=1))
    time.sleep(0.1)
    guard.trigger()
    with pytest.raises(RuntimeError, match="own error"):
        for _ in range(MAX_ROUNDS):
            executor.spin_once(0.02)
    assert _spin_until(executor, lambda: ran == ["guard"])
    executor.shutdown()
    node.destroy_node()


def test_after_takes_runs_once_per_wake_after_every_topic_was_taken(context: Any) -> None:
    """The input stage's release hook: called once in a wake that took messages, after the messages of every ready
    topic (so an estimator's step never runs between one topic's messages and the next's); not in a wake of a timer
    alone."""
    from std_msgs.msg import Int32

    events: list[str] = []
    node = rclpy.create_node("executor_after_takes", context=context)
    executor = _lean(context)
    executor.add_node(node)
    for name in ("a", "b"):
        node.create_subscription(Int32, f"exec/after_{name}", lambda m, n=name: events.append(f"{n}{m.data}"),
                                 _reliable(50))  # fmt: skip
    pubs = [node.create_publisher(Int32, f"exec/after_{n}", _reliable(50)) for n in ("a", "b")]
    for pub in pubs:
        _wait_matched(pub, executor)
    def hook() -> None:
        events.append("after")

    executor.after_takes(hook)
    executor.after_takes(hook)  # the same hook twice: kept once
    for i in range(3):
        for pub in pubs:
            pub.publish(Int32(data=i))
    time.sleep(0.2)  # all queued
    executor.spin_once(timeout_sec=1.0)
    assert sorted(events[:-1]) == sorted(f"{n}{i}" for n in "ab" for i in range(3)) and events[-1] == "after"
    events.clear()
    ticks: list[int] = []
    timer = node.create_timer(0.01, lambda: ticks.append(1))
    assert _spin_until(executor, lambda: len(ticks) >= 3)
    assert "after" not in events  # wakes of the timer alone took no message
    node.destroy_timer(timer)
    executor.shutdown()
    node.destroy_node()
