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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
async def test_a_turn_the_agent_refuses_is_blocked_by_the_agent(tmp_path: Path, world) -> None:  # type: ignore[no-untyped-def]
    """The "by the agent" notice: a `refusal` stopReason (a typed field of
    the protocol, never the agent's words) is a blocked event by the provider."""
    repo, open_sup = world
    sup = await open_sup(repair_invokes=0)
    sid = await start(sup, repo, engine("refuse"))
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=30)
    assert row.state is S.FAILED
    blocked = [e.data for e in events_of(sup, sid) if isinstance(e.data, BlockedData)]
    assert [(b.by, b.what) for b in blocked] == [("provider", "its turn")]
    assert "stopReason: refusal" in blocked[0].why


@pytest.mark.slow
async def test_a_rate_limited_prompt_is_blocked_by_the_provider(tmp_path: Path, world) -> None:  # type: ignore[no-untyped-def]
    """An ACP agent answering the prompt with error code 429 (its provider's
    rate limit) gives a typed blocked event by the provider, then the
    failure with the agent's own sentence."""
    repo, open_sup = world
    sup = await open_sup(repair_invokes=0)
    sid = await start(sup, repo, engine("limited"))
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=30)
    assert row.state is S.FAILED
    blocked = [e.data for e in events_of(sup, sid) if isinstance(e.data, BlockedData)]
    assert [b.by for b in blocked] == ["provider"], blocked
    assert "Rate limit reached" in blocked[0].why


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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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
    # what the agent replays while loading is counted, not journaled as said again
    said = [p.text for p in conversation(sup, sid) if p.part == "message"]
    assert not any("(replayed)" in t for t in said), said
    assert any("replayed its conversation (1 update)" in t for t in plan_texts(sup, sid))


@pytest.mark.slow
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


async def _turn_started(sup: Supervisor, sid: str) -> None:
    deadline = time.monotonic() + 30
    while not any(p.part == "message" for p in conversation(sup, sid)):
        assert sup.get(sid).session.state is not S.FAILED, sup.get(sid).session.error
        assert time.monotonic() < deadline, "the agent never started its turn"
        await asyncio.sleep(0.05)


async def test_models_and_config_options_are_kept_shown_and_set_over_the_protocol(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    sup = await open_sup()
    sid = await start(sup, repo, engine("models"))
    await _turn_started(sup, sid)
    # what the agent announced, on the session and its board row
    offers = sup.get(sid).session.agent_offers
    assert offers is not None
    assert [m.id for m in offers.models] == ["fast-1", "deep-2"]
    assert (offers.mode, offers.model) == ("ask", "fast-1")
    row = row_of(sup, sid)
    assert (row.agent_mode, row.agent_model) == ("ask", "fast-1")
    # the agent moved `reasoning` itself during its turn: the update is kept
    deadline = time.monotonic() + 10
    while (row_of(sup, sid).agent_options or {}).get("reasoning") != "medium":
        assert time.monotonic() < deadline, row_of(sup, sid).agent_options
        await asyncio.sleep(0.05)
    assert row_of(sup, sid).agent_options == {"reasoning": "medium", "web": "false"}
    parts = conversation(sup, sid)
    assert "fast-1 (offers: fast-1, deep-2)" in [p.text for p in parts if p.part == "model"]
    assert any(p.part == "config" and "reasoning = low" in p.text for p in parts)
    # a model it does not offer is refused naming the ones it does; nothing is sent
    with pytest.raises(
        CorralError, match=r"offers no model 'gpt-9'; it offers: fast-1 \(Fast\), deep-2 \(Deep\)"
    ):
        await sup.set_model(sid, "gpt-9")
    assert not any("model" in e for e in recorded(tmp_path, "models"))
    # by its name or its id; the choice arrives at the agent
    assert await sup.set_model(sid, "Deep") == {"model": "deep-2"}
    assert {"model": "deep-2"} in recorded(tmp_path, "models")
    assert await sup.set_option(sid, "reasoning", "high") == {"key": "reasoning", "value": "high"}
    assert await sup.set_option(sid, "web", "on") == {"key": "web", "value": "true"}
    seen = recorded(tmp_path, "models")
    assert {"option": "reasoning", "value": "high"} in seen
    assert {"option": "web", "value": True} in seen  # a boolean goes as one
    with pytest.raises(CorralError, match="has no value 'max'; it offers: low, medium, high"):
        await sup.set_option(sid, "reasoning", "max")
    with pytest.raises(CorralError, match="has no config option 'speed'; it has: reasoning"):
        await sup.set_option(sid, "speed", "1")
    row = row_of(sup, sid)
    assert (row.agent_model, row.agent_options) == ("deep-2", {"reasoning": "high", "web": "true"})
    assert [p.text for p in conversation(sup, sid) if p.part == "model"][-1] == (
        "deep-2 (set by the operator)"
    )
    await sup.cancel(sid)
    # kept on the stored session after its run
    stored = sup.get(sid).session.agent_offers
    assert stored is not None and stored.model == "deep-2"
    with pytest.raises(CorralError, match="not running"):
        await sup.set_model(sid, "fast-1")


@pytest.mark.slow
async def test_a_pinned_model_is_asked_for_with_session_set_model(tmp_path: Path, world) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    sup = await open_sup()
    sid = (await sup.start("Write done", repo, engine=engine("models"), model="deep-2")).session_id
    await sup.confirm(sid)
    await _turn_started(sup, sid)
    seen = recorded(tmp_path, "models")
    # set before the task's prompt went out
    asked = [i for i, e in enumerate(seen) if e == {"model": "deep-2"}]
    prompted = [i for i, e in enumerate(seen) if "prompt" in e]
    assert asked and prompted and asked[0] < prompted[0], seen
    assert row_of(sup, sid).agent_model == "deep-2"
    await sup.cancel(sid)


@pytest.mark.slow
async def test_a_pinned_model_the_agent_does_not_offer_ends_the_run_naming_those_it_does(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    repo, open_sup = world
    sup = await open_sup()
    sid = (await sup.start("Write done", repo, engine=engine("models"), model="gpt-9")).session_id
    await sup.confirm(sid)
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=30)
    assert row.state is S.FAILED
    assert "offers no model 'gpt-9'; it offers: fast-1 (Fast), deep-2 (Deep)" in (row.error or "")
    assert row.failure_kind == "configuration"
    assert not any("prompt" in e for e in recorded(tmp_path, "models"))


@pytest.mark.slow
async def test_the_command_line_lists_and_sets_the_agents_mode_model_and_options(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    import os
    import subprocess

    from corral.supervisor.remote import OwnerServices

    repo, open_sup = world
    sup = await open_sup()
    services = OwnerServices(sup, mcp_http=False)
    await services.start()
    try:
        sid = await start(sup, repo, engine("models"))
        await _turn_started(sup, sid)
        env = dict(os.environ, CORRAL_HOME=str(sup.state_dir))

        def corral(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "corral.tui.cli", *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )

        listed = await asyncio.to_thread(corral, "model", sid[-8:])
        assert listed.returncode == 0, listed.stderr
        assert listed.stdout.splitlines() == ["* fast-1 (Fast)", "  deep-2 (Deep)"]
        out = await asyncio.to_thread(corral, "model", sid[-8:], "nope")
        assert out.returncode != 0 and "it offers: fast-1 (Fast), deep-2 (Deep)" in out.stderr
        out = await asyncio.to_thread(corral, "model", sid[-8:], "deep-2")
        assert out.returncode == 0 and "→ deep-2" in out.stdout, out.stderr
        out = await asyncio.to_thread(corral, "option", sid[-8:], "web", "true")
        assert out.returncode == 0 and "web → true" in out.stdout, out.stderr
        out = await asyncio.to_thread(corral, "option", sid[-8:])
        assert "web = true  (true, false)" in out.stdout, out.stderr
        out = await asyncio.to_thread(corral, "mode", sid[-8:], "code")
        assert out.returncode == 0 and "→ code" in out.stdout, out.stderr
        seen = recorded(tmp_path, "models")
        assert {"model": "deep-2"} in seen and {"option": "web", "value": True} in seen
        assert {"mode": "code"} in seen
        shown = await asyncio.to_thread(corral, "get", sid[-8:])
        assert "agent settings: mode code · model deep-2 · reasoning=medium · web=true" in (
            shown.stdout
        ), shown.stdout
        rows = json.loads((await asyncio.to_thread(corral, "sessions", "--json")).stdout)
        mine = next(r for r in rows if r["session_id"] == sid)
        assert (mine["agent_mode"], mine["agent_model"]) == ("code", "deep-2")
        assert mine["agent_options"] == {"reasoning": "medium", "web": "true"}
        await sup.cancel(sid)
    finally:
        await services.close()


@pytest.mark.slow
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


@pytest.mark.slow
async def test_a_message_to_an_acp_session_is_queued_for_its_next_prompt(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    """`corral msg` (the owner's `send`) to an ACP session: before, refused as
    "runs no agent CLI"; now queued, and the ACP engine gives it to the agent
    as its next turn's prompt."""
    repo, open_sup = world
    sup = await open_sup()
    sid = await start(sup, repo, engine("slow"))
    deadline = time.monotonic() + 30
    while not any(p.part == "prompt" for p in conversation(sup, sid)):
        assert time.monotonic() < deadline, "the agent never got its first prompt"
        await asyncio.sleep(0.05)
    sent = await sup.send("operator", sid, "also update the changelog")
    assert sent.text == "also update the changelog" and sent.status == "queued"
    await sup.cancel(sid)


@pytest.mark.slow
async def test_a_revive_the_agent_cannot_load_says_so_and_starts_a_fresh_conversation(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    """Gemini CLI answers `session/load` with "Internal error" (details: "No
    previous sessions found"). Before, the revive failed on that error; now
    the log says the conversation could not be loaded, with the agent's
    reason, and the agent gets the task again on a new conversation."""
    repo, open_sup = world
    sup = await open_sup()
    sid = await start(sup, repo, engine("forget"))
    deadline = time.monotonic() + 30
    while not row_of(sup, sid).dormant:
        assert sup.get(sid).session.state is S.RUNNING, sup.get(sid).session.error
        assert time.monotonic() < deadline, "the session never went dormant"
        await asyncio.sleep(0.05)
    await sup.revive(sid)
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=30)
    assert row.state is S.NEEDS_APPROVAL, row.error
    said = plan_texts(sup, sid)
    assert any(
        "could not load its conversation fake-session-1 (Internal error: No previous sessions "
        "found): starting a fresh conversation" in t
        for t in said
    ), said
    seen = recorded(tmp_path, "forget")
    assert {"load_refused": "fake-session-1"} in seen
    assert "Write done to notes.txt" in str(seen[-1].get("prompt", ""))  # the task, afresh


@pytest.mark.slow
async def test_a_write_the_agents_own_shell_makes_outside_the_worktree_is_blocked_and_on_the_board(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    """The agent runs its own shell (not corral's `terminal/*`) inside corral's
    real sandbox: `echo pwn > <outside>` lands in the sandbox's private /tmp
    and `touch /usr/…` meets a read-only file system, while the shell says
    "wrote it" and the agent reports success. Each is a typed `blocked`
    event by corral's policy and the board's needs column says so; the
    write to a granted writable path (the declared cache) landed and is not
    reported."""
    repo, open_sup = world
    outside = tmp_path / "outside.txt"
    sup = await open_sup(repair_invokes=0)
    sid = await start(sup, repo, engine("ownshell", str(outside)))
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
    assert row.state is S.NEEDS_APPROVAL, row.error
    assert recorded(tmp_path, "ownshell")[-1]["output"].endswith("wrote it\n")  # type: ignore[union-attr]
    assert not outside.exists()
    assert (tmp_path / "out" / "landed.txt").read_text() == "ok\n"
    blocked = [e.data for e in events_of(sup, sid) if isinstance(e.data, BlockedData)]
    assert [(b.what, b.by) for b in blocked] == [
        (f"shell write {outside}", "policy"),
        ("shell write /usr/corral-own-shell", "policy"),
    ], blocked
    assert "private" in blocked[0].why and "not on the host" in blocked[0].why
    assert "read-only" in blocked[1].why
    notice = row_of(sup, sid).boundary_notice or ""
    assert "shell write /usr/corral-own-shell" in notice, notice


@pytest.mark.slow
async def test_a_write_outside_the_worktree_through_corrals_terminal_is_blocked(
    tmp_path: Path, world
) -> None:  # type: ignore[no-untyped-def]
    """The agent's shell runs through corral's `terminal/*` (as Claude Code's
    adapter runs its Bash): `echo pwn > <outside>` lands in that sandbox's
    private /tmp, the command exits 0 and says "ok". When it ends corral
    logs a typed `blocked` event once, and the private /tmp is gone after
    the agent releases the terminal."""
    import glob
    import tempfile

    repo, open_sup = world
    outside = tmp_path / "outside.txt"
    before = set(glob.glob(f"{tempfile.gettempdir()}/corral-acp-terminal-*"))
    sup = await open_sup()
    sid = await start(sup, repo, engine("shell", str(outside)))
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=30)
    assert row.state is S.NEEDS_APPROVAL, row.error
    assert recorded(tmp_path, "shell")[-1] == {"exit": 0, "output": "ok\n"}
    assert not outside.exists()
    blocked = [e.data for e in events_of(sup, sid) if isinstance(e.data, BlockedData)]
    assert [(b.what, b.by) for b in blocked] == [(f"shell write {outside}", "policy")], blocked
    assert "not on the host" in blocked[0].why
    assert f"shell write {outside}" in (row_of(sup, sid).boundary_notice or "")
    assert set(glob.glob(f"{tempfile.gettempdir()}/corral-acp-terminal-*")) <= before
