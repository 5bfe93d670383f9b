"""Static checks of launch files, parameter files, RViz configs and node entry points (no ROS 2 needed).

Covers every ``launch/*.launch.xml``, ``config/*.yaml`` and ``rviz/*.rviz`` by
glob, so files added later are checked too:

* every ``<node pkg="shape_sensing" exec="X">`` names a console_scripts entry
  of setup.py (``NODES``); a node whose entry point another issue is still
  writing (:data:`PENDING_NODES`) is accepted only when it is started
  conditionally on an argument that defaults to false;
* every ``<param name=...>`` given to such a node is declared by the node's
  schema (:func:`shape_sensing.schemas.schema_for`) and, when its value is
  known statically (literals and ``$(var ...)`` defaults), validates and has
  the ROS 2 type the node declares (an integer where a double is declared is
  rejected by ROS 2);
* every ``<param from=...>`` file exists and has a section for that node;
  every ``$(find-pkg-share shape_sensing)/...`` path exists and is installed
  by setup.py's ``data_files``;
* every ``config/*.yaml`` is in the ROS 2 parameter-file layout and each
  section validates against the schema of its node. Section keys map to
  executables by the convention *node name == executable name* (the last
  component of the key, after any namespace or ``/**/``), or through a
  launch file's ``name=`` for that executable; ``/**`` sections may only hold
  parameters every node declares. Values must also load in ROS 2: no empty
  lists, floats written as floats;
* every module listed in setup.py ``NODES`` exists and defines ``main``
  (parsed with ``ast``, no rclpy import), and has a registered schema;
* package.xml declares what the package uses at run time, read from the
  sources rather than listed by hand: every module imported (``import``,
  ``from ... import``, literal ``importlib.import_module("...")``, also inside
  functions; pip packages by their rosdep key), every ``pkg/msg/Name`` type
  name and every launch file's ``<node pkg=...>``.

The checks are functions returning lists of problems; the tests at the end
also feed them deliberately broken files to show that they catch each fault.
"""

from __future__ import annotations

import ast
import re
import sys
import xml.etree.ElementTree as ET
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import pytest
import yaml

from shape_sensing.config import ConfigError, Schema, flatten
from shape_sensing.schemas import NODE_SCHEMAS, schema_for

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "shape_sensing"
LAUNCH_FILES = sorted((ROOT / "launch").glob("*.launch.xml"))
CONFIG_FILES = sorted((ROOT / "config").glob("*.yaml"))
RVIZ_FILES = sorted((ROOT / "rviz").glob("*.rviz"))

# Executables a launch file may already name while their node is written in another issue:
# executable -> what it is. Started only behind an argument that defaults to false.
PENDING_NODES: dict[str, str] = {
    "bno055_chain": "BNO055 chain driver node (vine robot hardware)",
}

_SUBST = re.compile(r"\$\(([^()]*)\)")


# -- setup.py ------------------------------------------------------------------------------------------------------


def setup_py_nodes(path: Path = ROOT / "setup.py") -> dict[str, str]:
    """``NODES`` of setup.py (executable -> module in shape_sensing/nodes), read with ast (setup() is not run)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
        else:
            targets = [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "NODES" for t in targets) and stmt.value is not None:
            value = ast.literal_eval(stmt.value)
            assert isinstance(value, dict)
            return {str(k): str(v) for k, v in value.items()}
    raise AssertionError(f"{path}: no NODES table")


def setup_py_data_patterns(path: Path = ROOT / "setup.py") -> list[str]:
    """The ``glob("...")`` patterns of setup.py's data_files (what gets installed to share/)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "glob"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ]


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def node_module_problems(nodes: dict[str, str], nodes_dir: Path = ROOT / PACKAGE / "nodes") -> list[str]:
    """Every NODES module exists, defines a top-level ``main`` and its executable has a schema."""
    problems = []
    for exe, module in nodes.items():
        path = nodes_dir / f"{module}.py"
        if not path.is_file():
            problems.append(f"setup.py NODES[{exe!r}]: module file {_rel(path)} does not exist")
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        if not any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in tree.body):
            problems.append(f"{_rel(path)}: no top-level def main() for console script {exe!r}")
        if exe not in NODE_SCHEMAS:
            problems.append(f"executable {exe!r} has no schema in shape_sensing/schemas.py NODE_SCHEMAS")
    return problems


# -- substitutions ---------------------------------------------------------------------------------------------------


def resolve(text: str, args: dict[str, str | None]) -> str | None:
    """Evaluate the substitutions this check understands; ``None`` when the value is only known at launch time.

    ``$(var X)`` -> the default of ``<arg name="X">``; ``$(find-pkg-share shape_sensing)`` -> the repo root.
    """
    unknown = False

    def sub(m: re.Match[str]) -> str:
        nonlocal unknown
        words = m.group(1).split()
        if len(words) == 2 and words[0] == "var" and args.get(words[1]) is not None:
            return str(args[words[1]])
        if words == ["find-pkg-share", PACKAGE]:
            return str(ROOT)
        unknown = True
        return ""

    for _ in range(5):  # defaults may refer to other args
        new = _SUBST.sub(sub, text)
        if new == text or unknown:
            break
        text = new
    return None if unknown or _SUBST.search(text) else text


def ros_value(text: str) -> Any:
    """A launch ``<param value=...>`` as ROS 2 types it (YAML rules, as launch_ros does; an empty value stays the
    empty string, as launch_ros writes it: ``frame_prefix: ''``)."""
    if text == "":
        return ""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


# -- ROS 2 typing of values --------------------------------------------------------------------------------------------


def ros_type_problem(param_type: Any, value: Any) -> str | None:
    """What ROS 2 would reject about ``value`` for a parameter declared with ``param_type`` (static typing)."""
    if param_type is float and isinstance(value, int) and not isinstance(value, bool):
        return f"{value!r} is an integer but the parameter is a double: write {float(value)!r}"
    if isinstance(param_type, str) and isinstance(value, list):
        if not value:
            return "an empty list cannot be typed by ROS 2: leave the parameter out to get its default"
        if param_type == "float[]" and not all(isinstance(v, float) for v in value):
            return f"{value!r}: every element of a double array must be written as a float"
    return None


def value_problems(schema: Schema, values: dict[str, Any], where: str) -> list[str]:
    """Schema validation plus ROS 2 typing of each given value."""
    problems = []
    try:
        schema.validate(values, where=where)
    except ConfigError as exc:
        problems.append(str(exc))
    for name, value in flatten(values).items():
        if name in schema.names():
            reason = ros_type_problem(schema[name].type, value)
            if reason:
                problems.append(f"{where}: parameter '{name}' = {reason}")
    return problems


# -- launch files ----------------------------------------------------------------------------------------------------


def launch_args(root: ET.Element) -> dict[str, str | None]:
    """``<arg name default>`` of a launch file (``None``: no default); not the ``<arg>`` an ``<include>`` passes."""
    return {a.get("name", ""): a.get("default") for a in root.findall("arg")}


def _join_ns(outer: str | None, inner: str | None) -> str | None:
    if inner is None or outer is None:
        return None if inner is None and outer is None else (outer if inner is None else None)
    inner = inner.strip()
    if inner.startswith("/"):
        return "/" + inner.strip("/")
    return "/" + "/".join(part for part in (outer.strip("/"), inner.strip("/")) if part)


def launch_nodes(root: ET.Element, args: dict[str, str | None]) -> list[tuple[ET.Element, str | None]]:
    """Every ``<node>`` with its namespace as launched (``None`` when only known at launch time).

    Follows ``namespace=`` attributes and ``<push-ros-namespace>`` inside ``<group>`` scopes.
    """
    out: list[tuple[ET.Element, str | None]] = []

    def walk(elem: ET.Element, ns: str | None) -> None:
        for child in elem:
            if child.tag in ("push-ros-namespace", "push_ros_namespace"):
                text = child.get("namespace")
                ns = _join_ns(ns, resolve(text, args) if text is not None else None)
            elif child.tag == "node":
                text = child.get("namespace")
                out.append((child, ns if text is None else _join_ns(ns, resolve(text, args))))
            else:
                walk(child, ns)  # groups scope their pushed namespace

    walk(root, "/")
    return out


def launch_node_names(files: list[Path]) -> dict[str, str]:
    """Node name -> executable, from the ``name=`` of every shape_sensing node in ``files``."""
    out = {}
    for f in files:
        for node in ET.parse(f).getroot().iter("node"):
            if node.get("pkg") == PACKAGE and node.get("exec"):
                out[node.get("name") or node.get("exec", "")] = node.get("exec", "")
    return out


def config_users(path: Path, files: list[Path]) -> set[str]:
    """Executables that launch files give parameter file ``path`` to (``<param from=...>``)."""
    users = set()
    for f in files:
        root = ET.parse(f).getroot()
        args = launch_args(root)
        for node in root.iter("node"):
            if node.get("pkg") != PACKAGE:
                continue
            for param in node.findall("param"):
                text = resolve(param.get("from", ""), args) if param.get("from") else None
                if text and Path(text).resolve() == path.resolve():
                    users.add(node.get("exec", ""))
    return users


def key_matches(key: str, fqn: str) -> bool:
    """Whether a parameter-file key applies to node ``fqn`` (ROS 2 rules).

    A key without a leading ``/`` is in the root namespace; ``*`` matches one
    name token, ``**`` zero or more.
    """
    key = key if key.startswith("/") else "/" + key
    pattern = re.escape(key.rstrip("/")).replace(r"/\*\*", "(?:/[^/]+)*").replace(r"\*", "[^/]+")
    return re.fullmatch(pattern, fqn) is not None


def _installed(path: Path, patterns: list[str]) -> bool:
    rel = path.relative_to(ROOT).as_posix()
    return any(fnmatch(rel, pat) for pat in patterns)


def launch_problems(path: Path, nodes: dict[str, str], patterns: list[str]) -> list[str]:
    """Everything wrong with one launch file (see the module docstring)."""
    name = path.name
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        return [f"{name}: not well-formed XML: {exc}"]
    if root.tag != "launch":
        return [f"{name}: root element is <{root.tag}>, expected <launch>"]
    args = launch_args(root)
    problems = []
    # Every path into this package must exist and be installed.
    for elem in root.iter():
        for attr, text in elem.attrib.items():
            for m in re.finditer(r"\$\(find-pkg-share " + PACKAGE + r"\)(/[^\s\"']*)", text):
                rel = resolve(m.group(1), args)
                if rel is None:
                    continue
                target = ROOT / rel.lstrip("/")
                if not target.exists():
                    problems.append(f"{name}: <{elem.tag} {attr}=...> refers to {rel}, which does not exist")
                elif not _installed(target, patterns):
                    problems.append(f"{name}: {rel} exists but setup.py data_files do not install it")
    for node, ns in launch_nodes(root, args):
        if node.get("pkg") != PACKAGE:
            continue
        exe = node.get("exec", "")
        where = f"{name}: node {exe!r}"
        if exe not in nodes:
            if exe in PENDING_NODES:
                cond = node.get("if", "")
                m = re.fullmatch(r"\$\(var (\w+)\)", cond.strip())
                if not m or str(args.get(m.group(1))).lower() != "false":
                    problems.append(
                        f"{where} ({PENDING_NODES[exe]}) has no entry point yet: start it only with "
                        'if="$(var ARG)" and an ARG that defaults to false'
                    )
            else:
                problems.append(f"{where} is not a console_scripts entry of setup.py NODES {sorted(nodes)}")
            continue
        schema = schema_for(exe)
        node_name = node.get("name") or exe
        fqn = None if ns is None else _join_ns(ns, node_name)
        for param in node.findall("param"):
            if param.get("from") is not None:
                file_text = resolve(param.get("from", ""), args)
                if file_text is None:
                    continue
                file_path = Path(file_text)
                if not file_path.is_file():
                    problems.append(f"{where}: parameter file {file_text} does not exist")
                    continue
                problems += param_file_problems(file_path, node_name, fqn, schema)
                continue
            pname = param.get("name", "")
            if pname != "use_sim_time" and pname not in schema.names():
                problems.append(
                    f"{where}: <param name={pname!r}> is not declared by schema {schema.node}; "
                    f"known: {sorted(schema.names())}"
                )
                continue
            text = resolve(param.get("value", ""), args)
            if text is None:
                continue
            value = ros_value(text)
            if pname == "use_sim_time":
                if not isinstance(value, bool):
                    problems.append(f"{where}: use_sim_time = {text!r}: expected true or false")
                continue
            problems += value_problems(schema, {pname: value}, where)
    return problems


def param_file_problems(path: Path, node_name: str, fqn: str | None, schema: Schema) -> list[str]:
    """The sections of a parameter file that apply to the node validate against ``schema``.

    With the node's fully qualified name known, sections apply by the ROS 2
    matching rules (:func:`key_matches`); otherwise by their last name token.
    """
    data = yaml.safe_load(path.read_text()) or {}
    sections = {str(k): v for k, v in data.items() if isinstance(v, dict)}
    if fqn is not None:
        applying = {k: v for k, v in sections.items() if key_matches(k, fqn)}
    else:
        applying = {k: v for k, v in sections.items() if k.rstrip("/").split("/")[-1] in ("**", node_name)}
    if not applying:
        hint = ""
        if fqn is not None and any(k.rstrip("/").split("/")[-1] == node_name for k in sections):
            hint = f"; a key without a namespace only matches the root namespace: use /**/{node_name}"
        return [f"{path.name}: no section applies to node {fqn or node_name!r} (keys: {sorted(sections)}){hint}"]
    problems = []
    for key, section in applying.items():
        problems += value_problems(schema, section.get("ros__parameters") or {}, f"{path.name} [{key}]")
    return problems


# -- parameter files -----------------------------------------------------------------------------------------------


def config_problems(
    path: Path, nodes: dict[str, str], names: dict[str, str], users: set[str] | None = None
) -> list[str]:
    """A ``config/*.yaml`` is in ROS 2 layout and each section validates against its node's schema.

    ``/**`` (or ``/*``) sections are checked against the nodes the file is
    given to (``users``; by default the executable named like the file), or,
    when nobody uses it, must only hold parameters every node declares.
    """
    name = path.name
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        return [f"{name}: not valid YAML: {exc}"]
    if not isinstance(data, dict) or not data:
        return [f"{name}: expected a mapping of node sections"]
    if users is None:
        users = {path.stem} if path.stem in nodes or path.stem in PENDING_NODES else set()
    problems = []
    for key, section in data.items():
        where = f"{name} [{key}]"
        if not isinstance(section, dict) or set(section) != {"ros__parameters"}:
            problems.append(f"{where}: expected exactly one key 'ros__parameters' (ROS 2 parameter-file layout)")
            continue
        params = section["ros__parameters"]
        if not isinstance(params, dict):
            problems.append(f"{where}: ros__parameters must be a mapping")
            continue
        short = str(key).rstrip("/").split("/")[-1]
        if short in ("**", "*"):
            if users:
                for exe in sorted(users):
                    if exe in nodes:
                        problems += value_problems(schema_for(exe), params, f"{where} (for {exe})")
                continue
            shared = set.intersection(*(set(schema_for(e).names()) for e in NODE_SCHEMAS)) | {"use_sim_time"}
            extra = sorted(set(flatten(params)) - shared)
            if extra:
                problems.append(
                    f"{where}: {extra} are not declared by every node and no launch file gives this file to a "
                    "node; put them in that node's section"
                )
            continue
        exe = names.get(short, short)
        if exe not in nodes:
            if exe in PENDING_NODES:
                continue  # its schema is checked once the node is registered
            problems.append(
                f"{where}: node {short!r} is no executable of setup.py NODES {sorted(nodes)} "
                "(convention: section key = node name = executable name)"
            )
            continue
        problems += value_problems(schema_for(exe), params, where)
    return problems


# -- RViz ---------------------------------------------------------------------------------------------------------


def rviz_problems(path: Path) -> list[str]:
    """An RViz2 config: YAML with Visualization Manager displays, each with a class and a name, and a fixed frame."""
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        return [f"{path.name}: not valid YAML: {exc}"]
    vm = data.get("Visualization Manager") if isinstance(data, dict) else None
    if not isinstance(vm, dict) or not isinstance(vm.get("Displays"), list):
        return [f"{path.name}: no 'Visualization Manager: Displays:' list"]
    problems = []
    if not (vm.get("Global Options") or {}).get("Fixed Frame"):
        problems.append(f"{path.name}: no Global Options / Fixed Frame")
    for i, d in enumerate(vm["Displays"]):
        if not isinstance(d, dict) or not str(d.get("Class", "")).count("/") or not d.get("Name"):
            problems.append(f"{path.name}: display {i} needs 'Class: plugin_package/Type' and a 'Name'")
    return problems


def rviz_topics(path: Path) -> dict[str, set[str]]:
    """Display class -> topics shown."""
    out: dict[str, set[str]] = {}
    for d in yaml.safe_load(path.read_text())["Visualization Manager"]["Displays"]:
        topic = (d.get("Topic") or {}).get("Value") if isinstance(d.get("Topic"), dict) else None
        out.setdefault(d["Class"], set()).update({topic} if topic else set())
    return out


# ======================================================================================================================
# Tests on the repository's files
# ======================================================================================================================

NODES = setup_py_nodes()
PATTERNS = setup_py_data_patterns()


def test_there_is_something_to_check() -> None:
    assert LAUNCH_FILES and CONFIG_FILES and RVIZ_FILES
    assert {"hinge_arc_estimator", "vine_imu_simulator"} <= set(NODES)


def test_node_modules_exist_and_define_main() -> None:
    assert node_module_problems(NODES) == []


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_file(path: Path) -> None:
    assert launch_problems(path, NODES, PATTERNS) == []


@pytest.mark.parametrize("path", CONFIG_FILES, ids=lambda p: p.name)
def test_config_file(path: Path) -> None:
    users = config_users(path, LAUNCH_FILES) or None
    assert config_problems(path, NODES, launch_node_names(LAUNCH_FILES), users) == []


@pytest.mark.parametrize("path", RVIZ_FILES, ids=lambda p: p.name)
def test_rviz_file(path: Path) -> None:
    assert rviz_problems(path) == []


def test_vine_config_is_the_seed_robot() -> None:
    """config/vine_imu.yaml: 18 IMUs, 10.2 cm apart, 12.9 cm body (seed 000)."""
    p = schema_for("hinge_arc_estimator").load_yaml(ROOT / "config" / "vine_imu.yaml")
    assert p["imu_topics"] == [f"imu_{i:02d}/data" for i in range(18)]
    assert (p["spacing"], p["diameter"]) == (0.102, 0.129)


def _record_topics(path: Path) -> set[str]:
    root = ET.parse(path).getroot()
    cmds = [e.get("cmd", "") for e in root.iter("executable") if "bag record" in e.get("cmd", "")]
    assert len(cmds) == 1, f"{path.name}: expected one ros2 bag record"
    words = (resolve(cmds[0], launch_args(root)) or "").split()
    assert words[:5] == ["ros2", "bag", "record", "-s", "mcap"], f"{path.name}: record with MCAP storage"
    return {w for w in words if w.startswith("/")}


def test_sim_launch_records_raw_truth_estimates_and_tf() -> None:
    from shape_sensing.pipelines.vine_imu import SHAPE_TOPICS, TRUTH_TOPICS, resolve_topic

    sim_launch = ROOT / "launch" / "vine_imu_sim.launch.xml"
    n = schema_for("vine_imu_simulator")["n_sensors"].default
    want = {resolve_topic(f"imu_{i:02d}/data", "/vine") for i in range(n)} | {"/vine/base/length", "/tf_static"}
    want |= {resolve_topic(t, "/vine") for t in (*SHAPE_TOPICS, *TRUTH_TOPICS)}
    assert _record_topics(sim_launch) == want
    robot = _record_topics(ROOT / "launch" / "vine_imu.launch.xml")
    assert robot == want - {resolve_topic(t, "/vine") for t in TRUTH_TOPICS}


def test_launch_args_rviz_record_driver_default_false() -> None:
    sim = launch_args(ET.parse(ROOT / "launch" / "vine_imu_sim.launch.xml").getroot())
    robot = launch_args(ET.parse(ROOT / "launch" / "vine_imu.launch.xml").getroot())
    assert (sim["rviz"], sim["record"]) == ("false", "false")
    assert (robot["rviz"], robot["record"], robot["driver"]) == ("false", "false", "false")


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_rviz_is_off_by_default_and_only_behind_its_argument(path: Path) -> None:
    """RViz is not installed on a robot or in CI: no launch file may start rviz2 unless asked (rviz:=true)."""
    root = ET.parse(path).getroot()
    rviz_nodes = [n for n in root.iter("node") if n.get("pkg") == "rviz2"]
    for node in rviz_nodes:
        assert node.get("if") == "$(var rviz)", f"{path.name}: rviz2 started unconditionally"
    if rviz_nodes:
        assert launch_args(root)["rviz"] == "false"


def test_vine_launch_can_start_the_driver_simulated() -> None:
    root = ET.parse(ROOT / "launch" / "vine_imu.launch.xml").getroot()
    assert launch_args(root)["simulate"] == "false"
    driver = next(n for n in root.iter("node") if n.get("exec") == "bno055_chain")
    params = {p.get("name"): p.get("value") for p in driver.iter("param") if p.get("name")}
    assert params["simulate"] == "$(var simulate)"


@pytest.mark.parametrize("name", ["vine_imu", "vine_imu_sim"])
def test_vine_rviz_shows_the_slice(name: str) -> None:
    path = ROOT / "rviz" / f"{name}.rviz"
    data = yaml.safe_load(path.read_text())
    assert data["Visualization Manager"]["Global Options"]["Fixed Frame"] == "world"
    topics = rviz_topics(path)
    assert "rviz_default_plugins/TF" in topics
    assert topics["rviz_default_plugins/MarkerArray"] == {"/vine/shape/markers"}
    truth = {"/vine/truth/path"} if name.endswith("_sim") else set()  # the robot has no ground truth
    assert topics["rviz_default_plugins/Path"] == {"/vine/shape/path"} | truth
    assert topics["rviz_default_plugins/PoseWithCovariance"] == {"/vine/shape/tip"}


def test_every_rviz_launch_has_its_config_and_every_config_a_launch() -> None:
    """rviz:=true opens rviz/<file>.rviz: each launch file with RViz names one that exists, and each config is
    opened by a launch file (test/test_rviz.py opens each in RViz)."""
    used = set()
    for path in LAUNCH_FILES:
        for node in ET.parse(path).getroot().iter("node"):
            if node.get("pkg") == "rviz2":
                m = re.search(r"/rviz/([\w.-]+\.rviz)", node.get("args", ""))
                assert m, f"{path.name}: rviz2 without -d .../rviz/NAME.rviz"
                assert (ROOT / "rviz" / m.group(1)).is_file(), f"{path.name}: rviz/{m.group(1)} does not exist"
                used.add(m.group(1))
    assert used == {p.name for p in RVIZ_FILES}


# ======================================================================================================================
# The checks catch faults (deliberately broken files)
# ======================================================================================================================


def _launch(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "bad.launch.xml"
    path.write_text(f'<launch>\n<arg name="on" default="false"/>\n{body}\n</launch>\n')
    return path


def _one(problems: list[str], pattern: str) -> None:
    assert len(problems) == 1, problems
    assert re.search(pattern, problems[0]), problems[0]


def test_catches_unknown_executable(tmp_path: Path) -> None:
    path = _launch(tmp_path, '<node pkg="shape_sensing" exec="hinge_arc_estimater"/>')
    _one(launch_problems(path, NODES, PATTERNS), r"'hinge_arc_estimater' is not a console_scripts entry")


def test_other_packages_nodes_are_not_checked(tmp_path: Path) -> None:
    path = _launch(tmp_path, '<node pkg="rviz2" exec="rviz2"><param name="anything" value="1"/></node>')
    assert launch_problems(path, NODES, PATTERNS) == []


def test_pending_node_must_be_off_by_default(tmp_path: Path) -> None:
    gated = _launch(tmp_path, '<node pkg="shape_sensing" exec="bno055_chain" if="$(var on)"/>')
    ungated = tmp_path / "ungated.launch.xml"
    ungated.write_text('<launch><node pkg="shape_sensing" exec="bno055_chain"/></launch>')
    nodes = {k: v for k, v in NODES.items() if k != "bno055_chain"}
    assert launch_problems(gated, nodes, PATTERNS) == []
    _one(launch_problems(ungated, nodes, PATTERNS), r"no entry point yet")


def _estimator(param: str) -> str:
    return f'<node pkg="shape_sensing" exec="hinge_arc_estimator">{param}</node>'


def test_catches_undeclared_parameter(tmp_path: Path) -> None:
    path = _launch(tmp_path, _estimator('<param name="spaceing" value="0.1"/>'))
    _one(launch_problems(path, NODES, PATTERNS), r"<param name='spaceing'> is not declared by schema hinge_arc")


def test_catches_bad_and_int_for_double_values(tmp_path: Path) -> None:
    bad = _launch(tmp_path, _estimator('<param name="spacing" value="-1.0"/>'))
    _one(launch_problems(bad, NODES, PATTERNS), r"parameter 'spacing' = -1.0: expected float >= 0.001")
    as_int = _launch(tmp_path, _estimator('<param name="spacing" value="1"/>'))
    _one(launch_problems(as_int, NODES, PATTERNS), r"'spacing' = 1 is an integer but the parameter is a double")


def test_checks_values_given_through_arg_defaults(tmp_path: Path) -> None:
    path = tmp_path / "arg.launch.xml"
    path.write_text(
        '<launch><arg name="scenario" default="sideways"/>'
        '<node pkg="shape_sensing" exec="vine_imu_simulator"><param name="scenario" value="$(var scenario)"/></node>'
        "</launch>"
    )
    _one(launch_problems(path, NODES, PATTERNS), r"parameter 'scenario' = 'sideways': expected string in")


def test_catches_missing_files(tmp_path: Path) -> None:
    path = _launch(
        tmp_path,
        '<node pkg="shape_sensing" exec="hinge_arc_estimator">'
        '<param from="$(find-pkg-share shape_sensing)/config/nope.yaml"/></node>',
    )
    problems = launch_problems(path, NODES, PATTERNS)
    assert len(problems) == 2 and all("nope.yaml" in p for p in problems), problems


def test_catches_bad_parameter_file_given_to_a_node(tmp_path: Path) -> None:
    cfg = tmp_path / "x.yaml"
    cfg.write_text("/**/hinge_arc_estimator:\n  ros__parameters:\n    every_k: 0\n")
    path = _launch(tmp_path, f'<node pkg="shape_sensing" exec="hinge_arc_estimator"><param from="{cfg}"/></node>')
    _one(launch_problems(path, NODES, PATTERNS), r"parameter 'every_k' = 0: expected int >= 1")
    other = tmp_path / "y.yaml"
    other.write_text("vine_imu_simulator:\n  ros__parameters:\n    seed: 1\n")
    path = _launch(tmp_path, f'<node pkg="shape_sensing" exec="hinge_arc_estimator"><param from="{other}"/></node>')
    _one(launch_problems(path, NODES, PATTERNS), r"no section applies to node '/hinge_arc_estimator'")


def test_catches_malformed_launch_xml(tmp_path: Path) -> None:
    path = tmp_path / "broken.launch.xml"
    path.write_text("<launch><node pkg='shape_sensing'></launch>")
    _one(launch_problems(path, NODES, PATTERNS), r"not well-formed XML")


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ("hinge_arc_estimator:\n  spacing: 0.1\n", r"exactly one key 'ros__parameters'"),
        ("/vine/estimator:\n  ros__parameters: {}\n", r"node 'estimator' is no executable"),
        ("/**/hinge_arc_estimator:\n  ros__parameters:\n    typo: 1\n", r"unknown parameter\(s\) \['typo'\]"),
        ("/**/hinge_arc_estimator:\n  ros__parameters:\n    diameter: 1\n", r"'diameter' = 1 is an integer"),
        ("/**/hinge_arc_estimator:\n  ros__parameters:\n    use_sensors: []\n", r"empty list cannot be typed"),
        ("/**/hinge_arc_estimator:\n  ros__parameters:\n    first_mount_rpy: [0, 0.0, 0.0]\n", r"written as a float"),
        ("/**:\n  ros__parameters:\n    spacing: 0.1\n", r"\['spacing'\] are not declared by every node"),
        ("a: [1\n", r"not valid YAML"),
    ],
)
def test_config_check_catches(tmp_path: Path, text: str, pattern: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    _one(config_problems(path, NODES, {}), pattern)


def test_config_sections_map_through_launch_node_names(tmp_path: Path) -> None:
    launch = _launch(tmp_path, '<node pkg="shape_sensing" exec="hinge_arc_estimator" name="shape"/>')
    path = tmp_path / "renamed.yaml"
    path.write_text("/vine/shape:\n  ros__parameters:\n    every_k: 2\n    frame_prefix: left_\n")
    assert config_problems(path, NODES, launch_node_names([launch])) == []
    path.write_text("/vine/shape:\n  ros__parameters:\n    every_k: -2\n")
    _one(config_problems(path, NODES, launch_node_names([launch])), r"'every_k' = -2")


def test_catches_missing_node_module_and_main(tmp_path: Path) -> None:
    (tmp_path / "no_main.py").write_text("def run() -> None:\n    pass\n")
    problems = node_module_problems({"hinge_arc_estimator": "no_main", "vine_imu_simulator": "absent"}, tmp_path)
    assert len(problems) == 2, problems
    assert "no top-level def main()" in problems[0] or "no top-level def main()" in problems[1]
    assert any("absent.py does not exist" in p for p in problems)


def test_rviz_check_catches(tmp_path: Path) -> None:
    path = tmp_path / "bad.rviz"
    path.write_text("Visualization Manager:\n  Displays:\n    - Name: x\n")
    problems = rviz_problems(path)
    assert any("Fixed Frame" in p for p in problems) and any("display 0" in p for p in problems)


@pytest.mark.parametrize(
    ("key", "fqn", "applies"),
    [
        ("/**/hinge_arc_estimator", "/vine/hinge_arc_estimator", True),
        ("/**/hinge_arc_estimator", "/hinge_arc_estimator", True),
        ("/**", "/a/b/c", True),
        ("/vine/*", "/vine/hinge_arc_estimator", True),
        ("/*", "/vine/hinge_arc_estimator", False),
        ("hinge_arc_estimator", "/hinge_arc_estimator", True),
        ("hinge_arc_estimator", "/vine/hinge_arc_estimator", False),
        ("/vine/hinge_arc_estimator", "/left/vine/hinge_arc_estimator", False),
    ],
)
def test_parameter_file_keys_follow_ros2_matching(key: str, fqn: str, applies: bool) -> None:
    assert key_matches(key, fqn) is applies


def test_catches_section_that_misses_a_pushed_namespace(tmp_path: Path) -> None:
    cfg = tmp_path / "x.yaml"
    cfg.write_text("hinge_arc_estimator:\n  ros__parameters:\n    every_k: 2\n")
    body = (
        '<arg name="ns" default="left"/><group><push-ros-namespace namespace="$(var ns)"/>'
        f'<node pkg="shape_sensing" exec="hinge_arc_estimator"><param from="{cfg}"/></node></group>'
    )
    _one(launch_problems(_launch(tmp_path, body), NODES, PATTERNS), r"'/left/hinge_arc_estimator'.*use /\*\*/hinge")
    outside = f'<node pkg="shape_sensing" exec="hinge_arc_estimator"><param from="{cfg}"/></node>'
    assert launch_problems(_launch(tmp_path, outside), NODES, PATTERNS) == []


# -- package.xml -----------------------------------------------------------------------------------------------------

# Python module imported -> rosdep key that installs it.
ROSDEP_KEYS = {
    "numpy": "python3-numpy",
    "scipy": "python3-scipy",
    "matplotlib": "python3-matplotlib",
    "yaml": "python3-yaml",
    "can": "python3-can",
    "serial": "python3-serial",
    "smbus2": "python3-smbus2",
    "tqdm": "python3-tqdm",
    # the Python tf2_ros module is the package tf2_ros_py (tf2_ros is the C++ one with static_transform_publisher)
    "tf2_ros": "tf2_ros_py",
}

_TYPE_NAME = re.compile(r"([a-z][a-z0-9_]*)/(?:msg|srv|action)/[A-Z][A-Za-z0-9]*")


def declared_depends(package_xml: str) -> set[str]:
    """Names under ``<exec_depend>`` or ``<depend>``."""
    root = ET.fromstring(package_xml)
    return {(e.text or "").strip() for tag in ("exec_depend", "depend") for e in root.iter(tag)}


def used_by_source(source: str) -> dict[str, str]:
    """Top-level modules imported and packages of ROS type names in ``source`` -> what showed it."""
    found: dict[str, str] = {}
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names = [node.args[0].value]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            m = _TYPE_NAME.fullmatch(node.value)
            if m and m.group(1) != PACKAGE:  # the package's own msg/ interfaces are built with it
                found.setdefault(m.group(1), f"type {node.value}")
        for name in names:
            top = name.split(".")[0]
            if top != PACKAGE and top != "__future__" and top not in sys.stdlib_module_names:
                found.setdefault(ROSDEP_KEYS.get(top, top), f"import {name}")
    return found


def used_by_launch(launch_xml: str) -> dict[str, str]:
    """Packages a launch file needs -> what showed it: the XML front end and ``ros2 launch`` for any XML launch
    file, the packages whose executables it starts, ``ros2bag`` (and the MCAP storage) for a ``ros2 bag`` command."""
    root = ET.fromstring(launch_xml)
    used = {"launch_xml": "an XML launch file", "ros2launch": "an XML launch file (ros2 launch)"}
    used |= {
        e.get("pkg", ""): f"{e.get('pkg')} {e.get('exec')}"
        for e in root.iter("node")
        if e.get("pkg") and e.get("pkg") != PACKAGE
    }
    for e in root.iter("executable"):
        cmd = e.get("cmd", "")
        if cmd.startswith("ros2 bag"):
            used["ros2bag"] = cmd[:40]
            if " -s mcap" in cmd or ".mcap" in cmd:
                used["rosbag2_storage_mcap"] = cmd[:40]
    return used


def undeclared(package_xml: str, used: dict[str, str]) -> list[str]:
    """What is used but not declared, with where it was seen."""
    have = declared_depends(package_xml)
    return sorted(f"{dep} ({why})" for dep, why in used.items() if dep not in have)


# Python packages without a distribution package (no rosdep key, or only a *-pip one: see package.xml's comment and
# docs/guides/install.md), imported only inside the functions that need them (bags, meshes, the physical simulator,
# BLAS thread limits), so the nodes run without them (test/test_rosdep_keys.py imports every node with them blocked).
# Not in package.xml; in requirements-ros.txt. RViz is optional (rviz:=true says so when it is absent).
OPTIONAL_EXTRAS = {"mujoco", "rosbags", "mcap", "mcap_ros2", "trimesh", "threadpoolctl", "rviz2"}


def used_by_package() -> dict[str, str]:
    used: dict[str, str] = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        for dep, why in used_by_source(path.read_text()).items():
            if dep == PACKAGE or dep in OPTIONAL_EXTRAS:  # its own interfaces (msg/), built with it; extras
                continue
            used.setdefault(dep, f"{path.relative_to(ROOT)}: {why}")
    for path in sorted((ROOT / "launch").glob("*.launch.xml")):
        for dep, why in used_by_launch(path.read_text()).items():
            if dep not in OPTIONAL_EXTRAS:
                used.setdefault(dep, f"{path.relative_to(ROOT)}: {why}")
    return used


def test_everything_used_is_declared() -> None:
    used = used_by_package()
    # The scan finds what the nodes and launch files are known to need (guards against a scan that finds nothing).
    assert {"rclpy", "rcl_interfaces", "std_srvs", "tf2_ros", "tf2_ros_py", "geometry_msgs", "python3-numpy",
            "launch_xml", "ros2launch", "ros2bag"} <= set(used)
    assert undeclared((ROOT / "package.xml").read_text(), used) == []


def test_checks_catch_an_undeclared_dependency() -> None:
    source = """
from rcl_interfaces.msg import ParameterDescriptor
import numpy as np, os.path
def f():
    import importlib
    return importlib.import_module("rosidl_runtime_py.utilities"), "visualization_msgs/msg/MarkerArray"
"""
    launch = '<launch><node pkg="tf2_ros" exec="static_transform_publisher"/><node pkg="shape_sensing"/></launch>'
    used = used_by_source(source) | used_by_launch(launch)
    assert set(used) == {"rcl_interfaces", "python3-numpy", "rosidl_runtime_py", "visualization_msgs", "tf2_ros",
                         "launch_xml", "ros2launch"}
    package_xml = """<package format="3"><name>p</name>
      <depend>python3-numpy</depend><exec_depend>rosidl_runtime_py</exec_depend>
      <exec_depend>visualization_msgs</exec_depend><exec_depend>tf2_ros_py</exec_depend>
      <exec_depend>launch_xml</exec_depend><exec_depend>ros2launch</exec_depend></package>"""
    assert undeclared(package_xml, used) == [
        "rcl_interfaces (import rcl_interfaces.msg)",
        "tf2_ros (tf2_ros static_transform_publisher)",
    ]


# -- composing robots and failing as a whole ---------------------------------------------------------------------------

# launch files without a transform of their own to a world frame (the driver's frames are placed by the estimator)
NO_WORLD_TF = {"bno055_chain.launch.xml"}


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_file_composes_and_fails_as_a_whole(path: Path) -> None:
    """Every launch file: namespace, frame_prefix, use_sim_time (and world_frame, world_tf where it places the
    robot) arguments, passed to every node; its argument checks included before any process; every process but RViz
    and a bag player ends the launch when it exits (on_exit shutdown, no respawn: see the launch file's header)."""
    root = ET.parse(path).getroot()
    args = launch_args(root)
    wanted = {"namespace", "frame_prefix", "use_sim_time"} | (set() if path.name in NO_WORLD_TF else
                                                              {"world_frame", "world_tf"})
    assert wanted <= set(args), f"{path.name}: missing arguments {sorted(wanted - set(args))}"
    assert args["frame_prefix"] == "" and args["use_sim_time"] == "false"
    first = next(e for e in root if e.tag not in ("arg",))
    assert first.tag == "include" and first.get("file", "").endswith("/launch/checks.launch.py"), (
        f"{path.name}: the first action must be the argument checks (before any process starts)")
    passed = {a.get("name"): a.get("value", "") for a in first.findall("arg")}
    for flag in ("rviz", "record", "use_sim_time", "world_tf", "driver", "drivers", "simulate"):
        if flag in args:
            assert re.search(rf"(^| ){flag}=\$\(var {flag}\)( |$)", passed["flags"]), f"{path.name}: {flag} unchecked"
    assert "config=$(var config)" in passed["files"].split(";")
    if "rviz" in args:
        assert passed["rviz"] == "$(var rviz)"
    for node in root.iter("node"):
        where = f"{path.name}: {node.get('pkg')} {node.get('exec')}"
        assert node.get("respawn") is None, where
        if node.get("pkg") == "rviz2":
            assert node.get("on_exit") is None, f"{where}: closing RViz must leave the robot running"
            continue
        assert node.get("on_exit") == "shutdown", f"{where}: a process that exits must end the launch"
        if node.get("pkg") == PACKAGE:
            params = {p.get("name"): p.get("value") for p in node.findall("param") if p.get("name")}
            assert params.get("frame_prefix") == "$(var frame_prefix)", f"{where}: frame_prefix not passed"
            if "use_sim_time" in params:
                assert params["use_sim_time"] == "$(var use_sim_time)"
        if node.get("exec") == "static_transform_publisher":  # world_frame -> a robot frame, or robot -> robot
            a = node.get("args", "")
            assert "--child-frame-id $(var frame_prefix)" in a, where
            if "--frame-id $(var world_frame)" in a:
                guarded = {id(n) for g in root.iter("group") if "world_tf" in g.get("if", "") for n in g.iter("node")}
                assert "world_tf" in node.get("if", "") or id(node) in guarded, f"{where}: world_tf:=false keeps it"
            else:
                assert "--frame-id $(var frame_prefix)" in a, where
    for exe in root.iter("executable"):
        if "bag record" in exe.get("cmd", ""):
            assert exe.get("on_exit") == "shutdown", f"{path.name}: a recorder that dies must end the launch"
            assert "$(var namespace)" in exe.get("cmd", ""), f"{path.name}: recorded topics ignore namespace:="


def _checks_module() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("checks_launch", ROOT / "launch" / "checks.launch.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:  # launch (ROS 2) not installed here
        pytest.skip(f"launch/checks.launch.py needs ROS 2's launch package: {exc}")
    return module


def test_argument_checks_name_what_is_wrong(tmp_path: Path) -> None:
    checks = _checks_module()
    config = tmp_path / "c.yaml"
    config.write_text("{}\n")
    assert checks.problems(f"config={config}", "rviz=false record=true world_tf=0", "false",
                           "namespace=vine frame_prefix= world_frame=world") == []
    found = checks.problems(f"config={tmp_path / 'missing.yaml'};map=", "record=yes rviz=False", "false",
                            "namespace=/vine frame_prefix=a-b world_frame=")
    assert found[0] == "record:='yes': expected true or false"
    assert found[1].endswith("missing.yaml: no such file") and found[2] == "map:= is empty: expected a file"
    assert [f.split(":=")[0] for f in found[3:]] == ["namespace", "frame_prefix", "world_frame"]
