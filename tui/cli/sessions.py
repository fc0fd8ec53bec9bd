"""`corral sessions [--json]`: stored sessions. Readers never need the owner
lock (the database is opened read-only), so a running console is fine."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from corral.supervisor.housekeeping import stored_sessions
from corral.supervisor.paths import default_state_dir


def list_sessions(*, as_json: bool) -> int:
    state_dir = default_state_dir()
    stored = stored_sessions(state_dir)
    if as_json:
        print(json.dumps([r.model_dump(mode="json") for r in stored.rows], indent=2))
    else:
        if not stored.rows:
            print(f"no stored sessions in {state_dir}")
        now = time.time()
        for r in stored.rows:
            first = r.intent.splitlines()[0] if r.intent else ""
            age = int(max(0, now - r.updated_at))
            print(f"{r.label}  {r.state.value:<17} {age:>7}s ago  {Path(r.repo).name:<16} {first}")
    for sid in stored.unreadable:
        print(f"corral: stored session {sid} could not be read (left untouched)", file=sys.stderr)
    return 0
