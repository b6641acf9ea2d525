"""The one error type a job raises when it cannot go on."""

from __future__ import annotations

__all__ = ["AckerError"]


class AckerError(RuntimeError):
    """A job cannot go on; the message says why in one line."""
