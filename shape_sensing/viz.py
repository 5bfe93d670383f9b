"""Marker geometry (ROS-free): tube meshes around a backbone, covariance ellipsoids."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from shape_sensing.geometry import FloatArray

__all__ = ["covariance_ellipsoid", "tube_index", "tube_mesh", "tube_mesh_indexed", "tube_vertices"]


def _dot(u: FloatArray, v: FloatArray) -> FloatArray:
    return u[..., 0] * v[..., 0] + u[..., 1] * v[..., 1] + u[..., 2] * v[..., 2]


def _frames_along(points: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Parallel-transported normals and binormals along polylines ``(..., P, 3)``.

    Elementwise operations only (dot and cross products written out), so polylines of one length
    transported together get the bits each would get alone.
    """
    points = np.asarray(points, dtype=float)
    n_pts = points.shape[-2]
    if n_pts > 1:
        tangents = np.gradient(points, axis=-2)
    else:
        tangents = np.broadcast_to(np.array([0.0, 0.0, 1.0]), points.shape).copy()
    norms = np.sqrt(_dot(tangents, tangents))[..., None]
    tangents = np.where(norms > 1e-12, tangents / np.maximum(norms, 1e-12), [0.0, 0.0, 1.0])
    normals = np.zeros_like(points)
    t0 = tangents[..., 0, :]
    seed = np.where((np.abs(t0[..., 0]) < 0.9)[..., None], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0])
    n = seed - t0 * _dot(seed, t0)[..., None]
    normals[..., 0, :] = n / np.sqrt(_dot(n, n))[..., None]
    if points.ndim == 2:  # one polyline: the same operations in Python floats (IEEE doubles: the same bits)
        _transport(np.asarray(tangents).tolist(), normals)
    else:
        for i in range(1, n_pts):
            prev, t = normals[..., i - 1, :], tangents[..., i, :]
            n = prev - t * _dot(prev, t)[..., None]
            nn = np.sqrt(_dot(n, n))[..., None]
            normals[..., i, :] = np.where(nn > 1e-12, n / np.where(nn > 1e-12, nn, 1.0), prev)
    tx, ty, tz = tangents[..., 0], tangents[..., 1], tangents[..., 2]
    nx, ny, nz = normals[..., 0], normals[..., 1], normals[..., 2]
    binormals = np.stack([ty * nz - tz * ny, tz * nx - tx * nz, tx * ny - ty * nx], axis=-1)
    return normals, binormals


def _transport(tangents: Any, normals: FloatArray) -> None:
    """:func:`_frames_along`'s loop for one polyline, ``normals[0]`` given: each normal the last one less its
    component along the tangent, normalised (kept where that vanishes)."""
    px, py, pz = (float(v) for v in normals[0])
    out = [[px, py, pz]]
    for tx, ty, tz in tangents[1:]:
        d = px * tx + py * ty + pz * tz
        nx, ny, nz = px - tx * d, py - ty * d, pz - tz * d
        nn = math.sqrt(nx * nx + ny * ny + nz * nz)
        if nn > 1e-12:
            px, py, pz = nx / nn, ny / nn, nz / nn
        out.append([px, py, pz])
    normals[:] = out


def tube_mesh(points: FloatArray, radius: float, sides: int = 12) -> FloatArray:
    """Triangle soup ``(3*K, 3)`` of a tube of ``radius`` around a polyline.

    Suited to a visualization_msgs/Marker TRIANGLE_LIST. Frames are parallel
    transported so the tube does not twist.
    """
    vertices, index = tube_mesh_indexed(points, radius, sides)
    return vertices[index]


def tube_vertices(points: FloatArray, radius: float, sides: int = 12) -> FloatArray:
    """The distinct vertices ``(..., P * sides, 3)`` of :func:`tube_mesh_indexed` of polylines ``(..., P, 3)``.

    Polylines of one length are done at once, each with the bits it would get alone.
    """
    points = np.asarray(points, dtype=float)
    normals, binormals = _frames_along(points)
    ang = np.linspace(0.0, 2 * np.pi, sides, endpoint=False)
    ring = (
        points[..., :, None, :]
        + radius * np.cos(ang)[:, None] * normals[..., :, None, :]
        + radius * np.sin(ang)[:, None] * binormals[..., :, None, :]
    )
    return ring.reshape(*points.shape[:-2], -1, 3)


def tube_index(n_points: int, sides: int = 12) -> np.ndarray:
    """The ``(3*K,)`` vertex index of each triangle corner of :func:`tube_vertices` (two per side per segment)."""
    ids = np.arange(n_points * sides).reshape(n_points, sides)
    a = ids[:-1]
    b = ids[1:]
    a2 = np.roll(a, -1, axis=1)
    b2 = np.roll(b, -1, axis=1)
    tris = np.stack([a, b, b2, a, b2, a2], axis=2)  # (segments, sides, 6)
    return tris.reshape(-1)


def tube_mesh_indexed(points: FloatArray, radius: float, sides: int = 12) -> tuple[FloatArray, np.ndarray]:
    """:func:`tube_mesh` as its distinct vertices ``(V, 3)`` and the ``(3*K,)`` vertex index of each corner.

    ``vertices[index]`` is the triangle soup; a message builder makes one point per vertex and lists the
    corners by reference (six corners share each vertex).
    """
    points = np.asarray(points, dtype=float)
    if len(points) < 2:
        return np.zeros((0, 3)), np.zeros(0, dtype=np.intp)
    return tube_vertices(points, radius, sides), tube_index(len(points), sides)


def covariance_ellipsoid(cov: FloatArray, n_sigma: float = 2.0) -> tuple[FloatArray, FloatArray]:
    """Axes lengths (full diameters) and rotation matrix of a 3x3 covariance ellipsoid.

    Returns ``(scale, R)`` such that a SPHERE marker with orientation ``R`` and
    scale ``scale`` shows the ``n_sigma`` ellipsoid.
    """
    cov = 0.5 * (np.asarray(cov, dtype=float) + np.asarray(cov, dtype=float).T)
    w, V = np.linalg.eigh(cov)
    w = np.clip(w, 0.0, None)
    if np.linalg.det(V) < 0:
        V[:, 0] = -V[:, 0]
    scale = 2.0 * n_sigma * np.sqrt(w)
    return np.maximum(scale, 1e-4), V
