"""Reading a recorded ToF continuum run back: the sensor data a re-estimate needs (ToF frames, gyros, strain and
the sensor rig's description), as the demo ``tof-continuum`` writes them and ``eval-tof --reestimate`` reads them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from shape_sensing.estimators.continuum.tof_localise import SensorData
from shape_sensing.messages import common as msgs
from shape_sensing.messages.strain import STRAIN_TYPE, strain_from_float64_multiarray, strain_from_msg

__all__ = ["RIG_TOPIC", "STRAIN_TOPIC", "sensor_data_from_bag"]

#: Topic of the strain gauges (shape_sensing/StrainArray; std_msgs/Float64MultiArray of [s, theta, kappa] triplets
#: in recordings made before that message existed, still read).
STRAIN_TOPIC = "/strain"
#: Topic of the sensor rig (std_msgs/String, JSON of the demo's ``rig_description``), latched.
RIG_TOPIC = "/tof_rig"


def sensor_data_from_bag(path: Path) -> SensorData:
    """The sensor data of a recorded run (ToF frames, gyros, strain, rig description) for re-estimation."""
    from shape_sensing.estimators.continuum.tof import TofMount
    from shape_sensing.io.bag import read_bag
    from shape_sensing.io.errors import BagError
    from shape_sensing.messages.tof import tof_frame_from_msg

    rig: dict[str, Any] | None = None
    tof: list[tuple[float, str, np.ndarray, np.ndarray]] = []
    gyro: list[tuple[float, str, np.ndarray]] = []
    strain: list[tuple[float, np.ndarray]] = []
    for m in read_bag(path):
        if m.topic == RIG_TOPIC:
            rig = json.loads(m.msg.data)
        elif m.msgtype == "shape_sensing/msg/TofFrame":
            stamp, frame, d, st = tof_frame_from_msg(m.msg)
            tof.append((stamp * 1e-9, frame, d, st))
        elif m.msgtype == "sensor_msgs/msg/Imu" and m.topic.startswith("/gyro/"):
            av = m.msg.angular_velocity
            gyro.append((msgs.stamp_from_msg(m.msg) * 1e-9, m.msg.header.frame_id, np.array([av.x, av.y, av.z])))
        elif m.msgtype == STRAIN_TYPE:
            stamp, s_, th, ka, ok = strain_from_msg(m.msg)
            strain.append((stamp * 1e-9, np.column_stack([s_, th, ka])[ok]))
        elif m.topic == STRAIN_TOPIC and m.msgtype == "std_msgs/msg/Float64MultiArray":  # recordings before StrainArray
            strain.append((m.stamp_ns * 1e-9, np.column_stack(strain_from_float64_multiarray(m.msg.data))))
    if rig is None:
        raise BagError(f"{path} has no sensor rig description on {RIG_TOPIC}: cannot place the ToF sensors")
    mounts = [
        TofMount(
            d["name"],
            float(d["s"]),
            np.asarray(d["T_ring_sensor"]),
            int(d["zones_per_side"]),
            float(d["fov"]),
            float(d["max_range"]),
        )
        for d in rig["mounts"]
    ]
    index = {m.name: i for i, m in enumerate(mounts)}
    rings = sorted({m.s for m in mounts})
    tof = [x for x in tof if x[1] in index]
    z = mounts[0].zones_per_side ** 2 if mounts else 64
    st_rows = [x[1] for x in strain]
    return SensorData(
        float(rig["length"]),
        mounts,
        np.array([x[0] for x in tof]),
        np.array([index[x[1]] for x in tof], dtype=np.int64),
        np.array([x[2] for x in tof]).reshape(-1, z),
        np.array([x[3] for x in tof], dtype=np.uint8).reshape(-1, z),
        np.array([x[0] for x in gyro]),
        np.array([rings[int(x[1].split("_")[-1])] for x in gyro]),
        np.array([x[2] for x in gyro]).reshape(-1, 3),
        np.concatenate([np.full(r.shape[0], t) for t, r in strain]) if strain else np.zeros(0),
        np.concatenate([r[:, 0] for r in st_rows]) if strain else np.zeros(0),
        np.concatenate([r[:, 1] for r in st_rows]) if strain else np.zeros(0),
        np.concatenate([r[:, 2] for r in st_rows]) if strain else np.zeros(0),
        float(rig["still"]),
    )
