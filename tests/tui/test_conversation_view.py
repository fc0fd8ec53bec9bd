"""The ACP conversation view under a pilot at 80×24 and 200×50: it opens on
the tail and follows it until the operator scrolls up (keyboard only),
renders the agent's markdown without obeying it, folds each thought into
one collapsed block, shows tool calls with their command, diff and output,
searches with n/N, offers the agent's commands in the prompt, sends the
prompt through `respond`, and shows the permission question's diff."""

from __future__ import annotations

from typing import Any

import pytest
from rich.segment import Segment
from textual import events
from textual.widgets import Static

from corral.supervisor.events import BlockedData
from corral.tui.screens.conversation import ConversationScreen, PromptArea
from corral.tui.widgets.conversation import MAX_MOUNTED, WINDOW, BlockView, ConversationView

from .conftest import until
from .convo_owner import ConvoApp, ConvoOwner, said

HOSTILE = (
    "[@click=app.quit]press me[/] [b]bold?[/b] \x1b]52;c;ZXZpbA==\x07 \x1b[2J\x1b[31mred "
    "\u202eevil\u202c [run](javascript:alert(1)) [home](file:///etc/passwd)"
)


def _session(turns: int = 40) -> list[Any]:
    parts: list[Any] = [said("prompt", "Fix the parser\nthe whole task text")]
    for i in range(turns):
        parts += [
            said("thought", f"step {i}: look at the file"),
            said("thought", f"step {i}: then change it"),
            said("message", f"## Turn {i}\nI changed **parser.py** and ran `pytest`."),
            said(
                "tool_call",
                "$ pytest -q",
                tool_call_id=f"t{i}",
                title=f"Run the tests {i}",
                tool_kind="execute",
                status="pending",
            ),
            said("tool_update", tool_call_id=f"t{i}", status="completed", output="3 passed\n"),
        ]
    parts += [
        said("plan", "[completed] read parser.py\n[in_progress] fix the bug\n[pending] run tests"),
        said(
            "tool_call",
            "--- a/w/parser.py\n+++ b/w/parser.py\n@@ -1 +1 @@\n-x = 1\n+x = 2",
            tool_call_id="edit",
            title="Edit parser.py",
            tool_kind="edit",
            status="completed",
        ),
        said("message", "The last words: **done**."),
        said("commands", "/review — review the changes\n/init — write AGENTS.md"),
        said("turn_end", "end_turn"),
    ]
    return parts


async def _opened(app: ConvoApp, pilot: Any) -> ConversationView:
    view = await until(
        pilot, "the view", lambda: next(iter(app.screen.query(ConversationView)), None)
    )
    await until(
        pilot,
        "it to reach the tail",
        lambda: (
            view.views and view.at_the_end and (view.max_scroll_y > 0 or view.first_mounted == 0)
        ),
    )
    return view


MATCH, CURRENT = "#ffff00", "#ff8700"  # the search's highlights (widgets/conversation)


def _drawn(view: ConversationView, block: BlockView) -> list[Segment]:
    """The segments the block's lines are drawn with (what reaches the screen)."""
    return [segment for strip in view.drawn(block.index) for segment in strip]


def _highlighted(view: ConversationView, block: BlockView, colour: str) -> list[str]:
    """The pieces of the block drawn on the search's `colour` (hex)."""
    return [
        s.text
        for s in _drawn(view, block)
        if s.style and s.style.bgcolor and s.style.bgcolor.triplet
        if s.style.bgcolor.triplet.hex == colour
    ]


def _visible_text(view: ConversationView) -> str:
    return "\n".join(b.block.text for i, b in view.views.items() if view.shown(i))


def _screen_text(app: ConvoApp) -> str:
    """What the terminal shows now (the view's lines as painted)."""
    return "\n".join(
        "".join(s.text for s in strip) for strip in app.screen._compositor.render_strips()
    )


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
async def test_it_opens_on_the_tail_and_follows_it_until_the_operator_scrolls_up(
    size: tuple[int, int],
) -> None:
    owner = ConvoOwner(_session())
    app = ConvoApp(owner)
    async with app.run_test(size=size) as pilot:
        view = await _opened(app, pilot)
        assert app.focused is view
        await until(pilot, "the last words shown", lambda: "The last words" in _visible_text(view))
        assert (
            len(view.views) < len(view.conversation.blocks) / 4
        )  # the tail only: the rest on home
        assert not view.children  # drawn line by line by one widget, not a widget a block
        owner.push(said("message", "a new line at the tail"))
        await until(pilot, "the new line shown", lambda: "a new line" in _visible_text(view))
        await pilot.press("pageup", "up", "up")
        await pilot.pause()
        held = view.scroll_y
        assert held < view.max_scroll_y
        owner.push(said("message", "more while I read"))
        owner.push(said("tool_call", "$ ls", tool_call_id="late", title="ls", status="pending"))
        await pilot.pause(0.3)
        assert view.scroll_y == held  # reading up there is not interrupted
        await pilot.press("end")
        await until(pilot, "back at the tail", lambda: view.at_the_end)
        await pilot.press("home")
        await until(pilot, "the first block mounted", lambda: view.first_mounted == 0)
        await until(pilot, "the first block shown", lambda: view.scroll_y == 0)
        assert "Fix the parser" in _visible_text(view)
        # home moves the window to the start: not every block in between is mounted
        assert len(view.views) <= MAX_MOUNTED < len(view.conversation.blocks)
        await pilot.press("end")
        await until(pilot, "the tail again", lambda: view.at_tail and view.at_the_end)
        owner.push(said("message", "after coming back"))
        await until(pilot, "it follows again", lambda: "after coming back" in _visible_text(view))


@pytest.mark.slow
async def test_thousands_of_events_open_as_a_handful_of_widgets_and_jumps_move_the_window() -> None:
    """5,000 events (issue 45: the view opens in 200 ms): what is laid out is
    a screenful of blocks, drawn by one widget (no widget per block); home,
    a far search match and end move the window rather than drawing every
    block on the way."""
    owner = ConvoOwner(_session(turns=1000))
    app = ConvoApp(owner)
    async with app.run_test(size=(200, 50)) as pilot:
        view = await _opened(app, pilot)
        total = len(view.conversation.blocks)
        assert len(owner.events) > 5000 and total > 3000
        assert len(view.views) <= 3 * WINDOW
        assert not view.children  # one widget draws them all, line by line
        await pilot.press("home")
        await until(pilot, "the first block shown", lambda: view.first_mounted == 0)
        assert len(view.views) <= MAX_MOUNTED
        await pilot.press("ctrl+f", *"Turn 500", "enter")  # one match, mid-conversation
        screen = app.screen
        assert isinstance(screen, ConversationScreen) and len(screen.matches) == 1
        found = await until(pilot, "the match", lambda: view.views.get(screen.matches[0]))
        await until(pilot, "it scrolled to", lambda: view.shown(found.index))
        assert len(view.views) <= MAX_MOUNTED
        assert _highlighted(view, found, CURRENT) == ["Turn 500"]
        await pilot.press("end")
        await until(pilot, "the tail", lambda: view.at_tail and view.at_the_end)
        owner.push(said("message", "the newest words"))
        await until(pilot, "the tail followed", lambda: "the newest words" in _visible_text(view))
        assert len(view.views) <= MAX_MOUNTED


async def test_hostile_agent_text_is_shown_as_text_and_its_links_open_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    opened: list[str] = []
    hidden = "<!-- the operator must not see this --><script>steal()</script>"
    owner = ConvoOwner(
        [
            said("thought", HOSTILE),
            said("message", HOSTILE + "\n\n" + hidden),
            said(
                "tool_call",
                HOSTILE,
                tool_call_id="h",
                title=HOSTILE,
                status="[red]x",
                output=HOSTILE,
            ),
            said("plan", f"[pending] {HOSTILE}"),
            BlockedData(what=HOSTILE, why=HOSTILE, by="policy"),
            said("prompt", HOSTILE),
        ]
    )
    app = ConvoApp(owner)
    monkeypatch.setattr(app, "open_url", lambda url, **_: opened.append(url))
    async with app.run_test(size=(80, 24)) as pilot:
        view = await _opened(app, pilot)
        await pilot.press("home")
        await until(pilot, "every block", lambda: len(view.views) == len(view.conversation.blocks))
        await pilot.pause(0.2)
        drawn = {i: _drawn(view, b) for i, b in view.views.items()}
        for segments in drawn.values():
            text = "".join(s.text for s in segments)
            assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
            assert "[@click=app.quit]" in text  # the brackets as text, not a click
            for segment in segments:  # nothing drawn carries a link or an action
                assert segment.style is None or (
                    not segment.style.link and "@click" not in (segment.style.meta or {})
                ), segment
        message = next(b for b in view.views.values() if b.block.kind == "message")
        text = "".join(s.text for s in drawn[message.index])
        assert "␛" in text and "javascript:alert(1)" in text  # ESC shown; the address in sight
        assert "the operator must not see this" in text and "<script>" in text  # HTML as text
        top = view.top_of(message.index)
        assert top is not None
        view.scroll_to(y=top, animate=False, immediate=True, force=True)
        await pilot.pause()
        await pilot.click(view, offset=(4, 1))  # on the message's words (and its address)
        await pilot.pause(0.2)
        assert opened == [] and app.is_running and isinstance(app.screen, ConversationScreen)


async def test_each_thought_is_one_collapsed_block_and_tool_calls_show_command_diff_and_output() -> (
    None
):
    owner = ConvoOwner(_session(turns=2))
    app = ConvoApp(owner)
    async with app.run_test(size=(200, 50)) as pilot:
        view = await _opened(app, pilot)
        await pilot.press("home")  # every block (few here): the view opened on the tail only
        await until(pilot, "all blocks", lambda: len(view.views) == len(view.conversation.blocks))
        thoughts = [v for _, v in sorted(view.views.items()) if v.block.kind == "thought"]
        assert len(thoughts) == 2  # two thoughts of two pieces each: two blocks
        folded = thoughts[0]
        assert folded.collapsed and "(2 lines)" in folded.title()
        assert "then change it" not in str(folded.render())  # folded: its title line only
        assert "then change it" not in _screen_text(app)
        assert folded.block.text == "step 0: look at the file\nstep 0: then change it"
        await pilot.press("tab")  # tab selects the first folded block in view (the prompt)
        assert view.selected == 0 and view.views[0].block.kind == "prompt"
        await pilot.press("tab")  # then the first thought; enter opens it
        assert view.selected == folded.index and app.focused is view
        await pilot.press("enter")
        assert not folded.collapsed and "step 0: then change it" in str(folded.render())
        await until(pilot, "its lines painted", lambda: "then change it" in _screen_text(app))
        await pilot.press("enter")
        assert folded.collapsed
        await pilot.press("tab")  # the next thought
        assert view.selected == thoughts[1].index
        top = view.top_of(thoughts[1].index)
        assert top is not None
        await pilot.click(view, offset=(3, top - int(view.scroll_y)))  # a click opens it too
        assert not thoughts[1].collapsed
        tools = {b.block.tool_call_id: b for b in view.views.values() if b.block.kind == "tool"}
        run = str(tools["t1"].render())
        assert "$ pytest -q" in run and "3 passed" in run
        assert "Run the tests 1 (execute) · completed" in run
        diff = tools["edit"].render()
        assert "+x = 2" in str(diff) and "-x = 1" in str(diff)
        plan = next(b for b in view.views.values() if b.block.kind == "plan")
        assert "✓ read parser.py" in str(plan.render())


async def test_search_highlights_every_match_and_n_and_shift_n_move_between_them() -> None:
    owner = ConvoOwner(_session(turns=40))
    app = ConvoApp(owner)
    async with app.run_test(size=(80, 24)) as pilot:
        view = await _opened(app, pilot)
        await pilot.press("ctrl+f", *"Turn 1", "enter")  # "Turn 1", "Turn 10"…"Turn 19"
        screen = app.screen
        assert isinstance(screen, ConversationScreen)
        assert len(screen.matches) == 11 and app.focused is view
        current = view.views[screen.matches[-1]]
        await pilot.pause()
        assert current.current and view.shown(current.index)
        # the words found are highlighted, not the whole block ("## Turn 19": "Turn 1" of it)
        assert _highlighted(view, current, CURRENT) == ["Turn 1"]
        assert "".join(s.text for s in _drawn(view, current)).startswith("▌")  # marked at the left
        await pilot.press("N")
        await pilot.pause()
        previous = view.views[screen.matches[-2]]
        assert previous.current and not current.current
        assert current.needle == "Turn 1"
        assert _highlighted(view, current, MATCH) == ["Turn 1"]
        assert _highlighted(view, current, CURRENT) == []
        assert _highlighted(view, previous, CURRENT) == ["Turn 1"]
        await pilot.press("n", "n")  # wraps to the first: "Turn 1", before the window
        await pilot.pause()
        first = view.views[screen.matches[0]]
        assert first.current and "Turn 1\n" in first.block.text
        assert view.shown(first.index)


async def test_the_prompt_offers_the_agents_commands_and_sends_through_respond() -> None:
    owner = ConvoOwner(_session(turns=1))
    app = ConvoApp(owner)
    async with app.run_test(size=(80, 24)) as pilot:
        await _opened(app, pilot)
        await pilot.press("slash", "r")  # a printable key in the view goes to the prompt
        prompt = app.screen.query_one(PromptArea)
        assert app.focused is prompt and prompt.text == "/r"
        offered = str(app.screen.query_one("#convo-completions", Static).render())
        assert "/review" in offered and "/init" not in offered
        await pilot.press("tab")
        assert prompt.text == "/review "
        await pilot.press(*"now", "ctrl+j", *"and then", "enter")
        await until(pilot, "the prompt sent", lambda: owner.sent)
        assert owner.sent == [("/review now\nand then", True)] and prompt.text == ""


async def test_the_permission_question_shows_its_diff_and_a_number_answers_it() -> None:
    owner = ConvoOwner(_session(turns=1))
    owner.question = "Edit parser.py (edit)\n--- a/w/parser.py\n+++ b/w/parser.py\n-x = 1\n+x = 2"
    owner.options = ["Allow [allow]", "Reject [reject]"]
    app = ConvoApp(owner)
    async with app.run_test(size=(80, 24)) as pilot:
        await _opened(app, pilot)
        question = app.screen.query_one("#convo-question", Static)
        shown = str(question.render())
        assert question.display and "+x = 2" in shown and "-x = 1" in shown and "{" not in shown
        assert "1 Allow [allow]" in shown
        await pilot.press("1", "enter")
        await until(pilot, "the answer sent", lambda: owner.sent)
        assert owner.sent == [("Allow [allow]", False)]


@pytest.mark.parametrize("size", [(80, 24), (200, 50)])
def test_snapshot_of_the_conversation(snap_compare: Any, size: tuple[int, int]) -> None:
    owner = ConvoOwner(_session(turns=3))

    async def before(pilot: Any) -> None:
        app = pilot.app
        await _opened(app, pilot)
        await pilot.pause(0.2)

    assert snap_compare(ConvoApp(owner), terminal_size=size, run_before=before)


async def test_the_kept_lines_are_drawn_again_in_a_new_theme() -> None:
    """Each block's lines are drawn once and kept: a theme switch must not
    leave them in the old theme's colours."""
    app = ConvoApp(ConvoOwner(_session(turns=1)))
    async with app.run_test(size=(80, 24)) as pilot:
        view = await _opened(app, pilot)
        tool = next(i for i, v in view.views.items() if v.block.kind == "tool")

        def background() -> str | None:
            style = view.drawn(tool)[0]._segments[0].style
            return None if style is None or style.bgcolor is None else style.bgcolor.name

        dark = background()
        app.theme = "textual-light"
        await until(pilot, "the light theme's colours", lambda: background() != dark)


async def test_the_mouse_wheel_lets_go_of_the_tail_and_takes_it_again_at_the_end() -> None:
    owner = ConvoOwner(_session(turns=10))
    app = ConvoApp(owner)
    async with app.run_test(size=(80, 24)) as pilot:
        view = await _opened(app, pilot)

        def wheel(kind: type[events.MouseScrollUp | events.MouseScrollDown]) -> None:
            view.post_message(kind(view, 5, 5, 0, 1, 0, False, False, False))

        for _ in range(3):
            wheel(events.MouseScrollUp)
        await until(pilot, "scrolled up", lambda: not view.at_the_end)
        held = view.scroll_y
        owner.push(said("message", "more while I read"))
        await until(
            pilot, "the new block laid out", lambda: len(view.conversation.blocks) - 1 in view.views
        )
        await pilot.pause(0.2)
        assert view.scroll_y == held and not view.following  # reading is not interrupted
        for _ in range(30):
            wheel(events.MouseScrollDown)
        await until(pilot, "following again", lambda: view.following and view.at_the_end)
        owner.push(said("message", "the newest words"))
        await until(pilot, "the tail followed", lambda: "the newest words" in _visible_text(view))
