"""Errors of the I/O layer (bags, datasets, maps)."""

from __future__ import annotations

__all__ = ["BagError", "DatasetError", "MapError"]


class BagError(RuntimeError):
    """A bag could not be read or written; the message names the bag and the cause."""


class DatasetError(ValueError):
    """A dataset file is malformed; the message names the file, line and field."""


class MapError(ValueError):
    """A prior map (point cloud or mesh file) is unreadable or unusable; the message names the file and the cause."""
