"""``shape-sensing replay IN --out OUT``: re-estimate a recorded bag.

The input bag (rosbag2 MCAP or sqlite3 directory, or a bare ``.mcap`` file)
must hold one robot kind's raw sensor topics. The pipeline is chosen from the
topics found (or ``--pipeline``); the output bag gets the same topics as a
live run. When the input holds ground truth, the same metrics as the demo are
printed.
"""

from __future__ import annotations

import argparse
import importlib
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from shape_sensing.demos.common import Progress, print_metrics
from shape_sensing.io.bag import (
    PARAMETERS_KEY,
    BagMessage,
    BagWriter,
    bag_message_count,
    bag_metadata,
    bag_parameters,
    bag_topics,
    read_bag,
)
from shape_sensing.pipelines import PIPELINES, contracts

__all__ = ["add_arguments", "replay_bag", "run", "select_pipeline"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``replay``."""
    parser.add_argument("input", type=Path, help="input bag: rosbag2 directory (mcap or sqlite3) or .mcap file")
    parser.add_argument("--out", type=Path, required=True, help="output bag (.mcap file, or a directory name)")
    parser.add_argument(
        "--config",
        type=Path,
        default=None,
        help="estimator parameter file (ROS 2 YAML layout); default: the parameters recorded in the bag, if any",
    )
    parser.add_argument(
        "--ignore-bag-parameters",
        action="store_true",
        help="do not use the estimator parameters recorded in the bag (the defaults, or --config)",
    )
    parser.add_argument("--pipeline", choices=sorted(PIPELINES), default=None, help="force a pipeline")
    parser.add_argument("--json", action="store_true", help="print the metrics as one JSON object")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output bag")
    parser.add_argument("--distro", default="jazzy", help="ROS 2 distro of the output definitions (default jazzy)")
    parser.add_argument(
        "--streaming",
        action="store_true",
        help="feed the messages one by one through the node's path (default for vine-imu bags: decode and "
        "estimate whole topics at once, same output)",
    )
    for contract in contracts.CONTRACTS.values():  # the options only: no pipeline is imported here
        contract.add_replay_arguments(parser)


def select_pipeline(topics: dict[str, str], forced: str | None = None, configured: bool = False) -> ModuleType:
    """The pipeline module for a bag's topics (chosen by :func:`~shape_sensing.pipelines.contracts.select`;
    only that pipeline is imported)."""
    return importlib.import_module(PIPELINES[contracts.select(topics, forced, configured)])


def replay_bag(
    input_path: Path,
    out: Path,
    args: argparse.Namespace,
    *,
    config: Path | None = None,
    pipeline: str | None = None,
    overwrite: bool = False,
    distro: str = "jazzy",
) -> dict[str, Any] | None:
    """Replay ``input_path`` into ``out``; returns metrics when ground truth was present."""
    topics = bag_topics(input_path)
    mod = select_pipeline(topics, pipeline, configured=config is not None)
    if Path(out).resolve() == Path(input_path).resolve():
        raise ValueError(f"--out {out} is the input bag; choose another output")
    args.bag_topics = topics
    args.bag_metadata = bag_metadata(input_path)  # recorded parameters, straight reference
    out = Path(out)
    if out.exists() and not overwrite:
        raise ValueError(f"{out} already exists; choose another output or allow overwriting (--overwrite)")
    # written beside the output and moved into place once complete: a failed replay leaves no half-written
    # bag behind, and an existing one is replaced only by a finished one
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    node = mod.SCHEMA.node
    source = None
    try:
        if config is None and not getattr(args, "ignore_bag_parameters", False):
            # The estimator's parameters recorded with the bag reproduce the run that wrote it.
            text = bag_parameters(input_path, node)
            if text is not None:
                config = tmp / f"{node}.params.yaml"
                config.write_text(text)
                source = "recorded in the bag"
        elif config is not None:
            source = str(config)
        with BagWriter(tmp / out.name, distro=distro) as writer:
            if config is not None:
                writer.set_metadata(PARAMETERS_KEY.format(node=node), Path(config).read_text())
            metrics: dict[str, Any] | None
            # The bulk path sets the tracker up from --config and --namespace only; any other tracker option
            # (e.g. a saved straight reference), and IMUs recorded as ImuArray sweeps, run the streaming path.
            tracker_options = [k for k in ("reference", "reference_at") if getattr(args, k, None) is not None]
            sweeps = mod.NAME == "vine-imu" and mod.reads_sweeps(topics, config, getattr(args, "namespace", "/vine"))
            if mod.NAME == "vine-imu" and not getattr(args, "streaming", False) and not tracker_options and not sweeps:
                from shape_sensing.pipelines import vine_imu_bulk

                metrics = vine_imu_bulk.replay(input_path, writer, config, args, progress=_progress(args))
            else:
                total = bag_message_count(input_path)
                with Progress("replay", total or 0, enabled=not getattr(args, "json", False), unit="msg") as bar:
                    metrics = mod.replay(_counted(read_bag(input_path), bar), writer, config, args)
        # Where the parameters came from, for the command's output (the pipeline's metrics stay its own).
        ignored = "--ignore-bag-parameters" if getattr(args, "ignore_bag_parameters", False) else ""
        args.parameters_source = source or f"defaults ({ignored or 'none recorded in the bag'})"
        if out.exists():
            shutil.rmtree(out) if out.is_dir() else out.unlink()
        (tmp / out.name).replace(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return metrics


def _counted(messages: Iterator[BagMessage], bar: Progress) -> Iterator[BagMessage]:
    i = 0
    for i, message in enumerate(messages, 1):
        if i % 2000 == 0:
            bar.update(i)
        yield message
    bar.update(i)


def _progress(args: argparse.Namespace) -> Callable[[str, float], None] | None:
    """Progress bars on stderr for long replays, one per stage (none under --json)."""
    if getattr(args, "json", False):
        return None
    bars: dict[str, Progress] = {}

    def show(stage: str, frac: float) -> None:
        bar = bars.get(stage)
        if bar is None:
            for other in bars.values():  # a new stage: the earlier ones are done
                other.close()
            bar = bars[stage] = Progress(f"replay: {stage}", 1.0)
        bar.update(frac)
        if frac >= 1.0:
            bar.close()

    return show


def run(args: argparse.Namespace) -> int:
    """CLI entry."""
    metrics = replay_bag(
        args.input, args.out, args, config=args.config, pipeline=args.pipeline, overwrite=args.overwrite,
        distro=args.distro,
    )  # fmt: skip
    result = {"output": str(args.out), **(metrics or {}), "parameters": args.parameters_source}
    if metrics is None:
        result["ground_truth"] = "absent"
    print_metrics(result, args.json, title="replay")
    return 0
