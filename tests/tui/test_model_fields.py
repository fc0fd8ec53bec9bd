"""Choosing a model in the console: the discussion's model field pins it
(and says why when it cannot), the new-session form prefilled from a pinned
discussion starts a pinned session, and a board row says which model
answered when a key was rejected."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input

from corral.supervisor.discuss import Discussions
from corral.supervisor.llm.base import Turn
from corral.supervisor.llm.catalog import ModelEntry
from corral.supervisor.llm.chain import ModelChain
from corral.supervisor.models import CoderSession
from corral.supervisor.session.summaries import stored_summary
from corral.supervisor.states import CoderState
from corral.tui.app import CorralApp
from corral.tui.rows import needs_text
from corral.tui.screens.new_session import NewSessionScreen
from tests.fakes.scripted_llm import ScriptedProvider

from .conftest import FIXED_NOW, board_ready, until
from .test_discuss_screen import open_discussion


def chain() -> tuple[ModelChain, dict[str, ScriptedProvider]]:
    served = {
        "fast": ScriptedProvider([Turn("fast here")] * 2),
        "deep": ScriptedProvider([Turn("deep here")] * 2),
        "plain": ScriptedProvider([Turn("plain here")]),
    }
    entries = [
        ModelEntry(name="fast", provider="openai", model="fast-id"),
        ModelEntry(name="deep", provider="openai", model="deep-id"),
        ModelEntry(name="plain", provider="openai", model="plain-id", tools=False),
    ]
    return ModelChain(entries, factory=lambda e: served[e.name]), served


@pytest.mark.slow
async def test_the_discussion_model_field_pins_and_refuses_with_a_reason(
    board_world, tmp_path: Path
) -> None:
    sup, repo, _release = board_world()
    models, served = chain()
    app = CorralApp(sup, default_repo=repo, clock=lambda: FIXED_NOW)
    async with app.run_test(size=(140, 40)) as pilot:
        await board_ready(app, pilot)
        app.owned_discussions = Discussions(tmp_path / "state", models)
        screen = await open_discussion(app, pilot)
        discussion = screen.discussion
        assert discussion is not None
        await refuse_then_pin(app, pilot, screen, lambda: discussion.model)
        await pilot.press(*"hello", "enter")
        await until(pilot, "the answer", lambda: len(served["deep"].calls) == 1)
        assert served["fast"].calls == []

        # the form opened from this discussion carries its pin into the session
        app.owned_discussions.get(discussion.id).edit_prepared("Alpha adds a file", [])
        await start_from_the_form(app, pilot, pinned="deep")
        row = await until(
            pilot,
            "the pinned session",
            lambda: next((r for r in sup.list() if r.state is CoderState.CONTRACT_PROPOSED), None),
        )
        assert row.model == "deep" and row.model_pinned


async def refuse_then_pin(
    app: CorralApp, pilot: Any, screen: Any, model_of: Callable[[], str | None]
) -> None:
    """The discussion's model field: `plain` (no tools) is refused with the
    reason and leaves no pin (`model_of()`), `deep` is pinned and shown."""
    notes: list[str] = []
    app.notify = lambda message, **_kw: notes.append(str(message))  # type: ignore[method-assign]
    field = screen.query_one("#discuss-model", Input)
    field.focus()
    await pilot.press(*"plain", "enter")
    await until(pilot, "the refusal", lambda: any("cannot call" in n for n in notes))
    assert model_of() is None and field.value == ""
    field.focus()
    await pilot.press(*"deep", "enter")
    await until(pilot, "the pin", lambda: model_of() == "deep")
    await until(pilot, "the field to show it", lambda: field.value == "deep")


async def start_from_the_form(app: CorralApp, pilot: Any, *, pinned: str) -> None:
    """`ctrl+o` on the discussion: the new-session form, its model field
    prefilled with the discussion's pin, started as it is."""
    await pilot.press("ctrl+o")
    form = await until(
        pilot,
        "the form",
        lambda: app.screen if isinstance(app.screen, NewSessionScreen) else None,
    )
    assert form.query_one("#model", Input).value == pinned
    await pilot.click("#start")


def test_a_board_row_says_which_model_answered_instead() -> None:
    session = CoderSession(id="s1", repo="/r", intent="x", state=CoderState.CREATED)
    row = stored_summary(session).model_copy(
        update={"live": True, "model_notice": "model big rejected its key; local answers instead"}
    )
    assert needs_text(row).plain == "model big rejected its key; local answers instead"
