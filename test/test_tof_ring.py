"""Sensor rings: layout, the ring set over simulated switches and chips (faults included), messages, the demo bag."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from shape_sensing.drivers.errors import DriverConfigError
from shape_sensing.drivers.i2c_topology import TopologyError
from shape_sensing.drivers.tof_ring import SCHEMA, TofRingSet, layout_from_params, split_by_bus, tof_mount
from shape_sensing.drivers.vl53l5cx import UldBuffers, frame_size
from shape_sensing.messages.factory import default_factory
from shape_sensing.messages.tof import fov_markers, tof_frame_msg, tof_points_msg, zone_angles, zone_points
from shape_sensing.sim.i2c_dev import RealSMBus
from shape_sensing.sim.tof_rings import BoxScene, build_ring_hardware

_NS = 1_000_000_000


@pytest.fixture(scope="module")
def buffers() -> UldBuffers:
    return UldBuffers.from_package()


def one_ring(**over):
    p = SCHEMA.validate({})
    q = split_by_bus(p)[1]  # ring_0: 3 ToF on mux_0 channels 0-2, IMU on channel 3
    q.update(over)
    return SCHEMA.validate(q)


def test_seed_layout_three_rings_offset_sixty_degrees():
    p = SCHEMA.validate({})
    lay = layout_from_params(p)
    assert len(lay.tofs) == 9 and len(lay.imus) == 3 and list(lay.rings) == ["ring_0", "ring_1", "ring_2"]
    assert p["tof_angles"] == [0, 120, 240, 60, 180, 300, 120, 240, 360]
    for m in lay.tofs:
        R = m.T_ring_sensor[:3, :3]
        np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-12)
        assert np.linalg.det(R) == pytest.approx(1.0)
        z = R[:, 2]  # boresight radial, in the ring plane, at the sensor's angle
        a = math.radians(p["tof_angles"][lay.tofs.index(m)])
        np.testing.assert_allclose(z, [math.cos(a), math.sin(a), 0.0], atol=1e-12)
        np.testing.assert_allclose(R[:, 1], [0.0, 0.0, -1.0])  # image y (down) against the backbone
        np.testing.assert_allclose(m.T_ring_sensor[:3, 3], 0.038 * z)
    assert sorted(split_by_bus(p)) == [1, 3, 4]
    assert split_by_bus(p)[3]["tof_names"] == ["ring_1_tof_0", "ring_1_tof_1", "ring_1_tof_2"]


def test_explicit_mountings_override_the_radial_layout():
    p = SCHEMA.validate({})
    mounts = []
    for ang in p["tof_angles"]:  # the radial layout written out as x y z roll pitch yaw
        T = tof_mount(ang, p["ring_radius"])
        from scipy.spatial.transform import Rotation

        mounts += [*T[:3, 3], *Rotation.from_matrix(T[:3, :3]).as_euler("xyz", degrees=True)]
    lay = layout_from_params({**p, "tof_mountings": mounts, "imu_mountings": [0, 0, 0.01, 0, 0, 90] * 3})
    ref = layout_from_params(p)
    for a, b in zip(lay.tofs, ref.tofs, strict=True):
        np.testing.assert_allclose(a.T_ring_sensor, b.T_ring_sensor, atol=1e-12)
    np.testing.assert_allclose(lay.imus[0].T_ring_sensor[:3, 0], [0, 1, 0], atol=1e-12)
    assert split_by_bus({**p, "tof_mountings": mounts})[3]["tof_mountings"] == mounts[18:36]
    with pytest.raises(DriverConfigError, match="tof_mountings has 5 values, expected 6 per sensor"):
        layout_from_params({**p, "tof_mountings": [0.0] * 5})


def test_bad_layouts_name_the_parameter():
    p = SCHEMA.validate({})
    with pytest.raises(DriverConfigError, match="tof_rings: sensor 'ring_0_tof_0' names ring 'ring_9'"):
        layout_from_params({**p, "tof_rings": ["ring_9", *p["tof_rings"][1:]]})
    with pytest.raises(DriverConfigError, match="tof_names, tof_rings, tof_angles"):
        layout_from_params({**p, "tof_angles": [0.0]})
    with pytest.raises(TopologyError, match="have the same path"):  # two VL53L5CX at 0x29 on one channel
        layout_from_params({**p, "tof_channels": [0, 0, 2, 0, 1, 2, 0, 1, 2]})
    with pytest.raises(DriverConfigError, match="mux 'mux_0' carries sensors of rings on adapters 1 and 3"):
        split_by_bus({**p, "imu_muxes": ["mux_0", "mux_0", "mux_2"]})
    with pytest.raises(DriverConfigError, match="ring_buses has 2 entries"):
        split_by_bus({**p, "ring_buses": [1, 2]})


def _run(buffers, params, seconds, setup=None, midway=None):
    lay = layout_from_params(params)
    hw = build_ring_hardware(lay, buffers, bitrate=1_000_000.0, seed=1)
    for chip in hw.tofs.values():
        chip.set_zones(np.full(64, 0.6))
    if setup:
        setup(hw)
    frames: dict[str, int] = {}
    with RealSMBus([hw.bus]) as (sb,):
        rings = TofRingSet(sb, params, buffers, clock=hw.bus.clock, sleep=hw.bus.sleep)

        def on(r):
            for n, _ in r.tof:
                frames[n] = frames.get(n, 0) + 1

        half = int(seconds / 2 * _NS)
        rings.run_until(half, on)
        if midway:
            midway(hw, rings)
        rings.run_until(2 * half, on)
    return hw, rings, frames


def test_ring_streams_all_sensors_and_no_transfer_exceeds_a_frame(buffers):
    p = one_ring()
    hw, rings, frames = _run(buffers, p, 5.0)
    assert sorted(rings.streaming()) == sorted(d.mount.name for d in rings.devices)
    diag = {d.name: d for d in rings.diagnostics()}
    for name in ("ring_0_tof_0", "ring_0_tof_1", "ring_0_tof_2"):
        assert frames[name] > 15 and diag[f"tof_ring: {name}"].values["missed_frames"] == "0"
        assert float(diag[f"tof_ring: {name}"].values["invalid_zone_fraction"]) == 0.0
    assert float(diag["tof_ring: ring_0_imu"].values["rate_hz"]) == pytest.approx(120, abs=3)
    # boots were interleaved: the longest single transfer is one firmware chunk, not a page
    longest = max(tx.bytes for tx in hw.bus.log)
    assert longest <= max(frame_size(64), int(p["upload_chunk"])) + 4


def test_a_sensor_that_never_boots_is_retried_and_reported_while_the_others_stream(buffers):
    p = one_ring(retry_initial=0.2)
    _hw, rings, frames = _run(buffers, p, 8.0, setup=lambda hw: setattr(hw.tofs["ring_0_tof_1"], "never_boots", True))
    d = rings.by_name["ring_0_tof_1"]
    assert d.state in ("retry", "boot") and d.boot_failures >= 2 and "boot ROM" in d.last_error
    assert "ring_0_tof_1" not in frames and frames["ring_0_tof_0"] > 30 and frames["ring_0_tof_2"] > 30
    diag = {s.name: s for s in rings.diagnostics()}["tof_ring: ring_0_tof_1"]
    assert int(diag.values["boot_failures"]) == d.boot_failures and diag.level != 0


def test_mid_stream_resets_are_detected_and_the_sensors_reinitialised(buffers):
    p = one_ring()

    def reset(hw, rings):
        assert "ring_0_tof_2" in rings.streaming()
        hw.reset("ring_0_tof_2")
        hw.reset("ring_0_imu")

    hw, rings, frames = _run(buffers, p, 12.0, midway=reset)
    tof, imu = rings.by_name["ring_0_tof_2"], rings.by_name["ring_0_imu"]
    assert tof.reinits == 1 and "was reset" in tof.last_error and tof.state == "run"
    assert imu.reinits == 1 and imu.state == "run"
    assert hw.tofs["ring_0_tof_2"].booted and hw.tofs["ring_0_tof_2"].resets == 2  # power-up + the injected reset
    assert tof.boots == 2 and tof.frames > 60 and frames["ring_0_tof_2"] == tof.frames


def test_nacks_and_timeouts_are_counted_never_a_crash(buffers):
    p = one_ring()

    def noisy(hw, rings):
        hw.set_nack_rate(0x29, 0.03)
        hw.set_timeout_rate(0x6A, 0.05)

    hw, rings, frames = _run(buffers, p, 8.0, midway=noisy)
    tofs = [d for d in rings.devices if d.mount.kind == "tof"]
    imu = rings.by_name["ring_0_imu"]
    retried = sum(d.driver.retried for d in tofs)
    # every failed transfer is accounted for: retried by the VL53L5CX driver, or counted by the ring set
    assert retried > 0 and imu.timeouts > 0
    assert retried + sum(d.nacks + d.timeouts for d in rings.devices) == hw.bus.stats.nacks + hw.bus.stats.timeouts
    assert all(frames[f"ring_0_tof_{k}"] > 40 for k in range(3))
    assert imu.driver.samples_read > 700 and imu.state == "run"


def test_frame_and_points_messages_against_a_flat_wall(buffers):
    """A wall 1 m in front of the sensor: boresight distance 1 m in every zone, points at tan(angle)."""
    scene = BoxScene(planes=[(np.array([0.0, 0.0, 1.0]), np.array([0.0, 0.0, -1.0]))])
    d = scene.zone_distances(np.eye(4), 8)
    np.testing.assert_allclose(d, 1.0)
    from shape_sensing.drivers.vl53l5cx import TofReading

    status = np.full(64, 5, np.uint8)
    status[3] = 2
    r = TofReading(5, 64, 9, 30.0, d * 1000, np.full(64, 7.0), status, np.ones(64, np.uint8), np.ones(64),
                   np.zeros(64))  # fmt: skip
    f = default_factory()
    pc = tof_points_msg(r, "s", factory=f)
    assert pc.width == 63 and pc.point_step == 20
    pts = np.frombuffer(bytes(pc.data), "<f4").reshape(-1, 5)
    ax, ay = zone_angles(8)
    keep = np.arange(64) != 3
    np.testing.assert_allclose(pts[:, 0], np.tan(ax[keep]), atol=1e-6)
    np.testing.assert_allclose(pts[:, 1], np.tan(ay[keep]), atol=1e-6)
    np.testing.assert_allclose(pts[:, 2], 1.0)
    np.testing.assert_allclose(pts[:, 3], 0.007, rtol=1e-6)
    msg = tof_frame_msg(r, "s", factory=f)
    raw = f.typestore.serialize_cdr(msg, "shape_sensing/msg/TofFrame")
    back = f.typestore.deserialize_cdr(raw, "shape_sensing/msg/TofFrame")
    assert back.zones_per_side == 8 and back.stream_count == 9 and back.target_status[3] == 2
    np.testing.assert_allclose(back.distance, 1.0)
    np.testing.assert_allclose(zone_points(back.distance, 8)[:, 2], 1.0)
    raw = f.typestore.serialize_cdr(pc, "sensor_msgs/msg/PointCloud2")
    back_pc = f.typestore.deserialize_cdr(raw, "sensor_msgs/msg/PointCloud2")
    assert [fl.name for fl in back_pc.fields] == ["x", "y", "z", "sigma", "status"]
    np.testing.assert_array_equal(np.frombuffer(bytes(back_pc.data), "<f4").reshape(-1, 5), pts)
    markers = fov_markers(["a", "b"], factory=f)
    raw = f.typestore.serialize_cdr(markers, "visualization_msgs/msg/MarkerArray")
    back_m = f.typestore.deserialize_cdr(raw, "visualization_msgs/msg/MarkerArray")
    assert [m.header.frame_id for m in back_m.markers] == ["a", "b"] and len(back_m.markers[0].points) == 16
    corner = max(back_m.markers[0].points, key=lambda q: q.x + q.y)  # the pyramid's corner at tan(22.5 deg) * 0.3
    assert (corner.x, corner.y, corner.z) == pytest.approx((0.3 * math.tan(math.radians(22.5)),) * 2 + (0.3,))


def test_demo_bag_opens_with_the_mcap_reader(tmp_path):
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory

    from shape_sensing.demos.tof_rings import run_demo

    m = run_demo(tmp_path, duration=1.0, progress=False)
    assert m["tof_rate_hz_min"] >= 13 and m["imu_rate_hz_min"] >= 110
    assert abs(m["range_error_mean_mm"]) < 3.0 and m["gyro_bias_error_max_rad_s"] < 0.002
    counts: dict[str, int] = {}
    schemas: dict[str, str] = {}
    with open(tmp_path / "tof-rings.mcap", "rb") as fh:
        reader = make_reader(fh, decoder_factories=[DecoderFactory()])
        for schema, channel, _, ros_msg in reader.iter_decoded_messages(
            topics=["/tof_rings/ring_1_tof_2/frame", "/tof_rings/ring_2_imu/imu", "/tf_static"]
        ):
            counts[channel.topic] = counts.get(channel.topic, 0) + 1
            schemas[channel.topic] = schema.name
            if channel.topic.endswith("/frame"):
                assert ros_msg.zones_per_side == 8 and len(ros_msg.distance) == 64
    assert schemas["/tof_rings/ring_1_tof_2/frame"] == "shape_sensing/msg/TofFrame"
    assert 13 <= counts["/tof_rings/ring_1_tof_2/frame"] <= 17 and counts["/tof_rings/ring_2_imu/imu"] >= 110
    assert counts["/tf_static"] == 1
    assert (tmp_path / "tof-rings.png").stat().st_size > 10_000
    json.dumps(m)
