"""Collision localisation benchmark: estimator update per sample; serial and UDP parser throughput vs line rate.

Run: .venv/bin/python benchmarks/bench_collision.py
Prints figures as ratios to references measured in the same run; asserts nothing about speed.

* Estimator: one ``update`` of each filter on the samples of the simulated three-obstacle course,
  against the 50 us target and against the paper's filter written with numpy matrices (np.linalg.inv).
* Serial: bytes/s of the base-station parser on a stream with garbage and false syncs, against
  the line rate of 115200 bit/s 8N1 (11520 byte/s) and of 1 Mbit/s.
* UDP: records/s through the Net F/T receiver (decode, loss/reorder bookkeeping, scaling), against
  the Net F/T's fastest RDT output (7000 records/s, its manual).
"""

from __future__ import annotations

import math
import time

import numpy as np

from shape_sensing.drivers.base_station import BaseStationParser, StateFrame, encode_state
from shape_sensing.drivers.contact_cap import ContactCap
from shape_sensing.drivers.netft import NetFtReceiver, RdtRecord, encode_record
from shape_sensing.estimators.collision_pivot import (
    CollisionPivotConfig,
    CollisionPivotEstimator,
    CollisionSample,
    PaperPivotFilter,
)
from shape_sensing.sim.vine_collision import SensorFaults, VineCollisionSim, three_course

TARGET_US = 50.0
SERIAL_LINE_BPS = 115200 / 10  # 8N1: 10 bits per byte
SERIAL_1M_BPS = 1_000_000 / 10
NETFT_MAX_RATE = 7000.0


def _samples() -> list[CollisionSample]:
    sim = VineCollisionSim(three_course(), SensorFaults(), seed=0)
    cap = ContactCap()
    out = []
    for s in sim.run():
        ns = 10**9 + round(s.t * 1e9)
        r = cap.update(ns, s.cap_mask)
        out.append(CollisionSample(ns, s.length_measured, s.pressure_measured, s.force_measured, r.contact_angle,
                                   r.in_contact, r.in_contact and not r.held, s.heading_measured))  # fmt: skip
    return out


def _numpy_paper_kf(zs: list[float], dt: float) -> float:
    """Reference: Eq. 8-9 with numpy 2x2 matrices and np.linalg.inv, one update per value."""
    A = np.array([[1.0, dt], [0.0, 0.1]])
    Rv = np.diag([0.1, 1.0])
    x, P = np.zeros(2), Rv.copy()
    zh: list[float] = []
    dh: list[float] = []
    prev = zs[0]
    for z in zs:
        d = (z - prev) / dt
        prev = z
        zh, dh = (zh + [z])[-10:], (dh + [d])[-10:]
        Rw = np.diag([max(float(np.var(zh)), 1e-6), max(float(np.var(dh)), 1e-6)])
        L = A @ P @ np.linalg.inv(Rw + P)
        x = A @ x + L @ (np.array([z, d]) - x)
        P = (A - L) @ P @ (A - L).T + Rv + L @ Rw @ L.T
    return float(x[0])


def bench_estimator() -> None:
    samples = _samples()
    print(f"estimator: {len(samples)} samples of the three-obstacle course ({sum(s.in_contact for s in samples)} in "
          "contact)")  # fmt: skip
    for filt in ("paper", "improved"):
        best = math.inf
        for _ in range(3):
            est = CollisionPivotEstimator(CollisionPivotConfig(filter=filt, pressure_drop_per_metre=0.06))
            t0 = time.perf_counter()
            for s in samples:
                est.update(s)
            best = min(best, (time.perf_counter() - t0) / len(samples))
        print(f"  {filt:9s} update: {best * 1e6:6.2f} us/sample  = {TARGET_US / (best * 1e6):5.1f}x under the "
              f"{TARGET_US:g} us target")  # fmt: skip
    zs = [100.0 * s.total_length for s in samples[:2000]]
    t0 = time.perf_counter()
    _numpy_paper_kf(zs, 0.02)
    ref = (time.perf_counter() - t0) / len(zs)
    kf = PaperPivotFilter(unit=1.0)
    t0 = time.perf_counter()
    for z in zs:
        kf.update(z, 0.02)
    ours = (time.perf_counter() - t0) / len(zs)
    print(f"  Eq. 8-9 alone: scalar 2x2 {ours * 1e6:.2f} us vs numpy matrices {ref * 1e6:.2f} us "
          f"({ref / ours:.1f}x)")  # fmt: skip


def bench_serial() -> None:
    rng = np.random.default_rng(0)
    stream = bytearray()
    n = 20000
    for k in range(n):
        if rng.random() < 0.02:
            stream += b"\xa5\x5a\x0d\x01" + rng.integers(0, 256, 8, dtype=np.uint8).tobytes()
        stream += encode_state(StateFrame(k & 0xFFFF, 1000 * k, k, 300, 300, True, k & 0x7FFFF))
    data = bytes(stream)
    for chunk in (64, 4096):
        p = BaseStationParser()
        t0 = time.perf_counter()
        frames = 0
        for i in range(0, len(data), chunk):
            frames += len(p.feed(data[i : i + chunk]))
        dt = time.perf_counter() - t0
        assert frames == n
        bps = len(data) / dt
        ratios = f"{bps / SERIAL_LINE_BPS:6.1f}x 115200 bit/s, {bps / SERIAL_1M_BPS:5.1f}x 1 Mbit/s (target >= 10x)"
        print(f"serial parser, {chunk:4d}-byte reads: {bps / 1e3:8.1f} kB/s ({frames / dt:8.0f} frames/s) = {ratios}")


def bench_udp() -> None:
    n = 50000
    packets = [encode_record(RdtRecord(k + 1, k + 1, 0, (k, -k, 2 * k, 0, 1, -1))) for k in range(n)]
    rx = NetFtReceiver(sock=None, address=("127.0.0.1", 0))  # type: ignore[arg-type]
    t0 = time.perf_counter()
    for k, pkt in enumerate(packets):
        rx.handle(pkt, k)
    dt = time.perf_counter() - t0
    rate = n / dt
    print(f"Net F/T receiver: {rate:9.0f} records/s = {rate / NETFT_MAX_RATE:5.1f}x the sensor's 7000 Hz RDT maximum "
          "(target >= 10x)")  # fmt: skip


def main() -> None:
    bench_estimator()
    bench_serial()
    bench_udp()


if __name__ == "__main__":
    main()
