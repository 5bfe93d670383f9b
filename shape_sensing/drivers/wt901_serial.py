"""WT901 over UART (pyserial): one sensor per port, several ports read together.

The port is injected (a ``serial.Serial``-like object with ``read``,
``write`` and ``in_waiting``), so a real port, pyserial's ``loop://`` or a
pty all serve. Stamps are the host's read time. A port that raises is marked
failed and retried with exponential backoff while the other ports keep
streaming.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import serial

from shape_sensing.drivers.errors import BusError
from shape_sensing.drivers.wt901 import (
    BAUD_CODES,
    CalibrationMode,
    Wt901Assembler,
    Wt901Parser,
    configuration_sequence,
)
from shape_sensing.types import DiagnosticLevel, DiagnosticStatus, ImuSample

__all__ = ["SerialLike", "Wt901Serial", "Wt901SerialGroup", "open_port"]

_log = logging.getLogger(__name__)


class SerialLike(Protocol):
    """The part of ``serial.Serial`` the driver uses."""

    @property
    def in_waiting(self) -> int: ...

    def read(self, size: int = 1) -> bytes: ...

    def write(self, data: bytes) -> int | None: ...


def open_port(url: str, baud: int, *, timeout: float = 0.0) -> Any:
    """Open a serial port or pyserial URL (``/dev/ttyUSB0``, ``loop://``, ``socket://...``) for a WT901.

    Raises:
        BusError: the baud is not a WT901 rate or the port cannot be opened.
    """
    if baud not in BAUD_CODES:
        raise BusError(f"baud {baud!r} for {url}: expected one of {sorted(BAUD_CODES)}")
    try:
        return serial.serial_for_url(url, baudrate=baud, timeout=timeout)
    except (serial.SerialException, OSError, ValueError) as exc:
        raise BusError(f"cannot open serial port {url!r}: {exc}") from exc


@dataclass
class Wt901Serial:
    """One WT901 on one serial port.

    Args:
        port: the open port.
        frame_id: frame of the samples.
        orientation_source: ``"angle"`` or ``"quaternion"`` (needs 0x59 enabled).
        clock: nanosecond clock for stamps.
    """

    port: SerialLike
    frame_id: str
    orientation_source: str = "angle"
    clock: Callable[[], int] = time.time_ns
    parser: Wt901Parser = field(default_factory=Wt901Parser)
    last_ns: int | None = None
    samples: int = 0

    def __post_init__(self) -> None:
        self.assembler = Wt901Assembler(self.frame_id, self.orientation_source)

    def configure(
        self,
        *,
        output: Sequence[str] | None = None,
        rate_hz: float | None = None,
        baud: int | None = None,
        calibration: CalibrationMode | None = None,
        save: bool = True,
    ) -> list[bytes]:
        """Write unlock, the requested settings and save; return the bytes sent."""
        cmds = configuration_sequence(output=output, rate_hz=rate_hz, baud=baud, calibration=calibration, save=save)
        for c in cmds:
            self.port.write(c)
        return cmds

    def poll(self) -> list[ImuSample]:
        """Read what is waiting (non-blocking) and return the completed samples.

        Raises:
            serial.SerialException, OSError: the port failed (callers that read several
                ports use :class:`Wt901SerialGroup`, which contains the failure).
        """
        waiting = self.port.in_waiting
        if not waiting:
            return []
        data = self.port.read(waiting)
        stamp = self.clock()
        out = []
        for frame in self.parser.feed(data):
            s = self.assembler.push(frame, stamp)
            if s is not None:
                out.append(s)
        if out:
            self.last_ns = stamp
            self.samples += len(out)
        return out

    def diagnostics(self, now_ns: int, stale_after_ns: int = 500_000_000) -> DiagnosticStatus:
        """Health of this sensor: stale or bad frames WARN."""
        st = self.parser.stats
        fresh = self.last_ns is not None and now_ns - self.last_ns <= stale_after_ns
        level = DiagnosticLevel.OK if fresh else DiagnosticLevel.WARN
        msg = "streaming" if fresh else "no recent sample"
        if fresh and st.bad_checksum:
            msg += f", {st.bad_checksum} bad frames skipped"
        values = st.as_dict() | {"samples": str(self.samples)}
        return DiagnosticStatus(name=f"wt901/{self.frame_id}", level=level, message=msg, values=values)


@dataclass
class Wt901SerialGroup:
    """Several WT901s, each on its own port; a failing port does not stop the others.

    Args:
        sensors: the per-port drivers.
        reopen: ``reopen(index) -> port`` to reopen a failed port (``None``: retry the same port object).
        backoff_s: first retry delay, doubled per failure up to ``max_backoff_s``.
    """

    sensors: list[Wt901Serial]
    reopen: Callable[[int], SerialLike] | None = None
    backoff_s: float = 0.1
    max_backoff_s: float = 5.0

    def __post_init__(self) -> None:
        n = len(self.sensors)
        self.failed = [False] * n
        self.errors = [0] * n
        self.last_error = [""] * n
        self._retry_at = [0.0] * n
        self._delay = [self.backoff_s] * n

    def poll(self) -> list[ImuSample]:
        """Poll every healthy port (and retry failed ones when due)."""
        out: list[ImuSample] = []
        now = time.monotonic()
        for i, sensor in enumerate(self.sensors):
            if self.failed[i]:
                if now < self._retry_at[i]:
                    continue
                if self.reopen is not None:
                    try:
                        sensor.port = self.reopen(i)
                    except (BusError, serial.SerialException, OSError) as exc:
                        self._fail(i, exc)
                        continue
                self.failed[i] = False
            try:
                out.extend(sensor.poll())
            except (serial.SerialException, OSError) as exc:
                self._fail(i, exc)
            else:
                self._delay[i] = self.backoff_s
        return out

    def _fail(self, i: int, exc: BaseException) -> None:
        self.failed[i] = True
        self.errors[i] += 1
        self.last_error[i] = f"{type(exc).__name__}: {exc}"
        self._retry_at[i] = time.monotonic() + self._delay[i]
        _log.warning("WT901 %s: port failed (%s)", self.sensors[i].frame_id, self.last_error[i])
        self._delay[i] = min(self._delay[i] * 2.0, self.max_backoff_s)

    def diagnostics(self, now_ns: int, stale_after_ns: int = 500_000_000) -> list[DiagnosticStatus]:
        """Per-sensor statuses; a failed port is an ERROR naming the failure."""
        out = []
        for i, sensor in enumerate(self.sensors):
            st = sensor.diagnostics(now_ns, stale_after_ns)
            st.values["port_errors"] = str(self.errors[i])
            if self.failed[i]:
                st.level = DiagnosticLevel.ERROR
                st.message = f"port failed: {self.last_error[i]}"
            out.append(st)
        return out
