"""The hinge-arc estimator's straight reference, as a calibration with a lifecycle.

What it is. With the robot fully everted and held straight, every backbone
frame equals the base frame. From one set of world orientations ``R_i``
captured then, the reference stores the base frame's orientation ``W`` in the
IMUs' world and every sensor's mounting ``M_i = W^T R_i`` (so that later
``B_i = W^T R_i M_i^T``).

Lifecycle (like the BNO055 calibration profiles):

* captured with the whole robot everted and straight: the ``~/offset``
  service of the node, or ``shape-sensing capture-reference BAG --at T``
  from a recording; only sensors that are everted (with a length topic) and
  fresh are captured, the others stay unusable until a capture that has them;
* saved to YAML (``~/save_reference``, or the command's ``--out``) and loaded
  at start (parameter ``straight_reference_file``); replay takes a saved
  reference (``--reference FILE``) or a capture time (``--reference-at T``);
* applied to each sensor as it everts: the estimator uses a sensor only once
  the length says it is out, with the mounting captured while it was out;
* captured automatically (``auto_offset``) only when that is safe: at once
  without a length topic, and with one only once every used sensor is
  everted. A sensor not yet everted rides inside the body reversed, so a
  capture that included it would store a mounting about 180 deg wrong (on a
  growth run that put the tip 1.4 m off on average). The diagnostics say
  which case holds and why the estimator is waiting.

Sensor 0 and the base frame. ``W`` must come from somewhere. If the base's
placement in the world is known (``base_orientation_world``: roll, pitch, yaw
of the base frame in the world, the same rotation as the ``world -> base``
transform), ``W`` is that placement turned about the vertical by the IMUs'
heading (the fused orientation's vertical is gravity and exact; its heading is
magnetic and not), the heading taken from sensor 0; sensor 0's mounting is then
solved, not assumed. Otherwise ``W = R_0 F^T`` with ``F`` the nominal mounting
of sensor 0 (``first_mount_rpy``), and sensor 0's real mounting error becomes
a tilt of the whole estimated shape.

Error budget when sensor 0's mounting is unknown: a mounting error of ``e``
(rad) tilts the base frame by ``e`` and turns every measured bend's axis by
it; a point at distance ``r`` from the base moves by at most about ``r * e``
(3 cm per degree at the tip of the 1.73 m robot), in practice less, since a
tilt about the bend axis moves nothing. Measured on the passive scenario (20 s,
``test_straight_reference.py``): sensor 0 mounted at (10.2, -12.8, 2.1) deg
(seed 3) gives 8.3 cm mean / 18.6 cm max tip error with the nominal mounting
assumed, 1.8 / 3.4 cm with the placement known, the same as with the true
mounting given; at (0.6, -0.7, 3.2) deg (seed 0) 3.1 cm against 1.6 cm. With
the placement known the residual is sensor 0's heading (a turn about the
vertical), which leaves bends about the vertical unchanged.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scipy.spatial.transform import Rotation

from shape_sensing.geometry import FloatArray

__all__ = ["StraightReference", "StraightReferenceError", "base_in_imu_world", "capture_reference"]

FORMAT = "shape_sensing/straight_reference/1"


class StraightReferenceError(ValueError):
    """A straight reference cannot be captured, read or applied."""


@dataclass(frozen=True)
class StraightReference:
    """The base frame in the IMUs' world and each sensor's mounting, from one straight, everted capture.

    Attributes:
        world_base: ``W`` (3, 3): base frame orientation in the IMUs' world.
        mountings: ``M_i`` (n, 3, 3); identity where not captured.
        captured: (n,) which sensors have a captured mounting.
        frame_ids: the sensors' frame ids (checked when applied).
        stamp_ns: stamp of the capture.
        base_from_placement: whether ``W`` came from the base's known placement (sensor 0 solved).
        length: the robot length at capture (m), if known.
    """

    world_base: FloatArray
    mountings: FloatArray
    captured: np.ndarray
    frame_ids: tuple[str, ...]
    stamp_ns: int
    base_from_placement: bool = False
    length: float | None = None

    def to_yaml(self, path: str | os.PathLike[str]) -> Path:
        """Write the reference (rotation matrices, so that it reads back bit for bit), atomically."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{p.name}.tmp")
        try:
            tmp.write_text(self.to_yaml_text())
            os.replace(tmp, p)
        except BaseException:
            tmp.unlink(missing_ok=True)  # a full disk or a signal: no empty or half-written file left
            raise
        return p

    def to_yaml_text(self) -> str:
        """The YAML text :meth:`to_yaml` writes (also recorded in bags)."""
        data: dict[str, Any] = {
            "format": FORMAT,
            "stamp_ns": int(self.stamp_ns),
            "length_m": None if self.length is None else float(self.length),
            "base_from_placement": bool(self.base_from_placement),
            "world_base": [[float(v) for v in row] for row in self.world_base],
            "sensors": {
                fid: (
                    [[float(v) for v in row] for row in self.mountings[i]]
                    if self.captured[i]
                    else None
                )
                for i, fid in enumerate(self.frame_ids)
            },
        }
        return (
            "# Straight reference of the hinge-arc estimator: base frame in the IMU world and each sensor's\n"
            "# mounting (rotation matrices, rows; exact, so replays reproduce), captured fully everted and straight.\n"
            + yaml.safe_dump(data, sort_keys=False)
        )

    @classmethod
    def from_yaml(cls, path: str | os.PathLike[str]) -> StraightReference:
        """Read a reference written by :meth:`to_yaml`.

        Raises:
            StraightReferenceError: missing file, wrong format, bad quaternion.
        """
        p = Path(path)
        try:
            text = p.read_text()
        except FileNotFoundError:
            raise StraightReferenceError(f"straight reference file {p} does not exist") from None
        return cls.from_yaml_text(text, str(p))

    @classmethod
    def from_yaml_text(cls, text: str, where: str = "straight reference") -> StraightReference:
        """Parse the text :meth:`to_yaml_text` gives; ``where`` names it in errors."""
        p = where
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise StraightReferenceError(f"straight reference file {p} is not valid YAML: {exc}") from exc
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise StraightReferenceError(f"{p}: not a straight reference (expected 'format: {FORMAT}')")
        sensors = data.get("sensors")
        if not isinstance(sensors, dict) or not sensors:
            raise StraightReferenceError(f"{p}: 'sensors' must map frame ids to rotation matrices (or null)")

        def mat(value: Any, what: str) -> FloatArray:
            M = np.asarray(value, dtype=float) if isinstance(value, list) else np.zeros(0)
            if M.shape != (3, 3) or not np.all(np.isfinite(M)) or not np.allclose(M @ M.T, np.eye(3), atol=1e-6):
                raise StraightReferenceError(f"{p}: {what} = {value!r}: expected a 3x3 rotation matrix (rows)")
            return M

        ids = tuple(str(k) for k in sensors)
        n = len(ids)
        M = np.tile(np.eye(3), (n, 1, 1))
        captured = np.zeros(n, dtype=bool)
        for i, fid in enumerate(ids):
            if sensors[fid] is not None:
                M[i] = mat(sensors[fid], f"sensors.{fid}")
                captured[i] = True
        length = data.get("length_m")
        return cls(
            world_base=mat(data.get("world_base"), "world_base"),
            mountings=M,
            captured=captured,
            frame_ids=ids,
            stamp_ns=int(data.get("stamp_ns", 0)),
            base_from_placement=bool(data.get("base_from_placement", False)),
            length=None if length is None else float(length),
        )

    def check_frames(self, frame_ids: list[str]) -> None:
        """Raise unless the reference was captured for these sensors, in this order."""
        if list(self.frame_ids) != list(frame_ids):
            raise StraightReferenceError(
                f"the straight reference holds sensors {list(self.frame_ids)}, the estimator has {list(frame_ids)}"
            )

    def describe(self) -> str:
        """One line for logs and diagnostics."""
        n = int(self.captured.sum())
        base = "base placement known, sensor 0 solved" if self.base_from_placement else "sensor 0 nominal mounting"
        length = "" if self.length is None else f", length {self.length:.3f} m"
        return f"{n}/{len(self.frame_ids)} sensors, t = {self.stamp_ns * 1e-9:.2f} s{length}, {base}"


def base_in_imu_world(R0: FloatArray, placement: FloatArray | None, first_mount: FloatArray) -> FloatArray:
    """``W``: the base frame in the IMUs' world at a straight capture.

    Args:
        R0: world orientation of sensor 0 (3, 3).
        placement: the base frame in the (gravity-aligned) world, or ``None`` when unknown.
        first_mount: nominal mounting of sensor 0, used when the placement is unknown.

    With the placement known, ``W = Rz(psi) placement``, the heading ``psi`` chosen so that ``W`` is
    closest (Frobenius) to ``R0 first_mount^T``: the IMUs' vertical is gravity, their heading magnetic.
    """
    if placement is None:
        return np.asarray(R0 @ first_mount.T, dtype=float)
    Q = R0 @ first_mount.T @ placement.T  # the turn from the world to the IMU world, as sensor 0 sees it
    psi = math.atan2(Q[1, 0] - Q[0, 1], Q[0, 0] + Q[1, 1])  # the closest turn about z
    return np.asarray(Rotation.from_rotvec([0.0, 0.0, psi]).as_matrix() @ placement, dtype=float)


def capture_reference(
    quats: FloatArray,
    usable: np.ndarray,
    stamp_ns: int,
    frame_ids: list[str],
    *,
    first_mount: FloatArray,
    placement: FloatArray | None = None,
    length: float | None = None,
) -> StraightReference:
    """Capture from world orientations ``quats`` (n, 4) of the sensors in ``usable`` (fresh and everted).

    Raises:
        StraightReferenceError: sensor 0 is not usable (it defines the base frame), or no sensor is.
    """
    usable = np.asarray(usable, dtype=bool)
    if not usable.any():
        raise StraightReferenceError("cannot capture the straight reference: no sensor has a fresh, everted reading")
    n = len(usable)
    R = np.tile(np.eye(3), (n, 1, 1))
    R[usable] = Rotation.from_quat(np.asarray(quats, dtype=float)[usable]).as_matrix()
    first = int(np.flatnonzero(usable)[0])
    # Without sensor 0 the first usable sensor stands for the base, mounted as it is (as before).
    mount0 = first_mount if first == 0 else np.eye(3)
    W = base_in_imu_world(R[first], placement if first == 0 else None, mount0)
    M = np.einsum("ji,njk->nik", W, R)
    M[~usable] = np.eye(3)
    return StraightReference(
        world_base=W,
        mountings=M,
        captured=usable.copy(),
        frame_ids=tuple(frame_ids),
        stamp_ns=int(stamp_ns),
        base_from_placement=placement is not None and first == 0,
        length=length,
    )
