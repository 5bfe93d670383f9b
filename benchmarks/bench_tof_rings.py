"""Sensor rings (seed 001): I2C bus budget, driver overhead, boot time, CPU per second of streaming, faults.

Everything runs the real drivers (:class:`~shape_sensing.drivers.tof_ring.TofRingSet`)
against the register-level simulators; counts come from the simulated bus's
transaction log (1 bit per START / repeated START / STOP, 9 bits per byte).

* budget: bits on the wire per second of one streaming ring (3 VL53L5CX 8x8 at
  15 Hz, 1 ISM330BX at 120 Hz), measured; the driver's overhead against the
  minimum the data needs (each frame: its bytes + one index-addressed read
  header of 4 bytes; each IMU FIFO word: 7 bytes, gyro + accel + timestamp);
  then the utilisation of the seed's 9 ToF + 3 IMUs on one bus and on one bus
  per ring, at 400 kHz and 1 MHz, and the achieved rates when it does not fit;
* boot: bytes and simulated time until 9 VL53L5CX stream, at 400 kHz and 1 MHz;
* CPU per simulated second of streaming of the 3 rings through the real
  ``smbus2.SMBus`` class (i2c-dev ioctls emulated), as a ratio to the same run
  with the driver calling the simulated bus directly (reference, same run);
* faults: NACKs, timeouts, a sensor that never boots, mid-stream resets, a
  FIFO overrun: what was counted and what kept streaming.

Run: ``.venv/bin/python benchmarks/bench_tof_rings.py [--seconds S]``
"""

from __future__ import annotations

import argparse
import logging
import time
from typing import Any

import numpy as np

from shape_sensing.drivers.tof_ring import SCHEMA, TofRingSet, layout_from_params, split_by_bus
from shape_sensing.drivers.vl53l5cx import UldBuffers, frame_size
from shape_sensing.sim.i2c_dev import RealSMBus
from shape_sensing.sim.tof_rings import build_ring_hardware

_NS = 1_000_000_000
MINIMAL_OUTPUTS = ("RANGE_SIGMA_MM", "DISTANCE", "TARGET_STATUS")


def _rings(params: dict[str, Any], buffers: UldBuffers, bitrate: float, seed: int = 0, real: bool = False):
    hw = build_ring_hardware(layout_from_params(params), buffers, bitrate=bitrate, seed=seed)
    for chip in hw.tofs.values():
        chip.set_zones(np.full(64, 0.7))
    return hw


def _run(rings: TofRingSet, until_ns: int) -> dict[str, int]:
    counts = {"frames": 0, "imu": 0}

    def on(r: Any) -> None:
        counts["frames"] += len(r.tof)
        counts["imu"] += sum(len(s) for _, s in r.imu)

    rings.run_until(until_ns, on)
    return counts


def boot_until_streaming(rings: TofRingSet, hw: Any, limit_s: float = 60.0) -> float:
    t0 = hw.bus.now_ns
    while len(rings.streaming()) < len(rings.devices) and hw.bus.now_ns - t0 < limit_s * _NS:
        rings.run_until(hw.bus.now_ns + _NS // 20)
    return (hw.bus.now_ns - t0) / _NS


def budget(buffers: UldBuffers, seconds: float) -> None:
    p = SCHEMA.validate({})
    ring = split_by_bus(p)[1]
    print(f"== one ring streaming ({seconds:g} s at 1 MHz after boot): 3 VL53L5CX 8x8 15 Hz + 1 ISM330BX 120 Hz")
    hw = _rings(ring, buffers, 1e6)
    rings = TofRingSet(hw.bus, ring, buffers, clock=hw.bus.clock, sleep=hw.bus.sleep)
    boot_until_streaming(rings, hw)
    rings.run_until(hw.bus.now_ns + _NS)
    s0, t0 = hw.bus.stats.copy(), hw.bus.now_ns
    c = _run(rings, t0 + int(seconds * _NS))
    used = hw.bus.stats.minus(s0)
    dt = (hw.bus.now_ns - t0) / _NS
    fs = frame_size(64)
    minimum_bits = c["frames"] * (fs + 4) * 9 + c["imu"] * 3 * 7 * 9  # frame + read header; 3 FIFO words a sample
    print(f"  frames {c['frames']} ({c['frames'] / dt / 3:.2f} Hz per ToF), IMU samples {c['imu']} "
          f"({c['imu'] / dt:.1f} Hz); frame {fs} bytes")  # fmt: skip
    print(f"  on the wire: {used.bits / dt / 1e3:.1f} kbit/s in {used.transactions / dt:.0f} transfers/s; minimum "
          f"{minimum_bits / dt / 1e3:.1f} kbit/s; driver overhead {100 * (used.bits / minimum_bits - 1):.1f} % "
          f"(data-ready polls, FIFO status reads, mux switches, START/STOP)")  # fmt: skip
    tof_bits = used.bits * (c["frames"] * (fs + 4)) / (c["frames"] * (fs + 4) + c["imu"] * 21)
    per_tof = tof_bits / dt / 3  # bits/s of one ToF at 15 Hz, its share of the overhead included
    per_imu = (used.bits - tof_bits) / dt
    min_fs = frame_size(64, MINIMAL_OUTPUTS)
    per_tof_min = per_tof * (min_fs + 4) / (fs + 4)
    print("== bus budget of the seed's sensors (measured per-sensor bits/s, overhead included)")
    print(f"  per VL53L5CX 8x8 15 Hz {per_tof / 1e3:.1f} kbit/s (only distance+sigma+status, {min_fs}-byte frames: "
          f"{per_tof_min / 1e3:.1f}); per ISM330BX 120 Hz {per_imu / 1e3:.1f} kbit/s")  # fmt: skip
    for label, n_tof, n_imu in (("9 ToF + 3 IMU on one bus", 9, 3), ("one ring (3 ToF + 1 IMU) per bus", 3, 1)):
        need = n_tof * per_tof + n_imu * per_imu
        need_min = n_tof * per_tof_min + n_imu * per_imu
        print(f"  {label}: {need / 1e3:.0f} kbit/s = {100 * need / 400e3:.0f} % of 400 kHz, "
              f"{100 * need / 1e6:.0f} % of 1 MHz (minimal frames: {100 * need_min / 400e3:.0f} % / "
              f"{100 * need_min / 1e6:.0f} %)")  # fmt: skip
    for rate in (400e3, 1e6):
        q = dict(p, ring_buses=[1, 1, 1])
        hw = _rings(q, buffers, rate, seed=2)
        rings = TofRingSet(hw.bus, q, buffers, clock=hw.bus.clock, sleep=hw.bus.sleep)
        boot_until_streaming(rings, hw, 120.0)
        t0 = hw.bus.now_ns
        c = _run(rings, t0 + 3 * _NS)
        dt = (hw.bus.now_ns - t0) / _NS
        over = sum(d.driver.overruns for d in rings.devices if d.mount.kind == "imu")
        print(f"  achieved with all 9 ToF + 3 IMU on one {rate / 1e3:.0f} kHz bus: {c['frames'] / dt / 9:.1f} Hz per "
              f"ToF (asked 15), IMU {c['imu'] / dt / 3:.1f} Hz per IMU, FIFO overruns {over}")  # fmt: skip


def boot(buffers: UldBuffers) -> None:
    from shape_sensing.drivers.vl53l5cx import Vl53l5cx, run_steps

    p = SCHEMA.validate({"ring_buses": [1, 1, 1]})
    hw = _rings(split_by_bus(SCHEMA.validate({}))[1], buffers, 1e6)
    one = Vl53l5cx(hw.bus, 0x29, buffers, clock=hw.bus.clock)
    hw.bus.write_byte(0x70, 0x01)  # mux_0 channel 0: ring_0_tof_0 alone
    s0 = hw.bus.stats.copy()
    run_steps(one.init_steps(), hw.bus.sleep)
    init = hw.bus.stats.minus(s0)
    for step in (one.set_resolution(8), one.set_ranging_frequency_hz(15), one.set_integration_time_ms(20),
                 one.set_sharpener_percent(5), one.set_target_order("strongest"), one.start_ranging()):  # fmt: skip
        run_steps(step, hw.bus.sleep)
    full = hw.bus.stats.minus(s0)
    print("== boot of 9 VL53L5CX on one bus (firmware upload dominates)")
    print(f"  one sensor: init {init.bytes} bytes in {init.transactions} transfers, with 8x8 settings and start "
          f"{full.bytes} bytes ({len(buffers.firmware)} of firmware); 9 sensors {9 * full.bytes} bytes = "
          f"{9 * full.bits / 400e3:.2f} s of wire time at 400 kHz, {9 * full.bits / 1e6:.2f} s at 1 MHz")  # fmt: skip
    for rate in (400e3, 1e6):
        hw = _rings(p, buffers, rate)
        rings = TofRingSet(hw.bus, p, buffers, clock=hw.bus.clock, sleep=hw.bus.sleep)
        s0 = hw.bus.stats.copy()
        t = boot_until_streaming(rings, hw, 120.0)
        used = hw.bus.stats.minus(s0)
        fw = len(buffers.firmware) * 9
        print(f"  {rate / 1e3:.0f} kHz: all streaming after {t:.2f} s; {used.bytes} bytes on the wire "
              f"({used.bytes / 9:.0f} per sensor incl. 3 IMUs' set-up and first streaming; firmware alone {fw}); "
              f"firmware bits / bit rate = {fw * 9 / rate:.2f} s")  # fmt: skip


def cpu(buffers: UldBuffers, seconds: float) -> None:
    p = SCHEMA.validate({})
    print(f"== CPU per second of streaming: 3 rings on 3 buses at 1 MHz, {seconds:g} s simulated")
    results = {}
    for real in (False, True):
        per_bus = split_by_bus(p)
        hws = [_rings(q, buffers, 1e6, seed=i) for i, q in enumerate(per_bus.values())]
        ctx = RealSMBus([h.bus for h in hws]) if real else None
        buses = ctx.__enter__() if ctx else [h.bus for h in hws]
        try:
            sets = [TofRingSet(b, q, buffers, clock=h.bus.clock, sleep=h.bus.sleep)
                    for b, q, h in zip(buses, per_bus.values(), hws, strict=True)]  # fmt: skip
            for s, h in zip(sets, hws, strict=True):
                boot_until_streaming(s, h)
                s.run_until(h.bus.now_ns + _NS)
            c0 = time.process_time()
            frames = 0
            for s, h in zip(sets, hws, strict=True):
                frames += _run(s, h.bus.now_ns + int(seconds * _NS))["frames"]
            results[real] = (time.process_time() - c0) / seconds
        finally:
            if ctx:
                ctx.__exit__(None, None, None)
    print(f"  through smbus2.SMBus (ioctls emulated): {1e3 * results[True]:.1f} ms CPU per second "
          f"({100 * results[True]:.2f} % of one core; driver + smbus2 + simulators)")  # fmt: skip
    print(f"  reference, same run, driver on the simulated bus directly: {1e3 * results[False]:.1f} ms/s; "
          f"ratio {results[True] / results[False]:.2f}")  # fmt: skip


def faults(buffers: UldBuffers) -> None:
    p = SCHEMA.validate({})
    ring = split_by_bus(p)[1]
    ring = SCHEMA.validate(dict(ring, retry_initial=0.5, retry_max=4.0))
    print("== faults on one ring at 1 MHz, 30 s: 1 % NACK on 0x29, 0.5 % timeouts on 0x6A, ring_0_tof_1 never "
          "boots, ring_0_tof_2 reset at 10 s, the IMU reset at 15 s")  # fmt: skip
    hw = _rings(ring, buffers, 1e6, seed=9)
    hw.tofs["ring_0_tof_1"].never_boots = True
    with RealSMBus([hw.bus]) as (sb,):
        rings = TofRingSet(sb, ring, buffers, clock=hw.bus.clock, sleep=hw.bus.sleep)
        hw.set_nack_rate(0x29, 0.01)
        hw.set_timeout_rate(0x6A, 0.005)
        frames: dict[str, int] = {}

        def on(r: Any) -> None:
            for n, _ in r.tof:
                frames[n] = frames.get(n, 0) + 1

        rings.run_until(10 * _NS, on)
        hw.reset("ring_0_tof_2")
        rings.run_until(15 * _NS, on)
        hw.reset("ring_0_imu")
        rings.run_until(30 * _NS, on)
    for d in rings.devices:
        extra = (f"frames {frames.get(d.mount.name, 0)}, missed {d.missed_frames}, transfers retried "
                 f"{d.driver.retried}" if d.mount.kind == "tof"
                 else f"samples {d.driver.samples_read}, overruns {d.driver.overruns}")  # fmt: skip
        print(f"  {d.mount.name}: state {d.state}, boots {d.boots}, boot failures {d.boot_failures}, re-inits "
              f"{d.reinits}, NACKs {d.nacks}, timeouts {d.timeouts}, bad frames {d.bad_frames}; {extra}")  # fmt: skip
    q = SCHEMA.validate(dict(ring, imu_read_period=2.0))
    hw = _rings(q, buffers, 1e6, seed=3)
    rings = TofRingSet(hw.bus, q, buffers, clock=hw.bus.clock, sleep=hw.bus.sleep)
    rings.run_until(12 * _NS)
    imu = rings.by_name["ring_0_imu"].driver
    print(
        f"  IMU read every 2 s (FIFO holds 1.4 s at 120 Hz): overruns {imu.overruns} counted and recovered, "
        f"timestamp gaps {imu.gaps}, samples {imu.samples_read} in 12 s, streaming {rings.by_name['ring_0_imu'].state}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="simulated seconds of streaming per measurement")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    buffers = UldBuffers.from_package()
    budget(buffers, args.seconds)
    boot(buffers)
    cpu(buffers, args.seconds)
    faults(buffers)


if __name__ == "__main__":
    main()
