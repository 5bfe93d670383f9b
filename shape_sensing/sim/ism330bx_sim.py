"""Register-level ISM330BX simulator with its FIFO, fed from given angular rates and accelerations.

What it models (register map from ST's datasheet DS14239 and ST's ism330bx-pid header; nothing is imported from
``shape_sensing.drivers``):

* ``WHO_AM_I`` 0x71, ``CTRL3`` power-on value 0x04 (``IF_INC``), a register
  pointer set by the first written byte and auto-incremented when
  ``IF_INC`` is set; a burst read from ``FIFO_DATA_OUT_TAG`` (0x78) pops one
  7-byte word per 7 bytes and wraps 0x7E -> 0x78;
* samples produced at the configured ODR on the chip's own clock, which runs
  ``1 + 0.0013 * freq_fine`` times the nominal rate (``INTERNAL_FREQ``), with
  the 32-bit timestamp counter at 21.75 us nominal per LSB;
* FIFO batching of gyroscope/accelerometer at ``BDR_GY``/``BDR_XL`` (the
  gyroscope's rate sets the slots), a timestamp word per batch event when
  ``DEC_TS_BATCH`` = 1, ``TAG_CNT`` incremented per slot; continuous mode
  overwrites the oldest words when full (``FIFO_OVR_IA``, and
  ``FIFO_OVR_LATCHED`` until ``FIFO_STATUS2`` is read), bypass mode empties it;
* data in the configured full scale, rounded and saturated to int16; the
  accelerometer as Z, Y, X; the gyroscope's FIFO words in the order
  ``fifo_gyro_order`` (``"xyz"``, the datasheet's FIFO_DATA_OUT_TAG footnote,
  or ``"zyx"``, what ST's ISM330BX FIFO example reads); the output registers
  ``OUTX_L_G`` (X, Y, Z) and ``OUTZ_L_A`` (Z, Y, X) hold the latest sample; ``OUT_TEMP`` at 256 LSB/degC around 25 degC;
* ``CTRL3.SW_RESET``: control registers and FIFO back to power-on values,
  the bit reads 1 for 50 us.

Capacity: :data:`FIFO_WORDS` words (what the 9-bit ``DIFF_FIFO`` can count).
Not modelled: filters, the embedded functions, FIFO compression, the
temperature batched in the FIFO.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import numpy as np

# ISM330BX facts, stated here from ST's datasheet (DS14239) and ST's ism330bx-pid register header
# (ism330bx_reg.h), not imported from the driver under test.
_GRAVITY = 9.80665
ISM330BX_ID = 0x71  # WHO_AM_I
FIFO_WORD = 7  # FIFO_DATA_OUT_TAG (0x78) + six data bytes 0x79-0x7E
FREQ_FINE_STEP = 0.0013  # INTERNAL_FREQ: 0.13 % of the typical ODR per LSB
TIMESTAMP_LSB_S = 21.75e-6  # TIMESTAMP0-3: 21.75 us per LSB (typical)
TEMP_SENSITIVITY = 256.0  # OUT_TEMP: LSB/degC
TEMP_OFFSET_C = 25.0  # OUT_TEMP: 0 LSB at 25 degC
CTRL3_SW_RESET = 0x01
CTRL3_IF_INC = 0x04
TIMESTAMP_EN = 0x40  # FUNCTIONS_ENABLE
STATUS2_OVR_LATCHED = 0x08  # FIFO_STATUS2
STATUS2_FULL = 0x20
STATUS2_OVR = 0x40
STATUS2_WTM = 0x80
# accelerometer words in the FIFO and OUTZ_L_A (0x28) hold Z, Y, X (datasheet, FIFO_DATA_OUT_TAG footnote and the
# output register map); the FIFO gyroscope order is the ``fifo_gyro_order`` argument (datasheet: X, Y, Z)
_ACCEL_WORD_AXES = (2, 1, 0)
# ODR_XL / ODR_G codes (CTRL1/CTRL2 bits 3:0) -> Hz
_CODE_TO_ODR = {2: 7.5, 3: 15.0, 4: 30.0, 5: 60.0, 6: 120.0, 7: 240.0, 8: 480.0, 9: 960.0, 10: 1920.0, 11: 3840.0}
# FS_G codes (CTRL6 bits 3:0) -> rad/s per LSB: 4.375, 8.75, 17.5, 35, 70, 140 mdps/LSB
_FS_G_CODE = {c: mdps * 1e-3 * np.pi / 180.0 for c, mdps in
              ((0x0, 4.375), (0x1, 8.75), (0x2, 17.5), (0x3, 35.0), (0x4, 70.0), (0xC, 140.0))}  # fmt: skip
# FS_XL codes (CTRL8 bits 1:0) -> m/s^2 per LSB: 0.061, 0.122, 0.244 mg/LSB
_FS_XL_CODE = {0x0: 0.061e-3 * _GRAVITY, 0x1: 0.122e-3 * _GRAVITY, 0x2: 0.244e-3 * _GRAVITY}


class Reg:
    """Register addresses (main page), datasheet register map."""

    FIFO_CTRL1 = 0x07
    FIFO_CTRL3 = 0x09
    FIFO_CTRL4 = 0x0A
    WHO_AM_I = 0x0F
    CTRL1 = 0x10
    CTRL2 = 0x11
    CTRL3 = 0x12
    CTRL6 = 0x15
    CTRL8 = 0x17
    FIFO_STATUS1 = 0x1B
    FIFO_STATUS2 = 0x1C
    OUT_TEMP_L = 0x20
    OUTX_L_G = 0x22
    OUTZ_L_A = 0x28
    TIMESTAMP0 = 0x40
    INTERNAL_FREQ = 0x4F
    FUNCTIONS_ENABLE = 0x50
    FIFO_DATA_OUT_TAG = 0x78


class Tag:
    """FIFO ``TAG_SENSOR`` values (ism330bx_reg.h: GY_NC 0x01, XL_NC 0x02, TIMESTAMP 0x04)."""

    GYRO = 0x01
    ACCEL = 0x02
    TIMESTAMP = 0x04


__all__ = ["FIFO_WORDS", "SimISM330BX"]

FIFO_WORDS = 511
_RESET_NS = 50_000

Motion = Callable[[float], tuple[np.ndarray, np.ndarray]]


class SimISM330BX:
    """A simulated ISM330BX.

    Args:
        address: 0x6A or 0x6B.
        name: label for logs.
        freq_fine: ``INTERNAL_FREQ`` value (signed; the chip's clock deviation in 0.13 % steps).
        gyro_bias: rad/s added to every gyroscope sample.
        gyro_noise: rad/s, white noise standard deviation per axis.
        accel_noise: m/s^2, white noise standard deviation per axis.
        seed: noise seed.
        fifo_gyro_order: ``"xyz"`` or ``"zyx"``: the gyroscope axes' order in its FIFO words.
    """

    def __init__(
        self,
        address: int = 0x6A,
        name: str = "",
        *,
        freq_fine: int = 0,
        gyro_bias: np.ndarray | None = None,
        gyro_noise: float = 0.0,
        accel_noise: float = 0.0,
        seed: int = 0,
        fifo_gyro_order: str = "xyz",
    ) -> None:
        if fifo_gyro_order not in ("xyz", "zyx"):
            raise ValueError(f"fifo_gyro_order {fifo_gyro_order!r} invalid: expected 'xyz' or 'zyx'")
        self.fifo_gyro_order = fifo_gyro_order
        if address not in (0x6A, 0x6B):
            raise ValueError(f"ISM330BX address {address:#04x} invalid: expected 0x6a or 0x6b")
        if not -128 <= freq_fine <= 127:
            raise ValueError(f"freq_fine {freq_fine} invalid: expected -128..127")
        self.address = address
        self.name = name or f"ism330bx@{address:#04x}"
        self.freq_fine = freq_fine
        self.gyro_bias = np.zeros(3) if gyro_bias is None else np.asarray(gyro_bias, float)
        self.gyro_noise = gyro_noise
        self.accel_noise = accel_noise
        self.rng = np.random.default_rng(seed)
        self.rate_scale = 1.0 + FREQ_FINE_STEP * freq_fine
        self.dead = False
        self.resets = 0
        self.temperature = 30.0
        self.angular_velocity = np.zeros(3)
        self.linear_acceleration = np.array([0.0, 0.0, 9.80665])
        self.motion: Motion | None = None
        self.regs = bytearray(0x80)
        self.fifo: deque[bytes] = deque()
        self.pointer = 0
        self.power_on_reset()

    # -- harness -----------------------------------------------------------------
    def power_on_reset(self, now_ns: int = 0) -> None:
        """Registers to power-on values, FIFO empty, sampling stopped."""
        self.regs[:] = bytes(0x80)
        self.regs[Reg.WHO_AM_I] = ISM330BX_ID
        self.regs[Reg.CTRL3] = CTRL3_IF_INC
        self.regs[Reg.INTERNAL_FREQ] = self.freq_fine & 0xFF
        self.fifo.clear()
        self.pointer = 0
        self._word: bytes | None = None
        self._ovr_latched = False
        self._busy_until = now_ns
        self._ts_origin_ns = now_ns
        self._slots_done = 0
        self._slot_origin_ns: int | None = None
        self._tag_cnt = 0
        self._now_ns = now_ns
        self._out_g = bytes(6)
        self._out_a = bytes(6)

    def set_motion(self, angular_velocity: np.ndarray, linear_acceleration: np.ndarray) -> None:
        """Constant rates (rad/s) and specific force (m/s^2, gravity included) in the sensor frame from now on."""
        self.angular_velocity = np.asarray(angular_velocity, float)
        self.linear_acceleration = np.asarray(linear_acceleration, float)
        self.motion = None

    def acks(self) -> bool:
        """Whether the chip acknowledges its address."""
        return not self.dead

    # -- bus side --------------------------------------------------------------------
    def i2c_write(self, data: bytes, now_ns: int) -> None:
        """Register pointer, then values."""
        self._advance(now_ns)
        self.pointer = data[0] & 0x7F
        for value in data[1:]:
            self._write_reg(self.pointer, value, now_ns)
            if self.regs[Reg.CTRL3] & CTRL3_IF_INC:
                self.pointer = (self.pointer + 1) & 0x7F

    def i2c_read(self, n: int, now_ns: int) -> bytes:
        """Bytes from the register pointer on (FIFO words popped from 0x78)."""
        self._advance(now_ns)
        out = bytearray()
        inc = bool(self.regs[Reg.CTRL3] & CTRL3_IF_INC)
        for _ in range(n):
            p = self.pointer
            if Reg.FIFO_DATA_OUT_TAG <= p <= Reg.FIFO_DATA_OUT_TAG + 6:
                if self._word is None:
                    self._word = self.fifo.popleft() if self.fifo else bytes(FIFO_WORD)
                out.append(self._word[p - Reg.FIFO_DATA_OUT_TAG])
                if p == Reg.FIFO_DATA_OUT_TAG + 6:
                    self._word = None
                    self.pointer = Reg.FIFO_DATA_OUT_TAG
                    continue
            else:
                out.append(self._read_reg(p))
            if inc:
                self.pointer = (p + 1) & 0x7F
        return bytes(out)

    # -- internals ---------------------------------------------------------------------
    def _read_reg(self, reg: int) -> int:
        if reg == Reg.CTRL3:
            v = self.regs[reg]
            return v | CTRL3_SW_RESET if self._now_ns < self._busy_until else v & ~CTRL3_SW_RESET & 0xFF
        if reg == Reg.FIFO_STATUS1:
            return len(self.fifo) & 0xFF
        if reg == Reg.FIFO_STATUS2:
            n = len(self.fifo)
            v = (n >> 8) & 0x01
            wtm = self.regs[Reg.FIFO_CTRL1]
            if wtm and n >= wtm:
                v |= STATUS2_WTM
            if n >= FIFO_WORDS:
                v |= STATUS2_FULL
            if self._ovr_latched:
                v |= STATUS2_OVR_LATCHED | (STATUS2_OVR if n >= FIFO_WORDS else 0)
            self._ovr_latched = False
            return v
        if Reg.OUT_TEMP_L <= reg <= Reg.OUT_TEMP_L + 1:
            raw = int(np.clip(round((self.temperature - TEMP_OFFSET_C) * TEMP_SENSITIVITY), -32768, 32767))
            return raw.to_bytes(2, "little", signed=True)[reg - Reg.OUT_TEMP_L]
        if Reg.OUTX_L_G <= reg < Reg.OUTX_L_G + 6:
            return self._out_g[reg - Reg.OUTX_L_G]
        if Reg.OUTZ_L_A <= reg < Reg.OUTZ_L_A + 6:
            return self._out_a[reg - Reg.OUTZ_L_A]
        if Reg.TIMESTAMP0 <= reg <= Reg.TIMESTAMP0 + 3:
            return self._ticks(self._now_ns).to_bytes(4, "little")[reg - Reg.TIMESTAMP0]
        return self.regs[reg]

    def _write_reg(self, reg: int, value: int, now_ns: int) -> None:
        if reg in (Reg.WHO_AM_I, Reg.FIFO_STATUS1, Reg.FIFO_STATUS2, Reg.INTERNAL_FREQ) or reg >= 0x78:
            return  # read-only
        if reg == Reg.CTRL3 and value & CTRL3_SW_RESET:
            self.resets += 1
            self.power_on_reset(now_ns)
            self._busy_until = now_ns + _RESET_NS
            return
        old = self.regs[reg]
        self.regs[reg] = value
        if reg == Reg.FIFO_CTRL4 and (value & 0x7) == 0:
            self.fifo.clear()  # bypass mode empties the FIFO
            self._word = None
            self._ovr_latched = False
        if reg == Reg.FUNCTIONS_ENABLE and value & TIMESTAMP_EN and not old & TIMESTAMP_EN:
            self._ts_origin_ns = now_ns
        if reg in (Reg.CTRL2, Reg.CTRL1) and (value & 0xF) != (old & 0xF):
            self._slot_origin_ns = now_ns if self._gyro_odr() else None
            self._slots_done = 0

    def _gyro_odr(self) -> float:
        return _CODE_TO_ODR.get(self.regs[Reg.CTRL2] & 0xF, 0.0) * self.rate_scale

    def _ticks(self, t_ns: int) -> int:
        if not self.regs[Reg.FUNCTIONS_ENABLE] & TIMESTAMP_EN:
            return 0
        tick_s = TIMESTAMP_LSB_S / self.rate_scale
        return int((t_ns - self._ts_origin_ns) * 1e-9 / tick_s) & 0xFFFFFFFF

    def _advance(self, now_ns: int) -> None:
        """Produce the samples due up to ``now_ns``."""
        self._now_ns = max(self._now_ns, now_ns)
        odr = self._gyro_odr()
        if self._slot_origin_ns is None or odr <= 0:
            return
        period_ns = 1e9 / odr
        due = int((self._now_ns - self._slot_origin_ns) / period_ns)
        while self._slots_done < due:
            self._slots_done += 1
            t_ns = self._slot_origin_ns + int(self._slots_done * period_ns)
            self._sample(t_ns)

    def _sample(self, t_ns: int) -> None:
        gyro_code = (self.regs[Reg.FIFO_CTRL3] >> 4) & 0xF
        xl_code = self.regs[Reg.FIFO_CTRL3] & 0xF
        mode = self.regs[Reg.FIFO_CTRL4] & 0x7
        if self.motion is not None:
            w, a = self.motion(t_ns * 1e-9)
        else:
            w, a = self.angular_velocity, self.linear_acceleration
        w = np.asarray(w, float) + self.gyro_bias + self.rng.normal(0.0, self.gyro_noise, 3) * (self.gyro_noise > 0)
        a = np.asarray(a, float) + self.rng.normal(0.0, self.accel_noise, 3) * (self.accel_noise > 0)
        g_lsb = _FS_G_CODE.get(self.regs[Reg.CTRL6] & 0xF, _FS_G_CODE[0])
        a_lsb = _FS_XL_CODE.get(self.regs[Reg.CTRL8] & 0x3, _FS_XL_CODE[0])
        self._out_g = _i16(w / g_lsb)  # OUTX_L_G..OUTZ_H_G: X, Y, Z
        self._out_a = _i16(a[list(_ACCEL_WORD_AXES)] / a_lsb)  # OUTZ_L_A..OUTX_H_A: Z, Y, X
        if mode == 0:
            return
        self._tag_cnt = (self._tag_cnt + 1) & 0x3
        words = []
        if (self.regs[Reg.FIFO_CTRL4] >> 6) & 0x3 == 1:
            words.append(self._word_bytes(Tag.TIMESTAMP, self._ticks(t_ns).to_bytes(4, "little") + bytes(2)))
        if gyro_code:
            gw = w if self.fifo_gyro_order == "xyz" else w[::-1]
            words.append(self._word_bytes(Tag.GYRO, _i16(gw / g_lsb)))
        if xl_code:
            words.append(self._word_bytes(Tag.ACCEL, self._out_a))
        for wd in words:
            if len(self.fifo) >= FIFO_WORDS:
                if mode == 1:  # FIFO mode stops when full
                    return
                self.fifo.popleft()
                self._ovr_latched = True
            self.fifo.append(wd)

    def _word_bytes(self, tag: int, data: bytes) -> bytes:
        return bytes([(tag << 3) | (self._tag_cnt << 1)]) + data


def _i16(v: np.ndarray) -> bytes:
    return np.clip(np.rint(v), -32768, 32767).astype("<i2").tobytes()
