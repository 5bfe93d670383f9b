"""Shared checks of the launch tests (``test/test_launch_<name>.py``), run with launch_testing on a real ROS 2.

Each launch test module builds its launch description with :func:`description`
(the package's installed launch file, included with its arguments, plus
``ReadyToTest``) and calls the checks below from its unittest cases, so that
one launch per file serves all of its checks:

* :func:`check_topics`: every documented topic is advertised with its type,
  and the ones with a nominal rate deliver about that rate (received count over
  a window of node time, within :data:`RATE_TOLERANCE`);
* :func:`check_frames`: tf2 resolves ``world`` to every documented frame;
* :func:`check_param_dump`: ``ros2 param dump`` of a node lists every parameter
  of the node's schema, with the values of the parameter file and the launch
  file's overrides;
* :func:`call_trigger`: a std_srvs/Trigger service answers;
* :func:`check_bad_parameter_file`: the node started on a parameter file with
  a misspelt or out-of-range parameter exits non-zero, naming the parameter;
* :func:`check_clean_shutdown` (post-shutdown): every process exited 0 after
  launch_testing's SIGINT, and no log line holds a traceback or an ``[ERROR]``.

Nothing here imports ROS at module level: :data:`AVAILABLE` and :data:`REASON`
say whether the launch tests can run, so a test module skips cleanly (one
skipped test, no collection error) where ROS 2 or the built package is absent.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

PACKAGE = "shape_sensing"
RATE_TOLERANCE = (0.5, 1.5)  # received rate / nominal rate accepted (2 shared cores, Python nodes)
WINDOW_S = 3.0  # seconds of receiving per rate check
DISCOVERY_S = 20.0  # how long a topic, frame or service may take to appear
BAD_EXIT_TIMEOUT_S = 30.0


def _probe() -> tuple[bool, str]:
    if "ROS_DISTRO" not in os.environ:
        return False, "ROS 2 is not sourced (no ROS_DISTRO)"
    try:
        import launch_ros  # noqa: F401
        import launch_testing  # noqa: F401
        import rclpy  # noqa: F401
        import tf2_ros  # noqa: F401
        from ament_index_python.packages import get_package_share_directory

        import launch  # noqa: F401
    except Exception as exc:  # ImportError, or a compiled extension built for another Python
        return False, f"ROS 2 Python packages not importable here: {exc!r}"
    try:
        get_package_share_directory(PACKAGE)
    except Exception:
        return False, f"package {PACKAGE} is not built in the sourced workspace (colcon build, then source it)"
    return True, ""


AVAILABLE, REASON = _probe()


def interfaces_reason() -> str:
    """'' when the package's own message interfaces (msg/, built by rosidl) import here, else why not."""
    try:
        import shape_sensing.msg  # noqa: F401
    except Exception as exc:
        return f"shape_sensing's msg/ interfaces are not built in the sourced workspace (rosidl): {exc!r}"
    return ""


def share(*parts: str) -> Path:
    """A path in the installed package share (launch/, config/)."""
    from ament_index_python.packages import get_package_share_directory

    return Path(get_package_share_directory(PACKAGE), *parts)


def executable(name: str) -> Path:
    """The installed console script of node ``name`` (what ``ros2 run shape_sensing name`` runs)."""
    from ament_index_python.packages import get_package_prefix

    return Path(get_package_prefix(PACKAGE), "lib", PACKAGE, name)


def description(launch_file: str, arguments: Mapping[str, str] | None = None, extra: Sequence[Any] = ()) -> Any:
    """``LaunchDescription`` of the installed ``launch/<launch_file>`` with ``arguments`` (and ``extra``
    actions, e.g. a node feeding its inputs), then ReadyToTest."""
    import launch_testing.actions
    from launch.actions import IncludeLaunchDescription
    from launch.launch_description_sources import AnyLaunchDescriptionSource

    import launch

    include = IncludeLaunchDescription(
        AnyLaunchDescriptionSource(str(share("launch", launch_file))),
        launch_arguments=dict(arguments or {}).items(),
    )
    return launch.LaunchDescription([include, *extra, launch_testing.actions.ReadyToTest()])


# -- a probe node in the test process --------------------------------------------------------------------------------


class Probe:
    """An rclpy node of the test with its own context and executor, spun in the calling thread."""

    def __init__(self, name: str = "launch_test_probe") -> None:
        import rclpy
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor

        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(name, context=self.context)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._tf: Any = None

    def close(self) -> None:
        import rclpy

        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)

    def spin_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=0.01)

    def spin_until(self, done: Callable[[], bool], timeout: float = DISCOVERY_S) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if done():
                return True
            self.executor.spin_once(timeout_sec=0.05)
        return done()

    def topic_types(self) -> dict[str, list[str]]:
        return dict(self.node.get_topic_names_and_types())

    def tf_buffer(self) -> Any:
        if self._tf is None:
            from tf2_ros import Buffer, TransformListener

            buffer = Buffer()
            self._tf = (buffer, TransformListener(buffer, self.node, spin_thread=False))
        return self._tf[0]


@contextlib.contextmanager
def probe(name: str = "launch_test_probe") -> Iterator[Probe]:
    """A :class:`Probe`, closed afterwards."""
    p = Probe(name)
    try:
        yield p
    finally:
        p.close()


def _qos_for(best_effort: bool) -> Any:
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    reliability = ReliabilityPolicy.BEST_EFFORT if best_effort else ReliabilityPolicy.RELIABLE
    return QoSProfile(depth=50, reliability=reliability)


def _msg_class(type_name: str) -> Any:
    from rosidl_runtime_py.utilities import get_message

    return get_message(type_name)


def check_topics(
    p: Probe, topics: Mapping[str, tuple[str, float | None]], *, window: float = WINDOW_S,
    discovery: float = DISCOVERY_S,
) -> dict[str, float]:
    """Every topic is advertised with its type; the ones with a rate deliver about it. Returns the measured rates.

    ``topics`` maps a topic to ``(type, nominal rate in Hz or None)``. Subscriptions
    are best effort, so they match both sensor-data and reliable publishers.
    """
    missing: list[str] = []
    ok = p.spin_until(lambda: all(t in p.topic_types() for t in topics), timeout=discovery)
    graph = p.topic_types()
    if not ok:
        missing = sorted(t for t in topics if t not in graph)
        raise AssertionError(f"topics not advertised within {discovery:g} s: {missing}; graph has {sorted(graph)}")
    wrong = {t: graph[t] for t, (typ, _) in topics.items() if typ not in graph[t]}
    assert not wrong, f"topics with another type than documented: {wrong}"
    counts: dict[str, int] = {}
    subs = []
    for topic, (typ, rate) in topics.items():
        if rate is None:
            continue
        counts[topic] = 0

        def count(_msg: Any, topic: str = topic) -> None:
            counts[topic] += 1

        subs.append(p.node.create_subscription(_msg_class(typ), topic, count, _qos_for(True)))
    lo, hi = RATE_TOLERANCE
    try:
        # settle: let the subscriptions match, then count over a fresh window; on a shared machine one window
        # can be starved, so a topic off its rate gets a second window before it fails
        p.spin_until(lambda: all(counts.values()), timeout=DISCOVERY_S)
        for _attempt in range(2):
            for k in counts:
                counts[k] = 0
            start = time.monotonic()
            p.spin_for(window)
            elapsed = time.monotonic() - start
            rates = {t: n / elapsed for t, n in counts.items()}
            off = {
                t: f"{rates[t]:.1f} Hz (nominal {rate:g})"
                for t, (_, rate) in topics.items()
                if rate is not None and not lo * rate <= rates[t] <= hi * rate
            }
            if not off:
                break
    finally:
        for s in subs:
            p.node.destroy_subscription(s)
    assert not off, f"topics off their nominal rate by more than x{lo:g}..x{hi:g} (two windows): {off}"
    print("measured rates (Hz):", {t: round(r, 1) for t, r in rates.items()})
    return rates


def check_frames(p: Probe, frames: Sequence[str], root: str = "world", discovery: float = DISCOVERY_S) -> None:
    """tf2 resolves ``root`` to every frame in ``frames`` (latest transforms)."""
    from rclpy.time import Time

    buffer = p.tf_buffer()
    p.spin_until(lambda: all(buffer.can_transform(root, f, Time()) for f in frames), timeout=discovery)
    unresolved = [f for f in frames if not buffer.can_transform(root, f, Time())]
    assert not unresolved, f"tf2 cannot resolve {root} -> {unresolved}; known frames:\n{buffer.all_frames_as_string()}"
    for f in frames:
        buffer.lookup_transform(root, f, Time())  # raises if the chain is broken


def _ros2(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ros2", *args], capture_output=True, text=True, timeout=timeout, check=False)


def expected_parameters(
    node: str, config: Path | None, overrides: Mapping[str, Any] | None = None, section: str | None = None
) -> dict[str, Any]:
    """Every schema parameter of executable ``node`` with its value: schema default < parameter file < launch.

    ``section``: the node name keying its section of the file, when the launch names it other than ``node``.
    """
    from shape_sensing.config import flatten
    from shape_sensing.schemas import schema_for

    values = {p.name: p.default for p in schema_for(node).params}
    if config is not None:
        data = yaml.safe_load(config.read_text())
        name = section or node
        for key, body in data.items():
            if key.rsplit("/", 1)[-1] == name:
                values.update(flatten(body["ros__parameters"]))
    values.update(overrides or {})
    return values


def check_param_dump(fq_node: str, expected: Mapping[str, Any]) -> dict[str, Any]:
    """``ros2 param dump FQ_NODE`` lists every expected parameter with its expected value; returns the dump."""
    from shape_sensing.config import flatten

    out = _ros2("param", "dump", fq_node)
    assert out.returncode == 0, f"ros2 param dump {fq_node} failed: {out.stderr}"
    data = yaml.safe_load(out.stdout)
    (section,) = data.values()
    dumped = flatten(section["ros__parameters"])
    missing = sorted(set(expected) - set(dumped))
    assert not missing, f"ros2 param dump {fq_node} lacks {missing}:\n{out.stdout}"
    differ = {}
    for name, want in expected.items():
        got = dumped[name]
        same = (
            [float(x) for x in got] == [float(x) for x in want]
            if isinstance(want, list) and want and isinstance(want[0], float)
            else (float(got) == float(want) if isinstance(want, float) else got == want)
        )
        if not same:
            differ[name] = (got, want)
    assert not differ, f"{fq_node}: dumped value differs from the parameter file (got, want): {differ}"
    return dumped


def call_trigger(p: Probe, service: str, timeout: float = DISCOVERY_S) -> Any:
    """Call std_srvs/Trigger ``service`` and return its response (raises if it does not answer)."""
    from std_srvs.srv import Trigger

    client = p.node.create_client(Trigger, service)
    try:
        assert p.spin_until(client.service_is_ready, timeout), f"service {service} not available"
        future = client.call_async(Trigger.Request())
        assert p.spin_until(future.done, timeout), f"service {service} did not answer within {timeout:g} s"
        return future.result()
    finally:
        p.node.destroy_client(client)


def check_bad_parameter_file(node: str, namespace: str, section: Mapping[str, Any], name: str) -> str:
    """Node ``node`` started (as ``ros2 run`` does) on a file with ``section`` exits 2 naming parameter ``name``.

    Returns the node's output.
    """
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "bad.yaml")
        path.write_text(yaml.safe_dump({f"/**/{node}": {"ros__parameters": dict(section)}}))
        cmd = [str(executable(node)), "--ros-args", "-r", f"__ns:={namespace}", "--params-file", str(path)]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=BAD_EXIT_TIMEOUT_S, check=False)
    text = out.stdout + out.stderr
    assert out.returncode == 2, f"{node} on a bad parameter file exited {out.returncode}:\n{text}"
    assert re.search(rf"parameter\(?s?\)? .*'{re.escape(name)}'", text), f"the error does not name '{name}':\n{text}"
    assert "Traceback" not in text, text
    return text


def check_clean_shutdown(proc_info: Any, proc_output: Any) -> None:
    """Post-shutdown: every process exited 0 on launch_testing's SIGINT; no traceback and no ``[ERROR]`` in any log."""
    import launch_testing.asserts

    launch_testing.asserts.assertExitCodes(proc_info)
    bad = []
    for line_source in proc_output:
        text = line_source.text.decode(errors="replace") if isinstance(line_source.text, bytes) else line_source.text
        for line in text.splitlines():
            if "Traceback" in line or "[ERROR]" in line or "Exception" in line:
                bad.append(f"{line_source.process_name}: {line}")
    assert not bad, "errors in the launch's logs:\n" + "\n".join(bad)


def python() -> str:
    """The interpreter the ROS 2 tools use."""
    return sys.executable


# -- whole launches as a user starts them (ros2 launch in a subprocess) ----------------------------------------------


def prefix_without(packages: Sequence[str], where: Path) -> dict[str, str]:
    """An environment whose ament index lacks ``packages`` (as on a machine without them installed).

    Every prefix of ``AMENT_PREFIX_PATH`` holding one of them is replaced by a mirror under ``where``: symbolic links
    to all of the prefix but those packages' index entries, share and lib folders.
    """
    env = dict(os.environ)
    prefixes = []
    hidden = set(packages)
    for i, prefix in enumerate(p for p in env.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p):
        index = Path(prefix, "share", "ament_index", "resource_index")
        if not any((index / "packages" / name).exists() for name in hidden):
            prefixes.append(prefix)
            continue
        mirror = where / f"prefix{i}"
        (mirror / "share" / "ament_index" / "resource_index").mkdir(parents=True)
        for kind in index.iterdir():
            target = mirror / "share" / "ament_index" / "resource_index" / kind.name
            target.mkdir()
            for entry in kind.iterdir():
                if entry.name not in hidden:
                    (target / entry.name).symlink_to(entry)
        for top in Path(prefix).iterdir():
            if top.name in ("share", "lib"):
                (mirror / top.name).mkdir(exist_ok=True)
                for item in top.iterdir():
                    if item.name not in hidden and not (top.name == "share" and item.name == "ament_index"):
                        (mirror / top.name / item.name).symlink_to(item)
            else:
                (mirror / top.name).symlink_to(top)
        prefixes.append(str(mirror))
    env["AMENT_PREFIX_PATH"] = os.pathsep.join(prefixes)
    return env


def processes_with(marker: str) -> list[str]:
    """Command lines of the running processes that contain ``marker`` (e.g. a launch's unique namespace)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline and str(os.getpid()) != proc.name:
            found.append(f"{proc.name}: {cmdline.strip()}")
    return found


def stop_processes_with(marker: str) -> None:
    """SIGTERM what :func:`processes_with` finds (a failed check must not leave them to the next test)."""
    import signal

    for line in processes_with(marker):
        with contextlib.suppress(OSError):
            os.kill(int(line.split(":", 1)[0]), signal.SIGTERM)


def side_by_side(launches: Sequence[tuple[str, Mapping[str, str]]]) -> Any:
    """``LaunchDescription`` of several installed launch files, each with its arguments in its own scope (a
    ``GroupAction``: one include's arguments and defaults do not leak into the next), then ReadyToTest."""
    import launch_testing.actions
    from launch.actions import GroupAction, IncludeLaunchDescription
    from launch.launch_description_sources import AnyLaunchDescriptionSource

    import launch

    groups = [
        GroupAction(
            [IncludeLaunchDescription(AnyLaunchDescriptionSource(str(share("launch", f))), launch_arguments=a.items())]
        )
        for f, a in launches
    ]
    return launch.LaunchDescription([*groups, launch_testing.actions.ReadyToTest()])


def check_nodes(p: Probe, fq_names: Sequence[str], discovery: float = DISCOVERY_S) -> None:
    """Every node of ``fq_names`` (``/ns/name``) is in the ROS graph, once."""

    def graph() -> list[str]:
        return [f"{ns.rstrip('/')}/{name}" for name, ns in p.node.get_node_names_and_namespaces()]

    p.spin_until(lambda: set(fq_names) <= set(graph()), timeout=discovery)
    names = graph()
    missing = sorted(set(fq_names) - set(names))
    twice = sorted(n for n in set(fq_names) if names.count(n) > 1)
    assert not missing and not twice, f"nodes missing {missing}, twice {twice}; graph: {sorted(names)}"


class RobotChecks:
    """The checks every robot's launch test starts with, mixed into a ``unittest.TestCase`` of the test module
    (``class TestX(h.RobotChecks, unittest.TestCase)``), which sets ``TOPICS`` (as :func:`check_topics`: every
    topic with its type, at its nominal rate) and ``FRAMES`` (each resolved from ``world`` on ``/tf``); one
    probe node for the class. The module adds its own checks (parameters, services, bad files) as ``test_3_...``."""

    TOPICS: Mapping[str, tuple[str, float | None]] = {}
    FRAMES: Sequence[str] = ()
    probe: Probe

    @classmethod
    def setUpClass(cls) -> None:
        assert cls.TOPICS and cls.FRAMES, f"{cls.__name__} sets no TOPICS or no FRAMES to check"
        cls.probe = Probe()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.probe.close()

    def test_1_topics_types_and_rates(self) -> None:
        check_topics(self.probe, self.TOPICS)

    def test_2_tf_world_to_every_frame(self) -> None:
        check_frames(self.probe, self.FRAMES)


SIDE_BY_SIDE_DISCOVERY_S = 60.0  # many nodes starting at once on 2 shared cores


class SideBySideChecks:
    """Checks of a :func:`side_by_side` launch, mixed into a ``unittest.TestCase`` of the test module, which sets:
    ``NODES`` (fully qualified names, each expected once), ``TOPICS`` (as :func:`check_topics`), ``FRAMES``
    (resolved from ``world``) and ``BARE`` (frame names that must not appear unprefixed)."""

    NODES: Sequence[str] = ()
    TOPICS: Mapping[str, tuple[str, float | None]] = {}
    FRAMES: Sequence[str] = ()
    BARE: Sequence[str] = ()
    probe: Probe

    @classmethod
    def setUpClass(cls) -> None:
        cls.probe = Probe("side_by_side_probe")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.probe.close()

    def test_1_every_node_once_under_its_own_name(self) -> None:
        check_nodes(self.probe, self.NODES, SIDE_BY_SIDE_DISCOVERY_S)

    def test_2_each_robots_topics_in_its_namespace(self) -> None:
        check_topics(self.probe, self.TOPICS, discovery=SIDE_BY_SIDE_DISCOVERY_S)

    def test_3_each_robots_frames_resolve_from_world_under_their_own_names(self) -> None:
        if not self.FRAMES:
            return
        check_frames(self.probe, self.FRAMES, discovery=SIDE_BY_SIDE_DISCOVERY_S)
        known = set(yaml.safe_load(self.probe.tf_buffer().all_frames_as_yaml()) or {})
        assert set(self.FRAMES) <= known
        assert not known & set(self.BARE), f"unprefixed frames in the tree: {sorted(known & set(self.BARE))}"
