"""Errors of the planning layer."""

from __future__ import annotations

__all__ = ["PlanningError"]


class PlanningError(ValueError):
    """A planning query is invalid; the message names the argument, its value and what was expected."""
