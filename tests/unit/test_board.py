"""The board feed: `watch`, coalesced summary pushes, and shedding a board
that stops reading.

The first tests wire real `EventLog`s, attention folds and `BoardFeed` exactly
as the session registry does; the rest go through the `Supervisor` facade.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from corral.supervisor.events import (
    AuthRequiredData,
    CheckCompletedData,
    CoderEvent,
    DiffReadyData,
    IterationStartedData,
    OperatorGuidanceData,
    PlanTextData,
    ToolCallData,
    UserInputRequestedData,
)
from corral.supervisor.models import CheckResult, CoderSession, SessionSummary
from corral.supervisor.session.board import BoardFeed, WatchDropped
from corral.supervisor.session.journal import EventLog
from corral.supervisor.session.live import LiveSession
from corral.supervisor.session.summaries import live_summary, stored_summary
from corral.supervisor.states import CoderState, NeedsYou
from tests.conftest import Clock, SupervisorFactory, eventually, fast_config
from tests.fakes.owner import opened_with_registry


class Board:
    """Hand-built live entries feeding one `BoardFeed`."""

    def __init__(self, shed_secs: float = 10.0) -> None:
        self.entries: dict[str, LiveSession] = {}
        self.clock = Clock(0.0)  # how long a watcher has not read: driven, never waited
        self.feed = BoardFeed(self.build, shed_secs=shed_secs, clock=self.clock)

    def build(self, session_id: str) -> SessionSummary | None:
        entry = self.entries.get(session_id)
        return live_summary(entry) if entry else None

    def add(self, session_id: str, state: CoderState = CoderState.RUNNING) -> LiveSession:
        session = CoderSession(id=session_id, repo="/r", intent="do it", state=state)
        holder: list[LiveSession] = []

        def observe(event: CoderEvent) -> None:
            if holder[0].attention.observe(event):
                self.feed.notify(session_id)

        entry = LiveSession(session=session, log=EventLog(session_id, observer=observe))
        holder.append(entry)
        self.entries[session_id] = entry
        return entry


async def settle() -> None:
    """Let the once-per-pass drain run."""
    for _ in range(3):
        await asyncio.sleep(0)


async def test_narration_does_not_push_but_attention_changes_do() -> None:
    board = Board()
    entry = board.add("s1")
    watcher = board.feed.register()

    entry.log.append(PlanTextData(text="thinking"))
    entry.log.append(ToolCallData(tool="shell"))
    entry.log.append(CheckCompletedData(result=CheckResult(name="c", passed=True)))
    entry.log.append(OperatorGuidanceData(text="x", status="queued"))
    await settle()
    assert watcher.get_nowait() == []

    entry.log.append(IterationStartedData(n=2, max=8))
    await settle()
    pushed = watcher.get_nowait()
    assert [(s.session_id, s.iterations) for s in pushed] == [("s1", 2)]


async def test_clearing_a_sign_in_request_fans_out_even_for_narration() -> None:
    board = Board()
    entry = board.add("s1")
    watcher = board.feed.register()

    entry.log.append(AuthRequiredData(message="sign in", wait_secs=30))
    await settle()
    [row] = watcher.get_nowait()
    assert row.needs_you is NeedsYou.AUTH
    assert (row.auth_message, row.auth_wait_secs) == ("sign in", 30)
    assert row.needs_you_label == "sign-in needed"

    entry.log.append(PlanTextData(text="signed in, continuing"))
    await settle()
    [row] = watcher.get_nowait()
    assert row.needs_you is None
    assert row.auth_message is None and row.auth_wait_secs is None

    entry.log.append(PlanTextData(text="more narration"))
    await settle()
    assert watcher.get_nowait() == []


async def test_many_changes_to_one_session_coalesce_into_one_newest_summary() -> None:
    board = Board()
    a = board.add("a")
    b = board.add("b")
    watcher = board.feed.register()

    for n in range(1, 6):
        a.log.append(IterationStartedData(n=n, max=8))
    b.log.append(IterationStartedData(n=1, max=8))
    a.session.state = CoderState.NEEDS_APPROVAL
    a.log.append(DiffReadyData())
    await settle()
    rows = {s.session_id: s for s in watcher.get_nowait()}
    assert set(rows) == {"a", "b"}  # one summary per session
    assert rows["a"].iterations == 5
    assert rows["a"].state is CoderState.NEEDS_APPROVAL
    assert rows["a"].needs_you is NeedsYou.MERGE

    # across drains, an unread mailbox keeps only the newest summary per session
    a.log.append(IterationStartedData(n=6, max=8))
    await settle()
    a.log.append(IterationStartedData(n=7, max=8))
    await settle()
    b.log.append(IterationStartedData(n=2, max=8))
    await settle()
    rows_list = watcher.get_nowait()
    assert [s.session_id for s in rows_list] == ["a", "b"]
    assert rows_list[0].iterations == 7
    assert rows_list[1].iterations == 2


async def test_one_drain_builds_each_summary_once_for_every_watcher() -> None:
    board = Board()
    entry = board.add("s1")
    builds: list[str] = []
    original = board.feed._build
    board.feed._build = lambda sid: (builds.append(sid), original(sid))[1]  # count builds
    watchers = [board.feed.register() for _ in range(3)]
    for n in range(1, 4):
        entry.log.append(IterationStartedData(n=n, max=8))
    await settle()
    assert builds == ["s1"]
    rows = [w.get_nowait() for w in watchers]
    assert all(len(r) == 1 and r[0].iterations == 3 for r in rows)
    assert rows[0][0] is rows[1][0] is rows[2][0]  # one summary, handed to all


async def test_a_waiting_reader_is_woken_by_a_push() -> None:
    board = Board()
    entry = board.add("s1")
    watcher = board.feed.register()
    reader = asyncio.create_task(watcher.get())
    await settle()
    assert not reader.done()
    entry.log.append(UserInputRequestedData(prompt="?"))
    rows = await asyncio.wait_for(reader, 1)
    assert [r.session_id for r in rows] == ["s1"]


async def test_a_wedged_watcher_is_shed_and_a_healthy_one_is_kept() -> None:
    board = Board(shed_secs=0.05)
    entry = board.add("s1")
    wedged = board.feed.register()
    healthy = board.feed.register()
    healthy_rows: list[SessionSummary] = []

    async def read_forever() -> None:
        while True:
            healthy_rows.extend(await healthy.get())

    reader = asyncio.create_task(read_forever())
    try:
        for n in range(1, 4):
            entry.log.append(IterationStartedData(n=n, max=8))
            await settle()
            board.clock.advance(0.04)
        # both got pushes; the wedged one has not read for > shed_secs with updates waiting
        board.clock.advance(0.06)
        entry.log.append(IterationStartedData(n=4, max=8))
        await settle()

        assert wedged.dropped
        assert not board.feed.is_registered(wedged)
        assert board.feed.is_registered(healthy) and not healthy.dropped
        assert board.feed.watcher_count == 1
        await eventually(lambda: healthy_rows and healthy_rows[-1].iterations == 4)

        # the shed board is told to resync (after at most what it was already handed)
        with pytest.raises(WatchDropped, match="resync"):
            for _ in range(3):
                await asyncio.wait_for(wedged.get(), 1)
        # and it is never handed anything again
        entry.log.append(IterationStartedData(n=5, max=8))
        await settle()
        assert wedged.get_nowait() == []
    finally:
        reader.cancel()


async def test_a_quiet_watcher_with_nothing_waiting_is_not_shed() -> None:
    board = Board(shed_secs=0.02)
    entry = board.add("s1")
    idle = board.feed.register()  # never reads, but nothing is queued for it yet
    board.clock.advance(0.05)
    entry.log.append(IterationStartedData(n=1, max=8))
    await settle()
    assert board.feed.is_registered(idle)
    assert [r.iterations for r in idle.get_nowait()] == [1]


async def test_no_watchers_means_no_summaries_are_built() -> None:
    board = Board()
    entry = board.add("s1")
    builds: list[str] = []
    original = board.feed._build
    board.feed._build = lambda sid: (builds.append(sid), original(sid))[1]
    entry.log.append(IterationStartedData(n=1, max=8))
    await settle()
    assert builds == []


def test_notify_outside_a_loop_drains_immediately() -> None:
    board = Board()
    board.add("s1")
    watcher = board.feed.register()
    board.feed.notify("s1")
    assert [r.session_id for r in watcher.get_nowait()] == ["s1"]


# --- through the Supervisor ----------------------------------------------------------


async def test_watch_returns_the_list_and_registers_the_caller(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor()
    started = await sup.start("say hi", repo)
    rows, watcher = sup.watch()
    [row] = rows
    assert row.session_id == started.session_id
    assert row.needs_you is NeedsYou.CONTRACT
    assert row.needs_you_label == "contract awaiting confirmation"
    assert row.live is True

    # a change after the watch reaches the watcher (nothing falls between list and register)
    await sup.confirm(started.session_id)
    pushed = await asyncio.wait_for(watcher.get(), 5)
    assert pushed[-1].session_id == started.session_id
    assert pushed[-1].state in (CoderState.RUNNING, CoderState.NEEDS_APPROVAL)
    assert pushed[-1].needs_you is not NeedsYou.CONTRACT

    assert sup.unwatch(watcher) is True  # it was registered
    assert sup.unwatch(watcher) is False  # and is no longer
    with pytest.raises(WatchDropped, match="closed"):
        await asyncio.wait_for(watcher.get(), 1)


async def test_watcher_close_unregisters(make_supervisor: SupervisorFactory) -> None:
    sup = await make_supervisor()
    rows, watcher = sup.watch()
    assert rows == []
    watcher.close()
    assert sup.unwatch(watcher) is False  # closing it unregistered it


async def test_supervisor_pushes_skip_narration(state_dir: Path, repo: Path) -> None:
    async with opened_with_registry(state_dir, config=fast_config()) as (sup, registry):
        started = await sup.start("say hi", repo)
        sid = started.session_id
        _, watcher = sup.watch()
        entry = registry.live(sid)
        registry.emit(entry, PlanTextData(text="narration"))
        registry.emit(entry, ToolCallData(tool="read_file"))
        await settle()
        assert watcher.get_nowait() == []
        registry.emit(entry, IterationStartedData(n=3, max=8))
        await settle()
        [row] = watcher.get_nowait()
        assert row.iterations == 3
        assert row.next_seq == entry.log.next_seq  # built after the event, not before


async def test_summaries_have_every_key_and_keep_nulls(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor()
    started = await sup.start("say hi", repo)
    [row] = sup.list()
    wire = json.loads(row.model_dump_json())
    assert set(wire) == set(SessionSummary.model_fields)
    assert wire["session_id"] == started.session_id
    assert wire["label"] == "corral-" + started.session_id[-8:]
    assert wire["state"] == "contract_proposed"
    assert wire["live"] is True
    assert wire["needs_you"] == "contract"
    assert isinstance(wire["next_seq"], int)
    assert isinstance(wire["worktree"], str)
    for key in (
        "question_prompt",
        "auth_message",
        "auth_wait_secs",
        "failure_kind",
        "error",
        "result_branch",
        "result_commit",
        "model",
        "discussion_id",
        "engine_ran",
    ):
        assert key in wire and wire[key] is None, key

    # a stored (not live) row has the same keys, with the live-only ones null
    stored = json.loads(stored_summary(sup.get(started.session_id).session).model_dump_json())
    assert set(stored) == set(wire)
    assert stored["live"] is False
    assert stored["needs_you"] is None and stored["needs_you_label"] is None
    assert stored["next_seq"] is None
    assert stored["steering_available"] is False


def test_a_persisted_summary_never_advertises_an_action(tmp_path: Path) -> None:
    worktree = tmp_path / "wt"
    session = CoderSession(
        id="0123456789abcdef",
        repo="/r",
        intent="x",
        state=CoderState.NEEDS_APPROVAL,
        worktree=str(worktree),
    )
    row = stored_summary(session)
    assert row.live is False and row.needs_you is None and row.needs_you_label is None
    assert row.state is CoderState.NEEDS_APPROVAL
    assert row.next_seq is None
    assert row.worktree is None  # the directory is missing
    worktree.mkdir()
    assert stored_summary(session).worktree == str(worktree)
    # failure_kind is reported only for failed rows, defaulting to error for legacy rows
    assert row.failure_kind is None
    failed = session.model_copy(update={"state": CoderState.FAILED})
    assert stored_summary(failed).failure_kind == "error"
