"""Physical simulation (MuJoCo) of the tendon-driven continuum robot with ToF rings, gyroscopes and strain (seed 001).

Seed 001's simulated robot (its Sec. IV), built as the seed did: a chain of short rigid links joined by
spherical (ball) joints, the pseudo-rigid-body approximation of a continuum robot. The joints' stiffness and
damping are the backbone's (bending stiffness ``EI`` over the link length, isotropic, so torsion is as stiff
as bending); three spatial tendons per segment, 120 deg apart, run through a site on every link from the base to
the end of their segment and are pulled by motors (tension only). Gravity, contact and friction are on: the
scene's parts (:mod:`~shape_sensing.sim.tof_scene`) are MuJoCo geoms built from the same description the prior
map is sampled from (the duct wall as the same polygon of ``sections`` facets the mesh has, blades as boxes, the
hub as a cylinder, added objects as boxes, spheres and cylinders), so the robot touches what the sensors see and
the map describes. Scenes S4-S6 remove parts from the scene itself (the map stays S0), S1-S3 add physical ones.

The base is a mocap body: it carries the robot into the duct along the axis by ``PhysicsSpec.insertion``
during an unrecorded lead-in (``insert_time``), holds it at the origin while the robot settles under gravity
(``settle_time``), and stays there while recording: the estimator's base is clamped at the origin, so a base
moving during the recording would need a base-pose prior there. The tendon tensions are the feed-forward of
the kinematic simulator's per-segment curvature commands (:func:`~shape_sensing.sim.tof_continuum.
segment_curvatures`, the same three trajectories and amplitude scaling): the moment ``EI kappa`` a segment
needs less what the distal segments' tendons already apply, shared among its three tendons over a pretension.
Gravity, the tendons' changing moment arms and contact make the real shape differ from that command; the
ground truth is the simulated body.

Sensors, sampled from the simulation state: ToF zones by MuJoCo ray casting (``mj_multiRay``, one ray per zone
along the VL53L5CX zone directions the project uses, robot geoms excluded) at 15 Hz, the three sensors of a ring
a third of a frame apart, Table I noise and status codes; gyroscopes from MuJoCo gyro sensors on the rings
(120 Hz) with a constant bias and white noise; strain (bending angle and curvature) every 3 cm at the joints from
the joint rotation over the link length, the seed's piecewise-constant-curvature reading between link midpoints;
ground truth poses at the base and the rings (30 Hz). The result is the same
:class:`~shape_sensing.sim.tof_continuum.SimRun` the kinematic simulator gives, so the demo writes the same bag.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shape_sensing.estimators.continuum import lie
from shape_sensing.estimators.continuum.tof import zone_directions
from shape_sensing.geometry import FloatArray
from shape_sensing.sim.tof_continuum import (
    RobotSpec,
    SimConfig,
    SimRun,
    _fit_scale,
    gyro_readings,
    ray_lengths,
    segment_curvatures,
    strain_readings,
    zone_readings,
)
from shape_sensing.sim.tof_scene import Box, CappedCylinder, DuctWall, Plane, Primitive, Scene, Sphere

__all__ = [
    "MAX_RADIUS",
    "MujocoRun",
    "PhysicsSpec",
    "RobotModel",
    "available",
    "body_poses_at",
    "build_model",
    "cast_zones",
    "kinematic_reference",
    "scene_geoms_xml",
    "simulate",
    "tendon_tensions",
]

#: geom groups: the robot's and the scene's (the ToF rays see only the scene's)
ROBOT_GROUP = 0
SCENE_GROUP = 2
_WALL_THICKNESS = 0.02  # m, of the duct wall's boxes (outside the bore)
#: bound (m) on the commanded shape's distance from the duct axis (``SimConfig.max_radius``) for MuJoCo runs: the
#: kinematic simulator's 0.18 m leaves the physical robot (sag ~5 cm, the tendons' moment arms, dynamics) on the
#: blades (from r = 0.27 m) in trajectories 1 and 2; 0.11 m keeps all three clear of them (measured: the body
#: axis reaches at most 0.21 m from the duct axis, trajectory 1, the rings' 36 mm radius short of the blades)
MAX_RADIUS = 0.11


def available() -> bool:
    """Whether MuJoCo can be imported (``pip install 'shape_sensing[sim]'``)."""
    try:
        import mujoco  # noqa: F401
    except ImportError:
        return False
    return True


def _mujoco() -> Any:
    try:
        import mujoco
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError(
            "the MuJoCo simulator needs the mujoco package: pip install 'mujoco>=4.0,<5' (the 'sim' extra), "
            "or use the kinematic simulator (--sim kinematic)"
        ) from e
    return mujoco


@dataclass(frozen=True)
class PhysicsSpec:
    """Physical parameters of the simulated robot and of the run's lead-in.

    The defaults give a light robot (0.08 kg/m plus 20 g per ring) with a backbone of ``EI`` = 20 N m^2, which
    sags about 5 cm at the tip of its 1.5 m held horizontally (a cantilever's ``w L^4 / 8 EI`` plus the rings'
    point loads), and tendons 18 mm off the axis.
    """

    link_length: float = 0.03
    link_radius: float = 0.02
    ring_geom_radius: float = 0.036
    ring_half_width: float = 0.008
    linear_density: float = 0.08  # kg/m of the backbone
    ring_mass: float = 0.02  # kg per ring (three ToF boards and a gyro)
    bending_stiffness: float = 20.0  # EI, N m^2
    joint_damping: float = 20.0  # N m s/rad per joint (the first bending mode, ~3.5 Hz, about 30 % damped)
    armature: float = 2e-5  # kg m^2 per joint axis (rotor-like inertia that keeps the stiff chain stable)
    tendon_radius: float = 0.018  # m
    pretension: float = 10.0  # N, least tension in a tendon
    max_tension: float = 3000.0  # N
    friction: float = 0.5  # sliding friction robot-scene
    #: MuJoCo's contact softness (solref time constant, s, and solimp): stiffer than MuJoCo's default 0.02 s so
    #: that the robot pushed hard against an 8 mm blade stays on its face (at least 2 timesteps)
    contact_timeconst: float = 0.004
    contact_solimp: tuple[float, float, float] = (0.95, 0.99, 0.001)
    gravity: tuple[float, float, float] = (0.0, -9.81, 0.0)  # the duct's axis (z) horizontal
    timestep: float = 1.0 / 720.0  # s; every sensor rate (and 3x the ToF rate) must divide 1 / timestep
    insertion: float = 0.3  # m the base is advanced along the axis during the lead-in
    insert_time: float = 1.0  # s
    settle_time: float = 1.0  # s at rest at the origin before recording

    def validate(self, robot: RobotSpec) -> None:
        """Raise ValueError naming a bad value."""
        for name in ("link_length", "link_radius", "linear_density", "bending_stiffness", "timestep", "tendon_radius"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v > 0):
                raise ValueError(f"physics {name} must be a positive number, got {v!r}")
        for name in ("ring_mass", "joint_damping", "armature", "pretension", "insertion", "insert_time", "settle_time"):
            v = getattr(self, name)
            if not (np.isfinite(v) and v >= 0):
                raise ValueError(f"physics {name} must be a non-negative number, got {v!r}")
        n = robot.length / self.link_length
        if abs(n - round(n)) > 1e-6 or round(n) < 2:
            raise ValueError(
                f"physics link_length {self.link_length} m must divide the robot's length {robot.length} m "
                "into at least 2 links"
            )
        if self.tendon_radius >= self.link_radius:
            raise ValueError(
                f"physics tendon_radius {self.tendon_radius} m must be inside link_radius {self.link_radius} m"
            )


def _xyz(v: Any) -> str:
    return " ".join(f"{float(x):.9g}" for x in np.asarray(v, dtype=np.float64).ravel())


def _geom(name: str, kind: str, pos: Any, size: Any, R: FloatArray | None = None) -> str:
    orient = "" if R is None else f' xyaxes="{_xyz(R[:, 0])} {_xyz(R[:, 1])}"'
    return f'<geom name="{name}" type="{kind}" pos="{_xyz(pos)}" size="{_xyz(size)}"{orient} class="scene"/>'


def _part_geoms(idx: int, p: Primitive) -> list[str]:
    """MuJoCo geoms of one scene part (named ``p<idx>_<k>``), the same surfaces as ``p.intersect``/``p.mesh``."""
    name = f"p{idx}"
    if isinstance(p, DuctWall):
        # the mesh's polygon (trimesh puts vertices at 2 pi k / sections): a box behind every facet, its inner face
        # on the facet, widened past the vertices (outside the bore) so that neighbours close the wall
        n = p.sections
        half = np.pi / n
        out = []
        for k in range(n):
            a = 2 * np.pi * (k + 0.5) / n
            radial = np.array([np.cos(a), np.sin(a), 0.0])
            R = np.column_stack([radial, [-np.sin(a), np.cos(a), 0.0], [0.0, 0.0, 1.0]])
            c = (p.radius * np.cos(half) + 0.5 * _WALL_THICKNESS) * radial
            c[2] = 0.5 * (p.z0 + p.z1)
            size = (0.5 * _WALL_THICKNESS, p.radius * np.sin(half) + _WALL_THICKNESS, 0.5 * (p.z1 - p.z0))
            out.append(_geom(f"{name}_{k}", "box", c, size, R))
        return out
    if isinstance(p, CappedCylinder):
        return [_geom(f"{name}_0", "cylinder", (0, 0, 0.5 * (p.z0 + p.z1)), (p.radius, 0.5 * (p.z1 - p.z0)))]
    if isinstance(p, Box):
        R = np.asarray(p.pose)[:3, :3]
        return [_geom(f"{name}_0", "box", np.asarray(p.pose)[:3, 3], 0.5 * np.asarray(p.extents), R)]
    if isinstance(p, Sphere):
        return [_geom(f"{name}_0", "sphere", p.center, (p.radius,))]
    if isinstance(p, Plane):
        R = np.asarray(p.pose)[:3, :3]
        return [_geom(f"{name}_0", "box", np.asarray(p.pose)[:3, 3], (0.5 * p.size[0], 0.5 * p.size[1], 1e-4), R)]
    raise TypeError(f"scene part {p.name!r}: no MuJoCo geometry for a {type(p).__name__}")


def scene_geoms_xml(scene: Scene) -> str:
    """The ``<geom>`` elements of every part of ``scene`` (added objects too: they are physical)."""
    return "\n".join(g for i, p in enumerate(scene.parts) for g in _part_geoms(i, p))


@dataclass
class RobotModel:
    """A compiled MuJoCo model of robot and scene, with the indices the simulation reads."""

    model: Any
    robot: RobotSpec
    phys: PhysicsSpec
    xml: str
    link_start: FloatArray  # (K + 1,) arc length where each body starts (base first)
    link_len: FloatArray  # (K + 1,)
    body_ids: NDArray[np.int64]  # (K + 1,) MuJoCo body id of each link body (base first)
    joint_s: FloatArray  # (K,) arc length of each ball joint
    joint_qpos: NDArray[np.int64]  # (K,) qpos address of each ball joint's quaternion
    ring_sites: NDArray[np.int64]  # site id per ring
    gyro_adr: NDArray[np.int64]  # sensordata address per ring's gyro
    tendon_phi: FloatArray  # (segments, 3) angle of each tendon about the backbone
    geom_part: NDArray[np.int64]  # (ngeom,) scene part of each geom (-1: the robot)
    robot_geoms: NDArray[np.int64]

    def link_at(self, s: float) -> tuple[int, float]:
        """Index of the link body holding arc length ``s`` and the offset along it (the distal body at a joint)."""
        i = int(np.searchsorted(self.link_start, s + 1e-9, side="right") - 1)
        i = min(max(i, 0), self.link_start.size - 1)
        return i, float(s - self.link_start[i])


def build_model(scene: Scene, robot: RobotSpec | None = None, phys: PhysicsSpec | None = None) -> RobotModel:
    """The MJCF of ``scene`` and the robot (built programmatically), compiled."""
    mj = _mujoco()
    robot = robot or RobotSpec()
    phys = phys or PhysicsSpec()
    phys.validate(robot)
    L, dl = robot.length, phys.link_length
    K = round(L / dl)
    joint_s = (dl / 2 + dl * np.arange(K)).astype(np.float64)  # last joint at L - dl/2
    starts = np.concatenate([[0.0], joint_s])
    lens = np.diff(np.concatenate([starts, [L]]))
    nseg = robot.segments
    seg_end = L * np.arange(1, nseg + 1) / nseg
    phi = np.array([[2 * np.pi * i / 3 + j * 2 * np.pi / 9 for i in range(3)] for j in range(nseg)], dtype=np.float64)
    rings = np.asarray(robot.ring_s, dtype=np.float64)
    stiff = phys.bending_stiffness / dl
    fr = f'friction="{phys.friction:g} 0.005 0.0001" solref="{phys.contact_timeconst:g} 1"'
    fr += f' solimp="{_xyz(phys.contact_solimp)}"'

    def body_inner(i: int) -> str:
        a, ln = starts[i], lens[i]
        parts = [
            f'<geom name="link{i}" type="capsule" fromto="0 0 0 0 0 {ln:.9g}" size="{phys.link_radius:g}" '
            f'mass="{phys.linear_density * ln:.9g}" class="robot"/>'
        ]
        for k, s in enumerate(rings):
            off = s - a
            if -1e-9 <= off <= ln + 1e-9 and (off < ln - 1e-9 or i == K):
                parts.append(f'<site name="ring{k}" pos="0 0 {off:.9g}"/>')
                parts.append(
                    f'<geom name="ringgeom{k}" type="cylinder" pos="0 0 {off:.9g}" class="robot" '
                    f'size="{phys.ring_geom_radius:g} {phys.ring_half_width:g}" mass="{phys.ring_mass:g}"/>'
                )
        z = 0.0 if i == 0 else 0.5 * ln
        for j in range(nseg):
            if i == 0 or a + 0.5 * ln <= seg_end[j] + 1e-9:
                for t in range(3):
                    c, s_ = np.cos(phi[j, t]), np.sin(phi[j, t])
                    r = phys.tendon_radius
                    parts.append(f'<site name="t{j}_{t}_{i}" pos="{r * c:.9g} {r * s_:.9g} {z:.9g}" size="0.002"/>')
        return "\n".join(parts)

    # nested bodies, base (mocap) first
    xml_bodies = ""
    for i in range(K, 0, -1):
        joint = (
            f'<joint name="j{i}" type="ball" stiffness="{stiff:.9g}" damping="{phys.joint_damping:g}" '
            f'armature="{phys.armature:g}"/>'
        )
        xml_bodies = f'<body name="b{i}" pos="0 0 {lens[i - 1]:.9g}">{joint}\n{body_inner(i)}\n{xml_bodies}</body>'
    base = f'<body name="b0" mocap="true" pos="0 0 {-phys.insertion:.9g}">\n{body_inner(0)}\n{xml_bodies}</body>'
    tendons, motors = [], []
    for j in range(nseg):
        for t in range(3):
            sites = [
                f'<site site="t{j}_{t}_{i}"/>'
                for i in range(K + 1)
                if i == 0 or starts[i] + 0.5 * lens[i] <= seg_end[j] + 1e-9
            ]
            tendons.append(f'<spatial name="tendon{j}_{t}" width="0.001">{"".join(sites)}</spatial>')
            motors.append(f'<motor name="motor{j}_{t}" tendon="tendon{j}_{t}" ctrlrange="{-phys.max_tension:g} 0"/>')
    gyros = "".join(f'<gyro name="gyro{k}" site="ring{k}"/>' for k in range(rings.size))
    xml = f"""<mujoco model="tof_continuum">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="{phys.timestep:.12g}" gravity="{_xyz(phys.gravity)}" integrator="implicitfast"/>
  <size memory="64M"/>
  <default>
    <default class="robot"><geom contype="1" conaffinity="2" group="{ROBOT_GROUP}" {fr}/></default>
    <default class="scene"><geom contype="2" conaffinity="1" group="{SCENE_GROUP}" {fr}/></default>
  </default>
  <worldbody>
{scene_geoms_xml(scene)}
{base}
  </worldbody>
  <tendon>{"".join(tendons)}</tendon>
  <actuator>{"".join(motors)}</actuator>
  <sensor>{gyros}</sensor>
</mujoco>"""
    m = mj.MjModel.from_xml_string(xml)
    body_ids = np.array([mj.mj_name2id(m, mj.mjtObj.mjOBJ_BODY, f"b{i}") for i in range(K + 1)])
    joint_qpos = np.array([m.jnt_qposadr[mj.mj_name2id(m, mj.mjtObj.mjOBJ_JOINT, f"j{i}")] for i in range(1, K + 1)])
    ring_sites = np.array([mj.mj_name2id(m, mj.mjtObj.mjOBJ_SITE, f"ring{k}") for k in range(rings.size)])
    if np.any(ring_sites < 0):
        raise ValueError(f"rings at {robot.ring_s} m do not all lie on the robot of {L} m")
    gyro_adr = np.array([m.sensor_adr[mj.mj_name2id(m, mj.mjtObj.mjOBJ_SENSOR, f"gyro{k}")] for k in range(rings.size)])
    geom_part = np.full(m.ngeom, -1, dtype=np.int64)
    for g in range(m.ngeom):
        name = mj.mj_id2name(m, mj.mjtObj.mjOBJ_GEOM, g) or ""
        if name.startswith("p") and "_" in name:
            geom_part[g] = int(name[1:].split("_")[0])
    return RobotModel(
        m, robot, phys, xml, starts, lens, body_ids, joint_s, joint_qpos, ring_sites, gyro_adr, phi, geom_part,
        np.flatnonzero(geom_part < 0),
    )  # fmt: skip


def tendon_tensions(kappa: FloatArray, rm: RobotModel) -> FloatArray:
    """``(segments, 3)`` tendon tensions (N, >= the pretension) for commanded body curvatures ``(segments, 2)``.

    A tendon at angle ``phi`` and radius ``r`` pulling with tension ``T`` bends every joint it passes with the
    moment ``T r (-sin phi, cos phi)`` (about the link's x, y); segment ``j`` needs ``EI kappa_j`` and the tendons
    of the segments beyond it already give theirs, so its own three carry the difference, shared by the
    least-norm split over a common pretension.
    """
    phys = rm.phys
    tau = phys.bending_stiffness * np.asarray(kappa, dtype=np.float64)
    own = tau - np.vstack([tau[1:], np.zeros((1, 2))])
    arm = np.stack([-np.sin(rm.tendon_phi), np.cos(rm.tendon_phi)], axis=-1)  # (segments, 3, 2)
    dT = (2.0 / (3.0 * phys.tendon_radius)) * np.einsum("jtc,jc->jt", arm, own)
    T = dT - dT.min(axis=1, keepdims=True) + phys.pretension
    return np.minimum(T, phys.max_tension)


@dataclass
class MujocoRun(SimRun):
    """A :class:`SimRun` from MuJoCo, with what the physics did."""

    physics: PhysicsSpec | None = None
    #: deepest robot-scene penetration seen while recording (m, >= 0; MuJoCo's soft contacts allow a little)
    max_penetration: float = 0.0
    #: recorded steps with at least one robot-scene contact
    contact_steps: int = 0
    steps: int = 0
    parts_touched: list[str] = field(default_factory=list)


def _pose(xpos: FloatArray, xmat: FloatArray) -> FloatArray:
    T = np.eye(4)
    T[:3, :3] = np.asarray(xmat).reshape(3, 3)
    T[:3, 3] = xpos
    return T


def body_poses_at(rm: RobotModel, data: Any, s: FloatArray) -> FloatArray:
    """``(len(s), 4, 4)`` world poses of the backbone frames at arc lengths ``s`` (link frame, moved along z)."""
    out = np.empty((len(s), 4, 4))
    for k, sk in enumerate(np.asarray(s, dtype=np.float64)):
        i, off = rm.link_at(float(sk))
        b = rm.body_ids[i]
        T = _pose(data.xpos[b], data.xmat[b])
        T[:3, 3] += T[:3, 2] * off
        out[k] = T
    return out


def _smoothstep(x: float) -> float:
    x = min(max(x, 0.0), 1.0)
    return x * x * (3 - 2 * x)


def _steps_per(rate_hz: float, sim_rate: int, what: str) -> int:
    n = sim_rate / rate_hz
    if abs(n - round(n)) > 1e-6 or round(n) < 1:
        raise ValueError(f"{what} {rate_hz} Hz does not divide the simulation rate {sim_rate} Hz (1 / timestep)")
    return round(n)


def simulate(
    scene: Scene,
    robot: RobotSpec | None = None,
    cfg: SimConfig | None = None,
    phys: PhysicsSpec | None = None,
    progress: Callable[[float, float], None] | None = None,
) -> MujocoRun:
    """Run the robot through ``scene`` in MuJoCo: ToF frames, gyroscopes, strain and ground truth.

    ``progress(done, total)`` is called with simulated seconds (lead-in included) now and then.
    """
    mj = _mujoco()
    robot = robot or RobotSpec()
    cfg = cfg or SimConfig()
    phys = phys or PhysicsSpec()
    if cfg.duration <= cfg.still:
        raise ValueError(f"duration {cfg.duration} s must exceed the still period {cfg.still} s")
    rm = build_model(scene, robot, phys)
    m = rm.model
    d = mj.MjData(m)
    rng = np.random.default_rng(cfg.seed)
    scale = _fit_scale(cfg, robot)
    sim_rate = round(1.0 / phys.timestep)
    if abs(sim_rate * phys.timestep - 1.0) > 1e-9:
        raise ValueError(f"physics timestep {phys.timestep} s must be 1 / an integer")
    n_tof = _steps_per(cfg.tof_rate, sim_rate, "ToF rate")
    n_tof3 = _steps_per(3 * cfg.tof_rate, sim_rate, "three times the ToF rate")
    n_gyro = _steps_per(cfg.gyro_rate, sim_rate, "gyro rate")
    n_strain = _steps_per(cfg.strain_rate, sim_rate, "strain rate")
    n_truth = _steps_per(cfg.truth_rate, sim_rate, "truth rate")
    lead = round((phys.insert_time + phys.settle_time) * sim_rate)
    n_run = round(cfg.duration * sim_rate)
    mounts = robot.mounts()
    rings = np.asarray(robot.ring_s, dtype=np.float64)
    ring_of = np.array([int(np.argmin(np.abs(rings - mt.s))) for mt in mounts])
    u_loc = [zone_directions(mt.zones_per_side, mt.fov) for mt in mounts]
    strain_s = robot.strain_s()
    strain_j = np.array([int(np.argmin(np.abs(rm.joint_s - s))) for s in strain_s])
    if np.any(np.abs(rm.joint_s[strain_j] - strain_s) > 1e-6):
        raise ValueError(
            f"strain sites every {robot.strain_spacing} m from {strain_s[0]:.4g} m must fall on joints "
            f"(every {phys.link_length} m from {phys.link_length / 2:.4g} m)"
        )
    truth_s = np.concatenate([[0.0], rings])

    tof_t: list[float] = []
    tof_mount: list[int] = []
    tof_lam: list[FloatArray] = []
    tof_hit: list[NDArray[np.bool_]] = []
    tof_part: list[NDArray[np.int64]] = []
    gyro_t: list[float] = []
    gyro_w: list[FloatArray] = []
    strain_t: list[float] = []
    strain_k: list[FloatArray] = []
    truth_t: list[float] = []
    truth_T: list[FloatArray] = []
    max_pen = 0.0
    contact_steps = 0
    touched: set[int] = set()
    robot_geom = np.zeros(m.ngeom, dtype=bool)
    robot_geom[rm.robot_geoms] = True

    # tendon commands of every step, from the kinematic simulator's curvature trajectories
    t_all = np.maximum(np.arange(-lead, n_run) / sim_rate, 0.0)
    k_all = segment_curvatures(t_all, cfg.trajectory, robot.segments, cfg.still, scale)
    for n in range(-lead, n_run):
        t = n / sim_rate
        advanced = _smoothstep((t + lead / sim_rate) / phys.insert_time) if phys.insert_time else 1.0
        zb = -phys.insertion * (1.0 - advanced)
        d.mocap_pos[0] = (0.0, 0.0, zb)
        mj.mj_step1(m, d)
        if n >= 0:
            T_base_inv = np.eye(4)
            T_base_inv[:3, 3] = -d.mocap_pos[0]
            if n % n_tof3 == 0:
                slot = (n % n_tof) // n_tof3
                for mi, mt in enumerate(mounts):
                    if mi % 3 != slot:
                        continue
                    site = rm.ring_sites[ring_of[mi]]
                    Ts = _pose(d.site_xpos[site], d.site_xmat[site]) @ mt.T_ring_sensor
                    u = u_loc[mi] @ Ts[:3, :3].T
                    lam, part = cast_zones(rm, d, Ts[:3, 3], u, 2.0 * mt.max_range)
                    hit = (part >= 0) & (lam * np.linalg.norm(u, axis=1) <= mt.max_range)
                    tof_t.append(t)
                    tof_mount.append(mi)
                    tof_lam.append(lam)
                    tof_hit.append(hit)
                    tof_part.append(np.where(hit, part, -1))
            if n % n_gyro == 0:
                gyro_t.append(t)
                gyro_w.append(np.stack([d.sensordata[a : a + 3] for a in rm.gyro_adr]))
            if n % n_strain == 0:
                q = d.qpos[rm.joint_qpos[strain_j][:, None] + np.arange(4)]  # (w, x, y, z)
                rv = _quat_rotvec(q)
                strain_t.append(t)
                strain_k.append(rv[:, :2] / phys.link_length)
            if n % n_truth == 0:
                truth_t.append(t)
                truth_T.append(T_base_inv @ body_poses_at(rm, d, truth_s))
            pen, touch = _contacts(d, robot_geom, rm.geom_part)
            if touch:
                contact_steps += 1
                touched |= touch
                max_pen = max(max_pen, pen)
        d.ctrl[:] = -tendon_tensions(k_all[n + lead], rm).ravel()
        mj.mj_step2(m, d)
        if progress is not None and (n + lead) % (sim_rate // 2) == 0:
            progress((n + lead) / sim_rate, (n_run + lead) / sim_rate)
    if not np.all(np.isfinite(d.qpos)):
        raise RuntimeError("the MuJoCo simulation diverged (non-finite state): lower the timestep or stiffness")

    ft = np.asarray(tof_t)
    order = np.argsort(ft, kind="stable")
    lam_all = np.stack(tof_lam)[order]
    zone_u = np.stack([u_loc[mi] for mi in np.asarray(tof_mount, dtype=np.int64)[order]])
    ray = ray_lengths(zone_u, cfg.range_convention)
    noisy, status = zone_readings(lam_all, np.stack(tof_hit)[order], rng, cfg.invalid_fraction, ray)
    gt = np.asarray(gyro_t)
    w, bias = gyro_readings(np.concatenate(gyro_w), rings, rng, cfg)
    st = np.asarray(strain_t)
    theta, kappa = strain_readings(np.stack(strain_k), rng, cfg)
    return MujocoRun(
        robot,
        cfg,
        scene,
        mounts,
        ft[order],
        np.asarray(tof_mount, dtype=np.int64)[order],
        noisy,
        status,
        np.stack(tof_part)[order],
        np.repeat(gt, rings.size),
        np.tile(rings, gt.size),
        w,
        bias,
        np.repeat(st, strain_s.size),
        np.tile(strain_s, st.size),
        theta.reshape(-1),
        kappa.reshape(-1),
        np.asarray(truth_t),
        truth_s,
        np.stack(truth_T),
        [p.name for p in scene.parts],
        physics=phys,
        max_penetration=max_pen,
        contact_steps=contact_steps,
        steps=n_run + lead,
        parts_touched=sorted(scene.parts[i].name for i in touched),
    )


def cast_zones(
    rm: RobotModel, data: Any, origin: FloatArray, u: FloatArray, cutoff: float = 10.0
) -> tuple[FloatArray, NDArray[np.int64]]:
    """MuJoCo ray casts ``origin + lam u`` (``u`` not normalised, ``(Z, 3)``) against the scene's geoms only:
    ``lam`` (inf where nothing is hit within ``cutoff``) and the scene part hit (-1 none), as ``Scene.cast``."""
    mj = _mujoco()
    nz = u.shape[0]
    gid = np.zeros(nz, dtype=np.int32)
    dist = np.zeros(nz)
    group = np.zeros(6, dtype=np.uint8)
    group[SCENE_GROUP] = 1
    o = np.ascontiguousarray(origin, dtype=np.float64)
    vec = np.ascontiguousarray(np.asarray(u, dtype=np.float64).ravel())
    if "normal" in (mj.mj_multiRay.__doc__ or ""):
        mj.mj_multiRay(rm.model, data, o, vec, group, 1, -1, gid, dist, None, nz, cutoff)
    else:  # pragma: no cover - mujoco < 3.3 has no normals argument
        mj.mj_multiRay(rm.model, data, o, vec, group, 1, -1, gid, dist, nz, cutoff)
    hit = (gid >= 0) & (dist >= 0)
    return np.where(hit, dist, np.inf), np.where(hit, rm.geom_part[np.maximum(gid, 0)], -1).astype(np.int64)


def _quat_rotvec(q: FloatArray) -> FloatArray:
    """Rotation vectors of unit quaternions ``(..., 4)`` as ``(w, x, y, z)`` (MuJoCo's order)."""
    q = np.asarray(q, dtype=np.float64)
    q = q * np.where(q[..., :1] < 0, -1.0, 1.0)  # the short way round
    v = q[..., 1:]
    sn = np.linalg.norm(v, axis=-1)
    ang = 2.0 * np.arctan2(sn, q[..., 0])
    with np.errstate(invalid="ignore", divide="ignore"):
        f = np.where(sn > 1e-12, ang / sn, 2.0)
    return v * f[..., None]


def _contacts(d: Any, robot_geom: NDArray[np.bool_], geom_part: NDArray[np.int64]) -> tuple[float, set[int]]:
    """Deepest robot-scene penetration (m, >= 0) and the scene parts in contact now."""
    pen = 0.0
    parts: set[int] = set()
    for i in range(d.ncon):
        c = d.contact[i]
        g1, g2 = int(c.geom1), int(c.geom2)
        if robot_geom[g1] == robot_geom[g2]:
            continue
        pen = max(pen, -float(c.dist))
        parts.add(int(geom_part[g2] if robot_geom[g1] else geom_part[g1]))
    return pen, parts


def kinematic_reference(rm: RobotModel, data: Any) -> FloatArray:
    """``(K + 1, 4, 4)`` link poses in the base frame by chaining the joint quaternions (a forward kinematics
    independent of MuJoCo's, for checking the simulator's truth)."""
    T = np.eye(4)
    out = [T.copy()]
    for i in range(1, rm.link_start.size):
        q = data.qpos[rm.joint_qpos[i - 1] : rm.joint_qpos[i - 1] + 4]
        step = np.eye(4)
        step[2, 3] = rm.link_len[i - 1]
        xi = np.zeros((1, 6))
        xi[0, 3:] = _quat_rotvec(q)
        T = T @ step @ lie.exp(xi)[0]
        out.append(T.copy())
    return np.stack(out)
