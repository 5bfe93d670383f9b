"""vine-collision: message round trips, the demo's bag read by an independent MCAP reader, replay reproduces it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from mcap.reader import make_reader

from shape_sensing.cli import main
from shape_sensing.cli.replay import replay_bag
from shape_sensing.drivers.base_station import BaseStationReading, ParserStats
from shape_sensing.drivers.contact_cap import CapReading
from shape_sensing.estimators.collision_pivot import PivotEvent, PivotOutput
from shape_sensing.messages import PUBLISHED_TYPES, default_factory
from shape_sensing.messages import collision as cm


def test_every_collision_builder_round_trips_through_cdr() -> None:
    f = default_factory("jazzy")
    out = PivotOutput(5, (1.0, 2.0), 0.3, 2.5, 0.7, 1.8, 0.01, (1e-4, 0.0, 0.0, 2e-4), (0.5, 0.6), 2, True, False,
                      True, True)  # fmt: skip
    examples = {
        "shape_sensing/msg/BaseStationState": cm.base_station_state_msg(
            BaseStationReading(7, 3, 2**33, -12, 1.25, 10_000.0, 11_000.0, True, 0b11), ParserStats(dropped=4),
            "vine_base", f),
        "sensor_msgs/msg/FluidPressure": cm.fluid_pressure_msg(1, "vine_base", 9_876.5, 100.0, f),
        "shape_sensing/msg/ContactCapState": cm.contact_cap_state_msg(CapReading(2, 6, True, True, 0.25, 0.05), 19,
                                                                      "vine_cap", f),
        "geometry_msgs/msg/WrenchStamped": cm.wrench_stamped_msg(3, "ft", [1.0, 2.0, 3.0], [0.1, 0.2, 0.3], f),
        "shape_sensing/msg/PivotEstimate": cm.pivot_estimate_msg(out, "vine_base", f),
        "shape_sensing/msg/ContactEvent": cm.contact_event_msg(PivotEvent(4, 2, 1, (0.1, 0.2), 1.1, math.nan, 2.0),
                                                               "vine_base", f),
        "visualization_msgs/msg/MarkerArray": cm.collision_markers(6, "vine_base", np.zeros((2, 2)), (1.0, 1.0), True,
                                                                   factory=f),
    }  # fmt: skip
    mine = {t for t, b in PUBLISHED_TYPES.items() if any(".messages.collision." in x for x in b)}
    assert mine <= set(examples)
    for typename, msg in examples.items():
        raw = f.typestore.serialize_cdr(msg, typename)
        assert f.typestore.serialize_cdr(f.typestore.deserialize_cdr(raw, typename), typename) == raw, typename
    bs = examples["shape_sensing/msg/BaseStationState"]
    assert (bs.device_time.sec, bs.frames_dropped, bs.cap_switches) == (8, 4, 3)
    assert cm.cap_state_from_msg(examples["shape_sensing/msg/ContactCapState"]) == (True, False, 0.25)
    w = examples["geometry_msgs/msg/WrenchStamped"]
    assert cm.wrench_from_msg(w, "y") == 2.0 and cm.wrench_from_msg(w, "norm") == pytest.approx(math.sqrt(14))


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The single-obstacle demo through the CLI (the three-obstacle targets are checked in the core tests)."""
    out = tmp_path_factory.mktemp("vc")
    capture = out / "stdout.json"
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        code = main(["demo", "vine-collision", "--course", "single", "--no-sweep", "--out", str(out), "--json"])
    assert code == 0
    capture.write_text(buf.getvalue())
    return out, json.loads(buf.getvalue())


def test_demo_bag_opens_with_an_independent_mcap_reader(demo: tuple[Path, dict]) -> None:
    _out, m = demo
    assert m["course"].startswith("single-150deg-55cm")
    assert m["filter_improved"]["tip_error_max_pct_of_length"] < m["filter_paper"]["tip_error_max_pct_of_length"]
    assert next(r["variant"] for r in m["ablation"]) == "paper (as written)"
    assert m["ablation"][0]["tip_rmse_cm"] == pytest.approx(m["filter_paper"]["tip_rmse_cm"], abs=1e-3)
    assert m["serial_line"]["crc_errors"] > 0 and m["serial_line"]["garbage_bytes"] > 0  # faults were on the line
    assert Path(m["picture"]).stat().st_size > 10_000
    with open(m["bag"], "rb") as fh:
        reader = make_reader(fh)
        summary = reader.get_summary()
        assert summary is not None
        topics = {c.topic: summary.schemas[c.schema_id].name for c in summary.channels.values()}
        counts = dict(summary.statistics.channel_message_counts) if summary.statistics else {}
    for topic, ty in {
        "/vine/base/state": "shape_sensing/msg/BaseStationState", "/vine/base/length": "sensor_msgs/msg/JointState",
        "/vine/base/pressure": "sensor_msgs/msg/FluidPressure", "/vine/cap/state": "shape_sensing/msg/ContactCapState",
        "/vine/cap/imu": "sensor_msgs/msg/Imu", "/vine/obstacle/wrench": "geometry_msgs/msg/WrenchStamped",
        "/vine/collision/pivot": "shape_sensing/msg/PivotEstimate", "/vine/collision/path": "nav_msgs/msg/Path",
        "/vine/collision/events": "shape_sensing/msg/ContactEvent", "/vine/collision_paper/tip":
        "geometry_msgs/msg/PoseStamped", "/tf": "tf2_msgs/msg/TFMessage", "/diagnostics":
        "diagnostic_msgs/msg/DiagnosticArray", "/vine/truth/obstacles": "visualization_msgs/msg/MarkerArray",
    }.items():  # fmt: skip
        assert topics.get(topic) == ty, topic
    by_topic = {c.topic: counts.get(cid, 0) for cid, c in summary.channels.items()}
    assert by_topic["/vine/collision/pivot"] == m["samples"]


def test_replay_reproduces_the_live_estimates(demo: tuple[Path, dict], tmp_path: Path) -> None:
    _out, m = demo
    import argparse

    args = argparse.Namespace(input=Path(m["bag"]), namespace="/vine")
    metrics = replay_bag(Path(m["bag"]), tmp_path / "replay.mcap", args)
    assert metrics == {"filter_improved": m["filter_improved"], "filter_paper": m["filter_paper"]}


def test_demo_refuses_a_bad_rate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from shape_sensing.demos.vine_collision import run_demo

    with pytest.raises(SystemExit):  # the option's own check (test_cli_errors covers inf/nan/0 of every option)
        main(["demo", "vine-collision", "--rate", "-1", "--out", str(tmp_path)])
    assert "argument --rate: '-1': expected a finite number > 0" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--rate -1.0: expected a positive frame rate"):
        run_demo(tmp_path, rate=-1.0, progress=False)
    with pytest.raises(ValueError, match="--duration nan: expected a finite positive"):
        run_demo(tmp_path, duration=float("nan"), progress=False)
    assert not list(tmp_path.iterdir())  # refused before anything was written


def test_replay_uses_the_parameters_recorded_in_the_bag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Round trip: the demo's (non-default) estimator parameters go into the bag's metadata and the file beside
    it; replay reproduces the live estimates from the bag alone, and differs when told to ignore them."""
    from shape_sensing.config import load_node_params
    from shape_sensing.demos.vine_collision import _params
    from shape_sensing.estimators.collision_pivot import SCHEMA
    from shape_sensing.io.bag import bag_parameters
    from shape_sensing.sim.vine_collision import SensorFaults

    out = tmp_path / "demo"
    assert main(["demo", "vine-collision", "--course", "single", "--no-sweep", "--duration", "3",
                 "--out", str(out), "--json"]) == 0  # fmt: skip
    live = json.loads(capsys.readouterr().out)
    bag, beside = out / "vine-collision.mcap", out / "vine-collision.params.yaml"
    assert Path(live["bag"]) == bag and Path(live["params"]) == beside
    recorded = bag_parameters(bag, SCHEMA.node)
    assert recorded is not None and recorded == beside.read_text()
    expected = SCHEMA.validate(_params(SensorFaults()))
    assert expected != SCHEMA.defaults()  # the demo's run is not a default run
    assert SCHEMA.validate(load_node_params(beside, SCHEMA)) == expected
    beside.unlink()  # the bag alone carries them

    def replay(*extra: str) -> dict:
        assert main(["replay", str(bag), "--out", str(tmp_path / f"r{len(extra)}.mcap"), "--json", *extra]) == 0
        return json.loads(capsys.readouterr().out)

    again = replay()
    assert again["parameters"] == "recorded in the bag"
    assert {k: again[k] for k in ("filter_improved", "filter_paper")} == {
        k: live[k] for k in ("filter_improved", "filter_paper")
    }
    assert bag_parameters(tmp_path / "r0.mcap", SCHEMA.node) == recorded  # and the replay's own bag records them
    defaults = replay("--ignore-bag-parameters")
    assert defaults["parameters"] == "defaults (--ignore-bag-parameters)"
    assert defaults["filter_improved"]["tip_rmse_cm"] != live["filter_improved"]["tip_rmse_cm"]
