"""The one exception type the supervisor raises to callers.

Its message is the sentence an operator reads (seed gate sentences included),
so views show `str(exc)` verbatim.
"""

from __future__ import annotations


class CorralError(Exception):
    """A refusal or failure with an operator-facing sentence."""


class StateDirError(CorralError):
    """The state dir is unusable (busy, corrupt, too new, not absolute)."""


class ConfigError(CorralError):
    """A configuration file or value that does not parse."""
