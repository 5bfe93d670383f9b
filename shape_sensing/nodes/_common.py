"""rclpy plumbing shared by the nodes: parameters from a schema, QoS profiles, logging, ``main``.

Helpers take a node rather than subclass one (the tf2_ros_py way), so a node
module is a small class holding a plain ``rclpy.node.Node``. rclpy is imported
inside the helpers: the pure parts of this module (type tables, value
normalisation) import and test without ROS 2.

A bad parameter raises :class:`~shape_sensing.config.ConfigError` naming the
parameter, the value and what was expected; :func:`run` logs it on the node's
logger and returns a non-zero exit status (the console script exits with it).
"""

from __future__ import annotations

import array
import contextlib
import fnmatch
import logging
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from shape_sensing.config import ConfigError, Param, Schema

__all__ = [
    "PARAMETER_TYPES",
    "InputWatch",
    "RclpyLogHandler",
    "SigintSeen",
    "cdr_layout_supported",
    "declare_schema",
    "describe",
    "diagnostics_throttle",
    "fatal_unknown_overrides",
    "fq_name",
    "from_ros_value",
    "node_namespace",
    "note_input",
    "override_sources",
    "reliable_qos",
    "route_logging",
    "run",
    "sensor_qos",
    "stamped_ahead",
    "start_heartbeat",
    "static_qos",
    "tf_qos",
    "unknown_overrides",
    "usage",
    "wants_help",
    "warn_throttled",
]

# Schema parameter type -> rcl_interfaces/ParameterType constant (and rclpy Parameter.Type name without PARAMETER_).
PARAMETER_TYPES: dict[Any, str] = {
    bool: "PARAMETER_BOOL",
    int: "PARAMETER_INTEGER",
    float: "PARAMETER_DOUBLE",
    str: "PARAMETER_STRING",
    "bool[]": "PARAMETER_BOOL_ARRAY",
    "int[]": "PARAMETER_INTEGER_ARRAY",
    "float[]": "PARAMETER_DOUBLE_ARRAY",
    "str[]": "PARAMETER_STRING_ARRAY",
}

EXIT_BAD_CONFIG = 2
EXIT_NO_ROS = 1


def describe(param: Param) -> str:
    """The text ``ros2 param describe`` shows for a schema parameter."""
    unit = f" [{param.unit}]" if param.unit else ""
    return f"{param.description}{unit}"


def from_ros_value(value: Any) -> Any:
    """A parameter value as rclpy hands it over, in the plain Python types :class:`Schema` validates.

    rclpy gives arrays as ``array.array`` (from parameter files) or lists.
    """
    if isinstance(value, (array.array, np.ndarray, tuple)):
        return [v.item() if isinstance(v, np.generic) else v for v in list(value)]
    return value


def unknown_overrides(schema: Schema, overrides: Mapping[str, Any]) -> list[str]:
    """Override names (from parameter files or ``-p``) that ``schema`` does not declare.

    ``use_sim_time`` and ``qos_overrides.*`` belong to rclpy itself and are not reported.
    """
    known = set(schema.names()) | {"use_sim_time"}
    return sorted(n for n in overrides if n not in known and not n.startswith("qos_overrides."))


# -- parameter files: which names were meant for this node -----------------------------------------------------------

_RUN_ARGS: list[str] | None = None  # the arguments run() gave rclpy.init (None: sys.argv)


def _key_matches(pattern: str, fq: str) -> bool:
    """Whether a parameter-file node key (``/vine/hinge_arc_estimator``, ``/**``, ``/vine/*``, ``name``) matches the
    fully qualified node name ``fq`` as rcl matches it: ``*`` one name segment, ``**`` any number of them; a key
    without a leading ``/`` is taken from the root."""
    pat = [seg for seg in ("/" + pattern.lstrip("/")).split("/") if seg]
    name = [seg for seg in fq.split("/") if seg]

    def match(i: int, j: int) -> bool:
        if i == len(pat):
            return j == len(name)
        if pat[i] == "**":
            return any(match(i + 1, k) for k in range(j, len(name) + 1))
        if j == len(name):
            return False
        return fnmatch.fnmatchcase(name[j], pat[i]) and match(i + 1, j + 1)

    return match(0, 0)


def _param_file_sections(data: Any, prefix: str = "") -> Iterable[tuple[str, Mapping[str, Any]]]:
    """(node key, parameters) of every ``ros__parameters`` section of a parameter file, nested namespaces joined."""
    if not isinstance(data, Mapping):
        return
    for key, value in data.items():
        if not isinstance(value, Mapping):
            continue
        path = f"{prefix}/{str(key).strip('/')}" if prefix else str(key)
        params = value.get("ros__parameters")
        if isinstance(params, Mapping):
            yield path, params
        else:
            yield from _param_file_sections(value, path)


def override_sources(fq: str, args: Sequence[str]) -> tuple[set[str], set[str]]:
    """Names of the parameters ``args`` give the node ``fq``: (meant for it, only in wildcard sections).

    A section is meant for the node when its key names the node (``/vine/hinge_arc_estimator``,
    ``/**/hinge_arc_estimator``, launch's own ``/vine/hinge_arc_estimator`` files); a ``-p`` is too. A section
    whose last segment is a wildcard (``/**``, ``/vine/*``) is robot-wide: its parameters may be meant for other
    nodes. Files that do not read are left to rcl, which reports them.
    """
    from shape_sensing.config import flatten

    own: set[str] = set()
    wildcard: set[str] = set()
    argv = list(args)
    in_ros = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--ros-args":
            in_ros = True
        elif arg == "--":
            in_ros = False
        elif in_ros and arg == "--params-file" and i + 1 < len(argv):
            i += 1
            try:
                with open(argv[i], encoding="utf-8") as f:
                    import yaml

                    data = yaml.safe_load(f)
            except (OSError, ValueError):
                data = None
            for key, params in _param_file_sections(data):
                if not _key_matches(key, fq):
                    continue
                last = key.rstrip("/").split("/")[-1]
                (wildcard if "*" in last else own).update(flatten(params))
        elif in_ros and arg in ("-p", "--param") and i + 1 < len(argv):
            i += 1
            own.add(argv[i].split(":=", 1)[0])
        i += 1
    return own, wildcard - own


def fatal_unknown_overrides(
    schema: Schema, overrides: Mapping[str, Any], fq: str, args: Sequence[str] | None
) -> tuple[list[str], list[str]]:
    """(unknown names that stop the node, unknown names ignored): a name only a robot-wide wildcard section gives
    (``/**:``) may belong to another node and is ignored; one given to this node (its own section, ``-p``, or of
    unknown origin) is a misspelling and fatal."""
    unknown = unknown_overrides(schema, overrides)
    own, wildcard = override_sources(fq, sys.argv if args is None else args)
    ignored = [n for n in unknown if n in wildcard and n not in own]
    return [n for n in unknown if n not in ignored], ignored


def _parameter_exceptions() -> tuple[type[BaseException], ...]:
    import rclpy.exceptions as rex

    names = ("InvalidParameterTypeException", "InvalidParameterValueException", "InvalidParameterException")
    return tuple(getattr(rex, n) for n in names if hasattr(rex, n))


def declare_schema(node: Any, schema: Schema, *, read_only: bool = True) -> dict[str, Any]:
    """Declare every parameter of ``schema`` on ``node`` and return the validated values.

    Each parameter gets a descriptor with its description, type and accepted
    range (``additional_constraints``). Empty-array defaults are declared as
    typed empty arrays (a ``ParameterValue`` of the array type), never by type
    only: a parameter left unset makes ``ros2 param dump`` answer nothing for
    the whole node. Parameters are read once at start, so they are declared
    read-only by default.

    An override the schema does not declare (a misspelt name in the node's own
    section of a parameter file or ``-p``) is an error, as in the CLI's YAML
    validation; one that only a robot-wide wildcard section (``/**:``) gives is
    another node's and ignored (see :func:`fatal_unknown_overrides`).

    Args:
        node: an ``rclpy.node.Node``.
        schema: the node's schema (:mod:`shape_sensing.schemas`).
        read_only: declare the parameters read-only.

    Raises:
        ConfigError: a value of the wrong type or out of range, or an unknown
            parameter; the message names the parameter, the value and what
            was expected.
    """
    from rcl_interfaces.msg import ParameterDescriptor, ParameterType
    from rclpy.parameter import Parameter

    bad_value = _parameter_exceptions()
    overrides = getattr(node, "_parameter_overrides", {})  # rclpy keeps them only privately
    unknown, ignored = fatal_unknown_overrides(schema, overrides, fq_name(node), _RUN_ARGS)
    if unknown:
        raise ConfigError(
            f"node {node.get_name()}: unknown parameter(s) {unknown} (misspelt?); "
            f"{schema.node} declares {sorted(schema.names())}"
        )
    if ignored:
        node.get_logger().info(
            f"parameters {ignored} of a robot-wide (wildcard) section are not {schema.node}'s: ignored"
        )
    raw: dict[str, Any] = {}
    for p in schema.params:
        type_name = PARAMETER_TYPES[p.type]
        default: Any = p.default
        empty_array = isinstance(default, list) and not default
        if empty_array:
            # rclpy infers no array type from [] (and refuses a ParameterValue default): declare by type, then
            # set a typed empty array below, since a parameter left unset blanks the whole `ros2 param dump`.
            default = getattr(Parameter.Type, type_name[len("PARAMETER_") :])
        descriptor = ParameterDescriptor(
            name=p.name,
            type=getattr(ParameterType, type_name),
            description=describe(p),
            additional_constraints=f"expected {p.expected()}",
            read_only=read_only and not empty_array,
        )
        try:
            declared = node.declare_parameter(p.name, default, descriptor)
            if empty_array and getattr(declared, "value", None) is None:
                node.set_parameters([Parameter(p.name, default, [])])
                declared = Parameter(p.name, default, [])
        except bad_value as exc:
            hint = " (write floating-point values with a decimal point, e.g. 1.0)" if "float" in p.expected() else ""
            raise ConfigError(
                f"node {node.get_name()}: parameter '{p.name}' rejected by ROS 2: {exc}; expected {p.expected()}{hint}"
            ) from exc
        if empty_array and read_only:
            descriptors = getattr(node, "_descriptors", {})  # rclpy offers no public way to make it read-only now
            if p.name in descriptors:
                descriptors[p.name].read_only = True
        value = getattr(declared, "value", None)
        raw[p.name] = p.default if value is None else from_ros_value(value)
    return schema.validate(raw, where=f"node {node.get_name()}")


def diagnostics_throttle(node: Any, period_s: float = 1.0) -> Any:
    """A :class:`~shape_sensing.pipelines.common.DiagnosticsThrottle` naming statuses after ``node``.

    Status names carry the node's fully qualified name (``/vine/hinge_arc_estimator: shape``) and
    ``hardware_id`` the robot's namespace, so two robots side by side report distinct statuses.
    """
    from shape_sensing.pipelines.common import DiagnosticsThrottle

    return DiagnosticsThrottle(period_s, node=fq_name(node), hardware_id=node_namespace(node))


def diagnostics_msg(node: Any, stamp_ns: int, statuses: Iterable[Any], factory: Any) -> Any:
    """diagnostic_msgs/DiagnosticArray of ``statuses`` named as :func:`diagnostics_throttle` names them.

    For drivers publishing on their own 1 s timer (diagnostic_updater's rate): the statuses carry the node's
    fully qualified name and ``hardware_id`` its namespace (see
    :func:`~shape_sensing.pipelines.common.qualify_status`).
    """
    from shape_sensing.messages.common import diagnostic_array
    from shape_sensing.pipelines.common import qualify_status

    name, namespace = fq_name(node), node_namespace(node)
    return diagnostic_array(stamp_ns, [qualify_status(s, name, namespace) for s in statuses], factory)


def cdr_layout_supported() -> bool:
    """Whether the sourced distribution's message definitions are those :mod:`shape_sensing.messages.cdr` writes
    the CDR of (then a node may publish its estimates as CDR bytes written from arrays; else message objects)."""
    import os

    from shape_sensing.messages import cdr
    from shape_sensing.messages.factory import DISTROS, MessageFactory

    distro = os.environ.get("ROS_DISTRO", "")
    try:
        return distro in DISTROS and cdr.supported(MessageFactory("rosbags", distro).typestore)
    except Exception:  # rosbags absent or without the distro: build message objects
        return False


def fq_name(node: Any) -> str:
    """The node's fully qualified name (``/ns/name``)."""
    get = getattr(node, "get_fully_qualified_name", None)
    return str(get()) if callable(get) else f"/{node.get_name()}"


def node_namespace(node: Any) -> str:
    """The node's namespace (``/`` at the root)."""
    get = getattr(node, "get_namespace", None)
    return str(get()) if callable(get) else "/"


# -- QoS ------------------------------------------------------------------


def sensor_qos() -> Any:
    """Raw high-rate streams: best effort, volatile, keep last 5 (rclpy's sensor-data profile)."""
    from rclpy.qos import qos_profile_sensor_data

    return qos_profile_sensor_data


def reliable_qos(depth: int = 10) -> Any:
    """Estimates and ground truth: reliable, volatile, keep last ``depth``."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=depth,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.VOLATILE,
    )


def tf_qos() -> Any:
    """``/tf``: reliable, volatile, keep last 100 (as tf2_ros's TransformBroadcaster)."""
    return reliable_qos(100)


def static_qos() -> Any:
    """``/tf_static`` and latched configuration: reliable, transient local, keep last 1."""
    from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy

    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST,
        depth=1,
        reliability=ReliabilityPolicy.RELIABLE,
        durability=DurabilityPolicy.TRANSIENT_LOCAL,
    )


# -- logging --------------------------------------------------------------


class RclpyLogHandler(logging.Handler):
    """Forwards stdlib ``logging`` records of the core to an rclpy logger.

    rclpy refuses a change of severity from one call site, so every severity
    is forwarded from its own line.
    """

    def __init__(self, logger: Any) -> None:
        super().__init__()
        self._logger = logger
        self._warning = getattr(logger, "warning", None) or logger.warn
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        """Forward one record at the matching severity."""
        try:
            text = self.format(record)
        except Exception:  # formatting errors are reported by logging itself
            self.handleError(record)
            return
        if record.levelno >= logging.CRITICAL:
            self._logger.fatal(text)
        elif record.levelno >= logging.ERROR:
            self._logger.error(text)
        elif record.levelno >= logging.WARNING:
            self._warning(text)
        elif record.levelno >= logging.INFO:
            self._logger.info(text)
        else:
            self._logger.debug(text)


def route_logging(node: Any, logger_name: str = "shape_sensing") -> Callable[[], None]:
    """Send the core's stdlib logging (``logger_name`` and below) to ``node``'s rclpy logger.

    The stdlib level follows the rclpy logger's (DEBUG when it is enabled for
    debug, else INFO). Returns a function that undoes the routing.
    """
    rcl_logger = node.get_logger()
    handler = RclpyLogHandler(rcl_logger)
    target = logging.getLogger(logger_name)
    previous = (target.level, target.propagate)
    level = logging.INFO
    with contextlib.suppress(AttributeError, TypeError, ValueError):
        from rclpy.logging import LoggingSeverity

        if int(rcl_logger.get_effective_level()) <= int(LoggingSeverity.DEBUG):
            level = logging.DEBUG
    target.addHandler(handler)
    target.setLevel(level)
    target.propagate = False

    def undo() -> None:
        target.removeHandler(handler)
        target.setLevel(previous[0])
        target.propagate = previous[1]

    return undo


# -- main -----------------------------------------------------------------


def _try_shutdown() -> None:
    import rclpy

    if hasattr(rclpy, "try_shutdown"):
        rclpy.try_shutdown()
    elif rclpy.ok():
        rclpy.shutdown()


#: after SIGINT, rclpy is shut down from a thread if its own handler has not done so within this long (s)
SIGINT_GRACE_S = 2.0


def _shutdown_if_still_up() -> None:
    import rclpy

    if rclpy.ok():
        _try_shutdown()


class SigintSeen(contextlib.AbstractContextManager["SigintSeen"]):
    """Record that SIGINT arrived, and let rclpy end the spin, without an exception raised at a random place.

    rclpy's own (C) SIGINT handler shuts its contexts down, which ends the spin, then chains to the Python one.
    Python's default one raises :class:`KeyboardInterrupt` at the next bytecode boundary, wherever that is: inside
    a message's ``__init__`` that rclpy's C++ ``take_message`` called (rclpy turns it into ``RuntimeError: Unable to
    convert call argument to Python object``), or inside an object's ``__del__``, where Python prints it as
    "Exception ignored ... Traceback ... KeyboardInterrupt" into the node's log. This one only records it
    (:attr:`seen` tells such an ending from a real error) and, should the context still be up
    :data:`SIGINT_GRACE_S` later (rclpy's handlers not installed), shuts rclpy down from a thread. Installed only
    from the main thread and only over a callable handler (a SIGINT that the parent set to be ignored stays ignored);
    the previous handler is restored on exit.
    """

    def __init__(self) -> None:
        self._seen = threading.Event()
        self._previous: Any = None
        self._installed = False

    @property
    def seen(self) -> bool:
        return self._seen.is_set()

    def _handle(self, signum: int, frame: Any) -> None:
        self._seen.set()
        fallback = threading.Timer(SIGINT_GRACE_S, _shutdown_if_still_up)
        fallback.daemon = True
        fallback.start()

    def __enter__(self) -> SigintSeen:
        if threading.current_thread() is threading.main_thread():
            previous = signal.getsignal(signal.SIGINT)
            if callable(previous):
                self._previous = previous
                signal.signal(signal.SIGINT, self._handle)
                self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed and signal.getsignal(signal.SIGINT) == self._handle:
            signal.signal(signal.SIGINT, self._previous)
        self._installed = False


def usage(node_name: str) -> str:
    """``-h/--help`` text of node ``node_name``: how to run it and every parameter of its schema."""
    from shape_sensing.schemas import schema_for

    lines = [
        f"usage: ros2 run shape_sensing {node_name} [-h] [--ros-args -p NAME:=VALUE ... --params-file FILE]",
        "",
        f"ROS 2 node '{node_name}' of shape_sensing. Parameters (an unknown name or a bad value is an error, exit 2):",
    ]
    try:
        schema = schema_for(node_name)
    except KeyError:
        return "\n".join(lines[:1])
    for p in schema.params:
        type_name = p.type if isinstance(p.type, str) else p.type.__name__
        lines.append(f"  {p.name} ({type_name}, default {p.default!r}): {describe(p)}; expected {p.expected()}")
    return "\n".join(lines)


def wants_help(args: Sequence[str]) -> bool:
    """Whether ``-h``/``--help`` is among the program's own arguments (those before ``--ros-args``)."""
    own = list(args)
    if "--ros-args" in own:
        own = own[: own.index("--ros-args")]
    return "-h" in own or "--help" in own


def run(node_name: str, build: Callable[[Any], Any], args: Sequence[str] | None = None) -> int:
    """Init rclpy, create node ``node_name``, ``build(node)``, spin until shut down.

    ``with rclpy.init():`` is used where rclpy offers it (Jazzy and later);
    elsewhere the context is shut down in a ``finally``. Ctrl-C and an external
    shutdown end the spin quietly. The node spins on
    :class:`~shape_sensing.nodes.executor.LeanExecutor` (rclpy's own with
    ``SHAPE_SENSING_EXECUTOR=rclpy``).

    ``-h``/``--help`` (before any ``--ros-args``) prints :func:`usage` and
    returns 0 without starting ROS.

    Returns:
        0 after a normal shutdown or ``--help``, 2 when the configuration was
        rejected (the error is logged on the node's logger), 1 without ROS 2
        (one line on stderr).
    """
    if wants_help(sys.argv[1:] if args is None else list(args)):
        print(usage(node_name))
        return 0
    global _RUN_ARGS
    _RUN_ARGS = None if args is None else list(args)
    try:
        import rclpy
        import rclpy.executors
    except ModuleNotFoundError as exc:
        # a node run from a plain pip install (no ROS 2): one line saying what is missing, not a traceback
        print(
            f"{node_name}: ROS 2 is needed to run this node (no module {exc.name!r}): source "
            "/opt/ros/<distro>/setup.bash first, or use the ROS-free 'shape-sensing' command",
            file=sys.stderr,
        )
        return EXIT_NO_ROS

    external = getattr(rclpy.executors, "ExternalShutdownException", None)
    quiet_end: tuple[type[BaseException], ...] = (KeyboardInterrupt,) + ((external,) if external else ())
    try:
        with contextlib.ExitStack() as stack:
            sigint = stack.enter_context(SigintSeen())  # before rclpy.init, whose handler chains to it
            init = rclpy.init(args=None if args is None else list(args))
            if hasattr(init, "__enter__") and hasattr(init, "__exit__"):
                stack.enter_context(init)  # shuts the context down on exit
            else:
                stack.callback(_try_shutdown)
            node = rclpy.create_node(node_name)
            stack.callback(node.destroy_node)
            stack.callback(route_logging(node))
            try:
                app = build(node)
            except ConfigError as exc:
                node.get_logger().error(f"bad configuration: {exc}")
                return EXIT_BAD_CONFIG
            close = getattr(app, "close", None)
            if callable(close):
                stack.callback(close)
            from shape_sensing.nodes.executor import make_executor

            try:
                executor = make_executor()
            except ValueError as exc:  # SHAPE_SENSING_EXECUTOR names no executor
                node.get_logger().error(f"bad configuration: {exc}")
                return EXIT_BAD_CONFIG
            stack.callback(executor.shutdown)  # before the node is destroyed (callbacks run last in, first out)
            if hasattr(executor, "min_wake_interval") and node.has_parameter("input_batch_period"):
                executor.min_wake_interval = float(node.get_parameter("input_batch_period").value)
            try:
                rclpy.spin(node, executor=executor)
            except quiet_end:
                pass
            except Exception:
                if rclpy.ok() and not sigint.seen:
                    raise  # a real error while running
                # Ctrl-C landed in the middle of a take (rclpy then raises e.g. "RuntimeError: Unable to
                # convert call argument to Python object"), before or after rclpy's shutdown of the
                # context: the node is ending anyway, quietly.
    except KeyboardInterrupt:
        pass
    return 0


# -- heartbeat: a status every second on its own timer, naming the inputs at fault ------------------------------------

HEARTBEAT_PERIOD_S = 1.0
FUTURE_TOLERANCE_NS = 500_000_000  # a stamp this far ahead of the node's clock is "from the future"


class InputWatch:
    """What each input of a node last delivered, to name the ones at fault (ROS-free; the node feeds it).

    ``seen(name, stamp_ns, clock_ns)`` on every message: ``stamp_ns`` the message's stamp, ``clock_ns`` the node's
    clock (ROS time: simulated under ``use_sim_time``) when it arrived. Arrival is also timed on the monotonic
    clock, so an input that stops is stale even when the node's clock stops with it (a paused bag).

    Args:
        names: the inputs (topic names as the node was given them).
        stale_s: an input silent this long (monotonic) is stale.
        required: how many fresh inputs the node needs to work (default: all); fewer is an ERROR, else a WARN.
    """

    def __init__(self, names: Sequence[str], stale_s: float, required: int | None = None,
                 monotonic_ns: Callable[[], int] | None = None) -> None:  # fmt: skip
        import time

        self.names = list(names)
        self.stale_ns = max(1, round(stale_s * 1e9))
        self.required = len(self.names) if required is None else required
        self._now = monotonic_ns or time.monotonic_ns
        n = len(self.names)
        self.arrived = np.full(n, -1, dtype=np.int64)  # monotonic ns of the last message, -1: never
        self.count = np.zeros(n, dtype=np.int64)
        self.future = np.zeros(n, dtype=np.int64)  # messages stamped ahead of the node's clock
        self.future_by_ns = np.zeros(n, dtype=np.int64)  # how far ahead the last such message was
        self.started_ns = self._now()

    def seen(self, index: int, stamp_ns: int, clock_ns: int) -> bool:
        """Input ``index`` delivered a message stamped ``stamp_ns`` at node time ``clock_ns``; True when that stamp
        is more than :data:`FUTURE_TOLERANCE_NS` ahead of the clock (the node skips such a message: in stamp order it
        would hold back, then outdate, every other input). A clock at 0 (simulated time before ``/clock``) judges
        nothing. The input counts as heard either way (it is alive, its clock is wrong)."""
        self.arrived[index] = self._now()
        self.count[index] += 1
        if clock_ns > 0 and stamp_ns - clock_ns > FUTURE_TOLERANCE_NS:
            self.future[index] += 1
            self.future_by_ns[index] = stamp_ns - clock_ns
            return True
        return False

    def seen_many(self, indices: Any, stamps_ns: Any, clock_ns: int) -> np.ndarray:
        """:meth:`seen` for the inputs ``indices`` (distinct) at once, e.g. the sensors of one sweep; returns which
        of them are stamped ahead of the clock (a bool array)."""
        idx = np.asarray(indices, dtype=np.intp)
        stamps = np.asarray(stamps_ns, dtype=np.int64)
        self.arrived[idx] = self._now()
        self.count[idx] += 1
        if clock_ns <= 0:
            return np.zeros(idx.shape, dtype=bool)
        by = stamps - clock_ns
        ahead = by > FUTURE_TOLERANCE_NS
        if ahead.any():
            self.future[idx[ahead]] += 1
            self.future_by_ns[idx[ahead]] = by[ahead]
        return ahead

    def faults(self) -> dict[str, list[str]]:
        """Inputs at fault by kind: ``never`` heard, ``stale`` (silent longer than the limit), ``future``-stamped."""
        now = self._now()
        out: dict[str, list[str]] = {"never": [], "stale": [], "future": []}
        for i, name in enumerate(self.names):
            if self.arrived[i] < 0:
                out["never"].append(name)
            elif now - self.arrived[i] > self.stale_ns:
                out["stale"].append(f"{name} ({(now - self.arrived[i]) * 1e-9:.1f} s)")
            if self.future[i]:
                out["future"].append(
                    f"{name} (+{self.future_by_ns[i] * 1e-9:.1f} s, {self.future[i]} messages skipped)"
                )
        return out

    def status(self, name: str, extra: str = "") -> Any:
        """A :class:`~shape_sensing.types.DiagnosticStatus` naming the inputs at fault (OK when none is)."""
        from shape_sensing.types import DiagnosticLevel, DiagnosticStatus

        f = self.faults()
        fresh = len(self.names) - len(f["never"]) - len(f["stale"])
        parts = []
        if f["never"]:
            parts.append(f"never heard: {', '.join(f['never'])}")
        if f["stale"]:
            parts.append(f"stale: {', '.join(f['stale'])}")
        if f["future"]:
            parts.append(f"stamped ahead of the clock: {', '.join(f['future'])}")
        if fresh < self.required:
            level = DiagnosticLevel.ERROR
        elif parts:
            level = DiagnosticLevel.WARN
        else:
            level = DiagnosticLevel.OK
        head = f"{fresh}/{len(self.names)} inputs fresh"
        message = "; ".join([head, *parts]) if parts else f"{head}: all inputs fresh"
        if extra:
            message += f"; {extra}"
        values = {"fresh": str(fresh), "messages": str(int(self.count.sum()))}
        values |= {f"never:{n}": "1" for n in f["never"]}
        return DiagnosticStatus(name=name, level=level, message=message, values=values)


def start_heartbeat(node: Any, statuses: Callable[[], Iterable[Any]], factory: Any, publisher: Any = None,
                    period_s: float = HEARTBEAT_PERIOD_S) -> Any:  # fmt: skip
    """Publish ``statuses()`` on ``/diagnostics`` every ``period_s`` on a steady-clock timer of the node's own.

    The node says it is alive, and what it lacks, from its start and whether or not its inputs (and under
    ``use_sim_time`` its clock) move: a node whose inputs stopped is not silent. Names are qualified as
    :func:`diagnostics_msg` does. ``publisher``: the node's ``/diagnostics`` publisher (else one is made).
    Returns the timer.
    """
    from rclpy.clock import Clock, ClockType

    if publisher is None:
        publisher = node.create_publisher(factory.cls("diagnostic_msgs/msg/DiagnosticArray"), "/diagnostics",
                                          reliable_qos())  # fmt: skip

    def beat() -> None:
        now = int(node.get_clock().now().nanoseconds)
        publisher.publish(diagnostics_msg(node, now, list(statuses()), factory))

    return node.create_timer(period_s, beat, clock=Clock(clock_type=ClockType.STEADY_TIME))


def note_input(node: Any, watch: InputWatch, index: int, msg: Any) -> bool:
    """Tell ``watch`` that input ``index`` delivered ``msg`` (its header stamp against the node's clock); True when
    the message is stamped ahead of the clock and is to be skipped (the heartbeat names the input), with a warning
    in the log (throttled)."""
    stamp = getattr(getattr(msg, "header", None), "stamp", None)
    stamp_ns = int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec) if stamp is not None else 0
    ahead = watch.seen(index, stamp_ns, int(node.get_clock().now().nanoseconds))
    if ahead:
        _warn_ahead(node, watch.names[index], int(watch.future_by_ns[index]))
    return ahead


def stamped_ahead(node: Any, topic: str, stamp_ns: int, clock_ns: int) -> bool:
    """True (with a throttled warning) when ``stamp_ns`` is more than :data:`FUTURE_TOLERANCE_NS` ahead of the node's
    clock ``clock_ns`` (0: simulated time before ``/clock``, judges nothing): a message the node is to skip."""
    if clock_ns <= 0 or stamp_ns - clock_ns <= FUTURE_TOLERANCE_NS:
        return False
    _warn_ahead(node, topic, stamp_ns - clock_ns)
    return True


def _warn_ahead(node: Any, topic: str, ahead_ns: int) -> None:
    warn_throttled(
        node,
        f"ahead:{topic}",
        f"skipped a message on {topic} stamped {ahead_ns * 1e-9:.1f} s ahead of the node's clock "
        "(sensor and node clocks out of sync?)",
    )


WARN_PERIOD_S = 5.0  # a repeated warning (a bad sample, a failing bus) is logged at most this often per kind
_WARNED: dict[tuple[int, str], float] = {}


def warn_throttled(node: Any, key: str, text: str, period_s: float = WARN_PERIOD_S) -> bool:
    """Log ``text`` as a warning on ``node``'s logger unless a warning of this ``key`` was logged in the last
    ``period_s`` seconds (monotonic); True when it was logged.

    rclpy's own ``throttle_duration_sec`` finds its caller's source line (``inspect``, with a ``realpath`` per frame)
    before it checks the throttle: about a millisecond per call on a robot's computer, paid for every bad message
    of a storm the throttle then suppresses. This checks first.
    """
    now = time.monotonic()
    k = (id(node), key)
    last = _WARNED.get(k)
    if last is not None and now - last < period_s:
        return False
    if len(_WARNED) > 4096:  # keys naming topics of nodes long gone
        _WARNED.clear()
    _WARNED[k] = now
    node.get_logger().warning(text)
    return True
