"""Which config schema each executable (node) uses: name -> "module:ATTRIBUTE".

Used by the nodes to declare their parameters and by the static checks that
launch files and ``config/*.yaml`` only use declared parameters.
"""

from __future__ import annotations

import importlib

from shape_sensing.config import Schema

__all__ = ["NODE_SCHEMAS", "schema_for"]

NODE_SCHEMAS: dict[str, str] = {
    "hinge_arc_estimator": "shape_sensing.estimators.hinge_arc:SCHEMA",
    "vine_imu_simulator": "shape_sensing.sim.vine:SCHEMA",
    "wt901": "shape_sensing.drivers.wt901_config:SCHEMA",
    "rigid_module_estimator": "shape_sensing.estimators.rigid_module:SCHEMA",
    "hyper_redundant_simulator": "shape_sensing.sim.hyper_redundant:SCHEMA",
    "bno055_chain": "shape_sensing.drivers.bno055_chain:SCHEMA",
    "continuum_estimator": "shape_sensing.pipelines.continuum:NODE_SCHEMA",
    "growth_planner": "shape_sensing.planning.growth_planner:SCHEMA",
    "tof_ring": "shape_sensing.drivers.tof_ring:SCHEMA",
    "base_station": "shape_sensing.drivers.base_station:SCHEMA",
    "contact_cap": "shape_sensing.drivers.contact_cap:SCHEMA",
    "netft": "shape_sensing.drivers.netft:SCHEMA",
    "collision_pivot_estimator": "shape_sensing.estimators.collision_pivot:SCHEMA",
    "vine_collision_simulator": "shape_sensing.sim.vine_collision:SCHEMA",
}


def schema_for(node: str) -> Schema:
    """The schema of executable ``node``."""
    try:
        module, attr = NODE_SCHEMAS[node].split(":")
    except KeyError:
        raise KeyError(f"no schema registered for node {node!r}; known: {sorted(NODE_SCHEMAS)}") from None
    schema = getattr(importlib.import_module(module), attr)
    assert isinstance(schema, Schema)
    return schema
