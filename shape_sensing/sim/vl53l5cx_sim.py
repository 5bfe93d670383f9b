"""Register-level VL53L5CX simulator: boot and firmware-upload handshake, DCI, ranging frames from given distances.

Addressing as the chip: two index bytes (16-bit register index) then data,
auto-incrementing; the page register 0x7FFF selects the memory page.

Boot (what it checks, as the chip's boot ROM and MCU would):

* the reboot sequence must end with 0x000A = 0x01 on page 0; the boot ROM
  then sets GO2 status 0x0006 = 0x01 after 1 ms (never, with ``never_boots``);
* firmware access (0x0021 & 0x10 on page 1) only after 0x0003 = 0x0D on page 2;
* the firmware image must be written to pages 0x09, 0x0A and 0x0B from
  offset 0, contiguously, to exactly 0x8000, 0x8000 and 0x5000 bytes, and
  match the image the chip expects (CRC-32); otherwise the second firmware
  check (0x0021 & 0x10) never sets and the MCU never boots;
* after 0x000B = 0x01 with a good image, the MCU boots in 5 ms (0x0006 bit 7,
  0x0007 bit 0).

Firmware side (page 2): a command ends at 0x2FFF; its last word selects it
(byte 0x2FFD: 1 = data transfer: offsets, crosstalk, configuration or a DCI
write; 2 = read: NVM or a DCI read; 3 = start ranging). The status word at
0x2C00 reads ``[2, 3, 0, 0]`` once a command is done (1 ms). DCI variables
are held in host byte order; the DCI read answer is placed at 0x2C04 in the
chip's (big-endian word) order. Start checks the output configuration the
host sent and reports the frame size at DCI 0x5440 bytes 8-9.

Ranging: a frame every 1/f s after start (f from DCI 0x5458), built from the
per-zone distances given with :meth:`SimVL53L5CX.set_zones` (boresight
distances; NaN = no target): status 5 by default, sigma from the seed paper's
distance model when not given, signal falling with distance squared, ambient
constant; quantised as the chip reports them (distance 1/4 mm, sigma 1/128 mm,
rates 1/2048 kcps). The stream counter counts frames (wrapping before 255).

Faults: ``dead`` (NACK), ``never_boots``, :meth:`power_on_reset` (a reset
mid-stream: page 0, nothing booted).
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

from shape_sensing.drivers.vl53l5cx import (
    DCI,
    FIRMWARE_PAGES,
    NVM_DATA_SIZE,
    UI_CMD_START,
    UI_CMD_STATUS,
    output_list,
    swap_words,
)

__all__ = ["SimVL53L5CX", "seed_sigma"]

_PAGE = 0x7FFF
_BOOT_ROM_NS = 1_000_000
_MCU_BOOT_NS = 5_000_000
_CMD_NS = 1_000_000


def seed_sigma(d_m: np.ndarray) -> np.ndarray:
    """Range standard deviation (m) from the seed paper's Table I: 0.014d -> 0.012d (0.025-0.6 m), -> 0.006d (1.2 m)."""
    d = np.asarray(d_m, float)
    k = np.interp(d, [0.025, 0.6, 1.2], [0.014, 0.012, 0.006])
    return k * d


class SimVL53L5CX:
    """A simulated VL53L5CX.

    Args:
        address: 7-bit address at power-up (0x29).
        name: label.
        firmware_crc: CRC-32 of the firmware image the chip accepts (``zlib.crc32`` of the 0x15000 bytes).
        seed: seed of the NVM contents and range noise.
        noise: add Gaussian range noise with the reported sigma.
    """

    def __init__(
        self, address: int = 0x29, name: str = "", *, firmware_crc: int, seed: int = 0, noise: bool = False
    ) -> None:
        self.power_on_address = address
        self.name = name or f"vl53l5cx@{address:#04x}"
        self.firmware_crc = firmware_crc
        self.rng = np.random.default_rng(seed)
        self.noise = noise
        self.nvm = bytes(self.rng.integers(0, 256, NVM_DATA_SIZE, dtype=np.uint8))
        self.dead = False
        self.never_boots = False
        self.lpn_low = False  # LPn held low: the I2C interface is off
        self.boots = 0
        self.resets = 0
        self.frames_made = 0
        self.bad_commands = 0
        self.temperature = 31.0
        self._distances = np.full(64, np.nan)
        self._status: np.ndarray | None = None
        self._sigma: np.ndarray | None = None
        self.power_on_reset()

    # -- harness ---------------------------------------------------------------------
    def power_on_reset(self, now_ns: int = 0) -> None:
        """Back to power-up: address, page 0, no firmware, not ranging."""
        self.resets += 1
        self.address = self.power_on_address
        self.mem: dict[int, bytearray] = {p: bytearray(0x8000) for p in (0, 1, 2)}
        self.mem[0][0x0000] = 0xF0
        self.mem[0][0x0001] = 0x02
        self.page = 0
        self.index = 0
        self.fw = {p: bytearray() for p, _, _ in FIRMWARE_PAGES}
        self.fw_ok = False
        self.fw_bad = False
        self.rom_ready_ns: int | None = None
        self.mcu_ready_ns: int | None = None
        self.fw_access = False
        self.booted = False
        self.cmd_done_ns: int | None = None
        self.dci: dict[int, bytearray] = {}
        self.ranging = False
        self.frame_size = 0
        self.stream = 0
        self._next_frame_ns = 0
        self._results = bytes(4)

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
        self._tick(now_ns)
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
        if self.page == 2 and self.index <= 0x2FFF < end:
            self._command(self.index, end, now_ns)

    def i2c_read(self, n: int, now_ns: int) -> bytes:
        """Bytes from the current index on."""
        self._tick(now_ns)
        i = self.index
        if i == _PAGE:
            return bytes([self.page]) * n
        if self.page == 2 and i < 0x2C00:
            return self._results[i : i + n].ljust(n, b"\x00")
        m = self.mem.get(self.page)
        if m is None:
            return bytes(n)
        self._refresh_status(now_ns)
        return bytes(m[i : i + n]).ljust(n, b"\x00")

    # -- boot -------------------------------------------------------------------------------
    def _on_register(self, page: int, idx: int, v: int, now_ns: int) -> None:
        if page == 0 and idx == 0x000A and v == 0x01 and not self.never_boots:
            self.rom_ready_ns = now_ns + _BOOT_ROM_NS
        elif (
            page == 2 and idx == 0x0003 and v == 0x0D and self.rom_ready_ns is not None and now_ns >= self.rom_ready_ns
        ):
            self.fw_access = True
        elif page == 0 and idx == 0x000B and v == 0x00:
            self.rom_ready_ns = None  # MCU held in reset: the boot-ROM status clears
        elif page == 0 and idx == 0x000B and v == 0x01:
            self.fw_ok = self._check_firmware()
            if self.fw_ok and self.fw_access:
                self.mcu_ready_ns = now_ns + _MCU_BOOT_NS
        elif page == 0 and idx == 0x0004:
            self.address = v & 0x7F  # takes effect for the next transaction
        elif page == 0 and idx == 0x0014 and v == 0x01:
            self.ranging = False  # MCU stop

    def _fw_write(self, page: int, index: int, payload: bytes) -> None:
        buf = self.fw[page]
        if index != len(buf):  # the chip's loader takes the image in order from offset 0
            self.bad_commands += 1
            self.fw_bad = True
            return
        buf.extend(payload)

    def _check_firmware(self) -> bool:
        if self.fw_bad:
            return False
        image = bytearray()
        for page, _, size in FIRMWARE_PAGES:
            if len(self.fw[page]) != size:
                return False
            image += self.fw[page]
        return zlib.crc32(bytes(image)) == self.firmware_crc

    def _refresh_status(self, now_ns: int) -> None:
        m0, m1, m2 = self.mem[0], self.mem[1], self.mem[2]
        m0[0x0006] = 0
        m0[0x0007] = 0
        if self.rom_ready_ns is not None and now_ns >= self.rom_ready_ns:
            m0[0x0006] = 0x01
        if self.mcu_ready_ns is not None and now_ns >= self.mcu_ready_ns:
            self.booted = True
            m0[0x0006] = 0x80
            m0[0x0007] = 0x01
        m1[0x0021] = 0x10 if self.fw_access and (not self._fw_started() or self._fw_complete_ok()) else 0x00
        status = [2, 3, 0, 0] if self.cmd_done_ns is not None and now_ns >= self.cmd_done_ns else [0, 0, 0, 0]
        m2[UI_CMD_STATUS : UI_CMD_STATUS + 4] = bytes(status)

    def _fw_started(self) -> bool:
        return any(len(b) for b in self.fw.values())

    def _fw_complete_ok(self) -> bool:
        return self._check_firmware()

    # -- firmware commands -----------------------------------------------------------------
    def _command(self, start: int, end: int, now_ns: int) -> None:
        if not self.booted:
            self.bad_commands += 1
            return
        m = self.mem[2]
        code = m[0x2FFD]
        length = end - start
        self.cmd_done_ns = None
        ok = True
        if code == 0x03 and start == 0x2FFC:
            ok = self._start(now_ns)
        elif code == 0x02 and start == 0x2FF4:  # DCI read
            idx = (m[0x2FF4] << 8) | m[0x2FF5]
            size = (m[0x2FF6] << 4) | (m[0x2FF7] >> 4)
            data = self._dci_get(idx, size)
            m[UI_CMD_START : UI_CMD_START + size + 12] = swap_words(bytes(4) + data + bytes(8))
        elif code == 0x02 and start == 0x2FD8:  # NVM read
            m[UI_CMD_START : UI_CMD_START + NVM_DATA_SIZE] = self.nvm
        elif code == 0x01 and m[0x2FFC] == 0x05:  # DCI write: header, data, footer 00 00 00 0F 05 01 sz sz
            size = ((m[0x2FFE] << 8) | m[0x2FFF]) - 8
            hdr = 0x2FFF - (size + 12) + 1
            if hdr != start or size < 0:
                ok = False
            else:
                idx = (m[hdr] << 8) | m[hdr + 1]
                self.dci[idx] = bytearray(swap_words(bytes(m[hdr + 4 : hdr + 4 + size])))
        elif code == 0x01 and length in (488, 776, 972):  # offsets, crosstalk, default configuration
            if length == 972:
                self._default_dci()
        else:
            ok = False
        if ok:
            self.cmd_done_ns = now_ns + _CMD_NS
        else:
            self.bad_commands += 1

    def _default_dci(self) -> None:
        d = self.dci
        d[DCI.ZONE_CONFIG] = bytearray([4, 4, 0, 0, 8, 8, 0, 0])
        d[DCI.FREQ_HZ] = bytearray([0, 1, 0, 0])
        d[DCI.INT_TIME] = bytearray(struct.pack("<I", 5000) + bytes(16))
        d[DCI.SHARPENER] = bytearray(16)
        d[DCI.SHARPENER][0x0D] = (5 * 255) // 100
        d[DCI.TARGET_ORDER] = bytearray([2, 0, 0, 0])
        d[DCI.DSS_CONFIG] = bytearray(16)
        d[DCI.GLARE_FILTER] = bytearray(40)

    def _dci_get(self, idx: int, size: int) -> bytes:
        if idx == DCI.RANGE_DATA_CONTENT:
            b = bytearray(size)
            b[8:10] = struct.pack("<H", self.frame_size)
            return bytes(b)
        cur = self.dci.get(idx, bytearray(size))
        return bytes(cur[:size]).ljust(size, b"\x00")

    def resolution(self) -> int:
        z = self.dci.get(DCI.ZONE_CONFIG, bytearray([4, 4]))
        return int(z[0]) * int(z[1])

    def frequency(self) -> int:
        return int(self.dci.get(DCI.FREQ_HZ, bytearray([0, 1]))[1])

    def _start(self, now_ns: int) -> bool:
        lst_raw = self.dci.get(DCI.OUTPUT_LIST)
        cfg = self.dci.get(DCI.OUTPUT_CONFIG)
        en = self.dci.get(DCI.OUTPUT_ENABLES)
        if lst_raw is None or cfg is None or en is None:
            return False
        self.out_list = list(struct.unpack("<12I", bytes(lst_raw)))
        self.enables = list(struct.unpack("<4I", bytes(en)))
        size = 24
        for i, bh in enumerate(self.out_list):
            if bh and self.enables[i // 32] & (1 << (i % 32)):
                typ, sz = bh & 0xF, (bh >> 4) & 0xFFF
                size += 4 + (typ * sz if 0x1 <= typ < 0x0D else sz)
        declared = struct.unpack_from("<I", bytes(cfg), 0)[0]
        if declared != size:
            return False
        self.frame_size = size
        self.ranging = True
        self.stream = 0
        self._next_frame_ns = now_ns + int(1e9 / max(1, self.frequency()))
        self._results = bytes(4)
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
        sigma = self._sigma if self._sigma is not None and self._sigma.size == z else seed_sigma(dm)
        if self.noise:
            dm = np.where(has, dm + self.rng.normal(0.0, 1.0, z) * sigma, 0.0)
        status = self._status if self._status is not None and self._status.size == z else np.where(has, 5, 255)
        signal = np.where(has, 2000.0 * (0.1 / np.maximum(dm, 0.02)) ** 2, 0.0)
        ambient = np.full(z, 1.5)
        blocks = bytearray()
        for i, bh in enumerate(self.out_list):
            if not bh or not self.enables[i // 32] & (1 << (i % 32)):
                continue
            typ, sz, idx = bh & 0xF, (bh >> 4) & 0xFFF, bh >> 16
            n = typ * sz if 0x1 < typ < 0x0D else sz
            payload = bytearray(n)
            if idx == 0x54B4:
                payload[8] = round(self.temperature) & 0xFF
            elif idx == 0x54D0:
                payload[:] = np.clip(np.rint(ambient * 2048), 0, 2**32 - 1).astype("<u4").tobytes()
            elif idx == 0xCF7C:
                payload[:] = has.astype(np.uint8).tobytes()
            elif idx == 0xCFBC:
                payload[:] = np.clip(np.rint(signal * 2048), 0, 2**32 - 1).astype("<u4").tobytes()
            elif idx == 0xD2BC:
                payload[:] = np.clip(np.rint(sigma * 1000 * 128), 0, 65535).astype("<u2").tobytes()
            elif idx == 0xD33C:
                payload[:] = np.clip(np.rint(dm * 1000 * 4), -32768, 32767).astype("<i2").tobytes()
            elif idx == 0x55D0:
                payload[:] = np.full(z, 200, "<u4").tobytes()
            elif idx == 0xD47C:
                payload[:] = status.astype(np.uint8).tobytes()
            blocks += struct.pack("<I", bh) + payload
        frame_id = (self.frames_made * 7 + 1) & 0xFFFF
        host = bytearray(16) + blocks + bytearray(8)
        host[0:4] = bytes([0x10, 0x05, 0x05, self.stream])  # swapped: the chip's bytes are [sc, 5, 5, 0x10]
        host[8:10] = frame_id.to_bytes(2, "big")
        n = len(host)
        host[n - 4 : n - 2] = frame_id.to_bytes(2, "big")
        assert n == self.frame_size, (n, self.frame_size)
        return swap_words(host)

    def output_ok(self) -> bool:
        """Whether the output list matches what :func:`output_list` computes (for tests)."""
        return self.frame_size == output_list(self.resolution())[2]
