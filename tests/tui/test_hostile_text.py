"""An agent's, a check's or an intent's text never kills the console and is
never obeyed: a check printing text shaped like markup, an intent holding
markup, escape sequences, bidi and zero-width characters are shown as text."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from textual.widgets import DataTable, RichLog, Static

from corral.supervisor.states import CoderState
from corral.tui.app import CorralApp
from corral.tui.screens.session import SessionScreen
from tests.fakes.scripted import Write, contract

from .conftest import make_repo, open_from_board, scripted_supervisor, until

# plain text shaped like markup: Rich's escape leaves `[0m` alone, and
# Textual's parser then reads `[0m … [link=…]` as one broken tag
MARKUP_SHAPED = "[0m [link=http://evil.example/x]click[/link] [/] [@click=app.quit]q[/]"
ESCAPES = "\x1b]52;c;cHduZWQ=\x07\x1b]2;owned\x07\x1b[2J"


def shown(screen: SessionScreen) -> str:
    """Everything the session screen's text widgets show now, as plain text."""
    parts = [str(w.render()) for w in screen.query(Static)]
    for log in screen.query(RichLog):
        parts.extend(line.text for line in log.lines)
    return "\n".join(parts)


async def test_markup_shaped_check_output_and_intent_are_shown_as_text(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "shop")
    output = f"printf '%s\\n' '{MARKUP_SHAPED}'; printf 'ok\\033]2;owned\\007\\n'; false"
    drafted = contract(("tests", output), description=f"desc {MARKUP_SHAPED}")
    sup = scripted_supervisor(tmp_path / "state", drafted, [Write("x.txt", "x\n")])
    intent = f"Fix [b]it[/b] {MARKUP_SHAPED} {ESCAPES}"

    async def fail_one(s) -> None:  # type: ignore[no-untyped-def]
        sid = (await s.start(intent, repo)).session_id
        await s.confirm(sid)
        await s.wait_for(sid, {CoderState.FAILED}, timeout=30)

    app = CorralApp(sup, default_repo=repo, on_ready=fail_one)
    async with app.run_test(size=(140, 40)) as pilot:
        screen = await open_from_board(app, pilot, "enter")
        assert isinstance(screen, SessionScreen)
        table = screen.query_one("#checks", DataTable)
        await until(pilot, "the checks", lambda: table.row_count == 1)
        detail = screen.query_one("#check-detail", Static)
        await until(pilot, "the check's output", lambda: "[0m" in str(detail.render()))
        text = shown(screen)
        assert app.is_running and app.screen is screen
        assert MARKUP_SHAPED in text  # the intent's and the output's brackets, as typed
        assert "Fix [b]it[/b]" in text
        assert "\x1b" not in text and "␛]2;owned␇" in text


# -- every screen, hostile strings everywhere -------------------------------------

HOSTILE = (
    "[0m [link=http://evil.example]x[/link] [/] [@click=app.quit]q[/] [$accent] [b]"
    " \x1b]52;c;cHduZWQ=\x07 \x1b]2;owned\x07 \x1b[2J \x9b31m \r \x00 \x7f"
    " \u202eevil\u202c \u200b \ufeff \U000e0041 end"
)


def painted(app: CorralApp) -> tuple[str, list[str]]:
    """What the app would write to the terminal now: its text, and the
    targets of any link in it (corral makes none)."""
    strips = app.screen._compositor.render_strips()
    text = "\n".join("".join(seg.text for seg in strip) for strip in strips)
    links = [seg.style.link for strip in strips for seg in strip if seg.style and seg.style.link]
    return text, links


def obeyed(text: str) -> list[str]:
    """Characters in what is painted that a terminal would act on."""
    return [ch for ch in text if ch != "\n" and (ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0)]


async def assert_shown_not_obeyed(app: CorralApp, pilot, *needles: str) -> str:  # type: ignore[no-untyped-def]
    await pilot.pause()
    assert app.is_running
    text, links = painted(app)
    assert obeyed(text) == [] and links == []
    for needle in needles:
        assert needle in text, f"{needle!r} not on screen"
    return text


async def test_gate_2_with_hostile_words_everywhere(tmp_path: Path) -> None:
    """Intent, name, contract, check name, command and output, a file name:
    the board, the session screen, the diff screen, the confirm dialog and a
    toast show them as text, and nothing reaches the terminal to obey."""
    from corral.tui.confirm import ConfirmScreen
    from corral.tui.screens.board import BoardScreen
    from corral.tui.screens.diff import DiffScreen

    from .conftest import caught_up

    repo = make_repo(tmp_path / "shop")
    file_name = "f [link=http://evil.example]x[/link] \x1b]2;owned\x07 \u202eevil.txt"
    drafted = contract(
        ("shown", f"printf '%s\\n' '{MARKUP_SHAPED}'; printf '\\033]2;owned\\007\\n'"),
        description=HOSTILE,
    )
    sup = scripted_supervisor(tmp_path / "state", drafted, [Write(file_name, HOSTILE + "\n")])

    async def to_gate_2(s) -> None:  # type: ignore[no-untyped-def]
        sid = (await s.start(HOSTILE, repo)).session_id
        s.rename(sid, "n [b]x[/b] \x1b]2;owned\x07")
        await s.confirm(sid)
        await s.wait_for(sid, {CoderState.NEEDS_APPROVAL}, timeout=30)

    app = CorralApp(sup, default_repo=repo, on_ready=to_gate_2)
    async with app.run_test(size=(240, 50)) as pilot:
        screen = await open_from_board(app, pilot, "enter")
        assert isinstance(screen, SessionScreen)
        await assert_shown_not_obeyed(
            app, pilot, "[0m [link=http://evil.example]x[/link]", "␛]2;owned␇"
        )
        await pilot.press("escape")
        await until(pilot, "the board", lambda: isinstance(app.screen, BoardScreen))
        await assert_shown_not_obeyed(app, pilot, "n [b]x[/b] ␛]2;owned␇", "[0m [link=")
        await pilot.press("D")
        diff = await until(
            pilot,
            "the diff to load",
            lambda: (
                app.screen if isinstance(app.screen, DiffScreen) and caught_up(app.screen) else None
            ),
        )
        await assert_shown_not_obeyed(app, pilot, "\\342\\200\\256evil.txt", "[0m [link=")
        app.notify(HOSTILE, title=HOSTILE)
        await assert_shown_not_obeyed(app, pilot, "[@click=app.quit]q[/]")
        app.push_screen(ConfirmScreen(f"Deliver {HOSTILE}?"))
        await until(pilot, "the dialog", lambda: isinstance(app.screen, ConfirmScreen))
        await assert_shown_not_obeyed(app, pilot, "Deliver [0m [link=")
        assert diff is not None


# -- a property: whatever the words, every screen shows them and obeys none -------

HOSTILE_PIECES = [
    "[0m", "[link=http://evil.example]x[/link]", "[/]", "[@click=app.quit]", "[$accent]",
    "[b]", "\x1b]52;c;cHduZWQ=\x07", "\x1b]2;owned\x07", "\x1b[2J", "\x9b31m", "\x9d0;t\x9c",
    "\r", "\x08", "\x7f", "\u202e", "\u2066", "\u200b", "\ufeff", "\U000e0041", "\u2028",
    "a", " ", "界", "é",
]  # fmt: skip


def _screens_survive(tmp_path: Path, words: str) -> None:
    """Board, session screen (gate 1), a toast, a confirm dialog and a
    discussion whose model answers `words`: each is painted, and what is
    painted holds no control character and no link."""
    import asyncio

    from corral.supervisor.discuss import Discussions
    from corral.supervisor.llm.base import Turn
    from corral.tui.confirm import ConfirmScreen
    from corral.tui.screens.discuss import DiscussScreen
    from corral.tui.screens.new_session import NewSessionScreen
    from tests.fakes.scripted_llm import ScriptedProvider

    repo = make_repo(tmp_path / "repo")
    drafted = contract(("ok", f"printf '%s' {words!r}; true"), description=words)
    sup = scripted_supervisor(tmp_path / "state", drafted)

    async def flow() -> None:
        async def gate_1(s) -> None:  # type: ignore[no-untyped-def]
            sid = (await s.start("intent " + words, repo)).session_id
            s.rename(sid, words[:80] or "n")

        app = CorralApp(sup, default_repo=repo, on_ready=gate_1)
        async with app.run_test(size=(120, 36)) as pilot:
            screen = await open_from_board(app, pilot, "enter")
            await assert_shown_not_obeyed(app, pilot)
            await pilot.press("escape")
            await assert_shown_not_obeyed(app, pilot)
            app.notify(words, title=words)
            await assert_shown_not_obeyed(app, pilot)
            app.push_screen(ConfirmScreen(words))
            await until(pilot, "the dialog", lambda: isinstance(app.screen, ConfirmScreen))
            await assert_shown_not_obeyed(app, pilot)
            app.pop_screen()
            app.owned_discussions = Discussions(
                tmp_path / "state", ScriptedProvider([Turn(text=words)])
            )
            app.push_screen(DiscussScreen(repo))
            talk = await until(
                pilot,
                "the discussion",
                lambda: app.screen if isinstance(app.screen, DiscussScreen) else None,
            )
            await until(pilot, "it to open", lambda: talk.discussion is not None)
            await pilot.press(*"why", "enter")
            await until(
                pilot,
                "the answer",
                lambda: any("You: why" in line.text for line in talk.query_one(RichLog).lines),
            )
            await assert_shown_not_obeyed(app, pilot)
            # a prepared task: its intent and constraints are the model's words
            app.push_screen(NewSessionScreen(intent=words, constraints=[words, words]))
            await until(pilot, "the form", lambda: isinstance(app.screen, NewSessionScreen))
            await assert_shown_not_obeyed(app, pilot)
            assert screen is not None

    asyncio.run(flow())


@pytest.mark.slow
@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(pieces=st.lists(st.sampled_from(HOSTILE_PIECES), min_size=1, max_size=10))
def test_every_screen_shows_hostile_words_and_obeys_none(
    tmp_path_factory: pytest.TempPathFactory, pieces: list[str]
) -> None:
    _screens_survive(tmp_path_factory.mktemp("hostile"), "".join(pieces))
