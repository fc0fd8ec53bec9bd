"""The git layer's errors."""

from __future__ import annotations

from ..errors import CorralError


class GitError(CorralError):
    """A git command failed; the message carries git's own words."""

    def __init__(self, message: str, stderr: str = "") -> None:
        super().__init__(message)
        self.stderr = stderr
