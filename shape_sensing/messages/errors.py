"""Errors of the message layer."""

from __future__ import annotations

__all__ = ["MessageError"]


class MessageError(ValueError):
    """A message could not be built or read: names the type, field and value."""
