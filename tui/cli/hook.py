"""`corral hook --file F EVENT`: what agent hooks run. Appends one JSON line
`{"event", "ts", "payload"}` to the session's hooks file, which the
supervisor watches. Stdlib only and always exit 0, so a hook can never slow
down or break the agent.

Claude Code and the demo agent pass the payload on stdin; Codex's `notify`
passes it as the last argument (`--argv-payload`). The event `impossible`
(`echo REASON | $CORRAL_HOOK_CMD impossible`) is an agent saying its task
cannot be done as specified; a payload that is not JSON arrives as `raw`.
"""

from __future__ import annotations

import json
import os
import sys
import time


def run_hook(argv: list[str]) -> int:
    path = None
    argv_payload = False
    incarnation: int | None = None
    rest: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg == "--file":
            path = next(it, None)
        elif arg == "--incarnation":
            try:
                incarnation = int(next(it, ""))
            except ValueError:
                incarnation = None
        elif arg == "--argv-payload":
            argv_payload = True
        else:
            rest.append(arg)
    if not path:
        return 0
    event = rest[0] if rest else ""
    raw = ""
    try:
        if argv_payload:
            raw = rest[1] if len(rest) > 1 else ""
        elif not sys.stdin.isatty():
            raw = sys.stdin.read(1_000_000)
        payload = json.loads(raw) if raw.strip() else {}
    except (ValueError, OSError):
        payload = {"raw": raw[:10_000]}
    if isinstance(payload, dict) and not event:
        event = str(payload.get("hook_event_name") or payload.get("type") or "")
    row: dict[str, object] = {"event": event, "ts": time.time(), "payload": payload}
    if incarnation is not None:
        row["incarnation"] = incarnation  # the pane it came from (late lines are dropped)
    line = json.dumps(row) + "\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)
    except OSError:
        pass
    return 0
