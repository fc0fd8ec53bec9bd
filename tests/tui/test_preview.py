"""The board's live preview of the selected agent's terminal: it follows the
cursor, shows a new screen as soon as the supervisor has one, sits beside the
board on a wide terminal and below it at 80×24 (hidden there until `p`), and
reads nothing while hidden."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path

import pytest

from corral.supervisor.interface import AgentScreen
from corral.tui.app import CorralApp
from corral.tui.screens.board import BoardScreen
from corral.tui.widgets.preview import AgentPreview

from .conftest import FIXED_NOW, board_ready, final_frame, seed_board, until


class FakeScreens:
    """The supervisor's in-memory agent screens, set by the test; counts reads."""

    def __init__(self) -> None:
        self.screens: dict[str, AgentScreen] = {}
        self.versions: dict[str, int] = {}
        self.reads = 0

    def put(self, sid: str, *lines: str) -> None:
        self.screens[sid] = AgentScreen(lines=list(lines), ansi=list(lines), cursor_y=len(lines))
        self.versions[sid] = self.versions.get(sid, 0) + 1

    def screen(self, sid: str) -> AgentScreen | None:
        return self.screens.get(sid)

    def version(self, sid: str) -> int:
        self.reads += 1
        return self.versions.get(sid, -1)


def _app(sup, repo: Path, fake: FakeScreens) -> CorralApp:  # type: ignore[no-untyped-def]
    sup.agent_screen = fake.screen
    sup.agent_screen_version = fake.version
    return CorralApp(
        sup, default_repo=repo, clock=lambda: FIXED_NOW, on_ready=lambda s: seed_board(s, repo)
    )


def _row(board: BoardScreen, word: str) -> tuple[int, str]:
    sid = next(s for s in board.order if board.summaries[s].intent.startswith(word))
    return board.order.index(sid), sid


def _shown(preview: AgentPreview) -> str:
    return preview.content.plain  # type: ignore[union-attr]


@pytest.mark.slow
async def test_the_preview_follows_the_cursor_and_updates_live(board_world) -> None:
    sup, repo, _release = board_world()
    fake = FakeScreens()
    app = _app(sup, repo, fake)
    async with app.run_test(size=(160, 40)) as pilot:
        board = await board_ready(app, pilot)
        preview = board.preview
        assert preview.display  # a big terminal shows it from the start, beside the board
        assert board.query_one("#board-area").has_class("-beside")
        row, bravo = _row(board, "Bravo")
        fake.put(bravo, "bravo agent 1.0", "$ pytest -q", "3 passed")
        board.table.move_cursor(row=row)
        await until(pilot, "Bravo's screen in the preview", lambda: "3 passed" in _shown(preview))
        assert preview.session_id == bravo
        fake.put(bravo, "bravo agent 1.0", "$ pytest -q", "4 passed")  # the agent moved on
        await until(pilot, "the new screen", lambda: "4 passed" in _shown(preview))
        row, _alpha = _row(board, "Alpha")
        board.table.move_cursor(row=row)
        await until(
            pilot,
            "Alpha (no pane) in the preview",
            lambda: "No agent terminal" in _shown(preview),
        )


@pytest.mark.slow
async def test_hidden_at_80x24_it_reads_nothing_and_p_shows_it_below(board_world) -> None:
    sup, repo, _release = board_world()
    fake = FakeScreens()
    app = _app(sup, repo, fake)
    async with app.run_test(size=(80, 24)) as pilot:
        board = await board_ready(app, pilot)
        preview = board.preview
        assert not preview.display
        await asyncio.sleep(0.6)  # two of its polling periods
        await pilot.pause()
        assert fake.reads == 0
        await pilot.press("p")
        await until(pilot, "the preview to show", lambda: preview.display and fake.reads > 0)
        assert not board.query_one("#board-area").has_class("-beside")  # below the board
        assert preview.region.y > board.table.region.y
        await pilot.press("p")
        await until(pilot, "the preview to hide", lambda: not preview.display)
        reads = fake.reads
        await asyncio.sleep(0.6)
        await pilot.pause()
        assert fake.reads == reads


def _snapshot_app(board_world) -> tuple[CorralApp, FakeScreens]:  # type: ignore[no-untyped-def]
    ids = itertools.count(1)
    # the preview's title names the session
    sup, repo, _release = board_world(id_factory=lambda: f"{next(ids):024d}")
    fake = FakeScreens()
    app = _app(sup, repo, fake)
    return app, fake


async def _preview_on(app: CorralApp, pilot, fake: FakeScreens, key: str | None) -> None:  # type: ignore[no-untyped-def]
    board = await board_ready(app, pilot)
    row, bravo = _row(board, "Bravo")
    fake.put(
        bravo,
        "\x1b[1mbravo-agent 1.0\x1b[0m",
        "",
        "Reading shop/report.py",
        "$ python -m pytest -q",
        "\x1b[32m✓ 12 passed\x1b[0m in 0.04s",
        "\x1b[2m✻ Working… (esc to interrupt)\x1b[0m",
    )
    board.table.move_cursor(row=row)
    if key:
        await pilot.press(key)
    await until(pilot, "the toasts", lambda: True)
    app.clear_notifications()
    await final_frame(
        pilot,
        "Bravo's screen in the preview",
        lambda: "12 passed" in _shown(board.preview) and not app.screen.query("Toast"),
    )


@pytest.mark.slow
def test_preview_beside_the_board_snapshot(snap_compare, board_world) -> None:
    app, fake = _snapshot_app(board_world)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await _preview_on(app, pilot, fake, None)

    assert snap_compare(app, terminal_size=(160, 30), run_before=before)


@pytest.mark.slow
def test_preview_below_the_board_at_80x24_snapshot(snap_compare, board_world) -> None:
    app, fake = _snapshot_app(board_world)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await _preview_on(app, pilot, fake, "p")

    assert snap_compare(app, terminal_size=(80, 24), run_before=before)


@pytest.mark.slow
def test_preview_beside_the_board_at_200x50_keeps_the_boards_words_snapshot(
    snap_compare, board_world
) -> None:
    """At 200 columns the preview takes only what leaves the board the columns
    it needs: state and needs-you words whole, the intent at least 30 cells."""
    app, fake = _snapshot_app(board_world)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await _preview_on(app, pilot, fake, None)

    assert snap_compare(app, terminal_size=(200, 50), run_before=before)


@pytest.mark.slow
async def test_a_scrolled_screen_repaints_only_its_new_row(board_world, monkeypatch) -> None:
    """With 100 agents streaming, the preview repaints the selected agent's
    screen every sweep and on every cursor move: formatting every row of it
    again was most of the console's frame time, a frame a key's repaint
    could wait behind. A screen that scrolled by one row formats one row."""
    from rich.text import Text
    from textual.content import _FormattedLine

    sup, repo, _release = board_world()
    fake = FakeScreens()
    app = _app(sup, repo, fake)
    formatted: list[int] = []
    painting: list[bool] = []
    text_render, content_strip = Text.render, _FormattedLine.to_strip
    render_lines = AgentPreview.render_lines

    def counted_render(self, *args, **kw):  # type: ignore[no-untyped-def]
        if painting:
            formatted.append(1)
        return text_render(self, *args, **kw)

    def counted_strip(self, *args, **kw):  # type: ignore[no-untyped-def]
        if painting:
            formatted.append(1)
        return content_strip(self, *args, **kw)

    def painted(self, crop):  # type: ignore[no-untyped-def]
        painting.append(True)
        try:
            return render_lines(self, crop)
        finally:
            painting.pop()

    monkeypatch.setattr(Text, "render", counted_render)
    monkeypatch.setattr(_FormattedLine, "to_strip", counted_strip)
    monkeypatch.setattr(AgentPreview, "render_lines", painted)
    lines = [f"narration line {i}: reading, editing" for i in range(60)]
    async with app.run_test(size=(160, 40)) as pilot:
        board = await board_ready(app, pilot)
        preview = board.preview
        row, bravo = _row(board, "Bravo")
        fake.put(bravo, *lines[:30])
        board.table.move_cursor(row=row)
        await until(pilot, "Bravo's screen", lambda: lines[29] in _shown(preview))
        await pilot.pause()
        for i in range(30, 40):  # the agent prints a line a sweep: the screen scrolls
            formatted.clear()
            fake.put(bravo, *lines[i - 29 : i + 1])
            await until(pilot, f"line {i}", lambda i=i: lines[i] in _shown(preview))
            await pilot.pause()
            await pilot.pause()
            assert len(formatted) <= 2, f"{len(formatted)} rows formatted for one new row"
