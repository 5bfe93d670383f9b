"""Reading a recorded ToF continuum run back: the sensor data a re-estimate needs (ToF frames, gyros, strain and
where each sensor sits), from the demo ``tof-continuum``'s bag or from a real robot's ``ros2 bag record``.

Where the sensors sit comes from one of two sources:

* the estimator's parameter file (``config``, the ``continuum_estimator`` layout of ``config/continuum_tof.yaml``):
  the ToF, gyroscope and strain topics, each sensor's arc length, the robot length and the still start
  (``gyro_bias_duration``); each ToF sensor's mounting on its ring is taken from the bag's ``/tf_static``
  (the transform whose child is the frame id of the sensor's frames), else from the parameters' azimuth and ring
  radius; the zone layout, field of view and range from the frames themselves. This is what a real recording
  needs: no extra topic.
* without a parameter file, the demo's ``/tof_rig`` (std_msgs/String, JSON of its ``rig_description``).

Stamps may be at any epoch: the times are taken relative to the first sensor stamp (kept in
:attr:`SensorData.t0_ns`), so the still start is the first ``still`` seconds of the recording.
"""

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
#: Topic of the demo's sensor rig (std_msgs/String, JSON of the demo's ``rig_description``), latched.
RIG_TOPIC = "/tof_rig"

_TOF = "shape_sensing/msg/TofFrame"
_IMU = "sensor_msgs/msg/Imu"


def sensor_data_from_bag(path: Path, config: Path | None = None, still: float | None = None) -> SensorData:
    """The sensor data of a recorded run for re-estimation (see the module docstring).

    Args:
        path: the bag.
        config: the estimator's parameter file (ROS 2 YAML, ``continuum_estimator``); ``None``: the bag's
            ``/tof_rig``.
        still: seconds the robot stood still from the first sensor stamp (the gyroscopes' bias); ``None``: the
            parameter file's ``gyro_bias_duration`` or the rig's ``still``.

    Raises:
        BagError: no sensor layout (neither a parameter file nor ``/tof_rig``), or none of the configured
            sensors recorded.
    """
    if config is None:
        return _from_rig(path, still)
    return _from_config(path, config, still)


def _strain_row(m: Any) -> tuple[int, np.ndarray] | None:
    if m.msgtype == STRAIN_TYPE:
        stamp, s_, th, ka, ok = strain_from_msg(m.msg)
        return stamp, np.column_stack([s_, th, ka])[ok]
    if m.msgtype == "std_msgs/msg/Float64MultiArray":  # recordings before StrainArray
        return m.stamp_ns, np.column_stack(strain_from_float64_multiarray(m.msg.data))
    return None


def _assemble(
    length: float,
    mounts: list[Any],
    tof: list[tuple[int, int, np.ndarray, np.ndarray]],
    gyro: list[tuple[int, float, np.ndarray]],
    strain: list[tuple[int, np.ndarray]],
    still: float,
) -> SensorData:
    """SensorData with times relative to the first sensor stamp."""
    stamps = [x[0] for x in tof] + [x[0] for x in gyro] + [x[0] for x in strain]
    t0 = min(stamps) if stamps else 0

    def rel(ns: int) -> float:
        return (ns - t0) * 1e-9  # integer difference first: epoch stamps keep their nanoseconds

    z = mounts[0].zones_per_side ** 2 if mounts else 64
    rows = [r for _, r in strain]
    return SensorData(
        float(length),
        mounts,
        np.array([rel(x[0]) for x in tof]),
        np.array([x[1] for x in tof], dtype=np.int64),
        np.array([x[2] for x in tof]).reshape(-1, z),
        np.array([x[3] for x in tof], dtype=np.uint8).reshape(-1, z),
        np.array([rel(x[0]) for x in gyro]),
        np.array([x[1] for x in gyro]),
        np.array([x[2] for x in gyro]).reshape(-1, 3),
        np.concatenate([np.full(r.shape[0], rel(t)) for t, r in strain]) if strain else np.zeros(0),
        np.concatenate([r[:, 0] for r in rows]) if strain else np.zeros(0),
        np.concatenate([r[:, 1] for r in rows]) if strain else np.zeros(0),
        np.concatenate([r[:, 2] for r in rows]) if strain else np.zeros(0),
        float(still),
        int(t0),
    )


def _from_rig(path: Path, still: float | None) -> SensorData:
    from shape_sensing.estimators.continuum.tof import TofMount
    from shape_sensing.io.bag import read_bag
    from shape_sensing.io.errors import BagError
    from shape_sensing.messages.tof import tof_frame_from_msg

    rig: dict[str, Any] | None = None
    frames: list[tuple[int, str, np.ndarray, np.ndarray]] = []
    gyro_raw: list[tuple[int, str, np.ndarray]] = []
    strain: list[tuple[int, np.ndarray]] = []
    for m in read_bag(path):
        if m.topic == RIG_TOPIC:
            rig = json.loads(m.msg.data)
        elif m.msgtype == _TOF:
            frames.append(tof_frame_from_msg(m.msg))
        elif m.msgtype == _IMU and m.topic.startswith("/gyro/"):
            av = m.msg.angular_velocity
            gyro_raw.append((msgs.stamp_from_msg(m.msg), m.msg.header.frame_id, np.array([av.x, av.y, av.z])))
        elif m.topic == STRAIN_TOPIC:
            row = _strain_row(m)
            if row is not None:
                strain.append(row)
    if rig is None:
        raise BagError(
            f"{path} has no sensor rig description on {RIG_TOPIC}: give the estimator's parameter file (--config, "
            "e.g. a copy of config/continuum_tof.yaml) to place the ToF sensors from it and the bag's /tf_static"
        )
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
    tof = [(x[0], index[x[1]], x[2], x[3]) for x in frames if x[1] in index]
    gyro = [(t, rings[int(f.split("_")[-1])], w) for t, f, w in gyro_raw]
    return _assemble(rig["length"], mounts, tof, gyro, strain, rig["still"] if still is None else still)


def _from_config(path: Path, config: Path, still: float | None) -> SensorData:
    from shape_sensing.config import load_node_params
    from shape_sensing.estimators.continuum.tof import TofMount, ring_mounts
    from shape_sensing.io.bag import read_bag
    from shape_sensing.io.errors import BagError
    from shape_sensing.messages.tof import tof_frame_from_msg
    from shape_sensing.pipelines.common import resolve_topic
    from shape_sensing.pipelines.continuum_tracker import SCHEMA
    from shape_sensing.pipelines.contracts import CONTINUUM_NAMESPACE

    if not Path(config).is_file():
        raise ValueError(f"parameter file {config} does not exist")
    p = {**SCHEMA.defaults(), **load_node_params(Path(config), SCHEMA)}  # what the file leaves out: the node's defaults
    ns = CONTINUUM_NAMESPACE  # relative topic names, as replay resolves them
    tof_topics = [resolve_topic(t, ns) for t in p["tof_topics"]]
    gyro_s = {resolve_topic(t, ns): float(s) for t, s in zip(p["gyro_topics"], p["gyro_arc_lengths"], strict=True)}
    strain_topic = resolve_topic(p["strain_topic"], ns) if p["strain_topic"] else None
    if len(p["tof_arc_lengths"]) != len(tof_topics) or len(p["tof_azimuths"]) != len(tof_topics):
        raise ValueError(f"{config}: tof_arc_lengths and tof_azimuths need one entry per tof_topics")
    fwd = list(p["tof_forward"]) or [False] * len(tof_topics)
    static: dict[str, np.ndarray] = {}
    layout: dict[str, tuple[str, int, float, float]] = {}  # topic -> (frame id, zones per side, fov, max range)
    frames: list[tuple[int, str, np.ndarray, np.ndarray]] = []
    gyro: list[tuple[int, float, np.ndarray]] = []
    strain: list[tuple[int, np.ndarray]] = []
    topic_index = {t: i for i, t in enumerate(tof_topics)}
    for m in read_bag(path):
        if m.topic == "/tf_static":
            for tr in msgs.transforms_from_tf(m.msg):
                static[tr.child] = tr.matrix
        elif m.topic in topic_index and m.msgtype == _TOF:
            stamp, frame, d, st = tof_frame_from_msg(m.msg)
            layout.setdefault(
                m.topic, (frame, int(m.msg.zones_per_side), float(m.msg.field_of_view), float(m.msg.max_range))
            )
            frames.append((stamp, m.topic, d, st))
        elif m.topic in gyro_s and m.msgtype == _IMU:
            sample = msgs.imu_from_msg(m.msg)
            gyro.append((sample.stamp_ns, gyro_s[m.topic], np.asarray(sample.angular_velocity, dtype=np.float64)))
        elif m.topic == strain_topic:
            row = _strain_row(m)
            if row is not None:
                strain.append(row)
    if not layout and not gyro:
        raise BagError(
            f"{path}: none of the ToF topics {tof_topics} nor gyroscope topics {sorted(gyro_s)} of {config} is recorded"
        )
    mounts: list[TofMount] = []
    index: dict[str, int] = {}
    for i, topic in enumerate(tof_topics):
        if topic not in layout:
            continue
        frame, zps, fov, rng = layout[topic]
        T = static.get(frame)
        if T is None:  # not on /tf_static: the parameters' nominal mounting (as the live node places it)
            T = np.eye(4)
            if not fwd[i]:
                nominal = ring_mounts([p["tof_arc_lengths"][i]], p["tof_ring_radius"], per_ring=1, ring_offset_deg=0.0)
                T = nominal[0].T_ring_sensor
                c, sn = np.cos(np.deg2rad(p["tof_azimuths"][i])), np.sin(np.deg2rad(p["tof_azimuths"][i]))
                T = np.array([[c, -sn, 0, 0], [sn, c, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]]) @ T
        index[topic] = len(mounts)
        mounts.append(TofMount(frame, float(p["tof_arc_lengths"][i]), np.asarray(T, dtype=np.float64), zps, fov, rng))
    tof = [(t, index[topic], d, st) for t, topic, d, st in frames]
    shift = round(float(p["gyro_time_offset"]) * 1e9)  # the parameter file's gyroscope clock offset, as the node's
    gyro = [(stamp - shift, s, w) for stamp, s, w in gyro]
    return _assemble(p["length"], mounts, tof, gyro, strain, p["gyro_bias_duration"] if still is None else still)
