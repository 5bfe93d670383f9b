"""Stamp-driven ticks and throttles shared by the pipelines."""

from __future__ import annotations

import pytest

from shape_sensing.pipelines.common import RateThrottle, StampTicker, resolve_topic


def test_ticks_fire_strictly_before_the_next_stamp() -> None:
    t = StampTicker(10.0)  # 100 ms
    assert t.due(250_000_000) == []  # first stamp: sets the first tick at 300 ms
    assert t.due(300_000_000) == []  # a message exactly at the tick belongs to it
    assert t.due(300_000_001) == [300_000_000]
    assert t.due(650_000_000) == [400_000_000, 500_000_000, 600_000_000]
    assert t.flush() == [700_000_000]
    assert StampTicker(5.0).flush() == []


def test_late_stamps_fire_nothing_and_lose_no_tick() -> None:
    stamps = [0, 7, 33, 34, 100, 101, 250, 251, 252, 999]
    a = StampTicker(1e8)  # 10 ns period
    fired_a = [tick for s in stamps for tick in a.due(s)]
    b = StampTicker(1e8)
    fired_b = [tick for s in stamps[:1] + stamps[1::2] + stamps[2::2] for tick in b.due(s)]
    assert fired_a == list(range(10, 999, 10))
    assert fired_b == fired_a


def test_throttle_and_bad_rates() -> None:
    r = RateThrottle(5.0)
    passed = [s for s in range(0, 1_000_000_000, 50_000_000) if r.ready(s)]
    assert passed == [0, 200_000_000, 400_000_000, 600_000_000, 800_000_000]
    with pytest.raises(ValueError, match="expected a positive rate"):
        StampTicker(0.0)
    with pytest.raises(ValueError, match="expected a positive rate"):
        RateThrottle(-1.0)


def test_resolve_topic() -> None:
    assert resolve_topic("imu/data", "/vine") == "/vine/imu/data"
    assert resolve_topic("imu/data", "/vine/") == "/vine/imu/data"
    assert resolve_topic("/tf", "/vine") == "/tf"
    assert resolve_topic("imu/data", "") == "/imu/data"


def test_deferred_status_values_are_made_once_and_only_for_released_statuses() -> None:
    from shape_sensing.pipelines.common import DiagnosticsThrottle
    from shape_sensing.types import DeferredValues, DiagnosticLevel, DiagnosticStatus

    made: list[int] = []

    def status(k: int) -> DiagnosticStatus:
        def make() -> dict[str, str]:
            made.append(k)
            return {"k": str(k)}

        return DiagnosticStatus("est: shape", DiagnosticLevel.OK, "ok", values=DeferredValues(make))

    throttle = DiagnosticsThrottle(1.0)
    released = []
    for k in range(30):  # 3 s of estimates at 10 Hz: statuses released once a second
        out = throttle.add(k * 100_000_000, [status(k)])
        if out is not None:
            released += out
    assert made == []  # nothing formatted yet
    assert [dict(s.values) for s in released] == [{"k": "0"}, {"k": "10"}, {"k": "20"}]
    assert made == [0, 10, 20]  # the 27 statuses never released were never made
    s = released[0]
    s.values["extra"] = "1"  # writable like a dict, made once
    assert s.values == {"k": "0", "extra": "1"} and len(s.values) == 2 and made == [0, 10, 20]
    del s.values["extra"]
    assert list(s.values) == ["k"] and repr(s.values) == "{'k': '0'}"
