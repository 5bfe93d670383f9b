"""Demo outputs a user can trust: written under temporary names, a readable partial bag on a signal or a crash."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from shape_sensing.demos.vine_imu import run_demo
from shape_sensing.io.bag import bag_metadata, read_bag


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes, bytes]:
    """A completed run's outputs, to check that an interrupted run leaves them as they were."""
    out = tmp_path_factory.mktemp("prev")
    run_demo(out, duration=1.0, progress=False)
    return out, (out / "vine-imu.mcap").read_bytes(), (out / "vine-imu.png").read_bytes()


def _copy_previous(previous: tuple[Path, bytes, bytes], out: Path) -> None:
    _, bag, png = previous
    out.mkdir(parents=True, exist_ok=True)
    (out / "vine-imu.mcap").write_bytes(bag)
    (out / "vine-imu.png").write_bytes(png)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_signal_leaves_previous_outputs_and_a_readable_partial_bag(
    sig: signal.Signals, previous: tuple[Path, bytes, bytes], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    _copy_previous(previous, out)
    proc = subprocess.Popen(
        [sys.executable, "-m", "shape_sensing.cli", "demo", "vine-imu", "--duration", "60", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not list(out.glob(".vine-imu.*/vine-imu/*.mcap")) and time.monotonic() < deadline:
        time.sleep(0.2)  # wait until the bag is being written
    time.sleep(1.5)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err  # 130 on SIGINT, 143 on SIGTERM, as a shell reports them
    assert "Traceback" not in err
    assert f"stopped by {sig.name}" in err and "partial bag" in err and "previous complete run" in err
    # The previous complete outputs are untouched; nothing temporary is left behind.
    assert (out / "vine-imu.mcap").read_bytes() == previous[1]
    assert (out / "vine-imu.png").read_bytes() == previous[2]
    assert not list(out.glob(".vine-imu.*"))
    partial = out / "vine-imu.partial.mcap"
    stamps = [m.stamp_ns for m in read_bag(partial, ["/vine/truth/tip"])]
    assert 0 < len(stamps) < 6001  # readable, and shorter than the full 60 s run
    assert bag_metadata(partial)["shape_sensing.partial"].startswith(f"stopped by {sig.name} at t = ")


def _crash_on_call(monkeypatch: pytest.MonkeyPatch, cls: type, method: str, n: int) -> None:
    """Make ``cls.method`` raise a RuntimeError on its ``n``-th call (a crash in the middle of a run)."""
    calls = {"n": 0}
    original = getattr(cls, method)

    def failing(self: object, *args: object) -> object:
        calls["n"] += 1
        if calls["n"] == n:
            raise RuntimeError("simulated crash")
        return original(self, *args)

    monkeypatch.setattr(cls, method, failing)


def test_crash_keeps_what_was_recorded_and_the_previous_outputs(
    previous: tuple[Path, bytes, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "run"
    _copy_previous(previous, out)
    from shape_sensing.pipelines import vine_imu as pipeline

    _crash_on_call(monkeypatch, pipeline.VineImuTracker, "push_imu", 2000)
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_demo(out, duration=5.0, progress=False)
    assert (out / "vine-imu.mcap").read_bytes() == previous[1]
    assert (out / "vine-imu.png").read_bytes() == previous[2]
    partial = out / "vine-imu.partial.mcap"
    assert sum(1 for _ in read_bag(partial, ["/vine/imu_00/data"])) > 50
    assert bag_metadata(partial)["shape_sensing.partial"] == "writing stopped by RuntimeError"


def test_a_new_run_never_leaves_an_old_picture_beside_its_bag(
    previous: tuple[Path, bytes, bytes], tmp_path: Path
) -> None:
    out = tmp_path / "run"
    _copy_previous(previous, out)
    metrics = run_demo(out, duration=0.5, progress=False, picture=False)
    assert Path(metrics["bag"]) == out / "vine-imu.mcap" and (out / "vine-imu.mcap").read_bytes() != previous[1]
    assert not (out / "vine-imu.png").exists()
    assert bag_metadata(out / "vine-imu.mcap").get("shape_sensing.partial") is None


@pytest.mark.parametrize("demo", ["hyper-redundant", "growing"])
def test_other_demos_stop_on_sigterm_with_a_partial_bag(demo: str, tmp_path: Path) -> None:
    out = tmp_path / demo
    proc = subprocess.Popen(
        [sys.executable, "-m", "shape_sensing.cli", "demo", demo, "--duration", "600", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not list(out.glob(f".{demo}.*/{demo}/*.mcap")) and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err  # SIGTERM, as a shell reports it
    partial = out / f"{demo}.partial.mcap"
    assert "stopped by SIGTERM" in err and str(partial) in err
    assert bag_metadata(partial)["shape_sensing.partial"].startswith("stopped by SIGTERM")
    assert not (out / f"{demo}.mcap").exists() and not list(out.glob(f".{demo}.*"))


# The sensor-ring and collision demos, run long enough to be stopped while recording: (arguments, a topic
# written at every step).
_NEW_DEMOS = {
    "tof-rings": (["--duration", "600"], "/tf"),
    "vine-collision": (["--course", "three"], "/vine/base/state"),
}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("demo", sorted(_NEW_DEMOS))
def test_new_demos_stop_on_a_signal_leaving_previous_outputs_and_a_partial_bag(
    demo: str, sig: signal.Signals, tmp_path: Path
) -> None:
    out = tmp_path / demo
    out.mkdir()
    previous = {suffix: f"previous run's {suffix}".encode() for suffix in (".mcap", ".png", ".params.yaml")}
    for suffix, content in previous.items():
        (out / f"{demo}{suffix}").write_bytes(content)
    extra, topic = _NEW_DEMOS[demo]
    err_file = tmp_path / "stderr.txt"
    with err_file.open("w") as err_out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "shape_sensing.cli", "demo", demo, *extra, "--out", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=err_out,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not re.search(rf"{demo} demo:.*\|\s*[1-9]", err_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.1)  # until its progress bar shows it has recorded some steps
        proc.send_signal(sig)
        proc.wait(timeout=60)
    err = err_file.read_text()
    assert proc.returncode == 128 + sig, err  # 130 on SIGINT, 143 on SIGTERM, as a shell reports them
    assert "Traceback" not in err
    partial = out / f"{demo}.partial.mcap"
    assert f"stopped by {sig.name}" in err and str(partial) in err and "previous complete run" in err
    for suffix, content in previous.items():
        assert (out / f"{demo}{suffix}").read_bytes() == content, suffix
    assert not list(out.glob(f".{demo}.*"))
    assert bag_metadata(partial)["shape_sensing.partial"].startswith(f"stopped by {sig.name} at t = ")
    assert sum(1 for _ in read_bag(partial, [topic])) > 0  # what was recorded before the signal, readable


def test_vine_collision_crash_keeps_what_was_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from shape_sensing.demos.vine_collision import run_demo as collision_demo
    from shape_sensing.pipelines import vine_collision as pipeline

    _crash_on_call(monkeypatch, pipeline.CollisionTracker, "push_length", 60)
    with pytest.raises(RuntimeError, match="simulated crash"):
        collision_demo(tmp_path, course="single", duration=5.0, progress=False, with_sweep=False)
    partial = tmp_path / "vine-collision.partial.mcap"
    assert sum(1 for _ in read_bag(partial, ["/vine/collision/pivot"])) == 59
    meta = bag_metadata(partial)
    assert meta["shape_sensing.partial"] == "writing stopped by RuntimeError"
    assert "collision_pivot_estimator" in meta["shape_sensing.parameters.collision_pivot_estimator"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["vine-collision.partial.mcap"]


def test_tof_continuum_stops_on_sigint_leaving_previous_outputs_and_a_partial_bag(tmp_path: Path) -> None:
    out = tmp_path / "tof"
    out.mkdir()
    names = ["tof-continuum.mcap", "tof-continuum.png", "tof-continuum.params.yaml", "prior_map.ply", "metrics.json"]
    previous = {name: f"previous run's {name}".encode() for name in names}
    for name, content in previous.items():
        (out / name).write_bytes(content)
    err_file = tmp_path / "stderr.txt"
    with err_file.open("w") as err_out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "shape_sensing.cli", "demo", "tof-continuum", "--duration", "2", "--out", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=err_out,
            text=True,
        )
        deadline = time.monotonic() + 60
        while not re.search(r"tof-continuum demo.*\|\s*[2-5]/5", err_file.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)  # until the sensor data is in the bag (the estimate is running)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    err = err_file.read_text()
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    partial = out / "tof-continuum.partial.mcap"
    assert "stopped by SIGINT" in err and str(partial) in err and "previous complete run" in err
    for name, content in previous.items():
        assert (out / name).read_bytes() == content, name
    assert not list(out.glob(".tof-continuum.*"))
    meta = bag_metadata(partial)
    assert meta["shape_sensing.partial"].startswith("stopped by SIGINT at t = ")
    assert "tof_gate: 0.3" in meta["shape_sensing.parameters.continuum_tof_localise"]  # the estimator's parameters
    assert sum(1 for _ in read_bag(partial, ["/tof/tof_0_0"])) == pytest.approx(2 * 15, abs=1)  # 15 Hz, all of it
