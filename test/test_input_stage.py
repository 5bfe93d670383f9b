"""The live input stage: stamp order against a sort, lag policy, decimation, late and missing inputs, reports."""

from __future__ import annotations

import random
from typing import Any

import pytest

from shape_sensing.pipelines.input_stage import KEEP_WHEN_BEHIND, InputStage
from shape_sensing.types import DiagnosticLevel

MS = 1_000_000
S = 1_000_000_000


def _streams(
    rates_hz: dict[str, float], seconds: float, offsets_ns: dict[str, int] | None = None
) -> dict[str, list[int]]:
    offsets_ns = offsets_ns or {}
    return {k: [int(i * S / r) + offsets_ns.get(k, 0) for i in range(int(seconds * r))] for k, r in rates_hz.items()}


def _deliver(stage: InputStage, arrivals: list[tuple[str, int]], t0: int, step_ns: int) -> list[tuple[str, int]]:
    out = []
    now = t0
    for key, stamp in arrivals:
        now += step_ns
        out += [(r.key, r.stamp_ns) for r in stage.offer(key, stamp, stamp, sent_ns=now, now_ns=now)]
    out += [(r.key, r.stamp_ns) for r in stage.release(now, flush=True)]
    return out


@pytest.mark.parametrize("seed", range(5))
def test_random_interleaving_is_released_in_the_order_of_a_sort(seed):
    """Each topic in its own order, topics interleaved at random (as an executor may): the stage's output is
    the stamp sort of all inputs (ties in key rank), the order replay reads a recording in."""
    rng = random.Random(seed)
    keys = ["length", "imu_a", "imu_b", "tof"]
    streams = _streams({"length": 100, "imu_a": 100, "imu_b": 100, "tof": 15}, 2.0)
    pending = {k: list(v) for k, v in streams.items()}
    arrivals = []
    while any(pending.values()):
        k = rng.choice([k for k in keys if pending[k]])
        # bursts: a topic delivers several queued messages in a row, up to 150 ms ahead of the others
        for _ in range(rng.randint(1, 15)):
            if pending[k]:
                arrivals.append((k, pending[k].pop(0)))
    stage = InputStage(keys, reorder_window_s=0.2, max_lag_s=10.0)
    out = _deliver(stage, arrivals, 10 * S, 50_000)  # 50 us between takes: a burst, as after a stall
    expected = sorted(((k, s) for k in keys for s in streams[k]), key=lambda ks: (ks[1], keys.index(ks[0])))
    assert out == expected
    assert stage.totals().late == 0
    assert stage.totals().processed == len(expected)


def test_a_slow_topic_running_ahead_after_a_stall_does_not_make_the_fast_one_late():
    """After a stall the executor drains queues round robin: the 10 Hz topic's whole backlog arrives while the
    100 Hz topic is still 0.9 s behind. Nothing is late; the output is in stamp order."""
    streams = _streams({"fast": 100, "slow": 10}, 1.0)
    fast, slow = list(streams["fast"]), list(streams["slow"])
    arrivals = []
    while fast or slow:  # one message of each ready queue per round
        if fast:
            arrivals.append(("fast", fast.pop(0)))
        if slow:
            arrivals.append(("slow", slow.pop(0)))
    stage = InputStage(["fast", "slow"], reorder_window_s=0.1, max_lag_s=10.0)
    out = _deliver(stage, arrivals, 5 * S, 200_000)
    assert [s for _, s in out] == sorted(s for _, s in out)
    assert stage.totals().late == 0
    assert len(out) == 110


def test_an_input_stamped_before_what_was_released_is_late_and_dropped():
    stage = InputStage(["a", "b"], reorder_window_s=0.05, max_lag_s=10.0)
    now = S
    stage.offer("a", 100 * MS, "a0", sent_ns=now, now_ns=now)
    released = stage.offer("b", 120 * MS, "b0", sent_ns=now, now_ns=now)
    assert [r.item for r in released] == ["a0"]  # b waits for a to reach 120 ms
    released = stage.offer("a", 130 * MS, "a1", sent_ns=now, now_ns=now)
    assert [r.item for r in released] == ["b0"]
    assert stage.offer("b", 110 * MS, "b_late", sent_ns=now, now_ns=now) == []  # before b0 (already out)
    assert stage.totals().late == 1
    status = stage.report("n: inputs", now + S)
    assert status.level == DiagnosticLevel.WARN
    assert "1 late" in status.message


def test_a_silent_input_delays_the_others_by_one_window_of_active_time():
    stage = InputStage(["a", "b"], reorder_window_s=0.1, max_lag_s=10.0)
    t = 100 * S
    stage.offer("b", 0, "b0", sent_ns=t, now_ns=t)  # b heard once, then silent
    got = []
    for i in range(1, 40):  # a at 100 Hz in stamps and in wall time
        now = t + i * 10 * MS
        got += stage.offer("a", i * 10 * MS, i, sent_ns=now, now_ns=now)
    # a's inputs go out one window (0.1 s) behind the clock: a(k) once (39 - k) * 10 ms >= 100 ms less b's wait
    released_a = [r.item for r in got if r.key == "a"]
    assert released_a and max(released_a) <= 39 - 10 + 1
    assert min(released_a) == 1 and released_a == sorted(released_a)
    assert stage.totals().late == 0


def test_a_stall_of_the_process_does_not_count_against_a_waiting_input():
    """Nothing taken for 2 s (the whole process stalled): on resuming, an input that has backlog is still
    waited for, so the other's inputs are not released past it."""
    stage = InputStage(["a", "b"], reorder_window_s=0.1, max_lag_s=10.0)
    now = S
    assert stage.offer("a", 0, "a0", sent_ns=now, now_ns=now) == []  # b not heard yet: waited for
    out = stage.offer("b", 0, "b0", sent_ns=now, now_ns=now)
    assert [r.item for r in out] == ["a0", "b0"]
    now += 2 * S  # stall
    out = stage.offer("b", 500 * MS, "b1", sent_ns=now - S, now_ns=now)
    assert out == []  # b1 waits for a
    out = stage.offer("a", 10 * MS, "a1", sent_ns=now - S, now_ns=now + MS)
    assert [r.item for r in out] == ["a1"]
    assert stage.totals().late == 0


def _estimator_behind_its_inputs(step_cost_ns: int, *, per_wake: bool) -> tuple[list[tuple[str, int]], InputStage, int]:
    """The ToF continuum node's inputs (5 gyros at 120 Hz, 16 ToF sensors at 15 Hz with staggered phases, strain at
    20 Hz, and a pose topic nobody publishes) in real time; the node wakes every 50 ms and takes each topic's queued
    messages, topics in a random order (as the executor's wait set hands them out). Releasing an input past a 0.1 s
    slice boundary costs the consumer ``step_cost_ns`` of wall time (the window's step). ``per_wake``: the stage
    releases once per wake after every take (the nodes on the lean executor); else after each message. Returns what
    was released, the stage and the most inputs it held at once."""
    rng = random.Random(0)
    streams = {f"gyro{g}": [int(i * S / 120) for i in range(240)] for g in range(5)}
    streams |= {f"tof{t}": [int(i * S / 15) + t * 3 * MS for i in range(30)] for t in range(16)}
    streams["strain"] = [int(i * S / 20) + MS for i in range(40)]
    keys = [*streams, "pose"]
    stage = InputStage(keys, reorder_window_s=0.2, max_lag_s=100.0)
    t0 = 100 * S
    now, taken, slice_done, out, held = t0, dict.fromkeys(streams, 0), 0, [], 0

    def consume(released: list[Any]) -> None:
        nonlocal now, slice_done
        out.extend((r.key, r.stamp_ns) for r in released)
        newest = max([slice_done, *(r.stamp_ns // (100 * MS) for r in released)])
        if newest > slice_done:
            now += step_cost_ns
        slice_done = newest

    while any(taken[k] < len(v) for k, v in streams.items()):
        published = now - t0
        for key in rng.sample(list(streams), len(streams)):
            while taken[key] < len(streams[key]) and streams[key][taken[key]] <= published:
                stamp = streams[key][taken[key]]
                taken[key] += 1
                now += 30_000  # 30 us per take
                consume(stage.offer(key, stamp, stamp, sent_ns=t0 + stamp, now_ns=now, release=not per_wake))
        held = max(held, stage.backlog)
        if per_wake:
            consume(stage.release(now))
        now += 50 * MS
    consume(stage.release(now, flush=True))
    return out, stage, held


@pytest.mark.parametrize("step_ms", [60, 100, 150, 250])
def test_released_once_per_wake_an_estimator_behind_its_inputs_loses_none_as_late(step_ms):
    """A consumer whose steps take 60-250 ms (up to 2.5 times its 0.1 s slices: a loaded machine; the reorder
    window is 0.2 s). Released once per wake, after every queued message was taken, every input goes out in stamp
    order and none is late, and the pose topic nobody publishes holds them back for its 2 s only (the most held at
    once stays near 2 s of inputs). Released after each message (as before), a long step ran between one topic's
    takes and the next's, the topics not taken yet looked silent, the watermark ran past their queued messages and
    they were dropped as late (the ToF node beside two busy processes lost 587 of 5160 inputs so)."""
    out, stage, held = _estimator_behind_its_inputs(step_ms * MS, per_wake=True)
    assert stage.totals().late == 0
    assert [s for _, s in out] == sorted(s for _, s in out)
    assert len(out) == 5 * 240 + 16 * 30 + 40
    assert held < 2.5 * (5 * 120 + 16 * 15 + 20)
    if step_ms >= 100:
        _, per_message, _ = _estimator_behind_its_inputs(step_ms * MS, per_wake=False)
        assert per_message.totals().late > 100  # the witness: released per message, this scenario loses inputs


def test_behind_inputs_are_dropped_oldest_first_and_the_stage_recovers():
    """Policy: an input queued longer than max_lag is dropped (without being processed); the node is WARN with
    the counts while it drops, OK again once inputs arrive within the bound."""
    stage = InputStage(["imu"], reorder_window_s=0.0, max_lag_s=0.5)
    t = 50 * S
    processed = []
    # a backlog: inputs published 10 ms apart, taken in a burst 1.0 .. 0.3 s after their publication
    for i in range(100):
        sent = t + i * 10 * MS
        now = t + 1000 * MS + i * 3 * MS  # the node drains 3.3x faster than they came
        processed += [r.item for r in stage.offer("imu", sent, i, sent_ns=sent, now_ns=now)]
    lag_of = [(t + 1000 * MS + i * 3 * MS) - (t + i * 10 * MS) for i in range(100)]
    behind = [i for i in range(100) if lag_of[i] > 500 * MS]  # a run of the oldest: 0 .. len - 1
    kept = [i for i in behind if (i + 1) % KEEP_WHEN_BEHIND == 0]  # one in four goes on
    expected_dropped = len(behind) - len(kept)
    totals = stage.totals()
    assert totals.dropped_behind == expected_dropped > 0
    assert processed == kept + list(range(len(behind), 100))
    warn = stage.report("n: inputs", t + 2 * S)
    assert warn.level == DiagnosticLevel.WARN
    assert warn.values["dropped_behind_period"] == str(expected_dropped)
    assert "older than 0.5 s" in warn.message
    # load falls: the next inputs are taken 1 ms after their publication
    for i in range(100, 150):
        sent = t + 2 * S + i * 10 * MS
        stage.offer("imu", t + i * 10 * MS, i, sent_ns=sent, now_ns=sent + MS)
    ok = stage.report("n: inputs", t + 5 * S)
    assert ok.level == DiagnosticLevel.OK
    assert ok.values["dropped_behind_period"] == "0"
    assert ok.values["dropped_behind_total"] == str(expected_dropped)


def test_tof_frames_are_decimated_before_anything_is_dropped():
    stage = InputStage(["gyro", "tof"], reorder_window_s=0.0, max_lag_s=0.4, decimate=["tof"])
    t = S
    for i in range(20):
        now = t + i * 10 * MS
        sent = now - 300 * MS  # lag 0.3 s: above half of max_lag, within it
        stage.offer("gyro", i * 10 * MS, i, sent_ns=sent, now_ns=now)
        stage.offer("tof", i * 10 * MS, i, sent_ns=sent, now_ns=now)
    c = stage.inputs["tof"].total
    assert c.decimated == 10 and c.dropped_behind == 0
    assert stage.inputs["gyro"].total.decimated == 0
    status = stage.report("n: inputs", t + S)
    assert status.level == DiagnosticLevel.WARN and "decimated 10 frames" in status.message


def test_gaps_in_stamps_count_the_missing_inputs():
    stage = InputStage(["imu"], reorder_window_s=0.0, max_lag_s=10.0)
    stamps = [i * 10 * MS for i in range(10)] + [i * 10 * MS for i in range(14, 20)]  # 4 lost (100 .. 130 ms)
    stamps += [i * 10 * MS + MS for i in range(20, 30)]  # 1 ms jitter once: not a gap
    for s in stamps:
        stage.offer("imu", s, s, sent_ns=None, now_ns=S + s)
    assert stage.totals().missing == 4
    status = stage.report("n: inputs", 2 * S)
    assert status.level == DiagnosticLevel.WARN and "4 missing" in status.message


def test_nothing_lost_reports_ok_with_the_lag():
    stage = InputStage(["a"], reorder_window_s=0.0, max_lag_s=0.5)
    for i in range(10):
        stage.offer("a", i * 10 * MS, i, sent_ns=S + i * 10 * MS, now_ns=S + i * 10 * MS + 2 * MS)
    status = stage.report("/ns/n: inputs", 2 * S, "/ns")
    assert status.level == DiagnosticLevel.OK
    assert status.values["lag_max_ms"] == "2.0"
    assert status.values["processed_total"] == "10"
    assert status.hardware_id == "/ns"


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="at least one input"):
        InputStage([])
    with pytest.raises(ValueError, match="unique"):
        InputStage(["a", "a"])
    with pytest.raises(ValueError, match="not among the inputs"):
        InputStage(["a"], decimate=["tof"])


def test_a_start_up_burst_does_not_make_every_later_step_a_gap() -> None:
    """Seen on ROS 2 (the vine-collision simulator's first messages): two stamps 5 ms apart, then a steady 50 Hz.
    The period taken from the first step made every later 20 ms step a gap: about 100 "missing" inputs per second
    per topic, a WARN for a node that lost nothing. The period is now the median of the recent steps; real gaps in
    the same stream are still counted exactly."""
    t0 = 10**18
    burst = [t0, t0 + 5_000_000, t0 + 10_000_000] + [t0 + 10_000_000 + 20_000_000 * k for k in range(1, 51)]
    stage = InputStage(["a"], reorder_window_s=0.2, max_lag_s=0.5)
    for s in burst:
        stage.offer("a", s, None, sent_ns=None, now_ns=0)
    status = stage.report("x", 0, "")
    assert status.level == DiagnosticLevel.OK and status.values["missing_total"] == "0", status.message
    gaps = InputStage(["a"], reorder_window_s=0.2, max_lag_s=0.5)
    for k in range(60):
        if k not in (30, 31, 32, 45):  # three in a row and one lost
            gaps.offer("a", t0 + 20_000_000 * k, None, sent_ns=None, now_ns=0)
    assert gaps.report("x", 0, "").values["missing_total"] == "4"


def test_an_input_nobody_publishes_delays_the_others_for_two_seconds_only() -> None:
    """Seen on ROS 2: the vine launch with its BNO055 driver and no base encoder (``length_topic`` set, nothing
    published on it) gave every estimate 259 ms of latency, a reorder window held for the length that never came.
    A never-heard input is now waited for during its first 2 s only (the heartbeat names it as never heard)."""
    stage = InputStage(["length", "imus"], reorder_window_s=0.2, max_lag_s=0.5)
    t0 = 10**18
    held_back = []
    for k in range(400):  # 4 s at 100 Hz, wall time = stamps
        now = t0 + 10_000_000 * k
        released = stage.offer("imus", now, k, sent_ns=None, now_ns=now)
        newest = max((r.stamp_ns for r in released), default=None)
        held_back.append(None if newest is None else (now - newest) * 1e-9)
    early = [h for h in held_back[50:150] if h is not None]
    late = [h for h in held_back[250:] if h is not None]
    assert early and min(early) >= 0.15, "within its first 2 s the silent input is waited for (a window)"
    assert late and max(late) == 0.0, "after 2 s each sweep goes out as it comes"
