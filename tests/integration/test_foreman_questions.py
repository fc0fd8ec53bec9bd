"""A foreman child's question goes to the operator: real git, real tmux on a
private socket, the demo agent (which asks before it edits) as every
subtask's agent. The parent session shows the question, named by its
subtask; the operator's answer lands in that child's pane."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.demo import demo_contract, make_demo_repo
from corral.supervisor.factory import build_supervisor
from corral.supervisor.models import OutcomeContract
from corral.supervisor.states import CoderState as S
from tests.conftest import fast_config

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

SLUG = "Make slugify() fold accents"
PAGES = "Fix paginate() dropping the last page"


async def test_a_childs_question_is_asked_on_the_parent_and_the_answer_lands_in_its_pane(
    tmp_path: Path,
) -> None:
    repo = make_demo_repo(tmp_path)
    contract = demo_contract(SLUG)
    sup = build_supervisor(
        tmp_path / "state",
        FixedDrafter(contract),
        socket_dir=tmp_path / "tmux",
        demo_pace=0.05,
        config=fast_config(),
    )
    await sup.open()
    try:
        split = {
            "subtasks": [
                {
                    "id": "slug",
                    "intent": SLUG,
                    "files": ["textkit/slug.py"],
                    "checks": [c.name for c in contract.checks],
                }
            ]
        }
        sid = (await sup.start(SLUG, repo, engine="foreman:demo", split=split)).session_id
        await sup.confirm(sid)
        row = await sup.wait_for(sid, needs=True, timeout=60)
        assert row.needs_you == "question", (row.state, row.error)
        assert row.question_prompt == (
            "Subtask slug asks: Do you want to make this edit to textkit/slug.py?"
        )
        assert sup.question_options(sid)[0] == "Yes"
        assert [(p.subtask, p.result) for p in sup.placements(sid)] == [("slug", "running")]
        await sup.respond(sid, "Yes")
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
        assert row.state is S.NEEDS_APPROVAL, row.error
        assert [(p.subtask, p.result, p.attempt) for p in sup.placements(sid)] == [
            ("slug", "integrated", 1)
        ]
        log = sup.journal_path(sid).read_text()
        assert "[slug] the operator's answer 'Yes' landed in its agent's pane" in log
        assert "engine_fallback" not in log  # the child did the work, nobody repaired
        assert row.progress == "1/1 subtasks verified"
    finally:
        await sup.close()
        for sock in (tmp_path / "tmux").glob("*"):
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)


async def test_two_children_asking_at_once_are_put_to_the_operator_one_after_the_other(
    tmp_path: Path,
) -> None:
    repo = make_demo_repo(tmp_path)
    slug, pages = demo_contract(SLUG).checks[0], demo_contract(PAGES).checks[0]
    contract = OutcomeContract(checks=[slug, pages])
    sup = build_supervisor(
        tmp_path / "state",
        FixedDrafter(contract),
        socket_dir=tmp_path / "tmux",
        demo_pace=0.05,
        config=fast_config(),
    )
    await sup.open()
    try:
        split = {
            "subtasks": [
                {"id": "slug", "intent": SLUG, "files": ["textkit/slug.py"], "checks": [slug.name]},
                {
                    "id": "pages",
                    "intent": PAGES,
                    "files": ["textkit/pages.py"],
                    "checks": [pages.name],
                },
            ]
        }
        sid = (
            await sup.start(f"{SLUG}; {PAGES}", repo, engine="foreman:demo", split=split)
        ).session_id
        await sup.confirm(sid)
        asked: list[str] = []
        for _ in range(2):
            row = await sup.wait_for(sid, needs=True, timeout=60)
            assert row.needs_you == "question", (row.state, row.error)
            assert row.question_prompt not in asked  # one child's question, then the other's
            asked.append(row.question_prompt or "")
            await sup.respond(sid, "Yes")
        assert sorted(asked) == [
            "Subtask pages asks: Do you want to make this edit to textkit/pages.py?",
            "Subtask slug asks: Do you want to make this edit to textkit/slug.py?",
        ]
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=60)
        assert row.state is S.NEEDS_APPROVAL, row.error
        assert [(p.subtask, p.result) for p in sup.placements(sid)] == [
            ("slug", "integrated"),
            ("pages", "integrated"),
        ]
    finally:
        await sup.close()
        for sock in (tmp_path / "tmux").glob("*"):
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)


async def test_cancel_while_a_child_asks_clears_the_question_and_stops_the_child(
    tmp_path: Path,
) -> None:
    repo = make_demo_repo(tmp_path)
    contract = demo_contract(SLUG)
    sup = build_supervisor(
        tmp_path / "state",
        FixedDrafter(contract),
        socket_dir=tmp_path / "tmux",
        demo_pace=0.05,
        config=fast_config(),
    )
    await sup.open()
    try:
        split = {"subtasks": [{"id": "slug", "intent": SLUG, "checks": [contract.checks[0].name]}]}
        sid = (await sup.start(SLUG, repo, engine="foreman:demo", split=split)).session_id
        await sup.confirm(sid)
        row = await sup.wait_for(sid, needs=True, timeout=60)
        assert row.needs_you == "question", (row.state, row.error)
        began = time.monotonic()
        await sup.cancel(sid)
        assert time.monotonic() - began < 5
        row = next(r for r in sup.list() if r.session_id == sid)
        assert row.needs_you != "question" and sup.question_options(sid) == []
        assert sup.agent_pane(f"{sid}-slug") is None
        [p] = sup.placements(sid)
        assert p.result == "cancelled" and Path(p.worktree or "").is_dir()
    finally:
        await sup.close()
        for sock in (tmp_path / "tmux").glob("*"):
            subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)
