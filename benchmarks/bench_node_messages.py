"""Per-message CPU of the estimator nodes at the seed's rates, in one process (less noisy than a loaded launch).

Each estimator node is built on a real rclpy node (real publishers, parameters, input stage). Its inputs
for ``--seconds`` of the seed's rates are made by the simulators and serialised once; the measured loop
then does, per message, what the executor's take and the node's callback do: ``deserialize_message`` (the
rclpy conversion to a Python message) and the subscription callback with a message info, including
everything the node then publishes. The CPU time (``time.process_time``) over the data's duration is the
node's share of one core for that work; the executor's own dispatch per callback is measured apart (an
in-process publisher and a subscription with an empty callback, per message: publish + wait + take +
call, an upper bound) and added once per message.

Cases (seed rates): hinge-arc with 18 IMUs at 100 Hz and a length at 100 Hz, per-IMU sensor_msgs/Imu and
one shape_sensing/ImuArray per sweep; rigid-module with 21 WT901 at 100 Hz, per-platform and per bus
cycle; collision-pivot with its 5 inputs at 50 Hz.

    python3 benchmarks/bench_node_messages.py [--seconds 5] [--json]

Prints figures; asserts nothing. Skips where rclpy or the built package (shape_sensing.msg) is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any


def _ready() -> str:
    try:
        import rclpy  # noqa: F401
        from shape_sensing.msg import ImuArray  # noqa: F401
    except Exception as exc:
        return f"rclpy or the built package is not usable here: {exc!r}"
    return ""


def _node(name: str, overrides: dict[str, Any]) -> Any:
    import rclpy
    from rclpy.parameter import Parameter

    return rclpy.create_node(name, parameter_overrides=[Parameter(k, value=v) for k, v in overrides.items()])


def _past_start(seconds: float) -> int:
    """A start stamp such that the whole feed is stamped before it is delivered: a node skips (and warns about)
    messages stamped more than 0.5 s ahead of its clock, and a tight loop delivers faster than real time."""
    return time.time_ns() - int((seconds + 1.0) * 1e9)


def _run(feed: list[tuple[Callable[[Any, Any], None], bytes, Any]]) -> float:
    """CPU seconds to deserialise and hand over every message."""
    from rclpy.serialization import deserialize_message

    t0 = time.process_time()
    for callback, raw, cls in feed:
        callback(deserialize_message(raw, cls), {"source_timestamp": time.time_ns(), "received_timestamp": 0})
    return time.process_time() - t0


def dispatch_cost(n: int = 3000) -> float:
    """CPU seconds per message of publish + take + an empty callback through the nodes' executor, in one process."""
    import rclpy
    from sensor_msgs.msg import Imu

    from shape_sensing.nodes.executor import make_executor

    node = rclpy.create_node("bench_dispatch")
    got = [0]
    node.create_subscription(Imu, "bench_dispatch_imu", lambda m: got.__setitem__(0, got[0] + 1), 10)
    pub = node.create_publisher(Imu, "bench_dispatch_imu", 10)
    ex = make_executor()  # the nodes' executor (SHAPE_SENSING_EXECUTOR=rclpy: rclpy's own)
    ex.add_node(node)
    msg = Imu()
    for _ in range(50):  # discovery
        pub.publish(msg)
        ex.spin_once(timeout_sec=0.01)
    got[0] = 0
    t0 = time.process_time()
    for _ in range(n):
        pub.publish(msg)
        ex.spin_once(timeout_sec=0.05)
    cpu = time.process_time() - t0
    ex.remove_node(node)
    node.destroy_node()
    return cpu / max(1, got[0])


def hinge_arc(seconds: float, array: bool) -> dict[str, Any]:
    from rclpy.serialization import serialize_message

    from shape_sensing.messages import common as msgs
    from shape_sensing.messages.factory import MessageFactory
    from shape_sensing.messages.imu_array import imu_array_msg
    from shape_sensing.nodes.hinge_arc_estimator import HingeArcEstimatorNode
    from shape_sensing.pipelines.vine_imu import length_message
    from shape_sensing.sim.vine import VineSimConfig, VineSimulator

    f = MessageFactory("rclpy")
    sim = VineSimulator(VineSimConfig(scenario="active"))
    node = _node("bench_hinge_arc_estimator", {"imu_array_topic": "imus" if array else ""})
    app = HingeArcEstimatorNode(node)
    imu_cls, arr_cls, js_cls = (f.cls(t) for t in ("sensor_msgs/msg/Imu", "shape_sensing/msg/ImuArray",
                                                   "sensor_msgs/msg/JointState"))  # fmt: skip
    feed = []
    rate = 100.0
    t_start = _past_start(seconds)
    for k in range(int(seconds * rate)):
        t = k / rate
        stamp = t_start + int(t * 1e9)
        truth = sim.truth(t)
        feed.append((app._on_length, serialize_message(length_message(stamp, "vine_base", truth.length, 0.0, f)),
                     js_cls))  # fmt: skip
        samples = [replace(s, stamp_ns=stamp) for s in sim.imu_samples(t)]
        if array:
            feed.append((app._on_imu_array, serialize_message(imu_array_msg(stamp, "vine_base", samples, f)), arr_cls))
        else:
            feed += [(lambda m, i, j=j: app._on_imu(j, m, i), serialize_message(msgs.imu_to_msg(s, f)), imu_cls)
                     for j, s in enumerate(samples)]  # fmt: skip
    cpu = _run(feed)
    app.inputs.flush()
    out = {"messages": len(feed), "estimates": app.tracker.stats.estimates, "cpu_s": cpu, "data_s": seconds}
    node.destroy_node()
    return out


def rigid_module(seconds: float, array: bool) -> dict[str, Any]:
    from rclpy.serialization import serialize_message

    from shape_sensing.messages import common as msgs
    from shape_sensing.messages.factory import MessageFactory
    from shape_sensing.messages.imu_array import imu_array_msg
    from shape_sensing.nodes.rigid_module_estimator import RigidModuleEstimatorNode
    from shape_sensing.sim.hyper_redundant import SCHEMA, EmulatedSensors, HyperRedundantSim

    f = MessageFactory("rclpy")
    p = SCHEMA.defaults() | {"n_modules": 20}
    sim = HyperRedundantSim(n_modules=p["n_modules"], d1=p["d1"], d2=p["d2"], amplitude_deg=p["amplitude_deg"],
                            mount_deg=p["mount_deg"], yaw_disturbance_deg=p["yaw_disturbance_deg"], rods_s=0.0,
                            seed=1)  # fmt: skip
    sensors = EmulatedSensors(p["n_modules"] + 1, rate_hz=100.0, byte_error_rate=0.0, seed=2, frame_prefix="")
    node = _node("bench_rigid_module_estimator", {"n_modules": 20, "imu_array_topic": "imu/array" if array else ""})
    app = RigidModuleEstimatorNode(node)
    imu_cls, arr_cls = f.cls("sensor_msgs/msg/Imu"), f.cls("shape_sensing/msg/ImuArray")
    feed = []
    t_start = _past_start(seconds)
    for k in range(int(seconds * 100)):
        stamp = t_start + k * 10_000_000
        recovered = sensors.samples(sim.snapshot(k / 100.0), stamp)
        if array:
            raw = serialize_message(imu_array_msg(stamp, "base_link", [s for _, s in recovered], f))
            feed.append((app._on_imu_array, raw, arr_cls))
        else:
            feed += [(lambda m, info, i=i: app._on_imu(i, m, info), serialize_message(msgs.imu_to_msg(s, f)), imu_cls)
                     for i, s in recovered]  # fmt: skip
    cpu = _run(feed)
    app.inputs.flush()
    out = {"messages": len(feed), "estimates": app.tracker.stats.estimates, "cpu_s": cpu, "data_s": seconds}
    node.destroy_node()
    return out


def collision(seconds: float) -> dict[str, Any]:
    from rclpy.serialization import serialize_message

    from shape_sensing.estimators.collision_pivot import SCHEMA as ESTIMATOR_SCHEMA
    from shape_sensing.messages.factory import MessageFactory
    from shape_sensing.nodes.collision_pivot_estimator import CollisionPivotEstimatorNode
    from shape_sensing.pipelines.vine_collision_rig import SimulatedRig
    from shape_sensing.sim.vine_collision import SCHEMA, VineCollisionSim, three_course

    f = MessageFactory("rclpy")
    p = SCHEMA.defaults()
    sim = VineCollisionSim(three_course(), rate=p["rate"], speed=p["speed"], pressure=p["pressure"], seed=0)
    rig = SimulatedRig(sim, ESTIMATOR_SCHEMA.defaults(), f, hold_time=p["hold_time"], seed=0)
    node = _node("bench_collision_pivot_estimator", {})
    app = CollisionPivotEstimatorNode(node)
    topics = {app.params[f"{k}_topic"]: k for k in ("length", "pressure", "cap", "imu", "wrench")}
    feed = []
    t_start = _past_start(seconds)
    rate = sim.rate
    for k, s in enumerate(sim.run()):
        if k >= seconds * rate:
            break
        for raw in rig.step(s, t_start + int(k / rate * 1e9)):
            kind = topics.get(raw.topic)
            if kind is not None:
                feed.append((lambda m, i, kind=kind: app._on_input(kind, m, i), serialize_message(raw.msg),
                             type(raw.msg)))  # fmt: skip
    cpu = _run(feed)
    app.inputs.flush()
    out = {"messages": len(feed), "estimates": app.tracker.steps if hasattr(app.tracker, "steps") else -1,
           "cpu_s": cpu, "data_s": seconds}  # fmt: skip
    node.destroy_node()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="seconds of data per case")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    why = _ready()
    if why:
        print(f"bench_node_messages: skipped: {why}")
        return 0
    import rclpy

    rclpy.init()
    results: dict[str, Any] = {}
    try:
        per_dispatch = dispatch_cost()
        cases: dict[str, Callable[[], dict[str, Any]]] = {
            "hinge_arc 18 IMU @100 Hz, per-IMU Imu": lambda: hinge_arc(args.seconds, False),
            "hinge_arc 18 IMU @100 Hz, ImuArray": lambda: hinge_arc(args.seconds, True),
            "rigid_module 21 WT901 @100 Hz, per-platform Imu": lambda: rigid_module(args.seconds, False),
            "rigid_module 21 WT901 @100 Hz, ImuArray": lambda: rigid_module(args.seconds, True),
            "collision_pivot 5 inputs @50 Hz": lambda: collision(args.seconds),
        }
        for name, fn in cases.items():
            if not args.json:
                print(f"{name} ...", file=sys.stderr, flush=True)
            r = fn()
            r["node_percent"] = 100.0 * r["cpu_s"] / r["data_s"]
            r["dispatch_percent"] = 100.0 * per_dispatch * r["messages"] / r["data_s"]
            r["total_percent"] = r["node_percent"] + r["dispatch_percent"]
            r["ms_per_message"] = 1e3 * r["cpu_s"] / max(1, r["messages"])
            results[name] = r
    finally:
        rclpy.try_shutdown()
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"dispatch_ms": per_dispatch * 1e3, "load_average_1min": load, "results": results}, indent=1))
        return 0
    print(f"per-message CPU in one process ({args.seconds:g} s of data per case; load average {load:.1f}; "
          f"executor dispatch {per_dispatch * 1e3:.3f} ms per message, added per message)")  # fmt: skip
    for name, r in results.items():
        print(f"  {name:<48} {r['messages'] / r['data_s']:6.0f} msg/s  {r['ms_per_message']:.3f} ms/msg  "
              f"node {r['node_percent']:5.1f} % + dispatch {r['dispatch_percent']:5.1f} % = "
              f"{r['total_percent']:5.1f} % of one core")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
