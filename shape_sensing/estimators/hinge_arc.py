"""Hinge-arc shape estimator for vine robots with distributed IMUs (seed 000).

Model. IMUs sit on the outer wall, ``D/2`` from the centreline, at material
coordinates ``sigma_i`` (outer-wall arc length from the base; spacing ``L``).
After *offsetting* (below) each IMU gives the orientation ``B_i`` of the
backbone frame at its place (z along the centreline tangent, x towards the
sensor's wall). Between two used nodes ``k`` and ``k+1`` (the base is node 0)
the relative rotation ``B_k^T B_{k+1}`` is split into a *swing* (the bend:
angle ``theta`` about an axis normal to the tangent) and a *twist* about the
tangent. The twist does not move the centreline and is reported as a residual.
The bend is a hinge halfway between the sensors; the outer edge is
inextensible and the inner edge buckles, so the centreline pivots about the
inner edge:

* straight run on each side ``l = (L - D*theta) / 2``
* an arc of centreline radius ``D/2`` through ``theta``
* centreline length between the nodes ``L - D*theta/2``

Past ``theta = L/D`` the straight runs would be negative: the whole segment
is then one arc whose *outer edge* still has length ``L`` (centreline radius
``L/theta - D/2``, shrinking from ``D/2``), which keeps the centreline length
``L - D*theta/2``, is continuous at ``L/D``, and keeps the measured rotation.
At ``theta >= 2L/D`` the radius reaches 0 and the segment is a pure pivot.
Segments past ``L/D`` are reported (WARN): the inner wall is fully buckled
and the measured bend exceeds what the model's geometry can hold.

Offsetting. With the robot straight, every backbone frame equals the base
frame. ``capture_offset`` stores the base frame's orientation in the IMUs'
world frame (from the first sensor and its nominal mounting) and every
sensor's mounting rotation ``M_i``; later ``B_i = W^T R_i M_i^T``. This
removes arbitrary mounting rotations; it cannot separate a per-sensor world
heading error from mounting (one straight pose does not observe it). The
capture, its YAML file and when it may be taken automatically are in
:mod:`shape_sensing.estimators.straight_reference` (:meth:`apply_reference`).

Sensor subsets, growth, missing sensors. Only selected sensors count (every
k-th, or an explicit list). With a robot length (base encoder), sensors not
yet everted (``sigma_i > length``) are ignored and the tip lies
``length - sigma_last`` beyond the last everted sensor, straight along its
tangent (a partial last segment). A missing or stale sensor is bridged: its
two segments merge into one of their summed material length.

Uncertainty. Each used node's orientation error is a small rotation with
isotropic variance ``s_i^2 = 2 s_meas^2 + (drift_rate * (t - t_offset))^2 / 3``
(the reading and its offset capture, plus the drift since offsetting: its
rotation's size grows at ``drift_rate``, about an axis nobody knows),
independent between sensors; the base frame is exact. To first order,
perturbing ``B_k`` by ``dphi_k`` (base frame) changes segment ``k``'s chord
``Delta_k = B_k d(B_k^T B_{k+1})`` by ``-[Delta_k]x dphi_k + G_k (dphi_{k+1} -
dphi_k)``, with ``G_k`` the derivative of the hinge-arc displacement with
respect to a turn of the relative rotation (central differences, all
segments at once), rotated into the base frame. This includes how the
centreline length changes with the bend. A sensor's wall offset and the tip's
straight extension add their own rotation terms. The covariance of every
frame is the sum over nodes of ``s_j^2 M_j M_j^T``; a Monte Carlo test holds it
within 15 %.

What the readings' errors leave out is added as more terms (each a
parameter, 0 to leave it out): the hinge model's own error against a continuous
body (``curvature_variation_factor``: where the curvature changes within a
segment, as its neighbours' bends show, its bend does not sit halfway; a
bridged, longer segment carries more of it, along its middle tangent too in
proportion to its turn, and, on a robot that has shown it can coil, may hide a
coil; the tip's straight extension
its own; ``bend_location_stddev`` adds a bend anywhere along each segment, for a
body that kinks unseen); what the shortening keeps of the readings' noise bias;
each IMU's own heading reference against the world's
(``heading_reference_stddev_deg``: the straight reference captures every
mounting against its IMU's world, so a heading offset conjugates that sensor's
backbone frame); and, without the base's placement, the first IMU's assumed
mounting (``first_mount_stddev_deg``), which conjugates every frame alike (by
the unscented transform: a coiled robot is far from linear in it). The
tip NEES over the simulator's experiments is in ``benchmarks/bench_consistency.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from scipy.spatial.transform import Rotation

from shape_sensing.config import LIVE_PARAMS, Param, Schema
from shape_sensing.estimators.straight_reference import StraightReference, capture_reference
from shape_sensing.geometry import FloatArray
from shape_sensing.types import DeferredValues, DiagnosticLevel, DiagnosticStatus, ShapeEstimate

__all__ = [
    "SCHEMA",
    "HingeArcConfig",
    "HingeArcEstimator",
    "NotOffsetError",
    "quats_to_matrices",
    "segment_displacements",
]

_DEFAULT_TOPICS = [f"imu_{i:02d}/data" for i in range(18)]


def _check_unique(values: list[object]) -> str | None:
    return "values must be unique" if len(set(values)) != len(values) else None


SCHEMA = Schema(
    "hinge_arc_estimator",
    (
        Param("imu_topics", "str[]", _DEFAULT_TOPICS, "sensor_msgs/Imu topics, base to tip", check=_check_unique),
        Param("spacing", float, 0.102, "IMU spacing L along the outer wall", min=1e-3, max=10.0, unit="m"),
        Param("diameter", float, 0.129, "inflated body diameter D", min=1e-3, max=10.0, unit="m"),
        Param("first_sensor", float, 0.0, "material coordinate of the first IMU from the base", min=0.0, unit="m"),
        Param(
            "sensor_positions",
            "float[]",
            [],
            "material coordinates of the IMUs (overrides spacing/first_sensor when given)",
            min=0.0,
            unit="m",
        ),
        Param("use_sensors", "int[]", [], "explicit subset of sensor indices to use (empty: all)", min=0),
        Param("every_k", int, 1, "use every k-th sensor (1: all), the spacing re-analysis of seed 000", min=1),
        Param("tip_offset", float, 0.0, "material beyond the last IMU to the tip, when no length topic", min=0.0),
        Param(
            "imu_array_topic",
            str,
            "",
            "shape_sensing/ImuArray topic carrying a sweep of all IMUs (sensor i = imu_topics[i]), read instead of "
            "the per-IMU topics; '' for the per-IMU topics",
        ),
        Param("length_topic", str, "base/length", "robot length (sensor_msgs/JointState position[0]); '' for none"),
        Param("stale_timeout", float, 0.25, "a sensor silent this long is bridged", min=0.0, unit="s"),
        Param("orientation_noise_deg", float, 0.5, "IMU orientation std when messages carry none", min=0.0),
        Param(
            "drift_deg_per_min",
            float,
            1.33,
            "assumed drift rate for the uncertainty: how fast the drift's rotation grows in size (the slope "
            "`shape-sensing reanalyse` measures), about an axis taken as unknown",
            min=0.0,
        ),
        Param(
            "curvature_variation_factor",
            float,
            0.12,
            "uncertainty: the hinge model's own error against a continuous body, from how the curvature changes "
            "around a segment as its neighbours' bends show it (0.079 matches a step in curvature anywhere along "
            "a segment, 0.059 a steady gradient, 0.144 a kink anywhere between straight neighbours; 0.12 leans "
            "to kinks)",
            min=0.0,
            max=1.0,
        ),
        Param(
            "bend_location_stddev",
            float,
            0.0,
            "uncertainty: std of where along a segment its bend lies, as a fraction of the segment, on top of "
            "curvature_variation_factor (0.29 = anywhere along it, uniformly: for a body that kinks where its "
            "neighbours do not show it)",
            min=0.0,
            max=1.0,
        ),
        Param(
            "first_mount_stddev_deg",
            float,
            5.0,
            "uncertainty: std of the first IMU's mounting about each axis when base_orientation_world is not "
            "given (first_mount_rpy is then assumed; its error turns the whole shape about the base)",
            min=0.0,
            unit="deg",
        ),
        Param(
            "heading_reference_stddev_deg",
            float,
            2.0,
            "uncertainty: std of an IMU's own heading reference against the world's (a BNO055 fuses its yaw "
            "from its gyro or magnetometer); with base_orientation_world given it turns the whole shape about "
            "the world's vertical",
            min=0.0,
            unit="deg",
        ),
        Param(
            "first_mount_rpy",
            "float[]",
            [0.0, 0.0, 0.0],
            "nominal roll, pitch, yaw of the first IMU on its backbone frame (rad)",
            check=lambda v: None if len(v) == 3 else "needs 3 values",
        ),
        Param(
            "auto_offset",
            bool,
            True,
            "capture the straight reference from the first complete set of readings when safe (with a length "
            "topic: once every used IMU is everted)",
        ),
        Param(
            "offset_still_s", float, 0.5,
            "~/offset waits until every IMU to capture has been still this long (0: no stillness check)",
            min=0.0, max=30.0, unit="s",
        ),
        Param(
            "offset_max_motion_deg", float, 2.0,
            "an IMU turning more than this counts as moving for ~/offset's stillness check", min=0.0, unit="deg",
        ),
        Param(
            "offset_timeout", float, 5.0,
            "~/offset is refused when the robot has not been still within this long after the request",
            min=0.0, unit="s",
        ),
        Param(
            "offset_max_bend_deg", float, 45.0,
            "a capture is refused when an IMU's orientation is this far from the first captured one (a bent robot; "
            "mounting and heading errors between two IMUs are ~10 deg)",
            min=0.0, max=180.0, unit="deg",
        ),
        Param(
            "straight_reference_file",
            str,
            "",
            "straight reference YAML loaded at start (and written by ~/save_reference); '' for none",
        ),
        Param(
            "base_orientation_world",
            "float[]",
            [],
            "roll, pitch, yaw (rad) of the base frame in the world (the world -> base placement) when known: "
            "sensor 0's mounting is then solved at capture; [] for unknown (first_mount_rpy is assumed)",
            check=lambda v: None if len(v) in (0, 3) else "needs 3 values or none",
        ),
        Param("base_frame", str, "vine_imu_base", "frame of the chain's base (the shape is given in it): z along "
              "the initial growth, x towards the IMUs; a child of vine_base (REP-103)"),
        Param("tip_frame", str, "vine_imu_tip", "frame published at the tip"),
        Param("frame_prefix", str, "", "prefix of every published frame id"),
        Param("publish_rate", float, 30.0, "shape publishing rate", min=0.1, max=1000.0, unit="Hz"),
        Param("marker_rate", float, 5.0, "body marker publishing rate (at most the shape rate)", min=0.1, unit="Hz"),
        Param("arc_samples", int, 4, "backbone points per bend arc for Path and markers", min=1, max=64),
        *LIVE_PARAMS,
    ),
    description="Hinge-arc shape of a vine robot from distributed IMUs.",
)


class NotOffsetError(RuntimeError):
    """The straight reference (offsetting) has not been captured yet."""


@dataclass(frozen=True)
class HingeArcConfig:
    """Validated estimator settings (see :data:`SCHEMA`)."""

    sensor_positions: FloatArray
    diameter: float = 0.129
    used: np.ndarray = field(default_factory=lambda: np.ones(0, dtype=bool))
    tip_offset: float = 0.0
    stale_timeout: float = 0.25
    orientation_noise: float = np.deg2rad(0.5)
    drift_rate: float = np.deg2rad(1.33) / 60.0
    first_mount: FloatArray = field(default_factory=lambda: np.eye(3))
    base_placement: FloatArray | None = None  # base frame in the world, when known
    curvature_variation: float = 0.12
    bend_location_stddev: float = 0.0
    first_mount_stddev: float = np.deg2rad(5.0)
    heading_reference_stddev: float = np.deg2rad(2.0)
    arc_samples: int = 4
    base_frame: str = "vine_imu_base"
    tip_frame: str = "vine_imu_tip"

    @classmethod
    def from_params(cls, params: dict[str, object], n_sensors: int | None = None) -> HingeArcConfig:
        """Build from a parameter mapping (validated by :data:`SCHEMA`)."""
        p = SCHEMA.validate(params)
        n = len(p["imu_topics"]) if n_sensors is None else n_sensors
        if n == 0:
            raise ValueError("no IMU to estimate from: parameter 'imu_topics' is empty (list the robot's IMU topics)")
        if p["sensor_positions"]:
            pos = np.asarray(p["sensor_positions"], dtype=float)
            if len(pos) != n:
                raise ValueError(
                    f"parameter 'sensor_positions' has {len(pos)} values: expected one per IMU topic ({n})"
                )
            if np.any(np.diff(pos) <= 0):
                raise ValueError(f"parameter 'sensor_positions' = {pos.tolist()}: expected strictly increasing")
        else:
            pos = p["first_sensor"] + p["spacing"] * np.arange(n)
        used = np.zeros(n, dtype=bool)
        if p["use_sensors"]:
            bad = [i for i in p["use_sensors"] if i >= n]
            if bad:
                raise ValueError(f"parameter 'use_sensors' = {p['use_sensors']}: indices {bad} >= {n} sensors")
            used[p["use_sensors"]] = True
        else:
            used[:] = True
        keep = np.zeros(n, dtype=bool)
        keep[:: p["every_k"]] = True
        used &= keep
        if not np.any(used & (pos > 1e-9)):
            # Only a sensor at the base (or none): the base frame is all it gives, so no bend can be seen and the
            # "shape" is a straight line whatever the robot does.
            raise ValueError(
                f"parameters 'every_k' = {p['every_k']}, 'use_sensors' = {p['use_sensors']} select IMU(s) "
                f"{np.flatnonzero(used).tolist()} of {n}: expected at least one used IMU beyond the base "
                f"(every_k <= {n - 1} with all {n} IMUs), or no bend can be estimated"
            )
        prefix = p["frame_prefix"]
        return cls(
            sensor_positions=pos,
            diameter=p["diameter"],
            used=used,
            tip_offset=p["tip_offset"],
            stale_timeout=p["stale_timeout"],
            orientation_noise=float(np.deg2rad(p["orientation_noise_deg"])),
            drift_rate=float(np.deg2rad(p["drift_deg_per_min"]) / 60.0),
            first_mount=Rotation.from_euler("xyz", p["first_mount_rpy"]).as_matrix(),
            base_placement=(
                Rotation.from_euler("xyz", p["base_orientation_world"]).as_matrix()
                if p["base_orientation_world"]
                else None
            ),
            curvature_variation=p["curvature_variation_factor"],
            bend_location_stddev=p["bend_location_stddev"],
            first_mount_stddev=float(np.deg2rad(p["first_mount_stddev_deg"])),
            heading_reference_stddev=float(np.deg2rad(p["heading_reference_stddev_deg"])),
            arc_samples=p["arc_samples"],
            base_frame=prefix + p["base_frame"],
            tip_frame=prefix + p["tip_frame"],
        )


def quats_to_matrices(q: FloatArray) -> FloatArray:
    """``(..., 4)`` ``[x, y, z, w]`` quaternions (normalised here) to ``(..., 3, 3)`` matrices.

    The nine entries and ``|q|^2`` are sums of the products ``q_i q_j`` with fixed coefficients: one matmul
    with the coefficients as a view numpy never hands to BLAS (see :func:`_matvecs`), so each quaternion's
    numbers come from numpy's plain loop alone, whatever the batch it is converted in
    (:meth:`HingeArcEstimator.update_many`); equal to scipy's ``as_matrix`` to rounding.
    """
    q = np.asarray(q, dtype=float)
    p = q[..., :, None] * q[..., None, :]  # products q_i q_j
    r = np.matmul(p.reshape(*q.shape[:-1], 1, 16), _QM_COEF_VIEW)[..., 0, :]
    return np.divide(r[..., :9], r[..., 9:]).reshape(*q.shape[:-1], 3, 3)


# Rotation matrix of a quaternion from the products q_i q_j (index 4 i + j, x y z w = 0 1 2 3), row-major:
# R00 = xx - yy - zz + ww, R01 = 2 (xy - zw), R02 = 2 (xz + yw), R10 = 2 (xy + zw), R11 = -xx + yy - zz + ww,
# R12 = 2 (yz - xw), R20 = 2 (xz - yw), R21 = 2 (yz + xw), R22 = -xx - yy + zz + ww; divided by |q|^2,
# the tenth column (xx + yy + zz + ww).
_QM_COEF = np.zeros((16, 10))
for _k, _terms in enumerate(
    [
        {0: 1.0, 5: -1.0, 10: -1.0, 15: 1.0},
        {1: 2.0, 11: -2.0},
        {2: 2.0, 7: 2.0},
        {1: 2.0, 11: 2.0},
        {0: -1.0, 5: 1.0, 10: -1.0, 15: 1.0},
        {6: 2.0, 3: -2.0},
        {2: 2.0, 7: -2.0},
        {6: 2.0, 3: 2.0},
        {0: -1.0, 5: -1.0, 10: 1.0, 15: 1.0},
        {0: 1.0, 5: 1.0, 10: 1.0, 15: 1.0},
    ]
):
    for _i, _c in _terms.items():
        _QM_COEF[_i, _k] = _c
# Stored with its columns reversed and read back through a negative column stride: not "blasable" (see
# _matvecs), so the vector @ matrix product takes numpy's plain loop.
del _k, _terms, _i, _c
_QM_COEF_VIEW = np.ascontiguousarray(_QM_COEF[:, ::-1])[:, ::-1]


# Every 3x3 product below is one call of numpy's matmul on a stack of matrix-vector products whose matrix has
# its rows in reverse order (a view with a negative row stride). numpy's matmul loop (umath/matmul.c.src,
# ``@TYPE@_matmul``, the same in numpy 1.24, 1.26 and 2.x) then takes, for every matrix of the stack on its own,
# the branch "special case (a core dimension is 1), neither vector @ matrix nor matrix @ vector blasable":
# ``is_blasable2d`` needs a unit stride along one axis and a stride >= the other dimension along the other, which
# a negative row stride never satisfies, so no BLAS ``gemv`` (and no copy to a BLAS buffer, which recent numpy
# makes for a non-blasable matrix @ matrix, gh-23588) but ``@TYPE@_matmul_inner_noblas``: each output element is
# ``((0 + a_0 b_0) + a_1 b_1) + a_2 b_2``, summed in that order by the same C loop whatever the stack's size
# (where the compiler fuses those multiply-adds, it does so for every matrix alike).
# So a tick's numbers do not depend on how many ticks are computed with it (update() is update_many() with one
# tick), by construction of that loop; ``test_update_many_gives_the_bits_of_one_update_per_tick`` and
# ``test_3x3_products_of_a_stack_are_the_bits_of_each_product_alone`` (test/test_hinge_arc.py) and
# test/test_vine_bulk_replay.py check it (run them on numpy 1.24 and 1.26 too when this changes).
# The output must not overlap the inputs (numpy would copy an operand, and a copy may be blasable).


def _matvecs(A: FloatArray, x: FloatArray, out: FloatArray) -> FloatArray:
    """``out[..., i] = sum_n A[..., i, n] x[..., n]`` (broadcast), through numpy's plain C loop (see above)."""
    np.matmul(A[..., ::-1, :], x[..., None], out=out[..., ::-1, None])
    return out


def _stack_shape(A: FloatArray, B: FloatArray) -> tuple[int, ...]:
    a, b = A.shape[:-2], B.shape[:-2]
    if a == b or not b:
        return a
    if not a:
        return b
    return np.broadcast(A[..., 0, 0], B[..., 0, 0]).shape


def _mm(A: FloatArray, B: FloatArray, out: FloatArray | None = None) -> FloatArray:
    """``A @ B`` of stacks of 3x3 matrices (broadcast): column ``j`` is ``A`` times column ``j`` of ``B``.

    ``np.matmul(A, B)`` itself may hand a stack to BLAS (whose summation order is its own) or to its own loop
    depending on the numpy version and the operands' layout; :func:`_matvecs` always takes the plain loop.
    """
    if out is None:
        out = np.empty((*_stack_shape(A, B), 3, 3))
    # _matvecs(A[..., None, :, :], B^T, out^T), written out: the same operands, one call less
    np.matmul(A[..., None, ::-1, :], B.swapaxes(-1, -2)[..., None], out=out.swapaxes(-1, -2)[..., ::-1, None])
    return out


def _mat_vec(A: FloatArray, v: FloatArray, out: FloatArray) -> FloatArray:
    """``A @ v`` of stacks of 3x3 matrices and 3-vectors (see :func:`_matvecs`)."""
    return _matvecs(A, v, out)


def _rows_times(v: FloatArray, A: FloatArray, out: FloatArray | None = None) -> FloatArray:
    """Row vectors times matrices, ``v @ A`` (broadcast), i.e. ``A^T v`` (see :func:`_matvecs`)."""
    if out is None:
        out = np.empty((*np.broadcast(v[..., 0], A[..., 0, 0]).shape, 3))
    return _matvecs(A.swapaxes(-1, -2), v, out)


#: what an unbent segment's shortening keeps of the noise's std under :func:`_segments`: ``E[u / sqrt(u + 1)]``
#: for ``u`` exponential with mean 1 (the squared size of a two-axis Gaussian over its variance)
_UNBENT_SHORTENING = 0.62

#: a segment that turns by ``theta`` also moves its next node along its middle tangent when its curvature
#: changes within it: by ``kappa_mean int x Delta(x) dx`` (``Delta`` the turn's deviation from a constant curvature's,
#: ``x`` from the middle), against ``int Delta dx`` across. For a step in curvature at a uniformly random point the
#: rms of the first over the second is ``0.063 L``: the along-tangent sigma is ``0.063 theta`` times the across one
#: (a steady gradient moves it along by nothing; a bump in the middle, which neighbours on both sides show, by a
#: like amount)
_ALONG_PER_TURN = 0.063


class _Segments(NamedTuple):
    """Per-segment hinge-arc geometry in each segment's start frame (leading axes: ticks, segments)."""

    tangent: FloatArray  # (..., m, 3) new tangent
    sin: FloatArray
    cos: FloatArray
    theta: FloatArray
    radius: FloatArray  # centreline arc radius
    inv_s: FloatArray  # 1 / sin where the segment turns (sin > 1e-12), else 0: the in-plane direction it turns
    # to is the tangent's x, y times inv_s (zero for a straight segment)
    straight: FloatArray  # length of each of the two straight runs


def _segments(t: FloatArray, L: FloatArray, D: float, bend_noise: FloatArray | float = 0.0) -> _Segments:
    """Geometry of segments whose new tangent (in the start frame) is ``t`` (..., m, 3).

    The centreline of a segment bent by ``theta`` is ``L - D theta / 2`` long (the outer edge keeps its length).
    The measured bend is the size of a two-axis rotation, so the readings' noise and drift only ever add to it:
    its square is too large by their variance ``bend_noise`` (both axes of the relative rotation; broadcast
    against ``t[..., 0]``) on average, and an unbent segment comes out short by about ``0.89 D / 2`` times that
    noise's std: 17 segments by centimetres after a minute of drift. The shortening takes the bend as
    ``theta^2 / sqrt(theta^2 + bend_noise)``: on average within 3 % of a true bend of one to two noise stds and
    1.5 % at four, and 0.62 instead of 0.89 of the noise's std for an unbent segment (a hard threshold,
    ``sqrt(max(theta^2 - bend_noise, 0))``, leaves 0.33 there but 22 % short at one std, and its derivative,
    which the covariance takes by finite differences, jumps). Smooth, it also degrades gently when the stated
    noise is too large. The turn itself (the tangent) stays as measured, on an arc of the radius that gives that
    length.

    Every division is guarded (``theta > 0``, ``s > 1e-12``), so none can divide by zero. Elementwise
    only; the transcendental functions get freshly made (contiguous) arrays, so numpy takes the same
    (SIMD or not) loop whatever the batch.
    """
    s = np.hypot(t[..., 0], t[..., 1])
    c = np.minimum(np.maximum(t[..., 2], -1.0), 1.0)
    theta = np.arctan2(s, c)
    root = np.sqrt(theta * theta + bend_noise)
    bent = np.where(root > 0, theta * theta / np.where(root > 0, root, 1.0), 0.0)  # the bend that shortens it
    d_bent = D * bent
    per_theta = np.where(theta > 0, 1.0 / np.where(theta > 0, theta, 1.0), 0.0)
    # an arc of centreline length D bent / 2 (pivoting about the inner edge), or the whole segment bent
    r_c = np.where(d_bent <= L, (D / 2.0) * bent * per_theta, np.maximum((L - d_bent / 2.0) * per_theta, 0.0))
    turning = s > 1e-12
    inv_s = np.where(turning, 1.0 / np.where(turning, s, 1.0), 0.0)
    return _Segments(t, s, c, theta, r_c, inv_s, np.maximum(L - d_bent, 0.0) / 2.0)


def _displacements(g: _Segments) -> FloatArray:
    # in-plane: the two straight runs along the new tangent plus the arc's r (1 - cos) toward it; along z: the
    # first straight run, the arc's r sin and the second run's z
    d = np.empty(g.tangent.shape)
    np.multiply((g.straight + g.radius * (1.0 - g.cos) * g.inv_s)[..., None], g.tangent[..., :2], out=d[..., :2])
    np.add(g.straight * g.tangent[..., 2], g.straight + g.radius * g.sin, out=d[..., 2])
    return d


def segment_displacements(rel: FloatArray, L: FloatArray, D: float) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Hinge-arc centreline displacement of each segment in its start frame.

    Args:
        rel: ``(m, 3, 3)`` relative rotations ``B_k^T B_{k+1}``.
        L: ``(m,)`` outer-edge (material) lengths of the segments.
        D: body diameter.

    Returns:
        ``(d, theta, r_c)``: ``(m, 3)`` displacements, bend angles, centreline arc radii.
    """
    g = _segments(rel[:, :, 2], L, D)
    return _displacements(g), g.theta, g.radius


def _arc_points(g: _Segments, frac: FloatArray) -> FloatArray:
    """``(..., m, k + 3, 3)`` centreline points of each segment in its start frame (start excluded).

    ``frac`` is ``linspace(0, 1, k + 1)``: where the ``k + 1`` arc points sit along each arc.
    """
    k = len(frac) - 1
    r = g.radius[..., None]
    ang = g.theta[..., None] * frac
    pts = np.empty((*g.theta.shape, k + 3, 3))
    # end of the first straight run, then the arc, then the end of the second straight run
    pts[..., 0, :2] = 0.0
    pts[..., 0, 2] = g.straight
    np.add(g.straight[..., None], r * np.sin(ang), out=pts[..., 1 : k + 2, 2])
    np.multiply(
        (r * g.inv_s[..., None] * (1 - np.cos(ang)))[..., None], g.tangent[..., None, :2], out=pts[..., 1 : k + 2, :2]
    )
    np.add(pts[..., k + 1, :], g.straight[..., None] * g.tangent, out=pts[..., k + 2, :])
    return pts


_H = 1e-6  # turn of the central differences in the covariance
# (6, 3, 3): turns by +h about x, y, z, then by -h.
_AXIS_TURNS = Rotation.from_rotvec(np.concatenate([np.eye(3), -np.eye(3)]) * _H).as_matrix()
_AXIS_TURNS_T = np.ascontiguousarray(_AXIS_TURNS.transpose(0, 2, 1))[:, None]  # (6, 1, 3, 3), for row vectors
_EYE3 = np.eye(3)
# The row-major cross-product matrix [v]x as v @ K: x -> +(2, 1), -(1, 2); y -> +(0, 2), -(2, 0);
# z -> +(1, 0), -(0, 1). Read through a non-blasable view, as _QM_COEF_VIEW.
_SKEW_K = np.zeros((3, 9))
_SKEW_K[[0, 1, 2], [7, 2, 3]] = 1.0
_SKEW_K[[0, 1, 2], [5, 6, 1]] = -1.0
_SKEW_K_VIEW = np.ascontiguousarray(_SKEW_K[:, ::-1])[:, ::-1]


def _cross(a: FloatArray, b: FloatArray) -> FloatArray:
    """``a x b`` of stacks of 3-vectors (broadcast), elementwise (``np.cross`` costs several times as much)."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


def _skew(v: FloatArray) -> FloatArray:
    """``(..., 3)`` -> ``(..., 3, 3)`` cross-product matrices: each entry a component, its negation or a zero
    (numpy's plain loop summing ``v_i K_ij`` with ``K_ij`` in {-1, 0, 1}: exact, whatever the batch)."""
    return np.matmul(v[..., None, :], _SKEW_K_VIEW)[..., 0, :].reshape(*v.shape[:-1], 3, 3)


def _frame_coefficients(world_base_T: FloatArray, mount_tr: FloatArray) -> FloatArray:
    """``(m, 16, 19)`` coefficients (as a non-blasable view) taking a sensor's products ``q_a q_b`` to the nine
    entries of ``W^T R(q)``, the nine of ``W^T R(q) M_i^T`` and ``|q|^2`` (see :func:`quats_to_matrices`)."""
    Q = _QM_COEF[:, :9].reshape(16, 3, 3)  # R(q)[k, c] from the products
    S = np.einsum("rk,akc->arc", world_base_T, Q)  # (W^T R)[r, c]
    Bc = np.einsum("arl,ilc->iarc", S, mount_tr)  # (W^T R M_i^T)[r, c]
    m = len(mount_tr)
    coef = np.empty((m, 16, 19))
    coef[:, :, :9] = S.reshape(16, 9)
    coef[:, :, 9:18] = Bc.reshape(m, 16, 9)
    coef[:, :, 18] = _QM_COEF[:, 9]
    return np.ascontiguousarray(coef[..., ::-1])[..., ::-1]


class _Plan(NamedTuple):
    """What an update needs that depends only on which sensors are selected and which of them are active."""

    idx: np.ndarray  # (m,) active sensors
    pick: np.ndarray | slice  # idx, or all sensors as a slice (no gather) when every one is active
    # (m, 16, 19) through a non-blasable view: from the products q_a q_b of a sensor's quaternion, W^T R (9),
    # B = W^T R M^T (9) and |q|^2 (1); see _frame_coefficients
    frame_coef: FloatArray
    seg_len_batch: FloatArray  # (7 m,) material length of the segments, then of each of their six turned copies
    over_at: FloatArray  # (m,) bend past L / D
    last_sigma: float  # material coordinate of the last node
    frame_ids: list[str]  # of the poses: active sensors, then the tip
    missing: list[str]  # selected sensors that are not active
    bridged: np.ndarray  # (m,) bool: the segment spans sensors that are missing
    level: DiagnosticLevel  # before the over-bend check
    messages: list[str]  # ditto


class HingeArcEstimator:
    """Hinge-arc shape from the latest orientation of every IMU.

    Call :meth:`capture_offset` with the robot straight (or let the pipeline
    do it from the first complete set of readings), then :meth:`update`.
    Deterministic; no I/O.
    """

    def __init__(self, config: HingeArcConfig, frame_ids: list[str]) -> None:
        n = len(config.sensor_positions)
        if len(frame_ids) != n:
            raise ValueError(f"{len(frame_ids)} frame ids for {n} sensors")
        self.config = config
        self.frame_ids = list(frame_ids)
        self.n = n
        self.used = config.used.copy() if config.used.size else np.ones(n, dtype=bool)
        self._world_base_T: FloatArray | None = None  # W^T
        self._mount_T: FloatArray | None = None  # (n, 3, 3) M_i^T
        self._mount: FloatArray = np.tile(np.eye(3), (n, 1, 1))  # M_i
        self._mount_ok = np.zeros(n, dtype=bool)
        self.offset_stamp_ns: int | None = None
        self._sigma_key: bytes | None = None  # the vertical the mounting's sigma points were made for
        self._sigma_points: FloatArray = np.zeros((0, 3, 3))
        self._kappa_seen = 0.0  # 1/m, the sharpest curvature a segment has shown so far (bridged segments' term)
        self.reference: StraightReference | None = None
        self._arc_frac = np.linspace(0.0, 1.0, config.arc_samples + 1)
        self._plans: dict[tuple[bytes, bytes], _Plan] = {}  # by (selected, active) sensor masks

    @property
    def is_offset(self) -> bool:
        """Whether the straight reference has been captured."""
        return self._world_base_T is not None

    def capture_offset(self, quats: FloatArray, valid: np.ndarray, stamp_ns: int) -> list[int]:
        """Capture the straight reference from world orientations ``quats`` (n, 4).

        Returns the indices of sensors that had no valid reading (they stay
        unusable until the next capture).

        Raises:
            ValueError: no sensor has a valid reading.
        """
        valid = np.asarray(valid, dtype=bool)
        if not valid.any():
            raise ValueError("cannot capture the straight reference: no sensor has a valid reading")
        # Base frame in the IMU world and every M_i = W^T R_i (see estimators/straight_reference.py).
        ref = capture_reference(
            quats,
            valid,
            stamp_ns,
            self.frame_ids,
            first_mount=self.config.first_mount,
            placement=self.config.base_placement,
        )
        self.apply_reference(ref)
        return [int(i) for i in np.flatnonzero(~valid)]

    def apply_reference(self, ref: StraightReference) -> None:
        """Use a captured or loaded straight reference (its sensors must be this estimator's)."""
        ref.check_frames(self.frame_ids)
        M = np.asarray(ref.mountings, dtype=float)
        self._world_base_T = np.asarray(ref.world_base, dtype=float).T
        self._mount_T = np.ascontiguousarray(np.swapaxes(M, 1, 2))
        self._mount = M
        self._mount_ok = np.asarray(ref.captured, dtype=bool).copy()
        self.offset_stamp_ns = int(ref.stamp_ns)
        self.reference = ref
        self._plans.clear()

    def mountings(self) -> FloatArray:
        """Captured mounting rotations ``M_i`` (n, 3, 3) of the sensors on their backbone frames."""
        if self._mount_T is None:
            raise NotOffsetError("the straight reference has not been captured")
        return np.swapaxes(self._mount_T, 1, 2)

    def update(self, quats: FloatArray, valid: np.ndarray, stamp_ns: int, length: float | None = None) -> ShapeEstimate:
        """Estimate the shape from the latest world orientations.

        Args:
            quats: ``(n, 4)`` latest ``[x, y, z, w]`` world orientation of every sensor.
            valid: ``(n,)`` which readings are present and fresh.
            stamp_ns: stamp of the data.
            length: robot length (material, from the base) from an encoder, or ``None``.

        Raises:
            NotOffsetError: before :meth:`capture_offset`.

        This is :meth:`update_many` with one tick: the same kernel on the same numbers, so the same bits.
        """
        if self._world_base_T is None or self._mount_T is None:
            raise NotOffsetError("the straight reference has not been captured (call the offset service)")
        cfg = self.config
        everted = cfg.sensor_positions <= (length + 1e-9) if length is not None else None
        selected = self.used if everted is None else self.used & everted
        active = selected & np.asarray(valid, dtype=bool) & self._mount_ok
        plan = self._plans.get((selected.tobytes(), active.tobytes()))
        if plan is None:
            plan = self._plan(selected, active)
        lengths = np.array([np.nan if length is None else float(length)])
        stamps = np.array([int(stamp_ns)], dtype=np.int64)
        return self._batch(plan, np.asarray(quats, dtype=float)[None], stamps, lengths)[0]

    def update_many(
        self, quats: FloatArray, valid: np.ndarray, stamps_ns: list[int] | np.ndarray, lengths: FloatArray
    ) -> list[ShapeEstimate]:
        """:meth:`update` at many ticks in one vectorised pass (bulk replay, re-analysis).

        Args:
            quats: ``(T, n, 4)`` latest orientations of every sensor at each tick.
            valid: ``(T, n)`` which readings are present and fresh at each tick.
            stamps_ns: ``(T,)`` stamps of the data.
            lengths: ``(T,)`` robot lengths, NaN where there is none (``length=None``).

        Ticks are grouped by which sensors they use; each group is computed with elementwise numpy
        operations and explicit sums in a fixed order over ``(ticks, segments, ...)`` arrays (no matrix
        products, whose summation order depends on the batch's size and layout), so every tick's numbers
        are those of :meth:`update` at that tick alone, to the last bit.

        Raises:
            NotOffsetError: before :meth:`capture_offset`.
        """
        if self._world_base_T is None or self._mount_T is None:
            raise NotOffsetError("the straight reference has not been captured (call the offset service)")
        cfg = self.config
        quats = np.asarray(quats, dtype=float)
        valid = np.asarray(valid, dtype=bool)
        stamps = np.asarray(stamps_ns, dtype=np.int64)
        lengths = np.asarray(lengths, dtype=float)
        n_ticks = len(stamps)
        has_length = ~np.isnan(lengths)
        with np.errstate(invalid="ignore"):
            everted = (cfg.sensor_positions[None, :] <= (lengths[:, None] + 1e-9)) | ~has_length[:, None]
        selected = self.used[None, :] & everted
        active = selected & valid & self._mount_ok[None, :]
        out: list[ShapeEstimate | None] = [None] * n_ticks
        if n_ticks == 1:
            groups = [(np.zeros(1, dtype=np.intp), selected[0], active[0])]
        else:
            keys = np.ascontiguousarray(np.concatenate([selected, active], axis=1))
            keys_v = keys.view(np.dtype((np.void, keys.shape[1])))[:, 0]
            _, first, inverse = np.unique(keys_v, return_index=True, return_inverse=True)
            inverse = inverse.reshape(-1)
            groups = [(np.flatnonzero(inverse == g), selected[f], active[f]) for g, f in enumerate(first)]
        for ticks, sel, act in groups:
            plan = self._plans.get((sel.tobytes(), act.tobytes()))
            if plan is None:
                plan = self._plan(sel, act)
            made = self._batch(plan, quats[ticks], stamps[ticks], lengths[ticks])
            for t, est in zip(ticks.tolist(), made, strict=True):
                out[t] = est
        return out  # type: ignore[return-value]

    def _batch(self, plan: _Plan, quats: FloatArray, stamps: np.ndarray, lengths: FloatArray) -> list[ShapeEstimate]:
        """Estimates at ``T`` ticks that share one plan (see :meth:`update_many`)."""
        assert self._world_base_T is not None
        cfg = self.config
        T = len(stamps)
        m = len(plan.idx)
        D = cfg.diameter
        B = np.empty((T, m + 1, 3, 3))
        B[:, 0] = _EYE3
        # W^T R_i (each sensor's orientation in the base frame) and B_i = W^T R_i M_i^T (its backbone frame),
        # both linear in the products q_a q_b over |q|^2: one plain-loop product per sensor (see _matvecs)
        q = quats[:, plan.pick]
        prods = (q[..., :, None] * q[..., None, :]).reshape(T, m, 1, 16)
        r = np.matmul(prods, plan.frame_coef)[..., 0, :]
        frames = np.divide(r[..., :18], r[..., 18:]).reshape(T, m, 2, 3, 3)
        sensor_rot = frames[:, :, 0]
        B[:, 1:] = frames[:, :, 1]
        Bk, BkT = B[:, :-1], B[:, :-1].swapaxes(-1, -2)
        # The segments' new tangents, B_k^T B_{k+1} z (the third column of the relative rotations, with the bits
        # _mm gives it), and for the covariance six turned copies of each (see _covariance), in one batch.
        tangents = np.empty((T, 7, m, 3))
        t_rel = _mat_vec(BkT, B[:, 1:, :, 2], out=tangents[:, 0])
        _rows_times(t_rel[:, None], _AXIS_TURNS_T, out=tangents[:, 1:])
        offset = stamps if self.offset_stamp_ns is None else self.offset_stamp_ns
        since = (stamps - offset) * 1e-9
        var = self._reading_variance(since)
        # the relative rotation's variance is twice a reading's per axis, and the bend has two axes
        bend_noise = (4.0 * var)[:, None]
        batch = _segments(tangents.reshape(T, 7 * m, 3), plan.seg_len_batch, D, bend_noise)
        d_all = _displacements(batch)
        geom = _Segments(*[a[:, :m] for a in batch])
        theta = geom.theta
        # Chords, sensor wall offsets and the tip's straight extension: the covariance needs all their
        # cross-product matrices, so they are rows of one array.
        vecs = np.empty((T, 2 * m + 1, 3))
        chords, wall, tip_chord = vecs[:, :m], vecs[:, m : 2 * m], vecs[:, 2 * m]
        _mat_vec(Bk, d_all[:, :m], out=chords)
        centre = np.empty((T, m + 1, 3))
        centre[:, 0] = 0.0
        np.add.accumulate(chords, axis=1, out=centre[:, 1:])
        # Tip: straight on from the last used node.
        # The body ends at the measured length, or without one at the last IMU plus tip_offset
        # (whether or not that IMU is used or fresh).
        end = np.where(np.isnan(lengths), float(cfg.sensor_positions[-1]) + cfg.tip_offset, lengths)
        ext = np.maximum(end - plan.last_sigma, 0.0)
        np.multiply(B[:, -1, :, 2], ext[:, None], out=tip_chord)
        half_r = D / 2.0
        np.multiply(B[:, 1:, :, 0], half_r, out=wall)
        # Poses: sensors on the wall with their mounting, then the tip on the centreline.
        poses = np.zeros((T, m + 1, 4, 4))
        poses[:, :, 3, 3] = 1.0
        poses[:, :m, :3, :3] = sensor_rot  # B_i M_i = W^T R_i
        np.add(centre[:, 1:], wall, out=poses[:, :m, :3, 3])
        poses[:, m, :3, :3] = B[:, -1]
        np.add(centre[:, -1], tip_chord, out=poses[:, m, :3, 3])
        cov = self._covariance(Bk, BkT, d_all[:, m:], vecs, var, B)
        self._model_covariance(cov, B, plan.seg_len_batch[:m], ext, plan.bridged)
        self._shortening_covariance(cov, chords, theta, bend_noise)
        # the first IMU's mounting (assumed without the base's placement; with it, its heading still sets the
        # base frame's): a conjugation common to every frame
        self._mount_covariance(cov, B, plan.seg_len_batch[:m], bend_noise, ext, poses[:, :, :3, 3])
        backbone = self._backbone(BkT, geom, centre, tip_chord, poses[:, m, :3, 3])
        lengths_out = np.add.accumulate(2.0 * geom.straight + geom.radius * theta, axis=1)[:, -1] if m else 0.0
        lengths_out = (lengths_out + ext).tolist()
        diags = self._summaries(since, plan, theta, B, lengths)
        frame_ids = plan.frame_ids
        return [
            ShapeEstimate(
                stamp_ns=int(stamps[t]),
                parent_frame=cfg.base_frame,
                frame_ids=list(frame_ids),
                poses=poses[t],
                position_covariance=cov[t],
                backbone=backbone[t],
                radius=half_r,
                length=lengths_out[t],
                diagnostics=[diags[t]],
            )
            for t in range(T)
        ]

    def _plan(self, selected: np.ndarray, active: np.ndarray) -> _Plan:
        """Build (and keep) what updates with these selected and active sensors share."""
        assert self._mount_T is not None and self._world_base_T is not None
        cfg = self.config
        idx = np.flatnonzero(active)
        node_sigma = np.concatenate([[0.0], cfg.sensor_positions[idx]])
        seg_L = np.diff(node_sigma)
        gone = np.flatnonzero(selected & ~active)
        missing = [self.frame_ids[i] for i in gone]
        at = cfg.sensor_positions[gone]
        bridged = np.any((at[None, :] > node_sigma[:-1, None]) & (at[None, :] < node_sigma[1:, None]), axis=1)
        level = DiagnosticLevel.OK
        messages = []
        if len(idx) == 0:
            level = DiagnosticLevel.ERROR
            messages.append("no usable sensor")
        if missing:
            level = max(level, DiagnosticLevel.WARN)
            messages.append("bridged missing/stale: " + ", ".join(missing))
        plan = _Plan(
            idx=idx,
            pick=slice(None) if len(idx) == len(active) else idx,
            frame_coef=_frame_coefficients(self._world_base_T, self._mount_T[idx]),
            seg_len_batch=np.tile(seg_L, 7),
            # A zero-length segment (first_sensor 0: sensor 0 at the base) has no inner wall to buckle; its
            # bend is the base sensor's noise against the base frame, so it is never reported past L/D.
            over_at=np.where(seg_L > 1e-9, seg_L / cfg.diameter, np.inf),
            last_sigma=float(node_sigma[-1]),
            frame_ids=[self.frame_ids[i] for i in idx] + [cfg.tip_frame],
            missing=missing,
            bridged=bridged,
            level=level,
            messages=messages,
        )
        if len(self._plans) >= 64:  # sensors dropping in and out in ever new combinations
            self._plans.clear()
        self._plans[(selected.tobytes(), active.tobytes())] = plan
        return plan

    def _reading_variance(self, since: FloatArray) -> FloatArray:
        """Per-axis variance of each sensor's offset-corrected orientation ``since`` seconds after the offset:
        the reading's and the offset capture's noise, and the drift since."""
        cfg = self.config
        dt = np.maximum(0.0, since)
        # the drift rate is the size of the drift's rotation per unit time (as a recording characterises it: the
        # slope of the angle between reading and truth); about an axis nobody knows, a third of its square per axis
        return np.asarray(2.0 * cfg.orientation_noise**2 + (cfg.drift_rate * dt) ** 2 / 3.0)

    def _covariance(
        self, Bk: FloatArray, BkT: FloatArray, turned: FloatArray, vecs: FloatArray, var: FloatArray, B: FloatArray
    ) -> FloatArray:
        cfg = self.config
        T, m = Bk.shape[:2]
        if not m:
            return np.zeros((T, 1, 3, 3))
        # Segment k's chord Delta_k = B_k d(B_k^T B_{k+1}). With B_k -> exp(dphi_k) B_k (base frame), the
        # relative rotation turns by eps = B_k^T (dphi_{k+1} - dphi_k) in frame k, so
        # dDelta_k = -[Delta_k]x dphi_k + G_k (dphi_{k+1} - dphi_k), G_k = B_k (dd/deps) B_k^T.
        # dd/deps by central differences: `turned` holds d of every segment turned by +h and -h about each
        # axis, (T, 6 m, 3) ordered [+x, +y, +z, -x, -y, -z] x segments, computed in the update's batch.
        d = turned.reshape(T, 6, m, 3)
        J = ((d[:, :3] - d[:, 3:]) / (2 * _H)).transpose(0, 2, 3, 1)  # (T, m, 3 d-components, 3 axes)
        G = _mm(_mm(Bk, J), BkT)
        # vecs: chords (m), sensor wall offsets (m), tip extension (1).
        skews = _skew(vecs)
        # Jacobian of the chain positions w.r.t. node j (1..m): incoming chord G_{j-1}, outgoing -[Delta_j]x - G_j.
        # Rows: interior (m), own sensor (m), own tip (1).
        Ms = np.empty((T, 2 * m + 1, 3, 3))
        np.subtract(G[:, :-1], skews[:, 1:m] + G[:, 1:], out=Ms[:, : m - 1])
        Ms[:, m - 1] = G[:, -1]
        np.subtract(G, skews[:, m : 2 * m], out=Ms[:, m : 2 * m])
        np.subtract(G[:, -1], skews[:, 2 * m], out=Ms[:, 2 * m])
        terms = _mm(Ms, Ms.swapaxes(-1, -2))
        terms *= var[:, None, None, None]
        # Mountings captured against the IMUs' own world frames: sensor i's backbone frame comes out conjugated,
        # C_i^T B_i C_i, by the rotation C_i between its IMU's heading reference and the world's (a turn h_i
        # about the world's vertical u, in the base frame) and, without the base's placement, by the first
        # IMU's mounting error E common to all. Conjugating by exp(d) turns B_i by (B_i - I) d in the base
        # frame: the rows' Jacobians times A_i = B_i - I.
        A = np.empty((T, 2 * m + 1, 3, 3))
        np.subtract(B[:, 1:m], _EYE3, out=A[:, : m - 1])
        np.subtract(B[:, m], _EYE3, out=A[:, m - 1])
        np.subtract(B[:, 1:], _EYE3, out=A[:, m : 2 * m])
        np.subtract(B[:, m], _EYE3, out=A[:, 2 * m])
        MA = _mm(Ms, A)
        assert self._world_base_T is not None
        up = self._world_base_T[:, 2]  # the world's vertical in the base frame
        v = MA[..., 0] * up[0] + MA[..., 1] * up[1] + MA[..., 2] * up[2]  # MA @ up, elementwise
        terms += (v[..., :, None] * v[..., None, :]) * cfg.heading_reference_stddev**2
        cov = np.empty((T, m + 1, 3, 3))
        cov[:, 0] = terms[:, m]
        csum = np.add.accumulate(terms[:, : m - 1], axis=1)
        np.add(csum, terms[:, m + 1 : 2 * m], out=cov[:, 1:m])
        np.add(csum[:, -1] if m > 1 else 0.0, terms[:, 2 * m], out=cov[:, m])
        return cov

    def _mount_sigma_points(self, up: FloatArray) -> FloatArray:
        """The mounting error's sigma points as rotations ``(2 k, 3, 3)`` (see :meth:`_mount_covariance`), made
        once per vertical (the world's, in the base frame: fixed once the reference is captured)."""
        key = up.tobytes()
        if self._sigma_key != key:
            cfg = self.config
            if cfg.base_placement is None:
                S = np.eye(3) * cfg.first_mount_stddev**2 + np.outer(up, up) * cfg.heading_reference_stddev**2
            else:
                S = np.outer(up, up) * (cfg.first_mount_stddev**2 + cfg.heading_reference_stddev**2)
            lam, V = np.linalg.eigh(S)  # a square root that also takes a stated 0 (S singular)
            keep = lam > 1e-12 * max(float(lam[-1]), 1e-300)  # directions with no variance move nothing
            Lc = (V * np.sqrt(3.0 * np.maximum(lam, 0.0)))[:, keep]
            E = Rotation.from_rotvec(np.concatenate([Lc.T, -Lc.T])).as_matrix() if keep.any() else np.zeros((0, 3, 3))
            self._sigma_key, self._sigma_points = key, E
        return self._sigma_points

    def _mount_covariance(
        self, cov: FloatArray, B: FloatArray, seg_len: FloatArray, bend_noise: FloatArray, ext: FloatArray,
        positions: FloatArray,
    ) -> None:  # fmt: skip
        """Add, in place, the covariance from the first IMU's mounting.

        Its error ``E = exp(e)`` conjugates every backbone frame alike, ``E^T B_i E``. Without the base's
        placement the first IMU's mounting is assumed: ``e ~ N(0, S)``, ``S = first_mount_stddev^2 I +
        heading_reference_stddev^2 u u^T`` (``u`` the world's vertical in the base frame). With the placement
        known the capture solves that mounting but takes the base's heading from the first IMU (its fused
        heading is magnetic): its mounting's turn about the vertical and its own heading offset turn the base
        frame about the vertical, ``S = (first_mount_stddev^2 + heading_reference_stddev^2) u u^T``. That leaves
        bends about the vertical alone and turns every other one (a helix's tip went 9 cm off under seed 3's 10
        deg). A robot coiled into turns moves far from first order under a few degrees of
        that (a 16 deg draw at 15 1/m put a tip 45 cm off, 20 times the linearised sigma), so the term is taken by
        the unscented transform: the whole chain again at the sigma points ``+-sqrt(3)`` times the columns of a
        square root of ``S`` (six, or two where ``S`` has one direction; weight 1/6 each), their spread about
        the estimate (equal to ``J S J^T`` where the chain is linear
        in ``e``, and including the second-order shift where it is not).
        """
        cfg = self.config
        assert self._world_base_T is not None
        up = self._world_base_T[:, 2]
        T, n = B.shape[:2]
        m = n - 1
        E = self._mount_sigma_points(up)
        k = len(E) // 2
        if not m or not k:
            return
        Bj = _mm(_mm(E.swapaxes(-1, -2)[:, None, None], B[None]), E[:, None, None])  # (2 k, T, m + 1, 3, 3)
        t_rel = np.empty((2 * k, T, m, 3))
        _mat_vec(Bj[:, :, :-1].swapaxes(-1, -2), Bj[:, :, 1:, :, 2], out=t_rel)
        d = _displacements(_segments(t_rel, seg_len, cfg.diameter, bend_noise[None]))
        chords = np.empty((2 * k, T, m, 3))
        _mat_vec(Bj[:, :, :-1], d, out=chords)
        centre = np.add.accumulate(chords, axis=2)
        p = np.empty((2 * k, T, n, 3))
        np.add(centre, Bj[:, :, 1:, :, 0] * (cfg.diameter / 2.0), out=p[:, :, :m])
        np.add(centre[:, :, -1], Bj[:, :, -1, :, 2] * ext[None, :, None], out=p[:, :, m])
        dev = p - positions[None]
        outer = dev[..., :, None] * dev[..., None, :]  # elementwise, summed in a fixed order: bits per tick
        total = outer[0]
        for j in range(1, 2 * k):
            total = total + outer[j]
        cov += total / 6.0  # the sigma points' weight, 1 / (2 n) for n = 3

    def _shortening_covariance(self, cov: FloatArray, chords: FloatArray, theta: FloatArray, n: FloatArray) -> None:
        """Add, in place, what is left of the bends' noise bias in the shortening (see :func:`_segments`).

        An unbent segment still comes out short by about ``0.62 (D / 2) sqrt(n)`` on average, less as its bend
        grows past the noise (``n / (bend^2 + n)`` of it here, the true bend's square taken as
        ``max(theta^2 - n, 0)``); every segment errs the same way, so the sum along
        the chain is one direction, added to every node beyond as a rank-one term (a bias, not noise: it does not
        average out along the robot).
        """
        m = chords.shape[1]
        if not m:
            return
        D = self.config.diameter
        th2 = theta * theta
        root = np.sqrt(n)  # (T, 1)
        # n / (true bend^2 + n), the true bend's square estimated as max(theta^2 - n, 0): 1 within the noise
        den = np.maximum(th2 - n, 0.0) + n
        short = _UNBENT_SHORTENING * (D / 2.0) * root * (n / np.where(den > 0, den, 1.0))  # (T, m)
        size = np.sqrt(np.einsum("tki,tki->tk", chords, chords))
        unit = chords / np.where(size > 0, size, 1.0)[..., None]
        drift = np.add.accumulate(short[..., None] * unit, axis=1)  # (T, m, 3): node k+1's
        cov[:, :m] += drift[..., :, None] * drift[..., None, :]
        cov[:, m] += drift[:, -1, :, None] * drift[:, -1, None, :]

    def _model_covariance(
        self, cov: FloatArray, B: FloatArray, seg_len: FloatArray, ext: FloatArray, bridged: np.ndarray
    ) -> None:
        """Add, in place, the hinge model's own error against a continuous body.

        A segment's bend is put halfway along it; a real body spreads it as its curvature ``kappa(s)`` goes.
        Against the hinge, the next node moves by the curvature's first moment about the middle,
        ``int (L/2 - s) kappa(s) ds``, across the tangent: nothing for a constant curvature, ``L^3 g / 12`` for a
        gradient ``g``, ``u (1 - u) L^2 dk / 2`` for a step ``dk`` at fraction ``u`` (rms ``L^2 dk / sqrt(120)``
        over ``u``), ``(1/2 - u) L theta`` for a kink. The segment's own IMUs cannot see where it bends; its
        neighbours show how the curvature changes around it. With ``k_j = phi_j / L_j`` (``phi_j`` the segment's
        bend as a rotation vector in the base frame) and ``d- = k_k - k_{k-1}``, ``d+ = k_{k+1} - k_k``, each
        segment adds ``[t]x (c L_k^2)^2 (d- d-^T + d+ d+^T) [t]x^T`` (``t`` its middle tangent) to every frame
        beyond it, ``c`` the
        ``curvature_variation_factor``. Summed over the segment and its neighbours (which the step or kink charges
        too), ``c = 1 / sqrt(160) = 0.079`` matches a step anywhere along the segment, ``1 / sqrt(288) = 0.059`` a
        steady gradient, ``1 / sqrt(48) = 0.144`` a kink anywhere between straight neighbours; the default, 0.12,
        leans to kinks (a vine robot buckles). At the chain's ends the
        missing difference is taken as the one there is; a lone segment is taken between straight ones.
        To second order the next node also moves along the middle tangent, by ``kappa_mean int x Delta dx``
        (``Delta`` the turn's deviation from a constant curvature's): ``(0.063 theta)^2`` times the across variance
        (:data:`_ALONG_PER_TURN`, ``theta`` the segment's turn). A segment bridged over missing sensors that the
        sharpest curvature the robot has shown so far would turn by more than half a turn may hide a coil: its next
        node lies anywhere within its length ``L`` of its start, ``L^2 / 5`` per axis.
        ``bend_location_stddev`` ``f`` adds, for bodies that kink where the neighbours cannot show it, a bend
        anywhere along the segment: ``(f L)^2 w w^T``. Bridging a missing sensor makes the merged segment longer,
        and its terms with it. The tip's straight extension past the last used IMU (``ext``) bends like the last
        segment: its end moves by about ``ext^2 kappa / 2`` across it, and, as its inner wall buckles, falls short
        along it by the centreline's shortening ``(D / 2) ext kappa`` (the chain takes the extension straight and
        full length). Elementwise operations only, so a tick's bits do not depend on its batch (see
        :meth:`update_many`).
        """
        cfg = self.config
        m = B.shape[1] - 1
        if not m:
            return
        t = B[:, :, :, 2]  # (T, m + 1, 3) the nodes' tangents; node 0 is the base
        w = t[:, :-1] - t[:, 1:]
        # the segments' bends as rotation vectors in the base frame, phi_k = theta_k (t_k x t_{k+1}) / |t_k x t_{k+1}|:
        # the same vector all along a planar bend of constant curvature, however far it has turned
        axis = _cross(t[:, :-1], t[:, 1:])
        s = np.sqrt(np.sum(axis * axis, axis=-1))
        bend = np.arctan2(s, np.sum(t[:, :-1] * t[:, 1:], axis=-1))
        phi = axis * np.where(s > 1e-12, bend / np.where(s > 1e-12, s, 1.0), 1.0)[..., None]
        # a segment of no length (an IMU at the base) turns by its readings' error alone: it carries no
        # curvature and is nobody's neighbour
        real = np.flatnonzero(seg_len > 1e-6)
        n = len(real)
        C = np.zeros(w.shape + (3,))
        if n:
            k = phi[:, real] / seg_len[real][None, :, None]
            dk = np.empty((w.shape[0], n + 1, 3))  # differences at the n + 1 boundaries, the ends copied in
            if n > 1:
                np.subtract(k[:, 1:], k[:, :-1], out=dk[:, 1:n])
                dk[:, 0] = dk[:, 1]
                dk[:, n] = dk[:, n - 1]
            else:  # one segment between straight ones
                dk[:, 0] = k[:, 0]
                dk[:, 1] = -k[:, 0]
            # the first moment M (a rotation vector) moves the next node by M x t across the segment's middle
            # tangent: the displacement's covariance is [t]x S [t]x^T, S = (c L^2)^2 (d- d-^T + d+ d+^T)
            mid = t[:, real] + t[:, real + 1]
            mid /= np.maximum(np.sqrt(np.sum(mid * mid, axis=-1)), 1e-12)[..., None]  # a reversal: no middle
            lo = _cross(dk[:, :n], mid)
            hi = _cross(dk[:, 1:], mid)
            Cr = lo[..., :, None] * lo[..., None, :] + hi[..., :, None] * hi[..., None, :]
            # second order, along the middle tangent, in proportion to the segment's turn: a few per cent of the
            # across term on an instrumented body, a tenth on a long bridged segment that turns by a radian or more
            along = _ALONG_PER_TURN * bend[:, real]
            along = along * along * (np.sum(lo * lo, axis=-1) + np.sum(hi * hi, axis=-1))
            Cr += along[..., None, None] * (mid[..., :, None] * mid[..., None, :])
            Cr *= ((cfg.curvature_variation * seg_len[real] ** 2) ** 2)[None, :, None, None]
            # the sharpest curvature the robot has shown so far, tick by tick (the same bits whatever the batch)
            seen = np.maximum.accumulate(np.maximum(np.max(np.sqrt(np.sum(k * k, axis=-1)), axis=1),
                                                    self._kappa_seen))  # fmt: skip
            self._kappa_seen = float(seen[-1])
            if bridged[real].any():
                # a segment bridged over missing sensors may hide turns its end tangents cannot show: once the
                # sharpest curvature the robot has shown would turn it by more than half a turn along its length,
                # it may hold a coil, and its next node is known only to lie within its length of its start (a
                # uniform ball of radius L: L^2 / 5 per axis)
                Lr = seg_len[real]
                hides = bridged[real][None, :] & (seen[:, None] * Lr[None, :] > np.pi)
                Cr += (hides * (Lr * Lr / 5.0)[None, :])[..., None, None] * _EYE3
            C[:, real] = Cr
        if cfg.bend_location_stddev > 0:
            C += w[..., :, None] * w[..., None, :] * ((cfg.bend_location_stddev * seg_len) ** 2)[None, :, None, None]
        cum = np.add.accumulate(C, axis=1)
        cov[:, :m] += cum
        cov[:, m] += cum[:, -1]
        last_len = float(seg_len[-1]) if seg_len[-1] > 1e-9 else np.inf
        turn = np.sqrt(w[:, -1, 0] * w[:, -1, 0] + w[:, -1, 1] * w[:, -1, 1] + w[:, -1, 2] * w[:, -1, 2])
        lateral = ext * ext * (turn / last_len) / 2.0
        along = (cfg.diameter / 2.0) * ext * (turn / last_len)
        tip_t = t[:, -1]
        tt = tip_t[..., :, None] * tip_t[..., None, :]
        cov[:, m] += (lateral * lateral)[:, None, None] * (_EYE3 - tt) + (along * along)[:, None, None] * tt

    def _backbone(
        self, BkT: FloatArray, geom: _Segments, centre: FloatArray, tip_chord: FloatArray, tip: FloatArray
    ) -> FloatArray:
        T, m = geom.theta.shape
        if m == 0:
            out = np.zeros((T, 2, 3))
            out[:, 1] = tip_chord
            return out
        local = _arc_points(geom, self._arc_frac)  # (T, m, k + 3, 3)
        out = np.empty((T, m * local.shape[2] + 2, 3))
        out[:, 0] = 0.0
        # Points repeat where a straight run has zero length; consumers of the polyline tolerate that.
        pts = out[:, 1:-1].reshape(T, m, local.shape[2], 3)  # a view: the rotated points are made in place
        _rows_times(local, BkT[:, :, None], out=pts)
        np.add(pts, centre[:, :-1, None, :], out=pts)
        out[:, -1] = tip
        return out

    @staticmethod
    def _half_twist(rel: FloatArray) -> FloatArray:
        """Half the twist about the tangent left after removing the swing (rad), per segment.

        With ``rel = swing * twist`` and the swing axis normal to z, the
        quaternion of ``rel`` has ``z / w = tan(twist / 2)``; from the matrix,
        ``z / w = (R10 - R01) / (1 + trace)``.
        """
        trace = rel[..., 0, 0] + rel[..., 1, 1] + rel[..., 2, 2]
        return np.arctan2(rel[..., 1, 0] - rel[..., 0, 1], 1.0 + trace)

    def _summaries(
        self, since: FloatArray, plan: _Plan, theta: FloatArray, B: FloatArray, lengths: FloatArray
    ) -> list[DiagnosticStatus]:
        """One status per tick: level and message now, the values (formatted numbers) when first read."""
        m = theta.shape[1]
        n_over = np.add.reduce(theta > plan.over_at, axis=1, dtype=np.intp).tolist()
        used = str(len(plan.idx))
        missing = ",".join(plan.missing)
        half_twist = self._half_twist

        def values(t: int, dt: float, n: int) -> Callable[[], dict[str, str]]:
            def make() -> dict[str, str]:  # from tick t's own rows: the same numbers however many ticks were made
                max_bend = float(np.max(theta[t])) if m else 0.0
                rel = _mm(B[t : t + 1, :-1].swapaxes(-1, -2), B[t : t + 1, 1:])[0]  # B_k^T B_{k+1}
                max_twist = 2.0 * float(np.max(np.abs(half_twist(rel)))) if m else 0.0
                length = float(lengths[t])
                return {
                    "sensors_used": used,
                    "sensors_missing": missing,
                    "max_bend_deg": f"{math.degrees(max_bend):.2f}",
                    "max_twist_residual_deg": f"{math.degrees(max_twist):.2f}",
                    "segments_past_L_over_D": str(n),
                    "seconds_since_offset": f"{dt:.1f}",
                    "length_m": "" if math.isnan(length) else f"{length:.4f}",
                }

            return make

        out = []
        plain = "; ".join(plan.messages) if plan.messages else "ok"
        for t, dt in enumerate(since.tolist()):
            level = plan.level
            message = plain
            if n_over[t]:
                level = max(level, DiagnosticLevel.WARN)
                msgs = [*plan.messages, f"{n_over[t]} segment(s) bent past L/D (inner wall fully buckled)"]
                message = "; ".join(msgs)
            out.append(
                DiagnosticStatus(
                    name="hinge_arc_estimator: shape",
                    level=level,
                    message=message,
                    hardware_id="",
                    values=DeferredValues(values(t, dt, n_over[t])),
                )
            )
        return out
