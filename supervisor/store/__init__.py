"""The store room: the SQLite database of session snapshots, the owner lock of
a state dir, and the retention rules that decide when finished sessions are
forgotten. The command line reads the database through these names."""

from typing import TYPE_CHECKING, Any

from .lock import LOCK_NAME, LockHolder, OwnerLock, read_lock_holder

if TYPE_CHECKING:
    from .database import DB_NAME, SCHEMA_VERSION, Store, read_sessions

__all__ = [
    "DB_NAME",
    "LOCK_NAME",
    "SCHEMA_VERSION",
    "LockHolder",
    "OwnerLock",
    "Store",
    "read_lock_holder",
    "read_sessions",
]


def __getattr__(name: str) -> Any:
    """The database (and the models it stores) loads on first use: reading the
    owner lock, which a command does before anything else, needs neither."""
    if name in ("DB_NAME", "SCHEMA_VERSION", "Store", "read_sessions"):
        from . import database

        return getattr(database, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
