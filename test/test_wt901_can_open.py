"""A CAN bus that cannot be opened is reported naming the interface and the channel (python-can, no ROS)."""

from __future__ import annotations

import pytest

from shape_sensing.drivers.errors import BusError
from shape_sensing.drivers.wt901_config import Wt901NodeConfig, build_can_reader


@pytest.mark.parametrize(
    ("interface", "channel"),
    [
        ("socketcan", "vcan_missing"),  # no such device (or no AF_CAN at all): OSError from the socket
        ("no_such_backend", "can7"),  # python-can has no such interface: CanInterfaceNotImplementedError
    ],
)
def test_can_open_error_names_interface_and_channel(interface: str, channel: str) -> None:
    cfg = Wt901NodeConfig.from_params(
        {"mode": "can", "can_interface": interface, "can_channel": channel, "can_ids": [257, 258, 259, 260, 261]}
    )
    with pytest.raises(
        BusError,
        match=rf"parameters 'can_interface' = '{interface}', 'can_channel' = '{channel}': cannot open the CAN bus",
    ):
        build_can_reader(cfg, lambda: 0)


def test_virtual_bus_still_opens() -> None:
    cfg = Wt901NodeConfig.from_params(
        {"mode": "can", "can_interface": "virtual", "can_channel": "wt901_test", "can_ids": [257, 258, 259, 260, 261]}
    )
    reader = build_can_reader(cfg, lambda: 0)
    assert [s for s in reader.poll()] == []
