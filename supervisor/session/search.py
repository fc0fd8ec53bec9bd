"""Searching every session for words: their board rows (name, intent, repo,
id), their journals (every event they logged) and their agents' transcripts.

It reads files as bytes and looks for the lower-cased words in the
lower-cased bytes (no parsing, no JSON): a thousand journals are a few
tens of megabytes, read in well under a second in a worker thread. A big
transcript is read from its end only (`TAIL_BYTES`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from ..models import SessionSummary
from .transcripts import resolve

JOURNAL_SUFFIX = ".events.jsonl"
TAIL_BYTES = 4 * 1024 * 1024


def _words(text: str) -> list[tuple[bytes, bytes]]:
    """Each word as UTF-8 and as JSON writes it with non-ASCII escaped."""
    return [
        (w.encode("utf-8"), json.dumps(w)[1:-1].lower().encode("ascii"))
        for w in text.lower().split()
    ]


def _has_all(data: bytes, words: list[tuple[bytes, bytes]]) -> bool:
    low = data.lower()
    return all(raw in low or escaped in low for raw, escaped in words)


def _tail(path: Path) -> bytes:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            size = fh.tell()
            fh.seek(max(0, size - TAIL_BYTES))
            return fh.read()
    except OSError:
        return b""


def journals(directory: Path) -> dict[str, Path]:
    """Every session journal in `directory`, by session id."""
    found: dict[str, Path] = {}
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return found
    for entry in entries:
        if entry.name.endswith(JOURNAL_SUFFIX):
            found[entry.name[: -len(JOURNAL_SUFFIX)]] = Path(entry.path)
    return found


def search(
    text: str,
    rows: Iterable[SessionSummary],
    journal_dir: Path,
    transcripts: dict[str, str],
) -> list[str]:
    """Ids of the sessions where every word of `text` shows, in their row,
    their journal or their agent's transcript; in `rows` order first."""
    words = _words(text)
    if not words:
        return []
    hits: list[str] = []
    seen: set[str] = set()
    for r in rows:
        row = f"{r.name or ''} {r.intent} {r.repo} {r.label} {r.session_id} {r.engine}"
        if _has_all(row.encode("utf-8"), words):
            hits.append(r.session_id)
            seen.add(r.session_id)
    for sid, journal in journals(journal_dir).items():
        if sid in seen:
            continue
        try:
            data = journal.read_bytes()
        except OSError:
            continue
        if _has_all(data, words):
            hits.append(sid)
            seen.add(sid)
    for sid, transcript in transcripts.items():
        if sid in seen:
            continue
        found = resolve(transcript)
        if found is not None and _has_all(_tail(found), words):
            hits.append(sid)
            seen.add(sid)
    return hits
