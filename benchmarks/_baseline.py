"""Run one measurement in this checkout and in an earlier revision of the package, in the same run.

Speed figures are printed as ratios to the line they replace. The earlier
revision's ``shape_sensing`` is extracted with ``git archive`` into a
temporary directory and the same measurement script is run on it in a
subprocess (``PYTHONPATH`` first), alternating with this checkout so both see
the same machine load; each figure is the best over the rounds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The last revision before the vine live path and replay were made cheap (the figures they replace).
DEFAULT_BASE = "95f8953"


def extract(rev: str, into: Path) -> Path:
    """``shape_sensing`` of git revision ``rev`` under ``into``; returns the directory to put on ``PYTHONPATH``."""
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", rev, "shape_sensing", "msg"], check=True, capture_output=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(f"comparing with revision {rev} needs a git checkout that has it (--base REV): {exc}") from exc
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def run(script: Path, args: Sequence[str], pythonpath: Path | None) -> dict[str, float]:
    """Run ``script --measure args`` with ``pythonpath`` first; returns the JSON it prints last."""
    env = dict(os.environ)
    path = str(pythonpath if pythonpath is not None else ROOT)
    env["PYTHONPATH"] = path + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    out = subprocess.run(
        [sys.executable, str(script), "--measure", *args], check=True, capture_output=True, text=True, env=env
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def compare(script: Path, args: Sequence[str], base: str, rounds: int = 3) -> tuple[dict[str, float], dict[str, float]]:
    """Best (minimum) of every figure over ``rounds`` alternating runs: ``(current, base)``."""
    with tempfile.TemporaryDirectory() as tmp:
        base_path = extract(base, Path(tmp))
        cur: dict[str, float] = {}
        old: dict[str, float] = {}
        for _ in range(rounds):
            for into, where in ((cur, None), (old, base_path)):
                for k, v in run(script, args, where).items():
                    into[k] = min(v, into.get(k, float("inf")))
    return cur, old
