"""Register-level BNO055 simulator (page 0), fed with a motion state.

What it models (from BST-BNO055-DS000):

* a 128-byte register file with the power-on values that matter (CHIP_ID
  0xA0, ACC_ID 0xFB, MAG_ID 0x32, GYR_ID 0x0F, UNIT_SEL 0x80, OPR_MODE
  CONFIG, AXIS_MAP_CONFIG 0x24, AXIS_MAP_SIGN 0x00);
* a register pointer set by the first written byte, auto-incremented on
  reads and writes;
* CONFIGMODE: outputs read zero; only OPR_MODE (and SYS_TRIGGER, PAGE_ID)
  may be written outside CONFIGMODE, other writes are ignored and counted;
* mode switching times (19 ms into CONFIGMODE, 7 ms out of it): registers
  touched before the switch completes count as timing violations;
* RST_SYS in SYS_TRIGGER: power-on reset (CONFIGMODE, offsets cleared,
  calibration levels 0), busy for 650 ms;
* data in the units UNIT_SEL selects: quaternion 2^14 LSB, accel/linear/
  gravity 100 LSB per m/s^2 (or 1 mg), gyro 16 LSB/dps (or 900 LSB/(rad/s)),
  Euler 16 LSB/deg (or 900 LSB/rad), mag 16 LSB/uT, temperature 1 degC;
* axis remap (AXIS_MAP_CONFIG 0x41, AXIS_MAP_SIGN 0x42; section 3.4) applied
  to every output, vectors and the fused orientation alike: the quaternion and
  Euler angles are those of the remapped sensor frame, so the gravity vector
  read back agrees with the quaternion read back. The datasheet's placements
  are rotations; a map that mirrors the frame (determinant -1) is remapped in
  the vectors only, since no quaternion describes a mirrored frame;
* register page 1 (PAGE_ID 0x07 selects it): ACC_Config 0x08 (reset 0x0D:
  4 G), MAG_Config 0x09 (reset 0x6D: 20 Hz), GYR_Config_0 0x0A (reset 0x38:
  2000 dps), GYR_Config_1 0x0B (reset 0x00). Writes are stored and read back,
  and like page 0's configuration they are taken only in CONFIGMODE (ignored
  and counted otherwise). In the non-fusion modes the accelerometer's G range
  and the gyroscope's range saturate the ACC_DATA and GYR_DATA outputs; in
  the fusion modes the fusion sets the sensors itself (section 3.5: 4 G,
  2000 dps), whatever page 1 holds.

Not modelled (stated): the fusion itself (the motion is given), sensor
noise beyond the quantisation, the effect of offsets on the data, bandwidth
and power-mode bits, the magnetometer's output data rate (stored, the output
is not held between its samples), and page 1's other registers (interrupt
settings: stored only). The calibration levels are set by
:meth:`SimBNO055.calibrate` and become full when a profile equal to the
learned one is written back.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

__all__ = ["SimBNO055"]


class Reg:
    """Page-0 registers used here (BST-BNO055-DS000, table 4-2 "Register Map Page 0")."""

    CHIP_ID = 0x00  # reads 0xA0 (section 4.3.1)
    PAGE_ID = 0x07
    ACC_DATA = 0x08  # ACC_DATA_X_LSB; MAG 0x0E, GYR 0x14 follow, 6 bytes each
    MAG_DATA = 0x0E
    GYR_DATA = 0x14
    EUL_DATA = 0x1A  # EUL_Heading_LSB, then roll, pitch
    QUA_DATA = 0x20  # QUA_Data_w_LSB, then x, y, z
    LIA_DATA = 0x28
    GRV_DATA = 0x2E
    TEMP = 0x34
    CALIB_STAT = 0x35
    SYS_STATUS = 0x39
    UNIT_SEL = 0x3B
    OPR_MODE = 0x3D
    SYS_TRIGGER = 0x3F  # bit 5 RST_SYS
    AXIS_MAP_CONFIG = 0x41
    AXIS_MAP_SIGN = 0x42
    CALIB_DATA = 0x55  # ACC_OFFSET_X_LSB .. MAG_RADIUS_MSB (0x6A): 22 bytes


class Mode:
    """OPR_MODE values (datasheet table 3-5 "Operating modes overview")."""

    CONFIG = 0x00
    IMU = 0x08  # 0x08-0x0C are the fusion modes (IMU, COMPASS, M4G, NDOF_FMC_OFF, NDOF)


CALIBRATION_LENGTH = 0x6A - 0x55 + 1  # section 3.6.4: offsets and radii, 0x55-0x6A

_ANY_MODE_WRITABLE = {Reg.OPR_MODE, Reg.SYS_TRIGGER, Reg.PAGE_ID, 0x3F}
_GRAVITY = 9.80665
_POR = {
    Reg.CHIP_ID: 0xA0,
    0x01: 0xFB,
    0x02: 0x32,
    0x03: 0x0F,
    0x04: 0x11,
    0x05: 0x03,
    Reg.UNIT_SEL: 0x80,
    Reg.OPR_MODE: 0x00,
    Reg.AXIS_MAP_CONFIG: 0x24,
    Reg.AXIS_MAP_SIGN: 0x00,
    Reg.SYS_STATUS: 0x00,
}


# Page 1 (datasheet table 4-3): the sensor configuration registers and their reset values.
ACC_CONFIG, MAG_CONFIG, GYR_CONFIG_0, GYR_CONFIG_1 = 0x08, 0x09, 0x0A, 0x0B
_POR_PAGE1 = {Reg.PAGE_ID: 0x01, ACC_CONFIG: 0x0D, MAG_CONFIG: 0x6D, GYR_CONFIG_0: 0x38, GYR_CONFIG_1: 0x00}
ACC_RANGE_G = (2.0, 4.0, 8.0, 16.0)  # ACC_Config bits 1:0
GYR_RANGE_DPS = (2000.0, 1000.0, 500.0, 250.0, 125.0, 125.0, 125.0, 125.0)  # GYR_Config_0 bits 2:0 (101-111 reserved)
_FUSION_ACC_G, _FUSION_GYR_DPS = 4.0, 2000.0


def _i16(v: float) -> int:
    return max(-32768, min(32767, round(v)))


def _int16_bytes(v: np.ndarray) -> bytes:
    """Round, saturate and pack as little-endian int16 (the chip's data registers)."""
    return np.clip(np.rint(v), -32768, 32767).astype("<i2").tobytes()


class SimBNO055:
    """A simulated BNO055.

    Args:
        address: 0x28 or 0x29.
        name: label for logs.
        learned: the profile the chip would learn when calibrated (random if
            ``None``, from ``seed``).
        seed: seed for the learned profile.
    """

    def __init__(
        self, address: int = 0x28, name: str = "", *, learned: bytes | Any = None, seed: int = 0
    ) -> None:
        if address not in (0x28, 0x29):
            raise ValueError(f"BNO055 address {address:#04x} invalid: expected 0x28 or 0x29")
        self.address = address
        self.name = name or f"bno055@{address:#04x}"
        rng = np.random.default_rng(seed)
        if learned is None:
            # accel offset x/y/z, mag offset x/y/z, gyro offset x/y/z, accel radius, mag radius: int16 LE
            # (section 3.6.4); the accel radius of a 4 G range is 1000 LSB.
            values = [
                *(int(x) for x in rng.integers(-60, 60, 3)),
                *(int(x) for x in rng.integers(-400, 400, 3)),
                *(int(x) for x in rng.integers(-5, 5, 3)),
                1000,
                int(rng.integers(500, 900)),
            ]
            learned = struct.pack("<11h", *values)
        elif not isinstance(learned, (bytes, bytearray)):
            learned = learned.to_bytes()  # any profile object that serialises to the 22 register bytes
        if len(learned) != CALIBRATION_LENGTH:
            raise ValueError(f"learned profile of {len(learned)} bytes: expected {CALIBRATION_LENGTH}")
        self.learned = bytes(learned)
        self.regs = bytearray(0x80)
        self.page1 = bytearray(0x80)
        self.pointer = 0
        self.busy_until_ns = 0
        self.timing_violations = 0
        self._violation_ns: int | None = None
        self.ignored_writes = 0
        self.resets = 0
        self.dead = False
        self.levels = (0, 0, 0, 0)
        self.orientation = np.array([0.0, 0.0, 0.0, 1.0])
        self.angular_velocity = np.zeros(3)
        self.linear_acceleration = np.array([0.0, 0.0, _GRAVITY])
        self.magnetic_field = np.array([20e-6, 0.0, -40e-6])
        self.temperature = 25.0
        self._dirty = True
        self.power_on_reset()

    # -- harness -------------------------------------------------------------------
    def power_on_reset(self, now_ns: int = 0) -> None:
        """Registers to power-on values, CONFIGMODE, calibration lost."""
        self.regs[:] = bytes(0x80)
        for reg, value in _POR.items():
            self.regs[int(reg)] = value
        self.page1[:] = bytes(0x80)
        for reg, value in _POR_PAGE1.items():
            self.page1[int(reg)] = value
        self.levels = (0, 0, 0, 0)
        self.busy_until_ns = now_ns
        self._dirty = True

    def set_motion(
        self,
        orientation: Sequence[float] | np.ndarray,
        angular_velocity: Sequence[float] | np.ndarray | None = None,
        linear_acceleration: Sequence[float] | np.ndarray | None = None,
        magnetic_field: Sequence[float] | np.ndarray | None = None,
        temperature: float | None = None,
    ) -> None:
        """The physical state the outputs report: ``[x, y, z, w]``, rad/s, m/s^2 (gravity in), T, degC."""
        q = np.asarray(orientation, dtype=float)
        self.orientation = q / np.linalg.norm(q)
        if angular_velocity is not None:
            self.angular_velocity = np.asarray(angular_velocity, dtype=float)
        if linear_acceleration is not None:
            self.linear_acceleration = np.asarray(linear_acceleration, dtype=float)
        if magnetic_field is not None:
            self.magnetic_field = np.asarray(magnetic_field, dtype=float)
        if temperature is not None:
            self.temperature = float(temperature)
        self._dirty = True

    def calibrate(self, levels: tuple[int, int, int, int] = (3, 3, 3, 3)) -> None:
        """Pretend the user moved the chip until it reached ``levels`` (system, gyro, accel, mag)."""
        self.levels = levels
        if min(levels) == 3:
            self.regs[Reg.CALIB_DATA : Reg.CALIB_DATA + CALIBRATION_LENGTH] = self.learned
        self._dirty = True

    @property
    def mode(self) -> int:
        """OPR_MODE low nibble."""
        return self.regs[Reg.OPR_MODE] & 0x0F

    @property
    def page(self) -> int:
        """The register page selected by PAGE_ID."""
        return self.regs[Reg.PAGE_ID] & 0x01

    def ranges(self) -> tuple[float, float]:
        """Accelerometer range (m/s^2) and gyroscope range (rad/s) the outputs saturate at in this mode."""
        if self.mode >= Mode.IMU:  # fusion: the fusion configures the sensors (datasheet 3.5)
            acc_g, gyr_dps = _FUSION_ACC_G, _FUSION_GYR_DPS
        else:
            acc_g = ACC_RANGE_G[self.page1[ACC_CONFIG] & 0x03]
            gyr_dps = GYR_RANGE_DPS[self.page1[GYR_CONFIG_0] & 0x07]
        return acc_g * _GRAVITY, math.radians(gyr_dps)

    # -- bus side ------------------------------------------------------------------
    def acks(self) -> bool:
        """Whether the chip acknowledges its address."""
        return not self.dead

    def i2c_write(self, data: bytes, now_ns: int) -> None:
        """Bytes after the address byte: register pointer, then values."""
        self._check_timing(now_ns)
        self.pointer = data[0] & 0x7F
        for value in data[1:]:
            self._write_reg(self.pointer, value, now_ns)
            self.pointer = (self.pointer + 1) & 0x7F

    def i2c_read(self, n: int, now_ns: int) -> bytes:
        """Bytes from the register pointer on."""
        self._check_timing(now_ns)
        if self._dirty:
            self._refresh()
        start = self.pointer
        end = start + n
        regs = self.page1 if self.page == 1 else self.regs
        out = bytes(regs[start:end]) if end <= 0x80 else bytes(regs[start:]) + bytes(end - 0x80)
        self.pointer = end & 0x7F
        return out

    # -- internals -----------------------------------------------------------------
    def _check_timing(self, now_ns: int) -> None:
        if now_ns < self.busy_until_ns and now_ns != self._violation_ns:  # once per transaction
            self.timing_violations += 1
            self._violation_ns = now_ns

    def _write_reg(self, reg: int, value: int, now_ns: int) -> None:
        if reg == Reg.PAGE_ID:  # the same register on both pages, writable in any mode
            self.regs[reg] = self.page1[reg] = value & 0x01
            return
        if self.page == 1:
            if self.mode != Mode.CONFIG:
                self.ignored_writes += 1  # page 1 is writable in CONFIGMODE only
                return
            self.page1[reg] = value
            self._dirty = True
            return
        if reg == Reg.SYS_TRIGGER:
            if value & 0x20:
                self.resets += 1
                self.power_on_reset(now_ns)
                self.busy_until_ns = now_ns + 650_000_000
            return
        if reg == Reg.OPR_MODE:
            old, new = self.mode, value & 0x0F
            self.regs[reg] = new
            if old != new:
                switch_ns = 19_000_000 if new == Mode.CONFIG else 7_000_000
                self.busy_until_ns = now_ns + switch_ns
                if old == Mode.CONFIG and new != Mode.CONFIG:
                    self._leave_config()
            self._dirty = True
            return
        if self.mode != Mode.CONFIG and reg not in _ANY_MODE_WRITABLE:
            self.ignored_writes += 1
            return
        if Reg.ACC_DATA <= reg < Reg.CALIB_STAT + 1 or reg == Reg.CHIP_ID:
            self.ignored_writes += 1  # read-only
            return
        if reg == Reg.AXIS_MAP_CONFIG and sorted((value >> k) & 3 for k in (0, 2, 4)) != [0, 1, 2]:
            self.ignored_writes += 1  # datasheet: an invalid map is refused, the previous one stays
            return
        self.regs[reg] = value
        self._dirty = True

    def _leave_config(self) -> None:
        raw = bytes(self.regs[Reg.CALIB_DATA : Reg.CALIB_DATA + CALIBRATION_LENGTH])
        if raw == self.learned:
            self.levels = (3, 3, 3, 3)

    def _remap_matrix(self) -> np.ndarray:
        """``P`` with ``v_remapped = P v`` (AXIS_MAP_CONFIG picks the source axis, AXIS_MAP_SIGN negates)."""
        config, sign = self.regs[Reg.AXIS_MAP_CONFIG], self.regs[Reg.AXIS_MAP_SIGN]
        P = np.zeros((3, 3))
        for i, shift in enumerate((0, 2, 4)):
            P[i, min((config >> shift) & 3, 2)] = -1.0 if sign & (4 >> i) else 1.0
        return P

    def _remap(self, v: np.ndarray) -> np.ndarray:
        """Apply AXIS_MAP_CONFIG/SIGN to rows of 3-vectors (``(..., 3)``)."""
        config, sign = self.regs[Reg.AXIS_MAP_CONFIG], self.regs[Reg.AXIS_MAP_SIGN]
        if config == 0x24 and sign == 0:
            return v
        return v @ self._remap_matrix().T

    def _remapped_orientation(self) -> np.ndarray:
        """``[x, y, z, w]`` of the remapped sensor frame: ``R' = R P^T`` (unchanged for a mirroring map)."""
        P = self._remap_matrix()
        if np.allclose(P, np.eye(3)) or np.linalg.det(P) < 0:
            return self.orientation
        q = Rotation.from_matrix(Rotation.from_quat(self.orientation).as_matrix() @ P.T).as_quat()
        return q if q[3] >= 0 else -q

    def _refresh(self) -> None:
        r = self.regs
        self._dirty = False
        r[Reg.CALIB_STAT] = (self.levels[0] << 6) | (self.levels[1] << 4) | (self.levels[2] << 2) | self.levels[3]
        fusion = self.mode >= Mode.IMU
        r[Reg.SYS_STATUS] = 5 if fusion else (6 if self.mode != Mode.CONFIG else 0)
        if self.mode == Mode.CONFIG:
            r[Reg.ACC_DATA : Reg.CALIB_STAT] = bytes(Reg.CALIB_STAT - Reg.ACC_DATA)
            return
        unit = r[Reg.UNIT_SEL]
        x, y, z, w = (float(c) for c in self._remapped_orientation())
        acc_scale = 1.0 / 9.80665e-3 if unit & 0x01 else 100.0
        gyr_scale = 900.0 if unit & 0x02 else 16.0 * 180.0 / math.pi
        eul_scale = 900.0 if unit & 0x04 else 16.0 * 180.0 / math.pi
        # gravity in the (unremapped) sensor frame: R^T [0, 0, g], R = world_from_sensor
        x0, y0, z0, w0 = (float(c) for c in self.orientation)
        g_s = _GRAVITY * np.array([2 * (x0 * z0 - w0 * y0), 2 * (y0 * z0 + w0 * x0), 1 - 2 * (x0 * x0 + y0 * y0)])
        acc = self.linear_acceleration
        acc_max, gyr_max = self.ranges()
        # ACC 0x08, MAG 0x0E, GYR 0x14 are contiguous; so are LIA 0x28 and GRV 0x2E.
        block1 = np.stack(
            [
                np.clip(acc, -acc_max, acc_max) * acc_scale,
                self.magnetic_field * 16e6,
                np.clip(self.angular_velocity, -gyr_max, gyr_max) * gyr_scale,
            ]
        )
        block2 = np.stack([(acc - g_s) * acc_scale, g_s * acc_scale])
        r[Reg.ACC_DATA : Reg.GYR_DATA + 6] = _int16_bytes(self._remap(block1))
        r[Reg.LIA_DATA : Reg.GRV_DATA + 6] = _int16_bytes(self._remap(block2))
        heading = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))
        roll = math.atan2(2 * (w * x + y * z), 1 - 2 * (x * x + y * y))
        pitch = math.asin(max(-1.0, min(1.0, 2 * (w * y - z * x))))
        struct.pack_into(
            "<3h", r, Reg.EUL_DATA, _i16(heading * eul_scale), _i16(roll * eul_scale), _i16(pitch * eul_scale)
        )
        struct.pack_into("<4h", r, Reg.QUA_DATA, _i16(w * 16384), _i16(x * 16384), _i16(y * 16384), _i16(z * 16384))
        t = self.temperature * 9 / 5 + 32 if unit & 0x10 else self.temperature
        r[Reg.TEMP] = _i16(t / 2 if unit & 0x10 else t) & 0xFF
