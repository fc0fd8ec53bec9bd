"""The session screen at gate 1 (contract with a red and a green baseline) and
at gate 2's finding variant (every check green, nothing changed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.tui.app import CorralApp
from tests.fakes.scripted import contract

from .conftest import (
    FIXED_NOW,
    asked,
    final_frame,
    make_repo,
    open_from_board,
    scripted_supervisor,
    start_to_approval,
    until,
)


def _app(tmp_path: Path, drafted, seed) -> CorralApp:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo")
    sup = scripted_supervisor(
        tmp_path / "state", drafted, clock=lambda: FIXED_NOW, id_factory=lambda: "0" * 23 + "1"
    )
    return CorralApp(
        sup, default_repo=repo, clock=lambda: FIXED_NOW, on_ready=lambda s: seed(s, repo)
    )


def _finding_app(tmp_path: Path) -> CorralApp:
    """Every check already green and the agent changes nothing: a finding."""
    drafted = contract(("already_true", "true"), description="nothing to prove")
    return _app(tmp_path, drafted, lambda s, repo: start_to_approval(s, "Make sure it works", repo))


def test_contract_review_with_red_and_green_baseline(snap_compare, tmp_path: Path) -> None:
    drafted = contract(
        ("feature", "test -f feature.txt"),
        ("tests_still_pass", "true"),
        description="feature.txt exists; nothing else breaks",
    )

    async def seed(sup: Supervisor, repo: Path) -> None:
        await sup.start("Add the feature file", repo)

    app = _app(tmp_path, drafted, seed)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await open_from_board(app, pilot, "enter")
        await final_frame(pilot, "the session screen")

    assert snap_compare(app, terminal_size=(130, 34), run_before=before)


@pytest.mark.slow
def test_the_finding_variant_and_the_gates_nothing_warning(snap_compare, tmp_path: Path) -> None:
    app = _finding_app(tmp_path)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await open_from_board(app, pilot, "enter")
        await final_frame(pilot, "the session screen")

    assert snap_compare(app, terminal_size=(130, 40), run_before=before)


async def test_the_event_log_filter(tmp_path: Path) -> None:
    from textual.widgets import RichLog

    app = _finding_app(tmp_path)
    async with app.run_test(size=(130, 40)) as pilot:
        screen = await open_from_board(app, pilot, "enter")
        log = screen.query_one("#log", RichLog)
        everything = len(log.lines)
        await pilot.press("l", "l")  # → agent → checks
        await until(pilot, "the checks filter", lambda: screen.log_filter == "checks")
        text = "\n".join(str(line.text) for line in log.lines)
        assert "PASS already_true" in text and "state created" not in text
        assert len(log.lines) < everything


@pytest.mark.slow
async def test_gate1_checks_are_added_edited_and_removed_inline(tmp_path: Path) -> None:
    """e / + / delete on the checks table go through the same revision path as
    typed /check and /remove; a refused revision is shown under the gate."""
    from textual.widgets import DataTable, Input, Static

    drafted = contract(
        ("feature", "test -f feature.txt"),
        ("tests_still_pass", "true"),
        description="feature.txt exists; nothing else breaks",
    )

    async def seed(sup: Supervisor, repo: Path) -> None:
        await sup.start("Add the feature file", repo)

    app = _app(tmp_path, drafted, seed)
    sup = app.supervisor
    async with app.run_test(size=(130, 40)) as pilot:
        screen = await open_from_board(app, pilot, "enter")
        sid = screen.session_id

        def names() -> list[str]:
            c = sup.get(sid).session.contract
            return [k.name for k in c.checks] if c else []

        def command_of_first() -> str:
            c = sup.get(sid).session.contract
            return c.checks[0].command if c else ""

        table = screen.query_one("#checks", DataTable)
        reply = screen.query_one("#reply", Input)
        bar = screen.query_one("#question", Static)
        table.focus()
        table.move_cursor(row=0)
        await pilot.press("enter")  # on the table: edits the check
        await until(pilot, "the edit in the input", lambda: reply.has_focus)
        assert reply.value == "/check feature test -f feature.txt"
        reply.value = "/check feature test -s feature.txt"
        await pilot.press("enter")
        await until(pilot, "the edited check", lambda: command_of_first().startswith("test -s"))

        table.focus()
        await until(pilot, "the table to take focus", lambda: table.has_focus)
        await pilot.press("ctrl+n")
        await until(pilot, "a new check in the input", lambda: reply.value == "/check ")
        await pilot.press(*"smoke true", "enter")
        await until(
            pilot, "the added check", lambda: names() == ["feature", "tests_still_pass", "smoke"]
        )

        table.focus()
        table.move_cursor(row=1)
        await until(pilot, "the table to take focus", lambda: table.has_focus)
        await pilot.press("delete")
        await asked(pilot)
        await until(pilot, "the removal", lambda: names() == ["feature", "smoke"])
        await until(
            pilot, "the revision note", lambda: "Revised and re-baselined" in str(bar.render())
        )

        reply.focus()
        await until(pilot, "the input to take focus", lambda: reply.has_focus)
        await pilot.press(*"/remove nosuch", "enter")
        await until(pilot, "the refusal note", lambda: "Not revised" in str(bar.render()))
        assert "nosuch" in str(bar.render()) and "Use /remove name" in str(bar.render())
        assert names() == ["feature", "smoke"]  # nothing lost


@pytest.mark.slow
async def test_gate1_shows_whole_commands_output_previews_and_literal_brackets(
    tmp_path: Path,
) -> None:
    """The table cuts long commands, so the highlighted check is shown in full
    with the tail of its baseline output; text from the intent, the contract
    and check output is shown literally (brackets are not markup)."""
    from textual.widgets import DataTable, Static

    long_command = (
        "python3 -c \"import sys; print('step one'); print('expected [/y] 42, got 41'); "
        'sys.exit(1)"  # the whole command matters: it defines done'
    )
    drafted = contract(
        ("answer", long_command),
        ("still_ok", "true"),
        description="answer() returns 42 [/b] for x[0]",
    )

    async def seed(sup: Supervisor, repo: Path) -> None:
        await sup.start("Fix answer() [/z] for a[0]", repo)

    app = _app(tmp_path, drafted, seed)
    async with app.run_test(size=(130, 40)) as pilot:
        screen = await open_from_board(app, pilot, "enter")
        header = str(screen.query_one("#session-header", Static).render())
        assert "Fix answer() [/z] for a[0]" in header
        title = str(screen.query_one("#contract-title", Static).render())
        assert "answer() returns 42 [/b] for x[0]" in title
        table = screen.query_one("#checks", DataTable)
        command_cell = str(table.get_row_at(0)[1])
        assert command_cell.endswith("…") and len(command_cell) <= 60
        baseline = [str(c.label) for c in table.columns.values()].index("Baseline")
        assert str(table.get_row_at(0)[baseline]) == (
            "red (proves the work): expected [/y] 42, got 41"
        )
        detail = str(screen.query_one("#check-detail", Static).render())
        assert " ".join(long_command.split()) in " ".join(detail.split())
        assert (
            "baseline: red (proves the work) (exit 1)" in detail
            and "expected [/y] 42, got 41" in detail
        )
        table.focus()
        await until(pilot, "the table to take focus", lambda: table.has_focus)
        await pilot.press("down")
        check_detail = screen.query_one("#check-detail", Static)
        detail = await until(
            pilot,
            "the second check's detail",
            lambda: (text := str(check_detail.render())) and "still_ok runs: true" in text and text,
        )
        assert "green (passes already) (exit 0)" in detail


def test_gate_one_shows_the_setup_and_checks_that_cannot_run(snap_compare, tmp_path: Path) -> None:
    """A red that proves the work, a green, and a check whose tool is missing:
    the last is *cannot run* in its own colour with the reason and the fix,
    never a red; the setup is shown with its network access."""
    drafted = contract(
        ("feature", "test -f feature.txt"),
        ("tests_still_pass", "true"),
        ("lint", "no-such-linter --check ."),
        description="feature.txt exists; nothing else breaks",
    )
    drafted.setup = ['mkdir -p "$CORRAL_ENV/bin"']

    async def seed(sup: Supervisor, repo: Path) -> None:
        await sup.start("Add the feature file", repo)

    app = _app(tmp_path, drafted, seed)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await open_from_board(app, pilot, "enter")
        await pilot.press("escape", "down", "down")  # the check that cannot run, in detail
        await final_frame(pilot, "the session screen")

    assert snap_compare(app, terminal_size=(130, 40), run_before=before)


def test_gate_one_when_the_setup_fails(snap_compare, tmp_path: Path) -> None:
    drafted = contract(("feature", "test -f feature.txt"), description="feature.txt exists")
    drafted.setup = ["echo 'ERROR: No matching distribution found for nosuchpkg' >&2; exit 1"]

    async def seed(sup: Supervisor, repo: Path) -> None:
        await sup.start("Add the feature file", repo)

    app = _app(tmp_path, drafted, seed)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await open_from_board(app, pilot, "enter")
        await final_frame(pilot, "the session screen")

    assert snap_compare(app, terminal_size=(130, 40), run_before=before)


@pytest.mark.slow
async def test_s_edits_the_setup_and_a_fixed_setup_turns_cannot_run_into_a_red(
    tmp_path: Path,
) -> None:
    from textual.widgets import DataTable, Input

    from corral.supervisor.models import CheckVerdict

    drafted = contract(("feature", "greet"), description="greet says hi")
    drafted.setup = ["exit 3"]

    async def seed(sup: Supervisor, repo: Path) -> None:
        await sup.start("Make greet say hi", repo)

    app = _app(tmp_path, drafted, seed)
    sup = app.supervisor
    async with app.run_test(size=(130, 40)) as pilot:
        screen = await open_from_board(app, pilot, "enter")
        sid = screen.session_id

        def verdict() -> CheckVerdict | None:
            baseline = sup.get(sid).session.baseline
            return baseline[0].verdict if baseline else None

        assert verdict() is CheckVerdict.CANNOT_RUN
        table = screen.query_one("#checks", DataTable)
        reply = screen.query_one("#reply", Input)
        table.focus()
        await until(pilot, "the table to take focus", lambda: table.has_focus)
        await pilot.press("ctrl+s")
        await until(pilot, "the setup in the input", lambda: reply.value == "/setup exit 3")
        tool = 'mkdir -p "$CORRAL_ENV/bin" && printf "#!/bin/sh\\nexit 1\\n" > "$CORRAL_ENV/bin/greet" && chmod +x "$CORRAL_ENV/bin/greet"'
        reply.value = f"/setup {tool}"
        await pilot.press("enter")
        await until(pilot, "the re-baseline", lambda: verdict() is CheckVerdict.FAILS, timeout=30)
        baseline = [str(c.label) for c in table.columns.values()].index("Baseline")
        assert str(table.get_row_at(0)[baseline]).startswith("red (proves the work)")


async def test_gate_one_lists_tests_already_failing_as_not_this_tasks_work(
    tmp_path: Path,
) -> None:
    from textual.widgets import Static

    # a runner's TAP report: one test passes, one already fails on the untouched tree
    tap = "printf 'TAP version 13\\nok 1 - adds\\nnot ok 2 - zone\\n1..2\\n'; exit 1"
    drafted = contract(("tests", tap), description="the suite still passes")

    async def seed(sup: Supervisor, repo: Path) -> None:
        await sup.start("Add mul", repo)

    app = _app(tmp_path, drafted, seed)
    async with app.run_test(size=(130, 40)) as pilot:
        screen = await open_from_board(app, pilot, "enter")
        title = screen.query_one("#contract-title", Static)

        def shown() -> str:
            return str(title.render())

        await until(pilot, "the baseline", lambda: "already failing" in shown(), timeout=30)
        assert "tests: already failing on the untouched tree (1): not this task's work" in shown()
        assert "this test was already failing: a regression in it cannot be seen" in shown()
        assert "(zone)" in shown()
        assert app.supervisor.get(screen.session_id).session.baseline[0].passed
