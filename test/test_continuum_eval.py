"""eval-continuum on a few seconds of the real dataset: scores, bag, CLI, config consistency."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from shape_sensing.cli import main as cli_main
from shape_sensing.cli.eval_continuum import (
    DEFAULT_ROBOT2,
    DEFAULT_TUNING,
    HELD_OUT_TUNING,
    default_tuning,
    evaluate_trial,
    noise_family,
    pose_sensor_noise,
    run_estimator,
    score,
    write_bag,
)
from shape_sensing.estimators.continuum import lie
from shape_sensing.estimators.continuum.estimator import (
    BatchEstimator,
    Tuning,
    measurements_from_trial,
    weights_from_trial,
)
from shape_sensing.estimators.continuum.model import GridState
from shape_sensing.estimators.continuum.window import SlidingWindow
from shape_sensing.io.bag import bag_topics, read_bag
from shape_sensing.io.space_time_dataset import load_trial
from shape_sensing.schemas import schema_for

ROOT = Path(__file__).resolve().parents[1]
DATASET = ROOT.parent / "shared" / "datasets" / "space_time_continuum"
needs_data = pytest.mark.skipif(not DATASET.is_dir(), reason="shared dataset not present")


@needs_data
def test_score_of_vicon_itself_is_zero() -> None:
    """Scoring a 'estimate' built from the Vicon poses at the nodes gives zero error (checks the scorer)."""
    tr = load_trial(DATASET, "slow_free_space")
    vic = [tr.streams[f"vicon{i}"] for i in range(5)]
    t = vic[4].t[(vic[4].t >= 19.0) & (vic[4].t <= 19.5)]
    T = np.stack([lie.exp(np.stack([v.values[np.argmin(np.abs(v.t - tt))] for v in vic])) for tt in t])
    st = GridState(t, np.array([v.s[0] for v in vic]), T, np.zeros((t.size, 5, 6)), np.zeros((t.size, 5, 6)))
    sc = score(tr, st, float(t[0]), float(t[-1]))
    assert sc["all"]["pos_mm"]["max"] < 1e-9 and sc["all"]["rot_deg"]["max"] < 1e-6
    assert sorted(sc["per_s"]) == ["0.1165", "0.2330", "0.3495", "0.4660"]


@needs_data
@pytest.mark.parametrize("estimator", ["batch", "window"])
def test_short_real_run_is_accurate(estimator: str) -> None:
    m, _, res = evaluate_trial(DATASET, "slow_free_space", estimator, t_end=19.0 + 1.5)
    a = m["all"]
    # the raw tip sensor alone is 5.6 mm / 2.4 deg RMSE here; every arc length stays within a few cm
    assert a["n"] > 50 and a["pos_mm"]["rmse"] < 15.0 and a["rot_deg"]["rmse"] < 8.0
    assert m["per_s"]["0.4660"]["pos_mm"]["rmse"] < 8.0
    assert res.tip_cov is not None and np.all(np.linalg.eigvalsh(res.tip_cov[0]) > 0)


@needs_data
def test_bag_holds_tf_path_markers_and_tip(tmp_path: Path) -> None:
    _, tr, res = evaluate_trial(DATASET, "slow_free_space", "batch", t_end=19.5)
    n = write_bag(tmp_path / "bag", tr, res)
    topics = bag_topics(tmp_path / "bag")
    assert topics == {
        "/tf": "tf2_msgs/msg/TFMessage",
        "/tf_static": "tf2_msgs/msg/TFMessage",  # world -> continuum_base, as the launch file
        "/continuum/shape/path": "nav_msgs/msg/Path",
        "/continuum/shape/markers": "visualization_msgs/msg/MarkerArray",
        "/continuum/shape/tip": "geometry_msgs/msg/PoseWithCovarianceStamped",
        "/continuum/vicon/path": "nav_msgs/msg/Path",
        # the inputs, named as config/continuum_estimator.yaml subscribes to them
        "/continuum/gyro_mid/data": "sensor_msgs/msg/Imu",
        "/continuum/gyro_tip/data": "sensor_msgs/msg/Imu",
        "/continuum/base_pose": "geometry_msgs/msg/PoseWithCovarianceStamped",
        "/continuum/tip_pose": "geometry_msgs/msg/PoseWithCovarianceStamped",
    }
    msgs = list(read_bag(tmp_path / "bag"))
    assert len(msgs) == n
    tip = [b.msg for b in msgs if b.topic == "/continuum/shape/tip"]
    assert len(tip) == res.state.K
    p = tip[-1].pose.pose.position
    assert np.allclose([p.x, p.y, p.z], res.state.T[-1, -1, :3, 3])
    assert np.asarray(tip[-1].pose.covariance).reshape(6, 6)[0, 0] > 0


@needs_data
def test_cli_json_and_outputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = cli_main(["eval-continuum", str(DATASET), "impulse_1", "--duration", "0.5", "--json", "--out", str(tmp_path)])
    assert rc == 0
    m = json.loads(capsys.readouterr().out)
    assert m["trial"] == "impulse_1" and m["estimator"] == "batch" and m["robot"] == "robot2"
    assert m["authors"]["all_mm"] == 12.59
    assert Path(m["plot"]).is_file() and Path(m["bag"]).is_dir()
    assert m["tuned"] is True


@needs_data
def test_cli_untuned_uses_published_weights(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["eval-continuum", str(DATASET), "extensible", "--duration", "0.3", "--json", "--no-outputs"]
    assert cli_main(args) == 0
    tuned = json.loads(capsys.readouterr().out)
    assert cli_main([*args, "--untuned"]) == 0
    untuned = json.loads(capsys.readouterr().out)
    assert tuned["tuned"] and not untuned["tuned"] and tuned["robot"] == "robot1"
    assert tuned["all"]["rot_deg"]["rmse"] != untuned["all"]["rot_deg"]["rmse"]


def test_cli_bad_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["eval-continuum", str(tmp_path), "nope", "--no-outputs"]) == 2
    assert "not a space_time_continuum dataset" in capsys.readouterr().err
    assert cli_main(["eval-continuum", str(tmp_path), "x", "--untuned", "--in-sample", "--no-outputs"]) == 2
    assert "--untuned and --in-sample exclude each other" in capsys.readouterr().err
    if DATASET.is_dir():
        assert cli_main(["eval-continuum", str(DATASET), "nope", "--no-outputs"]) == 2
        assert "unknown trial 'nope'" in capsys.readouterr().err
        with pytest.raises(SystemExit) as exc:  # argparse refuses it and names the option
            cli_main(["eval-continuum", str(DATASET), "impulse_1", "--duration", "-1", "--no-outputs"])
        assert exc.value.code == 2
        assert "argument --duration: '-1': expected a finite number > 0" in capsys.readouterr().err
        short = ["eval-continuum", str(DATASET), "impulse_1", "--duration", "0.5", "--no-outputs"]
        for est in ("batch", "window"):
            with pytest.raises(SystemExit) as exc:  # refused before anything is loaded, naming the option
                cli_main([*short, "--estimator", est, "--iterations", "0"])
            assert exc.value.code == 2
            assert "argument --iterations: '0': expected an integer >= 1" in capsys.readouterr().err
        # the batch's cap: two iterations do not converge from a straight start, and it says so
        assert cli_main([*short, "--iterations", "2", "--json"]) == 0
        capped = json.loads(capsys.readouterr().out)
        assert capped["iterations"] == 2 and capped["converged_fraction"] == 0.0


@needs_data
def test_trial_windows_outside_or_past_the_data(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A window with no sample is refused by name; one running past the data stops at its last sample."""
    import shutil

    root = tmp_path / "stc"
    shutil.copytree(DATASET / "config", root / "config")
    (root / "data").symlink_to(DATASET / "data")
    src = (root / "config" / "trial" / "impulse_1.json").read_text()
    window = '"start_time": 20,\n        "end_time": 30'
    assert window in src
    trials = root / "config" / "trial"
    (trials / "outside.json").write_text(src.replace(window, window.replace("20", "200").replace("30", "210")))
    (trials / "late.json").write_text(src.replace(window, window.replace("20", "33.5").replace("30", "300")))
    assert cli_main(["eval-continuum", str(root), "outside", "--no-outputs"]) == 2
    err = capsys.readouterr().err
    assert "trial 'outside': no pose or gyroscope sample after the start of its window [200, 210] s" in err
    assert cli_main(["eval-continuum", str(root), "late", "--json", "--no-outputs"]) == 0
    late = json.loads(capsys.readouterr().out)
    assert 0.8 < late["span_s"] < 1.0  # 33.5 s to the last sample at 34.39 s, not to 300 s
    assert late["all"] is not None
    # a second robot config of the same length: the robot must be named, and is then used as published
    robot2 = (DATASET / "config" / "robot" / "robot2.json").read_text()
    (root / "config" / "robot" / "robot3.json").write_text(robot2)
    assert cli_main(["eval-continuum", str(root), "impulse_1", "--no-outputs"]) == 2
    assert "fits robot configs ['robot2', 'robot3']" in capsys.readouterr().err
    args = ["eval-continuum", str(root), "impulse_1", "--robot", "robot3", "--duration", "0.3", "--json"]
    args.append("--no-outputs")
    assert cli_main(args) == 0
    named = json.loads(capsys.readouterr().out)
    assert named["robot"] == "robot3" and named["weights"] == "published"


@needs_data
def test_saturated_gyro_axes_are_counted_and_left_out_without_flipping_the_robot(tmp_path: Path) -> None:
    """impulse_1 reads 13 gyro axes at the range. They are counted and left out (NaN) while the same
    readings' other axes are used. On a grid of 25 slices per second neither leaving them out nor keeping
    them as measurements (``keep_saturated_gyro``) flips the mid-robot orientation: with the gyro factor's
    velocity interpolated linearly between slices, leaving them out flipped it by over 100 deg (12.2 deg
    pooled), which is why they used to be kept."""
    import shutil

    tr = load_trial(DATASET, "impulse_1")
    t0, t1 = tr.config.start_time, tr.config.end_time
    meas, saturated = measurements_from_trial(tr, t0, t1)
    kept, _ = measurements_from_trial(tr, t0, t1, Tuning(keep_saturated_gyro=True))
    assert saturated == 13
    assert meas.gyro_t.size == sum(st.window(t0, t1).t.size for st in tr.of_kind("gyro"))
    nan = np.isnan(meas.gyro_w)
    assert nan.sum() == 13 and np.all(np.abs(kept.gyro_w[nan]) >= 4.9)
    assert np.array_equal(meas.gyro_w[~nan], kept.gyro_w[~nan]) and not np.isnan(kept.gyro_w).any()
    root = tmp_path / "stc"
    shutil.copytree(DATASET / "config", root / "config")
    (root / "data").symlink_to(DATASET / "data")
    robot2 = (DATASET / "config" / "robot" / "robot2.json").read_text()
    assert '"K_per_second": 30,' in robot2
    (root / "config" / "robot" / "k25.json").write_text(robot2.replace('"K_per_second": 30,', '"K_per_second": 25,'))
    k25 = load_trial(root, "impulse_1", robot="k25")
    for tuning in (Tuning(), Tuning(keep_saturated_gyro=True)):
        e = score(k25, run_estimator(k25, tuning=tuning, covariance=False).state, t0, t1)["all"]["rot_deg"]
        assert e["rmse"] < 7.0 and e["max"] < 20.0  # measured 6.11-6.16 and 14-15


@needs_data
@pytest.mark.parametrize("rate", [20, 25])
def test_gyro_readings_missing_at_impacts_do_not_flip_a_node(rate: int) -> None:
    """impulse_1 with every gyro reading above 3 rad/s removed (the hits' readings lost, as a dropout or a
    driver discarding saturated frames would lose them), on a grid of 20 or 25 slices per second, with the
    trial's default weights. When the gyro factor interpolated the velocity linearly between slices, a node
    turned freely within a slice there: the batch flipped one by 156 deg (25 per second), the online window
    by 179 deg (20). With the Gaussian-process velocity the reading inside a slice measures the turn, and
    both keep the rotation error of the full data (measured 6.2-6.5 deg pooled, at most 17 deg)."""
    tr = load_trial(DATASET, "impulse_1")
    tr = dataclasses.replace(tr, robot=dataclasses.replace(tr.robot, K_per_second=rate))
    t0, t1 = tr.config.start_time, tr.config.end_time
    m, _ = measurements_from_trial(tr, t0, t1)
    ok = np.abs(m.gyro_w).max(axis=1) <= 3.0
    assert 50 < np.count_nonzero(~ok) < 70  # 61 of 557
    m = dataclasses.replace(m, gyro_t=m.gyro_t[ok], gyro_s=m.gyro_s[ok], gyro_w=m.gyro_w[ok])
    s = np.linspace(0.0, tr.robot.length, tr.robot.N)
    w = weights_from_trial(tr, default_tuning("impulse_1", "robot2")[0])
    batch = BatchEstimator(w, s, rate).solve(m, t0, t1).state
    window = SlidingWindow(w, s, rate, t0, size=4, iterations=1).run(m, t1)  # as the node and eval run it
    for st in (batch, window):
        e = score(tr, st, t0, t1)["all"]["rot_deg"]
        assert e["rmse"] < 7.5 and e["max"] < 25.0


@needs_data
def test_node_config_and_defaults_are_the_evaluated_weights() -> None:
    schema = schema_for("continuum_estimator")
    from_yaml = schema.load_yaml(ROOT / "config" / "continuum_estimator.yaml")
    defaults = schema.defaults()
    w = weights_from_trial(load_trial(DATASET, "slow_free_space"), DEFAULT_TUNING["robot2"])
    for key in ("P0", "Q1", "Q2", "Q3", "R_pose", "R_gyro"):
        assert np.allclose(from_yaml[key], getattr(w, key)) and np.allclose(defaults[key], getattr(w, key))
    assert from_yaml["prior_factor"] == defaults["prior_factor"] == w.prior_factor
    assert from_yaml["cauchy_space"] == defaults["cauchy_space"] == w.cauchy_space


def test_default_weights_are_never_chosen_on_the_scored_trial() -> None:
    """Each robot-2 trial is scored with a family member chosen on the other robot-2 trials only."""
    family = noise_family()
    assert len(family) == 72
    assert sorted(HELD_OUT_TUNING) == ["fast_contact", "impulse_1", "slow_free_space"]
    for trial, (chosen_on, name, tuning) in HELD_OUT_TUNING.items():
        assert trial not in chosen_on and len(chosen_on) == 2
        assert family[name] == tuning
        assert default_tuning(trial, "robot2") == (
            tuning,
            f"noise model {name} chosen on {', '.join(chosen_on)} (held out: {trial})",
        )
    tn, why = default_tuning("a_hidden_trial", "robot2")
    assert tn == DEFAULT_TUNING["robot2"] == family[DEFAULT_ROBOT2]
    assert "slow_free_space, fast_contact, impulse_1" in why
    assert default_tuning("extensible", "robot1")[0] == DEFAULT_TUNING["robot1"]
    assert default_tuning("x", "robot9") == (Tuning(), "published")


@needs_data
def test_robot1_pose_noise_rule_gives_the_default_r_pose() -> None:
    """robot1's R_pose multipliers are the pose sensors' own noise (no ground truth) over the published R_pose."""
    tr = load_trial(DATASET, "extensible")
    lin, ang = pose_sensor_noise(tr)
    mult = np.asarray(DEFAULT_TUNING["robot1"].multipliers["R_pose"])
    assert np.allclose(mult * tr.robot.R_pose, [lin] * 3 + [ang] * 3, rtol=0.02)
    empty = dataclasses.replace(tr, config=dataclasses.replace(tr.config, start_time=5.0, end_time=6.0))
    with pytest.raises(ValueError, match="trial 'extensible' has no pose sensor with 3 or more samples"):
        pose_sensor_noise(empty)


@needs_data
def test_window_converges_on_extensible_when_iterated(capsys: pytest.CaptureFixture[str]) -> None:
    """Where the authors' window does not converge: ours meets its tolerance at every step, the first ones
    included (a straight robot of unit stretch at rest, the real one contracted and extending), when allowed
    to iterate; the CLI reports it."""
    trial = load_trial(DATASET, "extensible")
    tn = default_tuning("extensible", "robot1")[0]
    t0 = trial.config.start_time
    meas, _ = measurements_from_trial(trial, t0, t0 + 0.5, tn)
    s = np.linspace(0.0, trial.robot.length, trial.robot.N)
    win = SlidingWindow(weights_from_trial(trial, tn), s, trial.robot.K_per_second, t0, size=4, iterations=30)
    infos = [win.step(meas.between(win.t_newest, win.t_newest + 1 / win.rate)) for _ in range(15)]
    assert all(i.converged for i in infos), [i.iterations for i in infos]
    # measured 24, 10, 10, 11, then 4-6: the first step moves from straight to contracted and bent
    assert infos[0].iterations > 5 and max(i.iterations for i in infos[4:]) < 15
    # without the coupled prior's curvature (Gauss-Newton's J^T J only) the first steps do not converge in 30
    plain = SlidingWindow(
        weights_from_trial(trial, tn), s, trial.robot.K_per_second, t0, size=4, iterations=30, second_order=False
    )
    first = [plain.step(meas.between(plain.t_newest, plain.t_newest + 1 / plain.rate)) for _ in range(3)]
    assert not all(i.converged for i in first)
    full = [i for i in infos if i.finalized]
    assert len(full) == 12
    assert max(win.final_updates) < 0.03  # measured 1.1e-2 (a strain entry); the poses move far less
    args = ["eval-continuum", str(DATASET), "extensible", "--estimator", "window", "--duration", "0.5", "--no-outputs"]
    assert cli_main([*args, "--iterations", "30", "--json"]) == 0
    conv = json.loads(capsys.readouterr().out)
    steps = conv["slices"] - 1
    assert conv["converged_fraction"] == 1.0 and 2 * steps < conv["iterations"] < 30 * steps
    assert cli_main([*args, "--iterations", "30"]) == 0
    assert f"converged in {100.0 * conv['converged_fraction']:.1f} % of steps" in capsys.readouterr().out
    assert cli_main([*args, "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["converged_fraction"] is None and one["iterations"] == one["slices"] - 1
    # one iteration per step scores within 0.1 mm / 0.1 deg of the iterated window here
    assert abs(one["all"]["pos_mm"]["rmse"] - conv["all"]["pos_mm"]["rmse"]) < 0.1
    assert abs(one["all"]["rot_deg"]["rmse"] - conv["all"]["rot_deg"]["rmse"]) < 0.1
