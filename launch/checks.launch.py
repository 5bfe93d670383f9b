"""Checks every shape_sensing launch file runs first, before it starts any process.

Included at the top of each launch file. A mistake found here ends the launch with one line naming the argument and
what was expected, before any node runs: a launch error raised after the first nodes have started would leave those
nodes running on their own (children of PID 1, publishing TF under the same names).

Arguments (each optional):

* ``files``: ``name=path;name=path``: launch arguments naming files that must exist (``config:=``); a missing
  parameter file would otherwise only be warned about and the node would run on its defaults.
* ``flags``: ``name=value name=value``: launch arguments that must be ``true`` or ``false`` (launch's own
  conditions accept ``true``/``false``/``1``/``0``, any case).
* ``rviz``: ``true`` checks that RViz 2 (package ``rviz2``) is installed: it is not a dependency of the package
  (it would pull Qt and OGRE onto a headless robot).
* ``names``: ``name=value name=value``: launch arguments that must be relative ROS names (``namespace``, joined
  into absolute topic names for ``ros2 bag record``; ``world_frame``) or, for a ``*prefix``, a frame prefix (may be
  empty).
"""

from __future__ import annotations

import os
import re

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.substitutions import LaunchConfiguration

from launch import LaunchDescription

_BOOL = {"true", "false", "1", "0"}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(/[A-Za-z_][A-Za-z0-9_]*)*$")  # relative: namespaces, frames
_PREFIX = re.compile(r"^[A-Za-z0-9_/]*$")


class LaunchArgumentError(RuntimeError):
    """A launch argument is wrong; the message names it and what was expected."""


def _pairs(text: str, sep: str | None) -> list[tuple[str, str]]:
    out = []
    for item in (text.split(sep) if sep else text.split()):
        item = item.strip()
        if item:
            name, _, value = item.partition("=")
            out.append((name.strip(), value.strip()))
    return out


def rviz_installed() -> bool:
    from ament_index_python.packages import PackageNotFoundError, get_package_prefix

    try:
        get_package_prefix("rviz2")
    except PackageNotFoundError:
        return False
    return True


def problems(files: str, flags: str, rviz: str, names: str) -> list[str]:
    """What is wrong with the arguments, one text per argument."""
    found = []
    for name, value in _pairs(flags, None):
        if value.lower() not in _BOOL:
            found.append(f"{name}:={value!r}: expected true or false")
    for name, path in _pairs(files, ";"):
        if not path:
            found.append(f"{name}:= is empty: expected a file")
        elif not os.path.isfile(path):
            found.append(f"{name}:={path}: no such file")
    for name, value in _pairs(names, None):
        if name.endswith("prefix"):
            if not _PREFIX.match(value):
                found.append(f"{name}:={value!r}: expected letters, digits, '_' and '/' (or nothing)")
        elif not _NAME.match(value):
            found.append(f"{name}:={value!r}: expected a name of letters, digits and '_' (namespaces: parts joined "
                         "by '/', without a leading '/')")
    if rviz.lower() in ("true", "1") and not rviz_installed():
        found.append(
            "rviz:=true but RViz 2 is not installed here (package rviz2): install it (ros-<distro>-rviz2) or "
            "launch with rviz:=false and run RViz on a workstation on the same ROS_DOMAIN_ID"
        )
    return found


def _check(context) -> list:  # type: ignore[no-untyped-def]
    def arg(name: str) -> str:
        return LaunchConfiguration(name).perform(context)

    found = problems(arg("files"), arg("flags"), arg("rviz"), arg("names"))
    if found:
        raise LaunchArgumentError("; ".join(found) + " (nothing was started)")
    return []


def generate_launch_description() -> LaunchDescription:
    return LaunchDescription(
        [
            DeclareLaunchArgument("files", default_value="", description="name=path;... files that must exist"),
            DeclareLaunchArgument("flags", default_value="", description="name=value ... booleans"),
            DeclareLaunchArgument("rviz", default_value="false", description="true: RViz 2 must be installed"),
            DeclareLaunchArgument("names", default_value="", description="name=value ... ROS names or empty"),
            OpaqueFunction(function=_check),
        ]
    )
