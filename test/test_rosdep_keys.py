"""package.xml resolves with rosdep, and the nodes run on what it installs (ROS-free; no network).

* Every dependency key of package.xml is a ROS 2 package of the distribution or a rosdep key whose Debian and
  Ubuntu rules name distribution packages, checked against ``test/data/rosdep_keys.yaml``: a copy of
  ros/rosdistro's ``rosdep/base.yaml``, ``rosdep/python.yaml`` and ``jazzy/distribution.yaml`` entries for the
  keys used (and for the keys considered and found missing), made by ``scripts/rosdep_snapshot.py``.
* No ``*-pip`` key: rosdep's pip installer meets PEP 668 on Debian 12 and Ubuntu 24.04, and bloom cannot release
  a package with one.
* Every node module imports with the Python packages rosdep cannot install (rosbags, mcap, trimesh, threadpoolctl,
  mujoco, easydubins, the VL53L5CX firmware package) made unimportable, so the nodes run on the distribution's
  packages alone; each of those packages is named in docs/guides/install.md and pinned in requirements-ros.txt.
"""

from __future__ import annotations

import configparser
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = yaml.safe_load((ROOT / "test" / "data" / "rosdep_keys.yaml").read_text())
DEPEND_TAGS = ("depend", "build_depend", "buildtool_depend", "exec_depend", "test_depend")

# distribution name of a pip-only requirement -> its top-level module(s)
PIP_ONLY = {
    "rosbags": ["rosbags"],
    "mcap": ["mcap"],
    "mcap-ros2-support": ["mcap_ros2"],
    "trimesh": ["trimesh"],
    "sparkfun-qwiic-vl53l5cx": ["qwiic_vl53l5cx"],
    "sparkfun-qwiic-i2c": ["qwiic_i2c"],
    "mujoco": ["mujoco"],
    "easydubins": ["easydubins"],
    "threadpoolctl": ["threadpoolctl"],
}


def package_keys(text: str) -> dict[str, str]:
    root = ET.fromstring(text)
    return {(e.text or "").strip(): tag for tag in DEPEND_TAGS for e in root.iter(tag)}


def _apt_packages(rule: object) -> list[str]:
    """The apt packages a rosdep rule for one OS names (``[]`` for a pip rule or none)."""
    if isinstance(rule, list):
        return [str(p) for p in rule]
    if isinstance(rule, dict):
        if "pip" in rule or "packages" in rule:
            return []
        wildcard = rule.get("*")
        return _apt_packages(wildcard) if wildcard is not None else []
    return []


def key_problems(keys: dict[str, str], snapshot: dict) -> list[str]:
    """Why each key of ``keys`` (key -> tag) would not install from distribution packages with rosdep."""
    problems = []
    for key, tag in sorted(keys.items()):
        if key in snapshot["ros_packages"]:
            continue
        if key.endswith("-pip"):
            problems.append(f"{tag} {key}: a pip key (rosdep's pip installer fails under PEP 668; bloom refuses it)")
            continue
        if key not in snapshot["rosdep"]:
            problems.append(f"{tag} {key}: not in the copy of rosdep's database (scripts/rosdep_snapshot.py)")
            continue
        rule = snapshot["rosdep"][key]
        if rule is None:
            problems.append(f"{tag} {key}: no such rosdep key and no {snapshot['distro']} package")
            continue
        for os_name in ("debian", "ubuntu"):
            if not _apt_packages(rule.get(os_name)):
                problems.append(f"{tag} {key}: no {os_name} package in its rosdep rule {rule.get(os_name)!r}")
    return problems


def test_every_package_xml_key_resolves_to_a_distribution_package() -> None:
    keys = package_keys((ROOT / "package.xml").read_text())
    assert len(keys) > 30  # the parse found the dependencies
    assert key_problems(keys, SNAPSHOT) == []


def test_the_check_refuses_the_keys_rosdep_cannot_resolve() -> None:
    # the keys package.xml used to declare, checked the same way (all in the copy: looked up and found missing)
    keys = {
        "python3-trimesh": "exec_depend",
        "python3-threadpoolctl": "exec_depend",
        "python3-mcap-pip": "exec_depend",
        "python3-easydubins-pip": "test_depend",
        "python3-rosbags-pip": "exec_depend",
        "python3-numpy": "exec_depend",
        "tf2_ros_py": "exec_depend",
    }
    problems = key_problems(keys, SNAPSHOT)
    assert [p.split(":")[0] for p in problems] == [
        "test_depend python3-easydubins-pip",
        "exec_depend python3-mcap-pip",
        "exec_depend python3-rosbags-pip",
        "exec_depend python3-threadpoolctl",
        "exec_depend python3-trimesh",
    ]
    assert "no such rosdep key" in problems[-1]


def test_the_copy_is_rosdistros() -> None:
    assert re.search(r"github.com/ros/rosdistro at [0-9a-f]{40}", SNAPSHOT["source"])
    # entries as rosdistro has them (spot checks of what the snapshot script copied)
    assert SNAPSHOT["rosdep"]["python3-numpy"]["debian"] == ["python3-numpy"]
    assert SNAPSHOT["rosdep"]["python3-rosbags-pip"]["ubuntu"]["pip"]["packages"] == ["rosbags"]
    assert SNAPSHOT["ros_packages"]["tf2_ros_py"] == "geometry2"


def _requirements(path: Path) -> set[str]:
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            names.add(re.split(r"[=<>!~\[ ]", line)[0].lower())
    return names


def test_pip_only_packages_are_pinned_for_ros_and_documented() -> None:
    ros = _requirements(ROOT / "requirements-ros.txt")
    guide = (ROOT / "docs" / "guides" / "install.md").read_text()
    for dist in PIP_ONLY:
        if dist == "threadpoolctl":  # Debian/Ubuntu package it (python3-threadpoolctl), rosdep has no key
            assert "python3-threadpoolctl" in guide
            continue
        assert dist in ros, f"{dist} not in requirements-ros.txt"
        assert dist in guide, f"{dist} not named in docs/guides/install.md"


_IMPORT_EVERY_NODE = r"""
import configparser, importlib, importlib.abc, sys
BLOCKED = set(sys.argv[1].split(","))
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (not a distribution package)", name=name)
        return None
sys.meta_path.insert(0, Block())
cp = configparser.ConfigParser()
cp.read(sys.argv[2])
failed = []
for line in cp["options.entry_points"]["console_scripts"].strip().splitlines():
    exe, target = (s.strip() for s in line.split("="))
    module = target.split(":")[0]
    if not module.startswith("shape_sensing.nodes."):
        continue
    try:
        importlib.import_module(module)
        print("imported", exe)
    except Exception as exc:
        failed.append(f"{exe}: {exc!r}")
print("\n".join(failed))
sys.exit(1 if failed else 0)
"""


def test_every_node_imports_without_the_pip_only_packages() -> None:
    blocked = sorted({m for mods in PIP_ONLY.values() for m in mods})
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORT_EVERY_NODE, ",".join(blocked), str(ROOT / "setup.cfg")],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False,
    )
    cp = configparser.ConfigParser()
    cp.read(ROOT / "setup.cfg")
    nodes = [line for line in cp["options.entry_points"]["console_scripts"].splitlines() if ".nodes." in line]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("imported ") == len(nodes) >= 14


def test_bag_functions_without_rosbags_say_what_to_install(tmp_path: Path) -> None:
    code = r"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] == "rosbags":
            raise ModuleNotFoundError("No module named 'rosbags'", name=name)
sys.meta_path.insert(0, Block())
from shape_sensing.io.bag import BagWriter
from shape_sensing.io.errors import BagError
try:
    BagWriter(sys.argv[1])
except BagError as exc:
    print(exc)
"""
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "x.mcap")], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "needs the rosbags package" in proc.stdout and "pip install" in proc.stdout
