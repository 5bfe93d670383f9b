"""A real-style ToF continuum recording re-estimated: the demo's bag rewritten as ``ros2 bag record`` of a real
robot would leave it (stamps at the wall clock's epoch, no ``/tof_rig``, strain with per-gauge ``valid`` flags,
no estimate) goes through ``eval-tof --reestimate --config`` (batch) and ``replay --config`` + ``eval-tof``
(sliding window), each scored against the truth the demo recorded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from shape_sensing.cli import main
from shape_sensing.cli.eval_tof import evaluate, reestimate
from shape_sensing.demos.tof_continuum import run_demo
from shape_sensing.io.bag import BagWriter, read_bag
from shape_sensing.io.errors import BagError
from shape_sensing.messages.strain import strain_array_msg, strain_from_msg
from shape_sensing.pipelines.tof_recording import sensor_data_from_bag

DURATION = 2.0  # 1 s still (gyro bias), 1 s of motion
#: a wall-clock epoch (2025-11-27) with a fraction that is no multiple of any sensor's or slice's period
EPOCH_NS = 1_764_248_400_123_456_789
ROOT = Path(__file__).resolve().parents[1]


def _stamp(msg: object, epoch: int) -> None:
    """Move a message's header stamp by ``epoch`` ns (in place)."""
    st = msg.header.stamp  # type: ignore[attr-defined]
    ns = st.sec * 10**9 + st.nanosec + epoch
    st.sec, st.nanosec = ns // 10**9, ns % 10**9


def _invalid(n: int) -> np.ndarray:
    """Every fifth gauge marked invalid."""
    return np.arange(n) % 5 != 2


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    """``(demo output, real-style bag, demo metrics)``."""
    out = tmp_path_factory.mktemp("tofreal")
    metrics = run_demo(out, scene="S3", duration=DURATION, picture=False)
    real = out / "real.mcap"
    with BagWriter(real) as w:
        for bm in read_bag(out / "tof-continuum.mcap"):
            if bm.topic.startswith(("/tof/", "/gyro/", "/truth/")):
                msg = bm.msg
                _stamp(msg, EPOCH_NS)
                w.write(bm.topic, msg, bm.stamp_ns + EPOCH_NS, qos="sensor")
            elif bm.topic == "/tf_static":
                msg = bm.msg
                for tr in msg.transforms:
                    _stamp(tr, EPOCH_NS)
                w.write(bm.topic, msg, bm.stamp_ns + EPOCH_NS, qos="static")
            elif bm.topic == "/strain":  # the gauges' flags filled; the invalid ones read garbage
                stamp, s, th, ka, _ = strain_from_msg(bm.msg)
                ok = _invalid(s.size)
                th, ka = np.where(ok, th, 100.0), np.where(ok, ka, 1000.0)
                msg = strain_array_msg(stamp + EPOCH_NS, bm.msg.header.frame_id, s, th, ka, ok, w.factory)
                w.write(bm.topic, msg, bm.stamp_ns + EPOCH_NS)
            # left out: /tof_rig, the demo's estimate and clouds (a real recording has none of them)
    return out, real, metrics


@pytest.fixture(scope="module")
def config(recording: tuple[Path, Path, dict], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """config/continuum_tof.yaml with the demo's map and its still start (the bag starts with the robot still)."""
    out = recording[0]
    (section,) = yaml.safe_load((ROOT / "config" / "continuum_tof.yaml").read_text()).values()
    params = {**section["ros__parameters"], "map_file": str(out / "prior_map.ply"), "gyro_bias_duration": 1.0}
    path = tmp_path_factory.mktemp("cfg") / "robot.yaml"
    path.write_text(yaml.safe_dump({"/**/continuum_estimator": {"ros__parameters": params}}))
    return path


def test_layout_from_tf_static_and_the_parameters_is_the_demos_rig(
    recording: tuple[Path, Path, dict], config: Path
) -> None:
    """The mountings read from /tf_static with the parameter file equal the rig JSON the demo wrote (its own
    description of the simulated sensors); the times are the same relative to the first stamp; invalid gauges
    are left out."""
    out, real, _ = recording
    rig = sensor_data_from_bag(out / "tof-continuum.mcap")
    new = sensor_data_from_bag(real, config)
    assert new.t0_ns == EPOCH_NS + rig.t0_ns
    assert [m.name for m in new.mounts] == [m.name for m in rig.mounts]
    for a, b in zip(new.mounts, rig.mounts, strict=True):
        assert a.s == pytest.approx(b.s) and a.zones_per_side == b.zones_per_side
        assert a.fov == pytest.approx(b.fov, abs=1e-6) and a.max_range == pytest.approx(b.max_range, abs=1e-5)
        np.testing.assert_allclose(a.T_ring_sensor, b.T_ring_sensor, atol=1e-7)
    assert new.length == rig.length and new.still == 1.0
    for key in ("tof_t", "gyro_t"):
        np.testing.assert_allclose(getattr(new, key), getattr(rig, key), atol=1e-9)
    np.testing.assert_array_equal(new.tof_mount, rig.tof_mount)
    np.testing.assert_allclose(new.gyro_s, rig.gyro_s)
    np.testing.assert_allclose(new.gyro_w, rig.gyro_w)
    # strain: only the valid gauges (4 of every 5), none of the garbage
    assert new.strain_t.size == pytest.approx(rig.strain_t.size * 0.8, rel=0.05)
    assert np.all(np.abs(new.strain_theta) < 4.0) and np.all(new.strain_kappa < 100.0)


def test_real_style_recording_reestimated_to_the_demos_accuracy(
    recording: tuple[Path, Path, dict], config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, real, m = recording
    with pytest.raises(BagError, match="--config"):  # no rig JSON and no parameter file: the fix is named
        sensor_data_from_bag(real)
    again = reestimate(real, out / "prior_map.ply", config=config)
    # the same run as the demo's estimate (its own figures), and seed 001's Table II bound
    assert again["tof_points"] == m["tof_points"] and again["tof_matched_fraction"] > 0.9
    assert again["trans_mae_cm"] == pytest.approx(m["trans_mae_cm"], rel=0.15)
    assert again["rot_mae_deg"] == pytest.approx(m["rot_mae_deg"], rel=0.15)
    assert again["trans_mae_cm"] < 0.78 and again["rot_mae_deg"] < 0.96
    # a wrong still start is a different estimate, not the same one: the option is used
    moved = reestimate(real, out / "prior_map.ply", config=config, still=0.5)
    assert moved["rot_mae_deg"] != again["rot_mae_deg"]
    assert main(["eval-tof", str(real), "--reestimate", str(out / "prior_map.ply"), "--config", str(config),
                 "--json"]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["eval-tof", str(real), "--reestimate", str(out / "prior_map.ply"), "--config",
                 str(out / "nope.yaml")]) == 2  # fmt: skip  (a bad argument: the CLI's usage error code)
    assert "nope.yaml" in capsys.readouterr().err


def test_replay_of_the_recording_keeps_the_truth_and_writes_a_scored_estimate(
    recording: tuple[Path, Path, dict], config: Path, tmp_path: Path
) -> None:
    """``replay --config`` of the real-style bag (StrainArray with ``valid`` filled, epoch stamps) runs the node's
    sliding window; its output holds the truth and the estimate at the truth's stamps, which eval-tof scores."""
    _, real, _ = recording
    re = tmp_path / "re.mcap"
    assert main(["replay", str(real), "--out", str(re), "--config", str(config), "--json"]) == 0
    ev = evaluate(re)
    # 1 s of motion at 30 Hz truth, the window's first slices after the still start and the last ones unfinished
    assert ev["samples"] >= 15
    # the window's accuracy on the seed's bound (the live estimator; the batch is better)
    assert ev["trans_mae_cm"] < 0.78 and ev["rot_mae_deg"] < 0.96, ev


def test_strain_flags_decoded_from_a_message_are_read_only_and_taken() -> None:
    """A StrainArray's ``valid`` decoded from CDR is a read-only view of the buffer; the tracker leaves it as it is
    (it used to narrow it in place: "output array is read-only") and drops the invalid gauge."""
    from shape_sensing.messages.factory import default_factory
    from shape_sensing.pipelines.continuum_tracker import ContinuumTracker

    f = default_factory()
    s, th, ka = np.array([0.3, 0.6, 0.9]), np.array([0.1, 0.2, 0.3]), np.array([1.0, 1.5, 2.0])
    m = strain_array_msg(10**9, "continuum_base", s, th, ka, np.array([True, False, True]), f)
    back = f.typestore.deserialize_cdr(f.typestore.serialize_cdr(m, m.__msgtype__), m.__msgtype__)
    _, s2, th2, ka2, ok = strain_from_msg(back)
    (section,) = yaml.safe_load((ROOT / "config" / "continuum_tof.yaml").read_text()).values()
    params = {**section["ros__parameters"], "tof_topics": [], "tof_arc_lengths": [], "tof_azimuths": [],
              "tof_forward": [], "map_file": "", "gyro_bias_duration": 0.0}  # fmt: skip
    tr = ContinuumTracker(params)
    for flags in (ok, np.asarray(back.valid)):
        frozen = np.asarray(flags, dtype=bool)
        frozen.flags.writeable = False
        tr.push_strain(10**9, s2, th2, ka2, frozen)
        assert frozen.tolist() == [True, False, True]
    assert tr.stats.strain == 2 and tr.stats.skipped_bad == 0
    assert sum(x.strain_s.size for x in tr._pending) == 4  # two gauges of three, twice
