"""Tokens and cost on a board row, read by the owner from the agent's own
transcript as it grows: the row and `corral sessions --json` show them, a
`[budget]` crossed marks the row and the `on_over_budget` hook hears of it
once (not again as the cost grows, not again after a restart)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.models import AgentIdentity, IdentityState, SessionSummary
from corral.supervisor.session.board import Watcher
from corral.supervisor.stored_rows import stored_rows_json
from tests.conftest import SupervisorFactory, eventually, proposed, row_of
from tests.integration.conftest import OwnerFactory

LINE = 'printf "%s|%s|%s\\036" "$CORRAL_EVENT" "$CORRAL_SESSION_ID" "$CORRAL_OVER_BUDGET" >> "$0"'
AGENT_SESSION = "0b7d4c3e-1111-4222-8333-944455556666"
WORKDIR: list[str] = []  # the session's worktree, where its agent's records say they work


def assistant(message_id: str, out: int, *, fresh: int = 1000, session: str = AGENT_SESSION) -> str:
    return json.dumps(
        {
            "type": "assistant",
            "sessionId": session,
            "cwd": WORKDIR[-1],
            "message": {
                "id": message_id,
                "model": "claude-sonnet-4-5-20250929",
                "usage": {
                    "input_tokens": fresh,
                    "output_tokens": out,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                },
            },
        }
    )


def hook_lines(log: Path) -> list[list[str]]:
    if not log.exists():
        return []
    return [r.split("|") for r in log.read_text().split("\x1e")[:-1]]


async def logged(log: Path, count: int) -> list[list[str]]:
    """The hook log once it holds at least `count` records."""
    await eventually(lambda: len(hook_lines(log)) >= count, timeout=10)
    return hook_lines(log)


async def closed_log(
    sup: Supervisor, watcher: Watcher, pushed: Callable[[SessionSummary], bool], log: Path
) -> list[list[str]]:
    """Every hook the owner ran, read once its notifier has had the board push
    `pushed` matches (it watches from open, so each push reaches it before this
    test's later watcher) and the owner has closed (close waits for each hook
    run it started)."""
    async with asyncio.timeout(10):
        while not any(pushed(r) for r in await watcher.get()):
            pass
    await asyncio.sleep(0)  # the notifier's turn with that push, if not taken yet
    await sup.close()
    return hook_lines(log)


async def test_a_growing_transcript_shows_on_the_row_and_crossing_the_budget_is_heard_once(
    make_owner: OwnerFactory,
    make_supervisor: SupervisorFactory,
    repo: Path,
    tmp_path: Path,
    state_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    transcript = home / ".claude" / "projects" / "-work-x" / f"{AGENT_SESSION}.jsonl"
    transcript.parent.mkdir(parents=True)
    log = tmp_path / "hooks.log"
    notify = {"desktop": False, "on_over_budget": ["sh", "-c", LINE, str(log)]}
    sup, registry = await make_owner(
        usage_secs=0.1, budget={"per_session_usd": 0.10}, notify=notify
    )
    _, watcher = sup.watch()
    sid = await proposed(sup, repo)

    def adopt(s):  # type: ignore[no-untyped-def]
        s.agent_identity = AgentIdentity(
            agent="claude",
            session_id=AGENT_SESSION,
            transcript_path=str(transcript),
            state=IdentityState.LIVE,
        )

    registry.amend(sid, adopt)
    worktree = sup.get(sid).session.worktree
    assert worktree
    WORKDIR.append(worktree)
    # 1,000 in + 2,000 out at $3/$15 per million: $0.033
    transcript.write_text(assistant("msg_1", 2000) + "\n")
    await eventually(lambda: row_of(sup, sid).tokens_out == 2000, timeout=10)
    row = row_of(sup, sid)
    assert (row.tokens_in, row.cost_usd, row.price_unknown) == (1000, pytest.approx(0.033), False)
    assert row.over_budget is None

    # the same message written again as it grew, then a new one: $0.108
    with transcript.open("a") as fh:
        fh.write(assistant("msg_1", 4000) + "\n" + assistant("msg_2", 2000) + "\n")
    await eventually(lambda: row_of(sup, sid).tokens_out == 6000, timeout=10)
    row = row_of(sup, sid)
    assert row.tokens_in == 2000 and row.cost_usd == pytest.approx(0.096)
    assert row.over_budget is None
    with transcript.open("a") as fh:
        fh.write(assistant("msg_3", 1000) + "\n")
    await eventually(lambda: row_of(sup, sid).over_budget is not None, timeout=10)
    assert row_of(sup, sid).over_budget == "over budget: $0.11 of $0.10"
    got = await logged(log, 1)
    assert got == [["over_budget", sid, "over budget: $0.11 of $0.10"]]

    # more spending: the sentence follows, the notice is not repeated
    with transcript.open("a") as fh:
        fh.write(assistant("msg_4", 1000) + "\n")
    spent = "over budget: $0.13 of $0.10"
    await eventually(lambda: row_of(sup, sid).over_budget == spent, timeout=10)
    assert len(await closed_log(sup, watcher, lambda r: r.over_budget == spent, log)) == 1

    listed = stored_rows_json(state_dir)
    assert listed is not None
    kept = next(r for r in json.loads(listed) if r["session_id"] == sid)
    assert kept["tokens_out"] == 8000 and kept["over_budget"] == "over budget: $0.13 of $0.10"

    again = await make_supervisor(usage_secs=0.1, budget={"per_session_usd": 0.10}, notify=notify)
    _, watcher = again.watch()
    await eventually(lambda: row_of(again, sid).tokens_out == 8000, timeout=10)
    again.rename(sid, "pushed again")  # the row goes to every board once more
    got = await closed_log(again, watcher, lambda r: r.name == "pushed again", log)
    assert len(got) == 1, "a restarted owner told of an old crossing again"


async def test_a_built_in_engine_run_in_progress_counts_on_the_row_and_for_the_budget(
    make_owner: OwnerFactory, repo: Path
) -> None:
    from corral.supervisor.llm.base import Usage

    sup, registry = await make_owner(usage_secs=0.1, budget={"per_session_tokens": 1000})
    sid = await proposed(sup, repo)
    live = registry.get_live(sid)
    assert live is not None
    # what the model chain served this session so far, not yet folded into it
    live.model_ledger.add(Usage(input_tokens=900, output_tokens=200, cost_usd=0.02), "m")
    registry.notify(sid)
    await eventually(lambda: row_of(sup, sid).over_budget is not None, timeout=10)
    row = row_of(sup, sid)
    assert (row.tokens_in, row.tokens_out, row.cost_usd) == (900, 200, 0.02)
    assert row.over_budget == "over budget: 1,100 of 1,000 tokens"
