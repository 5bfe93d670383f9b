"""Emulated Linux i2c-dev ioctls over a simulated bus, so a real ``smbus2.SMBus`` object can drive the simulators.

``smbus2.SMBus`` talks to the kernel with ``ioctl(fd, request, arg)``:
``I2C_SLAVE``/``I2C_SLAVE_FORCE`` select the target address, ``I2C_FUNCS``
asks for the adapter's capabilities and ``I2C_SMBUS`` carries one SMBus
transfer (``struct i2c_smbus_ioctl_data``: read/write flag, command byte,
size, pointer to the data union). :class:`I2cDevEmulator` answers these
requests from a :class:`~shape_sensing.sim.i2c_bus.SimI2CBus`, as the
kernel's i2c-dev would answer them from an adapter. Patch it over the
``ioctl`` that ``smbus2.smbus2`` imported (tests use ``monkeypatch``), give the
``SMBus`` object any file descriptor, and the library's own code runs
unchanged against the simulated mux tree.

Only the transfer sizes the drivers use are emulated (byte, byte data, I2C
block data) plus ``I2C_RDWR`` combined transfers (16-bit register addresses,
long bursts; at most 42 messages of at most 8192 bytes, as the kernel allows);
any other request raises ``OSError(EOPNOTSUPP)``, as an adapter
without that function would.
"""

from __future__ import annotations

import errno
from typing import Any

from shape_sensing.sim.i2c_bus import SimI2CBus

__all__ = ["I2C_FUNCS", "I2C_RDWR", "I2C_SLAVE", "I2C_SLAVE_FORCE", "I2C_SMBUS", "I2cDevEmulator", "RealSMBus"]

# From uapi/linux/i2c-dev.h and uapi/linux/i2c.h.
I2C_SLAVE = 0x0703
I2C_SLAVE_FORCE = 0x0706
I2C_FUNCS = 0x0705
I2C_SMBUS = 0x0720
I2C_RDWR = 0x0707
I2C_RDWR_IOCTL_MAX_MSGS = 42  # uapi/linux/i2c-dev.h
I2C_MSG_MAX_LEN = 8192  # drivers/i2c/i2c-dev.c refuses longer messages with EINVAL
_READ, _WRITE = 1, 0
_BYTE, _BYTE_DATA, _I2C_BLOCK_DATA = 1, 2, 8
_FUNCS = 0x0EFF0009  # I2C + SMBus byte, byte data, word data, I2C block read/write (as a typical adapter)


class I2cDevEmulator:
    """Answers ``ioctl`` calls of ``smbus2`` from a simulated bus.

    Args:
        bus: the simulated bus the transfers go to.
    """

    def __init__(self, bus: SimI2CBus) -> None:
        self.bus = bus
        self.address: int | None = None
        self.requests = 0

    def ioctl(self, fd: int, request: int, arg: Any = 0) -> int:
        """``fcntl.ioctl`` replacement (signature as smbus2 calls it)."""
        self.requests += 1
        if request in (I2C_SLAVE, I2C_SLAVE_FORCE):
            address = int(arg)
            if not 0 <= address <= 0x7F:
                raise OSError(errno.EINVAL, "Invalid argument")
            self.address = address
            return 0
        if request == I2C_FUNCS:
            arg.value = _FUNCS
            return 0
        if request == I2C_RDWR:
            return self._rdwr(arg)
        if request != I2C_SMBUS:
            raise OSError(errno.ENOTTY, f"Inappropriate ioctl for device (request {request:#06x})")
        if self.address is None:
            raise OSError(errno.EINVAL, "Invalid argument (no I2C_SLAVE address set)")
        return self._smbus(arg)

    def _rdwr(self, arg: Any) -> int:
        """``struct i2c_rdwr_ioctl_data``: the messages carry their own addresses (no I2C_SLAVE needed)."""
        n = int(arg.nmsgs)
        if not 1 <= n <= I2C_RDWR_IOCTL_MAX_MSGS:
            raise OSError(errno.EINVAL, f"Invalid argument ({n} messages)")
        msgs = [arg.msgs[i] for i in range(n)]
        for m in msgs:
            if int(m.len) > I2C_MSG_MAX_LEN:
                raise OSError(errno.EINVAL, f"Invalid argument (message of {int(m.len)} bytes > {I2C_MSG_MAX_LEN})")
        self.bus.i2c_rdwr(*msgs)
        return n

    def _smbus(self, msg: Any) -> int:
        addr, rw, cmd, size = self.address, int(msg.read_write), int(msg.command), int(msg.size)
        assert addr is not None
        data = msg.data.contents
        if size == _BYTE:
            if rw == _READ:
                data.byte = self.bus.read_byte(addr)
            else:
                self.bus.write_byte(addr, cmd)  # i2c_smbus_write_byte sends the value as the command byte
        elif size == _BYTE_DATA:
            if rw == _READ:
                data.byte = self.bus.read_byte_data(addr, cmd)
            else:
                self.bus.write_byte_data(addr, cmd, int(data.byte))
        elif size == _I2C_BLOCK_DATA:
            n = int(data.block[0])
            if not 1 <= n <= 32:
                raise OSError(errno.EINVAL, f"Invalid argument (block length {n})")
            if rw == _READ:
                values = self.bus.read_i2c_block_data(addr, cmd, n)
                data.block[0] = n
                data.block[1 : n + 1] = values
            else:
                self.bus.write_i2c_block_data(addr, cmd, list(data.block[1 : n + 1]))
        else:
            raise OSError(errno.EOPNOTSUPP, f"Operation not supported (SMBus size {size})")
        return 0


class RealSMBus:
    """Real ``smbus2.SMBus`` objects driving simulated buses: one emulator per file descriptor.

    Use as a context manager: ``with RealSMBus([bus_a, bus_b]) as (a, b): ...``; it patches the ``ioctl``
    that ``smbus2.smbus2`` imported for the duration and restores it after.
    """

    def __init__(self, buses: list[SimI2CBus]) -> None:
        self.emulators = {1000 + i: I2cDevEmulator(b) for i, b in enumerate(buses)}
        self._saved: Any = None

    def _ioctl(self, fd: int, request: int, arg: Any = 0) -> int:
        emu = self.emulators.get(fd)
        if emu is None:
            raise OSError(errno.EBADF, f"Bad file descriptor {fd}")
        return emu.ioctl(fd, request, arg)

    def __enter__(self) -> list[Any]:
        import smbus2
        import smbus2.smbus2 as module

        self._saved = getattr(module, "ioctl")  # noqa: B009 (not in smbus2's stubs)
        setattr(module, "ioctl", self._ioctl)  # noqa: B010
        out = []
        for fd in self.emulators:
            b = smbus2.SMBus()  # not opened: no /dev/i2c-N needed
            b.fd = fd
            out.append(b)
        return out

    def __exit__(self, *exc: object) -> None:
        import smbus2.smbus2 as module

        setattr(module, "ioctl", self._saved)  # noqa: B010
