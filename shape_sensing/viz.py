"""Marker geometry (ROS-free): tube meshes around a backbone, covariance ellipsoids."""

from __future__ import annotations

import numpy as np

from shape_sensing.geometry import FloatArray

__all__ = ["covariance_ellipsoid", "tube_mesh", "tube_mesh_indexed"]


def _frames_along(points: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Parallel-transported normals and binormals along a polyline."""
    n_pts = len(points)
    tangents = np.gradient(points, axis=0) if n_pts > 1 else np.array([[0.0, 0.0, 1.0]])
    norms = np.linalg.norm(tangents, axis=1, keepdims=True)
    tangents = np.where(norms > 1e-12, tangents / np.maximum(norms, 1e-12), [0.0, 0.0, 1.0])
    normals = np.zeros_like(points)
    seed = np.array([1.0, 0.0, 0.0]) if abs(tangents[0, 0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    n = seed - tangents[0] * (seed @ tangents[0])
    normals[0] = n / np.linalg.norm(n)
    for i in range(1, n_pts):
        n = normals[i - 1] - tangents[i] * (normals[i - 1] @ tangents[i])
        nn = np.linalg.norm(n)
        normals[i] = n / nn if nn > 1e-12 else normals[i - 1]
    binormals = np.cross(tangents, normals)
    return normals, binormals


def tube_mesh(points: FloatArray, radius: float, sides: int = 12) -> FloatArray:
    """Triangle soup ``(3*K, 3)`` of a tube of ``radius`` around a polyline.

    Suited to a visualization_msgs/Marker TRIANGLE_LIST. Frames are parallel
    transported so the tube does not twist.
    """
    vertices, index = tube_mesh_indexed(points, radius, sides)
    return vertices[index]


def tube_mesh_indexed(points: FloatArray, radius: float, sides: int = 12) -> tuple[FloatArray, np.ndarray]:
    """:func:`tube_mesh` as its distinct vertices ``(V, 3)`` and the ``(3*K,)`` vertex index of each corner.

    ``vertices[index]`` is the triangle soup; a message builder makes one point per vertex and lists the
    corners by reference (six corners share each vertex).
    """
    points = np.asarray(points, dtype=float)
    if len(points) < 2:
        return np.zeros((0, 3)), np.zeros(0, dtype=np.intp)
    normals, binormals = _frames_along(points)
    ang = np.linspace(0.0, 2 * np.pi, sides, endpoint=False)
    ring = (
        points[:, None, :]
        + radius * np.cos(ang)[None, :, None] * normals[:, None, :]
        + radius * np.sin(ang)[None, :, None] * binormals[:, None, :]
    )
    ids = np.arange(ring.shape[0] * sides).reshape(ring.shape[0], sides)
    a = ids[:-1]
    b = ids[1:]
    a2 = np.roll(a, -1, axis=1)
    b2 = np.roll(b, -1, axis=1)
    tris = np.stack([a, b, b2, a, b2, a2], axis=2)  # (segments, sides, 6)
    return ring.reshape(-1, 3), tris.reshape(-1)


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
