"""A board bigger than a request may be: `corral sessions` against an owner
whose list answer is over 1 MiB (the request limit) prints every session —
it used to stop at 1 MiB and fail on half a JSON line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from corral.supervisor.models import CoderSession
from corral.supervisor.session.summaries import summary_json
from corral.supervisor.states import CoderState
from corral.supervisor.store import Store
from tests.integration.test_control_cli import corral, serve, site, stop

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

__all__ = ["site"]  # the fixture, shared with the control tests

SESSIONS = 600


@pytest.mark.slow
def test_a_list_answer_over_a_mebibyte_arrives_whole(site: Path) -> None:
    store = Store(site / "home", summarize=summary_json)
    for n in range(SESSIONS):
        intent = f"task {n}: " + "rename the helpers and keep their callers working " * 40
        store.save_session(
            CoderSession(id=f"s{n:05d}", repo="/r", intent=intent, state=CoderState.MERGED)
        )
    store.close()

    owner = serve(site)
    try:
        out = corral(site, "sessions", "--json")
    finally:
        stop(owner)
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.encode()) > 1 << 20
    rows = json.loads(out.stdout)
    assert len(rows) == SESSIONS
    assert {r["session_id"] for r in rows} == {f"s{n:05d}" for n in range(SESSIONS)}
