"""Git stats on a board row: while an agent works, its row shows the files
and lines it changed so far and how many commits its base gained since it
started; a finished row keeps its verified diff's numbers, in the stored
listing (`corral sessions --json`) too. Reading them never runs the repo's
diff drivers."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from corral.supervisor.states import CoderState
from corral.supervisor.stored_rows import stored_rows_json
from tests.conftest import SupervisorFactory, eventually, git, proposed, row_of
from tests.fakes.scripted import ScriptedEngine, Wait, Write


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
