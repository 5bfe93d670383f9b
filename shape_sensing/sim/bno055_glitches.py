"""Corrupted BNO055 reads as users of other drivers report them: quaternion spikes every 1-3 s.

:class:`GlitchyBNO055` wraps a simulated chip on the bus (same ``acks``/``i2c_write``/``i2c_read``)
and, with probability ``rate`` per read that covers the quaternion registers, replaces the
reply by one of these failures (each seen on real buses; the register layout is the datasheet's,
QUA_Data_w_LSB at 0x20, four int16 little-endian w, x, y, z):

* ``torn``: the chip updated its output registers during the burst read: the first bytes are from
  the new fusion sample, the rest from the one before it (the previous reply of the same span);
* ``shifted``: a bus error shifted the reply by one byte (a lost ACK repeats a byte): plausible
  bytes, misaligned words;
* ``rotated``: the register pointer was off by two words: the four words come back rotated
  (y, z, w, x), a quaternion of norm 1 that describes another orientation;
* ``bitflip``: one bit of a high byte flipped (noise on SDA);
* ``zeros`` / ``ones``: the bus returned all 0x00 (SDA held low) or all 0xFF (SDA floating high);
* ``neighbour``: the bytes of another chip (a mux channel that did not switch): a valid unit
  quaternion of the wrong sensor.

``injected`` counts each kind; ``last_kind`` names the failure of the last reply that covered the
quaternion (``""`` for a clean one), so a harness can tell which readings were corrupted.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

__all__ = ["KINDS", "QUA_DATA", "GlitchyBNO055"]

QUA_DATA = 0x20  # BST-BNO055-DS000 table 4-2: QUA_Data_w_LSB; w, x, y, z follow as int16 LE
KINDS = ("torn", "shifted", "rotated", "bitflip", "zeros", "ones", "neighbour")


class GlitchyBNO055:
    """A simulated BNO055 whose quaternion reads fail now and then.

    Args:
        chip: the simulated chip (``address``, ``name``, ``pointer``, ``acks``, ``i2c_write``, ``i2c_read``).
        rate: probability that a read covering the quaternion is corrupted.
        rng: random generator.
        kinds: the failures drawn from (uniformly).
        neighbour: another simulated chip whose quaternion bytes the ``neighbour`` failure returns.
    """

    def __init__(
        self,
        chip: Any,
        rate: float,
        rng: np.random.Generator,
        kinds: tuple[str, ...] = KINDS,
        neighbour: Any = None,
    ) -> None:
        unknown = [k for k in kinds if k not in KINDS]
        if unknown or not kinds:
            raise ValueError(f"glitch kinds {list(kinds)}: expected some of {list(KINDS)}")
        if not 0.0 <= rate <= 1.0:
            raise ValueError(f"glitch rate {rate!r}: expected 0..1")
        self.chip = chip
        self.rate = rate
        self.rng = rng
        self.kinds = tuple(k for k in kinds if k != "neighbour" or neighbour is not None)
        self.neighbour = neighbour
        self.injected: Counter[str] = Counter()
        self.last_kind = ""
        self._previous: dict[tuple[int, int], bytes] = {}

    @property
    def address(self) -> int:
        return int(self.chip.address)

    @property
    def name(self) -> str:
        return str(self.chip.name)

    def acks(self) -> bool:
        return bool(self.chip.acks())

    def i2c_write(self, data: bytes, now_ns: int) -> None:
        self.chip.i2c_write(data, now_ns)

    def i2c_read(self, n: int, now_ns: int) -> bytes:
        start = int(self.chip.pointer)
        out = bytes(self.chip.i2c_read(n, now_ns))
        if not start <= QUA_DATA < start + n or start + n < QUA_DATA + 8:
            return out
        self.last_kind = ""
        prev = self._previous.get((start, n), out)
        self._previous[(start, n)] = out
        if self.rng.random() >= self.rate:
            return out
        kind = str(self.rng.choice(self.kinds))
        self.injected[kind] += 1
        self.last_kind = kind
        q0 = QUA_DATA - start
        q = bytearray(out[q0 : q0 + 8])
        if kind == "torn":
            cut = int(self.rng.integers(1, 8))
            q[cut:] = prev[q0 + cut : q0 + 8]
        elif kind == "shifted":
            q = bytearray(bytes([q[0]]) + bytes(q[:7]))
        elif kind == "rotated":
            q = q[4:] + q[:4]
        elif kind == "bitflip":
            q[2 * int(self.rng.integers(0, 4)) + 1] ^= 1 << int(self.rng.integers(3, 8))
        elif kind == "zeros":
            return bytes(n)
        elif kind == "ones":
            return b"\xff" * n
        else:  # neighbour: the other chip's registers of the same span
            other = self.neighbour
            saved = other.pointer
            other.pointer = start
            theirs = bytes(other.i2c_read(n, now_ns))
            other.pointer = saved
            return theirs
        return out[:q0] + bytes(q) + out[q0 + 8 :]
