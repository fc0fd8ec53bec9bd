"""Git stats on a board row: while an agent works, its row shows the files
and lines it changed so far and how many commits its base gained since it
started; a finished row keeps its verified diff's numbers, in the stored
listing (`corral sessions --json`) too. Reading them never runs the repo's
diff drivers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from corral.supervisor.git.errors import GitError
from corral.supervisor.session import git_stats
from corral.supervisor.states import CoderState
from corral.supervisor.stored_rows import stored_rows_json
from tests.conftest import SupervisorFactory, eventually, git, proposed, row_of
from tests.fakes.scripted import ScriptedEngine, Wait, Write


def count_reads(monkeypatch: pytest.MonkeyPatch) -> tuple[list[Path], list[int]]:
    """The worktrees git stats list, in order, and how many each sweep listed."""
    read: list[Path] = []
    real_snapshot = git_stats.snapshot_tree

    def snapshot(worktree: Path) -> str:
        read.append(worktree)
        return real_snapshot(worktree)

    monkeypatch.setattr(git_stats, "snapshot_tree", snapshot)
    per_sweep: list[int] = []
    real_refresh = git_stats.GitStatsWatch.refresh

    async def refresh(watch: git_stats.GitStatsWatch) -> None:
        before = len(read)
        await real_refresh(watch)
        per_sweep.append(len(read) - before)

    monkeypatch.setattr(git_stats.GitStatsWatch, "refresh", refresh)
    return read, per_sweep


async def test_a_working_session_shows_its_changes_and_its_base_lead(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path, state_dir: Path
) -> None:
    # a textconv driver that would leave a mark if anything ran it
    mark = tmp_path / "textconv-ran"
    git(repo, "config", "diff.mark.textconv", f"sh -c 'touch {mark}; cat \"$0\"'")
    (repo / ".gitattributes").write_text("*.txt diff=mark\n")
    (repo / "notes.txt").write_text("one\ntwo\nthree\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "notes")

    go_on = asyncio.Event()
    engine = ScriptedEngine(
        [[Write("hello.txt", "hi\n"), Write("notes.txt", "one\n2\nthree\nfour\n"), Wait(go_on)]]
    )
    sup = await make_supervisor(engine=engine, git_stats_secs=0.1)
    sid = await proposed(sup, repo)
    await sup.confirm(sid)

    def stats() -> tuple[object, ...]:
        r = row_of(sup, sid)
        return (r.files_changed, r.lines_added, r.lines_removed, r.behind_base)

    await eventually(lambda: stats() == (2, 3, 1, 0), timeout=10)

    # the base moves on while the agent works
    (repo / "other.md").write_text("x\n")
    git(repo, "add", "other.md")
    git(repo, "commit", "-qm", "meanwhile")
    await eventually(lambda: stats() == (2, 3, 1, 1), timeout=10)
    assert not mark.exists(), "reading the stats ran the repo's textconv driver"

    go_on.set()
    await sup.wait_for(sid, {CoderState.NEEDS_APPROVAL}, timeout=20)
    await sup.approve(sid)
    await sup.wait_for(sid, {CoderState.MERGED})
    assert stats()[:3] == (2, 3, 1)  # the delivered diff's numbers
    await sup.close()

    kept = stored_rows_json(state_dir)
    assert kept is not None
    row = next(r for r in json.loads(kept) if r["session_id"] == sid)
    assert (row["files_changed"], row["lines_added"], row["lines_removed"]) == (2, 3, 1)
    assert not mark.exists()


async def test_with_more_live_sessions_than_a_sweep_reads_every_row_gets_its_stats_in_turn(
    make_supervisor: SupervisorFactory, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep reads a bounded number of sessions (listing a worktree costs
    git processes): with one read a sweep and three live sessions, each row
    still gets its stats, read in turn, none read twice before the others."""
    monkeypatch.setattr(git_stats, "READS_PER_SWEEP", 1, raising=False)
    read, per_sweep = count_reads(monkeypatch)
    go_on = asyncio.Event()
    engine = ScriptedEngine([[Write("hello.txt", "hi\n"), Wait(go_on)]])
    sup = await make_supervisor(engine=engine, git_stats_secs=0.1)
    sids = [await proposed(sup, repo, f"say hi {i}") for i in range(3)]
    for sid in sids:
        await sup.confirm(sid)
    await eventually(lambda: all(row_of(sup, sid).files_changed == 1 for sid in sids), timeout=20)
    read.clear()  # from here on every sweep finds all three live
    await eventually(lambda: len(read) >= 6, timeout=20)
    windows = [read[i : i + 3] for i in range(4)]
    assert all(len(set(w)) == 3 for w in windows), read  # in turn: none twice before the others
    assert max(per_sweep) == 1, per_sweep  # never all three in one sweep
    go_on.set()
    await sup.close()


async def test_a_quiet_session_is_not_reread_every_sweep_yet_its_changes_show(
    make_supervisor: SupervisorFactory, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listing a worktree costs git processes: a session with no activity is
    read again only after QUIET_REREAD_SWEEPS sweeps. An event makes it read
    at the next sweep; a silent write shows by the quiet re-read."""
    monkeypatch.setattr(git_stats, "QUIET_REREAD_SWEEPS", 10_000, raising=False)
    _read, sweeps = count_reads(monkeypatch)
    go_on, then_wait = asyncio.Event(), asyncio.Event()
    engine = ScriptedEngine(
        [[Write("hello.txt", "hi\n"), Wait(go_on), Write("more.txt", "x\n"), Wait(then_wait)]]
    )
    sup = await make_supervisor(engine=engine, git_stats_secs=0.05)
    sid = await proposed(sup, repo)
    await sup.confirm(sid)
    await eventually(lambda: row_of(sup, sid).files_changed == 1, timeout=10)
    await eventually(lambda: len(sweeps) >= 3, timeout=10)
    settled = len(sweeps) + 2  # its first read, then one more
    await eventually(lambda: len(sweeps) >= settled + 15, timeout=10)
    assert sum(sweeps[settled:]) == 0, sweeps  # fifteen quiet sweeps, no listing

    go_on.set()  # the agent writes and says so: read at once
    await eventually(lambda: row_of(sup, sid).files_changed == 2, timeout=5)

    worktree = Path(row_of(sup, sid).worktree or "")
    monkeypatch.setattr(git_stats, "QUIET_REREAD_SWEEPS", 5, raising=False)
    (worktree / "silent.txt").write_text("written without a word\n")
    await eventually(lambda: row_of(sup, sid).files_changed == 3, timeout=10)
    then_wait.set()
    await sup.close()


async def test_a_read_that_failed_is_tried_again_at_the_next_sweep(
    make_supervisor: SupervisorFactory, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worktree that could not be listed (git failed a moment) is not taken
    for one that was read: the next sweep reads it, quiet or not."""
    monkeypatch.setattr(git_stats, "QUIET_REREAD_SWEEPS", 10_000, raising=False)
    failures = [GitError("index.lock held a moment")] * 2
    real_snapshot = git_stats.snapshot_tree

    def snapshot(worktree: Path) -> str:
        if failures:
            raise failures.pop()
        return real_snapshot(worktree)

    monkeypatch.setattr(git_stats, "snapshot_tree", snapshot)
    go_on = asyncio.Event()
    engine = ScriptedEngine([[Write("hello.txt", "hi\n"), Wait(go_on)]])
    sup = await make_supervisor(engine=engine, git_stats_secs=0.05)
    sid = await proposed(sup, repo)
    await sup.confirm(sid)
    await eventually(lambda: row_of(sup, sid).files_changed == 1, timeout=10)
    assert not failures
    go_on.set()
    await sup.close()
