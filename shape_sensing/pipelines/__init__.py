"""Estimation pipelines shared by live demos, bag replay and nodes.

A pipeline turns one robot kind's raw sensor messages into the estimate
topics of a live run. The demo writes its bag through the same pipeline that
``shape-sensing replay`` runs, so a replayed bag reproduces the live
estimates exactly.

Table: name -> module. Each module provides:

* ``NAME: str``
* ``matches(topics: dict[str, str]) -> bool``: whether a bag's
  ``topic -> message type`` map holds this pipeline's raw inputs.
* ``add_replay_arguments(parser) -> None`` (may add nothing).

  These two are defined in :mod:`shape_sensing.pipelines.contracts`, so that
  choosing a pipeline and building the replay options load none of them.
* ``replay(messages, writer, config, args) -> dict | None``: consume an
  iterator of :class:`shape_sensing.io.bag.BagMessage` in log-time order,
  write raw inputs, estimates and any ground truth found to ``writer``
  (a :class:`shape_sensing.io.bag.BagWriter`) with the same topics as a live
  run, and return metrics when ground truth was present (``None`` otherwise).
  ``config`` is the path of a YAML config (``--config``) or ``None``.
"""

from __future__ import annotations

from shape_sensing.pipelines.contracts import CONTRACTS

__all__ = ["PIPELINES"]

# name -> module, from the contracts (what each reads and its replay options; importing it loads no pipeline)
PIPELINES: dict[str, str] = {name: c.module for name, c in CONTRACTS.items()}
