"""What each pipeline reads from a bag, and its ``shape-sensing replay`` options, without the pipeline itself.

Choosing the pipeline for a bag (:func:`select`) and building the replay
command's options need only topic names, message types and argparse
definitions. Keeping them here lets ``shape-sensing replay`` import just the
pipeline it runs: the estimators, scipy and the message builders of the other
pipelines stay unloaded (about half a second of a bulk replay's CPU time
otherwise). Each pipeline module re-exports its own ``matches``,
``add_replay_arguments``, ``DEFAULT_NAMESPACE`` and topic pattern from here.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from pathlib import Path

__all__ = ["CONTRACTS", "R_VINE_BASE_IMU_BASE", "VINE_BASE_FRAME", "VINE_IMU_BASE_FRAME", "Contract", "select"]

_IMU = "sensor_msgs/msg/Imu"
_IMU_ARRAY = "shape_sensing/msg/ImuArray"
_POSE = "geometry_msgs/msg/PoseWithCovarianceStamped"

# vine-imu
VINE_NAMESPACE = "/vine"
VINE_IMU_TOPIC_RE = re.compile(r"imu_\d+/data$")
VINE_IMU_ARRAY_RE = re.compile(r"(^|/)imus$")  # the sweeps of the chain in one ImuArray each (driver, simulator)
# hyper-redundant
HR_NAMESPACE = "/hyper_redundant"
HR_IMU_TOPIC_RE = re.compile(r"imu/platform_(\d+)$")
# continuum
CONTINUUM_NAMESPACE = "/continuum"
# vine-collision
COLLISION_NAMESPACE = "/vine"
# One vine base frame for both vine pipelines (REP-103): x along the initial growth direction, z up. The
# collision pipeline estimates in it; the IMU chain's own base (z along the initial growth, x towards the IMUs
# on the top side of the body) is its child, rotated by this fixed matrix (columns: the chain base's axes in
# vine_base), so the IMUs, the hinge-arc tip, the collision tip and the pivots share one tree.
VINE_BASE_FRAME = "vine_base"
VINE_IMU_BASE_FRAME = "vine_imu_base"
R_VINE_BASE_IMU_BASE = ((0.0, 0.0, 1.0), (0.0, -1.0, 0.0), (1.0, 0.0, 0.0))
COLLISION_IMU_TOPIC_RE = re.compile(r"(^|/)cap/imu$")  # the cap's BNO055: claimed here, not by the continuum pipeline


def _seconds(text: str) -> float:
    """argparse type: a finite time >= 0 (s); argparse names the option in its error."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite time >= 0 (s)")
    return value


def vine_imu_matches(topics: dict[str, str]) -> bool:
    """Whether a bag holds IMU topics named like the vine-imu pipeline's inputs (``imu_NN/data``, or the sweeps as
    ``imus`` of type shape_sensing/ImuArray)."""
    return any(
        (VINE_IMU_TOPIC_RE.search(t) and ty == _IMU) or (VINE_IMU_ARRAY_RE.search(t) and ty == _IMU_ARRAY)
        for t, ty in topics.items()
    )


def vine_imu_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``shape-sensing replay`` for the vine-imu pipeline."""
    parser.add_argument(
        "--namespace",
        default=VINE_NAMESPACE,
        help=f"robot namespace of relative topics (default {VINE_NAMESPACE})",
    )
    ref = parser.add_mutually_exclusive_group()
    ref.add_argument(
        "--reference",
        type=Path,
        default=None,
        help="vine robot: saved straight reference (YAML) to use instead of capturing one",
    )
    ref.add_argument(
        "--reference-at",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="vine robot: capture the straight reference at this bag time (robot straight and fully everted then)",
    )


def hyper_redundant_matches(topics: dict[str, str]) -> bool:
    """Whether a bag holds ``imu/platform_<i>`` IMU topics."""
    return any(HR_IMU_TOPIC_RE.search(t) and ty == _IMU for t, ty in topics.items())


def hyper_redundant_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``shape-sensing replay`` for the hyper-redundant pipeline."""
    parser.add_argument(
        "--hr-namespace", default=HR_NAMESPACE,
        help=f"hyper-redundant robot: namespace of relative topics (default {HR_NAMESPACE})",
    )  # fmt: skip
    parser.add_argument(
        "--hr-rods-seconds", type=_seconds, default=1.0,
        help="hyper-redundant robot: seconds at the start held on the calibration rods (default 1.0; 0 = none)",
    )  # fmt: skip


def continuum_matches(topics: dict[str, str]) -> bool:
    """Whether a bag holds the continuum pipeline's inputs: PoseWithCovarianceStamped topics that are no
    estimate (``shape/``), or Imu topics that the IMU-only pipelines do not claim (``imu_NN/data``,
    ``imu/platform_N``, the collision cap's ``cap/imu``)."""
    others = (VINE_IMU_TOPIC_RE, HR_IMU_TOPIC_RE, COLLISION_IMU_TOPIC_RE)
    return any(
        (ty == _POSE and "/shape/" not in t) or (ty == _IMU and not any(r.search(t) for r in others))
        for t, ty in topics.items()
    )


def continuum_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``shape-sensing replay`` for the continuum pipeline."""
    parser.add_argument(
        "--continuum-namespace",
        default=CONTINUUM_NAMESPACE,
        help=f"continuum robot: namespace of relative topics (default {CONTINUUM_NAMESPACE})",
    )


def vine_collision_matches(topics: dict[str, str]) -> bool:
    """Whether a bag holds a contact cap and a length topic (the vine-collision pipeline's inputs)."""
    types = set(topics.values())
    return "shape_sensing/msg/ContactCapState" in types and "sensor_msgs/msg/JointState" in types


def vine_collision_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``shape-sensing replay`` for the vine-collision pipeline (``--namespace`` is vine-imu's)."""


class Contract:
    """One pipeline's bag contract: its module, whether a bag's topics are its inputs, its replay options."""

    def __init__(
        self,
        module: str,
        matches: Callable[[dict[str, str]], bool],
        add_replay_arguments: Callable[[argparse.ArgumentParser], None],
    ) -> None:
        self.module = module
        self.matches = matches
        self.add_replay_arguments = add_replay_arguments


CONTRACTS: dict[str, Contract] = {
    "vine-imu": Contract("shape_sensing.pipelines.vine_imu", vine_imu_matches, vine_imu_arguments),
    "hyper-redundant": Contract(
        "shape_sensing.pipelines.hyper_redundant", hyper_redundant_matches, hyper_redundant_arguments
    ),
    "continuum": Contract("shape_sensing.pipelines.continuum", continuum_matches, continuum_arguments),
    "vine-collision": Contract(
        "shape_sensing.pipelines.vine_collision", vine_collision_matches, vine_collision_arguments
    ),
}


_TOF_FRAME = "shape_sensing/msg/TofFrame"

#: Recordings that no replay pipeline re-estimates, told apart by their topics, and what reads each instead.
NOT_REPLAYED: tuple[tuple[Callable[[dict[str, str]], bool], str], ...] = (
    (
        lambda topics: any(ty == _TOF_FRAME and not t.startswith("/tof_rings/") for t, ty in topics.items()),
        "a ToF continuum recording (demo tof-continuum, or a robot's ToF rings), localised against a prior map: "
        "the continuum_estimator node's pipeline replays it with --config FILE, a copy of "
        "config/continuum_tof.yaml naming the robot's topics and whose map_file is the map; 'shape-sensing "
        "eval-tof BAG --reestimate MAP [--config FILE]' estimates it again in one batch (the demo writes the map "
        "beside the bag as prior_map.ply; see docs/robots/tof_real_recording.md)",
    ),
    (
        lambda topics: any(t.startswith("/tof_rings/") and ty == _TOF_FRAME for t, ty in topics.items()),
        "a recording of the ToF sensor rings alone (demo tof-rings): raw frames and IMUs without a robot model, "
        "nothing to re-estimate; play it into RViz with 'ros2 bag play BAG'",
    ),
    (
        lambda topics: any(t.endswith("/plan/path") for t in topics),
        "a growth planner recording (demo growing): plans and bodies, no sensor input to re-estimate; play it "
        "into RViz with 'ros2 bag play BAG' ('shape-sensing figure4' recomputes the planner's figures)",
    ),
)


def select(topics: dict[str, str], forced: str | None = None, configured: bool = False) -> str:
    """The name of the pipeline whose inputs a bag's ``topic -> type`` map holds (``forced``: that one).

    A demo recording that replay does not re-estimate by itself (:data:`NOT_REPLAYED`) is refused with the command
    that reads it, unless the user ``configured`` the estimator (``--config``).

    Raises:
        ValueError: no pipeline, or several, recognise the topics; an unknown ``forced`` name.
    """
    if forced is not None:
        if forced not in CONTRACTS:
            raise ValueError(f"unknown pipeline {forced!r}; expected one of {sorted(CONTRACTS)}")
        return forced
    for recognise, what in NOT_REPLAYED:
        if not configured and recognise(topics):
            raise ValueError(f"shape-sensing replay does not read this bag: {what}")
    found = [name for name, c in CONTRACTS.items() if c.matches(topics)]
    if not found:
        listing = ", ".join(f"{t} [{ty}]" for t, ty in sorted(topics.items())) or "no topics"
        raise ValueError(f"no pipeline recognises the bag's topics ({listing}); see the README's input contract")
    if len(found) > 1:
        raise ValueError(f"several pipelines match the bag ({found}); choose one with --pipeline")
    return found[0]
