"""ST ISM330BX 6-axis IMU (accelerometer + gyroscope) on an smbus2-like I2C bus, read through its FIFO.

Register map and conversions from the ISM330BX datasheet and ST's reference
C driver (``ism330bx_reg.h`` / ``ism330bx_reg.c``):

* I2C address 0x6A (SA0 low) or 0x6B; ``WHO_AM_I`` (0x0F) reads 0x71.
* ``CTRL3`` (0x12): ``SW_RESET`` bit 0 (self-clearing, restores the control
  registers), ``IF_INC`` bit 2 (address auto-increment, default on),
  ``BDU`` bit 6, ``BOOT`` bit 7.
* ``CTRL1`` (0x10) / ``CTRL2`` (0x11): ``ODR_XL`` / ``ODR_G`` in bits 3:0 and
  the operating mode in bits 6:4 (0 = high performance). ODR codes:
  1 = 1.875 Hz (accelerometer only), 2 = 7.5, 3 = 15, 4 = 30, 5 = 60,
  6 = 120, 7 = 240, 8 = 480, 9 = 960, 10 = 1920, 11 = 3840 Hz.
* ``CTRL6`` (0x15) ``FS_G`` bits 3:0: 0 = +-125, 1 = +-250, 2 = +-500,
  3 = +-1000, 4 = +-2000, 0xC = +-4000 dps; sensitivity 4.375, 8.75, 17.5,
  35, 70, 140 mdps/LSB.
* ``CTRL8`` (0x17) ``FS_XL`` bits 1:0: 0 = +-2, 1 = +-4, 2 = +-8 g;
  sensitivity 0.061, 0.122, 0.244 mg/LSB.
* ``OUT_TEMP`` (0x20, int16 little-endian): 256 LSB/degC, 0 LSB at 25 degC.
* ``OUTX_L_G`` (0x22): gyroscope X, Y, Z. The accelerometer output registers
  start with Z: ``OUTZ_L_A`` 0x28, ``OUTY_L_A`` 0x2A, ``OUTX_L_A`` 0x2C.
* ``TIMESTAMP0..3`` (0x40-0x43): 32-bit counter, 21.75 us per LSB nominal;
  ``INTERNAL_FREQ`` (0x4F) ``FREQ_FINE`` is the signed deviation of the
  actual ODR and timestamp rate from the typical one in steps of 0.13 %.
* ``FUNCTIONS_ENABLE`` (0x50): ``TIMESTAMP_EN`` bit 6.
* FIFO: ``FIFO_CTRL1`` (0x07) watermark; ``FIFO_CTRL3`` (0x09) ``BDR_XL``
  bits 3:0 and ``BDR_GY`` bits 7:4 (same codes as the ODRs);
  ``FIFO_CTRL4`` (0x0A) ``FIFO_MODE`` bits 2:0 (0 bypass, 1 FIFO,
  6 continuous), ``ODR_T_BATCH`` bits 5:4, ``DEC_TS_BATCH`` bits 7:6
  (1 = a timestamp word every batch event). ``FIFO_STATUS1/2``
  (0x1B/0x1C): ``DIFF_FIFO`` (9 bits: words stored), ``FIFO_OVR_LATCHED``
  bit 3, ``FIFO_FULL_IA`` bit 5, ``FIFO_OVR_IA`` bit 6, ``FIFO_WTM_IA`` bit 7.
  Each FIFO word is 7 bytes from ``FIFO_DATA_OUT_TAG`` (0x78): the tag byte
  (``TAG_SENSOR`` bits 7:3, ``TAG_CNT`` bits 2:1) and six data bytes at
  0x79-0x7E. Tags: 0x01 gyroscope, 0x02 accelerometer, 0x03 temperature,
  0x04 timestamp, 0x05 configuration change. A burst read from 0x78 wraps
  back to 0x78 after 0x7E, so one read returns many words (as ST's own
  firmware reads them).

The accelerometer FIFO words carry the axes in the order of the output
registers (Z, Y, X); :data:`ACCEL_AXIS_ORDER` holds that order in one place.

:class:`Ism330bx` batches gyroscope and accelerometer at the same rate with a
timestamp per batch event in continuous mode, and drains the FIFO with one
length read plus one burst read per call to :meth:`Ism330bx.read_fifo`.
Samples are stamped from the chip's own timestamp mapped to host time
(lowest observed read latency), so a read burst keeps the true 1/ODR spacing.
An overrun (the FIFO filled before it was read) is counted and recovered by
emptying the FIFO (bypass, then continuous again); the lost span shows as a
timestamp gap.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from shape_sensing.drivers.errors import DriverConfigError, DriverError, ProtocolError
from shape_sensing.geometry import FloatArray

__all__ = [
    "ACCEL_AXIS_ORDER",
    "ACCEL_FS",
    "FIFO_GYRO_ORDERS",
    "GYRO_FS",
    "ISM330BX_ADDRESSES",
    "ISM330BX_ID",
    "ODR_CODES",
    "BiasEstimate",
    "FifoRead",
    "GyroOrderCheck",
    "ImuFifoSample",
    "Ism330bx",
    "Ism330bxConfig",
    "Reg",
    "Tag",
    "decode_fifo",
]

_log = logging.getLogger(__name__)

ISM330BX_ADDRESSES = (0x6A, 0x6B)
ISM330BX_ID = 0x71
GRAVITY = 9.80665
TIMESTAMP_LSB_S = 21.75e-6  # nominal, ST reference driver: lsb * 21750 ns
FREQ_FINE_STEP = 0.0013  # INTERNAL_FREQ step: 0.13 % of the typical ODR and timestamp rate
TEMP_SENSITIVITY = 256.0  # LSB/degC
TEMP_OFFSET_C = 25.0  # degC at 0 LSB
FIFO_WORD = 7
ACCEL_AXIS_ORDER = (2, 1, 0)  # FIFO/register words hold Z, Y, X: word k is axis ACCEL_AXIS_ORDER[k]
FIFO_GYRO_ORDERS = {"xyz": (0, 1, 2), "zyx": (2, 1, 0)}  # gyroscope FIFO word k is axis ORDER[k]


class Reg:
    """Register addresses (main page)."""

    FUNC_CFG_ACCESS = 0x01
    FIFO_CTRL1 = 0x07
    FIFO_CTRL2 = 0x08
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
    STATUS_REG = 0x1E
    OUT_TEMP_L = 0x20
    OUTX_L_G = 0x22
    OUTZ_L_A = 0x28
    TIMESTAMP0 = 0x40
    INTERNAL_FREQ = 0x4F
    FUNCTIONS_ENABLE = 0x50
    FIFO_DATA_OUT_TAG = 0x78


class Tag:
    """FIFO ``TAG_SENSOR`` values."""

    EMPTY = 0x00
    GYRO = 0x01
    ACCEL = 0x02
    TEMPERATURE = 0x03
    TIMESTAMP = 0x04
    CFG_CHANGE = 0x05


CTRL3_SW_RESET = 0x01
CTRL3_IF_INC = 0x04
CTRL3_BDU = 0x40
CTRL3_BOOT = 0x80
TIMESTAMP_EN = 0x40
FIFO_MODE_BYPASS = 0
FIFO_MODE_CONTINUOUS = 6
STATUS2_OVR_LATCHED = 0x08
STATUS2_FULL = 0x20
STATUS2_OVR = 0x40
STATUS2_WTM = 0x80

ODR_CODES: dict[float, int] = {
    7.5: 2, 15.0: 3, 30.0: 4, 60.0: 5, 120.0: 6, 240.0: 7, 480.0: 8, 960.0: 9, 1920.0: 10, 3840.0: 11,
}  # fmt: skip
# full scale -> (register code, sensitivity in SI units per LSB)
GYRO_FS: dict[int, tuple[int, float]] = {
    125: (0x0, 4.375e-3 * math.pi / 180.0),
    250: (0x1, 8.75e-3 * math.pi / 180.0),
    500: (0x2, 17.50e-3 * math.pi / 180.0),
    1000: (0x3, 35.0e-3 * math.pi / 180.0),
    2000: (0x4, 70.0e-3 * math.pi / 180.0),
    4000: (0xC, 140.0e-3 * math.pi / 180.0),
}
ACCEL_FS: dict[int, tuple[int, float]] = {
    2: (0x0, 0.061e-3 * GRAVITY),
    4: (0x1, 0.122e-3 * GRAVITY),
    8: (0x2, 0.244e-3 * GRAVITY),
}


class I2cBus(Protocol):
    """The part of ``smbus2.SMBus`` the driver uses."""

    def read_byte_data(self, i2c_addr: int, register: int, force: bool | None = None) -> int: ...

    def write_byte_data(self, i2c_addr: int, register: int, value: int, force: bool | None = None) -> None: ...

    def i2c_rdwr(self, *msgs: Any) -> None: ...


@dataclass(frozen=True)
class Ism330bxConfig:
    """Output data rate, full scales and bias estimation of one ISM330BX.

    Attributes:
        odr: gyroscope and accelerometer output data rate and FIFO batch rate (Hz), one of :data:`ODR_CODES`.
        gyro_fs: gyroscope full scale (dps), one of :data:`GYRO_FS`.
        accel_fs: accelerometer full scale (g), one of :data:`ACCEL_FS`.
        bias_duration: seconds of stationary data averaged for the gyroscope bias (0: no bias estimate).
        stationary_gyro_std: per-axis gyroscope standard deviation (rad/s) above which the start is not still.
        stationary_accel_tol: tolerance (m/s^2) on | |a| - g | during the bias window.
        fifo_gyro_order: order of the gyroscope axes in its FIFO words, ``"xyz"`` (default) or ``"zyx"``.
            The datasheet's FIFO_DATA_OUT_TAG footnotes: gyroscope X, Y, Z; accelerometer Z, Y, X. ST's
            LSM6DSV16BX FIFO example was corrected to that in 2026 (STMems_Standard_C_drivers issue #178, commit
            02d3220: "Only accelerometer data should be reversed"); its ISM330BX FIFO example still reads the
            gyroscope as Z, Y, X, the pattern fixed in the LSM6DSV16BX one. :meth:`Ism330bx.check_fifo_gyro_order`
            tells a chip's order under motion.
    """

    odr: float = 120.0
    gyro_fs: int = 500
    accel_fs: int = 4
    bias_duration: float = 2.0
    stationary_gyro_std: float = 0.01
    stationary_accel_tol: float = 0.5
    fifo_gyro_order: str = "xyz"

    def __post_init__(self) -> None:
        if self.fifo_gyro_order not in FIFO_GYRO_ORDERS:
            raise DriverConfigError(
                f"ISM330BX fifo_gyro_order {self.fifo_gyro_order!r} invalid: expected one of {list(FIFO_GYRO_ORDERS)}"
            )
        if self.odr not in ODR_CODES:
            raise DriverConfigError(f"ISM330BX odr {self.odr!r} invalid: expected one of {sorted(ODR_CODES)} Hz")
        if self.gyro_fs not in GYRO_FS:
            raise DriverConfigError(f"ISM330BX gyro_fs {self.gyro_fs!r} invalid: expected one of {sorted(GYRO_FS)} dps")
        if self.accel_fs not in ACCEL_FS:
            raise DriverConfigError(
                f"ISM330BX accel_fs {self.accel_fs!r} invalid: expected one of {sorted(ACCEL_FS)} g"
            )
        if self.bias_duration < 0:
            raise DriverConfigError(f"ISM330BX bias_duration {self.bias_duration!r} invalid: expected >= 0 s")


@dataclass
class ImuFifoSample:
    """One gyroscope + accelerometer pair from the FIFO."""

    stamp_ns: int  # host time
    chip_ticks: int  # unwrapped chip timestamp (LSB)
    angular_velocity: FloatArray  # rad/s, bias removed once the bias is known
    linear_acceleration: FloatArray  # m/s^2


@dataclass
class FifoRead:
    """What one :meth:`Ism330bx.read_fifo` call found."""

    samples: list[ImuFifoSample] = field(default_factory=list)
    words: int = 0
    overrun: bool = False
    bad_words: int = 0
    bytes_read: int = 0


@dataclass
class BiasEstimate:
    """Gyroscope bias from a stationary start."""

    bias: FloatArray  # rad/s
    gyro_std: FloatArray  # rad/s, per axis, over the window
    accel_std: FloatArray  # m/s^2, per axis
    samples: int
    restarts: int  # windows discarded because the sensor moved


@dataclass(frozen=True)
class GyroOrderCheck:
    """Result of :meth:`Ism330bx.check_fifo_gyro_order`: the order found and the mean error of each hypothesis."""

    order: str  # "xyz", "zyx" or "undecided"
    readings: int  # register readings with enough motion to tell
    mean_error_xyz: float  # rad/s, |FIFO word read as X, Y, Z - output registers|
    mean_error_zyx: float  # rad/s, |FIFO word read as Z, Y, X - output registers|


def decode_fifo(
    raw: bytes, gyro_lsb: float, accel_lsb: float, gyro_order: str = "xyz"
) -> tuple[list[tuple[int | None, FloatArray, FloatArray]], int, int]:
    """Decode FIFO words into ``(timestamp ticks or None, gyro, accel)`` pairs.

    A gyroscope and an accelerometer word of the same time slot (same
    ``TAG_CNT``) make a pair; the latest timestamp word stamps the slot that
    follows it. Returns ``(pairs, bad_words, timestamp_words)``; a word with
    an unknown tag or a slot missing one of the two sensors counts as bad.
    """
    g_axes = list(FIFO_GYRO_ORDERS[gyro_order])
    if len(raw) % FIFO_WORD:
        raise ProtocolError(f"FIFO data of {len(raw)} bytes is not a whole number of {FIFO_WORD}-byte words")
    words = np.frombuffer(raw, np.uint8).reshape(-1, FIFO_WORD)
    tags = words[:, 0] >> 3
    cnts = (words[:, 0] >> 1) & 0x3
    vals = words[:, 1:].copy().view("<i2").astype(float)  # (n, 3)
    pairs: list[tuple[int | None, FloatArray, FloatArray]] = []
    bad = 0
    ts_words = 0
    ts: int | None = None
    slot_cnt: int | None = None
    gyro: FloatArray | None = None
    accel: FloatArray | None = None

    def flush() -> None:
        nonlocal gyro, accel, bad
        if gyro is not None and accel is not None:
            pairs.append((ts, gyro, accel))
        elif gyro is not None or accel is not None:
            bad += 1
        gyro = accel = None

    for i in range(len(words)):
        tag, cnt = int(tags[i]), int(cnts[i])
        if tag == Tag.TIMESTAMP:
            flush()
            ts = int.from_bytes(bytes(words[i, 1:5]), "little")
            ts_words += 1
            slot_cnt = cnt
            continue
        if tag not in (Tag.GYRO, Tag.ACCEL):
            if tag not in (Tag.TEMPERATURE, Tag.CFG_CHANGE, Tag.EMPTY):
                bad += 1
            continue
        if slot_cnt is not None and cnt != slot_cnt:
            flush()
            ts = None  # a slot without its own timestamp word (decimated timestamps): stamped by the caller
        slot_cnt = cnt
        if tag == Tag.GYRO:
            if gyro is not None:
                flush()
            g = np.empty(3)
            g[g_axes] = vals[i]
            gyro = g * gyro_lsb
        else:
            if accel is not None:
                flush()
            a = np.empty(3)
            a[list(ACCEL_AXIS_ORDER)] = vals[i]
            accel = a * accel_lsb
    flush()
    return pairs, bad, ts_words


class Ism330bx:
    """One ISM330BX.

    Args:
        bus: ``smbus2.SMBus``-like (byte data calls and ``i2c_rdwr``).
        address: 0x6A or 0x6B.
        config: rates and full scales.
        clock: host clock in ns (default ``time.monotonic_ns``); inject the simulated bus clock in simulation.
        sleep: ``sleep(seconds)`` (default ``time.sleep``).
        i2c_msg: the ``smbus2.i2c_msg`` class (injected for tests; default imported from smbus2).

    Bus errors (``OSError``, ``TimeoutError``) propagate; the ring driver counts them.
    """

    def __init__(
        self,
        bus: I2cBus,
        address: int = 0x6A,
        config: Ism330bxConfig | None = None,
        *,
        clock: Callable[[], int] = time.monotonic_ns,
        sleep: Callable[[float], None] = time.sleep,
        i2c_msg: Any = None,
    ) -> None:
        if address not in ISM330BX_ADDRESSES:
            raise DriverConfigError(f"ISM330BX address {address:#04x} invalid: expected 0x6a or 0x6b")
        if i2c_msg is None:
            from smbus2 import i2c_msg as _msg

            i2c_msg = _msg
        self.bus = bus
        self.address = address
        self.config = config or Ism330bxConfig()
        self.clock = clock
        self.sleep = sleep
        self.i2c_msg = i2c_msg
        self.gyro_lsb = GYRO_FS[self.config.gyro_fs][1]
        self.accel_lsb = ACCEL_FS[self.config.accel_fs][1]
        self.tick_s = TIMESTAMP_LSB_S
        self.bias: BiasEstimate | None = None
        self.overruns = 0
        self.bad_words = 0
        self.samples_read = 0
        self.gaps = 0
        self._offset_ns: int | None = None
        self._last_raw_ts: int | None = None
        self._wraps = 0
        self._last_ticks: int | None = None
        self._bias_buf: list[tuple[FloatArray, FloatArray]] = []
        self._bias_restarts = 0

    # -- low level -------------------------------------------------------------
    def read(self, register: int, n: int) -> bytes:
        """Burst read of ``n`` bytes from ``register`` (one combined transfer)."""
        w = self.i2c_msg.write(self.address, [register])
        r = self.i2c_msg.read(self.address, n)
        self.bus.i2c_rdwr(w, r)
        return bytes(r)

    def write(self, register: int, value: int) -> None:
        """Write one register."""
        self.bus.write_byte_data(self.address, register, value & 0xFF)

    # -- set-up ----------------------------------------------------------------
    def who_am_i(self) -> int:
        """The ``WHO_AM_I`` register."""
        return int(self.bus.read_byte_data(self.address, Reg.WHO_AM_I))

    def check_identity(self) -> None:
        """Raise :class:`DriverError` unless ``WHO_AM_I`` reads 0x71."""
        got = self.who_am_i()
        if got != ISM330BX_ID:
            raise DriverError(f"ISM330BX at {self.address:#04x}: WHO_AM_I {got:#04x}, expected {ISM330BX_ID:#04x}")

    def reset_steps(self, timeout: float = 0.05) -> Generator[float, None, None]:
        """Software reset (``CTRL3.SW_RESET``) as steps: write it, then yield until the bit clears."""
        self.write(Reg.CTRL3, CTRL3_SW_RESET | CTRL3_IF_INC)
        deadline = self.clock() + int(timeout * 1e9)
        while True:
            yield 0.0001
            if not self.bus.read_byte_data(self.address, Reg.CTRL3) & CTRL3_SW_RESET:
                return
            if self.clock() > deadline:
                raise DriverError(f"ISM330BX at {self.address:#04x}: software reset did not complete in {timeout} s")

    def reset(self, timeout: float = 0.05) -> None:
        """Software reset, waiting (with ``sleep``) until the bit clears."""
        for wait in self.reset_steps(timeout):
            self.sleep(wait)

    def configure(self) -> None:
        """BDU and auto-increment, full scales, timestamp, FIFO batching in continuous mode, then the ODRs."""
        c = self.config
        odr = ODR_CODES[c.odr]
        self.write(Reg.CTRL3, CTRL3_BDU | CTRL3_IF_INC)
        self.write(Reg.CTRL6, GYRO_FS[c.gyro_fs][0])
        self.write(Reg.CTRL8, ACCEL_FS[c.accel_fs][0])
        self.write(Reg.FUNCTIONS_ENABLE, TIMESTAMP_EN)
        self.write(Reg.FIFO_CTRL3, (odr << 4) | odr)
        self.write(Reg.FIFO_CTRL4, (1 << 6) | FIFO_MODE_CONTINUOUS)  # a timestamp every batch event
        self.write(Reg.CTRL1, odr)  # high-performance mode (OP_MODE_XL = 0)
        self.write(Reg.CTRL2, odr)
        ff = int.from_bytes(self.read(Reg.INTERNAL_FREQ, 1), "little", signed=True)
        self.tick_s = TIMESTAMP_LSB_S / (1.0 + FREQ_FINE_STEP * ff)
        self._offset_ns = None
        self._last_raw_ts = None
        self._last_ticks = None

    def start(self) -> None:
        """Identity check, reset, configuration."""
        self.check_identity()
        self.reset()
        self.configure()

    def verify(self) -> bool:
        """Whether the configuration is still in place (a reset or brown-out clears ``FIFO_CTRL4``)."""
        return (self.bus.read_byte_data(self.address, Reg.FIFO_CTRL4) & 0x7) == FIFO_MODE_CONTINUOUS

    def temperature(self) -> float:
        """Die temperature in degC (``OUT_TEMP``)."""
        raw = int.from_bytes(self.read(Reg.OUT_TEMP_L, 2), "little", signed=True)
        return raw / TEMP_SENSITIVITY + TEMP_OFFSET_C

    # -- self-check ----------------------------------------------------------------
    def check_fifo_gyro_order(self, duration_s: float = 2.0, min_difference: float = 0.2) -> GyroOrderCheck:
        """Which order the chip stores the gyroscope axes in its FIFO: run while the sensor is turned by hand.

        Reads the FIFO (whose gyroscope words are decoded here in the order they come, word 0 first) and the
        gyroscope output registers ``OUTX_L_G``..``OUTZ_H_G`` (X, Y, Z: not in doubt), every two sample periods
        for ``duration_s``, and compares each register reading with the FIFO's latest gyroscope word read as X, Y,
        Z and as Z, Y, X. Only readings where the X and Z rates differ by ``min_difference`` rad/s count (a still
        sensor cannot tell). FIFO samples read here are consumed. Run after :meth:`start`. The verdict is ``"xyz"``,
        ``"zyx"`` or ``"undecided"`` (too little motion). From a shell: ``python -m shape_sensing.drivers.ism330bx``.
        """
        period = 1.0 / self.config.odr
        end = self.clock() + int(duration_s * 1e9)
        err = {"xyz": 0.0, "zyx": 0.0}
        used = 0
        while self.clock() < end:
            self.sleep(2.0 * period)
            st = self.read(Reg.FIFO_STATUS1, 2)
            n = min(st[0] | ((st[1] & 0x01) << 8), 1170)
            raw = self.read(Reg.FIFO_DATA_OUT_TAG, n * FIFO_WORD) if n else b""
            reg = np.frombuffer(self.read(Reg.OUTX_L_G, 6), "<i2").astype(float) * self.gyro_lsb
            if not raw:
                continue
            pairs, _, _ = decode_fifo(raw, self.gyro_lsb, self.accel_lsb, "xyz")  # words as they come
            if not pairs:
                continue
            words = pairs[-1][1]
            if abs(reg[0] - reg[2]) < min_difference:
                continue
            used += 1
            err["xyz"] += float(np.linalg.norm(words - reg))
            err["zyx"] += float(np.linalg.norm(words[::-1] - reg))
        if used == 0:
            verdict = "undecided"
        else:
            verdict = min(err, key=lambda k: err[k])
            if err[verdict] > 0.5 * max(err.values()):  # neither order explains the registers clearly
                verdict = "undecided"
        return GyroOrderCheck(verdict, used, err["xyz"] / max(used, 1), err["zyx"] / max(used, 1))

    # -- streaming ---------------------------------------------------------------
    def flush_fifo(self) -> None:
        """Empty the FIFO: bypass mode, then continuous again (clears the overrun flags)."""
        self.write(Reg.FIFO_CTRL4, (1 << 6) | FIFO_MODE_BYPASS)
        self.write(Reg.FIFO_CTRL4, (1 << 6) | FIFO_MODE_CONTINUOUS)

    def read_fifo(self, max_words: int = 1170) -> FifoRead:
        """Read all FIFO words (status, then one burst), decode, stamp and (once known) remove the gyro bias.

        ``max_words`` bounds one burst (1170 words = 8190 bytes, under the 8192-byte i2c-dev message limit).
        """
        out = FifoRead()
        st = self.read(Reg.FIFO_STATUS1, 2)
        level = st[0] | ((st[1] & 0x01) << 8)
        out.overrun = bool(st[1] & (STATUS2_OVR | STATUS2_OVR_LATCHED))
        n = min(level, max_words)
        if n:
            read_ns = self.clock()
            raw = self.read(Reg.FIFO_DATA_OUT_TAG, n * FIFO_WORD)
            out.bytes_read = len(raw)
            out.words = n
            pairs, bad, _ = decode_fifo(raw, self.gyro_lsb, self.accel_lsb, self.config.fifo_gyro_order)
            out.bad_words = bad
            self.bad_words += bad
            out.samples = self._stamp(pairs, read_ns)
        if out.overrun:
            self.overruns += 1
            _log.warning("ISM330BX at %#04x: FIFO overrun (samples lost); emptying the FIFO", self.address)
            self.flush_fifo()  # the span lost shows as a timestamp gap at the next read
        self.samples_read += len(out.samples)
        self._bias_feed(out.samples)
        if self.bias is not None:
            for s in out.samples:
                s.angular_velocity = s.angular_velocity - self.bias.bias
        return out

    def _stamp(self, pairs: list[tuple[int | None, FloatArray, FloatArray]], read_ns: int) -> list[ImuFifoSample]:
        period_ticks = 1.0 / (self.config.odr * self.tick_s)
        out: list[ImuFifoSample] = []
        ticks: list[int] = []
        prev = self._last_ticks
        for raw_ts, g, a in pairs:
            if raw_ts is None:
                t = round((prev if prev is not None else 0) + period_ticks)
            else:
                if self._last_raw_ts is not None and raw_ts < self._last_raw_ts:
                    self._wraps += 1
                self._last_raw_ts = raw_ts
                t = raw_ts + (self._wraps << 32)
            if prev is not None and t - prev > 1.5 * period_ticks:
                self.gaps += 1
            prev = t
            ticks.append(t)
            out.append(ImuFifoSample(0, t, g, a))
        if not out:
            return out
        self._last_ticks = prev
        # host = chip + offset, offset = lowest (read time - newest sample time) seen: least latency
        newest_ns = int(ticks[-1] * self.tick_s * 1e9)
        cand = read_ns - newest_ns
        if self._offset_ns is None or cand < self._offset_ns:
            self._offset_ns = cand
        for s in out:
            s.stamp_ns = int(s.chip_ticks * self.tick_s * 1e9) + self._offset_ns
        return out

    # -- gyroscope bias ---------------------------------------------------------
    def _bias_feed(self, samples: list[ImuFifoSample]) -> None:
        if self.bias is not None or self.config.bias_duration <= 0:
            return
        c = self.config
        for s in samples:
            g, a = s.angular_velocity, s.linear_acceleration
            if abs(float(np.linalg.norm(a)) - GRAVITY) > c.stationary_accel_tol:
                self._bias_restart()
                continue
            self._bias_buf.append((g, a))
            if len(self._bias_buf) >= 8:
                gs = np.array([x[0] for x in self._bias_buf])
                if float(gs.std(axis=0).max()) > c.stationary_gyro_std:
                    self._bias_restart()
                    continue
            if len(self._bias_buf) >= max(2, round(c.bias_duration * c.odr)):
                gs = np.array([x[0] for x in self._bias_buf])
                acs = np.array([x[1] for x in self._bias_buf])
                self.bias = BiasEstimate(gs.mean(axis=0), gs.std(axis=0), acs.std(axis=0), len(gs), self._bias_restarts)
                self._bias_buf = []
                return

    def _bias_restart(self) -> None:
        if self._bias_buf:
            self._bias_restarts += 1
        self._bias_buf = []

    def reset_bias(self) -> None:
        """Forget the bias (estimate again from the next stationary window)."""
        self.bias = None
        self._bias_buf = []
        self._bias_restarts = 0


def main(argv: list[str] | None = None, *, bus: Any = None, clock: Callable[[], int] | None = None,
         sleep: Callable[[float], None] | None = None) -> int:  # fmt: skip
    """``python -m shape_sensing.drivers.ism330bx``: tell a chip's FIFO gyroscope order (turn the sensor meanwhile).

    Prints the verdict and the mean error of each order; exits 0 with a verdict, 2 when undecided (too little
    motion), 1 on a bus or configuration error. ``bus``/``clock``/``sleep`` are injected by tests.
    """
    import argparse

    ap = argparse.ArgumentParser(
        prog="python -m shape_sensing.drivers.ism330bx",
        description="Check the ISM330BX's gyroscope word order in its FIFO against its output registers. "
        "Turn the sensor by hand (not only about its Y axis) while it runs.",
    )
    ap.add_argument("--bus", type=int, default=1, help="I2C adapter number (/dev/i2c-N)")
    ap.add_argument("--address", type=lambda s: int(s, 0), default=0x6A, help="0x6a or 0x6b")
    ap.add_argument("--mux", type=lambda s: int(s, 0), default=None, help="TCA9548A address in front of the IMU")
    ap.add_argument("--channel", type=int, default=None, help="TCA9548A channel 0-7 of the IMU")
    ap.add_argument("--duration", type=float, default=5.0, help="seconds of motion to compare")
    args = ap.parse_args(argv)
    if (args.mux is None) != (args.channel is None) or (args.channel is not None and not 0 <= args.channel <= 7):
        print("error: --mux and --channel go together, channel 0-7", flush=True)
        return 1
    try:
        if bus is None:
            import smbus2

            bus = smbus2.SMBus(args.bus)
        if args.mux is not None:
            bus.write_byte(args.mux, 1 << args.channel)
        cfg = Ism330bxConfig(bias_duration=0.0)
        imu = Ism330bx(bus, args.address, cfg, clock=clock or time.monotonic_ns, sleep=sleep or time.sleep)
        imu.start()
        print(f"ISM330BX at {args.address:#04x}: turn the sensor for {args.duration:g} s ...", flush=True)
        res = imu.check_fifo_gyro_order(duration_s=args.duration)
    except (OSError, DriverError) as exc:
        print(f"error: {exc}", flush=True)
        return 1
    print(
        f"FIFO gyroscope order: {res.order} ({res.readings} readings with motion; mean error as xyz "
        f"{res.mean_error_xyz:.4f} rad/s, as zyx {res.mean_error_zyx:.4f} rad/s)"
    )
    if res.order == "undecided":
        print("not enough rotation about X or Z: turn the sensor faster and run again")
        return 2
    print(f"set imu_fifo_gyro_order: {res.order}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
