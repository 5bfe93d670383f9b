"""WT901 frame parser, decoder and commands against hand-built bytes (WT901 datasheet, sections 5.1-5.2)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shape_sensing.drivers.errors import DriverConfigError
from shape_sensing.drivers.wt901 import (
    SAVE,
    UNLOCK,
    CalibrationMode,
    FrameType,
    Wt901Assembler,
    Wt901Parser,
    command,
    configuration_sequence,
    encode_frame,
    output_content_mask,
    quat_to_euler,
)
from shape_sensing.sim.wt901_emulator import Corruptor, Wt901Emulator

# Angle frame, roll = +90 deg (raw 16384 = 0x4000), pitch = -90 deg (raw -16384 = 0xC000), yaw 0, version 0.
# Checksum by hand: 0x55 + 0x53 + 0x40 + 0xC0 = 85 + 83 + 64 + 192 = 424 = 0x1A8 -> 0xA8.
ANGLE_FRAME = bytes([0x55, 0x53, 0x00, 0x40, 0x00, 0xC0, 0x00, 0x00, 0x00, 0x00, 0xA8])
# Acceleration frame, az = 1 g (raw 2048 = 0x0800), temperature 25.00 degC (raw 2500 = 0x09C4).
# Checksum: 0x55 + 0x51 + 0x08 + 0xC4 + 0x09 = 85 + 81 + 8 + 196 + 9 = 379 = 0x17B -> 0x7B.
ACCEL_FRAME = bytes([0x55, 0x51, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08, 0xC4, 0x09, 0x7B])


def test_hand_built_angle_frame_decodes() -> None:
    p = Wt901Parser()
    (frame,) = p.feed(ANGLE_FRAME)
    assert frame.type == FrameType.ANGLE
    assert frame.raw == (16384, -16384, 0, 0)
    np.testing.assert_allclose(frame.scaled(), [math.pi / 2, -math.pi / 2, 0.0])
    assert p.stats.frames == 1 and p.stats.bad_checksum == 0


def test_hand_built_accel_frame_decodes_si_and_temperature() -> None:
    (frame,) = Wt901Parser().feed(ACCEL_FRAME)
    np.testing.assert_allclose(frame.scaled(), [0.0, 0.0, 9.80665])
    assert frame.temperature_c == pytest.approx(25.0)


def test_encode_frame_matches_hand_built_bytes() -> None:
    assert encode_frame(FrameType.ANGLE, [16384, -16384, 0, 0]) == ANGLE_FRAME
    assert encode_frame(FrameType.ACCEL, [0, 0, 2048, 2500]) == ACCEL_FRAME


def test_gyro_and_quaternion_scaling() -> None:
    gyro = encode_frame(FrameType.GYRO, [16384, -8192, 0, 0])
    quat = encode_frame(FrameType.QUATERNION, [16384, 16384, 16384, 16384])  # q0 (w), q1, q2, q3 all 0.5
    g, q = Wt901Parser().feed(gyro + quat)
    np.testing.assert_allclose(g.scaled(), np.radians([1000.0, -500.0, 0.0]))
    np.testing.assert_allclose(q.scaled(), [0.5, 0.5, 0.5, 0.5])  # returned as [x, y, z, w]


def test_bad_checksum_is_counted_and_next_frame_recovered() -> None:
    bad = bytearray(ANGLE_FRAME)
    bad[4] ^= 0x01
    p = Wt901Parser()
    frames = p.feed(bytes(bad) + ACCEL_FRAME)
    assert [f.type for f in frames] == [FrameType.ACCEL]
    assert p.stats.bad_checksum == 1
    assert p.stats.skipped_bytes == 11


@pytest.mark.parametrize("cut", range(1, 22))
def test_split_frames_at_every_byte(cut: int) -> None:
    data = ANGLE_FRAME + ACCEL_FRAME
    p = Wt901Parser()
    frames = p.feed(data[:cut]) + p.feed(data[cut:])
    assert [f.type for f in frames] == [FrameType.ANGLE, FrameType.ACCEL]
    assert p.pending == 0


def test_truncated_frame_followed_by_full_frame_resyncs() -> None:
    # The first frame lost its tail (a dropped read); its header must not swallow the next frame.
    p = Wt901Parser()
    frames = p.feed(ANGLE_FRAME[:6] + ACCEL_FRAME + ANGLE_FRAME)
    assert [f.type for f in frames] == [FrameType.ACCEL, FrameType.ANGLE]
    assert p.stats.skipped_bytes == 6


def test_garbage_with_stray_headers_is_skipped() -> None:
    garbage = bytes([0x00, 0x55, 0x13, 0x55, 0x55, 0xFF])
    p = Wt901Parser()
    frames = p.feed(garbage + ANGLE_FRAME + garbage + ACCEL_FRAME)
    assert [f.type for f in frames] == [FrameType.ANGLE, FrameType.ACCEL]
    assert p.stats.skipped_bytes == 2 * len(garbage)


def test_interleaved_types_and_header_byte_inside_payload() -> None:
    # 0x5555 as a value puts header bytes inside the payload.
    frames_in = [
        encode_frame(FrameType.ACCEL, [0x5555, -1, 7, 0]),
        encode_frame(FrameType.MAG, [0x5555, 0x5555, 0x5555, 0x5555]),
        encode_frame(FrameType.GYRO, [-32768, 32767, 0, 0x5555]),
        encode_frame(FrameType.ANGLE, [1, 2, 3, 4]),
    ]
    frames = Wt901Parser().feed(b"".join(frames_in))
    assert [f.type for f in frames] == [FrameType.ACCEL, FrameType.MAG, FrameType.GYRO, FrameType.ANGLE]
    assert frames[2].raw == (-32768, 32767, 0, 0x5555)


def test_unknown_type_with_good_checksum_is_ignored() -> None:
    p = Wt901Parser()
    frames = p.feed(encode_frame(0x56, [1, 2, 3, 4]) + ANGLE_FRAME)  # 0x56: pressure/height, not used
    assert [f.type for f in frames] == [FrameType.ANGLE]
    assert p.stats.ignored_type == 1


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.tuples(st.sampled_from(list(FrameType)), st.lists(st.integers(-32768, 32767), min_size=4, max_size=4)), min_size=1, max_size=12),  # noqa: E501
    garbage=st.lists(st.binary(max_size=7).filter(lambda b: 0x55 not in b), min_size=13, max_size=13),
    cuts=st.lists(st.integers(0, 200), max_size=6),
)
def test_property_frames_survive_garbage_and_any_split(values, garbage, cuts) -> None:  # type: ignore[no-untyped-def]
    stream = b"".join(garbage[i] + encode_frame(t, v) for i, (t, v) in enumerate(values)) + garbage[-1]
    p = Wt901Parser()
    out = []
    last = 0
    for c in sorted(min(c, len(stream)) for c in cuts):
        out += p.feed(stream[last:c])
        last = c
    out += p.feed(stream[last:])
    assert [(f.type, list(f.raw)) for f in out] == [(int(t), v) for t, v in values]


def test_encode_frame_rejects_bad_values() -> None:
    with pytest.raises(DriverConfigError, match="outside int16"):
        encode_frame(FrameType.ANGLE, [40000, 0, 0, 0])
    with pytest.raises(DriverConfigError, match="4 int16 values"):
        encode_frame(FrameType.ANGLE, [1, 2, 3])


def test_commands_match_datasheet_bytes() -> None:
    assert bytes([0xFF, 0xAA, 0x69, 0x88, 0xB5]) == UNLOCK
    assert bytes([0xFF, 0xAA, 0x00, 0x00, 0x00]) == SAVE
    # Default RSW content (acc, gyro, angle, mag) is 0x1E in the datasheet's RSWL table.
    assert output_content_mask(["accel", "gyro", "angle", "mag"]) == 0x1E
    assert output_content_mask([FrameType.QUATERNION]) == 0x0200  # RSWH bit 1: 0x59 pack
    seq = configuration_sequence(output=["angle", "quaternion"], rate_hz=100, baud=921600)
    assert seq == [
        UNLOCK,
        bytes([0xFF, 0xAA, 0x02, 0x08, 0x02]),
        bytes([0xFF, 0xAA, 0x03, 0x09, 0x00]),
        bytes([0xFF, 0xAA, 0x04, 0x09, 0x00]),
        SAVE,
    ]
    assert command(0x01, CalibrationMode.ACCELEROMETER) == bytes([0xFF, 0xAA, 0x01, 0x01, 0x00])
    assert command(0x01, CalibrationMode.ANGLE_REFERENCE) == bytes([0xFF, 0xAA, 0x01, 0x08, 0x00])


def test_bad_configuration_is_named() -> None:
    with pytest.raises(DriverConfigError, match="output rate 7"):
        configuration_sequence(rate_hz=7)
    with pytest.raises(DriverConfigError, match="baud 1234"):
        configuration_sequence(baud=1234)
    with pytest.raises(DriverConfigError, match="output content 'pressure'"):
        output_content_mask(["pressure"])
    with pytest.raises(DriverConfigError, match="value 70000"):
        command(0x02, 70000)
    with pytest.raises(DriverConfigError, match="orientation_source"):
        Wt901Assembler("p0", "magnetometer")


def test_emulator_obeys_commands_only_when_unlocked() -> None:
    emu = Wt901Emulator()
    emu.write(command(0x03, 0x09))  # locked: rejected
    assert emu.rate_hz == 10.0 and emu.rejected == 1
    cal = CalibrationMode.ACCELEROMETER
    for c in configuration_sequence(output=["angle"], rate_hz=100, baud=115200, calibration=cal):
        emu.write(c[:2])  # commands split across writes
        emu.write(c[2:])
    assert (emu.rsw, emu.rate_hz, emu.baud, emu.calibration, emu.saved) == (0x08, 100.0, 115200, 1, 1)
    assert [f[1] for f in emu.frames([0.1, 0.2, 0.3])] == [0x53]


def test_emulator_round_trip_through_parser_and_assembler() -> None:
    emu = Wt901Emulator(rsw=output_content_mask(["accel", "gyro", "angle", "quaternion"]))
    euler = np.array([0.3, -0.4, 2.5])
    frames = Wt901Parser().feed(emu.cycle_bytes(euler, gyro=[0.1, 0.0, -0.2]))
    a = Wt901Assembler("p0")
    samples = [s for f in frames if (s := a.push(f, 5)) is not None]
    assert len(samples) == 1
    np.testing.assert_allclose(quat_to_euler(samples[0].orientation), euler, atol=math.radians(180 / 32768))
    np.testing.assert_allclose(samples[0].angular_velocity, [0.1, 0.0, -0.2], atol=math.radians(2000 / 32768))
    aq = Wt901Assembler("p0", "quaternion")
    qs = [s for f in frames if (s := aq.push(f, 5)) is not None]
    np.testing.assert_allclose(quat_to_euler(qs[0].orientation), euler, atol=2e-4)


def test_corrupted_stream_never_raises_and_loses_only_hit_frames() -> None:
    emu = Wt901Emulator()
    rng = np.random.default_rng(3)
    c = Corruptor(rng, flip_rate=0.01, drop_rate=0.005, garbage_rate=0.3)
    p = Wt901Parser()
    sent = 0
    for k in range(300):
        data = emu.cycle_bytes([0.01 * k, 0.0, 0.0])
        sent += len(data) // 11
        p.feed(c.apply(data))
    assert 0 < p.stats.frames < sent
    assert p.stats.bad_checksum > 0
    assert c.flipped > 0 and c.dropped > 0 and c.garbage_bursts > 0


def test_stray_header_that_checksums_does_not_swallow_the_next_frame() -> None:
    """Bytes seen on a corrupted stream: a stray 0x55 and 10 bytes that pass the checksum as type 0x55.

    Taking them as a frame consumed the real gyro frame's header (``55 52`` at the end) and lost it.
    """
    gyro = encode_frame(FrameType.GYRO, [100, -200, 300, 2500])
    stray = bytes.fromhex("55550b8255a11b2ed906")
    assert (sum(stray) & 0xFF) == gyro[0]  # the real header is the stray's checksum
    for chunk in (None, 1):  # all at once, and byte by byte
        p = Wt901Parser()
        data = stray + gyro + ANGLE_FRAME
        if chunk is None:
            frames = p.feed(data)
        else:
            frames = [f for k in range(len(data)) for f in p.feed(data[k : k + 1])]
        assert [f.type for f in frames] == [FrameType.GYRO, FrameType.ANGLE]
        assert frames[0].raw == (100, -200, 300, 2500)
        assert p.stats.ignored_type == 0


_UNKNOWN_TYPES = [t for t in range(0x50, 0x60) if t not in {int(x) for x in FrameType}]


@settings(max_examples=150, deadline=None)
@given(
    ftype=st.sampled_from([FrameType.ACCEL, FrameType.GYRO, FrameType.ANGLE, FrameType.MAG, FrameType.QUATERNION]),
    values=st.lists(st.integers(-32768, 32767), min_size=4, max_size=4),
    stray_type=st.sampled_from(_UNKNOWN_TYPES + [int(FrameType.ANGLE), int(FrameType.MAG)]),
    overlap=st.integers(1, 8),
    filler=st.binary(min_size=8, max_size=8),
)
def test_spurious_checksummed_frame_never_hides_a_real_one(
    ftype: int, values: list[int], stray_type: int, overlap: int, filler: bytes
) -> None:
    """A stray 0x55 whose 11 bytes checksum and end ``overlap`` bytes into a real frame.

    Built so that the stray passes the checksum (one filler byte is chosen for it); the real frame and
    the one after it must both come out, whatever the stray's type.
    """
    real = encode_frame(ftype, values)
    after = encode_frame(FrameType.ANGLE, [1, 2, 3, 4])
    body = bytearray([0x55, stray_type]) + bytearray(filler[: 9 - overlap]) + real[:overlap]
    assert len(body) == 11
    # Make bytes 0..9 sum to byte 10 by choosing the last filler byte (index 10 - overlap).
    k = 10 - overlap
    body[k] = 0
    body[k] = (body[10] - sum(body[:10])) & 0xFF
    if k == 1 or 0x55 in body[2:k]:  # the fix-up landed on the type byte, or the filler holds another header
        return
    assert (sum(body[:10]) & 0xFF) == body[10]
    if stray_type in {int(x) for x in FrameType} and real[overlap] == 0x55:
        return  # a known-type stray followed by a header looks like a real frame
    frames = Wt901Parser().feed(bytes(body[: 11 - overlap]) + real + after)
    assert [(f.type, f.raw) for f in frames][-2:] == [(ftype, tuple(values)), (FrameType.ANGLE, (1, 2, 3, 4))]


def test_header_followed_by_a_non_type_byte_is_skipped_without_consuming_a_frame() -> None:
    """0x55 then a byte outside 0x50-0x5F cannot start a WitMotion frame, even if the bytes checksum."""
    real = encode_frame(FrameType.GYRO, [5, 6, 7, 8])
    head = bytearray([0x55, 0x01, 0, 0, 0, 0, 0, 0, 0, 0])
    head[-1] = (real[0] - sum(head)) & 0xFF  # with the real header as its byte 11, the 11 bytes checksum
    assert (sum(head) & 0xFF) == real[0]
    frames = Wt901Parser().feed(bytes(head) + real)
    assert [f.raw for f in frames] == [(5, 6, 7, 8)]
