"""Commands that run longer than a couple of seconds show a progress bar on stderr, and nothing under --json."""

from __future__ import annotations

from pathlib import Path

import pytest

from shape_sensing.cli import main


@pytest.fixture(scope="module")
def demo_bag(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from shape_sensing.demos.vine_imu import run_demo

    out = tmp_path_factory.mktemp("progress")
    return Path(run_demo(out, duration=1.0, progress=False, picture=False)["bag"])


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 0
    return capsys.readouterr().err


def test_replay_shows_progress_and_is_quiet_under_json(
    demo_bag: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _run(["replay", str(demo_bag), "--out", str(tmp_path / "a.mcap")], capsys)
    assert "replay" in err and "100%" in err
    assert _run(["replay", str(demo_bag), "--out", str(tmp_path / "b.mcap"), "--json"], capsys) == ""


def test_figure4_and_demos_show_progress(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    err = _run(["figure4", "--pairs", "2", "--k-pairs", "2"], capsys)
    assert "figure4:" in err and "pair" in err and "100%" in err
    assert _run(["figure4", "--pairs", "2", "--k-pairs", "2", "--json"], capsys) == ""
    err = _run(["demo", "growing", "--duration", "1", "--out", str(tmp_path / "g")], capsys)
    assert "growing demo:" in err
    assert _run(["demo", "growing", "--duration", "1", "--out", str(tmp_path / "g"), "--json"], capsys) == ""
