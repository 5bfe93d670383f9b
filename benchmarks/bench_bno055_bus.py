"""Bus traffic, achievable sweep rate and CPU time of the BNO055 chain driver (18 sensors, two-level mux tree).

Counts come from the simulated bus's transaction log, which counts what the
wire carries: 1 bit per START, repeated START and STOP, 9 bits per byte
(8 data + ACK/NACK). Printed per profile (which Imu fields every sweep):

* bytes and transactions per sweep against two references measured on the
  same sweeps:
  - ``protocol minimum``: for every sensor read in the sweep, its published
    bytes plus one register-addressed read header (3 bytes: address+W,
    register, address+R) for each register run the BNO055 map forces
    (fields that are not contiguous cannot share a read without carrying the
    bytes between them), plus one 2-byte mux write per leaf segment beyond
    the first (each segment must be switched to once);
  - ``payload only``: the published data bytes alone (no addressing at all;
    no I2C driver can reach it);
  - a naive driver on the same cost model: select the path's muxes, read
    0x08-0x27 (32 bytes) and 0x34-0x35, deselect, for every sensor.
* the highest sweep rate the bus allows at 400 kHz (bits per sweep);
* Python CPU time per sweep (driver + simulator), the simulator's share
  (the same transactions replayed on the simulated bus alone), and the
  driver's share as the difference.

Run: ``.venv/bin/python benchmarks/bench_bno055_bus.py [--sweeps N] [--base REV]`` (``--base``: also the CPU
per sweep of this checkout and of revision ``REV`` in alternating rounds, with their ratio).
"""

from __future__ import annotations

import argparse
import logging
import time

from shape_sensing.drivers.bno055 import FIELDS, plan_reads
from shape_sensing.drivers.bno055_chain import STATUS_FIELDS, Bno055Chain, ChainOptions, example_topology_params
from shape_sensing.drivers.i2c_topology import Topology
from shape_sensing.sim.register_level import build_simulated_hardware

BITRATE = 400_000.0
PROFILES = {
    "orientation": ("orientation",),
    "orientation+gyro (vine config)": ("orientation", "angular_velocity"),
    "full Imu": ("orientation", "angular_velocity", "linear_acceleration"),
}


def minimum_for(reading_fields: list[tuple[str, ...]], n_segments: int) -> tuple[int, int, int]:
    """(protocol-minimum bytes, its transactions, payload-only bytes) for the sensors read in one sweep."""
    total = trans = payload = 0
    for fields in reading_fields:
        plan = plan_reads(fields)
        payload += sum(FIELDS[f][1] for f in fields)
        # one header per read of the optimal plan, gap bytes excluded (they are not published data)
        total += sum(FIELDS[f][1] for f in fields) + 3 * len(plan.reads)
        trans += len(plan.reads)
    total += 2 * (n_segments - 1)
    trans += n_segments - 1
    return total, trans, payload


def naive_per_sweep(topo: Topology) -> tuple[int, int, int]:
    """(bytes, transactions, bits) of the naive driver for one sweep."""
    nbytes = ntrans = nbits = 0
    for s in topo.sensors:
        depth = len(topo.sensor_path(s))
        # select + deselect each mux on the path: write_byte = 2 bytes, 20 bits
        nbytes += 2 * depth * 2
        ntrans += 2 * depth
        nbits += 2 * depth * 20
        for length in (32, 2):
            nbytes += 3 + length
            ntrans += 1
            nbits += 30 + 9 * length
    return nbytes, ntrans, nbits


def run_profile(name: str, fields: tuple[str, ...], sweeps: int, faults: bool = False) -> None:
    params = example_topology_params()
    topo = Topology.from_params(params)
    segments = {topo.sensor_path(s) for s in topo.sensors}
    hw = build_simulated_hardware(topo, bitrate=BITRATE)
    for chip in hw.sensors.values():
        chip.calibrate()
    options = ChainOptions(imu_fields=fields, mag_rate=5.0, status_rate=1.0)
    chain = Bno055Chain(hw.bus, topo, options, clock=hw.bus.clock, sleep=hw.bus.sleep)
    assert chain.start() == []
    for _ in range(20):  # settle (calibration capture visits happen at start)
        chain.sweep()
    if faults:  # 1 % NACKs on every sensor address, one sensor dead
        hw.bus.nack_rate.update({0x28: 0.01, 0x29: 0.01})
        hw.set_dead("imu_09")
    hw.bus.log.clear()
    s0 = hw.bus.stats.copy()
    n_readings = 0
    min_bytes = min_trans = payload = 0
    cpu0 = time.process_time()
    for _ in range(sweeps):
        res = chain.sweep()  # back to back: the sweep rate is what the bus allows
        n_readings += len(res.readings)
        for r in res.readings:
            got = list(fields)
            if r.magnetic_field is not None:
                got.append("magnetic_field")
            if r.temperature is not None:
                got += list(STATUS_FIELDS)
            b, t, p = minimum_for([tuple(got)], 1)
            min_bytes += b
            min_trans += t
            payload += p
        min_bytes += 2 * (len(segments) - 1)
        min_trans += len(segments) - 1
    cpu = (time.process_time() - cpu0) / sweeps
    d = hw.bus.stats.minus(s0)
    # Simulator share: replay the logged transactions on the bus alone.
    log = list(hw.bus.log)  # the last transactions (the log keeps 10 000)
    replay = _replay_cost(hw, log) * d.transactions / max(len(log), 1) / sweeps
    nb, nt, nbits = naive_per_sweep(topo)
    per_bytes, per_trans, per_bits = d.bytes / sweeps, d.transactions / sweeps, d.bits / sweeps
    print(f"== {name}: fields {list(fields)}, magnetometer 5 Hz, status block 1 Hz, {sweeps} sweeps")
    if faults:
        print(f"  faults: 1 % NACK on 0x28/0x29, imu_09 dead; NACKed transactions {d.nacks}")
        print(f"  samples per sweep              {n_readings / sweeps:8.2f} of 18")
    print(f"  bus bytes per sweep            {per_bytes:8.1f}   transactions {per_trans:6.1f}")
    print(f"  protocol minimum               {min_bytes / sweeps:8.1f}   transactions {min_trans / sweeps:6.1f}")
    print(
        f"  ratio bytes (target <= 1.15)   {d.bytes / min_bytes:8.3f}   transactions {d.transactions / min_trans:6.3f}"
    )
    print(f"  payload-only bytes             {payload / sweeps:8.1f}   ratio {d.bytes / payload:.3f}")
    print(f"  naive driver bytes             {nb:8.1f}   transactions {nt:6.1f}  (ratio to ours {nb / per_bytes:.2f})")
    print(f"  bits per sweep                 {per_bits:8.1f}   naive {nbits}")
    print(
        f"  max sweep rate at 400 kHz      {BITRATE / per_bits:8.1f} Hz (target >= 100)  naive {BITRATE / nbits:.1f} Hz"
    )
    print(f"  CPU per sweep (driver + sim)   {cpu * 1e3:8.3f} ms  = {cpu / (per_bits / BITRATE):.2f} x the bus time")
    print(f"  of which simulator (replayed)  {replay * 1e3:8.3f} ms;  driver ~{(cpu - replay) * 1e3:.3f} ms")
    mux_writes = d.by_op["write_byte"] / sweeps
    print(f"  mux writes per sweep           {mux_writes:8.2f}   (leaf segments {len(segments)})")


def _replay_cost(hw, log) -> float:
    """CPU seconds the simulated bus alone spends on the logged transactions (replayed to one open sensor)."""
    bus = hw.bus
    bus.nack_rate.clear()
    bus.write_byte(0x70, 0x01)
    bus.write_byte(0x71, 0x01)
    c0 = time.process_time()
    for t in log:
        if not t.ok:
            continue
        if t.op == "read_i2c_block_data":
            bus.read_i2c_block_data(0x28, 0x20, t.read)
        elif t.op == "write_byte":
            bus.write_byte(0x71, 0x01)
        elif t.op == "read_byte":
            bus.read_byte(0x71)
        elif t.op == "read_byte_data":
            bus.read_byte_data(0x28, 0x00)
    return time.process_time() - c0


def smbus2_cpu(sweeps: int) -> None:
    """CPU per sweep when the driver goes through a real smbus2.SMBus object (ioctls emulated, no syscalls)."""
    import smbus2
    import smbus2.smbus2 as smbus2_module

    from shape_sensing.sim.i2c_dev import I2cDevEmulator

    topo = Topology.from_params(example_topology_params())
    hw = build_simulated_hardware(topo, bitrate=BITRATE)
    for chip in hw.sensors.values():
        chip.calibrate()
    emulator = I2cDevEmulator(hw.bus)
    real_ioctl = smbus2_module.ioctl
    smbus2_module.ioctl = emulator.ioctl
    try:
        bus = smbus2.SMBus()
        bus.fd = 1000
        options = ChainOptions(imu_fields=PROFILES["orientation+gyro (vine config)"], mag_rate=5.0)
        chain = Bno055Chain(bus, topo, options, clock=hw.bus.clock, sleep=hw.bus.sleep)
        assert chain.start() == []
        for _ in range(20):
            chain.sweep()
        r0 = emulator.requests
        c0 = time.process_time()
        for _ in range(sweeps):
            chain.sweep()
        cpu = (time.process_time() - c0) / sweeps
    finally:
        smbus2_module.ioctl = real_ioctl
    print(f"== orientation+gyro through a real smbus2.SMBus object (i2c-dev ioctls emulated), {sweeps} sweeps")
    calls = (emulator.requests - r0) / sweeps
    print(f"  CPU per sweep (smbus2 + driver + sim) {cpu * 1e3:.3f} ms; ioctl calls per sweep {calls:.1f}")
    print("  (each ioctl is a system call on hardware; its kernel and wait time is not counted here)")


def soak(seconds: float) -> None:
    """Mixed faults over ``seconds`` of simulated time at 100 Hz: what keeps streaming, what was counted."""
    topo = Topology.from_params(example_topology_params())
    hw = build_simulated_hardware(topo, bitrate=BITRATE, seed=7)
    for chip in hw.sensors.values():
        chip.calibrate()
    chain = Bno055Chain(hw.bus, topo, ChainOptions(imu_fields=PROFILES["orientation+gyro (vine config)"], mag_rate=5.0),
                        clock=hw.bus.clock, sleep=hw.bus.sleep)  # fmt: skip
    assert chain.start() == []
    hw.bus.nack_rate.update({0x28: 0.002, 0x29: 0.002})
    hw.bus.timeout_rate.update({0x28: 0.0005})
    rng = __import__("numpy").random.default_rng(7)
    names = list(hw.sensors)
    period = 10_000_000
    t_end = hw.bus.now_ns + int(seconds * 1e9)
    samples = sweeps = 0
    events: list[str] = []
    cpu0 = time.process_time()
    while hw.bus.now_ns < t_end:
        t = hw.bus.now_ns
        k = sweeps
        if k % 1000 == 500:  # every 10 s: one sensor resets
            name = names[int(rng.integers(len(names)))]
            hw.reset_sensor(name)
            events.append(f"reset {name}")
        if k % 3000 == 1500:  # every 30 s: a child mux dies for 2 s
            hw.set_mux_dead("arm_b")
            events.append("arm_b dead 2 s")
        if k % 3000 == 1700:
            hw.set_mux_dead("arm_b", False)
        samples += len(chain.sweep().readings)
        sweeps += 1
        hw.bus.now_ns = max(hw.bus.now_ns, t + period)
    cpu = time.process_time() - cpu0
    resets = sum(h.resets for h in chain.health.values())
    profiles_ok = all(
        bytes(chip.regs[0x55:0x6B]) == chain.calibration.profiles[n].to_bytes() for n, chip in hw.sensors.items()
    )
    print(f"== soak: {seconds:g} s simulated at 100 Hz, {sweeps} sweeps, CPU {cpu:.1f} s")
    n_resets = sum(e.startswith("reset") for e in events)
    n_mux = len(events) - n_resets
    print(f"  injected: 0.2 % NACK, 0.05 % timeouts on 0x28, {n_resets} sensor resets, {n_mux} x arm_b dead 2 s")
    print(f"  samples {samples} = {samples / sweeps:.2f} per sweep of 18")
    print(f"  counted: nacks {sum(h.nacks for h in chain.health.values())}, timeouts "
          f"{sum(h.timeouts for h in chain.health.values())}, resets {resets}, "
          f"mux failures {sum(m.failures for m in chain.mux_health.values())}")  # fmt: skip
    print(f"  every chip holds its stored profile at the end: {profiles_ok}; streaming now: "
          f"{sum(not h.stale and h.phase == 'ok' for h in chain.health.values())}/18; timing violations "
          f"{sum(c.timing_violations for c in hw.sensors.values())}; conflicts {hw.bus.stats.conflicts}")  # fmt: skip


def measure_cpu(sweeps: int) -> dict[str, float]:
    """CPU seconds per sweep (driver + simulator) and the simulator's replayed share, per profile."""
    out = {}
    for name, fields in PROFILES.items():
        topo = Topology.from_params(example_topology_params())
        hw = build_simulated_hardware(topo, bitrate=BITRATE)
        for chip in hw.sensors.values():
            chip.calibrate()
        chain = Bno055Chain(hw.bus, topo, ChainOptions(imu_fields=fields, mag_rate=5.0, status_rate=1.0),
                            clock=hw.bus.clock, sleep=hw.bus.sleep)  # fmt: skip
        assert chain.start() == []
        for _ in range(20):
            chain.sweep()
        hw.bus.log.clear()
        t0 = hw.bus.stats.transactions
        best = float("inf")
        for _ in range(3):
            c0 = time.process_time()
            for _ in range(sweeps):
                chain.sweep()
            best = min(best, (time.process_time() - c0) / sweeps)
        n_trans = (hw.bus.stats.transactions - t0) / (3 * sweeps)
        log = list(hw.bus.log)
        out[f"{name}|sweep"] = best
        out[f"{name}|sim"] = _replay_cost(hw, log) * n_trans / max(len(log), 1)
    return out


def compare_with(base: str, sweeps: int, rounds: int) -> None:
    """Driver CPU per sweep in this checkout and in revision ``base``, alternating, best of ``rounds``."""
    import sys
    from pathlib import Path

    sys.path.insert(1, str(Path(__file__).resolve().parent))
    import _baseline

    cur, old = _baseline.compare(Path(__file__).resolve(), ["cpu", str(sweeps)], base, rounds=rounds)
    print(f"== CPU per sweep, this checkout vs {base} (best of {rounds} alternating rounds, {sweeps} sweeps each)")
    print(f"{'':34s}{'now ms':>9}{'before ms':>11}{'speed-up':>10}   driver alone (minus the simulator's share)")
    for name in PROFILES:
        now, before = cur[f"{name}|sweep"], old[f"{name}|sweep"]
        d_now, d_before = now - cur[f"{name}|sim"], before - old[f"{name}|sim"]
        print(f"{name:34s}{now * 1e3:9.3f}{before * 1e3:11.3f}{before / now:9.2f}x   "
              f"{d_now * 1e3:.3f} ms vs {d_before * 1e3:.3f} ms: {d_before / d_now:.2f}x")  # fmt: skip


def main() -> None:
    import json
    import sys

    if sys.argv[1:3] == ["--measure", "cpu"]:  # child of compare_with (benchmarks/_baseline.py): one JSON line
        logging.basicConfig(level=logging.ERROR)
        print(json.dumps(measure_cpu(int(sys.argv[3]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=500)
    parser.add_argument("--soak", type=float, default=0.0, help="also run a mixed-fault soak of this many seconds")
    parser.add_argument("--base", default=None, help="also compare CPU per sweep with this git revision")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of the --base comparison")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)  # the fault run would log every retry
    if args.base:
        compare_with(args.base, min(args.sweeps, 200), args.rounds)
    for name, fields in PROFILES.items():
        run_profile(name, fields, args.sweeps)
    run_profile("orientation+gyro with faults", PROFILES["orientation+gyro (vine config)"], args.sweeps, faults=True)
    smbus2_cpu(args.sweeps)
    if args.soak > 0:
        soak(args.soak)


if __name__ == "__main__":
    main()
