"""Time-of-flight, strain and gyroscope-bias pieces of the continuum estimator (seed 001, Eq. 1-4, 7-9, 10-11).

* :func:`table_i_sigma`: the range-dependent noise of a VL53L5CX zone (Table I).
* :func:`zone_directions` / :func:`frame_points`: a frame's zones as points in the sensor's optical frame
  (``z`` the boresight; the chip reports the distance along ``z``, so a zone's point is
  ``d [tan(ax), tan(ay), 1]``), then in the ring's backbone frame through the sensor's mounting.
* :func:`ring_mounts`: three radial sensors per ring at 120 deg, successive rings offset by 60 deg, and an
  optional forward-looking sensor at the tip.
* :func:`tof_factor`: the point-to-plane error ``e = alpha n^T (p - T q)`` of every point against its nearest
  map point (matched again at every evaluation, so at every Gauss-Newton iteration), whitened by the point's
  noise, with the Cauchy loss of Eq. 3 by iteratively reweighted least squares. The pose ``T`` at the
  point's time and arc length is the estimator's Gaussian-process interpolation (cubic Hermite in time at
  the two surrounding arc-length nodes, then along s), so the factor touches four nodes. A frame's many
  scalar terms share one interpolated pose, and the frames of one time interval and ring share their four
  nodes: their ``J^T W J`` and ``J^T W r`` are summed into one information-form factor per such group (the
  robust cost carried beside it), which keeps the normal equations' size independent of the number of
  zones and frames.
  Points that the map cannot explain (an unmodelled object, a part of the map that is no longer there) are
  kept from pulling the pose: a point whose whitened point-to-plane error exceeds ``outlier_gate``, or whose
  squared Mahalanobis distance to its map point (Eq. 12 with the point's noise and the map's) exceeds
  ``anomaly_tau``, gets weight zero and a constant cost, the Cauchy cost at the gate (a truncated Cauchy loss,
  continuous in the error). Both thresholds are widened by the robust scale of the current residuals (1.4826
  times their median absolute value, when above 1), so that the first iterations from a far-off guess still
  match, and they tighten to their nominal values as the estimate converges.
* :func:`strain_factor`: measured curvatures against the strain's angular x, y entries (Eq. 9), linear
  between the four surrounding nodes.
* :func:`stationary_bias`: constant gyroscope bias of each sensor from an initial still period.
* :func:`project_points`: Eq. 10-11, points in the world with their covariance from the pose covariance.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.stats import chi2

from shape_sensing.estimators.continuum import lie
from shape_sensing.estimators.continuum.errors import ContinuumError
from shape_sensing.estimators.continuum.factors import FactorBatch, pose_st
from shape_sensing.estimators.continuum.model import DOF
from shape_sensing.geometry import FloatArray

__all__ = [
    "ANOMALY_TAU",
    "MIN_RANGE",
    "OUTLIER_GATE",
    "RANGE_CONVENTIONS",
    "VALID_STATUS",
    "VISIBLE_K",
    "FramesPoints",
    "TofAssociation",
    "TofMount",
    "frame_points",
    "frames_points",
    "group_sum",
    "info_batch",
    "mixed_zones",
    "pose_st",
    "project_points",
    "ring_mounts",
    "stationary_bias",
    "strain_factor",
    "strain_measurement",
    "table_i_sigma",
    "tof_factor",
    "valid_zones",
    "visible_nearest",
    "zone_directions",
]

IntArray = NDArray[np.int64]

#: Below this distance (m) a reading is invalid (Table I).
MIN_RANGE = 0.025
#: VL53L5CX target_status codes taken as valid (ST UM2884: 5 valid, 9 valid with a large pulse).
VALID_STATUS = (5, 9)
#: Whitened point-to-plane error beyond which a point is taken as not explained by the map: the two-sided
#: 99.9 % point of the standard normal (3.29), the same probability as :data:`ANOMALY_TAU`.
OUTLIER_GATE = float(np.sqrt(chi2.ppf(0.999, 1)))
#: Squared Mahalanobis distance to the nearest map point beyond which a point is anomalous (Eq. 12):
#: chi-square with 3 degrees of freedom at 99.9 % (16.27).
ANOMALY_TAU = float(chi2.ppf(0.999, 3))
#: Map points looked at per ToF point for a visible match (:func:`visible_nearest`).
VISIBLE_K = 4


def table_i_sigma(d: FloatArray) -> FloatArray:
    """1-sigma (m) of a zone distance ``d`` (m), Table I; NaN where invalid (below 0.025 m or not finite).

    ``sigma = c(d) d`` with ``c`` from 0.014 to 0.012 linearly over [0.025, 0.6), 0.012 to 0.006 over
    [0.6, 1.2), and 0.006 beyond.
    """
    d = np.asarray(d, dtype=np.float64)
    c = np.where(
        d < 0.6,
        0.014 + (0.012 - 0.014) * (d - 0.025) / (0.6 - 0.025),
        np.where(d < 1.2, 0.012 + (0.006 - 0.012) * (d - 0.6) / 0.6, 0.006),
    )
    out = c * d
    return np.where(np.isfinite(d) & (d >= MIN_RANGE), out, np.nan)


def zone_directions(zones_per_side: int, fov: float) -> FloatArray:
    """``(Z, 3)`` vectors ``[tan(ax), tan(ay), 1]`` of a frame's zones, row-major (row along +y, col along +x)."""
    if zones_per_side < 1:
        raise ContinuumError(f"zones per side must be >= 1, got {zones_per_side}")
    if not 0 < fov < np.pi:
        raise ContinuumError(f"field of view must be in (0, pi) rad, got {fov}")
    return _zone_directions(int(zones_per_side), float(fov)).copy()


@lru_cache(maxsize=16)
def _zone_directions(zones_per_side: int, fov: float) -> FloatArray:
    """:func:`zone_directions`, computed once per layout (every frame of a sensor uses it; read-only)."""
    from shape_sensing.drivers.vl53l5cx import zone_directions as directions  # the chip's zone geometry

    out = np.asarray(directions(zones_per_side, fov), dtype=np.float64)
    out.flags.writeable = False
    return out


#: what a zone's distance measures (see :func:`frame_points`); the ring driver's ``range_convention`` names the same
RANGE_CONVENTIONS = ("perpendicular", "radial")


@dataclass(frozen=True)
class TofMount:
    """A ToF sensor on the robot.

    Attributes:
        name: frame id of the sensor's optical frame.
        s: arc length (m) of the ring (backbone frame) carrying it.
        T_ring_sensor: ``(4, 4)`` the sensor's optical frame in the ring's backbone frame.
        zones_per_side: 4 or 8.
        fov: full field of view per axis (rad).
        max_range: m.
    """

    name: str
    s: float
    T_ring_sensor: FloatArray
    zones_per_side: int = 8
    fov: float = float(np.deg2rad(45.0))
    max_range: float = 4.0


def ring_mounts(
    ring_s: list[float] | FloatArray,
    radius: float,
    *,
    per_ring: int = 3,
    ring_offset_deg: float = 60.0,
    tip_forward: bool = False,
    zones_per_side: int = 8,
    fov_deg: float = 45.0,
    max_range: float = 4.0,
) -> list[TofMount]:
    """Radial sensors on rings: ``per_ring`` at ``360 / per_ring`` deg, ring ``i`` turned by ``i ring_offset_deg``.

    A sensor's boresight (optical z) points radially out from the backbone at ``radius``, its optical y
    along the backbone's -z (towards the base) and x completing the right-handed frame. With
    ``tip_forward`` the last ring also carries a sensor looking along the backbone's z.
    """
    out: list[TofMount] = []
    fov = float(np.deg2rad(fov_deg))
    for i, s in enumerate(np.asarray(ring_s, dtype=np.float64)):
        for j in range(per_ring):
            th = np.deg2rad(i * ring_offset_deg + j * 360.0 / per_ring)
            zc = np.array([np.cos(th), np.sin(th), 0.0])
            yc = np.array([0.0, 0.0, -1.0])
            xc = np.cross(yc, zc)
            T = np.eye(4)
            T[:3, :3] = np.column_stack([xc, yc, zc])
            T[:3, 3] = radius * zc
            out.append(TofMount(f"tof_{i}_{j}", float(s), T, zones_per_side, fov, max_range))
    if tip_forward and len(ring_s):
        out.append(TofMount("tof_tip", float(np.asarray(ring_s)[-1]), np.eye(4), zones_per_side, fov, max_range))
    return out


def valid_zones(
    mount: TofMount,
    distance: FloatArray,
    status: NDArray[np.uint8] | None = None,
    *,
    valid_status: tuple[int, ...] = VALID_STATUS,
) -> tuple[NDArray[np.bool_], FloatArray]:
    """``(Z,)`` the zones of one frame :func:`frame_points` keeps (a valid status, a finite distance between the
    minimum and the sensor's maximum range) and every zone's Table I sigma."""
    d = np.asarray(distance, dtype=np.float64).reshape(-1)
    z = mount.zones_per_side**2
    if d.size != z:
        raise ContinuumError(f"{mount.name}: frame has {d.size} distances, expected {z}")
    st = None
    if status is not None:
        st = np.asarray(status).reshape(-1)
        if st.size != z:
            raise ContinuumError(f"{mount.name}: frame has {st.size} status codes, expected {z}")
    ok, sig = _valid_zones(d[None], None if st is None else st[None], float(mount.max_range), valid_status)
    return ok[0], sig[0]


def _valid_zones(
    d: FloatArray, status: NDArray[Any] | None, max_range: float, valid_status: tuple[int, ...]
) -> tuple[NDArray[np.bool_], FloatArray]:
    """:func:`valid_zones` of ``(F, Z)`` frames of one sensor at once."""
    sig = table_i_sigma(d)
    ok = np.isfinite(sig) & (d <= max_range)
    if status is not None:
        st = np.asarray(status)
        lut = _status_table(tuple(valid_status))
        if st.dtype == np.uint8:
            ok &= lut[st]
        else:  # codes outside a byte (a recording's own type): compared one by one
            ok &= np.isin(st, valid_status)
    return ok, sig


@lru_cache(maxsize=8)
def _status_table(valid_status: tuple[int, ...]) -> NDArray[np.bool_]:
    """Which of the 256 byte values are valid status codes (a lookup instead of ``isin`` per frame)."""
    table = np.zeros(256, dtype=bool)
    table[[v for v in valid_status if 0 <= v < 256]] = True
    table.flags.writeable = False
    return table


def frame_points(
    mount: TofMount,
    distance: FloatArray,
    status: NDArray[np.uint8] | None = None,
    *,
    valid_status: tuple[int, ...] = VALID_STATUS,
    range_convention: str = "perpendicular",
) -> tuple[FloatArray, FloatArray, int]:
    """Valid zones of one frame as ``(P, 3)`` points in the ring's backbone frame, their Table I sigmas, and the
    number of zones left out (bad status, NaN, below the minimum range or beyond the maximum).

    ``range_convention`` (:data:`RANGE_CONVENTIONS`): what a distance measures. "perpendicular" (the default):
    along the boresight, to the plane through the target (ST's answers on its forum: facing a wall squarely
    every zone reports the wall's distance; the ring driver converts a chip configured "radial" to this before
    publishing, so its TofFrames are perpendicular); "radial": along the zone's ray (the seed paper's simulated
    rangefinders, and recordings of drivers that publish the ray length)."""
    d = np.asarray(distance, dtype=np.float64).reshape(-1)
    ok, sig = valid_zones(mount, d, status, valid_status=valid_status)
    u = _zone_directions(int(mount.zones_per_side), float(mount.fov))[ok]  # a copy (fancy indexing)
    if range_convention == "radial":
        u = u / np.linalg.norm(u, axis=1, keepdims=True)
    elif range_convention != "perpendicular":
        raise ContinuumError(f"range convention must be one of {RANGE_CONVENTIONS}, got {range_convention!r}")
    q = d[ok, None] * u
    qr = q @ mount.T_ring_sensor[:3, :3].T + mount.T_ring_sensor[:3, 3]
    return qr, sig[ok], int((~ok).sum())


#: target_status of a zone whose return pulse is wider than a single target's (ST UM2884: "range valid with large
#: pulse (may be due to a merged target)")
LARGE_PULSE_STATUS = 9


def mixed_zones(
    distance: FloatArray,
    zones_per_side: int,
    status: NDArray[np.uint8] | None = None,
    valid: NDArray[np.bool_] | None = None,
) -> IntArray:
    """``(Z, 2)``: for each zone of one frame that may have merged two surfaces into one return (a mixed pixel),
    the two neighbouring zones whose surfaces it may have merged; ``-1`` for the other zones.

    A zone sees a patch of the scene, and the chip merges targets closer together than its separation (600 mm
    in ST's datasheet) into one at a signal-weighted distance between them: at a depth edge the zone reports a
    point on neither surface. Such a zone is taken as mixed when, along a row, a column or a diagonal of the
    grid, its distance lies between its two neighbours' with a step of more than ``max(3 sigma, 2 cm)`` (Table
    I sigma) to each (those two are its pair; the axis with the largest steps wins); or when the chip reported
    it with status 9, "range valid with large pulse (may be due to a merged target)" (ST UM2884), its pair then
    the nearest and the farthest of its valid neighbours. A plane seen obliquely also steps evenly across the
    grid and can pass the test; the test only decides which points may be flagged as anomalies (see
    :func:`~.tof_localise.reconstruct`), it drops nothing. ``valid`` (``(Z,)``, e.g. from :func:`valid_zones`): only
    those zones count, as the zone or as a neighbour."""
    n = int(zones_per_side)
    d = np.asarray(distance, dtype=np.float64).reshape(-1)
    if d.size != n * n:
        raise ContinuumError(f"frame has {d.size} distances, expected {n * n}")
    st = None if status is None else np.asarray(status).reshape(1, -1)
    ok = None if valid is None else np.asarray(valid, dtype=bool).reshape(1, -1)
    return _mixed_zones(d[None], n, st, ok)[0]


@lru_cache(maxsize=8)
def _padded_index(n: int) -> IntArray:
    """The zones' indices on an ``n x n`` grid padded by one row and column of -1 on every side (read-only)."""
    out = np.pad(np.arange(n * n).reshape(n, n), 1, constant_values=-1)
    out.flags.writeable = False
    return out


def _mixed_zones(
    d: FloatArray, n: int, status: NDArray[Any] | None, valid: NDArray[np.bool_] | None
) -> NDArray[np.int64]:
    """:func:`mixed_zones` of ``(F, Z)`` frames at once: ``(F, Z, 2)``."""
    f = d.shape[0]
    if valid is not None:  # an invalid zone's distance (bad status, out of range) is no evidence either way
        d = np.where(valid, d, np.nan)
    idx = _padded_index(n)
    g = np.full((f, n + 2, n + 2), np.nan)
    g[:, 1:-1, 1:-1] = d.reshape(f, n, n)
    c = g[:, 1:-1, 1:-1]
    tau = np.maximum(3.0 * np.nan_to_num(table_i_sigma(c), nan=0.0), 0.02)
    best = np.zeros((f, n, n))
    grid = np.full((f, n, n, 2), -1, dtype=np.int64)
    finite_c = np.isfinite(c)
    for dy, dx in ((0, 1), (1, 0), (1, 1), (1, -1)):
        sa = (slice(1 + dy, n + 1 + dy), slice(1 + dx, n + 1 + dx))
        sb = (slice(1 - dy, n + 1 - dy), slice(1 - dx, n + 1 - dx))
        a, b = g[(slice(None), *sa)], g[(slice(None), *sb)]
        with np.errstate(invalid="ignore"):
            step = np.fmin(np.abs(c - a), np.abs(c - b))
            between = (c - np.fmin(a, b) > tau) & (np.fmax(a, b) - c > tau)
        take = np.isfinite(a) & np.isfinite(b) & finite_c & between & (step > best)
        best = np.where(take, step, best)
        frame, row, col = np.nonzero(take)
        grid[frame, row, col, 0] = idx[sa][row, col]
        grid[frame, row, col, 1] = idx[sb][row, col]
    out = grid.reshape(f, n * n, 2)
    if status is not None:
        dd = d.reshape(f, n * n)
        large = (np.asarray(status).reshape(f, -1) == LARGE_PULSE_STATUS) & (out[..., 0] < 0) & np.isfinite(dd)
        for k, z in zip(*np.nonzero(large), strict=True):
            r, q = divmod(int(z), n)
            around = [(r + i, q + j) for i in (-1, 0, 1) for j in (-1, 0, 1) if i or j]
            nb = [y * n + x for y, x in around if 0 <= y < n and 0 <= x < n and np.isfinite(dd[k, y * n + x])]
            if nb:
                dn = dd[k, nb]
                out[k, z] = (nb[int(np.argmin(dn))], nb[int(np.argmax(dn))])
    return out


@dataclass
class FramesPoints:
    """The points of many ToF frames (:func:`frames_points`), frame after frame, each frame's zones in order."""

    q: FloatArray  # (P, 3) in each frame's ring frame
    sigma: FloatArray  # (P,) Table I
    frame: NDArray[np.int64]  # (P,) which frame
    clean: NDArray[np.bool_]  # (P,) the zone may not have merged two surfaces (mixed_zones)
    mixed: NDArray[np.int64]  # (P, 2) Measurements.tof_mixed offsets (mixed_offsets)
    invalid: NDArray[np.int64]  # (F,) zones left out of each frame
    bad: NDArray[np.bool_]  # (F,) frames refused (not the sensor's number of zones)


def frames_points(
    mounts: list[TofMount],
    mount_of: NDArray[np.int64],
    distance: FloatArray,
    status: NDArray[Any] | None = None,
    *,
    valid_status: tuple[int, ...] = VALID_STATUS,
    range_convention: str = "perpendicular",
) -> FramesPoints:
    """:func:`frame_points`, :func:`valid_zones` and :func:`mixed_zones` of ``(F, Z)`` frames of the sensors
    ``mounts[mount_of[i]]`` at once, the frames of each sensor in one batch: every frame's points, sigmas,
    mixed-pixel pairs as offsets, in the order a frame-by-frame loop gives them. A frame with another number of
    zones than its sensor has is refused (``bad``), as :func:`frame_points` refuses it."""
    if range_convention not in RANGE_CONVENTIONS:
        raise ContinuumError(f"range convention must be one of {RANGE_CONVENTIONS}, got {range_convention!r}")
    dist = np.asarray(distance, dtype=np.float64)
    mount_of = np.asarray(mount_of, dtype=np.int64).reshape(-1)
    n_frames = int(mount_of.size)
    dist = dist.reshape(n_frames, -1) if n_frames else np.zeros((0, 0))
    st_all = None if status is None else np.asarray(status).reshape(n_frames, -1) if n_frames else np.zeros((0, 0))
    invalid = np.zeros(n_frames, dtype=np.int64)
    bad = np.zeros(n_frames, dtype=bool)
    parts: list[tuple[FloatArray, FloatArray, NDArray[np.int64], NDArray[np.bool_], NDArray[np.int64]]] = []
    for mi in np.unique(mount_of).tolist():
        rows = np.flatnonzero(mount_of == mi)
        m = mounts[int(mi)]
        n = int(m.zones_per_side)
        if dist.shape[1] != n * n or (st_all is not None and st_all.shape[1] != n * n):
            bad[rows] = True
            continue
        d = dist[rows]
        st = None if st_all is None else st_all[rows]
        ok, sig = _valid_zones(d, st, float(m.max_range), valid_status)
        pairs = _mixed_zones(d, n, st, ok)  # (G, Z, 2)
        invalid[rows] = (~ok).sum(axis=1)
        # the mixed pairs as offsets between points of one frame (mixed_offsets, row by row)
        point_of = np.cumsum(ok, axis=1) - 1
        pz = np.clip(pairs, 0, n * n - 1)
        g_idx = np.arange(len(rows))[:, None, None]
        has = (pairs >= 0) & ok[g_idx, pz]
        offsets = np.where(has, point_of[g_idx, pz] - point_of[..., None], 0)
        frame_of, zone = np.nonzero(ok)
        u = _zone_directions(n, float(m.fov))[zone]
        if range_convention == "radial":
            u = u / np.linalg.norm(u, axis=1, keepdims=True)
        q = d[frame_of, zone][:, None] * u
        qr = q @ m.T_ring_sensor[:3, :3].T + m.T_ring_sensor[:3, 3]
        parts.append((qr, sig[frame_of, zone], rows[frame_of], pairs[frame_of, zone, 0] < 0,
                      offsets[frame_of, zone].astype(np.int64)))  # fmt: skip
    if not parts:
        return FramesPoints(np.zeros((0, 3)), np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool),
                            np.zeros((0, 2), dtype=np.int64), invalid, bad)  # fmt: skip
    q, sig, frame, clean, mixed = (np.concatenate(x) for x in zip(*parts, strict=True))
    order = np.argsort(frame, kind="stable")  # frame after frame, as a loop over the frames gives them
    return FramesPoints(q[order], sig[order], frame[order], clean[order], mixed[order], invalid, bad)


def point_jacobian(R: FloatArray, q: FloatArray) -> FloatArray:
    """``(P, 3, 6)`` derivative of ``T q`` with respect to the right perturbation of ``T``: ``R [I, -q^]``."""
    out = np.empty((q.shape[0], 3, 6))
    out[:, :, :3] = R
    out[:, :, 3:] = -R @ lie.skew(q)
    return out


@dataclass
class TofEvaluation:
    """Per-point outcome of :func:`tof_factor` (for diagnostics and tests)."""

    world: FloatArray  # (P, 3) points in the world at the current estimate
    matched: NDArray[np.bool_]  # within the gate
    r: FloatArray  # whitened residuals of the matched points
    weight: FloatArray  # their IRLS weights
    #: matched points left out as not explained by the map (outlier gate or Eq. 12), zero weight
    rejected: NDArray[np.bool_] | None = None
    #: robust scale of the whitened residuals that widened the gates (1 at convergence)
    scale: float = 1.0
    #: ``(matched, 3)`` each matched point's map normal over its noise, ``alpha n / sigma``: ``r`` is its dot
    #: product with the map point less the world point (what a Jacobian with respect to anything else needs)
    normal: FloatArray | None = None


def tof_factor(
    T: FloatArray,
    eps: FloatArray,
    varpi: FloatArray,
    cells: tuple[tuple[IntArray, IntArray, IntArray, IntArray], FloatArray, FloatArray, FloatArray, FloatArray],
    frame: IntArray,
    q: FloatArray,
    sigma: FloatArray,
    tof_map: object,
    *,
    sigma_extra: float = 0.0,
    cauchy: float | None = 1.0,
    gate: float = 0.5,
    outlier_gate: float | None = OUTLIER_GATE,
    anomaly_tau: float | None = ANOMALY_TAU,
    visible_k: int = VISIBLE_K,
    details: list[TofEvaluation] | None = None,
    assoc: TofAssociation | None = None,
) -> FactorBatch:
    """Point-to-plane factors of ToF points, folded into one factor per group of frames on the same four nodes.

    Args:
        T, eps, varpi: flat state.
        cells: per frame, the four surrounding nodes, fraction in time, slice spacing, fraction along s, node
            spacing (as :func:`pose_st` takes them).
        frame: ``(P,)`` frame of each point.
        q: ``(P, 3)`` points in the ring's backbone frame.
        sigma: ``(P,)`` their 1-sigma noise (m).
        tof_map: a :class:`~shape_sensing.io.maps.PriorMap`.
        sigma_extra: added in quadrature to ``sigma``.
        cauchy: Cauchy scale (whitened), ``None`` for least squares.
        gate: points farther than this from the map are not matched.
        outlier_gate: whitened point-to-plane error beyond which a matched point gets zero weight and the
            constant cost of the gate (``None``: no such gate).
        anomaly_tau: squared Mahalanobis distance to the map point (point noise and ``tof_map.point_sigma``)
            beyond which a matched point is treated the same way (``None``: no such test).
        visible_k: the match is the nearest of the ``visible_k`` nearest map points that is not hidden behind
            another (see :func:`visible_nearest`); 1 takes the nearest map point as it is.
        details: if given, a :class:`TofEvaluation` is appended.
        assoc: the points' map candidates kept from an earlier evaluation of the same points (see
            :class:`TofAssociation`; a sliding window keeps one per step); ``None`` queries the map every time.

    Both thresholds are multiplied by ``max(1, s)`` (``s^2`` for ``anomaly_tau``), ``s`` the robust scale
    ``1.4826 median |r|`` of the matched points' whitened errors.
    """
    nodes, ut, dt, us, h = cells
    F = nodes[0].size
    Ts, jacs = pose_st(T, eps, varpi, nodes, ut, dt, us, h)
    Tp = Ts[frame]
    world = np.einsum("pij,pj->pi", Tp[:, :3, :3], q) + Tp[:, :3, 3]
    dist, idx = visible_nearest(tof_map, world, Tp[:, :3, 3], visible_k, assoc=assoc)
    matched = dist <= gate
    n = tof_map.normals[idx[matched]]  # type: ignore[attr-defined]
    alpha = tof_map.planarity[idx[matched]]  # type: ignore[attr-defined]
    pm = tof_map.points[idx[matched]]  # type: ignore[attr-defined]
    sig = np.sqrt(sigma[matched] ** 2 + sigma_extra**2)
    fm = frame[matched]
    e = alpha * np.einsum("pi,pi->p", n, pm - world[matched])
    r = e / sig
    # d r / d(right perturbation of the frame's pose), (P, 6)
    g = -(alpha / sig)[:, None] * np.einsum("pi,pij->pj", n, point_jacobian(Tp[matched, :3, :3], q[matched]))
    # points the map cannot explain: beyond the point-to-plane gate or anomalous by Eq. 12, both widened by
    # the residuals' robust scale while the estimate is still far off
    scale = max(1.0, 1.4826 * float(np.median(np.abs(r)))) if r.size else 1.0
    reject = np.zeros(r.size, dtype=bool)
    r_cap = np.abs(r)
    if outlier_gate is not None:
        k = outlier_gate * scale
        reject |= np.abs(r) > k
        r_cap = np.minimum(r_cap, k)
    if anomaly_tau is not None:
        s_map = float(getattr(tof_map, "point_sigma", 0.0))
        d2 = np.einsum("pi,pi->p", pm - world[matched], pm - world[matched]) / (sig**2 + s_map**2)
        reject |= d2 > anomaly_tau * scale**2
    # a rejected point costs what it would at the gate (its own error if no gate), whatever its error
    r_cost = np.where(reject, r_cap, r)
    if cauchy is None:
        wgt = np.ones_like(r)
        costs = 0.5 * r_cost**2
    else:
        wgt = 1.0 / (1.0 + r**2 / cauchy**2)
        costs = 0.5 * cauchy**2 * np.log1p(r_cost**2 / cauchy**2)
    wgt = np.where(reject, 0.0, wgt)
    if details is not None:
        details.append(TofEvaluation(world, matched, r, wgt, reject, scale, (alpha / sig)[:, None] * n))
    gw = np.sqrt(wgt)[:, None] * g
    # per frame, sum of the points' g^T w g and g^T w r (one bincount over the flattened 6 x 6 entries)
    A = np.bincount(
        (fm[:, None] * 36 + np.arange(36)).reshape(-1), (gw[:, :, None] * gw[:, None, :]).reshape(-1), minlength=F * 36
    ).reshape(F, 6, 6)
    b = np.bincount(
        (fm[:, None] * 6 + np.arange(6)).reshape(-1), ((wgt * r)[:, None] * g).reshape(-1), minlength=F * 6
    ).reshape(F, 6)
    # frames sharing their four nodes (one time interval, one ring) are summed together
    G = np.concatenate(jacs, axis=2)  # (F, 6, 72)
    groups, Ag, bg = group_sum(list(nodes), np.swapaxes(G, 1, 2) @ A @ G, np.einsum("fai,fa->fi", G, b))
    return info_batch("tof", groups, Ag, bg, float(costs.sum()))


@dataclass
class TofAssociation:
    """The map candidates of a fixed set of ToF points, kept between evaluations (association reused).

    Gauss-Newton evaluates the same points again and again (every iteration and line-search trial of a window
    step) while they move by millimetres. The ``k`` nearest map points of each point are kept with the place
    they were found at; a later evaluation queries the k-d tree again only for the points that moved by more
    than half the gap between their ``k``-th and their nearest candidate's distance (their ``slack``). Within
    that, no map point outside the candidates can be nearer than the nearest candidate (triangle inequality),
    so the nearest map point is the one a fresh query finds; the candidates are re-sorted by their distance at
    the new place. Only the visible match's choice among the ``k`` can differ from a fresh query (when the
    ``k``-th nearest changed), the nearest itself cannot.
    """

    world: FloatArray | None = None  # (P, 3) where each point's candidates were found
    cand: IntArray | None = None  # (P, k) map indices
    slack: FloatArray | None = None  # (P,) how far each point may move before it is queried again
    queried: int = 0  # points looked up in the k-d tree
    reused: int = 0  # points whose candidates were reused

    def candidates(self, tree: Any, points: FloatArray, world: FloatArray, k: int) -> tuple[FloatArray, IntArray]:
        """``(P, k)`` distances and indices of the candidates of ``world`` (in no particular order)."""
        P = world.shape[0]
        if self.cand is None or self.world is None or self.slack is None or self.cand.shape != (P, k):
            stale = np.ones(P, dtype=bool)
            self.world, self.cand, self.slack = world.copy(), np.zeros((P, k), np.int64), np.zeros(P)
        else:
            stale = np.linalg.norm(world - self.world, axis=1) > self.slack
        if stale.any():
            dq, iq = tree.query(world[stale], k=k)
            iq = np.asarray(iq, dtype=np.int64).reshape(-1, k)
            dq = np.asarray(dq, dtype=np.float64).reshape(-1, k)
            self.world[stale] = world[stale]
            self.cand[stale] = iq
            self.slack[stale] = 0.5 * (dq[:, -1] - dq[:, 0])
        n = int(stale.sum())
        self.queried += n
        self.reused += P - n
        ik = self.cand
        d = points[ik] - world[:, None, :]
        return np.sqrt(np.einsum("pki,pki->pk", d, d)), ik


def visible_nearest(
    tof_map: object, world: FloatArray, origin: FloatArray, k: int = VISIBLE_K, *, assoc: TofAssociation | None = None
) -> tuple[FloatArray, IntArray]:
    """Distance to and index of each point's map match: the nearest of its ``k`` nearest map points that the
    sensor can see.

    A sensor sees the first surface along its ray, but the nearest map point of a point on one face of a thin
    part (a blade a few millimetres thick, sampled every centimetre) is often on the far face, which the
    point-to-plane error then puts a thickness away: a bias that always pushes the part's points through it.
    Along the (sensor-facing) normal of the nearest map point, a candidate lying more than the map's point
    sigma behind the front-most candidate of the same orientation (normals within 30 deg) is on such a hidden
    face and is passed over. On one surface (flat or curved) the candidates are within the map's noise of each
    other and the nearest is kept. ``origin`` ``(P, 3)``: a point on each point's line of sight (its ring's
    backbone point), to orient the normals. ``assoc``: candidates kept from an earlier evaluation of the same
    points (:class:`TofAssociation`).
    """
    if k <= 1 or not hasattr(tof_map, "tree"):
        return tof_map.nearest(world)  # type: ignore[attr-defined]
    k = min(k, len(tof_map.points))  # type: ignore[attr-defined]
    if assoc is not None:
        dk, ik = assoc.candidates(tof_map.tree, tof_map.points, world, k)  # type: ignore[attr-defined]
    else:
        dk, ik = tof_map.tree.query(world, k=k)
        ik = np.asarray(ik, dtype=np.int64).reshape(world.shape[0], k)
        dk = np.asarray(dk, dtype=np.float64).reshape(world.shape[0], k)
    rows = np.arange(world.shape[0])
    normals = tof_map.normals[ik]  # type: ignore[attr-defined]
    n0 = normals[rows, np.argmin(dk, axis=1)]  # the nearest candidate's (first, when sorted)
    n0 = n0 * np.where(np.einsum("pi,pi->p", n0, origin - world) < 0, -1.0, 1.0)[:, None]
    same = np.abs(np.einsum("pki,pi->pk", normals, n0)) > np.cos(np.deg2rad(30.0))
    h = np.einsum("pi,pki->pk", n0, tof_map.points[ik] - world[:, None, :])  # type: ignore[attr-defined]
    front = np.where(same, h, -np.inf).max(axis=1)
    tol = float(getattr(tof_map, "point_sigma", 0.005))
    seen = ~same | (h >= front[:, None] - tol)
    # the nearest candidate not hidden (the nearest itself is always `same`); first of equals, as when sorted
    j = np.argmin(np.where(seen, dk, np.inf), axis=1)
    return dk[rows, j], ik[rows, j]


def group_sum(nodes: list[IntArray], A: FloatArray, b: FloatArray) -> tuple[list[IntArray], FloatArray, FloatArray]:
    """Sum per-item ``A`` ``(M, ...)`` and ``b`` over items on the same node tuple: the distinct tuples and sums."""
    key = np.stack(nodes, axis=1)
    top = int(key.max()) + 1 if key.size else 1
    flat = np.zeros(key.shape[0], dtype=np.int64)
    for i in range(key.shape[1]):  # one integer per tuple (nodes < 2^15 for 4-tuples)
        flat = flat * top + key[:, i]
    _, first, gi = np.unique(flat, return_index=True, return_inverse=True)
    groups = key[first]
    gi = np.asarray(gi).reshape(-1)
    order = np.argsort(gi, kind="stable")
    starts = np.searchsorted(gi[order], np.arange(groups.shape[0]))
    Ag = np.add.reduceat(A[order], starts, axis=0)
    bg = np.add.reduceat(b[order], starts, axis=0)
    return [np.ascontiguousarray(groups[:, i]).astype(np.int64) for i in range(len(nodes))], Ag, bg


def info_batch(name: str, nodes: list[IntArray], A: FloatArray, b: FloatArray, cost: float) -> FactorBatch:
    """A factor batch given by its summed ``J^T W J`` and ``J^T W r`` (see :class:`~.factors.FactorBatch`)."""
    M = A.shape[0]
    A = 0.5 * (A + np.swapaxes(A, 1, 2))
    jac = [np.zeros((M, 0, DOF)) for _ in nodes]
    return FactorBatch(name, nodes, jac, np.zeros((M, 0)), None, cost=cost, info=(A, b))


def strain_measurement(
    theta: FloatArray, kappa: FloatArray, sigma_theta: float, sigma_kappa: float
) -> tuple[FloatArray, FloatArray]:
    """Curvatures ``(S, 2)`` about x and y, and their ``(S, 2, 2)`` square-root information, from a bending angle
    ``theta`` (direction of bending in the cross-section, from x) and curvature ``kappa`` (Eq. 7-8 in the
    z-tangent convention: the angular strain is ``kappa [-sin(theta), cos(theta)]``, bending the backbone
    towards ``[cos(theta), sin(theta)]``). Along the bending direction the noise is ``sigma_kappa``; across it
    ``sqrt((kappa sigma_theta)^2 + sigma_kappa^2)``."""
    th = np.asarray(theta, dtype=np.float64).reshape(-1)
    ka = np.asarray(kappa, dtype=np.float64).reshape(-1)
    u = np.column_stack([-np.sin(th), np.cos(th)])  # the angular strain's direction
    v = np.column_stack([-np.cos(th), -np.sin(th)])  # across it
    k = ka[:, None] * u
    s_across = np.sqrt((ka * sigma_theta) ** 2 + sigma_kappa**2)
    W = np.stack([u / sigma_kappa, v / s_across[:, None]], axis=1)
    return k, W


def strain_factor(
    eps: FloatArray,
    nodes: tuple[IntArray, IntArray, IntArray, IntArray],
    ut: FloatArray,
    us: FloatArray,
    k_meas: FloatArray,
    W: FloatArray,
    cauchy: float | None = None,
    *,
    folded: bool = True,
) -> FactorBatch:
    """Measured curvatures against the strain's angular x, y entries interpolated linearly in time and s (Eq. 9);
    ``folded``: one summed (information-form) factor per group of readings on the same four nodes."""
    n00, n01, n10, n11 = nodes
    M = n00.size
    c = [(1 - ut) * (1 - us), ut * (1 - us), (1 - ut) * us, ut * us]
    k = sum(ci[:, None] * eps[n][:, 3:5] for ci, n in zip(c, nodes, strict=True))
    r = np.einsum("mij,mj->mi", W, k - k_meas)
    jacs = []
    for ci in c:
        J = np.zeros((M, 2, DOF))
        J[:, :, 9:11] = ci[:, None, None] * W
        jacs.append(J)
    if not folded or cauchy is not None:
        return FactorBatch("strain", [n00, n01, n10, n11], jacs, r, cauchy)
    # many readings share their four nodes (a time interval and a node span): sum them, as the ToF points,
    # in the 8 coordinates they touch (angular x, y strain of each node)
    G8 = np.concatenate([ci[:, None, None] * W for ci in c], axis=2)  # (M, 2, 8)
    groups, A8, b8 = group_sum(list(nodes), np.swapaxes(G8, 1, 2) @ G8, np.einsum("mai,ma->mi", G8, r))
    cols = np.concatenate([i * DOF + np.array([9, 10]) for i in range(4)])
    A = np.zeros((A8.shape[0], 4 * DOF, 4 * DOF))
    A[:, cols[:, None], cols[None, :]] = A8
    b = np.zeros((A8.shape[0], 4 * DOF))
    b[:, cols] = b8
    return info_batch("strain", groups, A, b, float(0.5 * np.sum(r * r)))


def stationary_bias(t: FloatArray, s: FloatArray, w: FloatArray, t_still: float) -> dict[float, FloatArray]:
    """Constant gyroscope bias per sensor (keyed by arc length): the mean reading over ``t < t_still``.

    Raises:
        ContinuumError: a sensor has no reading in the still period.
    """
    out: dict[float, FloatArray] = {}
    for sv in np.unique(s):
        m = (s == sv) & (t < t_still)
        if not m.any():
            raise ContinuumError(f"gyroscope at s = {sv} m has no reading before t = {t_still} s to average a bias")
        out[float(sv)] = np.nanmean(w[m], axis=0)
    return out


def project_points(
    T: FloatArray, q: FloatArray, sigma: FloatArray, cov6: FloatArray | None = None
) -> tuple[FloatArray, FloatArray]:
    """Eq. 10-11: points ``p = T q`` ``(P, 3)`` and covariances ``(P, 3, 3)``.

    Args:
        T: ``(P, 4, 4)`` poses at the points' times and arc lengths.
        q: ``(P, 3)`` points in the ring frame.
        sigma: ``(P,)`` isotropic point noise (m).
        cov6: ``(P, 6, 6)`` pose covariance (right perturbation, ``[rho; phi]``) or ``None``.
    """
    p = np.einsum("pij,pj->pi", T[:, :3, :3], q) + T[:, :3, 3]
    cov = (sigma**2)[:, None, None] * np.eye(3)[None]
    if cov6 is not None:
        G = point_jacobian(T[:, :3, :3], q)
        cov = cov + G @ cov6 @ np.swapaxes(G, 1, 2)
    return p, cov
