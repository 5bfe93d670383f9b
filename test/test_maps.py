"""Prior maps: PCD (PCL v0.7) and PLY readers against independent writers, PCA normals and planarity, bad maps."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from shape_sensing.io.errors import MapError
from shape_sensing.io.maps import PriorMap, load_map, lzf_decompress, read_pcd, write_pcd, write_ply


def _plane_points(n: int = 400, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    xy = rng.uniform(-0.5, 0.5, (n, 2))
    return np.column_stack([xy, 0.2 + 0.0 * xy[:, 0]])


def test_pcd_round_trip_ascii_and_binary(tmp_path: Path) -> None:
    pts = _plane_points()
    nrm = np.tile([0.0, 0.0, 1.0], (pts.shape[0], 1))
    for data in ("ascii", "binary"):
        p = tmp_path / f"m_{data}.pcd"
        write_pcd(p, pts, normals=nrm, data=data)
        f = read_pcd(p)
        np.testing.assert_allclose(np.column_stack([f["x"], f["y"], f["z"]]), pts, atol=1e-6)
        np.testing.assert_allclose(f["normal_z"], 1.0)


def test_pcd_written_by_hand_to_the_spec(tmp_path: Path) -> None:
    """Files laid out byte by byte per PCL's PCD v0.7 description: mixed types, COUNT > 1, compressed data."""
    pts = np.array([[1.0, 2.0, 3.0], [-1.5, 0.25, 8.0]], dtype=np.float32)
    rgb = np.array([7, 9], dtype=np.uint32)
    head = (
        "VERSION .7\nFIELDS x y z rgb\nSIZE 4 4 4 4\nTYPE F F F U\nCOUNT 1 1 1 1\n"
        "WIDTH 2\nHEIGHT 1\nVIEWPOINT 0 0 0 1 0 0 0\nPOINTS 2\nDATA binary\n"
    )
    body = b"".join(struct.pack("<fffI", *p, c) for p, c in zip(pts, rgb, strict=True))
    (tmp_path / "b.pcd").write_bytes(head.encode() + body)
    f = read_pcd(tmp_path / "b.pcd")
    np.testing.assert_array_equal(f["rgb"], [7, 9])
    np.testing.assert_allclose(np.column_stack([f["x"], f["y"], f["z"]]), pts)
    # binary_compressed: field-major, LZF. Hand-made stream: one literal run of the 24 x,y bytes, then z
    # as a literal of 4 bytes and a back reference copying 4 bytes from 4 behind (z equal in both points).
    xs = struct.pack("<ff", 1.0, 2.0)
    ys = struct.pack("<ff", 3.0, 4.0)
    z = struct.pack("<f", 5.0)
    plain = xs + ys + z + z
    lzf = bytes([15]) + xs + ys + bytes([3]) + z + bytes([(2 << 5) | 0, 3])
    assert lzf_decompress(lzf, len(plain)) == plain
    head = head.replace("FIELDS x y z rgb", "FIELDS x y z").replace("SIZE 4 4 4 4", "SIZE 4 4 4")
    head = head.replace("TYPE F F F U", "TYPE F F F").replace("COUNT 1 1 1 1", "COUNT 1 1 1")
    head = head.replace("DATA binary", "DATA binary_compressed")
    (tmp_path / "c.pcd").write_bytes(head.encode() + struct.pack("<II", len(lzf), len(plain)) + lzf)
    f = read_pcd(tmp_path / "c.pcd")
    np.testing.assert_allclose(np.column_stack([f["x"], f["y"], f["z"]]), [[1, 3, 5], [2, 4, 5]])


def test_ply_from_independent_writer_ascii_and_binary(tmp_path: Path) -> None:
    plyfile = pytest.importorskip("plyfile")
    pts = _plane_points(200)
    v = np.array([tuple(p) for p in pts], dtype=[("x", "f4"), ("y", "f4"), ("z", "f4")])
    for text in (True, False):
        p = tmp_path / f"m_{text}.ply"
        plyfile.PlyData([plyfile.PlyElement.describe(v, "vertex")], text=text).write(str(p))
        m = load_map(p)
        np.testing.assert_allclose(np.sort(m.points, axis=0), np.sort(pts, axis=0), atol=1e-6)
    # and our writer read back by plyfile
    m = PriorMap(pts)
    m.save_ply(tmp_path / "out.ply")
    d = plyfile.PlyData.read(str(tmp_path / "out.ply"))
    np.testing.assert_allclose(d["vertex"]["x"], pts[:, 0], atol=1e-6)
    np.testing.assert_allclose(d["vertex"]["planarity"], m.planarity, atol=1e-6)


def test_normals_and_planarity() -> None:
    m = PriorMap(_plane_points())
    np.testing.assert_allclose(np.abs(m.normals[:, 2]), 1.0, atol=1e-9)
    # independent: singular values of one point's centred neighbourhood (SVD, not the covariance's eigh)
    _, idx = m.tree.query(m.points[7], k=16)
    nb = m.points[idx] - m.points[idx].mean(axis=0)
    sv = np.linalg.svd(nb / 4.0, compute_uv=False)  # / sqrt(k): the covariance's square-root eigenvalues
    assert m.planarity[7] == pytest.approx((sv[1] - sv[2]) / sv[0], rel=1e-9)
    assert sv[2] < 1e-12 and np.all(m.planarity > 0.3)
    rng = np.random.default_rng(3)
    blob = PriorMap(rng.normal(size=(500, 3)))
    assert np.median(blob.planarity) < np.median(m.planarity)  # an isotropic blob is far from planar
    # a straight line: s2 = s3 = 0, alpha = 0
    line = np.column_stack([np.linspace(0, 1, 100), np.zeros(100), np.zeros(100)])
    assert np.all(PriorMap(line).planarity < 1e-6)


def test_mesh_is_poisson_disk_sampled(tmp_path: Path) -> None:
    trimesh = pytest.importorskip("trimesh")
    box = trimesh.creation.box(extents=(0.4, 0.4, 0.4))
    p = tmp_path / "box.ply"
    box.export(p)
    m = load_map(p, spacing=0.02)
    d, _ = m.tree.query(m.points, k=2)
    assert d[:, 1].min() >= 0.02 - 1e-9  # no two samples closer than the spacing
    assert np.abs(np.abs(m.points).max(axis=1) - 0.2).max() < 1e-6  # all on the surface (float32 PLY)
    probe, _ = trimesh.sample.sample_surface(box, 3000, seed=1)
    gap, _ = m.tree.query(probe)
    assert gap.max() < 3 * 0.02  # and they cover it: no hole wider than a few spacings


def test_bad_maps(tmp_path: Path) -> None:
    with pytest.raises(MapError, match="empty"):
        PriorMap(np.zeros((0, 3)))
    pts = _plane_points()
    pts[3] = np.nan
    with pytest.raises(MapError, match="1 of 400 map points are NaN"):
        PriorMap(pts)
    write_pcd(tmp_path / "nan.pcd", pts)
    assert len(load_map(tmp_path / "nan.pcd", drop_nan=True)) == 399
    (tmp_path / "junk.pcd").write_bytes(b"hello\n")
    with pytest.raises(MapError, match="no DATA line"):
        load_map(tmp_path / "junk.pcd")
    (tmp_path / "junk.ply").write_bytes(b"ply\nformat nonsense\n")
    with pytest.raises(MapError, match="junk.ply"):
        load_map(tmp_path / "junk.ply")
    with pytest.raises(MapError, match="does not exist"):
        load_map(tmp_path / "none.pcd")
    with pytest.raises(MapError, match="unknown format"):
        (tmp_path / "a.xyz").write_text("1 2 3\n")
        load_map(tmp_path / "a.xyz")
    write_pcd(tmp_path / "short.pcd", _plane_points())
    raw = (tmp_path / "short.pcd").read_bytes()
    (tmp_path / "short.pcd").write_bytes(raw[:-10])
    with pytest.raises(MapError, match="binary data has"):
        load_map(tmp_path / "short.pcd")
    write_ply(tmp_path / "empty.ply", np.zeros((0, 3)))
    with pytest.raises(MapError, match="empty"):
        load_map(tmp_path / "empty.ply")
