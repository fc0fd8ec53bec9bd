"""The board as stored: every stored session's row, read without owning the
state dir (the database is opened read-only, so a running console is fine).
`corral sessions`, `corral status` and `corral doctor` read it when no owner
answers. Blocks on SQLite."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .models import SessionSummary
from .session.summaries import stored_summary
from .store import Store
from .store.listing import rows_json

__all__ = ["StoredSessions", "stored_sessions", "stored_sessions_json"]


@dataclass(frozen=True)
class StoredSessions:
    """Board rows for every stored session (newest first), none advertising
    an action, plus the ids whose rows could not be read (left untouched)."""

    rows: list[SessionSummary]
    unreadable: list[str]


def stored_sessions(state_dir: Path) -> StoredSessions:
    """Read from the summaries the store keeps (no session is parsed in full
    unless its row predates them)."""
    store = Store(state_dir, readonly=True)
    try:
        listing = store.summaries(stored_summary)
    finally:
        store.close()
    return StoredSessions(listing.rows, listing.unreadable)


def stored_sessions_json(rows: list[SessionSummary]) -> bytes:
    """`corral sessions --json`: the rows, indented, serialised in one call (UTF-8)."""
    return rows_json(rows)
