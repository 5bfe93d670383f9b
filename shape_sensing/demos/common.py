"""Shared pieces of the demos: common arguments, progress, metric printing."""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "Progress",
    "add_common_arguments",
    "positive_float",
    "positive_int",
    "prepare_out_dir",
    "print_metrics",
]


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (argparse names the option in its error)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite number > 0")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: expected an integer >= 1")
    return value


def add_common_arguments(parser: argparse.ArgumentParser, *, default_out: str, default_duration: float) -> None:
    """``--out``, ``--duration``, ``--seed``, ``--json``, ``--overwrite``, ``--distro``."""
    parser.add_argument("--out", type=Path, default=Path(default_out), help=f"output directory (default {default_out})")
    parser.add_argument(
        "--duration",
        type=positive_float,
        default=default_duration,
        help=f"simulated seconds (default {default_duration})",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--json", action="store_true", help="print the metrics as one JSON object")
    parser.add_argument(
        "--distro", default="jazzy", help="ROS 2 distro whose message definitions the bag uses (default jazzy)"
    )


def prepare_out_dir(out: Path) -> Path:
    """Create the output directory; existing demo outputs in it are replaced."""
    out.mkdir(parents=True, exist_ok=True)
    return out


class Progress:
    """Progress on stderr for long runs: at most one line every ``every`` seconds."""

    def __init__(self, label: str, total: float, *, every: float = 2.0, enabled: bool = True) -> None:
        self.label = label
        self.total = total
        self.every = every
        self.enabled = enabled
        self._start = time.monotonic()
        self._last = self._start

    def update(self, done: float) -> None:
        now = time.monotonic()
        if not self.enabled or now - self._last < self.every:
            return
        self._last = now
        frac = done / self.total if self.total else 1.0
        elapsed = now - self._start
        eta = elapsed * (1 - frac) / frac if frac > 0 else float("nan")
        print(f"{self.label}: {100 * frac:5.1f}%  ({elapsed:.0f} s elapsed, ~{eta:.0f} s left)", file=sys.stderr)


def print_metrics(metrics: Mapping[str, Any], as_json: bool, title: str = "metrics") -> None:
    """Print metrics as aligned text, or as one JSON object on one line."""
    if as_json:
        print(json.dumps(metrics, sort_keys=True))
        return
    print(f"{title}:")
    width = max(len(k) for k in metrics) if metrics else 0
    for key, value in metrics.items():
        text = f"{value:.6g}" if isinstance(value, float) else str(value)
        print(f"  {key:<{width}}  {text}")
