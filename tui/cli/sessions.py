"""`corral sessions [--json]`: sessions, one line each (the intent cut to the
terminal's width; `--json` has all of it). With an owner running they come
from it (live rows); with none, from the store opened read-only (no lock
needed)."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from corral.supervisor.paths import default_state_dir, owner_running

from .output import json_bytes, say, write_json_bytes

if TYPE_CHECKING:
    from corral.supervisor.models import SessionSummary

PIPE_WIDTH = 160  # the line width when stdout is not a terminal
NEEDS_WORDS = {"auth": "sign-in", "merge": "approval"}  # what the operator is asked for


def _line_width() -> int:
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    return PIPE_WIDTH


def one_line(text: str, width: int) -> str:
    """`text` as one line of at most `width` characters (at least 20): the
    first line, whitespace runs collapsed, cut with "…" when anything is left
    out (a later line counts)."""
    width = max(20, width)
    lines = text.strip().splitlines()
    first = " ".join(lines[0].split()) if lines else ""
    if len(first) <= width and len(lines) <= 1:
        return first
    return first[: width - 1].rstrip() + "…"


def status_words(row: SessionSummary) -> str:
    """The row's state as the board says it, in plain words: a session that
    waits on the operator, a dormant one and one whose host does not answer
    are not just `running`."""
    from corral.supervisor.states import said

    state = said(row.state)
    if row.dormant:
        return "dormant"
    if row.needs_you is not None:
        return f"needs you: {NEEDS_WORDS.get(row.needs_you.value, row.needs_you.value)}"
    if row.live and not row.state.is_terminal and row.agent_status:
        if row.agent_status == "unreachable":
            return "host unreachable"
        return f"agent {'signed out' if row.agent_status == 'auth' else row.agent_status}"
    return state


def repo_top(path: str) -> str:
    """The top of the git repository holding `path`, as sessions record it."""
    import subprocess

    from corral.supervisor.errors import CorralError

    try:
        out = subprocess.run(
            ["git", "-C", path, "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except OSError as exc:
        raise CorralError(f"cannot run git to read {path}: {exc}") from exc
    if out.returncode != 0:
        raise CorralError(f"{path} is not in a git repository: pass a path inside one")
    return str(Path(out.stdout.strip()).resolve())


def list_sessions(*, as_json: bool, repo: str | None = None) -> int:
    state_dir = default_state_dir()
    owned = owner_running(state_dir)
    only = repo_top(repo) if repo is not None else None
    if as_json and not owned and only is None:
        # the stored rows as kept, without importing the engine (most of the time)
        from corral.supervisor.stored_rows import stored_rows_json

        from .common import config_checked

        checked = config_checked()
        also = checked if checked is not None else ("config", "not read")
        quick = stored_rows_json(state_dir, finish=json_bytes, also=also)
        if quick is not None:
            write_json_bytes(quick, escaped=True)
            return 0
    from corral.supervisor.remote import ControlClient, NoOwner
    from corral.supervisor.stored_board import stored_sessions

    if owned:
        try:
            with ControlClient(state_dir) as client:
                rows = client.list()
        except NoOwner:
            pass  # gone in between: the store says the rest
        else:
            return _print(state_dir, _on(rows, only), [], as_json)
    stored = stored_sessions(state_dir)
    code = _print(state_dir, _on(stored.rows, only), stored.unreadable, as_json)
    if not as_json and stored.rows:
        say(f"(as stored: no corral owns {state_dir} now, so none of these is live)")
    return code


def _on(rows: list[SessionSummary], repo: str | None) -> list[SessionSummary]:
    if repo is None:
        return rows
    return [r for r in rows if str(Path(r.repo).resolve()) == repo]


def _print(
    state_dir: Path, rows: list[SessionSummary], unreadable: list[str], as_json: bool
) -> int:
    if as_json:
        from corral.supervisor.stored_board import stored_sessions_json

        write_json_bytes(stored_sessions_json(rows))  # UTF-8, whatever the locale's encoding
    else:
        if not rows:
            say(f"no stored sessions in {state_dir}")
        now = time.time()
        width = _line_width()
        for r in rows:
            age = int(max(0, now - r.updated_at))
            words = status_words(r)
            line = f"{r.label}  {words:<17} {age:>7}s ago  {Path(r.repo).name:<16} "
            say(line + one_line(r.intent, width - len(line)))
    for sid in unreadable:
        say(f"corral: stored session {sid} could not be read (left untouched)", file=sys.stderr)
    return 0
