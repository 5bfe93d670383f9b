"""Simulated end-to-end demos, one module per robot kind.

Table of ``shape-sensing demo NAME``: name -> (module, help). Each module
provides ``add_arguments(parser)`` and ``run(args) -> int``.
"""

from __future__ import annotations

__all__ = ["DEMOS"]

DEMOS: dict[str, tuple[str, str]] = {
    "vine-imu": ("shape_sensing.demos.vine_imu", "vine robot with distributed IMUs, hinge-arc shape estimate"),
    "hyper-redundant": (
        "shape_sensing.demos.hyper_redundant",
        "hyper-redundant robot of 2-DoF modules with WT901 sensors, rigid-module shape estimate",
    ),
    "tof-rings": (
        "shape_sensing.demos.tof_rings",
        "3 sensor rings (9 VL53L5CX ToF, 3 ISM330BX IMUs) through the real drivers and register-level simulators",
    ),
    "growing": ("shape_sensing.demos.growing", "tip-growing robot planned with 3D Dubins paths, open and closed loop"),
    "tof-continuum": (
        "shape_sensing.demos.tof_continuum",
        "continuum robot with ToF rings, gyros and strain localised against a prior map in a compressor duct",
    ),
    "vine-collision": (
        "shape_sensing.demos.vine_collision",
        "vine robot localised from collisions (base station, contact cap, force sensor, pivot Kalman filter)",
    ),
}
