"""When finished sessions leave memory and disk: a terminal session leaves
memory once it has been finished for the retention window, and the store once
it is beyond the newest `max_sessions` or older than `max_age_days`. An
unfinished or live session is never collected."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from ..states import CoderState

FINISHED_SESSION_RETENTION_SECS = 1800.0


class Dated(Protocol):
    """A stored session as retention reads it: a parsed one, or a `StoredRef`."""

    @property
    def id(self) -> str: ...
    @property
    def state(self) -> CoderState: ...
    @property
    def updated_at(self) -> float: ...


class StoredRef(NamedTuple):
    """What retention reads of a stored session (no need to parse it)."""

    id: str
    state: CoderState
    updated_at: float


def collectable_by_age(
    terminal: bool,
    updated_at: float,
    now: float,
    retention: float = FINISHED_SESSION_RETENTION_SECS,
) -> bool:
    """Terminal and at least `retention` seconds old (boundary inclusive).
    A backwards clock (updated in the future) saturates to age 0."""
    return terminal and max(0.0, now - updated_at) >= retention


def disk_gc_victims(
    stored: Sequence[Dated],
    live_ids: set[str],
    *,
    now: float,
    max_sessions: int,
    max_age_days: float,
) -> list[str]:
    """Stored terminal sessions to forget: beyond the newest `max_sessions`,
    or older than `max_age_days`. Live and unfinished sessions are never chosen."""
    candidates = sorted(
        (s for s in stored if s.state.is_terminal and s.id not in live_ids),
        key=lambda s: s.updated_at,
        reverse=True,
    )
    max_age = max_age_days * 86400
    victims: list[str] = []
    kept = 0
    total_unfinished = sum(1 for s in stored if not s.state.is_terminal)
    for s in candidates:
        too_old = max(0.0, now - s.updated_at) > max_age
        if too_old or kept + total_unfinished >= max_sessions:
            victims.append(s.id)
        else:
            kept += 1
    return victims
