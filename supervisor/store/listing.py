"""Board rows read without parsing sessions: each row of the store keeps its
session's board summary as JSON (written with every save, schema 2), and a
listing joins them into one JSON array that pydantic validates in one call.
10,000 stored sessions then list in tens of milliseconds, where parsing each
session in full (its contract, check output and diff) takes about a second.

A row without a summary (kept by corral before schema 2) or whose summary no
longer validates is parsed in full instead (`stale`), so an owner can write
its summary once. A summary says where the worktree was; whether it is still
there is checked on reading, as for a parsed session. A change to what a
summary holds (a field of `SessionSummary`) needs a schema step that clears
the kept summaries, so they are written again.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import TypeAdapter, ValidationError

from ..models import CoderSession, SessionSummary
from ..states import TERMINAL_STATES

# an SQL condition: the rows of sessions that are not finished
UNFINISHED = "state NOT IN ({})".format(", ".join(f"'{s.value}'" for s in sorted(TERMINAL_STATES)))

_ROWS: TypeAdapter[list[SessionSummary]] = TypeAdapter(list[SessionSummary])


@dataclass
class Listing:
    rows: list[SessionSummary]  # newest first, summaries read and parsed alike
    stale: list[CoderSession]  # parsed because their summary was missing or did not fit
    unreadable: list[str]  # ids of rows that do not parse at all (left untouched)


def read_listing(
    conn: sqlite3.Connection,
    with_summaries: bool,
    summarize: Callable[[CoderSession], SessionSummary],
) -> Listing:
    """Every stored row as a board row. `summarize` builds one from a parsed
    session (for rows without a usable summary): the session room's rule,
    handed down, since the store sits below it."""
    kept: list[tuple[str, float, str]] = []
    if with_summaries:
        kept = conn.execute(
            "SELECT id, updated_at, summary FROM sessions WHERE summary IS NOT NULL"
        ).fetchall()
    rows: list[SessionSummary] = []
    parse_ids: list[str] = []
    if kept:
        try:
            rows = _ROWS.validate_json("[" + ",".join(s for _, _, s in kept) + "]")
        except (ValidationError, ValueError):
            rows, parse_ids = _one_by_one(kept)
    for row in rows:
        if row.worktree and not os.path.isdir(row.worktree):
            row.worktree = None
        if row.where and not row.host and not os.path.isdir(row.where):
            row.where = None  # as the quick path (stored_rows.py) shows it
    where = "summary IS NULL" if with_summaries else "1"
    missing = conn.execute(f"SELECT id, data FROM sessions WHERE {where}").fetchall()
    if parse_ids:
        marks = ",".join("?" * len(parse_ids))
        missing += conn.execute(
            f"SELECT id, data FROM sessions WHERE id IN ({marks})", parse_ids
        ).fetchall()
    stale: list[CoderSession] = []
    unreadable: list[str] = []
    for sid, data in missing:
        try:
            session = CoderSession.model_validate_json(data)
        except (ValidationError, ValueError):
            unreadable.append(sid)
            continue
        stale.append(session)
        rows.append(summarize(session))
    rows.sort(key=lambda r: r.updated_at, reverse=True)
    return Listing(rows, stale, unreadable)


def _one_by_one(kept: list[tuple[str, float, str]]) -> tuple[list[SessionSummary], list[str]]:
    """Summaries that validate, and the ids of those that do not (parsed instead)."""
    rows: list[SessionSummary] = []
    bad: list[str] = []
    for sid, _updated, summary in kept:
        try:
            rows.append(SessionSummary.model_validate_json(summary))
        except (ValidationError, ValueError):
            bad.append(sid)
    return rows, bad


def rows_json(rows: list[SessionSummary]) -> bytes:
    """The rows as `corral sessions --json` prints them (indented), in one call."""
    return _ROWS.dump_json(rows, indent=2)
