"""`corral status [--tmux]`: one line saying how many sessions need you, run
and finished, for a shell prompt or tmux's `status-right` (refreshed every few
seconds, so it stays cheap: no models, no pydantic).

With an owner running the counts are its live rows (one `list` call on the
control socket, parsed with the standard library); with none, the rows the
store keeps. `--tmux` styles the needs-you count for the status line and
prints nothing at all when no session is in progress, so an idle corral takes
no room there."""

from __future__ import annotations

import json
import logging
import socket
import sys
from pathlib import Path
from typing import Any

from corral.supervisor.paths import SOCKET_NAME, default_state_dir, owner_running
from corral.supervisor.stored_rows import DB_NAME, stored_board_rows

from .output import say

log = logging.getLogger("corral.tui.cli.status")

TERMINAL = {"merged", "reported", "failed", "abandoned"}
ASK_TIMEOUT = 2.0  # seconds: a status line never hangs on a busy owner


def _live_rows(state_dir: Path) -> list[dict[str, Any]] | None:
    """The owner's board rows, or None when it does not answer in time."""
    request = b'{"jsonrpc":"2.0","id":1,"method":"list","params":{}}\n'
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(ASK_TIMEOUT)
            sock.connect(str(state_dir / SOCKET_NAME))
            sock.sendall(request)
            chunks: list[bytes] = []
            while not chunks or not chunks[-1].endswith(b"\n"):
                chunk = sock.recv(1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
    except OSError:
        return None
    try:
        answer = json.loads(b"".join(chunks))
    except ValueError:
        return None
    result = answer.get("result") if isinstance(answer, dict) else None
    return result if isinstance(result, list) else None


def counts(state_dir: Path) -> tuple[int, int, int, bool] | None:
    """(need you, in progress, finished, live) over the board's rows (archived
    ones left out); None when the store cannot be read."""
    rows: list[dict[str, Any]] | None = None
    live = False
    if owner_running(state_dir):
        rows = _live_rows(state_dir)
        live = rows is not None
    if rows is None and not (state_dir / DB_NAME).exists():
        rows = []  # a state dir with no store yet: nothing to count
    if rows is None:
        stored = stored_board_rows(state_dir)
        if stored is not None:
            rows = [vars(r) for r in stored]
        else:  # rows the quick path cannot vouch for: the full reading
            from corral.supervisor.stored_board import stored_sessions

            try:
                full = stored_sessions(state_dir)
            except Exception as exc:  # a store it cannot read: said in one line by the caller
                log.info("the store could not be read: %s", exc)
                return None
            rows = [r.model_dump(mode="json") for r in full.rows]
    need = running = done = 0
    for row in rows:
        if row.get("archived"):
            continue
        state = str(row.get("state", ""))
        state = state.rsplit(".", 1)[-1].lower() if "." in state else state
        if row.get("needs_you"):
            need += 1
        elif state in TERMINAL:
            done += 1
        else:
            running += 1
    return need, running, done, live


def status(*, tmux: bool) -> int:
    found = counts(default_state_dir())
    if found is None:
        if not tmux:
            say("corral: the store cannot be read (run corral doctor)", file=sys.stderr)
        return 0 if tmux else 1
    need, running, done, live = found
    if tmux:
        if need:
            say(f"#[fg=yellow,bold]corral: {need} need you#[default] · {running} running")
        elif running:
            say(f"corral: {running} running")
        return 0
    where = "" if live else " (as stored: no corral owns the state dir now)"
    say(f"{need} need you · {running} in progress · {done} finished{where}")
    return 0
