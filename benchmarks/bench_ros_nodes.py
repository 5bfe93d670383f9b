"""ROS 2 benchmark of every launch file: CPU share per node, output rate, latency, dropped inputs, per-message cost.

For each launch file of the package that runs without hardware (its simulator, a driver's register-level
simulation, or a demo bag played into it) this runs ``ros2 launch``, waits for the first output, warms up,
then for ``--seconds`` measures

* the CPU share of each process of the launch (user + system time over wall time, from /proc via psutil;
  100 % = one core), the estimator's as a ratio to that of the process feeding it (the simulator, the
  simulated driver, ``ros2 bag play``) measured in the same run;
* the estimator's input message rate (a probe subscribed to its input topics) and its CPU per input message;
* the output rate and the latency of the outputs (receive time minus stamp; median and p95; not for bags
  played with their own clock, whose stamps are not wall time);
* the inputs the estimator dropped, decimated, found late or missing, from its ``<node>: inputs`` status on
  /diagnostics (absent in builds without the input stage: n/a).

The continuum estimator's launch is fed a recorded trial of the space_time_continuum dataset (robot 2,
``shape-sensing eval-continuum`` writes it as a bag with the node's parameters) where the dataset lies beside
the repository, the growth planner goal poses at 5 Hz from the probe. Launch files that need hardware
(hyper_redundant, vine_collision: their estimators are measured in the ``_sim`` launch files) are listed with
the reason and not run.

``--workspace`` (repeatable) runs every case on each colcon install (``<ws>/install/setup.bash``), one after the
other per case, so that two builds are compared in the same run under the same load. ``--case`` picks cases;
``--hog N`` runs N busy processes beside the launch (a loaded robot computer). ``--rounds N`` measures each case N
times, the builds taking turns, and prints each build's median: a shared machine's speed drifts by a third between
minutes, more than most changes measured here.

    python3 benchmarks/bench_ros_nodes.py --workspace .ros-ws/plain [--workspace other-ws] [--seconds 10]
        [--rounds 3] [--json]

Prints figures (and the load average); asserts nothing about speed. Skips with a message where ROS 2 is absent.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Case:
    """One launch file as benchmarked."""

    name: str
    launch: str
    args: dict[str, str]
    estimators: list[str]  # process names (node executables) whose CPU is measured as "estimator"
    feeder: str  # the process that feeds them (simulator, driver, ros2 bag play)
    inputs: list[tuple[str, str]]  # (topic, type) the (first) estimator subscribes to
    output: tuple[str, str]  # (topic, type) of the estimate
    nominal: str  # the rates, as stated by the seed / launch
    sim_time: bool = False  # stamps are a bag's: no latency
    needs_demo: str = ""  # a `shape-sensing demo` to run first; {out} in args is replaced by its output dir
    diag_nodes: list[str] = field(default_factory=list)
    goals: tuple[str, float] = ("", 0.0)  # (topic, rate): the probe publishes goal poses there (the planner)
    play: str = ""  # a bag ({out}/...) the benchmark plays into the launch with `shape-sensing play-bag`
    play_node: str = ""  # the node play-bag waits for
    needs_dataset: bool = False  # the space_time_continuum dataset beside the repository (../shared/datasets)


def _vine_imu_inputs(array: bool) -> list[tuple[str, str]]:
    imus = (
        [("/vine/imus", "shape_sensing/msg/ImuArray")]
        if array
        else [(f"/vine/imu_{i:02d}/data", "sensor_msgs/msg/Imu") for i in range(18)]
    )
    return imus + [("/vine/base/length", "sensor_msgs/msg/JointState")]


def _hyper_inputs(array: bool, n: int) -> list[tuple[str, str]]:
    ns = "/hyper_redundant"
    if array:
        return [(f"{ns}/imu/array", "shape_sensing/msg/ImuArray")]
    return [(f"{ns}/imu/platform_{i}", "sensor_msgs/msg/Imu") for i in range(n + 1)]


def cases(array_capable: bool) -> list[Case]:
    """The cases; ``array_capable``: the build has shape_sensing/ImuArray (else the per-sensor topics)."""
    out = [
        Case("vine_imu_sim", "vine_imu_sim.launch.xml",
             {"imu_array_topic": "imus"} if array_capable else {}, ["hinge_arc_estimator"], "vine_imu_simulator",
             _vine_imu_inputs(array_capable), ("/vine/shape/path", "nav_msgs/msg/Path"),
             "18 IMUs at 100 Hz, shape at 30 Hz", diag_nodes=["/vine/hinge_arc_estimator"]),
        Case("hyper_redundant_sim", "hyper_redundant_sim.launch.xml",
             {"n_modules": "20"} | ({"imu_array_topic": "imu/array"} if array_capable else {}),
             ["rigid_module_estimator"], "hyper_redundant_simulator", _hyper_inputs(array_capable, 20),
             ("/hyper_redundant/shape/path", "nav_msgs/msg/Path"), "21 WT901 at 100 Hz, shape at 20 Hz",
             diag_nodes=["/hyper_redundant/rigid_module_estimator"]),
        Case("vine_collision_sim", "vine_collision_sim.launch.xml", {},
             ["collision_pivot_estimator"], "vine_collision_simulator",
             [("/vine/base/length", "sensor_msgs/msg/JointState"),
              ("/vine/base/pressure", "sensor_msgs/msg/FluidPressure"),
              ("/vine/cap/state", "shape_sensing/msg/ContactCapState"), ("/vine/cap/imu", "sensor_msgs/msg/Imu"),
              ("/vine/obstacle/wrench", "geometry_msgs/msg/WrenchStamped")],
             ("/vine/collision/pivot", "shape_sensing/msg/PivotEstimate"), "5 inputs at 50 Hz, 2 estimators",
             diag_nodes=["/vine/collision_pivot_estimator", "/vine/collision_pivot_estimator_paper"]),
        Case("vine_imu (driver simulate)", "vine_imu.launch.xml", {"driver": "true", "simulate": "true"},
             ["hinge_arc_estimator"], "bno055_chain", [(f"/vine/imu_{i:02d}/data", "sensor_msgs/msg/Imu")
                                                       for i in range(18)],
             ("/vine/shape/path", "nav_msgs/msg/Path"), "BNO055 chain (register-level simulation)",
             diag_nodes=["/vine/hinge_arc_estimator"]),
        Case("bno055_chain (simulate)", "bno055_chain.launch.xml", {"simulate": "true"}, ["bno055_chain"],
             "bno055_chain", [], ("/vine/imu_00/data", "sensor_msgs/msg/Imu"), "driver only"),
        Case("tof_rings (simulate)", "tof_rings.launch.xml", {"simulate": "true"}, ["tof_ring"], "tof_ring", [],
             ("/tof_rings/ring_0_tof_0/frame", "shape_sensing/msg/TofFrame"), "driver only"),
        Case("continuum_tof (demo bag, 1x)", "continuum_tof.launch.xml",
             {"map": "{out}/prior_map.ply", "bag": "{out}/tof-continuum.mcap", "use_sim_time": "true"},
             ["continuum_estimator"], "ros2 bag play", [], ("/continuum/shape/tip",
                                                             "geometry_msgs/msg/PoseWithCovarianceStamped"),
             "16 ToF at 15 Hz, 5 gyros at 120 Hz, strain, window 4 at 10 Hz", sim_time=True,
             needs_demo="tof-continuum", diag_nodes=["/continuum/continuum_estimator"]),
        Case("growth_planner", "growth_planner.launch.xml", {}, ["growth_planner"], "growth_planner",
             [("/growing/goal_pose", "geometry_msgs/msg/PoseStamped")], ("/growing/plan/path", "nav_msgs/msg/Path"),
             "goals at 5 Hz, each a 3D Dubins plan", goals=("/growing/goal_pose", 5.0)),
        Case("continuum_estimator (dataset bag, 1x)", "continuum_estimator.launch.xml",
             {"config": "{out}/slow_free_space_window_params.yaml", "use_sim_time": "true"},
             ["continuum_estimator"], "ros2 bag play",
             [("/continuum/base_pose", "geometry_msgs/msg/PoseWithCovarianceStamped"),
              ("/continuum/tip_pose", "geometry_msgs/msg/PoseWithCovarianceStamped"),
              ("/continuum/gyro_tip/data", "sensor_msgs/msg/Imu"), ("/continuum/gyro_mid/data", "sensor_msgs/msg/Imu")],
             ("/continuum/shape/tip", "geometry_msgs/msg/PoseWithCovarianceStamped"),
             "recorded robot 2: 2 pose sensors, 2 gyros; window 4 at 30 Hz", sim_time=True, needs_dataset=True,
             play="{out}/slow_free_space_window_bag", play_node="/continuum/continuum_estimator",
             diag_nodes=["/continuum/continuum_estimator"]),
    ]  # fmt: skip
    for c in out:  # the ToF launch's inputs, for its CPU per input
        if c.name.startswith("continuum_tof"):
            c.inputs.extend([(f"/tof/tof_{r}_{j}", "shape_sensing/msg/TofFrame") for r in range(5) for j in range(3)])
            c.inputs.append(("/tof/tof_tip", "shape_sensing/msg/TofFrame"))
            c.inputs.append(("/strain", "shape_sensing/msg/StrainArray"))
            c.inputs.extend([(f"/gyro/ring{r}", "sensor_msgs/msg/Imu") for r in range(5)])
    return out


NOT_RUN = {
    "hyper_redundant.launch.xml": "WT901 drivers on serial ports (hardware); the estimator: hyper_redundant_sim",
    "vine_collision.launch.xml": "base station, contact cap and force sensor drivers (hardware); see the _sim",
}  # fmt: skip
DATASET = ROOT.parent / "shared" / "datasets" / "space_time_continuum"


def _ros_ready() -> str:
    if "ROS_DISTRO" not in os.environ:
        return "ROS 2 is not sourced (source /opt/ros/<distro>/setup.bash)"
    try:
        import psutil  # noqa: F401
        import rclpy  # noqa: F401
    except Exception as exc:
        return f"rclpy or psutil is not usable here: {exc!r}"
    return ""


def workspace_env(ws: Path) -> dict[str, str]:
    """The environment of ``source <ws>/install/setup.bash`` on top of the current one."""
    setup = ws / "install" / "setup.bash"
    if not setup.is_file():
        raise SystemExit(f"bench_ros_nodes: no {setup}; build with colcon first (scripts/test_ros.sh)")
    out = subprocess.run(["bash", "-c", f"source {setup} >/dev/null && env -0"], capture_output=True, check=True)
    env = dict(kv.split("=", 1) for kv in out.stdout.decode().split("\0") if "=" in kv)
    return env


def _cpu(proc: Any) -> float:
    t = proc.cpu_times()
    return float(t.user + t.system)


def _percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    return s[min(len(s) - 1, max(0, round(q / 100.0 * (len(s) - 1))))]


def _procs(launch_pid: int) -> dict[str, Any]:
    import psutil

    out: dict[str, Any] = {}
    for p in psutil.Process(launch_pid).children(recursive=True):
        try:
            cmd = p.cmdline()
        except Exception:
            continue
        text = " ".join(cmd)
        if "bag play" in text or ("play-bag" in text and "bag" in text):
            out.setdefault("ros2 bag play", p)
            continue
        for part in cmd[:2]:
            base = os.path.basename(part)
            if base and not base.startswith("python"):
                key = base
                if "__node:=" in text:
                    key = base + ":" + text.split("__node:=")[1].split()[0]
                out.setdefault(key, p)
                break
    return out


def _hog(stop: Any) -> None:
    x = 0
    while not stop.is_set():
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF


def measure(case: Case, env: dict[str, str], seconds: float, warmup: float, demo_dir: Path | None) -> dict[str, Any]:
    """Run one case on one install; return its figures."""
    import rclpy
    from rclpy.qos import QoSProfile, ReliabilityPolicy
    from rosidl_runtime_py.utilities import get_message

    args = {k: v.replace("{out}", str(demo_dir)) for k, v in case.args.items()}
    cmd = ["ros2", "launch", "shape_sensing", case.launch, *[f"{k}:={v}" for k, v in args.items()]]
    launch = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                              start_new_session=True)  # fmt: skip
    node = rclpy.create_node(f"bench_probe_{os.getpid()}_{int(time.time() * 1000) % 100000}")
    out_lat: list[float] = []
    n_in = [0]
    diag: dict[str, dict[str, str]] = {}

    def stamp_s(msg: Any) -> float:
        return msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9

    def on_out(msg: Any) -> None:
        out_lat.append(time.time() - stamp_s(msg))

    def on_in(msg: Any) -> None:
        n_in[0] += 1

    def on_diag(msg: Any) -> None:
        for st in msg.status:
            if st.name.endswith(": inputs"):
                diag[st.name] = {kv.key: kv.value for kv in st.values} | {
                    "_level": str(int.from_bytes(st.level, "little") if isinstance(st.level, bytes) else int(st.level))
                }

    best_effort = QoSProfile(depth=200, reliability=ReliabilityPolicy.BEST_EFFORT)
    with contextlib.suppress(Exception):
        node.create_subscription(get_message(case.output[1]), case.output[0], on_out, best_effort)
    for topic, typename in case.inputs:
        with contextlib.suppress(Exception):
            node.create_subscription(get_message(typename), topic, on_in, best_effort)
    goal_pub = None
    goal_k = [0]
    if case.goals[0]:
        from geometry_msgs.msg import PoseStamped

        goal_pub = node.create_publisher(PoseStamped, case.goals[0], 10)

        def send_goal() -> None:  # goals ahead of the tip, about its growth direction, each a new plan
            k = goal_k[0] = goal_k[0] + 1
            msg = PoseStamped()
            msg.header.frame_id = "growing_base"
            msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(time.time_ns(), 1_000_000_000)
            a = 0.7 * math.sin(0.9 * k)
            msg.pose.position.x, msg.pose.position.y = 0.15 * math.sin(a), 0.1 * math.cos(1.3 * k)
            msg.pose.position.z = 0.3 + 0.05 * (k % 5)
            msg.pose.orientation.y, msg.pose.orientation.w = math.sin(a / 2), math.cos(a / 2)
            goal_pub.publish(msg)

        node.create_timer(1.0 / case.goals[1], send_goal)
    play = None
    if case.play:
        bag = case.play.replace("{out}", str(demo_dir))
        inputs = [t for t, _ in case.inputs]  # only the inputs: the bag's own estimates would count as outputs
        play = subprocess.Popen(["shape-sensing", "play-bag", "--node", case.play_node, bag, "--topics", *inputs,
                                 "--", "--clock", "100", "--topics", *inputs],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                start_new_session=True)  # fmt: skip
    from diagnostic_msgs.msg import DiagnosticArray

    node.create_subscription(DiagnosticArray, "/diagnostics", on_diag, 100)
    result: dict[str, Any] = {"case": case.name, "launch": case.launch, "nominal": case.nominal}
    try:
        end = time.monotonic() + 90.0
        while not out_lat and time.monotonic() < end and launch.poll() is None:
            rclpy.spin_once(node, timeout_sec=0.1)
        if not out_lat:
            result["error"] = f"no {case.output[0]} within 90 s of the launch"
            return result
        if not case.sim_time:
            end = time.monotonic() + warmup
            while time.monotonic() < end:
                rclpy.spin_once(node, timeout_sec=0.05)
        procs = _procs(launch.pid)
        if play is not None:
            with contextlib.suppress(Exception):
                import psutil

                procs["ros2 bag play"] = psutil.Process(play.pid)
        cpu0 = {k: _cpu(p) for k, p in procs.items()}
        last = dict(cpu0)  # each process's CPU as last read: a feeder that ends (a bag) keeps what it used
        out_lat.clear()
        n_in[0] = 0
        diag.clear()
        t0 = time.monotonic()
        span = seconds
        next_read = t0
        while time.monotonic() < t0 + span:
            rclpy.spin_once(node, timeout_sec=0.05)
            if time.monotonic() >= next_read:
                next_read += 0.5
                for k, p in procs.items():
                    with contextlib.suppress(Exception):
                        last[k] = _cpu(p)
            bag_player = procs.get("ros2 bag play")
            if case.sim_time and bag_player is not None and not bag_player.is_running():
                break  # the bag ended
        wall = time.monotonic() - t0
        cpu1 = {}
        for k, p in procs.items():
            try:
                cpu1[k] = _cpu(p)
            except Exception:
                cpu1[k] = last[k]
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.05)  # the last inputs status
    finally:
        node.destroy_node()
        if play is not None and play.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(play.pid, signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                play.wait(timeout=10)
        try:
            os.killpg(launch.pid, signal.SIGINT)
            launch.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(launch.pid, signal.SIGKILL)
            launch.wait()
    share = {k: 100.0 * (cpu1[k] - cpu0[k]) / wall for k in cpu0}
    est = sum(v for k, v in share.items() if any(k.split(":")[0] == e for e in case.estimators))
    feed = sum(v for k, v in share.items() if k.split(":")[0] == case.feeder)
    est_cpu_s = sum(cpu1[k] - cpu0[k] for k in cpu0 if any(k.split(":")[0] == e for e in case.estimators))
    n_est = sum(1 for k in cpu0 if any(k.split(":")[0] == e for e in case.estimators))
    lat = [] if case.sim_time else out_lat
    dropped = {}
    for name, values in diag.items():
        dropped[name] = {k: values.get(f"{k}_total", "?") for k in ("dropped_behind", "decimated", "late", "missing")}
        dropped[name]["lag_max_ms"] = values.get("lag_max_ms", "?")
    in_rate = n_in[0] / wall
    result.update({
        "seconds": wall, "cpu_percent": share, "estimator_cpu_percent": est, "estimators": n_est,
        "feeder_cpu_percent": feed, "ratio_to_feeder": est / feed if feed > 0 else float("nan"),
        "input_rate_hz": in_rate,
        "cpu_per_input_ms": (est_cpu_s / max(1, n_est)) / (n_in[0]) * 1e3 if n_in[0] else float("nan"),
        "output_rate_hz": len(out_lat) / wall,
        "latency_median_ms": _percentile(lat, 50) * 1e3, "latency_p95_ms": _percentile(lat, 95) * 1e3,
        "inputs_status": dropped or "n/a", "load_average_1min": os.getloadavg()[0],
    })  # fmt: skip
    return result


def _demo(name: str) -> Path:
    out = Path(tempfile.mkdtemp(prefix=f"bench_{name}_"))
    cmd = ["shape-sensing", "demo", name, "--duration", "6", "--no-picture", "--json", "--out", str(out),
           "--sim", "kinematic"]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=900)
    return out


def _dataset_bag() -> Path:
    """The robot-2 slow_free_space trial as a bag and the node's parameters (``shape-sensing eval-continuum``)."""
    out = Path(tempfile.mkdtemp(prefix="bench_dataset_"))
    cmd = ["shape-sensing", "eval-continuum", str(DATASET), "slow_free_space", "--estimator", "window",
           "--duration", "30", "--json", "--out", str(out)]  # fmt: skip
    subprocess.run(cmd, check=True, capture_output=True, timeout=900)
    return out


def _fmt(r: dict[str, Any]) -> str:
    if "error" in r:
        return f"  {r['label']:<8} {r['case']}: {r['error']}"
    procs = ", ".join(f"{k} {v:.1f}" for k, v in sorted(r["cpu_percent"].items()))
    med = r["latency_median_ms"]
    lat = f"{med:.0f}/{r['latency_p95_ms']:.0f} ms" if med == med else "n/a (bag clock)"
    return (
        f"  {r['label']:<8} est {r['estimator_cpu_percent']:5.1f} % ({r['estimators']} proc), feeder "
        f"{r['feeder_cpu_percent']:5.1f} % (ratio {r['ratio_to_feeder']:.2f}); inputs {r['input_rate_hz']:.0f}/s, "
        f"{r['cpu_per_input_ms']:.3f} ms CPU per input; out {r['output_rate_hz']:.1f} Hz; latency med/p95 {lat}; "
        f"load {r['load_average_1min']:.1f}\n            inputs status: {r['inputs_status']}"
        f"\n            per process: {procs}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--workspace",
        action="append",
        type=Path,
        default=[],
        help="colcon workspace (with install/); repeat to compare builds; default: the sourced one",
    )
    parser.add_argument("--label", action="append", default=[], help="a label per --workspace")
    parser.add_argument("--case", action="append", default=[], help="case names (default: all)")
    parser.add_argument("--seconds", type=float, default=10.0, help="measurement window (s)")
    parser.add_argument("--warmup", type=float, default=4.0, help="seconds after the first estimate before measuring")
    parser.add_argument("--hog", type=int, default=0, help="busy processes running beside the launch")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measure each case this many times, the builds taking turns, and print the median of "
                        "each build (a shared machine's speed drifts between minutes)")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the figures as JSON only")
    parser.add_argument("--tof-demo", type=Path, default=None,
                        help="output of `shape-sensing demo tof-continuum` to play (default: made first)")
    args = parser.parse_args(argv)  # fmt: skip
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: expected at least 1")
    why = _ros_ready()
    if why:
        print(f"bench_ros_nodes: skipped: {why}")
        return 0
    import rclpy

    envs = [(lab, workspace_env(ws)) for lab, ws in zip(args.label + [str(w) for w in args.workspace[len(args.label):]],
                                                         args.workspace, strict=False)]  # fmt: skip
    if not envs:
        envs = [("sourced", dict(os.environ))]
    stop = multiprocessing.Event()
    hogs = [multiprocessing.Process(target=_hog, args=(stop,), daemon=True) for _ in range(args.hog)]
    for h in hogs:
        h.start()
    rclpy.init()
    results = []
    demos: dict[str, Path] = {"tof-continuum": args.tof_demo} if args.tof_demo else {}
    try:
        for template in cases(True):
            if args.case and template.name not in args.case:
                continue
            for rnd, (label, env) in ((k, e) for k in range(args.rounds) for e in envs):
                array = "shape_sensing/msg/ImuArray" in _interfaces(env)
                case = next(c for c in cases(array) if c.name == template.name)
                demo_dir = None
                if not args.json:
                    print(f"{case.name} [{label}] ...", file=sys.stderr, flush=True)
                try:
                    if case.needs_demo:
                        demo_dir = demos.get(case.needs_demo) or demos.setdefault(case.needs_demo,
                                                                                  _demo(case.needs_demo))  # fmt: skip
                    if case.needs_dataset:
                        if not DATASET.is_dir():
                            raise FileNotFoundError(f"no space_time_continuum dataset at {DATASET}")
                        demo_dir = demos.get("dataset") or demos.setdefault("dataset", _dataset_bag())
                    r = measure(case, env, args.seconds, args.warmup, demo_dir)
                except (OSError, subprocess.SubprocessError) as exc:  # one case failing leaves the others' figures
                    r = {"case": case.name, "launch": case.launch, "nominal": case.nominal, "error": str(exc)}
                r["label"] = label if args.rounds == 1 else f"{label}#{rnd + 1}"
                r["build"] = label
                r["hog"] = args.hog
                results.append(r)
    finally:
        rclpy.try_shutdown()
        stop.set()
    if args.json:
        print(json.dumps({"results": results, "not_run": NOT_RUN, "cpus": os.cpu_count()}, indent=1, default=str))
        return 0
    print(f"bench_ros_nodes on ROS 2 {os.environ.get('ROS_DISTRO')}: {os.cpu_count()} CPUs, "
          f"{args.seconds:g} s per case, {args.hog} hog process(es); CPU 100 % = one core")  # fmt: skip
    for name in dict.fromkeys(r["case"] for r in results):
        rs = [r for r in results if r["case"] == name]
        print(f"{name} ({rs[0]['launch']}; {rs[0]['nominal']})")
        for r in rs:
            print(_fmt(r))
        if args.rounds > 1:
            for build in dict.fromkeys(r["build"] for r in rs):
                ok = [r for r in rs if r["build"] == build and "error" not in r]
                if ok:
                    est = statistics.median(r["estimator_cpu_percent"] for r in ok)
                    ratio = statistics.median(r["ratio_to_feeder"] for r in ok)
                    print(f"  {build:<8} median of {len(ok)}: est {est:5.1f} %, ratio to feeder {ratio:.2f}")
    for launch, why in NOT_RUN.items():
        print(f"{launch}: not run ({why})")
    return 0


def _interfaces(env: dict[str, str]) -> str:
    done = subprocess.run(["ros2", "interface", "package", "shape_sensing"], capture_output=True, text=True, env=env,
                          timeout=60, check=False)  # fmt: skip
    return done.stdout


if __name__ == "__main__":
    raise SystemExit(main())
