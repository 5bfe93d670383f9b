"""Prior maps for localisation: point clouds (PLY, PCD) or meshes, with normals, planarity and nearest neighbours.

A :class:`PriorMap` holds points, unit normals and the planarity weight
``alpha = (s2 - s3) / s1`` of each point's neighbourhood (``s_i`` the square
roots of the eigenvalues of the neighbourhood covariance, descending; 1 for a
perfect plane, 0 for a line or an isotropic blob), and a k-d tree
(:class:`scipy.spatial.cKDTree`) for nearest-neighbour queries.

Files:

* PLY (ASCII and binary, points or a mesh) through ``trimesh``; a mesh (a PLY
  with faces, STL, OBJ) is sampled on its surface by Poisson-disk sampling
  (``trimesh.sample.sample_surface_even``: uniform samples thinned so no two are
  closer than the spacing).
* PCD (PCL point-cloud data v0.7: ``ascii``, ``binary`` and
  ``binary_compressed`` with LZF) by the reader here, written to the format's
  specification (fields ``x y z`` required, ``normal_x``.. optional).

Every unusable input raises :class:`~shape_sensing.io.errors.MapError` naming
the file and the cause: unreadable, empty, non-finite coordinates, too few
points to fit a neighbourhood.
"""

from __future__ import annotations

import logging
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.spatial import cKDTree

from shape_sensing.geometry import FloatArray
from shape_sensing.io.errors import MapError

__all__ = [
    "DEFAULT_SPACING",
    "PriorMap",
    "load_map",
    "lzf_decompress",
    "pca_normals",
    "read_pcd",
    "read_ply_points",
    "sample_mesh",
    "write_pcd",
    "write_ply",
]

#: Neighbours used for the PCA of each point (itself included).
DEFAULT_NEIGHBOURS = 16

#: Poisson-disk spacing (m) of the samples of a mesh map. Point-to-plane matching is only as good as the samples
#: near edges and thin parts: on the simulated compressor (8 mm blades whose faces fix the rotation about the duct
#: axis) a 1 cm sample gave MuJoCo Table II S0 0.097 deg and the scenes with blades removed (S6, S9) +26 %
#: rotation, and on the kinematic simulator S6's change swung from -7 to +28 % with the sample drawn; at 5 mm
#: S0 is 0.090 deg and the worst scene +3.2 % (+7.5 % over three samples; both before the torsion prior of
#: :data:`~shape_sensing.estimators.continuum.tof_localise.TORSION_RATE`;
#: ``benchmarks/table2_tof_continuum.py --map-spacing --map-seeds``).
#: Seed 001's scanned maps have 0.1-2 mm resolution.
DEFAULT_SPACING = 0.005

_PCD_TYPES = {
    ("F", 4): "f4",
    ("F", 8): "f8",
    ("I", 1): "i1",
    ("I", 2): "i2",
    ("I", 4): "i4",
    ("I", 8): "i8",
    ("U", 1): "u1",
    ("U", 2): "u2",
    ("U", 4): "u4",
    ("U", 8): "u8",
}


def lzf_decompress(data: bytes, expected: int) -> bytes:
    """Decompress an LZF stream (liblzf's format, as PCL's ``binary_compressed`` uses).

    A control byte ``c < 32`` starts a literal run of ``c + 1`` bytes; otherwise
    ``len = c >> 5`` (7 means a further length byte is added), the back
    reference is ``((c & 31) << 8) + next byte + 1`` bytes behind, and
    ``len + 2`` bytes are copied (overlapping copies repeat a pattern).
    """
    out = bytearray()
    i = 0
    n = len(data)
    while i < n:
        c = data[i]
        i += 1
        if c < 32:
            run = c + 1
            if i + run > n:
                raise MapError("LZF stream truncated inside a literal run")
            out += data[i : i + run]
            i += run
            continue
        length = c >> 5
        if length == 7:
            if i >= n:
                raise MapError("LZF stream truncated in a length byte")
            length += data[i]
            i += 1
        if i >= n:
            raise MapError("LZF stream truncated in a back reference")
        ref = len(out) - ((c & 31) << 8) - data[i] - 1
        i += 1
        if ref < 0:
            raise MapError("LZF back reference before the start of the output")
        for k in range(length + 2):
            out.append(out[ref + k])
    if len(out) != expected:
        raise MapError(f"LZF stream gave {len(out)} bytes, header says {expected}")
    return bytes(out)


@dataclass
class _PcdHeader:
    fields: list[str]
    sizes: list[int]
    types: list[str]
    counts: list[int]
    points: int
    data: str
    header_bytes: int


def _pcd_header(raw: bytes, path: Path) -> _PcdHeader:
    values: dict[str, list[str]] = {}
    pos = 0
    while True:
        end = raw.find(b"\n", pos)
        if end < 0:
            raise MapError(f"{path}: PCD header has no DATA line")
        line = raw[pos:end].decode("ascii", errors="replace").strip()
        pos = end + 1
        if not line or line.startswith("#"):
            continue
        key, *rest = line.split()
        values[key.upper()] = rest
        if key.upper() == "DATA":
            break
    for key in ("FIELDS", "SIZE", "TYPE", "DATA"):
        if key not in values:
            raise MapError(f"{path}: PCD header lacks {key}")
    fields = values["FIELDS"]
    try:
        sizes = [int(v) for v in values["SIZE"]]
        counts = [int(v) for v in values.get("COUNT", ["1"] * len(fields))]
        if "POINTS" in values:
            npts = int(values["POINTS"][0])
        else:
            npts = int(values["WIDTH"][0]) * int(values.get("HEIGHT", ["1"])[0])
    except (ValueError, KeyError, IndexError) as exc:
        raise MapError(f"{path}: PCD header has a bad SIZE/COUNT/POINTS/WIDTH value ({exc})") from exc
    types = [t.upper() for t in values["TYPE"]]
    if not (len(fields) == len(sizes) == len(types) == len(counts)):
        raise MapError(
            f"{path}: PCD header FIELDS ({len(fields)}), SIZE ({len(sizes)}), TYPE ({len(types)}) and "
            f"COUNT ({len(counts)}) differ in length"
        )
    for t, s in zip(types, sizes, strict=True):
        if (t, s) not in _PCD_TYPES:
            raise MapError(f"{path}: PCD field type {t} of size {s} is not in the PCD v0.7 specification")
    data = values["DATA"][0].lower() if values["DATA"] else ""
    if data not in ("ascii", "binary", "binary_compressed"):
        raise MapError(f"{path}: PCD DATA {data!r} unknown; expected ascii, binary or binary_compressed")
    return _PcdHeader(fields, sizes, types, counts, npts, data, pos)


def read_pcd(path: str | os.PathLike[str]) -> dict[str, FloatArray]:
    """Read a PCD file: ``{field: (P,) or (P, count) array}`` (every field, as float64)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise MapError(f"cannot read map {path}: {exc.strerror or exc}") from exc
    h = _pcd_header(raw, path)
    dt = np.dtype(
        [
            (f"f{i}", "<" + _PCD_TYPES[(t, s)], (c,))
            for i, (t, s, c) in enumerate(zip(h.types, h.sizes, h.counts, strict=True))
        ]
    )
    body = raw[h.header_bytes :]
    if h.data == "ascii":
        rows = [ln.split() for ln in body.decode("ascii", errors="replace").splitlines() if ln.strip()]
        width = sum(h.counts)
        if len(rows) < h.points or any(len(r) != width for r in rows[: h.points]):
            raise MapError(f"{path}: PCD ascii data has {len(rows)} rows for {h.points} points of {width} values")
        try:
            flat = np.array([[float(v) for v in r] for r in rows[: h.points]], dtype=np.float64)
            flat = flat.reshape(h.points, width)
        except ValueError as exc:
            raise MapError(f"{path}: PCD ascii data holds a value that is not a number ({exc})") from exc
        out: dict[str, FloatArray] = {}
        col = 0
        for name, c in zip(h.fields, h.counts, strict=True):
            out[name] = flat[:, col] if c == 1 else flat[:, col : col + c]
            col += c
        return out
    if h.data == "binary":
        need = dt.itemsize * h.points
        if len(body) < need:
            raise MapError(f"{path}: PCD binary data has {len(body)} bytes, {h.points} points need {need}")
        arr = np.frombuffer(body[:need], dtype=dt, count=h.points)
        return {
            name: np.asarray(arr[f"f{i}"], dtype=np.float64).reshape(h.points, -1).squeeze(axis=1)
            if h.counts[i] == 1
            else np.asarray(arr[f"f{i}"], dtype=np.float64)
            for i, name in enumerate(h.fields)
        }
    # binary_compressed: uint32 compressed size, uint32 uncompressed size, LZF data laid out field by field
    if len(body) < 8:
        raise MapError(f"{path}: PCD binary_compressed data lacks its size words")
    csize, usize = struct.unpack("<II", body[:8])
    if len(body) < 8 + csize:
        raise MapError(f"{path}: PCD binary_compressed data has {len(body) - 8} bytes, header says {csize}")
    plain = lzf_decompress(body[8 : 8 + csize], usize)
    out = {}
    off = 0
    for name, t, s, c in zip(h.fields, h.types, h.sizes, h.counts, strict=True):
        n = s * c * h.points
        if off + n > len(plain):
            raise MapError(f"{path}: PCD binary_compressed data too short for field {name}")
        a = np.frombuffer(plain[off : off + n], dtype="<" + _PCD_TYPES[(t, s)]).astype(np.float64)
        out[name] = a if c == 1 else a.reshape(h.points, c)
        off += n
    return out


def write_pcd(
    path: str | os.PathLike[str], points: FloatArray, *, normals: FloatArray | None = None, data: str = "binary"
) -> None:
    """Write ``x y z`` (and ``normal_x normal_y normal_z``) as float32 PCD v0.7, ``ascii`` or ``binary``."""
    pts = np.asarray(points, dtype=np.float32).reshape(-1, 3)
    cols = [pts]
    fields = ["x", "y", "z"]
    if normals is not None:
        cols.append(np.asarray(normals, dtype=np.float32).reshape(-1, 3))
        fields += ["normal_x", "normal_y", "normal_z"]
    table = np.ascontiguousarray(np.concatenate(cols, axis=1))
    n = len(fields)
    header = (
        "# .PCD v0.7 - Point Cloud Data file format\nVERSION 0.7\n"
        f"FIELDS {' '.join(fields)}\nSIZE {' '.join(['4'] * n)}\nTYPE {' '.join(['F'] * n)}\n"
        f"COUNT {' '.join(['1'] * n)}\nWIDTH {pts.shape[0]}\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\n"
        f"POINTS {pts.shape[0]}\nDATA {data}\n"
    )
    if data == "ascii":
        body = "".join(" ".join(repr(float(v)) for v in row) + "\n" for row in table).encode()
    elif data == "binary":
        body = table.astype("<f4").tobytes()
    else:
        raise MapError(f"PCD DATA {data!r} not written here; expected ascii or binary")
    Path(path).write_bytes(header.encode("ascii") + body)


def write_ply(
    path: str | os.PathLike[str],
    points: FloatArray,
    *,
    normals: FloatArray | None = None,
    scalars: dict[str, FloatArray] | None = None,
    colors: NDArray[np.uint8] | None = None,
) -> None:
    """Write a binary little-endian PLY of vertices: ``x y z`` float, optional ``nx ny nz``, float scalars, ``rgb``."""
    pts = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    m = pts.shape[0]
    descr: list[tuple[str, str]] = [("x", "<f4"), ("y", "<f4"), ("z", "<f4")]
    if normals is not None:
        descr += [("nx", "<f4"), ("ny", "<f4"), ("nz", "<f4")]
    for name in scalars or {}:
        descr.append((name, "<f4"))
    if colors is not None:
        descr += [("red", "u1"), ("green", "u1"), ("blue", "u1")]
    arr = np.zeros(m, dtype=descr)
    arr["x"], arr["y"], arr["z"] = pts.T
    if normals is not None:
        nrm = np.asarray(normals, dtype=np.float64).reshape(-1, 3)
        arr["nx"], arr["ny"], arr["nz"] = nrm.T
    for name, v in (scalars or {}).items():
        arr[name] = np.asarray(v, dtype=np.float64).reshape(m)
    if colors is not None:
        c = np.asarray(colors, dtype=np.uint8).reshape(m, 3)
        arr["red"], arr["green"], arr["blue"] = c.T
    kinds = {"<f4": "float", "u1": "uchar"}
    props = "".join(f"property {kinds[t]} {name}\n" for name, t in descr)
    header = f"ply\nformat binary_little_endian 1.0\nelement vertex {m}\n{props}end_header\n"
    Path(path).write_bytes(header.encode("ascii") + arr.tobytes())


def _trimesh() -> Any:
    try:
        import trimesh
    except ImportError as exc:  # pragma: no cover - trimesh is a runtime requirement
        raise MapError("reading PLY/STL/OBJ maps needs the 'trimesh' package") from exc
    return trimesh


def read_ply_points(path: str | os.PathLike[str], spacing: float = DEFAULT_SPACING, seed: int = 0) -> FloatArray:
    """Points of a PLY (or STL/OBJ) file: its vertices if it has no faces, else Poisson-disk samples of its surface."""
    path = Path(path)
    if not path.exists():
        raise MapError(f"map {path} does not exist")
    trimesh = _trimesh()
    try:
        geom = trimesh.load(path, process=False)
    except Exception as exc:  # trimesh raises many kinds on a malformed file
        raise MapError(f"cannot read map {path}: {exc}") from exc
    if isinstance(geom, trimesh.Scene):
        geom = geom.to_geometry() if hasattr(geom, "to_geometry") else geom.dump(concatenate=True)
    if isinstance(geom, trimesh.Trimesh) and len(geom.faces):
        return sample_mesh(geom, spacing, seed)
    verts = np.asarray(getattr(geom, "vertices", np.zeros((0, 3))), dtype=np.float64)
    return verts.reshape(-1, 3)


def sample_mesh(mesh: Any, spacing: float, seed: int = 0) -> FloatArray:
    """Poisson-disk samples (no two closer than ``spacing``) covering a ``trimesh.Trimesh`` surface."""
    trimesh = _trimesh()
    if not spacing > 0:
        raise MapError(f"map sampling spacing must be > 0 m, got {spacing}")
    area = float(mesh.area)
    if not area > 0:
        raise MapError("mesh has no surface area to sample")
    # a maximal Poisson-disk set of radius r covers about 0.7 / r^2 points per unit area; draw twice that
    count = int(min(2_000_000, max(100, 1.6 * area / spacing**2)))
    # trimesh warns whenever thinning leaves fewer points than drawn, which is the point of drawing more
    tlog = logging.getLogger("trimesh")
    level = tlog.level
    tlog.setLevel(logging.ERROR)
    try:
        pts, _ = trimesh.sample.sample_surface_even(mesh, count, radius=spacing, seed=seed)
    finally:
        tlog.setLevel(level)
    return np.asarray(pts, dtype=np.float64)


def pca_normals(points: FloatArray, tree: cKDTree, k: int = DEFAULT_NEIGHBOURS) -> tuple[FloatArray, FloatArray]:
    """Unit normals (smallest principal axis) and planarity ``(s2 - s3) / s1`` of each point's ``k`` neighbours."""
    m = points.shape[0]
    k = min(k, m)
    _, idx = tree.query(points, k=k)
    idx = np.asarray(idx).reshape(m, k)
    nb = points[idx]
    c = nb - nb.mean(axis=1, keepdims=True)
    cov = np.einsum("mki,mkj->mij", c, c) / k
    evals, evecs = np.linalg.eigh(cov)  # ascending
    sv = np.sqrt(np.clip(evals, 0.0, None))
    s1, s2, s3 = sv[:, 2], sv[:, 1], sv[:, 0]
    alpha = np.where(s1 > 0, (s2 - s3) / np.where(s1 > 0, s1, 1.0), 0.0)
    return np.asarray(evecs[:, :, 0]), np.asarray(alpha)


class PriorMap:
    """A point-cloud map with normals, planarity and a k-d tree.

    Args:
        points: ``(M, 3)`` finite coordinates (m), at least ``k`` of them.
        k: neighbours of the PCA.
        point_sigma: 1-sigma position uncertainty of a map point (m), the map's ``Sigma_nn`` of the anomaly test.
        source: where the points came from (for messages).
    """

    def __init__(
        self, points: FloatArray, *, k: int = DEFAULT_NEIGHBOURS, point_sigma: float = 0.005, source: str = "map"
    ) -> None:
        pts = np.asarray(points, dtype=np.float64)
        if pts.ndim != 2 or pts.shape[1] != 3:
            raise MapError(f"{source}: points must be (M, 3), got shape {pts.shape}")
        if pts.shape[0] == 0:
            raise MapError(f"{source}: the map is empty (no points)")
        bad = ~np.all(np.isfinite(pts), axis=1)
        if bad.any():
            raise MapError(f"{source}: {int(bad.sum())} of {pts.shape[0]} map points are NaN or infinite")
        if pts.shape[0] < max(k, 3):
            raise MapError(f"{source}: {pts.shape[0]} points are too few for a {k}-neighbour normal fit")
        if not point_sigma > 0:
            raise MapError(f"{source}: map point sigma must be > 0 m, got {point_sigma}")
        self.source = source
        self.points = pts
        self.tree = cKDTree(pts)
        self.normals, self.planarity = pca_normals(pts, self.tree, k)
        self.point_sigma = float(point_sigma)

    def __len__(self) -> int:
        return int(self.points.shape[0])

    def nearest(self, q: FloatArray) -> tuple[FloatArray, NDArray[np.int64]]:
        """Distance to and index of the nearest map point of each ``(P, 3)`` query."""
        q = np.asarray(q, dtype=np.float64).reshape(-1, 3)
        d, i = self.tree.query(q, k=1)
        return np.asarray(d, dtype=np.float64), np.asarray(i, dtype=np.int64)

    def bounds(self) -> tuple[FloatArray, FloatArray]:
        """Axis-aligned bounding box ``(lo, hi)``."""
        return self.points.min(axis=0), self.points.max(axis=0)

    @classmethod
    def from_mesh(cls, mesh: Any, spacing: float = DEFAULT_SPACING, seed: int = 0, **kw: Any) -> PriorMap:
        """A map of Poisson-disk samples of a ``trimesh.Trimesh`` surface."""
        return cls(sample_mesh(mesh, spacing, seed), **kw)

    def save_ply(self, path: str | os.PathLike[str]) -> None:
        """Points, normals and planarity as a binary PLY."""
        write_ply(path, self.points, normals=self.normals, scalars={"planarity": self.planarity})


def load_map(
    path: str | os.PathLike[str],
    *,
    spacing: float = DEFAULT_SPACING,
    k: int = DEFAULT_NEIGHBOURS,
    point_sigma: float = 0.005,
    drop_nan: bool = False,
    seed: int = 0,
) -> PriorMap:
    """Load a prior map from ``.pcd``, ``.ply`` (points or mesh), ``.stl`` or ``.obj``.

    Args:
        path: the file.
        spacing: Poisson-disk spacing (m) when the file is a mesh.
        k: PCA neighbours.
        point_sigma: 1-sigma position uncertainty of a map point (m).
        drop_nan: leave out non-finite points (an organised PCD marks missing points with NaN) instead of refusing.
        seed: sampling seed.
    """
    path = Path(path)
    if not path.exists():
        raise MapError(f"map {path} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".pcd":
        fields = read_pcd(path)
        missing = [f for f in ("x", "y", "z") if f not in fields]
        if missing:
            raise MapError(f"{path}: PCD has no field(s) {missing}; fields are {sorted(fields)}")
        pts = np.column_stack([fields["x"], fields["y"], fields["z"]])
    elif suffix in (".ply", ".stl", ".obj", ".off", ".glb"):
        pts = read_ply_points(path, spacing, seed)
    else:
        raise MapError(f"map {path}: unknown format {suffix!r}; expected .pcd, .ply, .stl or .obj")
    if drop_nan:
        pts = pts[np.all(np.isfinite(pts), axis=1)]
    return PriorMap(pts, k=k, point_sigma=point_sigma, source=str(path))
