"""Hinge-arc (vine) benchmark: the live path per IMU message and per estimate, replay and reanalyse throughput.

Every figure is measured in this checkout and in the revision it replaces
(``--base``, default the last one before the vine path was made cheap), in
the same run, and printed with their ratio. Also: the update against a plain
per-segment Python loop, and the share of one core the live node needs for
18 IMUs at 100 Hz with estimates at 30 Hz (markers at 5 Hz).

Run: .venv/bin/python benchmarks/bench_hinge_arc.py [--minutes 1] [--bag REC.mcap] [--base REV] [--prev REV]
[--skip-replay] [--skip-live]
(``--bag``: e.g. the 10-minute demo recording, ``shape-sensing demo vine-imu --duration 600``; ``--prev``: a
revision whose bulk replay is timed beside this one's, by default the one before the input records were copied
whole and the estimates' messages written as CDR straight from their arrays).
Prints figures; asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation

sys.path.insert(1, str(Path(__file__).resolve().parent))  # _baseline; the package comes from PYTHONPATH/venv

N, IMU_HZ, EST_HZ = 18, 100.0, 30.0
# The last revision whose bulk replay wrote every message through the rosbags writer one by one.
_PREV_BULK = "5b05a5a"


def naive_chain(quats: np.ndarray, spacing: float, diameter: float) -> np.ndarray:
    """Reference: the hinge-arc chain written as a plain per-segment Python loop over scipy Rotations."""
    rots = [Rotation.from_quat(q) for q in quats]
    pos = np.zeros(3)
    frame = Rotation.identity()
    prev = Rotation.identity()
    for r in rots:
        rel = prev.inv() * r
        tangent = rel.apply([0.0, 0.0, 1.0])
        s = math.hypot(tangent[0], tangent[1])
        theta = math.atan2(s, tangent[2])
        if diameter * theta <= spacing:
            rc = diameter / 2
        else:
            rc = max(spacing / theta - diameter / 2, 0.0)
        straight = max(spacing - diameter * theta, 0.0) / 2
        n = np.array([tangent[0] / s, tangent[1] / s, 0.0]) if s > 1e-12 else np.zeros(3)
        d = straight * np.array([0.0, 0.0, 1.0]) + rc * s * np.array([0.0, 0.0, 1.0])
        d = d + rc * (1 - math.cos(theta)) * n + straight * tangent
        pos = pos + frame.apply(d)
        frame = frame * rel
        prev = r
    return pos


def best(fn, number: int, repeat: int = 5) -> float:  # type: ignore[no-untyped-def]
    """Best mean time per call (s)."""
    out = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        out = min(out, (time.perf_counter() - t0) / number)
    return out


def measure_live() -> dict[str, float]:
    """Per IMU message (decode, store, stale check) and per estimate, through the node's code."""
    from shape_sensing.estimators.hinge_arc import SCHEMA
    from shape_sensing.messages import common as msgs
    from shape_sensing.messages.factory import default_factory
    from shape_sensing.pipelines.vine_imu import ShapeMessages, VineImuTracker
    from shape_sensing.types import ImuSample

    f = default_factory()
    params = SCHEMA.defaults() | {"imu_topics": [f"imu_{i:02d}/data" for i in range(N)]}
    tracker = VineImuTracker(params)
    rng = np.random.default_rng(0)
    quats = Rotation.from_rotvec(np.cumsum(rng.normal(0, 0.1, (N, 3)), axis=0)).as_quat()
    imu_msgs = [msgs.imu_to_msg(ImuSample(10_000_000, f"vine_imu_{i:02d}", quats[i]), f) for i in range(N)]
    raws = [bytes(f.typestore.serialize_cdr(m, m.__msgtype__)) for m in imu_msgs]
    lean = hasattr(msgs, "imu_orientation_from_msg")
    node_path = (
        (lambda i: tracker.push_orientation(i, *msgs.imu_orientation_from_msg(imu_msgs[i])))
        if lean
        else (lambda i: tracker.push_imu(i, msgs.imu_from_msg(imu_msgs[i])))
    )
    cdr_path = (
        (lambda i: tracker.push_orientation(i, *msgs.imu_orientation_from_cdr(raws[i])))
        if lean
        else (lambda i: tracker.push_imu(i, msgs.imu_from_cdr(raws[i])))
    )
    tracker.ticker.due(0)  # started; no tick is due before 33 ms, so no estimate is made while timing messages
    per_msg = best(lambda: [node_path(i) for i in range(N)], 200) / N
    per_msg_cdr = best(lambda: [cdr_path(i) for i in range(N)], 200) / N
    est = tracker.estimator
    valid = np.ones(N, dtype=bool)
    est.capture_offset(np.tile([0, 0, 0, 1.0], (N, 1)), valid, 0)
    update = best(lambda: est.update(quats, valid, 10**9, 1.754), 500)
    shape = est.update(quats, valid, 10**9, 1.754)
    period = round(1e9 / EST_HZ)
    builder = ShapeMessages(f, 5.0)
    shapes = []
    for k in range(30):  # one second of estimates: markers on 5 of them
        s = est.update(quats, valid, 10**9 + k * period, 1.754)
        shapes.append(s)
    build = best(lambda: [builder.build(s) for s in shapes], 5) / len(shapes)
    built = [builder.build(s) for s in shapes]
    ser = f.typestore.serialize_cdr
    serialize = best(lambda: [ser(m, m.__msgtype__) for b in built for _, m in b], 3) / len(shapes)
    del shape
    out = {"per_msg": per_msg, "per_msg_cdr": per_msg_cdr, "update": update, "build": build, "serialize": serialize}
    try:  # the CDR bytes straight from the estimates' arrays (bulk replay), where the revision has it
        from shape_sensing.messages.cdr import ShapeCdr
    except ImportError:
        return out
    out["cdr_direct"] = best(lambda: list(ShapeCdr(5.0).build_many(shapes)), 5) / len(shapes)
    return out


def measure_replay(bag: str, streaming: bool) -> dict[str, float]:
    from shape_sensing.cli.replay import replay_bag

    with tempfile.TemporaryDirectory() as tmp:
        ns = argparse.Namespace(namespace="/vine", streaming=streaming, json=True)
        t0, c0 = time.perf_counter(), time.process_time()
        replay_bag(Path(bag), Path(tmp) / "out.mcap", ns)
        out = {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0}
    if not streaming:  # where the bulk replay's time goes (CPU s per stage), a second run
        from shape_sensing.io.bag import BagWriter, bag_topics
        from shape_sensing.pipelines.vine_imu import _params_from
        from shape_sensing.pipelines.vine_imu_bulk import VineImuTracker, replay_bulk

        timings: dict[str, float] = {}
        with tempfile.TemporaryDirectory() as tmp, BagWriter(Path(tmp) / "o.mcap") as w:
            tracker = VineImuTracker(_params_from(None, bag_topics(bag).keys(), "/vine"))
            replay_bulk(Path(bag), w, tracker, "/vine", timings=timings)
            c = time.process_time()
        timings["close_bag"] = time.process_time() - c
        out |= {f"stage_{k}": v for k, v in timings.items()}
    return out


def measure_reanalyse(bag: str) -> dict[str, float]:
    from shape_sensing.cli.reanalyse import reanalyse

    t0, c0 = time.perf_counter(), time.process_time()
    reanalyse(Path(bag), subsets=["every-k=1..6"], progress=False)
    return {"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0}


def naive_comparison() -> None:
    from shape_sensing.estimators.hinge_arc import SCHEMA, HingeArcConfig, HingeArcEstimator

    params = SCHEMA.defaults() | {"imu_topics": [f"imu_{i:02d}/data" for i in range(N)]}
    est = HingeArcEstimator(HingeArcConfig.from_params(params), [f"imu_{i}" for i in range(N)])
    valid = np.ones(N, dtype=bool)
    est.capture_offset(np.tile([0, 0, 0, 1.0], (N, 1)), valid, 0)
    rng = np.random.default_rng(0)
    quats = Rotation.from_rotvec(np.cumsum(rng.normal(0, 0.1, (N, 3)), axis=0)).as_quat()
    quats[0] = [0, 0, 0, 1.0]
    fast = best(lambda: est.update(quats, valid, 1), 500)
    slow = best(lambda: naive_chain(quats[1:], 0.102, 0.129), 50)
    shape = est.update(quats, valid, 1)
    centre_tip = shape.poses[-2, :3, 3] - shape.poses[-2, :3, :3] @ est.mountings()[N - 1].T @ [0.129 / 2, 0, 0]
    agree = float(np.linalg.norm(centre_tip - naive_chain(quats[1:], 0.102, 0.129)))
    print(f"update, {N} sensors (incl. covariance, backbone, diagnostics): {fast * 1e6:8.1f} us")
    print(f"plain per-segment Python loop (positions only):             {slow * 1e6:8.1f} us  "
          f"({slow / fast:.1f}x slower; agreement {agree:.2e} m)")  # fmt: skip


def write_recording(path: Path, minutes: float) -> None:
    """A synthetic recording: 18 IMUs at 100 Hz swaying slowly."""
    from shape_sensing.io.bag import BagWriter
    from shape_sensing.messages import common as msgs
    from shape_sensing.types import ImuSample

    steps = int(minutes * 60 * IMU_HZ)
    rng = np.random.default_rng(1)
    with BagWriter(path) as w:
        f = w.factory
        topics = [f"/vine/imu_{i:02d}/data" for i in range(N)]
        for k in range(steps):
            stamp = int(k * 1e9 / IMU_HZ)
            rot = Rotation.from_rotvec(np.outer(np.full(N, 0.3 * math.sin(k / 500)), [1.0, 0, 0]))
            q = (rot * Rotation.from_rotvec(rng.normal(0, 0.002, (N, 3)))).as_quat()
            for i in range(N):
                w.write(topics[i], msgs.imu_to_msg(ImuSample(stamp, f"vine_imu_{i:02d}", q[i]), f), stamp, qos="sensor")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--measure", nargs="*", help=argparse.SUPPRESS)
    parser.add_argument("--minutes", type=float, default=1.0, help="length of the synthetic recording (no --bag)")
    parser.add_argument("--bag", type=Path, default=None, help="replay this recording instead of a synthetic one")
    parser.add_argument("--base", default=None, help="git revision to compare with (default: before this work)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of the live figures")
    parser.add_argument("--skip-replay", action="store_true", help="live figures only")
    parser.add_argument("--skip-live", action="store_true", help="replay and reanalyse figures only")
    parser.add_argument("--prev", default=_PREV_BULK, help="earlier revision whose bulk replay is timed too")
    args = parser.parse_args()
    if args.measure is not None:  # child process: one measurement, one JSON line
        what = args.measure
        if what[0] == "live":
            out = measure_live()
        elif what[0] == "replay":
            out = measure_replay(what[1], what[2] == "streaming")
        else:
            out = measure_reanalyse(what[1])
        print(json.dumps(out))
        return
    import _baseline

    base = args.base or _baseline.DEFAULT_BASE
    script = Path(__file__).resolve()
    if not args.skip_live:
        live(script, base, args.rounds)
    if args.skip_replay:
        return
    replay_figures(script, base, args.prev, args.bag, args.minutes)


def live(script: Path, base: str, rounds: int) -> None:
    import _baseline

    print(f"== vine live path: this checkout vs {base} (best of {rounds} alternating rounds)")
    cur, old = _baseline.compare(script, ["live"], base, rounds=rounds)
    rows = [
        ("per IMU message, node path (decode, store, stale check)", "per_msg"),
        ("per IMU message, from CDR bytes (streaming replay)", "per_msg_cdr"),
        ("estimate: hinge-arc update, 18 IMUs with covariance", "update"),
        ("estimate: messages (TF, path, tip, diagnostics; markers 5 Hz)", "build"),
        ("estimate: CDR serialisation of those (bags only)", "serialize"),
        ("estimate: CDR bytes straight from the arrays (bulk replay)", "cdr_direct"),
    ]
    print(f"{'':64s}{'now us':>9}{'before us':>11}{'speed-up':>10}")
    for label, key in rows:
        if key not in old:  # new in this checkout: against building and serialising the messages, same checkout
            ratio = (cur["build"] + cur["serialize"]) / cur[key]
            print(f"{label:64s}{cur[key] * 1e6:9.1f}{'-':>11}{ratio:9.1f}x (vs build + serialise, now)")
            continue
        print(f"{label:64s}{cur[key] * 1e6:9.1f}{old[key] * 1e6:11.1f}{old[key] / cur[key]:9.1f}x")

    def share(d: dict[str, float]) -> float:
        return 100.0 * (N * IMU_HZ * d["per_msg"] + EST_HZ * (d["update"] + d["build"]))

    print(f"share of one core, {N} IMUs at {IMU_HZ:g} Hz + estimates at {EST_HZ:g} Hz (node, before rclpy's own "
          f"cost): {share(cur):.1f} % (before {share(old):.1f} %)")  # fmt: skip
    print("targets: update <= 100 us, per message <= 20 us, node < 10 % of a core")
    naive_comparison()


def replay_figures(script: Path, base: str, prev: str, bag_arg: Path | None, minutes: float) -> None:
    import _baseline

    with tempfile.TemporaryDirectory() as tmp:
        bag = bag_arg
        if bag is None:
            bag = Path(tmp) / "rec.mcap"
            write_recording(bag, minutes)
        from shape_sensing.io.bag import bag_topics

        n_imu = sum(t.endswith("/data") for t in bag_topics(bag))
        from mcap.reader import make_reader

        with open(bag, "rb") as fh:
            summary = make_reader(fh).get_summary()
        assert summary is not None and summary.statistics is not None
        duration = (summary.statistics.message_end_time - summary.statistics.message_start_time) * 1e-9
        counts = summary.statistics.channel_message_counts
        n_msgs = sum(v for k, v in counts.items() if summary.channels[k].topic.endswith("/data"))
        print(f"\n== replay of {bag.name}: {duration:.0f} s, {n_imu} IMU topics, {n_msgs} IMU messages")
        with tempfile.TemporaryDirectory() as tmp2, tempfile.TemporaryDirectory() as tmp3:
            base_path = _baseline.extract(base, Path(tmp2))
            prev_path = _baseline.extract(prev, Path(tmp3))
            bulk = _baseline.run(script, ["replay", str(bag), "bulk"], None)
            prev_bulk = _baseline.run(script, ["replay", str(bag), "bulk"], prev_path)
            stream = _baseline.run(script, ["replay", str(bag), "streaming"], None)
            before = _baseline.run(script, ["replay", str(bag), "streaming"], base_path)
        print("(wall time depends on the machine's load; CPU time is this process's own)")
        rows = (
            ("bulk (default)", bulk),
            (f"bulk before ({prev})", prev_bulk),
            ("streaming (--streaming)", stream),
            (f"before ({base})", before),
        )
        for label, d in rows:
            print(
                f"{label:26s} {d['wall']:7.1f} s wall, {d['cpu']:6.1f} s CPU: {duration / d['wall']:6.1f}x real time "
                f"by wall, {duration / d['cpu']:6.1f}x by CPU; {before['cpu'] / d['cpu']:4.1f}x less CPU than before"
            )
        print(f"target: >= 200x real time; bulk now {prev_bulk['cpu'] / bulk['cpu']:.1f}x less CPU than bulk before")
        for label, d in (("now", bulk), (f"before ({prev})", prev_bulk)):
            stages = ", ".join(f"{k[6:]} {v:.2f} s" for k, v in d.items() if k.startswith("stage_"))
            print(f"bulk replay CPU by stage, {label}: {stages}")
        with tempfile.TemporaryDirectory() as tmp3:
            prev_path = _baseline.extract(prev, Path(tmp3))
            ra = _baseline.run(script, ["reanalyse", str(bag)], None)
            ra_prev = _baseline.run(script, ["reanalyse", str(bag)], prev_path)
        print(
            f"\n== reanalyse, six subsets (every-k=1..6): {ra['wall']:.1f} s wall, {ra['cpu']:.1f} s CPU; "
            f"at {prev}: {ra_prev['wall']:.1f} s wall, {ra_prev['cpu']:.1f} s CPU; "
            f"six replays before: {6 * before['cpu']:.0f} s CPU ({6 * before['cpu'] / ra['cpu']:.0f}x); target < 30 s"
        )


if __name__ == "__main__":
    main()
