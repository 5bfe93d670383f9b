"""ST VL53L5CX multi-zone time-of-flight sensor on an smbus2-like I2C bus (the ST "ULD" sequence, in Python).

This is our own implementation of the sequence of ST's Ultra Lite Driver
(VL53L5CX_ULD_API, ``vl53l5cx_api.c``) over ``smbus2`` combined transfers
with 16-bit register indices: boot with the firmware uploaded to the chip in
three pages, the boot-ROM and MCU handshake polls, the NVM offset and default
crosstalk buffers, the default configuration, the DCI (device configuration
interface) reads and writes, ranging with an explicit output list, data-ready
from the stream counter, and the frame's block headers. What ST ships as
binary data (the 84 kB firmware image, the 972-byte default configuration,
the 776-byte default crosstalk and the 40-byte NVM command) is loaded by
:class:`UldBuffers` from the pinned ``sparkfun-qwiic-vl53l5cx`` package (or a
directory given by the user); docs/hardware/vl53l5cx_ism330bx.md explains the choice.

Every operation that waits on the chip is a *step generator*: it yields the
seconds to wait before its next bus access, so a scheduler can interleave
several sensors (:mod:`shape_sensing.drivers.tof_ring`) and no sensor holds
the bus longer than one transfer (firmware chunks are ``upload_chunk`` bytes).
:func:`run_steps` runs one to the end with ``sleep`` for simple uses.

One ST release throughout: ULD 1.1.2 (``VL53L5CX_API_REVISION "VL53L5CX_1.1.2"``)
-------------------------------------------------------------------------------
The firmware image is the one in ``vl53l5cx_buffers.h`` of ST's ULD 1.1.1 and
1.1.2 (86016 bytes, CRC-32 0xD867A331; the default configuration with
``VL53L5CX_FW_NBTAR_RANGING`` = 2, CRC-32 0xA315E7F7). The pinned PyPI
packages ``sparkfun-qwiic-vl53l5cx`` 2.0.0 (``vl53l5cx_bin/*.bin``) and
``vl53l5cx`` 1.0.1 (``buffers.py``) ship these four buffers byte for byte.
ULD 1.3.x and 2.0.x address their firmware through other DCI indices (for
example pipe control 0xDB80, and the glare filter 0xE108 of 2.0.0), so they
upload other images; none of that is used here, and :meth:`UldBuffers.from_dir` refuses an image of another release.
Every constant below is from ULD 1.1.2 (``vl53l5cx_api.h``, ``vl53l5cx_api.c``):

* page select 0x7FFF; page 0: device id 0x0000 = 0xF0, revision 0x0001 = 0x02
  (``vl53l5cx_is_alive``), I2C address 0x0004 (7-bit), GO2 status 0x0006;
  page 1: 0x0021 firmware-access flag 0x10; firmware pages 0x09, 0x0A, 0x0B
  (0x8000, 0x8000, 0x5000 bytes); page 2: results from 0x0000, UI command
  area 0x2C00-0x2FFF (status 0x2C00, data from 0x2C04, a command ends at
  0x2FFF) (``vl53l5cx_init``, ``VL53L5CX_UI_CMD_*``).
* DCI indices (``VL53L5CX_DCI_*`` of 1.1.2): zone config 0x5450, frequency
  0x5458, integration time 0x545C, FW number of targets 0x5478, ranging mode
  0xAD30, DSS config 0xAD38, target order 0xAE64, sharpener 0xAED8, single
  range 0xCD5C, output config 0xCD60, output enables 0xCD68, output list
  0xCD78, pipe control 0xCF78. (1.1.2 has no glare filter and does not read
  back the range-data content 0x5440 after the start command.)
* Block headers for one target per zone (``VL53L5CX_*_BH`` of 1.1.2; type 4
  bits, size 12 bits, index 16 bits): metadata 0x54B400C0, common
  0x54C00040, ambient 0x54D00104, SPAD count 0x55D00404, targets detected
  0xCF7C0401, signal 0xCFBC0404, sigma 0xD2BC0402, distance 0xD33C0402,
  reflectance 0xD43C0401, status 0xD47C0401, motion 0xCC5008C0. Frame size:
  the enabled blocks plus 20 bytes (``data_read_size += 20`` in
  ``vl53l5cx_start_ranging``); 1.1.2 has no header/footer frame-id check.
  Units: distance /4 mm, sigma /128 mm, signal and ambient /2048 kcps per
  SPAD, silicon temperature int8 at byte 8 of the metadata block.
* Handshakes (``_vl53l5cx_poll_for_answer``): read, wait 10 ms, up to 2 s;
  on every read of 4 or more bytes a status byte 2 >= 0x7F is an MCU error.
  MCU boot after 0x000B = 0x01: poll 0x0006 until it reads 0x00.
* Data ready (``vl53l5cx_check_data_ready``): bytes 0-3 of page 2; a new
  stream count (not 255), byte 1 = 0x05, byte 2 & 0x05, byte 3 & 0x10; the
  stream count is taken there (and again by the frame read).

Two host-side checks come from ST's later releases (1.2 onward) and only add
a diagnosis: when 0x0006 bit 7 is set during the MCU boot, 0x0007 is read and
a non-zero value reported as an MCU error; byte 3 bit 7 of the data-ready word
reports the GO2 error status in byte 2.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import struct
import time
import zlib
from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from shape_sensing.drivers.errors import DriverConfigError, DriverError
from shape_sensing.geometry import FloatArray

__all__ = [
    "BH",
    "DCI",
    "DEFAULT_OUTPUTS",
    "FIRMWARE_CRC32",
    "FIRMWARE_PAGES",
    "FIRMWARE_SIZE",
    "RANGE_CONVENTIONS",
    "ULD_RELEASE",
    "VL53L5CX_DEFAULT_ADDRESS",
    "RangeConventionCheck",
    "TofReading",
    "UldBuffers",
    "Vl53l5cx",
    "Vl53l5cxError",
    "frame_size",
    "parse_frame",
    "range_convention_from_wall",
    "run_steps",
    "swap_words",
    "to_perpendicular",
    "zone_direction_norms",
]

_log = logging.getLogger(__name__)

VL53L5CX_DEFAULT_ADDRESS = 0x29  # 0x52 in ST's 8-bit notation
DEVICE_ID = 0xF0
REVISION_ID = 0x02
FIRMWARE_SIZE = 0x15000
ULD_RELEASE = "1.1.2"  # VL53L5CX_API_REVISION of the sequence and constants below
FIRMWARE_CRC32 = 0xD867A331  # zlib.crc32 of VL53L5CX_FIRMWARE[] in ULD 1.1.1/1.1.2 vl53l5cx_buffers.h
FRAME_TRAILER = 20  # vl53l5cx_start_ranging (1.1.2): data_read_size += 20
FIRMWARE_PAGES = ((0x09, 0x0000, 0x8000), (0x0A, 0x8000, 0x8000), (0x0B, 0x10000, 0x5000))
CONFIGURATION_SIZE = 972
XTALK_BUFFER_SIZE = 776
OFFSET_BUFFER_SIZE = 488
NVM_DATA_SIZE = 492
NVM_CMD_SIZE = 40
TEMPORARY_BUFFER_SIZE = 1452
UI_CMD_STATUS = 0x2C00
UI_CMD_START = 0x2C04
UI_CMD_END = 0x2FFF
PAGE = 0x7FFF
MAX_MESSAGE = 8192  # Linux i2c-dev message limit


class DCI:
    """DCI indices (firmware variables) of the ULD 1.1.2 firmware (``VL53L5CX_DCI_*`` in its vl53l5cx_api.h)."""

    ZONE_CONFIG = 0x5450
    FREQ_HZ = 0x5458
    INT_TIME = 0x545C
    FW_NB_TARGET = 0x5478
    RANGING_MODE = 0xAD30
    DSS_CONFIG = 0xAD38
    TARGET_ORDER = 0xAE64
    SHARPENER = 0xAED8
    SINGLE_RANGE = 0xCD5C
    OUTPUT_CONFIG = 0xCD60
    OUTPUT_ENABLES = 0xCD68
    OUTPUT_LIST = 0xCD78
    PIPE_CONTROL = 0xCF78


class BH:
    """Block headers of the output list, in the ULD's order (bit ``i`` of the enables word selects entry ``i``).

    ``VL53L5CX_*_BH`` of ULD 1.1.2 vl53l5cx_api.h for ``VL53L5CX_NB_TARGET_PER_ZONE == 1`` (ULD 2.0.0 moved the
    per-target blocks, e.g. distance 0xDF440402).
    """

    START = 0x0000000D
    METADATA = 0x54B400C0
    COMMONDATA = 0x54C00040
    AMBIENT_RATE = 0x54D00104
    SPAD_COUNT = 0x55D00404
    NB_TARGET_DETECTED = 0xCF7C0401
    SIGNAL_RATE = 0xCFBC0404
    RANGE_SIGMA_MM = 0xD2BC0402
    DISTANCE = 0xD33C0402
    REFLECTANCE = 0xD43C0401
    TARGET_STATUS = 0xD47C0401
    MOTION_DETECT = 0xCC5008C0
    ORDER = (
        START, METADATA, COMMONDATA, AMBIENT_RATE, SPAD_COUNT, NB_TARGET_DETECTED, SIGNAL_RATE,
        RANGE_SIGMA_MM, DISTANCE, REFLECTANCE, TARGET_STATUS, MOTION_DETECT,
    )  # fmt: skip


# Outputs read by default: the three mandatory blocks plus what TofFrame carries (ambient, targets
# detected, signal, sigma, distance, status); SPAD count, reflectance and motion are left out (bus time).
DEFAULT_OUTPUTS = ("AMBIENT_RATE", "NB_TARGET_DETECTED", "SIGNAL_RATE", "RANGE_SIGMA_MM", "DISTANCE", "TARGET_STATUS")
_OUTPUT_BIT = {name: i for i, name in enumerate(
    ("START", "METADATA", "COMMONDATA", "AMBIENT_RATE", "SPAD_COUNT", "NB_TARGET_DETECTED", "SIGNAL_RATE",
     "RANGE_SIGMA_MM", "DISTANCE", "REFLECTANCE", "TARGET_STATUS", "MOTION_DETECT"))}  # fmt: skip

TARGET_ORDER_CLOSEST = 1
TARGET_ORDER_STRONGEST = 2
FIELD_OF_VIEW_RAD = float(np.deg2rad(45.0))  # square field of view (datasheet: 45 deg horizontal and vertical)


class Vl53l5cxError(DriverError):
    """The chip did not answer a handshake as the ULD expects (timeout, MCU error, bad frame size)."""


class I2cBus(Protocol):
    """The part of ``smbus2.SMBus`` the driver uses."""

    def i2c_rdwr(self, *msgs: Any) -> None: ...


@dataclass(frozen=True)
class UldBuffers:
    """ST's binary buffers of the ULD: firmware image, default configuration, default crosstalk, NVM command."""

    firmware: bytes
    default_configuration: bytes
    default_xtalk: bytes
    get_nvm_cmd: bytes
    source: str = ""

    def __post_init__(self) -> None:
        for name, data, size in (
            ("firmware", self.firmware, FIRMWARE_SIZE),
            ("default_configuration", self.default_configuration, CONFIGURATION_SIZE),
            ("default_xtalk", self.default_xtalk, XTALK_BUFFER_SIZE),
            ("get_nvm_cmd", self.get_nvm_cmd, NVM_CMD_SIZE),
        ):
            if len(data) != size:
                raise DriverConfigError(
                    f"VL53L5CX {name} from {self.source or 'memory'} has {len(data)} bytes, expected {size}"
                )

    @classmethod
    def from_dir(cls, path: str | os.PathLike[str]) -> UldBuffers:
        """Load ``firmware.bin``, ``default_configuration.bin``, ``default_xtalk.bin``, ``get_nvm_cmd.bin``."""
        p = Path(path)
        names = ("firmware.bin", "default_configuration.bin", "default_xtalk.bin", "get_nvm_cmd.bin")
        missing = [n for n in names if not (p / n).is_file()]
        if missing:
            raise DriverConfigError(f"VL53L5CX firmware directory {str(p)!r} lacks {missing}")
        fw, cfg, xtalk, nvm = ((p / n).read_bytes() for n in names)
        buffers = cls(fw, cfg, xtalk, nvm, source=str(p))
        crc = zlib.crc32(fw)
        if crc != FIRMWARE_CRC32:
            raise DriverConfigError(
                f"VL53L5CX firmware.bin in {str(p)!r} has CRC-32 {crc:#010x}, not {FIRMWARE_CRC32:#010x} of ST's ULD "
                f"{ULD_RELEASE} image: this driver speaks the {ULD_RELEASE} protocol (DCI indices, block headers), "
                "which another release's firmware does not understand"
            )
        return buffers

    @classmethod
    def from_package(cls) -> UldBuffers:
        """The buffers shipped in the pinned ``sparkfun-qwiic-vl53l5cx`` distribution (read as files, not imported)."""
        try:
            dist = importlib.metadata.distribution("sparkfun_qwiic_vl53l5cx")
        except importlib.metadata.PackageNotFoundError as exc:
            raise DriverConfigError(
                "VL53L5CX firmware: the package sparkfun-qwiic-vl53l5cx is not installed "
                "(pip install sparkfun-qwiic-vl53l5cx==2.0.0) and no firmware_dir was given"
            ) from exc
        return cls.from_dir(Path(str(dist.locate_file("qwiic_vl53l5cx/vl53l5cx_bin"))))


def load_buffers(firmware_dir: str = "") -> UldBuffers:
    """From ``firmware_dir`` when given, else from the package."""
    return UldBuffers.from_dir(firmware_dir) if firmware_dir else UldBuffers.from_package()


def swap_words(data: bytes | bytearray) -> bytes:
    """Reverse the bytes of every 4-byte word (the ULD's ``SwapBuffer``; the chip's words are big-endian)."""
    n = len(data) - len(data) % 4
    a = np.frombuffer(bytes(data[:n]), np.uint8).reshape(-1, 4)[:, ::-1]
    return a.tobytes() + bytes(data[n:])


def _bh_fields(bh: int) -> tuple[int, int, int]:
    return bh & 0xF, (bh >> 4) & 0xFFF, bh >> 16


def output_list(resolution: int, outputs: tuple[str, ...] = DEFAULT_OUTPUTS) -> tuple[list[int], list[int], int]:
    """The output list, the enables words and the frame size in bytes, as ``vl53l5cx_start_ranging`` computes them.

    ``resolution`` is the number of zones (16 or 64); one target per zone.
    """
    unknown = [o for o in outputs if o not in _OUTPUT_BIT or _OUTPUT_BIT[o] < 3]
    if unknown:
        raise DriverConfigError(f"VL53L5CX outputs {unknown} invalid: expected among {list(_OUTPUT_BIT)[3:]}")
    enables = [0x7, 0, 0, 0xC0000000]
    for o in outputs:
        enables[0] |= 1 << _OUTPUT_BIT[o]
    lst = list(BH.ORDER)
    size = 0
    for i, bh in enumerate(lst):
        if bh == 0 or not enables[i // 32] & (1 << (i % 32)):
            continue
        typ, sz, idx = _bh_fields(bh)
        if 0x1 <= typ < 0x0D:
            sz = resolution  # one target per zone (ambient and SPAD count are per zone anyway)
            lst[i] = (idx << 16) | (sz << 4) | typ
            size += typ * sz
        else:
            size += sz
        size += 4
    size += FRAME_TRAILER
    return lst, enables, size


def frame_size(resolution: int, outputs: tuple[str, ...] = DEFAULT_OUTPUTS) -> int:
    """Bytes of one ranging frame (what one results read moves)."""
    return output_list(resolution, outputs)[2]


@dataclass
class TofReading:
    """One frame as the chip reports it (first target per zone)."""

    stamp_ns: int
    resolution: int  # zones: 16 or 64
    stream_count: int
    silicon_temp_degc: float
    distance_mm: FloatArray  # along the boresight; 0 where the chip clamps negatives
    range_sigma_mm: FloatArray
    target_status: np.ndarray  # uint8
    nb_target_detected: np.ndarray  # uint8
    signal_per_spad: FloatArray  # kcps/SPAD
    ambient_per_spad: FloatArray  # kcps/SPAD
    bytes_read: int = 0

    @property
    def zones_per_side(self) -> int:
        return 8 if self.resolution == 64 else 4

    def valid(self) -> np.ndarray:
        """Zones with a target and status 5 or 9 (UM2884: the fully valid ones)."""
        return (self.nb_target_detected > 0) & np.isin(self.target_status, (5, 9))


def _parse_blocks(buf: bytes, z: int, out: TofReading) -> bool:
    """Walk the block headers from byte 16, filling ``out``; returns whether the targets block was present."""
    n = len(buf)
    i = 16
    have_targets = False
    while i < n:
        (bh,) = struct.unpack_from("<I", buf, i)
        typ, size, idx = _bh_fields(bh)
        msize = typ * size if 0x1 < typ < 0x0D else size
        p = i + 4
        if idx == 0x54B4:
            out.silicon_temp_degc = float(struct.unpack_from("<b", buf, i + 12)[0])
        elif idx == 0x54D0:
            out.ambient_per_spad = np.frombuffer(buf, "<u4", z, p) / 2048.0
        elif idx == 0xCF7C:
            out.nb_target_detected = np.frombuffer(buf, "u1", z, p).copy()
            have_targets = True
        elif idx == 0xCFBC:
            out.signal_per_spad = np.frombuffer(buf, "<u4", z, p) / 2048.0
        elif idx == 0xD2BC:
            out.range_sigma_mm = np.frombuffer(buf, "<u2", z, p) / 128.0
        elif idx == 0xD33C:
            out.distance_mm = np.maximum(np.frombuffer(buf, "<i2", z, p) / 4.0, 0.0)
        elif idx == 0xD47C:
            out.target_status = np.frombuffer(buf, "u1", z, p).copy()
        i = p + msize
    return have_targets


def parse_frame(raw: bytes, resolution: int, stamp_ns: int = 0) -> TofReading:
    """Parse a results buffer read from page 2 address 0 (device byte order), as ``vl53l5cx_get_ranging_data``.

    Units as the ULD converts them, but kept fractional (the ULD truncates to integers): distance raw/4 mm
    (negative clamped to 0), sigma raw/128 mm, signal and ambient raw/2048 kcps/SPAD; zones without a target
    get status 255. (ULD 1.1.2 has no frame-id check; a block header pointing past the buffer is caught here.)

    Raises:
        Vl53l5cxError: a malformed frame (block headers that do not fit the buffer).
    """
    stream = raw[0]
    buf = swap_words(raw)
    z = resolution
    out = TofReading(
        stamp_ns, z, stream, 0.0, np.zeros(z), np.zeros(z), np.full(z, 255, np.uint8), np.zeros(z, np.uint8),
        np.zeros(z), np.zeros(z), len(raw),
    )  # fmt: skip
    try:
        have_targets = _parse_blocks(buf, z, out)
    except (ValueError, struct.error) as exc:  # a block header pointing past the buffer: a malformed frame
        raise Vl53l5cxError(f"malformed frame ({exc})") from exc
    if have_targets:
        out.target_status[out.nb_target_detected == 0] = 255  # as the ULD: no target detected -> status 255
    else:
        out.nb_target_detected[:] = 1  # not read: every zone counts as having its (first) target
    return out


RANGE_CONVENTIONS = ("perpendicular", "radial")


# -- zone geometry: zone (row, col) of an N x N frame covers angles ``ax`` (col, along +x) and ``ay`` (row, along +y)
# in N equal steps of the field of view; with the perpendicular convention a zone's point is
# ``distance * [tan(ax), tan(ay), 1]`` (the distance along the boresight, as ``msg/TofFrame.msg`` says)


def zone_angles(zones_per_side: int, fov: float = FIELD_OF_VIEW_RAD) -> tuple[FloatArray, FloatArray]:
    """Centre angles ``(ax, ay)`` of every zone, row-major (``zones_per_side ** 2`` each)."""
    n = int(zones_per_side)
    centres = ((np.arange(n) + 0.5) / n - 0.5) * fov
    ay, ax = np.meshgrid(centres, centres, indexing="ij")
    return ax.ravel(), ay.ravel()


def zone_directions(zones_per_side: int, fov: float = FIELD_OF_VIEW_RAD) -> FloatArray:
    """``(N*N, 3)`` vectors ``[tan(ax), tan(ay), 1]`` (z = 1: multiply by the boresight distance)."""
    ax, ay = zone_angles(zones_per_side, fov)
    return np.column_stack([np.tan(ax), np.tan(ay), np.ones_like(ax)])


def zone_points(distance_m: FloatArray, zones_per_side: int, fov: float = FIELD_OF_VIEW_RAD) -> FloatArray:
    """Points (sensor frame, m) of boresight distances (NaN distances give NaN points)."""
    return zone_directions(zones_per_side, fov) * np.asarray(distance_m, float)[:, None]


def zone_direction_norms(zones_per_side: int, fov: float = FIELD_OF_VIEW_RAD) -> FloatArray:
    """``|[tan(ax), tan(ay), 1]|`` of each zone's centre ray (row-major; equal angular zones over ``fov``): the
    ratio of a radial distance to the perpendicular one."""
    return np.asarray(np.linalg.norm(zone_directions(zones_per_side, fov), axis=1))


def to_perpendicular(reading: TofReading) -> TofReading:
    """A reading whose distances are radial (along each zone's ray) turned into perpendicular ones (along the
    boresight, what the rest of the package expects): distance and sigma divided by the zone's ray norm."""
    k = zone_direction_norms(reading.zones_per_side)
    return replace(reading, distance_mm=reading.distance_mm / k, range_sigma_mm=reading.range_sigma_mm / k)


@dataclass(frozen=True)
class RangeConventionCheck:
    """:func:`range_convention_from_wall`: the convention found and the RMS misfit (mm) of each."""

    convention: str  # "perpendicular", "radial" or "undecided"
    zones: int
    rms_perpendicular_mm: float
    rms_radial_mm: float


def range_convention_from_wall(reading: TofReading, min_zones: int = 12) -> RangeConventionCheck:
    """Which convention a chip follows, from one frame facing a flat wall squarely (boresight normal to it).

    Perpendicular distances are the same in every zone; radial ones grow with the zone's ray norm (at 8x8 the
    corner zones by 1/cos of about 28 deg, +13 %). Each model is fitted (one scale) to the valid zones; the one with
    the smaller RMS misfit wins if it is at most half the other, else ``"undecided"`` (a tilted or uneven wall).
    """
    ok = reading.valid() & (reading.distance_mm > 0)
    d = reading.distance_mm[ok]
    k = zone_direction_norms(reading.zones_per_side)[ok]
    if d.size < min_zones:
        return RangeConventionCheck("undecided", int(d.size), float("nan"), float("nan"))
    c_p = float(d.mean())  # d = c
    c_r = float((d @ k) / (k @ k))  # d = c * k
    rms_p = float(np.sqrt(np.mean((d - c_p) ** 2)))
    rms_r = float(np.sqrt(np.mean((d - c_r * k) ** 2)))
    best = "perpendicular" if rms_p < rms_r else "radial"
    if min(rms_p, rms_r) > 0.5 * max(rms_p, rms_r):
        best = "undecided"
    return RangeConventionCheck(best, int(d.size), rms_p, rms_r)


Steps = Generator[float, None, Any]


def run_steps(steps: Steps, sleep: Callable[[float], None] = time.sleep) -> Any:
    """Run a step generator to its end, sleeping the waits it asks for; returns its value."""
    try:
        while True:
            wait = next(steps)
            if wait > 0:
                sleep(wait)
    except StopIteration as stop:
        return stop.value


class Vl53l5cx:
    """One VL53L5CX.

    Args:
        bus: ``smbus2.SMBus``-like with ``i2c_rdwr``.
        address: 7-bit address (0x29 at power-up).
        buffers: ST's binary buffers (:meth:`UldBuffers.from_package`).
        clock: host clock in ns; inject the simulated bus clock in simulation.
        i2c_msg: the ``smbus2.i2c_msg`` class (default imported from smbus2).
        upload_chunk: bytes per firmware/buffer write transfer (<= 8190: 2 index bytes + data <= 8192).
        outputs: optional output blocks read per frame (see :data:`DEFAULT_OUTPUTS`).
        poll_timeout: seconds before a handshake poll gives up (the ULD uses 2 s).
        retries: times a transfer that was not acknowledged (or timed out) is sent again before the error
            propagates. Every transfer of the sequence is idempotent (the same bytes to the same index), so a
            NACK on the bus costs one transfer, not a new 90 kB boot; :attr:`retried` counts them.
    """

    def __init__(
        self,
        bus: I2cBus,
        address: int = VL53L5CX_DEFAULT_ADDRESS,
        buffers: UldBuffers | None = None,
        *,
        clock: Callable[[], int] = time.monotonic_ns,
        i2c_msg: Any = None,
        upload_chunk: int = 1024,
        outputs: tuple[str, ...] = DEFAULT_OUTPUTS,
        poll_timeout: float = 2.0,
        retries: int = 2,
    ) -> None:
        if not 0x08 <= address <= 0x77:
            raise DriverConfigError(f"VL53L5CX address {address:#04x} invalid: expected 0x08-0x77")
        if not 16 <= upload_chunk <= MAX_MESSAGE - 2:
            raise DriverConfigError(f"VL53L5CX upload_chunk {upload_chunk} invalid: expected 16-{MAX_MESSAGE - 2}")
        if i2c_msg is None:
            from smbus2 import i2c_msg as _msg

            i2c_msg = _msg
        output_list(64, outputs)  # validates the names
        self.bus = bus
        self.address = address
        self.buffers = buffers if buffers is not None else UldBuffers.from_package()
        self.clock = clock
        self.i2c_msg = i2c_msg
        self.upload_chunk = upload_chunk
        self.outputs = tuple(outputs)
        self.poll_timeout = poll_timeout
        self.resolution = 16
        self.data_read_size = 0
        self.stream_count = 255
        self.offset_data = bytes(OFFSET_BUFFER_SIZE)
        self.xtalk_data = self.buffers.default_xtalk
        self.ranging = False
        self.retries = max(0, int(retries))
        self.retried = 0

    # -- transfers ---------------------------------------------------------------
    def _xfer(self, *msgs: Any) -> None:
        for attempt in range(self.retries + 1):
            try:
                self.bus.i2c_rdwr(*msgs)
                return
            except OSError:  # NACK (EREMOTEIO), timeout (TimeoutError is an OSError), arbitration lost
                if attempt == self.retries:
                    raise
                self.retried += 1

    def wr_multi(self, index: int, data: bytes | bytearray) -> None:
        """Write ``data`` from 16-bit ``index`` on (one transfer per ``upload_chunk`` bytes)."""
        for k in range(0, len(data), self.upload_chunk):
            part = bytes(data[k : k + self.upload_chunk])
            i = index + k
            self._xfer(self.i2c_msg.write(self.address, bytes([(i >> 8) & 0xFF, i & 0xFF]) + part))

    def rd_multi(self, index: int, n: int) -> bytes:
        """Read ``n`` bytes from ``index`` (index write, repeated START, read; split at 8192 bytes)."""
        out = bytearray()
        for k in range(0, n, MAX_MESSAGE):
            i = index + k
            w = self.i2c_msg.write(self.address, [(i >> 8) & 0xFF, i & 0xFF])
            r = self.i2c_msg.read(self.address, min(MAX_MESSAGE, n - k))
            self._xfer(w, r)
            out += bytes(r)
        return bytes(out)

    def wr_byte(self, index: int, value: int) -> None:
        """Write one byte at ``index``."""
        self._xfer(self.i2c_msg.write(self.address, [(index >> 8) & 0xFF, index & 0xFF, value & 0xFF]))

    def rd_byte(self, index: int) -> int:
        """Read one byte at ``index``."""
        return self.rd_multi(index, 1)[0]

    # -- handshakes ----------------------------------------------------------------
    def _poll(self, size: int, pos: int, index: int, mask: int, expected: int, what: str) -> Steps:
        """``_vl53l5cx_poll_for_answer`` (ULD 1.1.2): read ``size`` bytes at ``index``, wait 10 ms, until byte ``pos``
        masked matches; on every read of 4 or more bytes, status byte 2 >= 0x7F is an MCU error (ST sets
        ``VL53L5CX_MCU_ERROR`` whether or not the byte matched). ST's 2 s timeout (200 polls) is ``poll_timeout``."""
        deadline = self.clock() + int(self.poll_timeout * 1e9)
        while True:
            buf = self.rd_multi(index, size)
            yield 0.010
            if size >= 4 and buf[2] >= 0x7F:
                raise Vl53l5cxError(f"VL53L5CX at {self.address:#04x}: MCU error {buf[2]:#04x} while {what}")
            if (buf[pos] & mask) == expected:
                return
            if self.clock() > deadline:
                raise Vl53l5cxError(f"VL53L5CX at {self.address:#04x}: timeout while {what}")

    def _poll_mcu_boot(self) -> Steps:
        """MCU boot after 0x000B = 0x01: ULD 1.1.2 polls GO2 status 0 (0x0006) until it reads 0x00
        (``_vl53l5cx_poll_for_answer(1, 0, 0x06, 0xff, 0x00)``). When bit 7 is set, GO2 status 1 (0x0007) is read
        as ULD 1.2-2.0.1 read it: non-zero is an MCU error, zero a booted MCU."""
        deadline = self.clock() + int(self.poll_timeout * 1e9)
        while True:
            s0 = self.rd_byte(0x06)
            yield 0.010
            if s0 == 0x00:
                return
            if s0 & 0x80:
                s1 = self.rd_byte(0x07)
                if s1:
                    raise Vl53l5cxError(f"VL53L5CX at {self.address:#04x}: MCU error {s1:#04x} at boot (GO2 status 1)")
                return
            if self.clock() > deadline:
                raise Vl53l5cxError(f"VL53L5CX at {self.address:#04x}: timeout waiting for the MCU to boot")

    def is_alive(self) -> bool:
        """Device id 0xF0 and revision 0x02 on page 0 (``vl53l5cx_is_alive``)."""
        self.wr_byte(PAGE, 0x00)
        ident = self.rd_multi(0x0000, 2)
        self.wr_byte(PAGE, 0x02)
        return ident[0] == DEVICE_ID and ident[1] == REVISION_ID

    def set_i2c_address(self, address: int) -> None:
        """Move the chip to a new 7-bit address (``vl53l5cx_set_i2c_address``; lost at power-off)."""
        if not 0x08 <= address <= 0x77:
            raise DriverConfigError(f"VL53L5CX address {address:#04x} invalid: expected 0x08-0x77")
        self.wr_byte(PAGE, 0x00)
        self.wr_byte(0x0004, address)
        self.address = address
        self.wr_byte(PAGE, 0x02)

    # -- boot ------------------------------------------------------------------
    def init_steps(self) -> Steps:
        """``vl53l5cx_init``: reboot, firmware upload, MCU boot, offsets, crosstalk, default configuration."""
        self.ranging = False
        w, r = self.wr_byte, self.rd_byte
        # SW reboot sequence
        w(PAGE, 0x00)
        w(0x0009, 0x04)
        w(0x000F, 0x40)
        w(0x000A, 0x03)
        r(PAGE)
        w(0x000C, 0x01)
        for idx, v in ((0x0101, 0x00), (0x0102, 0x00), (0x010A, 0x01), (0x4002, 0x01), (0x4002, 0x00),
                       (0x010A, 0x03), (0x0103, 0x01), (0x000C, 0x00), (0x000F, 0x43)):  # fmt: skip
            w(idx, v)
        yield 0.001
        w(0x000F, 0x40)
        w(0x000A, 0x01)
        yield 0.100
        # Wait for the boot ROM
        w(PAGE, 0x00)
        yield from self._poll(1, 0, 0x06, 0xFF, 1, "waiting for the boot ROM")
        w(0x000E, 0x01)
        w(PAGE, 0x02)
        # Enable FW access
        w(0x0003, 0x0D)
        w(PAGE, 0x01)
        yield from self._poll(1, 0, 0x21, 0x10, 0x10, "enabling firmware access")
        w(PAGE, 0x00)
        # Enable host access to GO1
        w(0x000C, 0x01)
        # Power ON status
        w(PAGE, 0x00)
        for idx, v in ((0x0101, 0x00), (0x0102, 0x00), (0x010A, 0x01), (0x4002, 0x01), (0x4002, 0x00),
                       (0x010A, 0x03), (0x0103, 0x01), (0x400F, 0x00), (0x021A, 0x43), (0x021A, 0x03),
                       (0x021A, 0x01), (0x021A, 0x00), (0x0219, 0x00), (0x021B, 0x00)):  # fmt: skip
            w(idx, v)
        # Wake up MCU
        w(PAGE, 0x00)
        w(0x000C, 0x00)
        w(PAGE, 0x01)
        w(0x0020, 0x07)
        w(0x0020, 0x06)
        # Download the firmware, page by page, in chunks the scheduler can interleave with other sensors
        fw = self.buffers.firmware
        for page, start, size in FIRMWARE_PAGES:
            w(PAGE, page)
            for k in range(0, size, self.upload_chunk):
                n = min(self.upload_chunk, size - k)
                self.wr_multi(k, fw[start + k : start + k + n])
                yield 0.0
        w(PAGE, 0x01)
        # Check the firmware was downloaded correctly
        w(PAGE, 0x02)
        w(0x0003, 0x0D)
        w(PAGE, 0x01)
        yield from self._poll(1, 0, 0x21, 0x10, 0x10, "checking the firmware download")
        w(PAGE, 0x00)
        w(0x000C, 0x01)
        # Reset MCU and wait for it to boot
        w(PAGE, 0x00)
        for idx, v in ((0x0114, 0x00), (0x0115, 0x00), (0x0116, 0x42), (0x0117, 0x00), (0x000B, 0x00)):
            w(idx, v)
        w(0x000C, 0x00)
        w(0x000B, 0x01)
        yield from self._poll_mcu_boot()
        w(PAGE, 0x02)
        # Offset data from the NVM
        self.wr_multi(0x2FD8, self.buffers.get_nvm_cmd)
        yield from self._poll(4, 0, UI_CMD_STATUS, 0xFF, 2, "reading the NVM")
        nvm = self.rd_multi(UI_CMD_START, NVM_DATA_SIZE)
        self.offset_data = nvm[:OFFSET_BUFFER_SIZE]
        yield from self._send_offset_data(16)
        # Default crosstalk
        self.xtalk_data = self.buffers.default_xtalk
        yield from self._send_xtalk_data(16)
        # Default configuration
        self.wr_multi(0x2C34, self.buffers.default_configuration)
        yield from self._poll(4, 1, UI_CMD_STATUS, 0xFF, 0x03, "loading the default configuration")
        yield from self.dci_write(DCI.PIPE_CONTROL, bytes([1, 0x00, 0x01, 0x00]))  # one target per zone
        yield from self.dci_write(DCI.SINGLE_RANGE, struct.pack("<I", 1))
        self.resolution = 16

    def _send_offset_data(self, resolution: int) -> Steps:
        """``_vl53l5cx_send_offset_data``: the NVM offsets (4x4: averaged over 2x2 zones), to 0x2E18."""
        buf = bytearray(self.offset_data)
        if resolution == 16:
            buf[0x10:0x18] = bytes([0x0F, 0x04, 0x04, 0x00, 0x08, 0x10, 0x10, 0x07])
            sw = bytearray(swap_words(buf))
            sig = np.frombuffer(bytes(sw[0x3C : 0x3C + 256]), "<u4").astype(np.int64)
            rng = np.frombuffer(bytes(sw[0x140 : 0x140 + 128]), "<i2").astype(np.int64)
            sig2, rng2 = np.zeros(64, np.int64), np.zeros(64, np.int64)
            for j in range(4):
                for i in range(4):
                    k = 2 * i + 16 * j
                    sig2[i + 4 * j] = ((sig[k] + sig[k + 1] + sig[k + 8] + sig[k + 9]) & 0xFFFFFFFF) // 4  # uint32
                    s = int(rng[k] + rng[k + 1] + rng[k + 8] + rng[k + 9])
                    rng2[i + 4 * j] = int(s / 4)  # C integer division truncates toward zero
            # zones 16-63 zeroed (the memsets of range_grid[0x10] and signal_grid[0x10] in ULD 1.1.2)
            sw[0x3C : 0x3C + 256] = sig2.astype("<u4").tobytes()
            sw[0x140 : 0x140 + 128] = rng2.astype("<i2").tobytes()
            buf = bytearray(swap_words(sw))
        out = bytearray(OFFSET_BUFFER_SIZE)
        out[: OFFSET_BUFFER_SIZE - 8] = buf[8:OFFSET_BUFFER_SIZE]
        out[0x1E0:0x1E8] = bytes([0x00, 0x00, 0x00, 0x0F, 0x03, 0x01, 0x01, 0xE4])
        self.wr_multi(0x2E18, out)
        yield from self._poll(4, 1, UI_CMD_STATUS, 0xFF, 0x03, "sending the offsets")

    def _send_xtalk_data(self, resolution: int) -> Steps:
        """``_vl53l5cx_send_xtalk_data``: the crosstalk buffer (4x4: averaged), to 0x2CF8."""
        buf = bytearray(self.xtalk_data)
        if resolution == 16:
            buf[0x08:0x10] = bytes([0x0F, 0x04, 0x04, 0x17, 0x08, 0x10, 0x10, 0x07])
            buf[0x20:0x28] = bytes([0x00, 0x78, 0x00, 0x08, 0x00, 0x00, 0x00, 0x08])
            sw = bytearray(swap_words(buf))
            sig = np.frombuffer(bytes(sw[0x34 : 0x34 + 256]), "<u4").astype(np.int64)
            sig2 = np.zeros(64, np.int64)
            for j in range(4):
                for i in range(4):
                    k = 2 * i + 16 * j
                    sig2[i + 4 * j] = ((sig[k] + sig[k + 1] + sig[k + 8] + sig[k + 9]) & 0xFFFFFFFF) // 4
            sw[0x34 : 0x34 + 256] = sig2.astype("<u4").tobytes()
            buf = bytearray(swap_words(sw))
            buf[0x134:0x138] = bytes([0xA0, 0xFC, 0x01, 0x00])
            buf[0x078:0x07C] = bytes(4)
        self.wr_multi(0x2CF8, buf)
        yield from self._poll(4, 1, UI_CMD_STATUS, 0xFF, 0x03, "sending the crosstalk data")

    # -- DCI -----------------------------------------------------------------------
    def dci_read(self, index: int, size: int) -> Steps:
        """``vl53l5cx_dci_read_data``: returns ``size`` bytes in host (little-endian word) order."""
        if size + 12 > TEMPORARY_BUFFER_SIZE:
            raise DriverConfigError(f"DCI read of {size} bytes exceeds the ULD buffer")
        cmd = bytes([index >> 8, index & 0xFF, (size & 0xFF0) >> 4, (size & 0xF) << 4,
                     0, 0, 0, 0x0F, 0x00, 0x02, 0x00, 0x08])  # fmt: skip
        self.wr_multi(UI_CMD_END - 11, cmd)
        yield from self._poll(4, 1, UI_CMD_STATUS, 0xFF, 0x03, f"reading DCI {index:#06x}")
        raw = swap_words(self.rd_multi(UI_CMD_START, size + 12))
        return raw[4 : 4 + size]

    def dci_write(self, index: int, data: bytes) -> Steps:
        """``vl53l5cx_dci_write_data``: ``data`` in host order (swapped to the chip's order here)."""
        size = len(data)
        if size + 12 > TEMPORARY_BUFFER_SIZE:
            raise DriverConfigError(f"DCI write of {size} bytes exceeds the ULD buffer")
        header = bytes([index >> 8, index & 0xFF, (size & 0xFF0) >> 4, (size & 0xF) << 4])
        footer = bytes([0, 0, 0, 0x0F, 0x05, 0x01, (size + 8) >> 8, (size + 8) & 0xFF])
        self.wr_multi(UI_CMD_END - (size + 12) + 1, header + swap_words(data) + footer)
        yield from self._poll(4, 1, UI_CMD_STATUS, 0xFF, 0x03, f"writing DCI {index:#06x}")

    def dci_replace(self, index: int, size: int, pos: int, new: bytes) -> Steps:
        """``vl53l5cx_dci_replace_data``: read, patch ``new`` at ``pos``, write back."""
        data = bytearray((yield from self.dci_read(index, size)))
        data[pos : pos + len(new)] = new
        yield from self.dci_write(index, bytes(data))

    # -- settings --------------------------------------------------------------------
    def set_resolution(self, zones_per_side: int) -> Steps:
        """4 (4x4) or 8 (8x8): DSS and zone configuration, then offsets and crosstalk for it."""
        if zones_per_side not in (4, 8):
            raise DriverConfigError(f"VL53L5CX resolution {zones_per_side!r} invalid: expected 4 or 8 zones per side")
        # ULD 1.1.2 vl53l5cx_set_resolution: read-modify-write the DSS configuration, then the zone configuration
        dss = bytearray((yield from self.dci_read(DCI.DSS_CONFIG, 16)))
        if zones_per_side == 4:
            dss[0x04], dss[0x06], dss[0x09] = 64, 64, 4
        else:
            dss[0x04], dss[0x06], dss[0x09] = 16, 16, 1
        yield from self.dci_write(DCI.DSS_CONFIG, bytes(dss))
        zone = bytearray((yield from self.dci_read(DCI.ZONE_CONFIG, 8)))
        if zones_per_side == 4:
            zone[0x00], zone[0x01], zone[0x04], zone[0x05] = 4, 4, 8, 8
        else:
            zone[0x00], zone[0x01], zone[0x04], zone[0x05] = 8, 8, 4, 4
        yield from self.dci_write(DCI.ZONE_CONFIG, bytes(zone))
        res = zones_per_side * zones_per_side
        yield from self._send_offset_data(res)
        yield from self._send_xtalk_data(res)
        self.resolution = res

    def get_resolution(self) -> Steps:
        """Zones (16 or 64) as the firmware holds them."""
        zone = yield from self.dci_read(DCI.ZONE_CONFIG, 8)
        return int(zone[0]) * int(zone[1])

    def set_ranging_frequency_hz(self, hz: int) -> Steps:
        """1-15 Hz at 8x8, 1-60 Hz at 4x4 (datasheet)."""
        top = 15 if self.resolution == 64 else 60
        if not 1 <= int(hz) <= top or int(hz) != hz:
            raise DriverConfigError(f"VL53L5CX ranging frequency {hz!r} invalid: expected an integer 1-{top} Hz")
        yield from self.dci_replace(DCI.FREQ_HZ, 4, 0x01, bytes([int(hz)]))

    def get_ranging_frequency_hz(self) -> Steps:
        """The ranging frequency (Hz) the firmware holds."""
        data = yield from self.dci_read(DCI.FREQ_HZ, 4)
        return int(data[0x01])

    def set_integration_time_ms(self, ms: int) -> Steps:
        """2-1000 ms (used in autonomous ranging mode)."""
        if not 2 <= int(ms) <= 1000 or int(ms) != ms:
            raise DriverConfigError(f"VL53L5CX integration time {ms!r} invalid: expected an integer 2-1000 ms")
        yield from self.dci_replace(DCI.INT_TIME, 20, 0x00, struct.pack("<I", int(ms) * 1000))

    def get_integration_time_ms(self) -> Steps:
        """Integration time (ms)."""
        data = yield from self.dci_read(DCI.INT_TIME, 20)
        return struct.unpack_from("<I", data, 0)[0] // 1000

    def set_sharpener_percent(self, percent: int) -> Steps:
        """0-99 % (stored as percent * 255 / 100)."""
        if not 0 <= int(percent) < 100 or int(percent) != percent:
            raise DriverConfigError(f"VL53L5CX sharpener {percent!r} invalid: expected an integer 0-99 %")
        yield from self.dci_replace(DCI.SHARPENER, 16, 0x0D, bytes([(int(percent) * 255) // 100]))

    def get_sharpener_percent(self) -> Steps:
        """Sharpener (percent)."""
        data = yield from self.dci_read(DCI.SHARPENER, 16)
        return (int(data[0x0D]) * 100) // 255

    def set_target_order(self, order: str) -> Steps:
        """``"closest"`` or ``"strongest"`` first."""
        codes = {"closest": TARGET_ORDER_CLOSEST, "strongest": TARGET_ORDER_STRONGEST}
        if order not in codes:
            raise DriverConfigError(f"VL53L5CX target order {order!r} invalid: expected 'closest' or 'strongest'")
        yield from self.dci_replace(DCI.TARGET_ORDER, 4, 0x00, bytes([codes[order]]))

    def get_target_order(self) -> Steps:
        """``"closest"`` or ``"strongest"``."""
        data = yield from self.dci_read(DCI.TARGET_ORDER, 4)
        return {TARGET_ORDER_CLOSEST: "closest", TARGET_ORDER_STRONGEST: "strongest"}.get(int(data[0]), "unknown")

    # -- ranging --------------------------------------------------------------------
    def start_ranging(self) -> Steps:
        """``vl53l5cx_start_ranging`` (ULD 1.1.2): output list, output configuration (frame size), enables, xshut
        bypass, start command."""
        self.resolution = yield from self.get_resolution()
        lst, enables, size = output_list(self.resolution, self.outputs)
        self.data_read_size = size
        self.stream_count = 255
        yield from self.dci_write(DCI.OUTPUT_LIST, struct.pack("<12I", *lst))
        yield from self.dci_write(DCI.OUTPUT_CONFIG, struct.pack("<2I", size, len(lst) + 1))
        yield from self.dci_write(DCI.OUTPUT_ENABLES, struct.pack("<4I", *enables))
        self.wr_byte(PAGE, 0x00)
        self.wr_byte(0x0009, 0x05)
        self.wr_byte(PAGE, 0x02)
        self.wr_multi(UI_CMD_END - 3, bytes([0x00, 0x03, 0x00, 0x00]))
        yield from self._poll(4, 1, UI_CMD_STATUS, 0xFF, 0x03, "starting ranging")
        self.ranging = True

    def stop_ranging(self) -> Steps:
        """``vl53l5cx_stop_ranging`` (ULD 1.1.2): unless auto-stopped (0x2FFC = 0x4FF), provoke an MCU stop and
        poll GO2 status 0 bit 7 every 10 ms (ST: 5 s); undo the stop, stop the xshut bypass."""
        flag = struct.unpack("<I", self.rd_multi(0x2FFC, 4))[0]
        if flag != 0x4FF:
            self.wr_byte(PAGE, 0x00)
            self.wr_byte(0x0015, 0x16)
            self.wr_byte(0x0014, 0x01)
            deadline = self.clock() + int(5.0 * 1e9)
            while True:
                s0 = self.rd_byte(0x0006)
                yield 0.010
                if s0 & 0x80:
                    break
                if self.clock() > deadline:
                    raise Vl53l5cxError(f"VL53L5CX at {self.address:#04x}: timeout stopping the MCU")
        self.wr_byte(PAGE, 0x00)
        self.wr_byte(0x0014, 0x00)
        self.wr_byte(0x0015, 0x00)
        self.wr_byte(0x0009, 0x04)
        self.wr_byte(PAGE, 0x02)
        self.ranging = False

    def check_data_ready(self) -> bool:
        """One 4-byte read of the result header: a new stream count and the ready flags (``vl53l5cx_check_data_ready``;
        as ST, the stream count is taken here when a frame is ready).

        Raises:
            Vl53l5cxError: the GO2 error flag (byte 3 bit 7; ULD 1.2 onward) is set.
        """
        b = self.rd_multi(0x0000, 4)
        if b[0] != self.stream_count and b[0] != 255 and b[1] == 0x05 and (b[2] & 0x05) == 0x05 and b[3] & 0x10:
            self.stream_count = b[0]
            return True
        if b[3] & 0x80:
            raise Vl53l5cxError(f"VL53L5CX at {self.address:#04x}: GO2 error status {b[2]:#04x}")
        return False

    def get_ranging_data(self) -> TofReading:
        """Read and parse one frame (one transfer of the frame size)."""
        stamp = self.clock()
        raw = self.rd_multi(0x0000, self.data_read_size)
        reading = parse_frame(raw, self.resolution, stamp)
        self.stream_count = raw[0]
        return reading

    def page(self) -> int:
        """The page register (2 while ranging; 0 after a power-on reset)."""
        return self.rd_byte(PAGE)
