"""BNO055 reads are checked before use: corrupted frames are counted and dropped, real motion passes.

The corruptions are the ones users of other BNO055 drivers report (quaternion spikes every 1-3 s from
torn reads and bus errors that return plausible bytes), injected between the simulated chip and the
bus by :class:`~shape_sensing.sim.bno055_glitches.GlitchyBNO055`; the truth is the orientation each
chip was given. The estimators' own input checks (non-unit quaternion, wrong frame) are tested here too.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from shape_sensing.drivers.bno055_chain import Bno055Chain, ChainOptions, example_topology_params
from shape_sensing.drivers.i2c_topology import Topology
from shape_sensing.estimators.hinge_arc import SCHEMA
from shape_sensing.messages.errors import MessageError
from shape_sensing.pipelines.vine_imu import VineImuTracker
from shape_sensing.sim.bno055_glitches import GlitchyBNO055
from shape_sensing.sim.register_level import build_simulated_hardware, spike_stream
from shape_sensing.types import ImuSample


def _one_sensor(kinds=("ones",), rate=0.0, options: ChainOptions | None = None):
    topo = Topology.from_params(example_topology_params(["imu_00"]))
    hw = build_simulated_hardware(topo, start_ns=-100_000_000)
    chip = hw.sensors["imu_00"]
    chip.calibrate()
    glitchy = GlitchyBNO055(chip, 0.0, np.random.default_rng(1), kinds=kinds)
    for m in hw.muxes.values():
        for seg in m.channels:
            seg.devices = [glitchy if d is chip else d for d in seg.devices]
    hw.bus.invalidate()
    opts = options or ChainOptions(mag_rate=0.0, capture_calibration=False)
    chain = Bno055Chain(hw.bus, topo, opts, clock=hw.bus.clock, sleep=hw.bus.sleep)
    assert chain.start(timeout=0.5) == []
    glitchy.rate = rate  # from now on
    return hw, chip, glitchy, chain


def _sweep_at(hw, chain, t: float):
    hw.bus.now_ns = max(hw.bus.now_ns, round(t * 1e9))
    return chain.sweep()


def test_spike_stream_before_and_after_the_checks():
    """Modelled on the reported spikes: the norm check alone lets unit-norm spikes through; the checks do not."""
    before = spike_stream(frame_checks=False, seconds=8.0, n_sensors=4, rate=0.02, seed=3)
    after = spike_stream(frame_checks=True, seconds=8.0, n_sensors=4, rate=0.02, seed=3)
    assert before.injected == after.injected  # the same corrupted reads in both runs
    assert sum(after.injected.values()) > 40
    # a rotated or another chip's quaternion has norm 1: only the turn test can see it
    assert before.spikes_out >= 10
    assert before.spikes_out_by_kind.get("rotated", 0) + before.spikes_out_by_kind.get("neighbour", 0) > 0
    assert after.spikes_out == 0
    assert after.dropped_clean == 0  # no clean sample was taken for a glitch
    assert after.bad_frames["bad_jump"] > 0 and after.bad_frames["bad_ff"] > 0 and after.bad_frames["bad_zero"] > 0
    # every sample the chain did not hand on is counted under one reason
    reasons = ("bad_norm", "bad_jump", "bad_zero", "bad_ff")
    assert after.bad_frames["bad_frames"] == sum(after.bad_frames[k] for k in reasons)


@pytest.mark.parametrize(("kind", "counter"), [("ones", "bad_ff"), ("zeros", "bad_zero")])
def test_all_ff_and_all_zero_frames_are_counted_and_dropped(kind, counter):
    hw, _chip, glitchy, chain = _one_sensor(kinds=(kind,), rate=1.0)
    got = _sweep_at(hw, chain, 0.0)
    assert got.readings == []
    h = chain.health["imu_00"]
    assert getattr(h, counter) == 1 and h.bad_frames == 1 and h.resets == 0  # the chip did not reset
    diag = {d.name: d for d in chain.diagnostics()}["bno055_chain: imu_00"]
    assert diag.values[{"bad_ff": "bad_frames_all_ff", "bad_zero": "bad_frames_all_zero"}[counter]] == "1"
    glitchy.rate = 0.0
    assert len(_sweep_at(hw, chain, 0.01).readings) == 1  # the next clean read is used


def test_a_fast_real_turn_passes_and_a_step_is_taken_after_three_agreeing_samples():
    hw, chip, _, chain = _one_sensor()
    axis = np.array([0.0, 0.6, 0.8])
    w = np.deg2rad(1500.0)  # fast, but within the gyroscope's 2000 dps
    n = 0
    for k in range(20):
        t = 0.01 * k
        chip.set_motion(Rotation.from_rotvec(axis * w * t).as_quat(), axis * w)
        n += len(_sweep_at(hw, chain, t).readings)
    h = chain.health["imu_00"]
    assert n == 20 and h.bad_jump == 0
    # A lasting step the gyroscope did not see (e.g. the fusion's heading correction): held back, then taken.
    q_step = Rotation.from_euler("z", 90, degrees=True).as_quat()
    chip.set_motion(q_step, np.zeros(3))
    out = [_sweep_at(hw, chain, 0.2 + 0.01 * k).readings for k in range(1, 6)]
    assert [len(r) for r in out] == [0, 0, 1, 1, 1]
    assert h.bad_jump == 2 and h.resyncs == 1
    np.testing.assert_allclose(abs(float(np.dot(out[2][0].orientation, q_step))), 1.0, atol=1e-6)


def test_without_frame_checks_a_rotated_quaternion_reaches_the_output():
    """The test above is not vacuous: the same unit-norm spike passes the norm check alone."""
    opts = ChainOptions(mag_rate=0.0, capture_calibration=False, frame_checks=False)
    hw, chip, glitchy, chain = _one_sensor(kinds=("rotated",), options=opts)
    chip.set_motion(Rotation.from_euler("xyz", [10, 20, 30], degrees=True).as_quat())
    _sweep_at(hw, chain, 0.0)
    glitchy.rate = 1.0
    r = _sweep_at(hw, chain, 0.01).readings
    assert len(r) == 1 and glitchy.last_kind == "rotated"
    truth = Rotation.from_euler("xyz", [10, 20, 30], degrees=True).as_quat()
    assert abs(float(np.dot(r[0].orientation, truth))) < 0.99


def _tracker() -> VineImuTracker:
    return VineImuTracker(SCHEMA.defaults() | {"length_topic": ""})


def test_hinge_arc_tracker_rejects_non_unit_quaternions_and_foreign_frames():
    tr = _tracker()
    q = np.array([0.0, 0.0, 0.0, 1.0])
    tr.push_imu(0, ImuSample(10, "vine_imu_00", 7.0 * q))  # norm 7
    tr.push_imu(1, ImuSample(10, "vine_imu_01", 1.06 * q))
    tr.push_imu(2, ImuSample(10, "vine_imu_05", q))  # sensor 5's frame on sensor 2's input
    assert (tr.stats.non_unit_quaternion, tr.stats.frame_mismatch) == (2, 1)
    assert (tr.last_ns[:3] == -1).all()  # none of them reached the estimator's state
    tr.push_imu(2, ImuSample(20, "vine_imu_02", 1.01 * q))  # within tolerance: taken
    assert tr.last_ns[2] == 20
    assert "expected 'vine_imu_02'" in tr.stats.last_rejection
    # the rejection shows in the estimate's diagnostics
    for i in range(tr.n):
        tr.push_imu(i, ImuSample(100_000_000, f"vine_imu_{i:02d}", q))
    tr.request_offset()
    ests = []
    for k in range(2, 8):
        for i in range(tr.n):
            ests += tr.push_imu(i, ImuSample(k * 100_000_000, f"vine_imu_{i:02d}", q))
    diags = [d for e in ests for d in e.diagnostics if d.name == "hinge_arc_estimator: inputs"]
    assert diags and diags[-1].values["non_unit_quaternion"] == "2" and diags[-1].values["frame_mismatch"] == "1"


def test_the_message_layer_refuses_a_norm_7_quaternion():
    from shape_sensing.messages.common import _unit_quat

    with pytest.raises(MessageError, match=r"norm 7.*expected a unit quaternion"):
        _unit_quat(np.array([0.0, 0.0, 0.0, 7.0]), "vine_imu_00")
    np.testing.assert_allclose(_unit_quat(np.array([0.0, 0.0, 0.0, 1.02]), "f"), [0, 0, 0, 1])
