"""``shape-sensing probe`` on simulated buses: random mux trees, a dead channel, conflicts, wrong ids, serial, CAN.

The simulated chips answer from their own register models (sim/), so the probe's identification (its
datasheet constants) is checked against them; the trees are drawn at random and the probe must find
exactly what was wired. The configuration draft is loaded by the node's own schema and drives the BNO055
chain driver on the same simulated hardware.
"""

from __future__ import annotations

import argparse
import random
from typing import Any

import can
import numpy as np
import pytest

from shape_sensing.cli import main as cli_main
from shape_sensing.cli import probe
from shape_sensing.config import load_node_params
from shape_sensing.drivers.base_station import SCHEMA as BS_SCHEMA
from shape_sensing.drivers.bno055_chain import SCHEMA as CHAIN_SCHEMA
from shape_sensing.drivers.bno055_chain import Bno055Chain, ChainOptions
from shape_sensing.drivers.i2c_topology import Topology
from shape_sensing.drivers.wt901_config import SCHEMA as WT901_SCHEMA
from shape_sensing.sim.base_station_emulator import BaseStationEmulator
from shape_sensing.sim.bno055_sim import SimBNO055
from shape_sensing.sim.i2c_bus import Segment, SimI2CBus
from shape_sensing.sim.ism330bx_sim import SimISM330BX
from shape_sensing.sim.tca9548a_sim import SimTCA9548A
from shape_sensing.sim.vl53l5cx_sim import SimVL53L5CX
from shape_sensing.sim.wt901_emulator import Wt901CanEmulator, Wt901Emulator

LEAVES = [(0x28, "BNO055"), (0x29, "BNO055"), (0x29, "VL53L5CX"), (0x6A, "ISM330BX"), (0x6B, "ISM330BX")]


def _chip(address: int, kind: str, rng: random.Random) -> Any:
    if kind == "BNO055":
        return SimBNO055(address, seed=rng.randrange(1000))
    if kind == "VL53L5CX":
        return SimVL53L5CX(address, firmware_crc=0)
    return SimISM330BX(address, seed=rng.randrange(1000))


def _random_tree(rng: random.Random, seg: Segment, used: set[int], depth: int) -> dict[int, Any]:
    """Wire random devices on ``seg`` (addresses unique along every path); returns the truth:
    address -> kind, or address -> {channel: truth} for a mux."""
    truth: dict[int, Any] = {}
    here = set(used)
    for address, kind in rng.sample(LEAVES, rng.randrange(0, 4)):
        if address in here:
            continue
        here.add(address)
        seg.attach(_chip(address, kind, rng))
        truth[address] = kind
    if depth < 3:
        muxes = []
        for _ in range(rng.randrange(0 if depth else 1, 3)):  # every address of this segment before any subtree
            address = rng.choice([a for a in range(0x70, 0x78) if a not in here])
            here.add(address)
            muxes.append(seg.attach(SimTCA9548A(address)))
        for mux in muxes:
            truth[mux.address] = {ch: _random_tree(rng, mux.channels[ch], here, depth + 1) for ch in range(8)}
    return truth


def _found(seg: probe.Segment) -> dict[int, Any]:
    out: dict[int, Any] = {}
    for d in seg.devices:
        out[d.address] = {ch: _found(c) for ch, c in d.channels.items()} if d.kind == "TCA9548A" else d.kind
    return out


def _dead(truth: dict[int, Any], where: str = "sim") -> set[str]:
    """Where the probe must report a dead branch: an empty channel below a used one, a switch with nothing behind."""
    out = set()
    for address, t in truth.items():
        if isinstance(t, dict):
            used = [ch for ch, sub in t.items() if sub]
            if not used:
                out.add(f"{where} {address:#04x}")
            for ch, sub in t.items():
                path = f"{where} > {address:#04x} ch{ch}"
                if not sub and used and ch < max(used):
                    out.add(path)
                out |= _dead(sub, path)
    return out


def _args(**kw: Any) -> argparse.Namespace:
    base = {"i2c": None, "serial": [], "can": [], "window": 0.05, "write_config": None}
    return argparse.Namespace(**(base | kw))


@pytest.mark.parametrize("seed", range(8))
def test_random_trees_are_found_exactly(seed):
    rng = random.Random(seed)
    bus = SimI2CBus(seed=seed)
    truth = _random_tree(rng, bus.host, set(), 0)
    tree = probe.probe_i2c(bus, "sim")
    assert _found(tree.root) == truth
    report = probe.ProbeReport(i2c=[tree])
    dead = {p.split(": dead branch")[0] for p in report.problems() if "dead branch" in p}
    assert dead == _dead(truth)
    assert all("dead branch" in p for p in report.problems())  # nothing else is wrong in a clean tree
    assert bus.stats.conflicts == 0  # one channel open at a time: the probe never exposed two chips at once
    # every mux was left closed
    assert all(m.control == 0 for m in _muxes(bus.host))


def _muxes(seg: Segment) -> list[SimTCA9548A]:
    out = []
    for d in seg.devices:
        if isinstance(d, SimTCA9548A):
            out.append(d)
            for ch in d.channels:
                out += _muxes(ch)
    return out


def _vine_tree() -> tuple[SimI2CBus, dict[str, Any]]:
    """root 0x70: ch0 child 0x71 (ch0: 0x28, 0x29; ch1: 0x28), ch1 0x28 + ISM330BX 0x6A, ch2 VL53L5CX."""
    bus = SimI2CBus()
    root = bus.host.attach(SimTCA9548A(0x70))
    child = root.channels[0].attach(SimTCA9548A(0x71))
    chips = {
        "a": child.channels[0].attach(SimBNO055(0x28, seed=1)),
        "b": child.channels[0].attach(SimBNO055(0x29, seed=2)),
        "c": child.channels[1].attach(SimBNO055(0x28, seed=3)),
        "d": root.channels[1].attach(SimBNO055(0x28, seed=4)),
        "imu": root.channels[1].attach(SimISM330BX(0x6A)),
        "tof": root.channels[2].attach(SimVL53L5CX(0x29, firmware_crc=0)),
        "root": root,
        "child": child,
    }
    return bus, chips


def test_a_dead_mux_channel_is_a_dead_branch_and_the_rest_is_found():
    bus, chips = _vine_tree()
    chips["root"].channels[1] = Segment("broken wire")  # its chips stay wired to a segment nothing connects
    tree = probe.probe_i2c(bus, "sim")
    report = probe.ProbeReport(i2c=[tree])
    assert report.problems() == ["sim > 0x70 ch1: dead branch: nothing answers behind this channel, though ch2 is used"]
    found = _found(tree.root)
    assert found[0x70][0][0x71][0] == {0x28: "BNO055", 0x29: "BNO055"}
    assert found[0x70][0][0x71][1] == {0x28: "BNO055"}
    assert found[0x70][1] == {}
    assert found[0x70][2] == {0x29: "VL53L5CX"}


def test_two_chips_at_one_address_are_reported():
    # a BNO055 strapped to 0x29 beside a VL53L5CX at its power-up address 0x29: the bus ANDs their answers
    bus = SimI2CBus()
    bus.host.attach(SimBNO055(0x29))
    bus.host.attach(SimVL53L5CX(0x29, firmware_crc=0))
    report = probe.ProbeReport(i2c=[probe.probe_i2c(bus, "sim")])
    [problem] = report.problems()
    # CHIP_ID 0xA0 & 0xF0 (the ToF's page-0 byte) is still 0xA0: the sub-ids (ACC 0xFB & 0x02 ...) give it away
    assert problem == "sim 0x29: ACC/MAG/GYR_ID read 02 00 00, expected fb 32 0f (two chips at one address?)"
    assert bus.stats.conflicts > 0  # (the simulated bus saw both answer)


def test_an_address_conflict_across_mux_levels_is_reported():
    bus = SimI2CBus()
    bus.host.attach(SimBNO055(0x29))
    mux = bus.host.attach(SimTCA9548A(0x70))
    mux.channels[3].attach(SimVL53L5CX(0x29, firmware_crc=0))
    report = probe.ProbeReport(i2c=[probe.probe_i2c(bus, "sim")])
    conflicts = [p for p in report.problems() if "address conflict" in p]
    assert conflicts == [
        "sim > 0x70 ch3 0x29: address conflict: 0x29 also answers upstream (BNO055); with this channel open the bus "
        "sees both"
    ]


def test_chips_answering_with_a_wrong_id_are_named():
    bus = SimI2CBus()
    bno = bus.host.attach(SimBNO055(0x28))
    bno.regs[0x00] = 0xA1
    imu = bus.host.attach(SimISM330BX(0x6B))
    imu.regs[0x0F] = 0x6B  # another ST part's WHO_AM_I
    problems = probe.ProbeReport(i2c=[probe.probe_i2c(bus, "sim")]).problems()
    assert any(p.startswith("sim 0x28: CHIP_ID 0xa1, expected 0xa0 for a BNO055") for p in problems)
    assert any(p.startswith("sim 0x6b: WHO_AM_I 0x6b, expected 0x71 for an ISM330BX") for p in problems)


def test_a_mux_that_does_not_switch_is_reported():
    bus = SimI2CBus()
    mux = bus.host.attach(SimTCA9548A(0x72))
    mux.stuck = True
    mux.channels[0].attach(SimBNO055(0x28))
    problems = probe.ProbeReport(i2c=[probe.probe_i2c(bus, "sim")]).problems()
    assert problems == [  # not taken for a switch: nothing behind it is scanned
        "sim 0x72: control byte reads back ['0x0', '0x0', '0x0'] after writing 0x00, 0x01, 0x00: not a TCA9548A, or "
        "a switch that does not switch"
    ]


# -- serial and CAN ----------------------------------------------------------------------------------------------


class FakePort:
    """A UART: the device's bytes at its own rate, line noise at any other (what a wrong baud rate reads)."""

    def __init__(self, data: bytes, baud: int, device_baud: int, rng: np.random.Generator) -> None:
        self.data = data if baud == device_baud else rng.integers(0, 256, len(data), dtype=np.uint8).tobytes()
        self.pos = 0

    def read(self, n: int) -> bytes:
        out = self.data[self.pos : self.pos + n]
        self.pos += len(out)
        return out

    def close(self) -> None:
        pass


def _ports() -> dict[str, tuple[bytes, int]]:
    wt = Wt901Emulator(rsw=0x020E)
    wt_bytes = b"".join(wt.cycle_bytes(np.deg2rad([5.0 * k, -3.0, 40.0])) for k in range(40))
    bs = BaseStationEmulator()
    bs_bytes = b"".join(bs.step(0.01 * k, 0.1 + 0.001 * k, 2000.0) for k in range(40))
    return {"/dev/ttyUSB0": (wt_bytes, 230400), "/dev/ttyACM0": (bs_bytes, 115200), "/dev/ttyUSB1": (b"", 9600)}


def _opener(ports: dict[str, tuple[bytes, int]]):
    rng = np.random.default_rng(0)

    def open_port(port: str, baud: int) -> FakePort:
        if port not in ports:
            raise OSError(f"[Errno 2] could not open port {port}: No such file or directory")
        data, device_baud = ports[port]
        return FakePort(data, baud, device_baud, rng)

    return open_port


def test_serial_devices_are_found_at_their_baud_rate():
    open_port = _opener(_ports())
    wt = probe.probe_serial("/dev/ttyUSB0", open_port, window_s=0.05)
    assert wt is not None and (wt.kind, wt.baud) == ("WT901", 230400)
    assert "types 0x51 0x52 0x53 0x59" in wt.detail
    bs = probe.probe_serial("/dev/ttyACM0", open_port, window_s=0.05)
    assert bs is not None and (bs.kind, bs.baud) == ("base station", 115200)
    assert probe.probe_serial("/dev/ttyUSB1", open_port, window_s=0.05) is None  # silent port: nothing claimed


def test_wt901_boards_on_can_are_found():
    rx = can.Bus(interface="virtual", channel="probe_test", receive_own_messages=False)
    tx = can.Bus(interface="virtual", channel="probe_test")
    try:
        emu = Wt901CanEmulator(tx, [0x101, 0x102])
        for k in range(3):
            emu.send_cycle(np.deg2rad([[k, 2.0, 3.0], [4.0, k, 6.0]]))
        tx.send(can.Message(arbitration_id=0x200, data=b"\x01\x02", is_extended_id=False))  # something else
        found = probe.probe_can("vcan", rx, window_s=0.2)
    finally:
        rx.shutdown()
        tx.shutdown()
    assert [(c.can_id, c.extended, c.types) for c in found] == [
        (0x101, False, [0x51, 0x52, 0x53, 0x54]),
        (0x102, False, [0x51, 0x52, 0x53, 0x54]),
    ]


# -- the command ----------------------------------------------------------------------------------------------


def test_command_prints_the_tree_and_writes_a_draft_the_chain_driver_runs(tmp_path, capsys):
    bus, _chips = _vine_tree()
    out = tmp_path / "robot.yaml"
    rc = probe.run(_args(serial=["/dev/ttyUSB0", "/dev/ttyACM0"], write_config=str(out)),
                   i2c={"/dev/i2c-1": (bus, 1)}, open_port=_opener(_ports()), can_buses={})  # fmt: skip
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "0x71 TCA9548A" in text and "0x29 VL53L5CX (device id 0xf0, revision 0x02)" in text
    assert "serial /dev/ttyUSB0: WT901 at 230400 bit/s" in text and "0 problem(s)" in text
    params = load_node_params(out, CHAIN_SCHEMA)
    assert params["bus"] == 1 and params["sensor_addresses"] == [0x28, 0x29, 0x28, 0x28]
    wt = load_node_params(out, WT901_SCHEMA)  # the UART WT901 and base station sections load with their schemas
    assert (wt["mode"], wt["ports"], wt["baud"]) == ("uart", ["/dev/ttyUSB0"], 230400)
    assert load_node_params(out, BS_SCHEMA)["port"] == "/dev/ttyACM0"
    # the drafted topology drives the chain driver on the very hardware that was probed
    topo = Topology.from_params(params)
    chain = Bno055Chain(bus, topo, ChainOptions(mag_rate=0.0, capture_calibration=False), clock=bus.clock,
                        sleep=bus.sleep)  # fmt: skip
    assert chain.start() == []
    assert len(chain.sweep().readings) == 4


def test_command_exit_status_and_errors(tmp_path, capsys):
    bus, chips = _vine_tree()
    chips["root"].channels[1] = Segment("broken wire")
    assert probe.run(_args(), i2c={"sim": (bus, None)}, can_buses={}) == 1  # a dead branch
    assert "dead branch" in capsys.readouterr().out
    empty = SimI2CBus()
    rc = probe.run(_args(write_config=str(tmp_path / "x.yaml")), i2c={"sim": (empty, None)}, can_buses={})
    assert rc == 2 and "no known sensor found" in capsys.readouterr().err
    rc = probe.run(_args(serial=["/dev/ttyNOPE"]), i2c={}, open_port=_opener({}), can_buses={})
    assert rc == 2 and "serial /dev/ttyNOPE: cannot read" in capsys.readouterr().out
    assert cli_main(["probe", "--window", "0", "--i2c", "--serial"]) == 2
    assert "--window 0.0: expected > 0 s" in capsys.readouterr().err


def test_can_draft_loads_with_the_wt901_schema(tmp_path):
    report = probe.ProbeReport(can=[probe.CanFind("can0", 0x101, False, [0x51, 0x53]),
                                    probe.CanFind("can0", 0x102, False, [0x51, 0x53])])  # fmt: skip
    text, kinds = probe.draft_config(report, {})
    assert kinds == ["hyper-redundant robot with WT901s over CAN (rigid-module)"]
    (tmp_path / "c.yaml").write_text(text)
    p = load_node_params(tmp_path / "c.yaml", WT901_SCHEMA)
    assert (p["mode"], p["can_channel"], p["can_ids"], p["frame_ids"]) == ("can", "can0", [257, 258],
                                                                           ["platform_0", "platform_1"])  # fmt: skip
