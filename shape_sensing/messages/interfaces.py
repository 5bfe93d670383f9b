"""The package's own message definitions (``msg/*.msg``) for the ROS-free path.

On a ROS 2 system rosidl generates classes from the same files (CMakeLists.txt); here they are read
and registered in a rosbags typestore, so bags written without ROS carry exactly the definitions a
ROS 2 build of this package would, and CDR round trips prove the two agree.

The files are looked up, in order, in the source tree (``<repo>/msg``), the install prefix of a pip
install (``<sys.prefix>/share/shape_sensing/msg``) and the ament index of a ROS 2 install.
"""

from __future__ import annotations

import contextlib
import sys
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from shape_sensing.messages.errors import MessageError

if TYPE_CHECKING:
    from rosbags.typesys.store import Typestore

__all__ = ["PACKAGE", "interface_dir", "interface_types", "register_interfaces"]

PACKAGE = "shape_sensing"


def _candidates() -> list[Path]:
    here = Path(__file__).resolve().parent
    found = [here.parents[1] / "msg", Path(sys.prefix) / "share" / PACKAGE / "msg"]
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

        with contextlib.suppress(PackageNotFoundError):
            found.append(Path(get_package_share_directory(PACKAGE)) / "msg")
    except ImportError:
        pass
    return found


@cache
def interface_dir() -> Path:
    """The folder holding this package's ``.msg`` files."""
    for path in _candidates():
        if path.is_dir() and any(path.glob("*.msg")):
            return path
    tried = ", ".join(str(p) for p in _candidates())
    raise MessageError(f"the {PACKAGE} message definitions (msg/*.msg) were not found; looked in {tried}")


@cache
def interface_types() -> dict[str, str]:
    """``{"shape_sensing/msg/Name": definition text}`` for every ``.msg`` file of the package."""
    return {
        f"{PACKAGE}/msg/{path.stem}": path.read_text(encoding="utf-8") for path in sorted(interface_dir().glob("*.msg"))
    }


def register_interfaces(typestore: Typestore) -> None:
    """Add this package's message types to ``typestore`` (idempotent)."""
    from rosbags.typesys import get_types_from_msg

    missing = {name: text for name, text in interface_types().items() if name not in typestore.types}
    if not missing:
        return
    types = {}
    for name, text in missing.items():
        types.update(get_types_from_msg(text, name))
    typestore.register(types)
