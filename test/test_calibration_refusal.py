"""Calibrations refuse a moving or bent robot, saying why, and keep what was calibrated before.

Rods calibration of the hyper-redundant rig (``HyperRedundantTracker``): fed by the simulator (an independent
model: mounting misalignment, noise, motion) held still on its rods (accepted, small corrections), moving through
the window (refused: "moved"), and by a still rig bent 0.2 rad per joint built here with scipy (refused: "bent").
Before, both were accepted (a bias up to 0.339 rad stored as mounting error).

The vine robot's straight reference (``~/offset``, ``VineImuTracker.request_offset``): fed by the vine simulator
(continuous-curvature body, 5 deg mountings, drift) straight and still (captured, once still for
``offset_still_s``), in motion (refused after ``offset_timeout``, naming the IMUs), and frozen bent (its state at
45 s of the passive run: refused, "not straight", by the estimate with the reference there was; the new capture
would have stored the bend as mountings). Before, each was captured at the next tick.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

from shape_sensing.estimators.hinge_arc import SCHEMA as HINGE_ARC_SCHEMA
from shape_sensing.pipelines.hyper_redundant import HyperRedundantTracker
from shape_sensing.pipelines.vine_imu import VineImuTracker
from shape_sensing.sim.hyper_redundant import HyperRedundantSim
from shape_sensing.sim.vine import VineSimConfig, VineSimulator
from shape_sensing.types import DiagnosticLevel, ImuSample

RATE = 100.0
N = 4


def _quat(euler_rpy: np.ndarray) -> np.ndarray:
    """x, y, z, w of a z-y-x (yaw, pitch, roll) attitude, by scipy."""
    roll, pitch, yaw = euler_rpy
    return Rotation.from_euler("ZYX", [yaw, pitch, roll]).as_quat()


def _feed(tr: HyperRedundantTracker, attitudes, t0: float, seconds: float, sweep: bool = False) -> list:  # type: ignore[no-untyped-def]
    """Each platform's reading one by one (per-platform topics), or each cycle as one sweep (an ImuArray)."""
    out = []
    for k in range(round(seconds * RATE)):
        t = t0 + k / RATE
        quats = attitudes(t)
        if sweep:
            stamps = np.full(len(quats), round(t * 1e9), dtype=np.int64)
            out += tr.push_sweep_arrays(stamps, [f"platform_{i}" for i in range(len(quats))], np.array(quats))
            continue
        for i, q in enumerate(quats):
            out += tr.push_imu(ImuSample(round(t * 1e9), f"platform_{i}", q))
    return out


def _sim_attitudes(sim: HyperRedundantSim):  # type: ignore[no-untyped-def]
    return lambda t: [_quat(r) for r in sim.snapshot(t).readings]


def _status(out: list) -> dict:
    return {d.name: d for d in out[-1].shape.diagnostics}


@pytest.mark.parametrize("sweep", [False, True], ids=["per platform", "sweeps"])
def test_rods_calibration_of_a_still_straight_rig_is_accepted(sweep: bool) -> None:
    sim = HyperRedundantSim(n_modules=N, rods_s=10.0, seed=1)
    tr = HyperRedundantTracker({"n_modules": N, "publish_rate": 10.0}, rods_s=1.0)
    out = _feed(tr, _sim_attitudes(sim), 0.0, 1.5, sweep)
    assert tr.calibrated and tr.calibration_refused is None and out
    bias_deg = np.degrees(np.linalg.norm(tr.estimator.bias, axis=1))
    assert 0.0 < bias_deg.max() < 3.0  # the simulator's 0.5 deg (std) mounting errors, corrected
    assert "rigid_module/calibration" not in _status(out)


@pytest.mark.parametrize("sweep", [False, True], ids=["per platform", "sweeps"])
def test_rods_calibration_of_a_moving_rig_is_refused_naming_the_platforms(sweep: bool) -> None:
    """Also when the readings come as sweeps (ImuArray): that path kept no gravity directions and so accepted
    a moving rig's average as the calibration."""
    sim = HyperRedundantSim(n_modules=N, rods_s=0.0, amplitude_deg=20.0, seed=1)  # moving from t = 0
    tr = HyperRedundantTracker({"n_modules": N, "publish_rate": 10.0}, rods_s=1.0)
    out = _feed(tr, _sim_attitudes(sim), 0.0, 1.5, sweep)
    assert tr.calibrated and out  # estimates go on, uncorrected
    assert tr.calibration_refused is not None and "the rig moved" in tr.calibration_refused
    assert "platform 4 moved" in tr.calibration_refused and "hold it still" in tr.calibration_refused
    assert not tr.estimator.bias.any()  # nothing stored
    status = _status(out)["rigid_module/calibration"]
    assert status.level == DiagnosticLevel.ERROR and status.message == tr.calibration_refused


def test_rods_calibration_of_a_still_bent_rig_is_refused_and_keeps_the_previous_one() -> None:
    sim = HyperRedundantSim(n_modules=N, rods_s=10.0, seed=2)
    tr = HyperRedundantTracker({"n_modules": N, "publish_rate": 10.0}, rods_s=1.0)
    _feed(tr, _sim_attitudes(sim), 0.0, 1.5)
    good = tr.estimator.bias.copy()
    assert tr.calibration_refused is None and good.any()

    bent = [_quat(np.array([0.2 * i, 0.0, 0.0])) for i in range(N + 1)]  # 0.2 rad per joint about x, held still
    tr.request_calibration(round(1.5 * 1e9), 1.0)
    out = _feed(tr, lambda t: bent, 1.5, 1.5)
    assert tr.calibration_refused is not None and "the rig is bent" in tr.calibration_refused
    assert "platform 4 45.8 deg" in tr.calibration_refused  # 4 joints x 0.2 rad
    np.testing.assert_array_equal(tr.estimator.bias, good)  # the calibration before is kept
    assert _status(out)["rigid_module/calibration"].level == DiagnosticLevel.ERROR


def test_limits_are_parameters() -> None:
    sim = HyperRedundantSim(n_modules=N, rods_s=0.0, amplitude_deg=20.0, seed=1)
    tr = HyperRedundantTracker(
        {"n_modules": N, "publish_rate": 10.0, "calibration_max_motion_deg": 90.0, "calibration_max_bias_deg": 180.0},
        rods_s=1.0,
    )
    _feed(tr, _sim_attitudes(sim), 0.0, 1.5)
    assert tr.calibration_refused is None and tr.estimator.bias.any()


# -- vine robot: the straight reference (~/offset) ------------------------------------------------------------------


def _vine(scenario: str) -> tuple[VineSimulator, VineImuTracker]:
    sim = VineSimulator(VineSimConfig(scenario=scenario, duration=60.0, rate=50.0))
    n = sim.config.n_sensors
    params = HINGE_ARC_SCHEMA.defaults() | {
        "imu_topics": [f"imu_{i:02d}/data" for i in range(n)], "auto_offset": False, "length_topic": "",
    }  # fmt: skip
    return sim, VineImuTracker(params)


def _feed_vine(sim: VineSimulator, tr: VineImuTracker, t0: float, t1: float, frozen_at: float | None = None) -> None:
    """Readings from t0 to t1 at 50 Hz; ``frozen_at``: the robot's state at that time held still."""
    for k in range(round((t1 - t0) * 50.0)):
        t = t0 + k / 50.0
        for i, sample in enumerate(sim.imu_samples(t if frozen_at is None else frozen_at)):
            tr.push_orientation(i, round(t * 1e9), sample.orientation)


def test_offset_of_a_still_straight_robot_is_captured_once_still_long_enough() -> None:
    sim, tr = _vine("passive")  # straight at the start (15 deg between IMUs: mountings and headings)
    _feed_vine(sim, tr, 0.0, 0.3)
    tr.request_offset()
    _feed_vine(sim, tr, 0.3, 0.6)
    assert not tr.estimator.is_offset  # still for 0.3 s of the 0.5 s asked
    _feed_vine(sim, tr, 0.6, 1.2)
    assert tr.estimator.is_offset and tr.offset_refused == ""
    assert tr.reference_status.startswith("captured on request")


def test_offset_of_a_moving_robot_is_refused_naming_the_imus() -> None:
    sim, tr = _vine("active")  # steering hard from 1 s on
    _feed_vine(sim, tr, 0.0, 1.5)
    tr.request_offset()
    _feed_vine(sim, tr, 1.5, 8.0)
    assert not tr.estimator.is_offset
    assert tr.offset_refused.startswith("straight reference refused: the robot was not still: IMU(s) [")
    assert "17" in tr.offset_refused.split("]")[0] and "hold it still" in tr.offset_refused
    assert tr.reference_status == f"not captured: {tr.offset_refused}"


def test_offset_of_a_still_bent_robot_is_refused_and_keeps_the_reference_there_was() -> None:
    sim, tr = _vine("passive")
    _feed_vine(sim, tr, 0.0, 0.2)
    tr.request_offset()
    _feed_vine(sim, tr, 0.2, 1.2)
    before = tr.estimator.reference
    assert before is not None
    tr.request_offset()
    _feed_vine(sim, tr, 1.2, 3.0, frozen_at=45.0)  # bent 89 deg base to tip, held still
    assert tr.estimator.reference is before
    assert "the robot is not straight: its last estimate bends" in tr.offset_refused, tr.offset_refused
    assert "(limit 45 deg, offset_max_bend_deg)" in tr.offset_refused and tr.last_bend_deg > 45.0
    assert tr.offset_warning.startswith("last capture refused (the robot is not straight")
