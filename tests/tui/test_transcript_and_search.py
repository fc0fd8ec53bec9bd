"""The agent's own transcript on the session screen, and `/` on the board
finding sessions by what their events and transcripts say (not only by
intent)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Input, RichLog

from corral.supervisor.api import Supervisor
from corral.supervisor.session.registry import SessionRegistry
from corral.tui.app import CorralApp
from tests.fakes.claude_transcript import write_codex_rollout, write_transcript
from tests.fakes.scripted import Write, contract

from .conftest import (
    board_ready,
    make_repo,
    open_from_board,
    scripted_owner,
    scripted_supervisor,
    until,
)

DRAFTED = contract(("hello", "grep -q hi hello.txt"), description="hello.txt says hi")


async def _seed(
    sup: Supervisor, registry: SessionRegistry, repo: Path, transcript: Path
) -> dict[str, str]:
    sid = (await sup.start("Write hello", repo)).session_id
    other = (await sup.start("Another thing", repo)).session_id
    # what the external engine records for a Claude Code pane (its profile
    # names the transcript's format), then its hooks named its transcript
    registry.amend(sid, lambda s: setattr(s, "pane", {"agent": "claude"}))
    registry.note_agent_hook(sid, {"session_id": "0b5e-claude", "transcript_path": str(transcript)})
    return {"hello": sid, "other": other}


@pytest.mark.slow
async def test_the_session_screen_shows_the_agents_transcript(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    transcript = write_transcript(
        tmp_path / "claude" / "t.jsonl", "Write hello please", "Wrote hello.txt with hi."
    )
    sup, registry = scripted_owner(tmp_path / "state", DRAFTED, [Write("hello.txt", "hi\n")])
    seeded: dict[str, str] = {}

    async def ready(s: Supervisor) -> None:
        seeded.update(await _seed(s, registry, repo, transcript))

    app = CorralApp(sup, default_repo=repo, on_ready=ready)
    async with app.run_test(size=(130, 50)) as pilot:
        board = await board_ready(app, pilot)
        board.table.move_cursor(row=board.order.index(seeded["hello"]))
        screen = await open_from_board(app, pilot, "enter")
        view = screen.query_one("#transcript", RichLog)
        await until(pilot, "the transcript", lambda: len(view.lines) >= 4)
        text = "\n".join(str(line.text) for line in view.lines)
        assert "transcript: its last 3 turns" in text
        assert "› you/corral: Write hello please" in text
        assert "● agent: I'll read the slug module first." in text and "→ Read" in text
        assert "● agent: Wrote hello.txt with hi." in text
        assert "tool_result" not in text and "def slug" not in text

    # a session whose agent keeps no transcript shows none
    async with CorralApp(sup, default_repo=repo).run_test(size=(130, 50)) as pilot:
        app2 = pilot.app
        board = await board_ready(app2, pilot)
        board.table.move_cursor(row=board.order.index(seeded["other"]))
        screen = await open_from_board(app2, pilot, "enter")
        await pilot.pause()
        assert not screen.query_one("#transcript", RichLog).display


@pytest.mark.slow
async def test_slash_finds_sessions_by_their_transcript_and_events(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    transcript = write_transcript(
        tmp_path / "claude" / "t.jsonl", "Write hello please", "Crème brûlée is ready"
    )
    sup, registry = scripted_owner(tmp_path / "state", DRAFTED)
    seeded: dict[str, str] = {}

    async def ready(s: Supervisor) -> None:
        seeded.update(await _seed(s, registry, repo, transcript))

    app = CorralApp(sup, default_repo=repo, on_ready=ready)
    async with app.run_test(size=(130, 30)) as pilot:
        board = await board_ready(app, pilot)
        assert len(board.order) == 2

        async def search(words: str) -> list[str]:
            await pilot.press("slash")
            field = board.query_one("#search", Input)
            field.value = words
            await pilot.press("enter")
            return board.order

        # only the transcript says it: the intent search alone finds nothing
        await search("brûlée")
        await until(pilot, "the transcript match", lambda: board.order == [seeded["hello"]])
        await pilot.press("slash", "escape")
        await until(pilot, "the whole board", lambda: len(board.order) == 2)

        # only the other session's journal says it (its contract's description)
        hits = await sup.search("contract_proposed")
        assert set(hits) == {seeded["hello"], seeded["other"]}
        await search("Another")
        await until(pilot, "the intent match", lambda: board.order == [seeded["other"]])
        await search("no such words anywhere")
        await until(pilot, "nothing", lambda: board.order == [])


async def test_a_codex_sessions_rollout_is_its_transcript_and_searched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo")
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex"))
    thread = "01a23399-6fe3-7c12-b6c4-c0440762e36d"
    write_codex_rollout(tmp_path / "codex", thread, "Write esc.txt", "Wrote quetzal.txt.")
    sup, registry = scripted_owner(tmp_path / "state", DRAFTED)
    await sup.open()
    try:
        sid = (await sup.start("Write hello", repo)).session_id
        other = (await sup.start("Another thing", repo)).session_id
        # what the external engine records for a Codex pane, then its notify hook
        registry.amend(sid, lambda s: setattr(s, "pane", {"agent": "codex"}))
        registry.note_agent_hook(sid, {"thread-id": thread})
        assert await sup.search("quetzal") == [sid]
        assert other not in await sup.search("esc.txt")
        turns = [(t.role, t.text) for t in await sup.transcript(sid)]
        assert turns[0] == ("user", "Write esc.txt") and turns[-1][1] == "Wrote quetzal.txt."
    finally:
        await sup.close()


async def test_search_narrows_as_you_type_fuzzily_and_escape_clears_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    sup = scripted_supervisor(tmp_path / "state", DRAFTED)
    seeded: dict[str, str] = {}

    async def ready(s: Supervisor) -> None:
        seeded["hello"] = (await s.start("Write hello", repo)).session_id
        seeded["other"] = (await s.start("Another thing", repo)).session_id

    app = CorralApp(sup, default_repo=repo, on_ready=ready)
    async with app.run_test(size=(130, 30)) as pilot:
        board = await board_ready(app, pilot)
        await until(pilot, "both rows", lambda: len(board.order) == 2)
        await pilot.press("slash", "a", "n", "t")  # no Enter: each key narrows the rows
        await until(pilot, "the typed match", lambda: board.order == [seeded["other"]])
        counts = str(board.query_one("#counts").render())
        assert "1 matching “ant”" in counts and "esc clears" in counts
        field = board.query_one("#search", Input)
        field.value = "wrt hlo"  # letters in order inside a word: fuzzy
        await until(pilot, "the fuzzy match", lambda: board.order == [seeded["hello"]])
        field.value = "contract proposed"  # the state's words are searched too
        await until(pilot, "both by state", lambda: len(board.order) == 2)
        field.value = "Another"
        await pilot.press("enter")  # the search stays applied with the field closed
        await until(pilot, "applied", lambda: not field.display)
        assert board.order == [seeded["other"]]
        await pilot.press("escape")  # on the board itself: clears the applied search
        await until(pilot, "the whole board", lambda: len(board.order) == 2)
        assert "matching" not in str(board.query_one("#counts").render())


async def test_keys_typed_before_the_search_field_has_focus_are_its_text(tmp_path: Path) -> None:
    """`/` then `x` typed at once: the x is searched for, never taken as the
    board's cancel key while the field is still on its way to the focus."""
    repo = make_repo(tmp_path / "repo")
    sup = scripted_supervisor(tmp_path / "state", DRAFTED)

    async def ready(s: Supervisor) -> None:
        await s.start("Fix the paginator", repo)

    app = CorralApp(sup, default_repo=repo, on_ready=ready)
    async with app.run_test(size=(80, 24)) as pilot:
        board = await board_ready(app, pilot)
        await until(pilot, "the row", lambda: len(board.order) == 1)
        field = board.query_one("#search", Input)
        field.display = True  # shown, the focus still on the table (as right after `/`)
        board.table.focus()
        await pilot.press("f", "i", "x")
        await until(pilot, "the text", lambda: field.value == "fix")
        assert app.screen is board  # no cancel question
        assert board.order and board.search == "fix"


async def test_a_transcript_named_by_an_agent_without_a_format_is_not_read(
    tmp_path: Path,
) -> None:
    """Which reader applies is the agent profile's word: a `custom:` agent's
    hook naming a file (here the operator's Claude Code conversation) gets
    nothing read, shown or searched. corral sniffed the file's lines and
    showed them as this session's transcript."""
    repo = make_repo(tmp_path / "repo")
    theirs = write_transcript(
        tmp_path / "claude" / "private.jsonl", "my private question", "a private answer"
    )
    sup, registry = scripted_owner(tmp_path / "state", DRAFTED)
    await sup.open()
    try:
        sid = (await sup.start("Write hello", repo)).session_id
        registry.amend(sid, lambda s: setattr(s, "pane", {"agent": "custom:tiny-agent"}))
        registry.note_agent_hook(sid, {"session_id": "x1", "transcript_path": str(theirs)})
        assert await sup.transcript(sid) == []
        assert sid not in await sup.search("private answer")
    finally:
        await sup.close()
