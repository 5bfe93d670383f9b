"""The simulators state their chip's or protocol's behaviour on their own: none imports from the drivers.

A simulator that takes its registers, codes or encoders from the driver it is tested with repeats the
driver's misreadings, and every test passes twice over a wrong constant. The ToF simulators
(VL53L5CX, ISM330BX, rings) are checked by ``test_sim_independence_tof.py``.

Two harnesses are allowed named driver classes, because running the real driver over the simulated
chips is what they are for (never a constant or an encoder): ``register_level`` runs the BNO055
chain driver over the simulated bus, ``hyper_redundant`` parses the emulated WT901 bytes with the
driver's parser.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

SIM = Path(__file__).resolve().parents[1] / "shape_sensing" / "sim"
TOF_SIMS = {"vl53l5cx_sim", "ism330bx_sim", "tof_rings", "tof_continuum", "tof_mujoco", "tof_scene"}
CHIP_SIMS = [
    "bno055_sim",
    "bno055_glitches",
    "tca9548a_sim",
    "i2c_bus",
    "i2c_dev",
    "circuitpython_i2c",
    "wt901_emulator",
    "netft_emulator",
    "base_station_emulator",
]
# harness -> the driver names it may import (classes it runs, no constants)
HARNESS_ALLOWED = {
    "register_level": {
        "shape_sensing.drivers.bno055_chain": {"Bno055Chain", "ChainOptions", "example_topology_params"},
        "shape_sensing.drivers.i2c_topology": {"HOST", "Topology"},
        "shape_sensing.drivers.errors": {"DriverConfigError"},
    },
    "hyper_redundant": {"shape_sensing.drivers.wt901": {"Wt901Assembler", "Wt901Parser"}},
}


def _driver_imports(path: Path) -> dict[str, set[str]]:
    """Every ``shape_sensing.drivers`` import in the file (module level or inside functions): module -> names."""
    found: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("shape_sensing.drivers"):
            found.setdefault(node.module, set()).update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("shape_sensing.drivers"):
                    found.setdefault(a.name, set()).add("*")
        elif isinstance(node, ast.ImportFrom) and node.module == "shape_sensing" and any(
            a.name == "drivers" for a in node.names
        ):
            found.setdefault("shape_sensing.drivers", set()).add("*")
    return found


def test_every_sim_module_is_classified() -> None:
    """A new simulator is checked too: each module under sim/ is a chip sim, a harness, a ToF sim or a robot sim."""
    robot_sims = {"vine", "vine_collision"}
    known = TOF_SIMS | set(CHIP_SIMS) | set(HARNESS_ALLOWED) | robot_sims | {"__init__"}
    unknown = sorted(p.stem for p in SIM.glob("*.py") if p.stem not in known)
    assert not unknown, f"classify these simulators in test_sim_independence.py: {unknown}"
    for name in robot_sims:
        assert not _driver_imports(SIM / f"{name}.py"), f"{name} imports from shape_sensing.drivers"


@pytest.mark.parametrize("name", CHIP_SIMS)
def test_chip_sim_imports_nothing_from_drivers(name: str) -> None:
    found = _driver_imports(SIM / f"{name}.py")
    assert not found, f"sim/{name}.py imports from the drivers: {found}"


@pytest.mark.parametrize("name", sorted(HARNESS_ALLOWED))
def test_harness_imports_only_the_driver_it_runs(name: str) -> None:
    found = _driver_imports(SIM / f"{name}.py")
    allowed = HARNESS_ALLOWED[name]
    extra = {m: sorted(n - allowed.get(m, set())) for m, n in found.items() if n - allowed.get(m, set())}
    assert not extra, f"sim/{name}.py imports driver names beyond the ones it runs: {extra}"


def test_chip_sims_do_not_load_the_drivers_transitively() -> None:
    """Importing the chip simulators (whatever they import in turn) loads no driver module."""
    code = (
        "import sys\n"
        + "".join(f"import shape_sensing.sim.{n}\n" for n in CHIP_SIMS)
        + "print(sorted(m for m in sys.modules if m.startswith('shape_sensing.drivers')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", f"the chip simulators load driver modules: {out}"


def test_the_check_sees_an_import(tmp_path: Path) -> None:
    """The scanner finds module-level, function-level and plain imports (it is not vacuous)."""
    f = tmp_path / "x.py"
    f.write_text(
        "from shape_sensing.drivers.bno055 import Reg\n"
        "def g():\n    from shape_sensing.drivers.wt901 import encode_frame\n"
        "import shape_sensing.drivers.netft\n"
    )
    assert _driver_imports(f) == {
        "shape_sensing.drivers.bno055": {"Reg"},
        "shape_sensing.drivers.wt901": {"encode_frame"},
        "shape_sensing.drivers.netft": {"*"},
    }
