"""Strain messages: ``shape_sensing/StrainArray`` (bending angle and curvature of gauges along the backbone).

The older recordings of the ToF continuum demo carried strain as ``std_msgs/Float64MultiArray`` of
``[s, theta, kappa]`` triplets on ``/strain``; :func:`strain_from_float64_multiarray` reads those.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from shape_sensing.geometry import FloatArray
from shape_sensing.messages.common import header, stamp_from_msg
from shape_sensing.messages.errors import MessageError
from shape_sensing.messages.factory import MessageFactory, default_factory, published_type

__all__ = ["STRAIN_TYPE", "strain_array_msg", "strain_from_float64_multiarray", "strain_from_msg"]

STRAIN_TYPE = "shape_sensing/msg/StrainArray"


@published_type(STRAIN_TYPE)
def strain_array_msg(
    stamp_ns: int,
    frame_id: str,
    arc_length: FloatArray,
    bending_angle: FloatArray,
    curvature: FloatArray,
    valid: NDArray[np.bool_] | None = None,
    factory: MessageFactory | None = None,
) -> Any:
    """shape_sensing/StrainArray of gauges at ``arc_length`` (m): ``bending_angle`` (rad), ``curvature`` (1/m)
    and, optionally, per-gauge validity (empty: all valid).

    Raises:
        MessageError: the arrays differ in length.
    """
    f = factory if factory is not None else default_factory()
    s = np.asarray(arc_length, dtype=np.float64).reshape(-1)
    th = np.asarray(bending_angle, dtype=np.float64).reshape(-1)
    ka = np.asarray(curvature, dtype=np.float64).reshape(-1)
    ok = np.zeros(0, dtype=bool) if valid is None else np.asarray(valid, dtype=bool).reshape(-1)
    if not th.size == ka.size == s.size or ok.size not in (0, s.size):
        raise MessageError(
            f"strain array: {s.size} arc lengths, {th.size} bending angles, {ka.size} curvatures, {ok.size} flags"
        )
    return f.make(
        STRAIN_TYPE,
        header=header(stamp_ns, frame_id, f),
        arc_length=s,
        bending_angle=th,
        curvature=ka,
        valid=ok,
    )


def strain_from_msg(msg: Any) -> tuple[int, FloatArray, FloatArray, FloatArray, NDArray[np.bool_]]:
    """``(stamp_ns, arc_length, bending_angle, curvature, valid)`` of a StrainArray (``valid`` all true when the
    message leaves it empty).

    Raises:
        MessageError: the arrays differ in length.
    """
    s = np.asarray(msg.arc_length, dtype=np.float64)
    th = np.asarray(msg.bending_angle, dtype=np.float64)
    ka = np.asarray(msg.curvature, dtype=np.float64)
    ok = np.asarray(msg.valid, dtype=bool).reshape(-1)
    if ok.size == 0:
        ok = np.ones(s.size, dtype=bool)
    if not th.size == ka.size == ok.size == s.size:
        raise MessageError(
            f"strain array: {s.size} arc lengths, {th.size} bending angles, {ka.size} curvatures, {ok.size} flags"
        )
    return stamp_from_msg(msg), s, th, ka, ok


def strain_from_float64_multiarray(data: Any) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(arc_length, bending_angle, curvature)`` of the legacy ``[s, theta, kappa, s, theta, kappa, ...]`` layout.

    Raises:
        MessageError: the length is not a multiple of 3.
    """
    d = np.asarray(data, dtype=np.float64).reshape(-1)
    if d.size % 3:
        raise MessageError(f"legacy strain array of {d.size} values is not [s, theta, kappa] triplets")
    r = d.reshape(-1, 3)
    return r[:, 0].copy(), r[:, 1].copy(), r[:, 2].copy()
