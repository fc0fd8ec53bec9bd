"""The board grouped by repository: one heading line per repo (its name and
counts), its rows under it in board order (needs-you first). Repos are in
name order, so a group does not jump when one of its sessions changes.

Pure functions of the rows; the board only shows what comes out.
"""

from __future__ import annotations

import os
from collections import Counter
from typing import TYPE_CHECKING

from rich.text import Text

if TYPE_CHECKING:
    from corral.supervisor.models import SessionSummary

from . import rows as R

HEADING = "\x1frepo:"  # a heading line's key: never a session id


def is_heading(key: str) -> bool:
    return key.startswith(HEADING)


def _names(repos: list[str]) -> dict[str, str]:
    """A repo's directory name; its whole path where two repos share a name."""
    base = {repo: os.path.basename(repo.rstrip("/")) or repo for repo in repos}
    taken = Counter(base.values())
    return {repo: name if taken[name] == 1 else repo for repo, name in base.items()}


def group_lines(ordered: list[SessionSummary]) -> tuple[list[str], dict[str, Text]]:
    """The table's keys with a heading before each repo's rows, and each
    heading's title. `ordered` is in board order; each group keeps it."""
    by_repo: dict[str, list[SessionSummary]] = {}
    for row in ordered:
        by_repo.setdefault(row.repo, []).append(row)
    names = _names(list(by_repo))
    keys: list[str] = []
    titles: dict[str, Text] = {}
    for repo in sorted(by_repo, key=lambda r: (names[r].lower(), r)):
        rows = by_repo[repo]
        key = HEADING + repo
        titles[key] = Text.assemble(
            ("▾ " + names[repo], "bold"), ("   " + R.counts_line(rows), "dim")
        )
        keys.append(key)
        keys.extend(r.session_id for r in rows)
    return keys, titles
