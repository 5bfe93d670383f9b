"""Bus topology validation, the example config, and the mux router's switching."""

from __future__ import annotations

from pathlib import Path

import pytest

from shape_sensing.drivers.bno055_chain import SCHEMA, example_topology_params
from shape_sensing.drivers.i2c_topology import MuxRouter, MuxSpec, SensorSpec, Topology, TopologyError
from shape_sensing.sim.register_level import build_simulated_hardware

ROOT = Path(__file__).resolve().parents[1]


def _tree(**changes):
    params = example_topology_params()
    params.update(changes)
    return params


def test_example_config_is_the_18_sensor_two_level_tree():
    params = SCHEMA.load_yaml(ROOT / "config" / "bno055_chain.yaml")
    topo = Topology.from_params(params)
    assert len(topo.sensors) == 18
    depths = {len(topo.sensor_path(s)) for s in topo.sensors}
    assert depths == {2}  # every sensor is behind a root mux and a child mux
    assert topo.to_params() == {k: params[k] for k in topo.to_params()}


def test_duplicate_path_is_rejected():
    p = _tree()
    p["sensor_channels"] = list(p["sensor_channels"])
    p["sensor_addresses"] = list(p["sensor_addresses"])
    p["sensor_addresses"][1] = 0x28  # imu_01 now at imu_00's path and address
    with pytest.raises(TopologyError, match="sensors 'imu_00' and 'imu_01' have the same path root:0/arm_a:0"):
        Topology.from_params(p)


def test_unknown_mux_and_cycle_and_channel_range():
    with pytest.raises(TopologyError, match="unknown mux 'arm_z'"):
        Topology.from_params(_tree(sensor_muxes=["arm_z"] + example_topology_params()["sensor_muxes"][1:]))
    with pytest.raises(TopologyError, match="cycle"):
        Topology([MuxSpec("a", 0x70, "b", 0), MuxSpec("b", 0x71, "a", 0)], [])
    with pytest.raises(TopologyError, match="channel 9 of mux 'root' is out of range"):
        Topology([MuxSpec("root", 0x70)], [SensorSpec("s", "s", 0x28, "root", 9)])
    with pytest.raises(TopologyError, match="on the host segment its channel must be -1"):
        Topology([MuxSpec("root", 0x70, "", 3)], [])


def test_address_conflicts_on_one_segment_including_upstream():
    # A sensor on the root's segment and one behind a child channel: both 0x28 once the child channel opens.
    muxes = [MuxSpec("root", 0x70), MuxSpec("child", 0x71, "root", 0)]
    with pytest.raises(TopologyError, match=r"address conflict on segment root:0/child:1: sensor a and sensor b"):
        Topology(muxes, [SensorSpec("a", "a", 0x28, "root", 0), SensorSpec("b", "b", 0x28, "child", 1)])
    # A child mux with the root's own address.
    with pytest.raises(TopologyError, match="mux root and mux child both answer 0x70"):
        Topology([MuxSpec("root", 0x70), MuxSpec("child", 0x70, "root", 0)], [])
    # Same address on sibling channels is fine: the router opens one channel per mux.
    Topology(muxes, [SensorSpec("a", "a", 0x28, "child", 0), SensorSpec("b", "b", 0x28, "child", 1)])


def test_bad_addresses_and_lengths():
    with pytest.raises(TopologyError, match="0x30 is not a BNO055 address"):
        Topology([], [SensorSpec("a", "a", 0x30)])
    with pytest.raises(TopologyError, match="0x60 is not a TCA9548A address"):
        Topology([MuxSpec("m", 0x60)], [])
    with pytest.raises(TopologyError, match="must have the same length"):
        Topology.from_params(_tree(sensor_channels=[0, 1]))
    with pytest.raises(TopologyError, match="sensor name 'x' is used twice"):
        Topology([], [SensorSpec("x", "x", 0x28), SensorSpec("x", "y", 0x29)])


def test_router_writes_a_mux_only_when_its_byte_changes():
    topo = Topology.from_params(example_topology_params())
    hw = build_simulated_hardware(topo)
    router = MuxRouter(hw.bus, topo)
    order = topo.sweep_order()
    for s in order:
        router.open(topo.sensor_path(s), s.address)
        assert hw.bus.read_byte_data(s.address, 0x00) == 0xA0  # exactly one chip answers: no conflict
    # 3 child muxes x 3 channels = 9 leaf segments; root switched 3 times; children start unknown (closed once
    # when first exposed would only be needed if they could conflict; here they cannot).
    assert router.writes == 3 + 9
    assert hw.bus.stats.conflicts == 0


def test_router_closes_a_child_channel_that_would_expose_a_duplicate():
    muxes = [MuxSpec("root", 0x70), MuxSpec("child", 0x71, "root", 0)]
    sensors = [SensorSpec("direct", "direct", 0x28, "root", 0), SensorSpec("deep", "deep", 0x28, "child", 2)]
    with pytest.raises(TopologyError):
        Topology(muxes, sensors)  # static check refuses it...
    # ...but a 0x29 there is fine, and the router must still close 'child' before talking to 0x28 on root:0.
    sensors = [SensorSpec("direct", "direct", 0x28, "root", 1), SensorSpec("deep", "deep", 0x28, "child", 2)]
    muxes = [MuxSpec("root", 0x70), MuxSpec("child", 0x71, "root", 0)]
    topo = Topology(muxes, sensors)
    hw = build_simulated_hardware(topo)
    router = MuxRouter(hw.bus, topo)
    # Open root channels 0 and 1 at once by hand (a state the router must not trust blindly).
    hw.bus.write_byte(0x70, 0b11)
    hw.bus.write_byte(0x71, 0b100)
    router.invalidate()
    router.open(topo.sensor_path(topo.sensor("direct")), 0x28)
    hw.bus.read_byte_data(0x28, 0)
    assert hw.bus.stats.conflicts == 0
