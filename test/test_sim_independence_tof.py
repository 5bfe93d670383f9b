"""The ToF ring's chip simulators state the chips' behaviour on their own: none imports ``shape_sensing.drivers``.

A simulator that imports its driver's constants (registers, block headers, axis orders) repeats the driver's reading
of the datasheet, so a misreading passes both. Checked twice: in the source (every ``import``, including those inside
functions) and at run time (importing the simulator in a fresh interpreter loads no driver module).
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SIMULATORS = ("shape_sensing.sim.vl53l5cx_sim", "shape_sensing.sim.ism330bx_sim", "shape_sensing.sim.tof_rings")


def _imported_modules(path: Path, package: str) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the module's package
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                out.add(".".join([*base, node.module or ""]).rstrip("."))
            else:
                out.add(node.module or "")
    return out


@pytest.mark.parametrize("module", SIMULATORS)
def test_simulator_source_imports_nothing_from_the_drivers(module):
    path = ROOT / (module.replace(".", "/") + ".py")
    mods = _imported_modules(path, module.rsplit(".", 1)[0])
    assert mods, "no import found: the parser is not reading the file"
    offending = sorted(m for m in mods if m == "shape_sensing.drivers" or m.startswith("shape_sensing.drivers."))
    assert offending == [], f"{module} imports {offending}"


def test_the_source_check_catches_a_driver_import(tmp_path):
    """The check itself fails on the imports it is there to catch (absolute, relative, inside a function)."""
    f = tmp_path / "fake_sim.py"
    f.write_text(
        "import numpy as np\n"
        "from ..drivers.vl53l5cx import DCI\n"
        "def g():\n    import shape_sensing.drivers.ism330bx as d\n    return d\n",
        encoding="utf-8",
    )
    mods = _imported_modules(f, "shape_sensing.sim")
    assert {"shape_sensing.drivers.vl53l5cx", "shape_sensing.drivers.ism330bx"} <= mods


def test_importing_the_simulators_loads_no_driver_module():
    code = (
        "import json, sys\n"
        f"for m in {list(SIMULATORS)!r}: __import__(m)\n"
        "print(json.dumps(sorted(k for k in sys.modules if k.startswith('shape_sensing.'))))\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    loaded = json.loads(res.stdout.strip().splitlines()[-1])
    assert set(SIMULATORS) <= set(loaded)
    assert [m for m in loaded if m.startswith("shape_sensing.drivers")] == []
