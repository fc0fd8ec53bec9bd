"""ACP agents (`acp:<command line>`) end to end: the scripted ACP agent in
tests/fakes speaks the protocol over stdio, confined like any agent, driven
through the supervisor's public API to the approval gate (or to a failure
that says why). Each test breaks one promise of the protocol's edge cases."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.errors import CorralError
from corral.supervisor.events import BlockedData, ConversationData, PaneAnswerData
from corral.supervisor.factory import build_supervisor
from corral.supervisor.models import ContractCheck, EventKind, OutcomeContract
from corral.supervisor.states import CoderState as S
from tests.conftest import events_of, fast_config, init_repo, plan_texts, row_of

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

FAKE = Path(__file__).resolve().parents[1] / "fakes" / "acp_agent.py"
NOTES = OutcomeContract(
    description="notes.txt says done",
    checks=[ContractCheck(name="notes_done", command="grep -q done notes.txt", timeout_secs=10)],
)


def engine(script: str, *args: str) -> str:
    return " ".join(["acp:" + sys.executable, str(FAKE), script, *args])


@pytest.fixture
async def world(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[Path, Callable[..., object]]]:
    repo = init_repo(tmp_path / "repo")
    out = tmp_path / "out"
    out.mkdir()
    # what the fake records goes to a declared sandbox cache, as an operator would
    monkeypatch.setenv("ACP_FAKE_OUT", str(out))
    monkeypatch.setenv("CORRAL_AGENT_ENV_ALLOW", "ACP_FAKE_OUT")
    opened: list[Supervisor] = []

    async def open_sup(**cfg: object) -> Supervisor:
        cfg.setdefault("sandbox", {"writable": [str(out)]})
        sup = build_supervisor(
            tmp_path / "state",
            FixedDrafter(NOTES),
            socket_dir=tmp_path / "tmux",
            config=fast_config(**cfg),
        )
        await sup.open()
        opened.append(sup)
        return sup

    yield repo, open_sup
    for sup in opened:
        await sup.close()


def recorded(tmp_path: Path, script: str) -> list[dict[str, object]]:
    path = tmp_path / "out" / f"{script}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


async def start(sup: Supervisor, repo: Path, name: str) -> str:
    sid = (await sup.start("Write done to notes.txt", repo, engine=name)).session_id
    await sup.confirm(sid)
    return sid


def conversation(sup: Supervisor, sid: str) -> list[ConversationData]:
    return [e.data for e in events_of(sup, sid) if isinstance(e.data, ConversationData)]


async def test_a_permission_answered_by_the_operator_lets_the_agent_write_and_the_diff_verifies(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    sup = await open_sup()
    sid = await start(sup, repo, engine("write"))
    row = await sup.wait_for(sid, needs=True, timeout=30)
    assert row.needs_you == "question", row.error
    # the agent's own options, with their kinds, and the edit's diff in the question
    assert sup.question_options(sid) == [
        "Allow [allow_once]",
        "Always allow [allow_always]",
        "Reject [reject_once]",
    ]
    asked = [e.data for e in events_of(sup, sid) if e.kind is EventKind.USER_INPUT_REQUESTED]
    assert asked[0].prompt.startswith("Write notes.txt (edit)")
    assert "+done" in asked[0].prompt
    assert row.agent_status == "waiting"
    assert not (Path(sup.get(sid).session.worktree or "") / "notes.txt").exists()
    await sup.respond(sid, "yes-once")  # by option id
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=30)
    assert row.state is S.NEEDS_APPROVAL, row.error
    assert recorded(tmp_path, "write")[-1] == {"permission": "yes-once"}
    answers = [e.data for e in events_of(sup, sid) if isinstance(e.data, PaneAnswerData)]
    assert answers and "sent option yes-once" in answers[0].action
    parts = conversation(sup, sid)
    said = [p.text for p in parts if p.part == "message"]
    assert "Working on it now." in said and "I wrote notes.txt." in said
    assert [p.text for p in parts if p.part == "turn_end"] == ["end_turn"]
    assert any(p.part == "plan" and "write notes.txt" in p.text for p in parts)
    assert any(p.part == "thought" for p in parts)
    statuses = [e.data for e in events_of(sup, sid) if e.kind is EventKind.AGENT_STATUS]
    assert {s.source for s in statuses} == {"protocol"}
    assert any(s.reason == "turn ended: end_turn" for s in statuses)
    # the verified diff is the agent's file, delivered like any other
    assert [p.path for p in await sup.review_files(sid)] == ["notes.txt"]


async def test_a_rejected_permission_is_blocked_by_the_operator_and_nothing_is_written(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    sup = await open_sup(repair_invokes=0)
    sid = await start(sup, repo, engine("write"))
    row = await sup.wait_for(sid, needs=True, timeout=30)
    assert row.needs_you == "question", row.error
    await sup.respond(sid, "Reject")  # by name
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=30)
    assert row.state is S.FAILED  # nothing written: the runtime's checks say so
    blocked = [e.data for e in events_of(sup, sid) if isinstance(e.data, BlockedData)]
    assert [(b.by, b.what) for b in blocked] == [("operator", "Write notes.txt")]
    assert recorded(tmp_path, "write")[-1] == {"permission": "no"}


async def test_a_write_outside_the_worktree_is_refused_and_shown_as_blocked(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    target = tmp_path / "out" / "escaped.txt"
    sup = await open_sup()
    sid = await start(sup, repo, engine("outside", str(target)))
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=30)
    assert row.state is S.NEEDS_APPROVAL, row.error
    assert not target.exists()
    blocked = [e.data for e in events_of(sup, sid) if isinstance(e.data, BlockedData)]
    assert len(blocked) == 1 and blocked[0].by == "policy"
    assert str(target) in blocked[0].what and "outside the session's worktree" in blocked[0].why
    said = " ".join(p.text for p in conversation(sup, sid) if p.part == "message")
    assert "outside write refused" in said


async def test_a_symlink_out_of_the_worktree_is_refused(tmp_path: Path, world) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    (tmp_path / "out" / "real").mkdir()
    sup = await open_sup()
    sid = (await sup.start("Write done to notes.txt", repo, engine=engine("write"))).session_id
    worktree = Path(sup.get(sid).session.worktree or "")
    (worktree / "link").symlink_to(tmp_path / "out" / "real")
    from corral.supervisor.acp.files import Refused, WorktreeFiles

    files = WorktreeFiles(worktree)
    with pytest.raises(Refused, match="outside the session's worktree"):
        files.write(str(worktree / "link" / "x.txt"), "escaped")
    with pytest.raises(Refused, match="git metadata"):
        files.write(str(worktree / ".git"), "gitdir: /elsewhere")
    assert not (tmp_path / "out" / "real" / "x.txt").exists()


async def test_the_shell_runs_through_corrals_confined_terminal(tmp_path: Path, world) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    sup = await open_sup()
    sid = await start(sup, repo, engine("shell"))
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=30)
    assert row.state is S.NEEDS_APPROVAL, row.error
    assert recorded(tmp_path, "shell")[-1] == {"exit": 0, "output": "ok\n"}


async def test_cancel_mid_turn_sends_session_cancel_and_stops_the_agent(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    sup = await open_sup()
    sid = await start(sup, repo, engine("slow"))
    deadline = time.monotonic() + 30
    while not any(p.part == "message" for p in conversation(sup, sid)):
        assert time.monotonic() < deadline, "the agent never started its turn"
        await asyncio.sleep(0.05)
    assert sup.list()[0].agent_status == "running"
    pid = int((sup.get(sid).session.pane or {}).get("pid") or 0)
    began = time.monotonic()
    await sup.cancel(sid)
    assert time.monotonic() - began < 5
    row = await sup.wait_for(sid, {S.ABANDONED, S.FAILED}, timeout=10)
    assert row.state is S.ABANDONED
    assert {"cancel": "fake-session-1"} in recorded(tmp_path, "slow")
    assert pid, "the agent's pid was recorded"
    assert not Path(f"/proc/{pid}").exists() or _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return True


async def test_lines_that_are_not_json_rpc_are_reported_and_the_turn_goes_on(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    sup = await open_sup()
    sid = await start(sup, repo, engine("garbage"))
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=30)
    assert row.state is S.NEEDS_APPROVAL, row.error
    assert any("not JSON-RPC" in t and "this is not json" in t for t in plan_texts(sup, sid))


async def test_an_agent_that_never_answers_initialize_fails_with_a_clear_sentence(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    sup = await open_sup(acp_start_timeout_secs=1.5)
    sid = await start(sup, repo, engine("mute"))
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=30)
    assert row.state is S.FAILED
    error = sup.get(sid).session.error or ""
    assert "did not answer `initialize` within 1.5s" in error
    assert "--acp" in error


async def test_an_agent_that_exits_mid_turn_fails_saying_so_and_keeps_its_work(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    sup = await open_sup()
    sid = await start(sup, repo, engine("exit"))
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=30)
    assert row.state is S.FAILED
    error = sup.get(sid).session.error or ""
    assert "exited with status 3 during its turn" in error
    assert "crash: out of cheese" in error
    # what it said before it went is journaled, and the worktree is kept
    assert any(p.text == "Working on it now." for p in conversation(sup, sid))
    assert Path(sup.get(sid).session.worktree or "").is_dir()


async def test_the_mode_is_shown_and_set_over_the_protocol(tmp_path: Path, world) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    sup = await open_sup()
    sid = await start(sup, repo, engine("slow"))
    deadline = time.monotonic() + 30
    while not any(p.part == "message" for p in conversation(sup, sid)):
        assert time.monotonic() < deadline, "the agent never started its turn"
        await asyncio.sleep(0.05)
    modes = [p.text for p in conversation(sup, sid) if p.part == "mode"]
    assert modes == ["ask (offers: ask, code)"]
    with pytest.raises(CorralError, match="offers no mode 'yolo'; it offers: ask, code"):
        await sup.set_mode(sid, "yolo")
    assert await sup.set_mode(sid, "code") == {"mode": "code"}
    assert {"mode": "code"} in recorded(tmp_path, "slow")
    assert [p.text for p in conversation(sup, sid) if p.part == "mode"][-1].startswith("code")
    await sup.cancel(sid)
    with pytest.raises(CorralError, match="not running"):
        await sup.set_mode(sid, "ask")


async def test_a_pane_agent_has_no_modes_to_set(tmp_path: Path, world) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    sup = await open_sup()
    sid = await start(sup, repo, "external:demo")
    deadline = time.monotonic() + 30
    while (sup.get(sid).session.pane or {}).get("state") != "live":
        assert time.monotonic() < deadline, "the demo agent's pane never started"
        await asyncio.sleep(0.05)
    with pytest.raises(CorralError, match="only ACP agents announce them"):
        await sup.set_mode(sid, "code")
    await sup.cancel(sid)


async def test_a_dormant_acp_session_revives_into_its_conversation_with_session_load(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    sup = await open_sup()
    sid = await start(sup, repo, engine("load"))
    deadline = time.monotonic() + 30
    while not row_of(sup, sid).dormant:
        assert sup.get(sid).session.state is S.RUNNING, sup.get(sid).session.error
        assert time.monotonic() < deadline, "the session never went dormant"
        await asyncio.sleep(0.05)
    assert any("exited with status 4 during its turn" in t for t in plan_texts(sup, sid))
    await sup.revive(sid)
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=30)
    assert row.state is S.NEEDS_APPROVAL, row.error
    seen = recorded(tmp_path, "load")
    assert {"loaded": "fake-session-1"} in seen
    # the loaded conversation is told to continue, not given the task afresh
    assert "started you again on the same conversation" in str(seen[-1].get("prompt", ""))


async def test_the_preview_and_session_view_show_the_conversation_for_an_acp_agent(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    sup = await open_sup()
    sid = await start(sup, repo, engine("outside", str(tmp_path / "out" / "x")))
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=30)
    assert row.state is S.NEEDS_APPROVAL, row.error
    screen = sup.agent_screen(sid)
    assert screen is not None and sup.agent_screen_version(sid) > 0
    shown = "\n".join(screen.lines)
    assert "» Write done to notes.txt" in shown
    assert "Working on it now." in shown and "I wrote notes.txt." in shown
    assert "blocked (policy): fs/write_text_file" in shown
    assert shown.rstrip().endswith("— turn ended: end_turn")


async def test_the_tokens_an_acp_agent_reports_reach_its_row_with_price_unknown(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    sup = await open_sup(usage_secs=0.1, budget={"per_session_tokens": 5000})
    sid = await start(sup, repo, engine("usage", "3000,400,100,2000,500"))
    await sup.wait_for(sid, {S.NEEDS_APPROVAL}, timeout=30)

    def over() -> bool:
        return row_of(sup, sid).over_budget is not None

    deadline = time.monotonic() + 10
    while not over() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    row = row_of(sup, sid)
    # thoughts are billed as output; no price is known for the agent's name
    assert (row.tokens_in, row.tokens_out, row.tokens_cache_read, row.tokens_cache_write) == (
        3000,
        500,
        2000,
        500,
    )
    assert row.cost_usd is None and row.price_unknown
    assert row.over_budget == "over budget: 6,000 of 5,000 tokens"
