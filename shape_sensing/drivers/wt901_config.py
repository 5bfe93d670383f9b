"""Configuration of the ``wt901`` driver node (UART or CAN), validated once, building the readers.

UART mode: one WT901 per serial port (``ports[i]`` -> ``frame_ids[i]``).
CAN mode: one python-can bus, one CAN ID per module board (``can_ids[i]`` ->
``frame_ids[i]``). Samples are published on ``imu/<frame_id>``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import serial

from shape_sensing.config import ConfigError, Param, Schema
from shape_sensing.drivers.errors import BusError
from shape_sensing.drivers.wt901 import BAUD_CODES, RATE_CODES
from shape_sensing.drivers.wt901_can import Wt901Can
from shape_sensing.drivers.wt901_serial import SerialLike, Wt901Serial, Wt901SerialGroup, open_port

__all__ = ["SCHEMA", "Wt901NodeConfig", "build_can_reader", "build_serial_group"]

_log = logging.getLogger(__name__)

SCHEMA = Schema(
    node="wt901",
    description="WitMotion WT901 attitude sensors over UART (one per port) or CAN (one ID per module board).",
    params=(
        Param("mode", str, "uart", "'uart' (pyserial) or 'can' (python-can)", choices=("uart", "can")),
        Param("frame_ids", "str[]", ["platform_0", "platform_1", "platform_2", "platform_3", "platform_4"],
              "sensor frame per sensor; samples go to imu/<frame_id>"),
        Param("ports", "str[]", [], "UART: serial port or pyserial URL per sensor (same order as frame_ids)"),
        Param("baud", int, 115200, "UART: line rate", choices=tuple(sorted(BAUD_CODES)), unit="bit/s"),
        Param("orientation_source", str, "angle", "UART: 'angle' (0x53) or 'quaternion' (0x59)",
              choices=("angle", "quaternion")),
        Param("configure_on_start", bool, False, "UART: write output content and rate (then save) at start"),
        Param("output_rate_hz", float, 100.0, "UART: output rate written when configuring",
              choices=tuple(sorted(RATE_CODES)), unit="Hz"),
        Param("can_interface", str, "socketcan", "CAN: python-can interface name"),
        Param("can_channel", str, "can0", "CAN: channel"),
        Param("can_bitrate", int, 0, "CAN: bitrate passed to the interface (0: interface default)", min=0),
        Param("can_ids", "int[]", [], "CAN: board ID per sensor (same order as frame_ids)", min=0, max=0x1FFFFFFF),
        Param("extended_ids", bool, False, "CAN: 29-bit extended IDs (else 11-bit standard)"),
        Param("poll_rate", float, 400.0, "how often the ports/bus are drained", min=1.0, max=5000.0, unit="Hz"),
        Param("stale_timeout", float, 0.5, "a sensor silent this long is reported stale", min=0.0, unit="s"),
        Param("frame_prefix", str, "", "prefix of the published frame ids"),
        Param(
            "imu_array_topic", str, "",
            "also publish the samples of each poll as one shape_sensing/ImuArray on this topic (rows by frame id); "
            "'' for none. The per-sensor imu/<frame> topics are published either way",
        ),
    ),
)  # fmt: skip


@dataclass(frozen=True)
class Wt901NodeConfig:
    """Validated, cross-checked settings of the ``wt901`` node."""

    params: dict[str, Any]

    @classmethod
    def from_params(cls, values: Mapping[str, Any]) -> Wt901NodeConfig:
        """Validate ``values`` with :data:`SCHEMA` and check that the per-sensor lists agree.

        Raises:
            ConfigError: names the parameter, the value and what was expected.
        """
        p = SCHEMA.validate(values)
        ids = p["frame_ids"]
        if not ids:
            raise ConfigError("parameter 'frame_ids' = []: expected one frame id per sensor")
        if len(set(ids)) != len(ids):
            raise ConfigError(f"parameter 'frame_ids' = {ids}: expected unique frame ids")
        if p["mode"] == "uart":
            if len(p["ports"]) != len(ids):
                raise ConfigError(
                    f"parameter 'ports' = {p['ports']}: expected one port per frame id ({len(ids)} in 'frame_ids')"
                )
        else:
            if len(p["can_ids"]) != len(ids):
                raise ConfigError(
                    f"parameter 'can_ids' = {p['can_ids']}: expected one CAN ID per frame id "
                    f"({len(ids)} in 'frame_ids')"
                )
            if len(set(p["can_ids"])) != len(p["can_ids"]):
                raise ConfigError(f"parameter 'can_ids' = {p['can_ids']}: expected unique IDs")
            limit = 0x1FFFFFFF if p["extended_ids"] else 0x7FF
            big = [i for i in p["can_ids"] if i > limit]
            if big:
                raise ConfigError(
                    f"parameter 'can_ids' = {p['can_ids']}: {big} exceed 0x{limit:X}; set extended_ids for 29-bit IDs"
                )
            if p["orientation_source"] != "angle":
                raise ConfigError(
                    "parameter 'orientation_source' = 'quaternion': the CAN layout carries only three values per "
                    "frame, expected 'angle' in CAN mode"
                )
        return cls(p)

    def frame_ids(self) -> list[str]:
        """Prefixed frame ids."""
        return [self.params["frame_prefix"] + f for f in self.params["frame_ids"]]


def build_serial_group(cfg: Wt901NodeConfig, clock: Callable[[], int]) -> Wt901SerialGroup:
    """Open every port (UART mode) and return the group; ports that fail to open are retried by the group."""
    p = cfg.params
    sensors = []
    for port, fid in zip(p["ports"], cfg.frame_ids(), strict=True):
        try:
            handle: SerialLike = open_port(port, p["baud"])
        except BusError as exc:
            _log.warning("%s: %s; retrying in the background", fid, exc)
            handle = _Unopened(str(exc))
        sensors.append(Wt901Serial(handle, fid, p["orientation_source"], clock))
    if p["configure_on_start"]:
        for s in sensors:
            if not isinstance(s.port, _Unopened):
                s.configure(output=["accel", "gyro", "angle", "quaternion"], rate_hz=p["output_rate_hz"])
    return Wt901SerialGroup(sensors, reopen=lambda i: open_port(p["ports"][i], p["baud"]))


class _Unopened:
    """Stands in for a port that failed to open; the group then retries opening it with backoff."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    @property
    def in_waiting(self) -> int:
        raise serial.SerialException(self.reason)

    def read(self, size: int = 1) -> bytes:
        raise serial.SerialException(self.reason)

    def write(self, data: bytes) -> int:
        raise serial.SerialException(self.reason)


def build_can_reader(cfg: Wt901NodeConfig, clock: Callable[[], int]) -> Wt901Can:
    """Open the CAN bus (CAN mode) and return the reader (it reopens the bus after a failure)."""
    import can

    p = cfg.params

    def open_bus() -> can.BusABC:
        kwargs: dict[str, Any] = {"interface": p["can_interface"], "channel": p["can_channel"]}
        if p["can_bitrate"]:
            kwargs["bitrate"] = p["can_bitrate"]
        try:
            return can.Bus(**kwargs)
        except (can.CanError, OSError, ImportError, NotImplementedError, ValueError) as exc:
            raise BusError(
                f"parameters 'can_interface' = {p['can_interface']!r}, 'can_channel' = {p['can_channel']!r}: "
                f"cannot open the CAN bus: {exc}"
                + (f" (bitrate {p['can_bitrate']})" if p["can_bitrate"] else "")
                + "; is the interface up (ip link set <channel> up) and python-can's backend installed?"
            ) from exc

    sensors = dict(zip(p["can_ids"], cfg.frame_ids(), strict=True))
    return Wt901Can(open_bus(), sensors, extended=p["extended_ids"], clock=clock, reopen=open_bus)
