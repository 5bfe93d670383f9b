"""Errors of the continuum estimator."""

from __future__ import annotations

__all__ = ["ContinuumError"]


class ContinuumError(ValueError):
    """Bad estimator input or configuration; the message names the value and what was expected."""
