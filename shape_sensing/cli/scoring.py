"""Scoring shared by the evaluation subcommands: matching estimate stamps to reference stamps, the position and
rotation error between estimated and reference poses, and the summary statistics of an error series."""

from __future__ import annotations

import numpy as np

from shape_sensing.estimators.continuum import lie
from shape_sensing.geometry import FloatArray

__all__ = ["error_stats", "nearest", "pose_errors", "spread_stats"]


def nearest(ref: np.ndarray, stamps: np.ndarray, max_dt_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """Index of the nearest ``ref`` stamp (sorted) for each stamp, and whether it is within ``max_dt_ns``."""
    if not len(ref):
        return np.zeros(len(stamps), dtype=int), np.zeros(len(stamps), dtype=bool)
    j = np.clip(np.searchsorted(ref, stamps), 1, len(ref) - 1) if len(ref) > 1 else np.zeros(len(stamps), dtype=int)
    if len(ref) > 1:
        left = ref[j - 1]
        j = np.where(np.abs(stamps - left) <= np.abs(ref[j] - stamps), j - 1, j)
    return j, np.abs(ref[j] - stamps) <= max_dt_ns


def pose_errors(T_est: FloatArray, T_ref: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Position error (m, the distance between origins) and rotation error (rad, the angle of ``R_ref^T R_est``)
    of poses ``(..., 4, 4)``."""
    dp = np.linalg.norm(T_est[..., :3, 3] - T_ref[..., :3, 3], axis=-1)
    dR = np.swapaxes(T_ref[..., :3, :3], -1, -2) @ T_est[..., :3, :3]
    return dp, np.linalg.norm(lie.so3_log(dR), axis=-1)


def error_stats(x: FloatArray) -> dict[str, float]:
    """RMSE, MAE and maximum of an error series (non-negative values)."""
    return {"rmse": float(np.sqrt(np.mean(x**2))), "mae": float(np.mean(x)), "max": float(np.max(x))}


def spread_stats(values: list[float]) -> dict[str, float]:
    """Mean, sample standard deviation and median of repeated trials."""
    a = np.asarray(values, dtype=float)
    return {"mean": float(a.mean()), "sd": float(a.std(ddof=1)) if len(a) > 1 else 0.0, "median": float(np.median(a))}
