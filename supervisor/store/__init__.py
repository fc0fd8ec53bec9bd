"""The store room: the SQLite database of session snapshots, the owner lock of
a state dir, and the retention rules that decide when finished sessions are
forgotten. The command line reads the database through these names."""

from .database import DB_NAME, SCHEMA_VERSION, Store
from .lock import LOCK_NAME, LockHolder, OwnerLock, read_lock_holder

__all__ = [
    "DB_NAME",
    "LOCK_NAME",
    "SCHEMA_VERSION",
    "LockHolder",
    "OwnerLock",
    "Store",
    "read_lock_holder",
]
