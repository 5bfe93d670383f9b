"""The two install routes install the same thing (no ROS 2 needed).

``pip install .`` (setup.py + setup.cfg) and the ROS 2 build (CMakeLists.txt: ament_cmake, rosidl and
ament_cmake_python, which reads setup.cfg's entry points) must give the same executables and the same share/
files; package.xml must say it is an ament_cmake interface package. The files are parsed, nothing is built here
(the ROS stage of .ci/run builds with colcon and runs the nodes).
"""

from __future__ import annotations

import configparser
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from test_launch_static import setup_py_data_patterns, setup_py_nodes

ROOT = Path(__file__).resolve().parents[1]


def setup_cfg_scripts(path: Path = ROOT / "setup.cfg") -> dict[str, str]:
    """``[options.entry_points] console_scripts`` of setup.cfg: name -> ``module:function``."""
    cfg = configparser.ConfigParser()
    cfg.read(path, encoding="utf-8")
    lines = [ln.strip() for ln in cfg["options.entry_points"]["console_scripts"].splitlines() if ln.strip()]
    out = {}
    for line in lines:
        name, _, target = line.partition("=")
        out[name.strip()] = target.strip()
    return out


def test_setup_cfg_declares_every_node_of_setup_py_and_the_cli() -> None:
    scripts = setup_cfg_scripts()
    expected = {exe: f"shape_sensing.nodes.{module}:main" for exe, module in setup_py_nodes().items()}
    expected["shape-sensing"] = "shape_sensing.cli:main"
    assert scripts == expected


def test_setup_py_itself_declares_no_entry_points() -> None:
    """Entry points live in setup.cfg only, so the ament_cmake route (which never runs setup.py) installs them too."""
    assert "entry_points=" not in (ROOT / "setup.py").read_text(encoding="utf-8")


def test_cmake_installs_the_share_folders_setup_py_installs() -> None:
    cmake = (ROOT / "CMakeLists.txt").read_text(encoding="utf-8")
    folders = {pattern.split("/")[0] for pattern in setup_py_data_patterns()}
    match = re.search(r"install\(DIRECTORY ([\w ]+) DESTINATION share/\$\{PROJECT_NAME\}\)", cmake)
    assert match is not None, "CMakeLists.txt has no install(DIRECTORY ... DESTINATION share/${PROJECT_NAME})"
    assert folders <= set(match.group(1).split())
    assert re.search(r"ament_python_install_package\(\$\{PROJECT_NAME\} SCRIPTS_DESTINATION lib/\$\{PROJECT_NAME\}\)",
                     cmake)
    assert "rosidl_generate_interfaces(${PROJECT_NAME}" in cmake


def test_package_xml_is_an_ament_cmake_interface_package_with_its_test_deps() -> None:
    root = ET.parse(ROOT / "package.xml").getroot()
    assert root.get("format") == "3"
    tags: dict[str, set[str]] = {}
    for child in root:
        tags.setdefault(child.tag, set()).add((child.text or "").strip())
    assert root.findtext("export/build_type") == "ament_cmake"
    assert {"ament_cmake", "ament_cmake_python", "rosidl_default_generators"} <= tags["buildtool_depend"]
    assert "rosidl_interface_packages" in tags["member_of_group"]
    assert "rosidl_default_runtime" in tags["exec_depend"]
    # every package a msg/ file uses is a dependency
    used = set()
    for msg in (ROOT / "msg").glob("*.msg"):
        used |= set(re.findall(r"^\s*([a-z_]+)/\w+", msg.read_text(encoding="utf-8"), flags=re.MULTILINE))
    assert used <= tags["depend"] | {"builtin_interfaces"}
    assert {"launch_testing", "launch_testing_ros", "launch_pytest", "python3-hypothesis"} <= tags["test_depend"]
