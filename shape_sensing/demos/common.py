"""Shared pieces of the demos: common arguments, progress, metric printing."""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shape_sensing.io.bag import BagWriter

__all__ = [
    "DemoInterrupted",
    "DemoOutputs",
    "Progress",
    "StopSignals",
    "Terminated",
    "add_common_arguments",
    "exit_status",
    "finite_float",
    "non_negative_float",
    "non_negative_int",
    "positive_float",
    "positive_int",
    "prepare_out_dir",
    "print_metrics",
    "probability",
    "raise_on_sigterm",
]


def finite_float(text: str) -> float:
    """argparse type: a finite number (argparse names the option in its error)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite number")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0 (argparse names the option in its error)."""
    value = finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite number > 0")
    return value


def non_negative_float(text: str) -> float:
    """argparse type: a finite number >= 0 (argparse names the option in its error)."""
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite number >= 0")
    return value


def probability(text: str) -> float:
    """argparse type: a number in [0, 1]."""
    value = finite_float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a probability in [0, 1]")
    return value


def _int_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"{text!r}: expected an integer >= {low}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    return _int_at_least(text, 0)


def add_common_arguments(
    parser: argparse.ArgumentParser, *, default_out: str, default_duration: float | None, whole: str = ""
) -> None:
    """``--out``, ``--duration``, ``--seed``, ``--json``, ``--distro``.

    ``default_duration`` ``None``: the run's natural length (``whole`` says what it is), ``--duration`` cuts it.
    """
    parser.add_argument("--out", type=Path, default=Path(default_out), help=f"output directory (default {default_out})")
    parser.add_argument(
        "--duration",
        type=positive_float,
        default=default_duration,
        help=f"simulated seconds (default {default_duration if default_duration is not None else whole})",
    )
    parser.add_argument("--seed", type=non_negative_int, default=0, help="random seed, >= 0 (default 0)")
    parser.add_argument("--json", action="store_true", help="print the metrics as one JSON object")
    parser.add_argument(
        "--distro", default="jazzy", help="ROS 2 distro whose message definitions the bag uses (default jazzy)"
    )


class Terminated(KeyboardInterrupt):
    """SIGTERM (``ros2 launch``, systemd, ``timeout``), raised where Ctrl-C raises ``KeyboardInterrupt`` so that
    both run the same clean-up (``finally`` blocks, temporary outputs removed); the command exits 143."""

    signal_name = "SIGTERM"


class DemoInterrupted(KeyboardInterrupt):
    """A demo stopped by SIGINT/SIGTERM after finishing a readable partial bag (the message says where)."""

    def __init__(self, text: str, signal_name: str = "SIGINT") -> None:
        super().__init__(text)
        self.signal_name = signal_name


def exit_status(exc: KeyboardInterrupt) -> int:
    """The shell's status of a command ended by a signal: 128 + the signal's number (SIGINT 130, SIGTERM 143)."""
    name = getattr(exc, "signal_name", "SIGINT")
    return 128 + int(signal.Signals[name] if name in signal.Signals.__members__ else signal.SIGINT)


def raise_on_sigterm() -> Any:
    """From now on SIGTERM raises :class:`Terminated` in the main thread, as SIGINT raises ``KeyboardInterrupt``;
    returns the previous handler (``None`` outside the main thread, where nothing is installed)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def _terminate(signum: int, frame: object) -> None:
        raise Terminated()

    return signal.signal(signal.SIGTERM, _terminate)


class StopSignals:
    """While active, SIGINT and SIGTERM ask a loop to stop instead of killing it mid-write.

    The first signal sets :attr:`requested` (its name); the loop checks it between steps, stops,
    and closes its bag, which is then readable. A second SIGINT raises ``KeyboardInterrupt`` (the
    user insists). Handlers are installed only in the main thread and restored on exit.
    """

    def __init__(self) -> None:
        self.requested: str = ""
        self._old: dict[int, Any] = {}

    def _handle(self, signum: int, frame: object) -> None:
        if self.requested and signum == signal.SIGINT:
            raise KeyboardInterrupt
        self.requested = signal.Signals(signum).name

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def mark_partial(self, writer: BagWriter, t: float) -> bool:
        """If a stop was requested, say so in the bag (custom_data ``shape_sensing.partial``); returns whether."""
        if self.requested:
            writer.set_metadata("shape_sensing.partial", f"stopped by {self.requested} at t = {t:.3f} s")
        return bool(self.requested)

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()


class DemoOutputs:
    """A demo's output files, written under temporary names and moved into place together at the end.

    Files are written in a hidden temporary directory inside ``out``; :meth:`commit` moves each into
    ``out/<stem><suffix>`` (``os.replace``: atomic on one filesystem) and removes a previous output the
    new run did not produce, so a bag never sits beside an older run's picture. Until then the previous
    outputs stay untouched: a crash or a signal leaves them as they were, and :meth:`keep_partial` saves
    what was recorded as ``out/<stem>.partial.mcap``. ``others``: further outputs under names of their own
    (``out/<name>``, written at :meth:`other`), handled the same way.
    """

    def __init__(
        self, out: Path, stem: str, suffixes: tuple[str, ...] = (".mcap", ".png"), others: tuple[str, ...] = ()
    ) -> None:
        if out.exists() and not out.is_dir():
            raise ValueError(f"--out {out} is a file: the outputs go into a directory; give a directory's name")
        out.mkdir(parents=True, exist_ok=True)
        self.out = out
        self.stem = stem
        self.suffixes = suffixes
        self.others = others
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{stem}.", dir=out))

    def other(self, name: str) -> Path:
        """Where to write the output named ``name`` (one of ``others``) during the run."""
        return self.tmp / name

    def _moves(self) -> list[tuple[Path, Path]]:
        """(temporary, final) path of every output."""
        return [(self.path(s), self.final(s)) for s in self.suffixes] + [
            (self.other(n), self.out / n) for n in self.others
        ]

    def path(self, suffix: str) -> Path:
        """Where to write the output with this suffix during the run."""
        return self.tmp / f"{self.stem}{suffix}"

    def final(self, suffix: str) -> Path:
        """Where that output ends up."""
        return self.out / f"{self.stem}{suffix}"

    def record_parameters(self, writer: BagWriter, node: str, params: Mapping[str, Any]) -> None:
        """``node``'s parameters in the bag (custom_data) and beside it (``<stem>.params.yaml``, a ROS 2
        parameter file): replay and the node reproduce the run."""
        comment = f"{node} parameters of {self.stem}.mcap (shape-sensing demo {self.stem})"
        self.path(".params.yaml").write_text(writer.record_parameters(node, dict(params), comment))

    def commit(self) -> None:
        """Move every output into place and drop the previous run's outputs this run did not write."""
        for src, dst in self._moves():
            if dst.is_dir() and not dst.is_symlink() and (src.exists() or dst.exists()):
                shutil.rmtree(dst)  # a bag directory (rosbag2 layout): os.replace cannot replace a non-empty one
            if src.exists():
                os.replace(src, dst)
            elif dst.exists():
                dst.unlink()
        self.cleanup()

    def keep_partial(self) -> Path | None:
        """Move a closed, readable partial bag to ``out/<stem>.partial.mcap``; ``None`` if nothing was written."""
        src = self.path(".mcap")
        if not src.is_file():
            return None
        dst = self.out / f"{self.stem}.partial.mcap"
        os.replace(src, dst)
        return dst

    def cleanup(self) -> None:
        """Remove the temporary directory (idempotent)."""
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> DemoOutputs:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        """On an error, keep what was recorded (``keep_partial``); always remove the temporary directory."""
        if exc_type is not None and not issubclass(exc_type, DemoInterrupted):
            self.keep_partial()
        self.cleanup()

    def interrupted(self, signal_name: str, t: float, duration: float) -> DemoInterrupted:
        """Keep the partial bag and describe it; the caller raises the result."""
        partial = self.keep_partial()
        previous = [str(dst) for _, dst in self._moves() if dst.exists()]
        text = f"stopped by {signal_name} at t = {t:.2f} s of {duration:g} s"
        if partial is not None:
            text += f": partial bag {partial} (readable; custom_data shape_sensing.partial says so)"
        if previous:
            text += f"; {', '.join(previous)} are from the previous complete run"
        return DemoInterrupted(text, signal_name)


def prepare_out_dir(out: Path) -> Path:
    """Create the output directory; existing demo outputs in it are replaced."""
    out.mkdir(parents=True, exist_ok=True)
    return out


class Progress:
    """A progress bar on stderr (tqdm) for anything longer than a couple of seconds; quiet when disabled.

    ``update(done)`` takes the amount done so far (not an increment); ``close()`` ends the bar (also on
    exit of a ``with`` block). Without tqdm installed (a bare ROS system Python) it prints a line every
    ``every`` seconds instead. :meth:`close_all` ends every bar still open, so that an error message that follows
    starts on a line of its own.
    """

    _open: set[Progress] = set()  # noqa: RUF012 - the bars drawn and not yet closed, process-wide

    @classmethod
    def close_all(cls) -> None:
        """End every open bar (before printing an error)."""
        for bar in list(cls._open):
            bar.close()

    def __init__(self, label: str, total: float, *, every: float = 2.0, enabled: bool = True, unit: str = "it") -> None:
        self.label = label
        self.total = total
        self.every = every
        self.enabled = enabled
        self._start = time.monotonic()
        self._last = self._start
        self._bar: Any = None
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:  # pragma: no cover - tqdm is a dependency; a ROS system Python may lack it
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(
                    total=total or None, desc=label, unit=unit, file=sys.stderr, mininterval=0.5, dynamic_ncols=True
                )
                Progress._open.add(self)

    def update(self, done: float) -> None:
        if not self.enabled:
            return
        if self._bar is not None:
            step = done - self._bar.n
            if step > 0:
                self._bar.update(step)
            return
        now = time.monotonic()
        if now - self._last < self.every:
            return
        self._last = now
        frac = done / self.total if self.total else 1.0
        elapsed = now - self._start
        eta = elapsed * (1 - frac) / frac if frac > 0 else float("nan")
        print(f"{self.label}: {100 * frac:5.1f}%  ({elapsed:.0f} s elapsed, ~{eta:.0f} s left)", file=sys.stderr)

    def set_total(self, total: float) -> None:
        """Change the total (known only once the work has started)."""
        self.total = total
        if self._bar is not None and self._bar.total != (total or None):
            self._bar.total = total or None
            self._bar.refresh()

    def report(self, done: float, total: float) -> None:
        """``update`` with the total alongside, for callbacks ``(done, total)``."""
        self.set_total(total)
        self.update(done)

    def close(self) -> None:
        """End the bar (idempotent)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        Progress._open.discard(self)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
