"""Quaternion spikes that reach the estimator, before and after the BNO055 frame checks.

A simulated stream modelled on the spikes users of other BNO055 drivers report (one every 1-3 s
per sensor: torn reads, bus errors that return plausible bytes): every read covering the quaternion
registers is corrupted with probability ``--rate`` (0.005 at 100 Hz: one every 2 s per sensor) by one
of seven failures (:mod:`shape_sensing.sim.bno055_glitches`), while each sensor turns smoothly (peak
180 deg/s). The BNO055 chain driver reads the chips through the simulated mux tree; a sample it hands
on (the estimator's input) is a spike when it is more than 2 deg from the orientation the chip was
given. "before": the quaternion norm check only (the driver before the frame checks); "after": all
checks. The same corrupted reads in both runs (same seed).

Run: ``.venv/bin/python benchmarks/bench_bno055_glitches.py [--seconds 60] [--sensors 6] [--rate 0.005]``
"""

from __future__ import annotations

import argparse
import json
import time

from shape_sensing.sim.register_level import spike_stream


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--sensors", type=int, default=6)
    ap.add_argument("--rate", type=float, default=0.005)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    for label, checks in (("before", False), ("after", True)):
        c0 = time.process_time()
        r = spike_stream(frame_checks=checks, seconds=args.seconds, n_sensors=args.sensors, rate=args.rate,
                         seed=args.seed)  # fmt: skip
        cpu = time.process_time() - c0
        print(f"{label:6s} corrupted reads {sum(r.injected.values()):4d} {json.dumps(r.injected, sort_keys=True)}")
        kinds = json.dumps(r.spikes_out_by_kind, sort_keys=True)
        print(f"{label:6s} samples handed on {r.readings}, spikes among them {r.spikes_out} {kinds}, "
              f"largest error {r.worst_out_deg:.1f} deg, clean samples dropped {r.dropped_clean}")  # fmt: skip
        print(f"{label:6s} dropped and counted {json.dumps(r.bad_frames, sort_keys=True)}  (CPU {cpu:.1f} s)")
    with open("/proc/loadavg") as f:
        print(f"load average: {f.read().split()[:3]}")


if __name__ == "__main__":
    main()
