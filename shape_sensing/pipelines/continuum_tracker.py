"""Online continuum tracker: stamped gyro and pose samples in, fixed-lag shape estimates out.

ROS-free core of the ``continuum_estimator`` node. Samples are queued; the
sliding window advances one slice (``1 / rate`` s) whenever the newest sample
is ``latency`` seconds past the next slice time, so that a slower sensor's
sample for that interval has arrived. Every slice leaving the window becomes a
:class:`~shape_sensing.types.ShapeEstimate` (stamp = slice time, lag
``(window_size - 1) / rate``) with the tip's Laplace covariance. Bad samples
(non-finite, older than the window) are counted and skipped; gyro axes read at the
sensor's range are counted and kept (see ``measurements_from_trial``).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shape_sensing.config import ConfigError, Param, Schema
from shape_sensing.estimators.continuum import lie
from shape_sensing.estimators.continuum.model import GridState, Measurements, Weights
from shape_sensing.estimators.continuum.query import query_poses
from shape_sensing.estimators.continuum.tof import (
    TofMount,
    frames_points,
    ring_mounts,
    stationary_bias,
    strain_measurement,
)
from shape_sensing.estimators.continuum.tof_localise import Reconstruction, reconstruct
from shape_sensing.estimators.continuum.window import SlidingWindow
from shape_sensing.geometry import FloatArray
from shape_sensing.io.maps import DEFAULT_SPACING
from shape_sensing.pipelines.common import RateThrottle
from shape_sensing.types import ShapeEstimate

__all__ = [
    "CONTINUUM_TOF_TOPICS",
    "CONTINUUM_TOPICS",
    "SCHEMA",
    "ContinuumMessages",
    "ContinuumTracker",
    "TrackerStats",
]

_log = logging.getLogger(__name__)

# Defaults: the real two-segment tendon-driven robot of the space_time_continuum dataset: robot2.json's
# weights made inextensible, with bending x 0.1 along s and a Cauchy along-s prior: the noise model chosen
# on its three trials (eval_continuum.DEFAULT_TUNING["robot2"]; held-out evidence in the README).
_P0 = [8e-5] * 3 + [1e-3] * 3 + [1e-5] * 3 + [1e3, 1e3, 1e-4] + [1e2] * 6


def _check_lengths(key: str, n: int) -> Any:
    def check(v: Any) -> str | None:
        return None if len(v) == n else f"must have {n} entries ({key})"

    return check


def _positive(v: Any) -> str | None:
    return None if all(x > 0 for x in v) else "all entries must be > 0 (variances)"


SCHEMA = Schema(
    "continuum_estimator",
    (
        Param("gyro_topics", "str[]", ["gyro_mid/data", "gyro_tip/data"], "sensor_msgs/Imu topics of the gyroscopes"),
        Param("gyro_arc_lengths", "float[]", [0.233, 0.466], "arc length of each gyroscope", min=0.0, unit="m"),
        Param(
            "pose_topics", "str[]", ["tip_pose"], "geometry_msgs/PoseWithCovarianceStamped topics of the pose sensors"
        ),
        Param("pose_arc_lengths", "float[]", [0.466], "arc length of each pose sensor", min=0.0, unit="m"),
        Param("length", float, 0.466, "robot length (material)", min=1e-6, unit="m"),
        Param("nodes", int, 5, "arc-length nodes (sensors between nodes are interpolated)", min=2, max=200),
        Param("rate", float, 30.0, "time slices per second", min=1.0, max=1000.0, unit="Hz"),
        Param("window_size", int, 4, "slices in the window; lag = (window_size - 1) / rate", min=2, max=100),
        Param(
            "iterations",
            int,
            1,
            "Gauss-Newton iterations per step, at most (stops once the largest update entry is below 1e-5 or "
            "dx^T H dx below 1e-4)",
            min=1,
            max=50,
        ),
        Param(
            "marginal",
            str,
            "chain",
            "marginalisation of the oldest slice: chain (banded prior, cost linear in nodes) or exact (dense)",
            choices=("chain", "exact"),
        ),
        Param("marginal_band", int, 1, "chain prior couples nodes at most this far apart along s", min=1, max=50),
        Param("latency", float, 0.02, "wait this long past a slice time for late samples", min=0.0, unit="s"),
        Param("P0", "float[]", _P0, "base prior variances [pose | strain | velocity]", check=_positive),
        Param("Q1", "float[]", [30.0] * 3 + [8e3] * 3, "acceleration noise power in time", check=_positive),
        Param("Q2", "float[]", [8e-4] * 3 + [1e2] * 3, "strain-rate noise power along s", check=_positive),
        Param("Q3", "float[]", [0.8] * 3 + [1e4] * 3, "strain random walk in time / velocity along s", check=_positive),
        Param("prior_factor", float, 0.15, "multiplies every prior covariance", min=1e-12),
        Param("R_pose", "float[]", [2e-5] * 3 + [2.5e-3] * 3, "pose variances (m^2, rad^2)", check=_positive),
        Param("R_gyro", "float[]", [1e-6] * 3, "gyroscope variances ((rad/s)^2)", check=_positive),
        Param("measurement_factor", float, 1.0, "multiplies every measurement covariance", min=1e-12),
        Param("cauchy_pose", float, 0.0, "Cauchy scale of pose factors (whitened); 0 = least squares", min=0.0),
        Param("cauchy_gyro", float, 0.0, "Cauchy scale of gyro factors (whitened); 0 = least squares", min=0.0),
        Param(
            "cauchy_space",
            float,
            3.0,
            "Cauchy scale of the along-s strain prior (whitened; abrupt strain changes at segment ends and "
            "contacts); 0 = least squares",
            min=0.0,
        ),
        Param(
            "gyro_saturation",
            float,
            4.9,
            "gyroscope range: axis readings at or beyond it are counted as saturated and left out",
            min=0.0,
            unit="rad/s",
        ),
        Param("tof_topics", "str[]", [], "shape_sensing/TofFrame topics of ring-mounted ToF sensors (seed 001)"),
        Param("tof_arc_lengths", "float[]", [], "arc length of the ring carrying each ToF sensor", min=0.0, unit="m"),
        Param(
            "tof_azimuths",
            "float[]",
            [],
            "azimuth of each ToF sensor's boresight about its ring's z, from the ring's x (radial sensors)",
            unit="deg",
        ),
        Param(
            "tof_forward",
            "bool[]",
            [],
            "per ToF sensor: looks along the backbone (a tip sensor) instead of radially; empty = all radial",
        ),
        Param("tof_ring_radius", float, 0.03, "radius at which the radial ToF sensors sit", min=0.0, unit="m"),
        Param("map_file", str, "", "prior map (.pcd, .ply, .stl, .obj) in the base frame; empty: no ToF factors"),
        Param(
            "map_spacing",
            float,
            DEFAULT_SPACING,
            "Poisson-disk spacing when the map is a mesh (finer than its thinnest part)",
            min=1e-4,
            unit="m",
        ),
        Param(
            "tof_range_convention",
            str,
            "perpendicular",
            "what the ToF frames' distances measure: 'perpendicular' (along the boresight, as the VL53L5CX reports "
            "them by ST's forum answers and as the ring driver publishes them) or 'radial' (along each zone's ray)",
            choices=("perpendicular", "radial"),
        ),
        Param("tof_sigma_extra", float, 0.005, "added in quadrature to Table I's zone noise", min=0.0, unit="m"),
        Param("cauchy_tof", float, 1.0, "Cauchy scale of the ToF factors (whitened); 0 = least squares", min=0.0),
        Param("tof_gate", float, 0.3, "ToF points farther than this from the map are not matched", min=1e-3, unit="m"),
        Param(
            "anomaly_threshold",
            float,
            0.0,
            "ToF points whose squared Mahalanobis distance to the prior map exceeds this are anomalies (Eq. 12); "
            "0 = the 99.9 % quantile of chi-square with 3 degrees of freedom (16.27)",
            min=0.0,
        ),
        Param(
            "gyro_bias_duration",
            float,
            0.0,
            "the robot stands still for this long from the first sample: each gyroscope's mean reading over it is "
            "its constant bias, subtracted from all its readings (estimates start once it has passed); 0 = none",
            min=0.0,
            unit="s",
        ),
        Param(
            "gyro_time_offset",
            float,
            0.0,
            "the gyroscopes' clock minus the other sensors' (a gyroscope read by another board, its stamps late by "
            "bus and driver latencies): their stamps less it are used; `shape-sensing eval-tof --reestimate MAP "
            "--gyro-time-offset estimate` calibrates it from a recording",
            min=-1.0,
            max=1.0,
            unit="s",
        ),
        Param(
            "gyro_still_threshold",
            float,
            0.05,
            "during the still start, a gyroscope reading this far from that gyroscope's mean so far (any axis, after "
            "10 readings) ends it there: the robot started moving (a node that joined late); 0 = off",
            min=0.0,
            unit="rad/s",
        ),
        Param("strain_topic", str, "", "shape_sensing/StrainArray topic (bending angle and curvature); empty: none"),
        Param("strain_sigma_theta", float, 0.015, "1-sigma of a strain gauge's bending angle", min=1e-9, unit="rad"),
        Param("strain_sigma_kappa", float, 0.01, "1-sigma of a strain gauge's curvature", min=1e-9, unit="1/m"),
        Param("fixed_base", bool, True, "the base is clamped: base prior at every slice"),
        Param("base_frame", str, "continuum_base", "frame of the robot base (the shape is given in it)"),
        Param("node_frame_prefix", str, "continuum_node_", "node frames are <prefix>NN, base to tip"),
        Param("frame_prefix", str, "", "prefix of every published frame id"),
        Param("radius", float, 0.01, "body radius for markers", min=0.0, unit="m"),
        Param("marker_rate", float, 5.0, "body marker publishing rate", min=0.1, unit="Hz"),
    ),
    "Sliding-window continuous-time estimator of a continuum robot (GP priors in arc length and time).",
)


@dataclass
class TrackerStats:
    """Counters of the tracker (reported in diagnostics)."""

    gyro: int = 0
    pose: int = 0
    skipped_bad: int = 0
    saturated_axes: int = 0  # gyro axes read at the range (left out: the rate is at least the reading)
    skipped_late: int = 0
    tof_frames: int = 0
    tof_zones_invalid: int = 0
    strain: int = 0
    anomalies: int = 0
    steps: int = 0
    estimates: int = 0


class ContinuumTracker:
    """Stamp-driven sliding-window tracker.

    Args:
        params: validated :data:`SCHEMA` values.

    Raises:
        ConfigError: inconsistent parameters (list lengths, sensors off the nodes).
    """

    def __init__(self, params: dict[str, Any]) -> None:
        p = SCHEMA.validate(params)
        for key, n in (("P0", 18), ("Q1", 6), ("Q2", 6), ("Q3", 6), ("R_pose", 6), ("R_gyro", 3)):
            if len(p[key]) != n:
                raise ConfigError(f"parameter {key} must have {n} entries, got {len(p[key])}")
        for topics, arcs in (("gyro_topics", "gyro_arc_lengths"), ("pose_topics", "pose_arc_lengths")):
            if len(p[topics]) != len(p[arcs]):
                raise ConfigError(
                    f"parameter {arcs} must have one entry per {topics} ({len(p[topics])}), got {len(p[arcs])}"
                )
        self.params = p
        self.s_nodes = np.linspace(0.0, p["length"], p["nodes"])
        for key in ("gyro_arc_lengths", "pose_arc_lengths"):
            for s in p[key]:
                if s > p["length"] * (1 + 1e-9):
                    raise ConfigError(f"parameter {key}: sensor at {s} m is beyond the robot length {p['length']} m")
        self.weights = Weights(
            P0=np.asarray(p["P0"]),
            Q1=np.asarray(p["Q1"]),
            Q2=np.asarray(p["Q2"]),
            Q3=np.asarray(p["Q3"]),
            R_pose=np.asarray(p["R_pose"]),
            R_gyro=np.asarray(p["R_gyro"]),
            prior_factor=p["prior_factor"],
            measurement_factor=p["measurement_factor"],
            cauchy_pose=p["cauchy_pose"] or None,
            cauchy_gyro=p["cauchy_gyro"] or None,
            cauchy_space=p["cauchy_space"] or None,
            fixed_base=p["fixed_base"],
            tof_sigma_extra=p["tof_sigma_extra"],
            cauchy_tof=p["cauchy_tof"] or None,
            tof_gate=p["tof_gate"],
        )
        self.tof_mounts, self.tof_map = self._tof_setup(p)
        # nodes whose pose covariance each finalised slice keeps: the rings' (for the reconstruction, Eq. 10-11)
        self._ring_nodes = sorted(
            {int(np.argmin(np.abs(self.s_nodes - m.s))) for m in self.tof_mounts} if self.tof_map is not None else set()
        )
        self._tof_recent: list[Measurements] = []  # ToF points not yet reconstructed
        self._reconstructions: dict[int, Reconstruction] = {}
        #: per gyroscope, its constant bias (rad/s) once the still start has passed (``gyro_bias_duration``)
        self.gyro_bias: dict[int, FloatArray] | None = None if p["gyro_bias_duration"] > 0 else {}
        self._still: list[tuple[int, float, FloatArray]] = []  # readings of the still start: (sensor, t, omega)
        self._held: list[Measurements] = []  # everything else that arrived during it
        self.window: SlidingWindow | None = None
        self.t0_ns: int | None = None  # start of the slice grid (floor; exact value in _t0)
        self._t0 = Fraction(0)
        self.latest = -np.inf
        self.stats = TrackerStats()
        self._pending: list[Measurements] = []
        self._tof_frames: list[tuple[int, float, FloatArray, NDArray[Any] | None]] = []  # not yet turned into points
        names = [f"{p['node_frame_prefix']}{i:02d}" for i in range(p["nodes"])]
        self.frame_ids = names

    @staticmethod
    def _tof_setup(p: dict[str, Any]) -> tuple[list[TofMount], Any]:
        """ToF mountings from the parameters and the prior map they are matched against."""
        n = len(p["tof_topics"])
        for key in ("tof_arc_lengths", "tof_azimuths"):
            if len(p[key]) != n:
                raise ConfigError(f"parameter {key} must have one entry per tof_topics ({n}), got {len(p[key])}")
        fwd = list(p["tof_forward"]) or [False] * n
        if len(fwd) != n:
            raise ConfigError(f"parameter tof_forward must be empty or have {n} entries, got {len(fwd)}")
        mounts = []
        for i, (topic, s, az, f) in enumerate(
            zip(p["tof_topics"], p["tof_arc_lengths"], p["tof_azimuths"], fwd, strict=True)
        ):
            if s > p["length"] * (1 + 1e-9):
                raise ConfigError(
                    f"parameter tof_arc_lengths: sensor at {s} m is beyond the robot length {p['length']} m"
                )
            T = np.eye(4)
            if not f:
                T = ring_mounts([s], p["tof_ring_radius"], per_ring=1, ring_offset_deg=0.0)[0].T_ring_sensor
                c, sn = np.cos(np.deg2rad(az)), np.sin(np.deg2rad(az))
                Rz = np.array([[c, -sn, 0, 0], [sn, c, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])
                T = Rz @ T
            mounts.append(TofMount(f"tof_{i}:{topic}", float(s), T))
        tof_map = None
        if n and p["map_file"]:
            from shape_sensing.io.maps import load_map

            try:
                tof_map = load_map(p["map_file"], spacing=p["map_spacing"])
            except ValueError as exc:
                raise ConfigError(f"parameter map_file: {exc}") from exc
        elif n:
            raise ConfigError("parameter map_file is empty but tof_topics are given: ToF frames need a prior map")
        return mounts, tof_map

    def push_tof(
        self, index: int, stamp_ns: int, distance: FloatArray, status: NDArray[Any] | None = None
    ) -> list[ShapeEstimate]:
        """A ToF frame (distances along the boresight, per-zone status) of sensor ``index``; returns the estimates
        it completes. Invalid zones are counted and left out; a malformed frame is counted and skipped."""
        if not 0 <= index < len(self.tof_mounts) or self.tof_map is None:
            self.stats.skipped_bad += 1
            return []
        mount = self.tof_mounts[index]
        zones = int(mount.zones_per_side) ** 2
        # a copy: the frame is turned into points later, with the others of its step (a message's buffer may go)
        d = np.array(distance, dtype=np.float64).reshape(-1)
        st = None if status is None else np.array(status).reshape(-1)
        if d.size != zones or (st is not None and st.size != zones):  # frames_points would refuse it (``bad``)
            self.stats.skipped_bad += 1
            return []
        t = self._t(stamp_ns)
        if not self._accept(t):
            return []
        self.stats.tof_frames += 1
        self._tof_frames.append((index, t, d, st))
        return self._advance(t)

    def _take_tof_frames(self) -> None:
        """The ToF frames pushed since the last step turned into points, each sensor's frames in one batch
        (:func:`frames_points`: about a third of a frame's cost when they came one by one), in push order."""
        frames, self._tof_frames = self._tof_frames, []
        if not frames:
            return
        which = np.array([f[0] for f in frames], dtype=np.int64)
        ts = np.array([f[1] for f in frames])
        d = np.stack([f[2] for f in frames])
        with_status = np.array([f[3] is not None for f in frames])
        parts = []
        for has_status in (True, False):
            rows = np.flatnonzero(with_status == has_status)
            if rows.size == 0:
                continue
            statuses = [st_r for r in rows if (st_r := frames[r][3]) is not None]  # all of them or none
            st = np.stack(statuses) if statuses else None
            fp = frames_points(self.tof_mounts, which[rows], d[rows], st,
                               range_convention=self.params["tof_range_convention"])  # fmt: skip
            self.stats.tof_zones_invalid += int(fp.invalid.sum())
            parts.append((rows[fp.frame], fp.q, fp.sigma, fp.mixed))
        frame = np.concatenate([p[0] for p in parts])
        if frame.size == 0:
            return
        order = np.argsort(frame, kind="stable")  # frame after frame, in the order they were pushed
        frame = frame[order]
        s_of = np.array([m.s for m in self.tof_mounts])
        m = Measurements(
            tof_t=ts[frame],
            tof_s=s_of[which[frame]],
            tof_q=np.concatenate([p[1] for p in parts])[order],
            tof_sigma=np.concatenate([p[2] for p in parts])[order],
            tof_map=self.tof_map,
            tof_mixed=np.concatenate([p[3] for p in parts])[order],
        )
        self._pending.append(m)
        self._tof_recent.append(m)

    def push_strain(
        self,
        stamp_ns: int,
        arc_length: FloatArray,
        bending_angle: FloatArray,
        curvature: FloatArray,
        valid: NDArray[np.bool_] | None = None,
    ) -> list[ShapeEstimate]:
        """Strain gauges read at one time: bending angle (rad) and curvature (1/m) at arc lengths (m), Eq. 7-9.

        Gauges marked invalid, with a non-finite value or off the robot are left out (counted in
        ``skipped_bad`` when none is left); returns the estimates the reading completes.
        """
        s = np.asarray(arc_length, dtype=np.float64).reshape(-1)
        th = np.asarray(bending_angle, dtype=np.float64).reshape(-1)
        ka = np.asarray(curvature, dtype=np.float64).reshape(-1)
        # a copy: a message's array may be read-only (a bag reader's view of its buffer), and it is narrowed below
        ok = np.ones(s.size, dtype=bool) if valid is None or len(valid) == 0 else np.array(valid, dtype=bool)
        if not (th.size == ka.size == s.size == ok.size):
            self.stats.skipped_bad += 1
            return []
        ok &= np.isfinite(s) & np.isfinite(th) & np.isfinite(ka) & (s >= 0.0) & (s <= self.params["length"])
        if not ok.any():
            self.stats.skipped_bad += 1
            return []
        t = self._t(stamp_ns)
        if not self._accept(t):
            return []
        self.stats.strain += 1
        k, W = strain_measurement(th[ok], ka[ok], self.params["strain_sigma_theta"], self.params["strain_sigma_kappa"])
        n = int(ok.sum())
        self._pending.append(Measurements(strain_t=np.full(n, t), strain_s=s[ok], strain_k=k, strain_w=W))
        return self._advance(t)

    def _t(self, stamp_ns: int) -> float:
        if self.t0_ns is None:
            # The slice grid sits on whole multiples of the slice period in the stamps' clock (exact rational
            # arithmetic: stamps are ~1e18 ns), not on whichever sample came first: a live node that missed the
            # first samples of a `ros2 bag play` (or started mid-stream) slices at the same stamps as
            # `shape-sensing replay` of the whole bag.
            rate = Fraction(self.params["rate"]).limit_denominator(10**6)
            self._t0 = Fraction((stamp_ns * rate) // 10**9 * 10**9) / rate
            self.t0_ns = math.floor(self._t0)
        # (stamp - t0) / 1e9 in integers: Python's int division rounds exactly as float(Fraction) does, without
        # building a Fraction per message
        num, den = self._t0.numerator, self._t0.denominator
        return (stamp_ns * den - num) / (den * 10**9)

    def _accept(self, t: float) -> bool:
        if self.window is not None and t < float(self.window.state.t[0]):
            self.stats.skipped_late += 1
            return False
        return True

    def push_gyro(self, index: int, stamp_ns: int, omega: FloatArray) -> list[ShapeEstimate]:
        """A gyroscope reading (rad/s, body frame) of sensor ``index``; returns the estimates it completes."""
        w = np.asarray(omega, dtype=np.float64).reshape(-1)
        if w.shape != (3,) or not np.all(np.isfinite(w)) or not 0 <= index < len(self.params["gyro_topics"]):
            self.stats.skipped_bad += 1
            return []
        t = self._t(stamp_ns) - self.params["gyro_time_offset"]  # on the other sensors' clock
        if not self._accept(t):
            return []
        self.stats.gyro += 1
        sat = np.abs(w) >= self.params["gyro_saturation"]
        self.stats.saturated_axes += int(sat.sum())
        w = np.where(sat, np.nan, w)  # a saturated axis only bounds the rate: left out, as in the evaluation
        if self.gyro_bias is None and t < self.params["gyro_bias_duration"] and not self._moving(index, w):
            self._still.append((index, t, w))  # the still start: averaged into the bias, used once it is known
            self.latest = max(self.latest, t)
            return []
        self._settle_bias(t, force=True)
        self._pending.append(self._gyro_measurement(index, t, w))
        return self._advance(t)

    def _gyro_measurement(self, index: int, t: float, w: FloatArray) -> Measurements:
        s = self.params["gyro_arc_lengths"][index]
        assert self.gyro_bias is not None
        w = w - self.gyro_bias.get(index, np.zeros(3))
        return Measurements(gyro_t=np.array([t]), gyro_s=np.array([s]), gyro_w=w[None, :])

    def _moving(self, index: int, w: FloatArray) -> bool:
        """Whether a reading during the still start shows the robot moving (``gyro_still_threshold``)."""
        thr = self.params["gyro_still_threshold"]
        if thr <= 0:
            return False
        mine = [x for i, _, x in self._still if i == index]
        if len(mine) < 10:
            return False
        moving = bool(np.nanmax(np.abs(w - np.nanmean(np.stack(mine), axis=0)), initial=0.0) > thr)
        if moving:
            _log.warning(
                "gyroscope %s turned at %s rad/s during the still start: bias from the %d readings before",
                self.params["gyro_topics"][index], np.round(w, 3).tolist(), len(mine),
            )  # fmt: skip
        return moving

    def _settle_bias(self, t: float, force: bool = False) -> None:
        """Once past the still start (``t >= gyro_bias_duration``, or ``force``: a gyroscope saw motion or a reading
        came after it): each gyroscope's bias from its still readings (the seed's constant bias from a stationary
        start), and those readings released, corrected."""
        if self.gyro_bias is not None or (t < self.params["gyro_bias_duration"] and not force):
            return
        bias: dict[int, FloatArray] = {}
        if self._still:
            idx = np.array([i for i, _, _ in self._still], dtype=np.float64)
            ts = np.array([x for _, x, _ in self._still])
            ws = np.stack([w for _, _, w in self._still])
            bias = {int(k): v for k, v in stationary_bias(ts, idx, ws, np.inf).items()}
        missing = [i for i in range(len(self.params["gyro_topics"])) if i not in bias]
        if missing:
            _log.warning(
                "gyroscopes %s gave no reading in the first %g s (the still start): no bias removed from them",
                [self.params["gyro_topics"][i] for i in missing], self.params["gyro_bias_duration"],
            )  # fmt: skip
        self.gyro_bias = {i: np.nan_to_num(b) for i, b in bias.items()}
        self._pending.extend(self._gyro_measurement(i, ti, w) for i, ti, w in self._still)
        self._still = []

    def push_pose(self, index: int, stamp_ns: int, T: FloatArray) -> list[ShapeEstimate]:
        """A pose (4x4, base frame) of pose sensor ``index``; returns the estimates it completes."""
        T = np.asarray(T, dtype=np.float64)
        ok = T.shape == (4, 4) and np.all(np.isfinite(T)) and 0 <= index < len(self.params["pose_topics"])
        if ok:
            R = T[:3, :3]
            ok = bool(np.abs(R @ R.T - np.eye(3)).max() < 1e-3 and np.linalg.det(R) > 0)
        if not ok:
            self.stats.skipped_bad += 1
            return []
        t = self._t(stamp_ns)
        if not self._accept(t):
            return []
        self.stats.pose += 1
        s = self.params["pose_arc_lengths"][index]
        self._pending.append(Measurements(pose_t=np.array([t]), pose_s=np.array([s]), pose_mat=T[None].copy()))
        return self._advance(t)

    def _advance(self, t: float) -> list[ShapeEstimate]:
        p = self.params
        self.latest = max(self.latest, t)
        self._settle_bias(t)
        if self.gyro_bias is None:  # still start: the window waits for the gyroscopes' bias
            return []
        if self.window is None:
            self.window = SlidingWindow(
                self.weights,
                self.s_nodes,
                p["rate"],
                0.0,
                size=p["window_size"],
                iterations=p["iterations"],
                covariance=True,
                marginal=p["marginal"],
                band=p["marginal_band"],
                covariance_nodes=self._ring_nodes,
            )
        win = self.window
        out: list[ShapeEstimate] = []
        dt = 1.0 / p["rate"]
        while self.latest >= win.t_newest + dt + p["latency"]:
            self._take_tof_frames()
            if self._pending:
                win.add_measurements(Measurements.concat(self._pending))
                self._pending = []
            info = win.step()
            self.stats.steps += 1
            for _ in info.finalized:
                i = len(win.final_t) - 1
                out.append(self._estimate(i))
                self._reconstruct(i)
        return out

    def _reconstruct(self, i: int) -> None:
        """Eq. 10-12 for the ToF points between finalised slice ``i`` and the next (kept for
        :meth:`pop_reconstruction`): each point projected from the fixed-lag pose at its time with its ring
        node's Laplace covariance, flagged where its squared Mahalanobis distance to the map exceeds the threshold."""
        if self.tof_map is None or self.window is None:
            return
        win = self.window
        t0, t1 = float(win.final_t[i]), float(win.state.t[0])
        recent = Measurements.concat(self._tof_recent)
        meas = recent.between(t0, t1)
        self._tof_recent = [recent.between(t1, np.inf, include_end=True)]
        if meas.tof_t.size == 0:
            return
        two = GridState(
            np.array([t0, t1]),
            self.s_nodes,
            np.stack([win.final_T[i], win.state.T[0]]),
            np.stack([win.final_eps[i], win.state.eps[0]]),
            np.stack([win.final_varpi[i], win.state.varpi[0]]),
        )
        cov6 = None
        if i < len(win.final_node_cov):
            ring = np.argmin(np.abs(meas.tof_s[:, None] - self.s_nodes[None, :]), axis=1)
            cov6 = win.final_node_cov[i][np.searchsorted(self._ring_nodes, ring)]
        tau = self.params["anomaly_threshold"] or None
        rec = reconstruct(two, meas, self.tof_map, tau=tau, sigma_extra=self.params["tof_sigma_extra"],
                          gate=self.params["tof_gate"], pose_cov=cov6)  # fmt: skip
        self.stats.anomalies += int(rec.anomaly.sum())
        self._reconstructions[i] = rec
        for old in [k for k in self._reconstructions if k < i - 100]:  # nobody collected them
            del self._reconstructions[old]

    def pop_reconstruction(self, i: int) -> Reconstruction | None:
        """The scene reconstruction of the ToF points between finalised slice ``i`` and the next (once)."""
        return self._reconstructions.pop(i, None)

    def _estimate(self, i: int) -> ShapeEstimate:
        assert self.window is not None and self.t0_ns is not None
        win = self.window
        T = win.final_T[i]
        eps = win.final_eps[i]
        s_fine = np.linspace(0.0, self.params["length"], 30)
        # backbone: the GP mean along s at this slice
        one = GridState(np.array([0.0]), self.s_nodes, T[None], eps[None], win.final_varpi[i][None])
        backbone = query_poses(one, np.zeros(s_fine.size), s_fine)[:, :3, 3]
        cov = win.final_cov[i] if i < len(win.final_cov) else None
        pos_cov = None
        if cov is not None:
            pos_cov = np.zeros((T.shape[0], 3, 3))
            R = T[-1, :3, :3]
            pos_cov[-1] = R @ cov[:3, :3] @ R.T
        self.stats.estimates += 1
        stamp = round(self._t0 + Fraction(float(win.final_t[i])) * 10**9)
        return ShapeEstimate(
            stamp,
            self.params["base_frame"],
            list(self.frame_ids),
            T.copy(),
            pos_cov,
            backbone,
            self.params["radius"],
            float(self.params["length"] * eps[:, 2].mean()),
        )

    def tip_covariance(self, i: int) -> FloatArray | None:
        """6x6 covariance of the tip pose of finalised slice ``i`` in the base frame (``[x y z rx ry rz]``)."""
        if self.window is None or i >= len(self.window.final_cov):
            return None
        # scaled where the measurements disagree with the model more than usual (an unmodelled contact)
        cov = self.window.final_cov[i] * self.window.final_inflation[i]
        R = self.window.final_T[i][-1, :3, :3]
        A = np.zeros((6, 6))
        A[:3, :3] = A[3:, 3:] = R
        return np.asarray(A @ cov @ A.T)

    @staticmethod
    def pose_from_xyzquat(xyz: FloatArray, quat_xyzw: FloatArray) -> FloatArray:
        """4x4 transform from a position and an ``[x, y, z, w]`` quaternion."""
        from shape_sensing.geometry import make_transform, quat_to_matrix

        return make_transform(quat_to_matrix(quat_xyzw), xyz)

    @staticmethod
    def twist_to_pose(xi: FloatArray) -> FloatArray:
        """4x4 transform ``exp(xi^)`` of a dataset twist ``[rho; phi]``."""
        return np.asarray(lie.exp(np.asarray(xi, dtype=np.float64)[None])[0])


#: Topics the node publishes (relative to its namespace, except TF and diagnostics) -> message type.
CONTINUUM_TOPICS: dict[str, str] = {
    "/tf": "tf2_msgs/msg/TFMessage",
    "shape/path": "nav_msgs/msg/Path",
    "shape/tip": "geometry_msgs/msg/PoseWithCovarianceStamped",
    "shape/markers": "visualization_msgs/msg/MarkerArray",
    "/diagnostics": "diagnostic_msgs/msg/DiagnosticArray",
}

#: Topics the node publishes when it has ToF sensors and a prior map (relative to its namespace). The map is
#: published once at start-up on a latched (transient-local) topic.
CONTINUUM_TOF_TOPICS: dict[str, str] = {
    "tof/reconstruction": "sensor_msgs/msg/PointCloud2",
    "tof/anomalies": "sensor_msgs/msg/PointCloud2",
    "tof/prior_map": "sensor_msgs/msg/PointCloud2",
}


class ContinuumMessages:
    """The messages of one estimate (publisher-agnostic: the node publishes them, bags store them).

    Args:
        factory: message factory (rosbags or rclpy backend).
        frame_prefix: prefix of every frame id.
        marker_rate: body-marker rate (Hz), by estimate stamps.
    """

    def __init__(self, factory: Any, frame_prefix: str = "", marker_rate: float = 5.0) -> None:
        self.factory = factory
        self.prefix = frame_prefix
        self.markers = RateThrottle(marker_rate)

    def build(
        self, shape: ShapeEstimate, tip_cov6: FloatArray | None = None, reconstruction: Reconstruction | None = None
    ) -> list[tuple[str, Any]]:
        """``(topic, message)`` pairs: TF per node, path, tip pose with covariance, markers when due, and the
        scene reconstruction and its anomalies of the ToF points up to the next slice when given."""
        from shape_sensing.messages import common as msgs
        from shape_sensing.messages.tof import reconstruction_cloud_msg

        f, stamp = self.factory, shape.stamp_ns
        parent = self.prefix + shape.parent_frame
        out = [
            ("/tf", msgs.tf_message(msgs.shape_transforms(shape, self.prefix), f)),
            ("shape/path", msgs.path_msg(stamp, parent, shape.backbone, f)),
            ("shape/tip", msgs.pose_with_covariance_stamped(stamp, parent, shape.tip_pose, tip_cov6, f)),
        ]
        if self.markers.ready(stamp):
            out.append(("shape/markers", msgs.shape_markers(shape, frame_prefix=self.prefix, factory=f)))
        if reconstruction is not None:
            rec, flag = reconstruction, reconstruction.anomaly
            out.append(("tof/reconstruction", reconstruction_cloud_msg(stamp, parent, rec.points, rec.mahalanobis2,
                                                                       flag, f)))  # fmt: skip
            out.append(("tof/anomalies", reconstruction_cloud_msg(stamp, parent, rec.points[flag],
                                                                  rec.mahalanobis2[flag], flag[flag], f)))  # fmt: skip
        return out

    def prior_map(self, stamp_ns: int, parent_frame: str, tof_map: Any) -> tuple[str, Any]:
        """The prior map's ``(topic, message)`` (in the base frame, with ``frame_prefix``)."""
        from shape_sensing.messages.tof import prior_map_cloud_msg

        msg = prior_map_cloud_msg(
            stamp_ns, self.prefix + parent_frame, tof_map.points, tof_map.normals, tof_map.planarity, self.factory
        )
        return "tof/prior_map", msg
