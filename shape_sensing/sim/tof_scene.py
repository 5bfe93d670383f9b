"""Scenes for the ToF continuum simulation: exact ray casting on primitives, and their meshes for prior maps.

A :class:`Scene` is a list of named primitives (the inside of a duct wall, solid capped cylinders, oriented
boxes, spheres, planes), each able to intersect a batch of rays exactly and to give a ``trimesh`` mesh of the
surfaces a ray can hit. A ray is ``o + lam u`` with ``u`` not normalised: for a ToF zone ``u`` is the zone's
``[tan(ax), tan(ay), 1]`` turned into the world, so ``lam`` is directly the distance along the boresight the
chip reports.

:func:`compressor_scene` builds the demanding scene of the demo: a 0.84 m bore duct (curved wall) with three
stages of eight pitched radial blades (an eight-fold symmetric structure) and a hub nose ahead of the robot;
variants S0-S9 add unmodelled objects (S1-S3), remove modelled parts (S4-S6), or both (S7-S9), as the seed's
Table II does with its compressor scene.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from shape_sensing.geometry import FloatArray

__all__ = [
    "SCENES",
    "Box",
    "CappedCylinder",
    "DuctWall",
    "Plane",
    "Primitive",
    "Scene",
    "Sphere",
    "compressor_scene",
    "scanned_points",
]

_INF = np.inf


@dataclass
class Primitive:
    """Base: a named surface; ``added`` marks an object the prior map does not have."""

    name: str
    added: bool = field(default=False, kw_only=True)

    def intersect(self, o: FloatArray, u: FloatArray) -> FloatArray:  # pragma: no cover - abstract
        raise NotImplementedError

    def mesh(self) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError


def _smallest_positive(a: FloatArray, b: FloatArray) -> FloatArray:
    a = np.where(a > 1e-9, a, _INF)
    b = np.where(b > 1e-9, b, _INF)
    return np.minimum(a, b)


@dataclass
class DuctWall(Primitive):
    """Inside of a cylinder of ``radius`` about z between ``z0`` and ``z1`` (open ends)."""

    radius: float = 0.42
    z0: float = -0.2
    z1: float = 2.2
    sections: int = 128

    def intersect(self, o: FloatArray, u: FloatArray) -> FloatArray:
        a = u[:, 0] ** 2 + u[:, 1] ** 2
        b = 2 * (o[:, 0] * u[:, 0] + o[:, 1] * u[:, 1])
        c = o[:, 0] ** 2 + o[:, 1] ** 2 - self.radius**2
        disc = b * b - 4 * a * c
        ok = (disc >= 0) & (a > 1e-15)
        sq = np.sqrt(np.where(ok, disc, 0.0))
        aa = np.where(ok, a, 1.0)
        t = _smallest_positive((-b - sq) / (2 * aa), (-b + sq) / (2 * aa))
        z = o[:, 2] + t * u[:, 2]
        return np.where(ok & (z >= self.z0) & (z <= self.z1), t, _INF)

    def mesh(self) -> Any:
        import trimesh

        m = trimesh.creation.cylinder(self.radius, self.z1 - self.z0, sections=self.sections)
        m.apply_translation([0, 0, 0.5 * (self.z0 + self.z1)])
        side = np.abs(m.face_normals[:, 2]) < 0.5
        m.update_faces(side)
        m.remove_unreferenced_vertices()
        return m


@dataclass
class CappedCylinder(Primitive):
    """Solid cylinder about z of ``radius`` from ``z0`` to ``z1`` (side and both caps)."""

    radius: float = 0.1
    z0: float = 0.0
    z1: float = 1.0
    sections: int = 64

    def intersect(self, o: FloatArray, u: FloatArray) -> FloatArray:
        side = DuctWall(self.name, radius=self.radius, z0=self.z0, z1=self.z1).intersect(o, u)
        out = side
        for zc in (self.z0, self.z1):
            with np.errstate(divide="ignore", invalid="ignore"):
                t = (zc - o[:, 2]) / u[:, 2]
            p = o + t[:, None] * u
            hit = np.isfinite(t) & (t > 1e-9) & (p[:, 0] ** 2 + p[:, 1] ** 2 <= self.radius**2)
            out = np.minimum(out, np.where(hit, t, _INF))
        return out

    def mesh(self) -> Any:
        import trimesh

        m = trimesh.creation.cylinder(self.radius, self.z1 - self.z0, sections=self.sections)
        m.apply_translation([0, 0, 0.5 * (self.z0 + self.z1)])
        return m


@dataclass
class Box(Primitive):
    """Box of ``extents`` centred at the origin of ``pose`` (4x4)."""

    pose: FloatArray = field(default_factory=lambda: np.eye(4))
    extents: tuple[float, float, float] = (0.1, 0.1, 0.1)

    def intersect(self, o: FloatArray, u: FloatArray) -> FloatArray:
        R, c = self.pose[:3, :3], self.pose[:3, 3]
        ol = (o - c) @ R
        ul = u @ R
        h = 0.5 * np.asarray(self.extents)
        with np.errstate(divide="ignore", invalid="ignore"):
            t1 = (-h - ol) / ul
            t2 = (h - ol) / ul
        t1 = np.where(np.isnan(t1), -_INF, t1)
        t2 = np.where(np.isnan(t2), _INF, t2)
        tmin = np.minimum(t1, t2).max(axis=1)
        tmax = np.maximum(t1, t2).min(axis=1)
        inside_slabs = np.all((np.abs(ol) <= h) | (ul != 0), axis=1)
        hit = (tmax >= tmin) & (tmax > 1e-9) & inside_slabs
        t = np.where(tmin > 1e-9, tmin, tmax)
        return np.where(hit, t, _INF)

    def mesh(self) -> Any:
        import trimesh

        return trimesh.creation.box(extents=self.extents, transform=self.pose)


@dataclass
class Sphere(Primitive):
    """Sphere of ``radius`` at ``center``."""

    center: tuple[float, float, float] = (0.0, 0.0, 0.0)
    radius: float = 0.05

    def intersect(self, o: FloatArray, u: FloatArray) -> FloatArray:
        d = o - np.asarray(self.center)
        a = np.einsum("pi,pi->p", u, u)
        b = 2 * np.einsum("pi,pi->p", u, d)
        c = np.einsum("pi,pi->p", d, d) - self.radius**2
        disc = b * b - 4 * a * c
        ok = disc >= 0
        sq = np.sqrt(np.where(ok, disc, 0.0))
        t = _smallest_positive((-b - sq) / (2 * a), (-b + sq) / (2 * a))
        return np.where(ok, t, _INF)

    def mesh(self) -> Any:
        import trimesh

        m = trimesh.creation.icosphere(subdivisions=3, radius=self.radius)
        m.apply_translation(self.center)
        return m


@dataclass
class Plane(Primitive):
    """Rectangle of ``size`` (u, v) in the plane through ``pose``'s origin with normal ``pose``'s z."""

    pose: FloatArray = field(default_factory=lambda: np.eye(4))
    size: tuple[float, float] = (1.0, 1.0)

    def intersect(self, o: FloatArray, u: FloatArray) -> FloatArray:
        return Box(self.name, pose=self.pose, extents=(self.size[0], self.size[1], 0.0)).intersect(o, u)

    def mesh(self) -> Any:
        import trimesh

        return trimesh.creation.box(extents=(self.size[0], self.size[1], 1e-6), transform=self.pose)


@dataclass
class Scene:
    """Named primitives."""

    name: str
    parts: list[Primitive]

    def cast(self, o: FloatArray, u: FloatArray) -> tuple[FloatArray, NDArray[np.int64]]:
        """Nearest hit parameter ``lam`` (inf if none) and index of the part hit (-1 if none) of rays ``o + lam u``."""
        o = np.asarray(o, dtype=np.float64).reshape(-1, 3)
        u = np.asarray(u, dtype=np.float64).reshape(-1, 3)
        if not self.parts:
            return np.full(o.shape[0], _INF), np.full(o.shape[0], -1, dtype=np.int64)
        ts = np.stack([p.intersect(o, u) for p in self.parts], axis=1)
        idx = np.argmin(ts, axis=1)
        t = ts[np.arange(o.shape[0]), idx]
        return t, np.where(np.isfinite(t), idx, -1).astype(np.int64)

    def mesh(self, *, include_added: bool = True) -> Any:
        """One mesh of every part (of the modelled ones only without ``include_added``)."""
        import trimesh

        return trimesh.util.concatenate([p.mesh() for p in self.parts if include_added or not p.added])

    def added_mask(self) -> NDArray[np.bool_]:
        """Which parts the prior map lacks."""
        return np.array([p.added for p in self.parts], dtype=bool)


def _blade(name: str, angle: float, z: float, r0: float, r1: float, pitch: float) -> Box:
    """A thin radial blade from radius ``r0`` to ``r1`` at azimuth ``angle``, chord 0.12 m, pitched by ``pitch``."""
    ca, sa = np.cos(angle), np.sin(angle)
    radial = np.array([ca, sa, 0.0])
    tang = np.array([-sa, ca, 0.0])
    # chord in the (tangential, axial) plane, turned by the pitch
    chord = np.cos(pitch) * np.array([0.0, 0.0, 1.0]) + np.sin(pitch) * tang
    thick = np.cross(radial, chord)
    T = np.eye(4)
    T[:3, :3] = np.column_stack([radial, chord, thick])
    T[:3, 3] = 0.5 * (r0 + r1) * radial + np.array([0.0, 0.0, z])
    return Box(name, pose=T, extents=(r1 - r0, 0.12, 0.008))


#: Scene variants: which added objects and which removed parts (names) each has.
SCENES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "S0": ((), ()),
    "S1": (("box_wall",), ()),
    "S2": (("sphere_blade",), ()),
    "S3": (("box_wall", "sphere_blade", "bolt"), ()),
    "S4": ((), ("blade_0_0",)),
    "S5": ((), ("blade_1_2", "blade_1_3")),
    "S6": ((), ("blade_2_0", "blade_2_1", "blade_2_4", "blade_2_5")),
    "S7": (("box_wall",), ("blade_0_0",)),
    "S8": (("sphere_blade",), ("blade_1_2", "blade_1_3")),
    "S9": (("box_wall", "sphere_blade", "bolt"), ("blade_2_0", "blade_2_1", "blade_2_4", "blade_2_5")),
}


def compressor_scene(variant: str = "S0", radius: float = 0.42) -> Scene:
    """The duct with three blade stages and a hub nose; ``variant`` one of :data:`SCENES`."""
    if variant not in SCENES:
        raise ValueError(f"scene {variant!r} unknown; expected one of {sorted(SCENES)}")
    added, removed = SCENES[variant]
    parts: list[Primitive] = [DuctWall("casing", radius=radius, z0=-0.2, z1=2.2)]
    for stage, z in enumerate((0.45, 0.95, 1.45)):
        for j in range(8):
            ang = 2 * np.pi * j / 8 + stage * np.pi / 8
            parts.append(_blade(f"blade_{stage}_{j}", ang, z, 0.27, radius, np.deg2rad(25.0 + 10 * stage)))
    parts.append(CappedCylinder("hub", radius=0.14, z0=1.75, z1=2.2))
    parts = [p for p in parts if p.name not in removed]
    extra: dict[str, Primitive] = {}
    th = np.deg2rad(100.0)
    Tb = np.eye(4)
    Tb[:3, :3] = np.array([[np.cos(th), -np.sin(th), 0], [np.sin(th), np.cos(th), 0], [0, 0, 1]])
    Tb[:3, 3] = [(radius - 0.04) * np.cos(th), (radius - 0.04) * np.sin(th), 0.75]
    extra["box_wall"] = Box("box_wall", pose=Tb, extents=(0.08, 0.12, 0.16), added=True)
    a2 = 2 * np.pi * 5 / 8 + np.pi / 8
    extra["sphere_blade"] = Sphere(
        "sphere_blade", center=(0.32 * np.cos(a2 + 0.3), 0.32 * np.sin(a2 + 0.3), 1.15), radius=0.05, added=True
    )
    a3 = np.deg2rad(-40.0)
    extra["bolt"] = CappedCylinder("bolt", radius=0.03, z0=1.62, z1=1.75, added=True)
    extra["bolt_pose"] = Sphere("bolt_head", center=(0.1 * np.cos(a3), 0.1 * np.sin(a3), 1.62), radius=0.03, added=True)
    for name in added:
        parts.append(extra[name])
        if name == "bolt":
            parts.append(extra["bolt_pose"])
    return Scene(variant, parts)


def scanned_points(scene: Scene, spacing: float, noise: float, seed: int = 0) -> FloatArray:
    """A prior map as a scan of ``scene`` gives it (without its added objects): points spread evenly over the
    surfaces, about ``spacing`` apart, each off its surface by Gaussian noise of ``noise`` (m, 1-sigma per axis),
    the error of a structured-light or handheld laser scan. The scanner's own sampling and noise are drawn
    here, from ``seed``; nothing is taken from the estimator's map reader."""
    import logging

    import trimesh

    if not (np.isfinite(spacing) and spacing > 0):
        raise ValueError(f"spacing must be > 0 m, got {spacing!r}")
    if not (np.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise must be >= 0 m, got {noise!r}")
    mesh = scene.mesh(include_added=False)
    # draw more than fit (about 0.7 / spacing^2 per unit area) and thin to ``spacing``; trimesh warns that it thinned
    count = int(min(2_000_000, max(100, 1.6 * float(mesh.area) / spacing**2)))
    tlog = logging.getLogger("trimesh")
    level = tlog.level
    tlog.setLevel(logging.ERROR)
    try:
        pts, _ = trimesh.sample.sample_surface_even(mesh, count, radius=spacing, seed=int(seed))
    finally:
        tlog.setLevel(level)
    pts = np.asarray(pts, dtype=np.float64)
    return pts + noise * np.random.default_rng((int(seed), 3)).standard_normal(pts.shape)
