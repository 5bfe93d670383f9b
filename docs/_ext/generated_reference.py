"""Sphinx extension: the parameter, CLI and interface references, generated from the code at every build.

The pages are written into ``docs/reference/`` when the builder starts, from:

- the node schemas (``shape_sensing.schemas.NODE_SCHEMAS``): every parameter's name, type, default, unit, range and
  description, the same objects the nodes declare their ROS parameters from, so the reference cannot drift;
- the ``shape-sensing`` parser (``shape_sensing.cli``): each subcommand's and demo's ``--help``;
- the interface definitions in ``msg/``.

The parameter and interface pages are also committed, so they read on a repository browser; a test fails when they
differ from what the code generates (``test/test_release.py``). The CLI page depends on the Python version's argparse
formatting and is generated only (not tracked).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "reference"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _value(value: Any) -> str:
    if isinstance(value, str):
        return f'`"{value}"`' if value else '`""`'
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (list, tuple)):
        if len(value) > 8:
            shown = ", ".join(repr(v) for v in value[:8])
            return _cell(f"`[{shown}, ...]` ({len(value)} values)")
        return _cell(f"`{list(value)!r}`")
    return f"`{value!r}`"


def _range(param: Any) -> str:
    parts = []
    if param.choices is not None:
        parts.append("one of " + ", ".join(f"`{c}`" for c in param.choices))
    if param.min is not None:
        parts.append(f">= {param.min:g}")
    if param.max is not None:
        parts.append(f"<= {param.max:g}")
    if param.check is not None:
        parts.append("further checked")
    return "; ".join(parts)


def parameters_page() -> str:
    from shape_sensing.config import _TYPE_NAMES
    from shape_sensing.schemas import NODE_SCHEMAS, schema_for

    lines = [
        "# Node parameters",
        "",
        "Generated at every documentation build from the schemas the nodes declare their ROS parameters from",
        "(`shape_sensing/schemas.py`). `NODE --ros-args -p name:=value` or a parameter file sets them; a parameter",
        "file is checked against these tables (an unknown name or a value out of range stops the node with a message",
        "naming it). `ros2 run shape_sensing NODE -h` prints the same table for one node.",
        "",
    ]
    for node in sorted(NODE_SCHEMAS):
        schema = schema_for(node)
        lines += [f"## `{node}`", ""]
        if schema.description:
            lines += [schema.description.strip(), ""]
        lines += [
            "| parameter | type | default | unit | range | description |",
            "|---|---|---|---|---|---|",
        ]
        for p in schema.params:
            lines.append(
                f"| `{p.name}` | {_TYPE_NAMES.get(p.type, str(p.type))} | {_value(p.default)} | {_cell(p.unit)} "
                f"| {_cell(_range(p))} | {_cell(p.description)} |"
            )
        lines.append("")
    return "\n".join(lines)


def _walk(parser: argparse.ArgumentParser, words: list[str], out: list[str]) -> None:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if words:
        out += [f"## `shape-sensing {' '.join(words)}`", "", "```text", parser.format_help().rstrip(), "```", ""]
    for action in subs:
        for name, sub in action.choices.items():
            _walk(sub, [*words, name], out)


def cli_page() -> str:
    os.environ["COLUMNS"] = "110"  # argparse wraps help at the terminal's width: fix it for the page
    from shape_sensing import cli

    parser = cli._build_parser(None)
    out = [
        "# The `shape-sensing` command",
        "",
        "Generated at every documentation build from the command's own parser: the same text as `--help`.",
        "",
        "```text",
        parser.format_help().rstrip(),
        "```",
        "",
    ]
    _walk(parser, [], out)
    return "\n".join(out)


def interfaces_page() -> str:
    lines = [
        "# Interfaces (`msg/`)",
        "",
        "The package's own message definitions, as rosidl builds them (`shape_sensing/msg/...`) and as the bag writer",
        "registers them in the rosbags type store. Standard messages are used wherever one fits.",
        "",
    ]
    for path in sorted((ROOT / "msg").glob("*.msg")):
        lines += [f"## `shape_sensing/msg/{path.stem}`", "", "```text", path.read_text().rstrip(), "```", ""]
    return "\n".join(lines)


PAGES = {"parameters.md": parameters_page, "cli.md": cli_page, "interfaces.md": interfaces_page}


def write_pages(out: Path = OUT) -> list[Path]:
    """Write every generated page (only when its text changed, so Sphinx rebuilds only what changed)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, make in PAGES.items():
        path = out / name
        text = make() + "\n"
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    return written


def _on_builder_inited(app: Any) -> None:
    write_pages()


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", _on_builder_inited)
    return {"version": "1", "parallel_read_safe": True}
