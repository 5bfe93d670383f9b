"""Reader for the ``space_time_continuum`` dataset (CSV streams + JSON robot and trial configs).

Layout of a dataset directory::

    config/robot/<robot>.json    topology and noise weights of one robot
    config/trial/<trial>.json    time window and which sensor kinds a trial uses
    data/<folder>/<name>.csv     one stream per file: ``sensor type:,<kind>``, a
                                 header, then rows ``t [s], s [m], values...``

Kinds: ``vicon`` and ``aurora`` rows carry a pose twist ``xi = [rho; phi]``
(``T = exp(xi^)``), ``gyro`` rows a body angular velocity (rad/s). The JSON
files may hold ``//`` comments. Every malformed input raises
:class:`~shape_sensing.io.errors.DatasetError` naming the file, line and field.
"""

from __future__ import annotations

import csv
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from shape_sensing.geometry import FloatArray
from shape_sensing.io.errors import DatasetError

__all__ = [
    "SENSOR_WIDTH",
    "RobotConfig",
    "SensorStream",
    "Trial",
    "TrialConfig",
    "load_trial",
    "read_robot_config",
    "read_sensor_csv",
    "read_trial_config",
]

_log = logging.getLogger(__name__)

#: Switches of the robot configs' topology that select variants of the original estimator not built here
#: (every shipped config sets them false); one set true is reported, not silently ignored.
UNSUPPORTED_TOPOLOGY_FLAGS = (
    "lock_first_position",
    "lock_first_pose",
    "lock_last_strain",
    "time_nodes_on_measurements",
    "use_1D_estimator",
)
_WARNED: set[tuple[str, tuple[str, ...]]] = set()

#: Number of values per row after ``t, s`` for each sensor kind.
SENSOR_WIDTH: dict[str, int] = {"vicon": 6, "aurora": 6, "gyro": 3}


@dataclass(frozen=True)
class SensorStream:
    """One sensor's samples.

    Attributes:
        name: file stem (``aurora1``, ``gyro_ee``...).
        kind: ``vicon``, ``aurora`` or ``gyro``.
        t: ``(M,)`` sample times (s), sorted.
        s: ``(M,)`` arc length of the sensor (m, material coordinate).
        values: ``(M, 6)`` pose twists or ``(M, 3)`` angular velocities.
        skipped: rows of the file left out as bad frames (a non-finite value, or a truncated last line).
    """

    name: str
    kind: str
    t: FloatArray
    s: FloatArray
    values: FloatArray
    skipped: int = 0

    def window(self, start: float, end: float) -> SensorStream:
        """The samples with ``start <= t <= end``."""
        m = (self.t >= start) & (self.t <= end)
        return SensorStream(self.name, self.kind, self.t[m], self.s[m], self.values[m], self.skipped)


@dataclass(frozen=True)
class RobotConfig:
    """Topology and noise weights of one robot (diagonal variances, ``[linear; angular]`` order).

    Attributes:
        name: file stem.
        P0: 18 variances of the base prior ``[pose | strain | velocity]``.
        Q1: white-noise-on-acceleration power in time (6).
        Q2: white-noise-on-strain-rate power along s (6).
        Q3: random-walk power of strain in time and of velocity along s (6).
        prior_factor: multiplies every prior covariance.
        R_pose: pose-measurement variances (6).
        R_gyro: gyroscope variances (3).
        measurement_factor: multiplies every measurement covariance.
        N: number of arc-length nodes.
        K_per_second: time nodes per second.
        length: robot (material) length.
        unsupported: topology switches set true that this estimator does not implement (reported on load).
    """

    name: str
    P0: FloatArray
    Q1: FloatArray
    Q2: FloatArray
    Q3: FloatArray
    prior_factor: float
    R_pose: FloatArray
    R_gyro: FloatArray
    measurement_factor: float
    N: int
    K_per_second: float
    length: float
    unsupported: tuple[str, ...] = ()


@dataclass(frozen=True)
class TrialConfig:
    """Which window of which data a trial scores.

    Attributes:
        name: file stem.
        folder: data folder name under ``data/``.
        start_time: first scored time (s).
        end_time: last scored time (s).
        use_aurora: whether pose-sensor streams are used.
        use_gyro: whether gyroscope streams are used.
        T0: base pose (4x4) of the initial condition.
        epsilon0: initial strain (6).
        varpi0: initial velocity (6).
    """

    name: str
    folder: str
    start_time: float
    end_time: float
    use_aurora: bool
    use_gyro: bool
    T0: FloatArray
    epsilon0: FloatArray
    varpi0: FloatArray


@dataclass(frozen=True)
class Trial:
    """A trial ready to estimate: its config, its robot and its streams (all, not yet windowed)."""

    config: TrialConfig
    robot: RobotConfig
    streams: dict[str, SensorStream] = field(default_factory=dict)

    def of_kind(self, kind: str) -> list[SensorStream]:
        """Streams of one kind, sorted by name."""
        return [self.streams[k] for k in sorted(self.streams) if self.streams[k].kind == kind]


def read_sensor_csv(path: str | Path) -> SensorStream:
    """Read one sensor CSV.

    Args:
        path: the CSV file.

    Rows holding a non-finite value (a sensor's dropout, written as ``nan``)
    and a truncated last line (a recording cut off) are bad frames: they are
    skipped, counted in :attr:`SensorStream.skipped` and logged. A byte-order
    mark and an empty last field on every row (a trailing comma) are accepted.

    Returns:
        The stream, sorted by time.

    Raises:
        DatasetError: missing file, bad first line, unknown kind, wrong column
            count, non-numeric value, or no valid data row.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read sensor file ({exc.strerror})") from None
    lines = text.splitlines()
    if not lines:
        raise DatasetError(f"{path}: empty file; expected 'sensor type:,<kind>' on line 1")
    first = [c.strip() for c in lines[0].split(",")]
    if len(first) < 2 or first[0].lower() != "sensor type:":
        raise DatasetError(f"{path}:1: expected 'sensor type:,<kind>', got {lines[0]!r}")
    kind = first[1].lower()
    if kind not in SENSOR_WIDTH:
        raise DatasetError(f"{path}:1: unknown sensor type {first[1]!r}; expected one of {sorted(SENSOR_WIDTH)}")
    if len(lines) < 2:
        raise DatasetError(f"{path}: missing header line 2")
    width = 2 + SENSOR_WIDTH[kind]
    rows: list[list[float]] = []
    bad_lines: list[int] = []
    parsed = [(n, r) for n, r in enumerate(csv.reader(lines[2:]), start=3) if r and any(c.strip() for c in r)]
    for i, (lineno, row) in enumerate(parsed):
        if len(row) == width + 1 and not row[-1].strip():
            row = row[:-1]  # a trailing comma
        cut = i == len(parsed) - 1 and i > 0  # the last line of a recording cut off mid-line
        if len(row) != width:
            if cut and len(row) < width:
                bad_lines.append(lineno)
                continue
            raise DatasetError(
                f"{path}:{lineno}: {len(row)} columns, expected {width} (t, s and {width - 2} {kind} values)"
            )
        try:
            vals = [float(c) for c in row]
        except ValueError:
            if cut and all(_is_float(c) for c in row[:-1]):  # cut inside its last value ('', '1e', '-')
                bad_lines.append(lineno)
                continue
            bad = next(c for c in row if not _is_float(c))
            raise DatasetError(f"{path}:{lineno}: non-numeric value {bad!r}") from None
        if not all(np.isfinite(vals)):
            bad_lines.append(lineno)
            continue
        rows.append(vals)
    if not rows:
        why = f" ({len(bad_lines)} rows with a non-finite value skipped)" if bad_lines else ""
        raise DatasetError(f"{path}: no valid data rows after the header{why}")
    if bad_lines:
        _log.warning(
            "%s: %d bad rows skipped (a non-finite value or a truncated last line), first at line %d",
            path, len(bad_lines), bad_lines[0],
        )  # fmt: skip
    arr = np.asarray(rows)
    order = np.argsort(arr[:, 0], kind="stable")
    arr = arr[order]
    return SensorStream(path.stem, kind, arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2:].copy(), len(bad_lines))


def _is_float(c: str) -> bool:
    try:
        float(c)
    except ValueError:
        return False
    return True


def _load_json(path: Path) -> dict[str, object]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read config ({exc.strerror})") from None
    # Strip // comments (outside strings; the configs hold no '//' in strings).
    text = re.sub(r"//[^\n]*", "", text)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: expected a JSON object at top level")
    return data


def _get(d: dict[str, object], key: str, path: Path, where: str) -> object:
    if key not in d:
        raise DatasetError(f"{path}: missing key {where}{key!r}")
    return d[key]


def _vector(d: dict[str, object], key: str, n: int, path: Path, where: str, positive: bool = False) -> FloatArray:
    v = _get(d, key, path, where)
    if not isinstance(v, list) or len(v) != n or not all(isinstance(x, (int, float)) for x in v):
        raise DatasetError(f"{path}: {where}{key} must be a list of {n} numbers, got {v!r}")
    arr = np.asarray(v, dtype=np.float64)
    if positive and not np.all(arr > 0):
        raise DatasetError(f"{path}: {where}{key} must hold variances > 0, got {v!r}")
    return arr


def _number(d: dict[str, object], key: str, path: Path, where: str, minimum: float | None = None) -> float:
    v = _get(d, key, path, where)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not np.isfinite(v):
        raise DatasetError(f"{path}: {where}{key} must be a number, got {v!r}")
    if minimum is not None and v <= minimum:
        raise DatasetError(f"{path}: {where}{key} must be > {minimum}, got {v!r}")
    return float(v)


def _section(d: dict[str, object], key: str, path: Path) -> dict[str, object]:
    v = _get(d, key, path, "")
    if not isinstance(v, dict):
        raise DatasetError(f"{path}: {key!r} must be an object")
    return v


def read_robot_config(path: str | Path) -> RobotConfig:
    """Read ``config/robot/<robot>.json``.

    Raises:
        DatasetError: missing section/key, wrong vector length, non-positive variance or N < 2.
    """
    path = Path(path)
    d = _load_json(path)
    w = _section(d, "weights", path)
    top = _section(d, "topology", path)
    n = _number(top, "N", path, "topology.", minimum=1)
    if n != int(n):
        raise DatasetError(f"{path}: topology.N must be an integer >= 2, got {n!r}")
    return RobotConfig(
        name=path.stem,
        P0=_vector(w, "P0", 18, path, "weights.", positive=True),
        Q1=_vector(w, "Q1", 6, path, "weights.", positive=True),
        Q2=_vector(w, "Q2", 6, path, "weights.", positive=True),
        Q3=_vector(w, "Q3", 6, path, "weights.", positive=True),
        prior_factor=_number(w, "prior_factor", path, "weights.", minimum=0.0),
        R_pose=_vector(w, "R_pose", 6, path, "weights.", positive=True),
        R_gyro=_vector(w, "R_gyro", 3, path, "weights.", positive=True),
        measurement_factor=_number(w, "measurement_factor", path, "weights.", minimum=0.0),
        N=int(n),
        K_per_second=_number(top, "K_per_second", path, "topology.", minimum=0.0),
        length=_number(top, "length", path, "topology.", minimum=0.0),
        unsupported=tuple(k for k in UNSUPPORTED_TOPOLOGY_FLAGS if top.get(k) is True),
    )


def read_trial_config(path: str | Path) -> TrialConfig:
    """Read ``config/trial/<trial>.json``.

    Raises:
        DatasetError: missing section/key, ``end_time <= start_time`` or a malformed ``T0``.
    """
    path = Path(path)
    d = _load_json(path)
    data = _section(d, "data", path)
    ic = d.get("initial_condition", {})
    if not isinstance(ic, dict):
        raise DatasetError(f"{path}: 'initial_condition' must be an object")
    start = _number(data, "start_time", path, "data.")
    end = _number(data, "end_time", path, "data.")
    if end <= start:
        raise DatasetError(f"{path}: data.end_time ({end}) must be after data.start_time ({start})")
    folder = data.get("folder_path", path.stem)
    if not isinstance(folder, str) or not folder.strip("/"):
        raise DatasetError(f"{path}: data.folder_path must be a non-empty string, got {folder!r}")
    T0 = _vector(ic, "T0", 16, path, "initial_condition.").reshape(4, 4) if "T0" in ic else np.eye(4)
    if np.abs(T0[3] - [0, 0, 0, 1]).max() > 1e-9 or np.abs(T0[:3, :3] @ T0[:3, :3].T - np.eye(3)).max() > 1e-6:
        raise DatasetError(f"{path}: initial_condition.T0 is not a rigid transform")
    eps0 = (
        _vector(ic, "epsilon0", 6, path, "initial_condition.") if "epsilon0" in ic else np.array([0, 0, 1.0, 0, 0, 0])
    )
    varpi0 = _vector(ic, "varpi0", 6, path, "initial_condition.") if "varpi0" in ic else np.zeros(6)
    return TrialConfig(
        name=path.stem,
        folder=Path(folder.rstrip("/")).name,
        start_time=start,
        end_time=end,
        use_aurora=bool(data.get("aurora", True)),
        use_gyro=bool(data.get("gyro", True)),
        T0=T0,
        epsilon0=eps0,
        varpi0=varpi0,
    )


def _warn_missing_sensors(folder: Path, streams: dict[str, SensorStream]) -> None:
    """Loud, not an error: a trial with gyroscopes lacks one that the dataset's other trials with gyroscopes have
    (a deleted ``gyro_mid.csv`` was dropped silently, the estimate then runs on fewer sensors)."""
    here = {name for name, st in streams.items() if st.kind == "gyro"}
    if not here:
        return
    others: set[str] = set()
    for sibling in folder.parent.iterdir():
        if sibling != folder and sibling.is_dir():
            names = {p.stem for p in sibling.glob("gyro*.csv")}
            if names:
                others |= names
    missing = sorted(others - here)
    if missing:
        _log.warning(
            "%s: no %s although the dataset's other trials with gyroscopes have them; estimating without",
            folder, ", ".join(f"{m}.csv" for m in missing),
        )  # fmt: skip


def load_trial(dataset_dir: str | Path, trial: str, robot: str | None = None) -> Trial:
    """Load a trial: its config, all its streams, and its robot.

    Args:
        dataset_dir: the dataset root (holds ``config/`` and ``data/``).
        trial: trial name (``config/trial/<trial>.json``).
        robot: robot config name; by default the robot whose ``length`` equals
            the largest sensor arc length of the trial's data, or else the only
            robot long enough to carry every sensor.

    Raises:
        DatasetError: unknown trial or robot, missing data folder, no robot matching the data.
    """
    root = Path(dataset_dir)
    if not (root / "config" / "trial").is_dir():
        raise DatasetError(f"{root}: not a space_time_continuum dataset (no config/trial/ folder)")
    tpath = root / "config" / "trial" / f"{trial}.json"
    if not tpath.is_file():
        known = sorted(p.stem for p in (root / "config" / "trial").glob("*.json"))
        raise DatasetError(f"{root}: unknown trial {trial!r}; known: {known}")
    cfg = read_trial_config(tpath)
    folder = root / "data" / cfg.folder
    if not folder.is_dir():
        raise DatasetError(f"{tpath}: data folder {folder} does not exist")
    streams = {p.stem: read_sensor_csv(p) for p in sorted(folder.glob("*.csv"))}
    if not streams:
        raise DatasetError(f"{folder}: no sensor CSV files")
    kinds = {st.kind for st in streams.values()}
    for kind, wanted in (("gyro", cfg.use_gyro), ("aurora", cfg.use_aurora)):
        if wanted and kind not in kinds:
            # Loud, not an error: the published extensible trial sets gyro: true and has no gyroscope.
            _log.warning(
                "%s: the trial config sets data.%s: true but there is no %s*.csv file (files: %s); estimating without",
                folder, kind, kind, sorted(p.name for p in folder.glob("*.csv")),
            )  # fmt: skip
    _warn_missing_sensors(folder, streams)
    robots = {p.stem: p for p in sorted((root / "config" / "robot").glob("*.json"))}
    if robot is not None:
        if robot not in robots:
            raise DatasetError(f"{root}: unknown robot {robot!r}; known: {sorted(robots)}")
        rcfg = read_robot_config(robots[robot])
        smax = max(float(st.s.max()) for st in streams.values())
        if smax > rcfg.length + 1e-6:
            raise DatasetError(
                f"{folder}: a sensor at s = {smax:g} m is beyond robot {robot!r} ({rcfg.length:g} m long): "
                "the trial is not of that robot; leave --robot out to match it from the data"
            )
        exact = [p.stem for p in robots.values() if abs(read_robot_config(p).length - smax) < 1e-6]
        if exact and robot not in exact and abs(rcfg.length - smax) > 1e-6:
            raise DatasetError(
                f"{folder}: the sensors reach s = {smax:g} m, the length of robot {exact[0]!r}, not of robot "
                f"{robot!r} ({rcfg.length:g} m): the trial is not of that robot; leave --robot out to match it"
            )
    else:
        smax = max(float(st.s.max()) for st in streams.values())
        configs = [read_robot_config(p) for p in robots.values()]
        matches = [r for r in configs if abs(r.length - smax) < 1e-6]
        if not matches:  # no sensor at the tip: any robot that reaches every sensor
            matches = [r for r in configs if r.length >= smax - 1e-6]
        if len(matches) != 1:
            names = sorted(r.name for r in matches) if matches else "none"
            raise DatasetError(
                f"{folder}: cannot tell the robot: largest sensor arc length {smax:g} m fits robot configs "
                f"{names} in {root / 'config' / 'robot'}; name one (eval-continuum --robot NAME)"
            )
        rcfg = matches[0]
    if rcfg.unsupported and (str(robots[rcfg.name]), rcfg.unsupported) not in _WARNED:
        _WARNED.add((str(robots[rcfg.name]), rcfg.unsupported))
        _log.warning(
            "%s: topology %s set, which this estimator does not implement; estimating without %s",
            robots[rcfg.name], ", ".join(rcfg.unsupported), "them" if len(rcfg.unsupported) > 1 else "it",
        )  # fmt: skip
    return Trial(cfg, rcfg, streams)
