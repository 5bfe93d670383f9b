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
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module == "shape_sensing"
            and any(a.name == "drivers" for a in node.names)
        ):
            found.setdefault("shape_sensing.drivers", set()).add("*")
    return found


def test_every_sim_module_is_classified() -> None:
    """A new simulator is checked too: each module under sim/ is a chip sim, a harness, a ToF sim or a robot sim."""
    robot_sims = set(ROBOT_SIMS) - set(HARNESS_ALLOWED)
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


ROBOT_SIMS = ["vine", "vine_collision", "hyper_redundant"]


def _estimator_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("shape_sensing.estimators"):
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("shape_sensing.estimators")]
    return found


@pytest.mark.parametrize("name", ROBOT_SIMS)
def test_robot_sim_imports_nothing_from_the_estimators(name: str) -> None:
    """A robot simulator states its world's kinematics and physics itself: one that borrowed the estimator's would
    pass every test over a wrong model."""
    assert not _estimator_imports(SIM / f"{name}.py"), f"sim/{name}.py imports from the estimators"


def test_hyper_redundant_sim_kinematics_agree_with_the_estimator_s() -> None:
    """The two independent statements of the universal-joint chain and of the WT901's Euler angles (the simulator's on
    scipy's Rotation, the estimator's written out) agree to rounding."""
    import numpy as np

    from shape_sensing.estimators import rigid_module as est
    from shape_sensing.sim import hyper_redundant as sim

    rng = np.random.default_rng(1)
    euler = rng.uniform(-1.2, 1.2, (50, 3))
    np.testing.assert_allclose(sim._euler_zyx_to_matrix(euler), est.euler_zyx_to_matrix(euler), atol=1e-12)
    R = est.euler_zyx_to_matrix(euler)
    np.testing.assert_allclose(sim._matrix_to_euler_zyx(R), est.matrix_to_euler_zyx(R), atol=1e-12)
    theta = rng.uniform(-0.6, 0.6, (7, 2))
    np.testing.assert_allclose(sim._joint_rotations(theta), est.ujoint_rotation(theta[:, 0], theta[:, 1]), atol=1e-12)
    np.testing.assert_allclose(
        sim._platform_poses(theta, 0.04, 0.05),
        est.chain_transforms(est.module_transforms(theta, 0.04, 0.05)),
        atol=1e-12,
    )


def test_vine_collision_sim_buckling_limit_agrees_with_the_estimator_s() -> None:
    import math

    from shape_sensing.estimators.collision_pivot import buckling_max_contact_angle
    from shape_sensing.sim.vine_collision import _transverse_buckling_limit

    for length in (0.001, 0.005, 0.02, 0.1, 0.5, 1.0, 2.0):
        for radius in (0.01, 0.03, 0.05):
            for mu in (0.0, 0.2, 0.5, 1.0):
                a = _transverse_buckling_limit(length, radius, mu)
                b = buckling_max_contact_angle(length, radius, mu)
                assert math.isclose(a, b, abs_tol=1e-12), (length, radius, mu, a, b)
