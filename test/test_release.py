"""What a release needs agrees with itself: one version everywhere, the declared licence's text, a changelog section
for the version, and the generated documentation covering every node parameter and subcommand."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import shape_sensing
from shape_sensing.schemas import NODE_SCHEMAS, schema_for

ROOT = Path(__file__).resolve().parents[1]


def test_one_version_in_the_package_package_xml_and_setup_py() -> None:
    assert re.fullmatch(r"\d+\.\d+\.\d+", shape_sensing.__version__)
    assert ET.parse(ROOT / "package.xml").getroot().findtext("version") == shape_sensing.__version__
    out = subprocess.run([sys.executable, "setup.py", "--version"], cwd=ROOT, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip().splitlines()[-1] == shape_sensing.__version__


def test_cli_version_is_the_package_version() -> None:
    out = subprocess.run([sys.executable, "-m", "shape_sensing.cli", "--version"], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == f"shape-sensing {shape_sensing.__version__}"


def test_licence_file_is_the_declared_apache_2_0() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text
    assert ET.parse(ROOT / "package.xml").getroot().findtext("license") == "Apache-2.0"
    assert re.search(r'license="Apache-2\.0"', (ROOT / "setup.py").read_text(encoding="utf-8"))


def test_changelog_has_a_released_section_for_this_version() -> None:
    # catkin/bloom changelog format: "X.Y.Z (YYYY-MM-DD)" underlined with dashes; "Forthcoming" for what is not out
    text = (ROOT / "CHANGELOG.rst").read_text(encoding="utf-8")
    sections = re.findall(r"^(\S[^\n]*)\n-{3,}$", text, flags=re.MULTILINE)
    released = [s for s in sections if re.fullmatch(r"\d+\.\d+\.\d+ \(\d{4}-\d{2}-\d{2}\)", s)]
    assert released, f"no released section in CHANGELOG.rst: {sections}"
    assert all(s == "Forthcoming" or s in released for s in sections), sections
    assert released[0].split()[0] == shape_sensing.__version__


def _reference():  # the docs' generator, loaded from its file (docs/ is not a package)
    spec = importlib.util.spec_from_file_location("generated_reference", ROOT / "docs/_ext/generated_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_parameter_reference_lists_every_parameter_of_every_node() -> None:
    page = _reference().parameters_page()
    for node in NODE_SCHEMAS:
        assert f"## `{node}`" in page
        section = page.split(f"## `{node}`", 1)[1].split("\n## ", 1)[0]
        for p in schema_for(node).params:
            row = next((ln for ln in section.splitlines() if ln.startswith(f"| `{p.name}` |")), None)
            assert row is not None, f"{node}.{p.name} missing from the parameter reference"
            if p.unit:
                assert f"| {p.unit} |" in row


def test_cli_reference_has_every_subcommand_and_demo() -> None:
    pytest.importorskip("mcap")
    from shape_sensing.cli import COMMANDS
    from shape_sensing.demos import DEMOS

    page = _reference().cli_page()
    for name in COMMANDS:
        assert f"## `shape-sensing {name}`" in page
    for name in DEMOS:
        assert f"## `shape-sensing demo {name}`" in page


@pytest.mark.parametrize("name", ["parameters.md", "interfaces.md"])
def test_committed_reference_pages_are_what_the_code_generates(name: str) -> None:
    # make docs rewrites them; a schema or msg/ change without the regenerated page fails here
    page = getattr(_reference(), name.removesuffix(".md") + "_page")() + "\n"
    assert (ROOT / "docs" / "reference" / name).read_text(encoding="utf-8") == page, (
        f"docs/reference/{name} is stale: run `make docs` and commit it")
