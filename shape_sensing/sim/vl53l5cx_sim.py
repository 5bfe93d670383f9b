"""Register-level VL53L5CX simulator running ST's ULD 1.1.2 firmware: boot, firmware upload, DCI, ranging frames.

The chip's behaviour is stated here from ST's documents and code, not taken
from :mod:`shape_sensing.drivers.vl53l5cx` (no import from ``drivers/``):
UM2884 (the VL53L5CX user manual), the VL53L5CX datasheet, and the ULD 1.1.2
sources (``vl53l5cx_api.c``/``.h``, ``vl53l5cx_buffers.h``), which show what
the host writes, what it polls for and what it reads back.

Addressing: two index bytes (16-bit register index) then data,
auto-incrementing; the page register 0x7FFF selects the memory page.

Boot, on the chip's own clock (every access first brings the chip up to the
bus time; nothing depends on a status register being read):

* the reboot sequence ends with 0x000A = 0x01 on page 0; the boot ROM is
  ready 1 ms later (GO2 status 0, 0x0006, bit 0; never with ``never_boots``);
* firmware access (page 1, 0x0021 bit 4) opens 0x0003 = 0x0D on page 2 once
  the boot ROM is ready; after an upload it stays set only if the image is
  whole and right;
* the image is written to pages 0x09, 0x0A, 0x0B from offset 0, in order, to
  exactly 0x8000, 0x8000 and 0x5000 bytes (``vl53l5cx_init``), and must be the
  image the chip expects (``firmware_crc``, CRC-32);
* 0x000B = 0x00 holds the MCU in reset, 0x000B = 0x01 releases it: with a
  good image the MCU has booted 5 ms later. GO2 status 0 then reads as the
  firmware reports it: ``boot_report="uld1.1"`` (the ULD 1.1.2 firmware, whose
  host code waits for 0x0006 == 0x00): 0x01 (the boot ROM's flag) until the
  MCU has booted, 0x00 after; ``boot_report="uld1.2"`` (ULD 1.2-2.0.1 host
  code: bit 7 set, then 0x0007 is the MCU's error code, 0 = none): 0x00
  until booted, then 0x80 with 0x0007 = ``mcu_boot_error`` (an MCU booted with an
error refuses every command, see below). A command written
  to the UI area before the MCU runs is taken when it has booted.

Firmware side (page 2, UI area 0x2C00-0x2FFF). A command ends at 0x2FFF with
a 4-byte word ``[flags, code, length]`` (length = bytes before the word): code
1 transfers data groups, code 2 reads groups, code 3 starts ranging. A group
is a 4-byte header (index 16 bits, size 12 bits, type 4 bits) and its data in
the chip's big-endian words; a header ``00 00 00 0F`` ends the list. This is
the layout of ST's buffers: the 972-byte default configuration is 48 groups
(zone configuration 0x5450, frequency 0x5458, ...), the 776-byte default
crosstalk 15 groups, the 40-byte NVM command 8 empty groups whose answer is
the 492-byte NVM data. So the firmware's variables (DCI) are what the default
configuration, crosstalk and offsets bring, plus the ULD 1.1.2 firmware's own
output variables (single range 0xCD5C, output configuration 0xCD60, enables
0xCD68, output list 0xCD78, pipe control 0xCF78: the ``VL53L5CX_DCI_*`` of
ULD 1.1.2). A write or read of a variable the firmware does not have (for
example the pipe control 0xDB80 of ULD 1.3.9) is refused: the status word at
0x2C00 answers ``[2, 3, 0xFF, 0]`` (ST's host code treats byte 2 >= 0x7F as
an MCU error). A finished command answers ``[2, 3, 0, 0]`` after 1 ms.

Ranging: started by code 3 when the output configuration's frame size equals
the size of the enabled blocks of the output list plus 20 bytes (the ULD
1.1.2 rule); otherwise refused as above. A frame every 1/f s after start (f
from variable 0x5458 byte 1), built from the per-zone distances given with
:meth:`SimVL53L5CX.set_zones` (boresight distances; NaN = no target): status
5 by default, sigma from the seed paper's distance model when not given,
signal falling with distance squared, ambient constant, quantised as the
chip reports them (distance 1/4 mm, sigma 1/128 mm, rates 1/2048 kcps). Frame
layout: a 16-byte header (the data-ready word ``[stream count, 0x05, 0x05,
0x10]``, the start block's header, 8 bytes), the enabled blocks from the
metadata block on, an 8-byte trailer. The stream count counts frames
0..254 (255 = no frame yet).

Faults: ``dead`` (NACK), ``never_boots``, ``mcu_boot_error``,
:meth:`power_on_reset` (a reset mid-stream: page 0, nothing booted).
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

__all__ = ["FOV_RAD", "SimVL53L5CX", "seed_sigma", "zone_directions", "zone_ray_norms"]

_PAGE = 0x7FFF
_FW_PAGES = ((0x09, 0x8000), (0x0A, 0x8000), (0x0B, 0x5000))  # vl53l5cx_init: the image's three pages
_UI_STATUS = 0x2C00
_UI_ANSWER = 0x2C04
_UI_END = 0x3000
_BOOT_ROM_NS = 1_000_000
_MCU_BOOT_NS = 5_000_000
_CMD_NS = 1_000_000
_REFUSED = bytes([2, 3, 0xFF, 0])
_DONE = bytes([2, 3, 0, 0])
_FRAME_TRAILER = 20  # bytes of a frame beyond its blocks (ULD 1.1.2: data_read_size += 20)
# ULD 1.1.2 firmware variables not in the default configuration: index -> size in bytes
_FW_OUTPUT_VARIABLES = {0xCD5C: 4, 0xCD60: 8, 0xCD68: 16, 0xCD78: 48, 0xCF78: 4}
_OUTPUT_LIST, _OUTPUT_CONFIG, _OUTPUT_ENABLES = 0xCD78, 0xCD60, 0xCD68
_ZONE_CONFIG, _FREQ_HZ = 0x5450, 0x5458


def seed_sigma(d_m: np.ndarray) -> np.ndarray:
    """Range standard deviation (m) from the seed paper's Table I: 0.014d -> 0.012d (0.025-0.6 m), -> 0.006d (1.2 m)."""
    d = np.asarray(d_m, float)
    k = np.interp(d, [0.025, 0.6, 1.2], [0.014, 0.012, 0.006])
    return k * d


FOV_RAD = float(np.deg2rad(45.0))  # VL53L5CX datasheet: 45 deg horizontal and vertical field of view


def zone_directions(zones_per_side: int, fov: float = FOV_RAD) -> np.ndarray:
    """``(N*N, 3)`` centre rays ``[tan(ax), tan(ay), 1]`` of equal angular zones, row-major (rows along y)."""
    n = int(zones_per_side)
    centres = ((np.arange(n) + 0.5) / n - 0.5) * fov
    ay, ax = np.meshgrid(centres, centres, indexing="ij")
    return np.column_stack([np.tan(ax.ravel()), np.tan(ay.ravel()), np.ones(n * n)])


def zone_ray_norms(zones_per_side: int, fov: float = FOV_RAD) -> np.ndarray:
    """Radial / perpendicular distance of each zone: the norm of its centre ray with z = 1."""
    return np.linalg.norm(zone_directions(zones_per_side, fov), axis=1)


def _swap(data: bytes | bytearray) -> bytes:
    """The chip's 32-bit words are big-endian: reverse each 4-byte word (length a multiple of 4)."""
    return np.frombuffer(bytes(data), np.uint8).reshape(-1, 4)[:, ::-1].tobytes()


def _group_len(b2: int, b3: int) -> tuple[int, int]:
    size = (b2 << 4) | (b3 >> 4)
    typ = b3 & 0x0F
    return size, (typ * size if 0x1 < typ < 0x0D else size)


def _parse_groups(area: bytes | bytearray, with_data: bool) -> list[tuple[int, bytes, bytes]] | None:
    """Groups ``(index, header, data)`` up to the ``00 00 00 0F`` end marker; None if they do not end there."""
    out: list[tuple[int, bytes, bytes]] = []
    i = 0
    while i + 4 <= len(area):
        hdr = bytes(area[i : i + 4])
        if hdr == b"\x00\x00\x00\x0f":
            return out
        idx = (hdr[0] << 8) | hdr[1]
        _, n = _group_len(hdr[2], hdr[3])
        if not with_data:
            out.append((idx, hdr, b""))
            i += 4
            continue
        if i + 4 + n > len(area):
            return None
        out.append((idx, hdr, bytes(area[i + 4 : i + 4 + n])))
        i += 4 + n
    return None


class SimVL53L5CX:
    """A simulated VL53L5CX running ULD 1.1.2 firmware.

    Args:
        address: 7-bit address at power-up (0x29).
        name: label.
        firmware_crc: CRC-32 of the firmware image the chip accepts (``zlib.crc32`` of the 0x15000 bytes).
        seed: seed of the NVM contents and range noise.
        noise: add Gaussian range noise with the reported sigma.
        boot_report: how GO2 status reports a booted MCU: ``"uld1.1"`` or ``"uld1.2"`` (see the module text).
        range_convention: what the chip reports for the distances given to :meth:`set_zones` (perpendicular, along
            the boresight): ``"perpendicular"`` as given, or ``"radial"``, along each zone's centre ray (the given
            distance times ``|[tan(ax), tan(ay), 1]|`` for a 45 deg square field of view split into equal zones).
    """

    def __init__(
        self,
        address: int = 0x29,
        name: str = "",
        *,
        firmware_crc: int,
        seed: int = 0,
        noise: bool = False,
        boot_report: str = "uld1.1",
        range_convention: str = "perpendicular",
    ) -> None:
        if range_convention not in ("perpendicular", "radial"):
            raise ValueError(f"range_convention {range_convention!r} invalid: expected 'perpendicular' or 'radial'")
        self.range_convention = range_convention
        if boot_report not in ("uld1.1", "uld1.2"):
            raise ValueError(f"boot_report {boot_report!r} invalid: expected 'uld1.1' or 'uld1.2'")
        self.power_on_address = address
        self.name = name or f"vl53l5cx@{address:#04x}"
        self.firmware_crc = firmware_crc
        self.boot_report = boot_report
        self.rng = np.random.default_rng(seed)
        self.noise = noise
        self.nvm = self._make_nvm()
        self.dead = False
        self.never_boots = False
        self.mcu_boot_error = 0
        self.lpn_low = False  # LPn held low: the I2C interface is off
        self.resets = 0
        self.frames_made = 0
        self.bad_commands = 0
        self.refused: list[str] = []
        self.temperature = 31.0
        self._distances = np.full(64, np.nan)
        self._status: np.ndarray | None = None
        self._sigma: np.ndarray | None = None
        self.power_on_reset()

    def _make_nvm(self) -> dict[int, bytes]:
        """This chip's calibration in its NVM (chip byte order), by group index of the NVM command."""
        rng = self.rng
        sig = _swap(rng.integers(20_000, 40_000, 64).astype("<u4").tobytes())  # offset signal grid, chip order
        rng_mm = _swap(rng.integers(-40, 40, 64).astype("<i2").tobytes())  # offset range grid, chip order
        return {
            0x5400: bytes(4),
            0x9E14: bytes(rng.integers(0, 256, 12, dtype=np.uint8)),
            0x9E20: bytes(rng.integers(0, 256, 20, dtype=np.uint8)),
            0x9E34: bytes(rng.integers(0, 256, 4, dtype=np.uint8)),
            0x9E38: sig,
            0x9F38: rng_mm,
            0x9FB8: bytes(rng.integers(0, 256, 16, dtype=np.uint8)),
            0x9FC8: bytes(rng.integers(0, 256, 16, dtype=np.uint8)),
        }

    # -- harness ---------------------------------------------------------------------
    def power_on_reset(self, now_ns: int = 0) -> None:
        """Back to power-up: address, page 0, no firmware, not ranging."""
        self.resets += 1
        self.address = self.power_on_address
        self.mem: dict[int, bytearray] = {p: bytearray(0x8000) for p in (0, 1, 2)}
        self.mem[0][0x0000] = 0xF0  # device id (UM2884, vl53l5cx_is_alive)
        self.mem[0][0x0001] = 0x02  # revision id
        self.page = 0
        self.index = 0
        self.fw = {p: bytearray() for p, _ in _FW_PAGES}
        self.fw_bad = False
        self.rom_ready_ns: int | None = None
        self.mcu_ready_ns: int | None = None
        self.mcu_in_reset = False
        self.fw_access = False
        self.mcu_stop = False
        self.cmd_done_ns: int | None = None
        self.cmd_status = bytes(4)
        self.pending: tuple[int, int] | None = None
        self.dci: dict[int, bytearray] = {}  # firmware variables, host (little-endian word) order
        self.ranging = False
        self.frame_size = 0
        self.stream = 255
        self._next_frame_ns = 0
        self._results = bytes([255, 0, 0, 0])

    @property
    def booted(self) -> bool:
        """Whether the MCU runs the uploaded firmware (as of the last bus access)."""
        return self.mcu_ready_ns is not None and self._now >= self.mcu_ready_ns

    _now = 0

    def set_zones(
        self,
        distances_m: np.ndarray,
        status: np.ndarray | None = None,
        sigma_m: np.ndarray | None = None,
    ) -> None:
        """Per-zone boresight distances (m, row-major, 16 or 64 zones; NaN: no target), optional status and sigma."""
        d = np.asarray(distances_m, float).ravel()
        if d.size not in (16, 64):
            raise ValueError(f"set_zones: {d.size} distances, expected 16 or 64")
        self._distances = d
        self._status = None if status is None else np.asarray(status, np.uint8).ravel()
        self._sigma = None if sigma_m is None else np.asarray(sigma_m, float).ravel()

    def acks(self) -> bool:
        """Whether the chip acknowledges its address."""
        return not self.dead and not self.lpn_low

    # -- bus side -----------------------------------------------------------------------
    def i2c_write(self, data: bytes, now_ns: int) -> None:
        """Two index bytes, then data written from that index on."""
        if len(data) < 2:
            self.bad_commands += 1
            return
        self._advance(now_ns)
        self.index = (data[0] << 8) | data[1]
        payload = data[2:]
        if not payload:
            return
        if self.index == _PAGE:
            self.page = payload[-1]
            return
        if self.page in self.fw:
            self._fw_write(self.page, self.index, payload)
            return
        if self.page not in self.mem:
            self.bad_commands += 1
            return
        m = self.mem[self.page]
        end = self.index + len(payload)
        m[self.index : end] = payload
        for k, v in enumerate(payload):
            self._on_register(self.page, self.index + k, v, now_ns)
        if self.page == 2 and self.index < _UI_END <= end:
            self._command(self.index, now_ns)

    def i2c_read(self, n: int, now_ns: int) -> bytes:
        """Bytes from the current index on."""
        self._advance(now_ns)
        i = self.index
        if i == _PAGE:
            return bytes([self.page]) * n
        if self.page == 2 and i < _UI_STATUS:
            return self._results[i : i + n].ljust(n, b"\x00")
        m = self.mem.get(self.page)
        if m is None:
            return bytes(n)
        self._status_registers(now_ns)
        return bytes(m[i : i + n]).ljust(n, b"\x00")

    # -- the chip's clock ---------------------------------------------------------------
    def _advance(self, now_ns: int) -> None:
        self._now = now_ns
        if self.pending is not None and self.booted:
            start, t = self.pending
            self.pending = None
            self._command(start, max(t, self.mcu_ready_ns or 0))
        self._tick(now_ns)

    def _status_registers(self, now_ns: int) -> None:
        m0, m1, m2 = self.mem[0], self.mem[1], self.mem[2]
        rom = self.rom_ready_ns is not None and now_ns >= self.rom_ready_ns
        if self.booted and not self.mcu_in_reset:
            if self.boot_report == "uld1.1":
                m0[0x0006], m0[0x0007] = 0x00, 0x00
            else:
                m0[0x0006], m0[0x0007] = 0x80, self.mcu_boot_error & 0xFF
            if self.mcu_stop:  # MCU stopped: vl53l5cx_stop_ranging polls 0x0006 bit 7; ULD 1.2+ then expect
                m0[0x0006] |= 0x80  # GO2 status 1 = 0x84 or 0x85
                m0[0x0007] = 0x84
        elif self.boot_report == "uld1.1":
            m0[0x0006], m0[0x0007] = (0x01 if rom else 0x00), 0x00
        else:
            m0[0x0006], m0[0x0007] = (0x01 if rom and self.mcu_ready_ns is None else 0x00), 0x00
        m1[0x0021] = 0x10 if self.fw_access and (not self._fw_started() or self._check_firmware()) else 0x00
        done = self.cmd_done_ns is not None and now_ns >= self.cmd_done_ns
        m2[_UI_STATUS : _UI_STATUS + 4] = self.cmd_status if done else bytes(4)

    # -- boot -------------------------------------------------------------------------------
    def _on_register(self, page: int, idx: int, v: int, now_ns: int) -> None:
        if page == 0 and idx == 0x000A and v == 0x01 and not self.never_boots:
            self.rom_ready_ns = now_ns + _BOOT_ROM_NS
        elif page == 2 and idx == 0x0003 and v == 0x0D:
            if self.rom_ready_ns is not None and now_ns >= self.rom_ready_ns:
                self.fw_access = True
        elif page == 0 and idx == 0x000B and v == 0x00:
            self.mcu_in_reset = True
            self.mcu_ready_ns = None
        elif page == 0 and idx == 0x000B and v == 0x01:
            self.mcu_in_reset = False
            if self.fw_access and self._check_firmware():
                self.mcu_ready_ns = now_ns + _MCU_BOOT_NS
        elif page == 0 and idx == 0x0004:
            self.address = v & 0x7F  # takes effect for the next transaction
        elif page == 0 and idx == 0x0014:
            self.mcu_stop = v == 0x01
            if self.mcu_stop:
                self.ranging = False

    def _fw_write(self, page: int, index: int, payload: bytes) -> None:
        buf = self.fw[page]
        if index != len(buf):  # the loader takes the image in order from offset 0
            self.bad_commands += 1
            self.fw_bad = True
            return
        buf.extend(payload)

    def _check_firmware(self) -> bool:
        if self.fw_bad:
            return False
        image = bytearray()
        for page, size in _FW_PAGES:
            if len(self.fw[page]) != size:
                return False
            image += self.fw[page]
        return zlib.crc32(bytes(image)) == self.firmware_crc

    def _fw_started(self) -> bool:
        return any(len(b) for b in self.fw.values())

    # -- firmware commands -----------------------------------------------------------------
    @staticmethod
    def _known(idx: int) -> bool:
        """The firmware's variables: calibration and configuration 0x5400-0xBFFF (every group of ST's default
        configuration, crosstalk and NVM command lies there) and the ULD 1.1.2 output variables."""
        return 0x5400 <= idx <= 0xBFFF or idx in _FW_OUTPUT_VARIABLES

    def _refuse(self, why: str, now_ns: int) -> None:
        self.bad_commands += 1
        self.refused.append(why)
        self.cmd_status = _REFUSED
        self.cmd_done_ns = now_ns + _CMD_NS

    def _command(self, start: int, now_ns: int) -> None:
        if not self.booted:
            self.pending = (start, now_ns)  # taken when the MCU runs
            return
        if self.mcu_boot_error:
            self._refuse(f"MCU booted with error {self.mcu_boot_error:#04x}", now_ns)
            return
        m = self.mem[2]
        code = m[0x2FFD]
        length = ((m[0x2FFE] << 8) | m[0x2FFF]) + 4
        self.cmd_done_ns = None
        first = _UI_END - length
        if code == 0x03:  # start ranging: [00 03 00 00]
            if not self._start(now_ns):
                self._refuse("start: output configuration does not match the output list", now_ns)
                return
        elif code in (0x01, 0x02):
            if start != first or length < 8:
                self._refuse(f"command {code} written from {start:#06x}, its word says {first:#06x}", now_ns)
                return
            groups = _parse_groups(m[first : _UI_END - 4], with_data=code == 0x01)
            if groups is None:
                self._refuse(f"command {code}: groups do not end with the end marker", now_ns)
                return
            if code == 0x01:
                unknown = [g[0] for g in groups if not self._known(g[0])]
                if unknown:
                    self._refuse(f"write of unknown variables {[hex(u) for u in unknown]}", now_ns)
                    return
                for idx, _, data in groups:
                    self.dci[idx] = bytearray(_swap(data.ljust(-(-len(data) // 4) * 4, b"\x00"))[: len(data)])
            else:
                answer = bytearray()
                for idx, hdr, _ in groups:
                    n = _group_len(hdr[2], hdr[3])[1]
                    if idx in self.nvm:
                        data = self.nvm[idx][:n].ljust(n, b"\x00")
                    elif self._known(idx):
                        cur = self.dci.get(idx, bytearray(_FW_OUTPUT_VARIABLES.get(idx, 0)))
                        data = _swap(bytes(cur[:n]).ljust(-(-n // 4) * 4, b"\x00"))[:n]
                    else:
                        self._refuse(f"read of unknown variable {idx:#06x}", now_ns)
                        return
                    answer += hdr + data
                answer += b"\x00\x00\x00\x0f"
                m[_UI_ANSWER : _UI_ANSWER + len(answer) + 8] = answer + bytes(8)
        else:
            self._refuse(f"unknown command code {code}", now_ns)
            return
        self.cmd_status = _DONE
        self.cmd_done_ns = now_ns + _CMD_NS

    def resolution(self) -> int:
        z = self.dci.get(_ZONE_CONFIG, bytearray([4, 4]))
        return int(z[0]) * int(z[1])

    def frequency(self) -> int:
        return int(self.dci.get(_FREQ_HZ, bytearray([0, 1]))[1])

    def _enabled_blocks(self) -> list[int]:
        lst = struct.unpack("<12I", bytes(self.dci[_OUTPUT_LIST]))
        en = struct.unpack("<4I", bytes(self.dci[_OUTPUT_ENABLES]))
        return [bh for i, bh in enumerate(lst) if bh and en[i // 32] & (1 << (i % 32))]

    @staticmethod
    def _block_bytes(bh: int) -> int:
        typ, sz = bh & 0xF, (bh >> 4) & 0xFFF
        return 4 + (typ * sz if 0x1 <= typ < 0x0D else sz)

    def _start(self, now_ns: int) -> bool:
        if any(k not in self.dci for k in (_OUTPUT_LIST, _OUTPUT_CONFIG, _OUTPUT_ENABLES)):
            return False
        blocks = self._enabled_blocks()
        size = sum(self._block_bytes(bh) for bh in blocks) + _FRAME_TRAILER
        declared = struct.unpack_from("<I", bytes(self.dci[_OUTPUT_CONFIG]), 0)[0]
        if declared != size or not blocks or blocks[0] != 0x0000000D:
            return False
        self.out_blocks = blocks
        self.frame_size = size
        self.ranging = True
        self.stream = 255
        self._next_frame_ns = now_ns + int(1e9 / max(1, self.frequency()))
        self._results = bytes([255, 0, 0, 0])
        return True

    # -- ranging ------------------------------------------------------------------------------
    def _tick(self, now_ns: int) -> None:
        if not self.ranging or now_ns < self._next_frame_ns:
            return
        period = int(1e9 / max(1, self.frequency()))
        missed = (now_ns - self._next_frame_ns) // period
        self.stream = (self.stream + 1 + int(missed)) % 255
        self._next_frame_ns += (missed + 1) * period
        self._results = self._frame()
        self.frames_made += 1

    def _frame(self) -> bytes:
        z = self.resolution()
        d = self._distances
        if d.size != z:  # given at the other resolution: resample 8x8 <-> 4x4
            g = int(np.sqrt(d.size))
            side = int(np.sqrt(z))
            idx = (np.arange(side) * g) // side
            d = d.reshape(g, g)[np.ix_(idx, idx)].ravel()
        has = np.isfinite(d) & (d > 0)
        dm = np.where(has, d, 0.0)
        if self.range_convention == "radial":
            dm = dm * zone_ray_norms(8 if z == 64 else 4)
        sigma = self._sigma if self._sigma is not None and self._sigma.size == z else seed_sigma(dm)
        if self.noise:
            dm = np.where(has, dm + self.rng.normal(0.0, 1.0, z) * sigma, 0.0)
        status = self._status if self._status is not None and self._status.size == z else np.where(has, 5, 255)
        signal = np.where(has, 2000.0 * (0.1 / np.maximum(dm, 0.02)) ** 2, 0.0)
        ambient = np.full(z, 1.5)
        blocks = bytearray()
        for bh in self.out_blocks[1:]:  # the start block's header sits in the frame header
            block = bh >> 16
            n = self._block_bytes(bh) - 4
            payload = bytearray(n)
            if block == 0x54B4:  # metadata: silicon temperature, int8 at byte 8
                payload[8] = round(self.temperature) & 0xFF
            elif block == 0x54D0:  # ambient, u32 kcps/SPAD * 2048
                payload[:] = np.clip(np.rint(ambient * 2048), 0, 2**32 - 1).astype("<u4").tobytes()
            elif block == 0xCF7C:  # targets detected, u8
                payload[:] = has.astype(np.uint8).tobytes()
            elif block == 0xCFBC:  # signal, u32 kcps/SPAD * 2048
                payload[:] = np.clip(np.rint(signal * 2048), 0, 2**32 - 1).astype("<u4").tobytes()
            elif block == 0xD2BC:  # sigma, u16 mm * 128
                payload[:] = np.clip(np.rint(sigma * 1000 * 128), 0, 65535).astype("<u2").tobytes()
            elif block == 0xD33C:  # distance, i16 mm * 4
                payload[:] = np.clip(np.rint(dm * 1000 * 4), -32768, 32767).astype("<i2").tobytes()
            elif block == 0x55D0:  # SPADs enabled, u32
                payload[:] = np.full(z, 200, "<u4").tobytes()
            elif block == 0xD47C:  # target status, u8
                payload[:] = status.astype(np.uint8).tobytes()
            blocks += struct.pack("<I", bh) + payload
        head = bytearray(16)
        head[0:4] = bytes([0x10, 0x05, 0x05, self.stream])  # host order of the chip's [sc, 0x05, 0x05, 0x10]
        head[4:8] = struct.pack("<I", self.out_blocks[0])
        host = head + blocks + bytearray(8)
        if len(host) != self.frame_size:
            raise AssertionError(f"frame of {len(host)} bytes, declared {self.frame_size}")
        return _swap(host)
