"""The foreman end to end: real git, real tmux on a private socket, a small
`custom:` agent per subtask. A repo of independent modules and a contract
over all of them; the task is split, each subtask runs in its own worktree
and is verified on its own checks, the verified union lands in the session's
worktree, and the whole contract decides from there."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.errors import CorralError
from corral.supervisor.factory import build_supervisor
from corral.supervisor.models import ContractCheck, OutcomeContract
from corral.supervisor.states import CoderState as S
from tests.conftest import fast_config, git

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        subprocess.run(["which", "tmux"], capture_output=True).returncode != 0,
        reason="tmux is not installed",
    ),
]

# Shows a prompt, reads the pasted task, then does every `<<write X into P>>`
# in it (`<<sleep N>>` first, `<<crash>>` exits 3 instead), and exits 0.
# `<<crash-in-first-worktree M>>` exits 3 in the first worktree it meets (noted in
# the marker file M, outside every worktree) and works anywhere else.
AGENT = r"""
import os, re, select, sys, time
sys.stdout.write("> "); sys.stdout.flush()
data = os.read(0, 65536)
while select.select([0], [], [], 0.5)[0]:
    more = os.read(0, 65536)
    if not more:
        break
    data += more
text = data.decode(errors="replace")
for secs in re.findall(r"<<sleep (\d+)>>", text):
    time.sleep(int(secs))
for marker in re.findall(r"<<crash-in-first-worktree (\S+)>>", text):
    if not os.path.exists(marker):
        with open(marker, "w") as fh:
            fh.write(os.getcwd())
    if open(marker).read() == os.getcwd():
        print("crashing in my first worktree", flush=True)
        sys.exit(3)
if "<<crash>>" in text:
    print("crashing on purpose", flush=True)
    sys.exit(3)
for value, path in re.findall(r"<<write (\S+) into (\S+)>>", text):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as fh:
        fh.write(value + "\n")
    print(f"wrote {path}", flush=True)
"""

MODULES = ("a", "b", "c")


def check(name: str, command: str) -> ContractCheck:
    return ContractCheck(name=name, command=command, timeout_secs=20)


def module_check(m: str) -> ContractCheck:
    return check(m, f"grep -qx {m.upper()} mod_{m}/value.txt")


def make_repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    for m in MODULES:
        (path / f"mod_{m}").mkdir()
        (path / f"mod_{m}" / "value.txt").write_text("old\n")
    (path / "shared.txt").write_text("0\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "init")
    return path


def write(m: str) -> str:
    return f"<<write {m.upper()} into mod_{m}/value.txt>>"


def subtask(m: str, extra: str = "", checks: list[str] | None = None) -> dict[str, object]:
    return {
        "id": f"s_{m}",
        "intent": f"set module {m}: {write(m)} {extra}",
        "files": [f"mod_{m}/value.txt"],
        "checks": checks or [m],
    }


def kill_tmux(tmp_path: Path) -> None:
    for sock in (tmp_path / "tmux").glob("*"):
        subprocess.run(["tmux", "-S", str(sock), "kill-server"], capture_output=True)


def open_sup(tmp_path: Path, contract: OutcomeContract, **config: Any) -> Supervisor:
    return build_supervisor(
        tmp_path / "state",
        FixedDrafter(contract),
        socket_dir=tmp_path / "tmux",
        config=fast_config(max_session_wall_secs=120, **config),
    )


def engine_for(tmp_path: Path) -> str:
    script = tmp_path / "writer_agent.py"
    script.write_text(AGENT)
    return f"foreman:custom:{sys.executable} {script}"


def journal(sup: Supervisor, sid: str) -> str:
    return sup.journal_path(sid).read_text()


async def run_to_gate(sup: Supervisor, sid: str, timeout: float = 90) -> None:
    await sup.confirm(sid)
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED, S.ABANDONED}, timeout=timeout)
    assert row.state is S.NEEDS_APPROVAL, (row.error, journal(sup, sid)[-3000:])


async def test_a_three_way_split_all_green_delivers_one_diff_with_a_placement_per_subtask(
    tmp_path: Path,
) -> None:
    contract = OutcomeContract(checks=[module_check(m) for m in MODULES])
    repo = make_repo(tmp_path / "repo")
    sup = open_sup(tmp_path, contract)
    await sup.open()
    try:
        intent = "set every module: " + " ".join(write(m) for m in MODULES)
        split = {"subtasks": [subtask(m) for m in MODULES]}
        sid = (await sup.start(intent, repo, engine=engine_for(tmp_path), split=split)).session_id
        shown = await sup.foreman_split(sid)  # what gate 1 shows beside the contract
        assert [t.id for t in shown.subtasks] == ["s_a", "s_b", "s_c"]
        await run_to_gate(sup, sid)
        ledger = sup.placements(sid)
        assert [(p.subtask, p.host, p.result) for p in ledger] == [
            ("s_a", "local", "integrated"),
            ("s_b", "local", "integrated"),
            ("s_c", "local", "integrated"),
        ]
        rows = sup.list()
        assert [r.session_id for r in rows] == [sid]  # children are not board rows
        assert rows[0].progress == "3/3 subtasks verified"
        assert "engine_fallback" not in journal(sup, sid)  # nothing needed repair
        result = await sup.approve(sid, delivery="branch")
        assert result.branch is not None
        body = git(repo, "log", "-1", "--format=%B", result.branch)
        assert "Corral-Placement: subtask=s_a host=local files=mod_a/value.txt" in body
        assert "Corral-Placement: subtask=s_b host=local files=mod_b/value.txt" in body
        assert "Corral-Placement: subtask=s_c host=local files=mod_c/value.txt" in body
        changed = git(repo, "diff", "--name-only", "main", result.branch).split()
        assert changed == [f"mod_{m}/value.txt" for m in MODULES]
    finally:
        await sup.close()
    # the ledger is in the store: a new supervisor reads it back
    again = open_sup(tmp_path, contract)
    await again.open()
    try:
        assert [(p.subtask, p.result) for p in again.placements(sid)] == [
            ("s_a", "integrated"),
            ("s_b", "integrated"),
            ("s_c", "integrated"),
        ]
        assert again.list()[0].progress == "3/3 subtasks verified"
    finally:
        await again.close()
        kill_tmux(tmp_path)


async def test_two_subtasks_that_conflict_are_named_and_handed_to_the_repair(
    tmp_path: Path,
) -> None:
    contract = OutcomeContract(
        checks=[module_check("a"), module_check("b"), check("shared", "grep -qx 2 shared.txt")]
    )
    repo = make_repo(tmp_path / "repo")
    sup = open_sup(tmp_path, contract)
    await sup.open()
    try:
        intent = f"{write('a')} {write('b')} <<write 2 into shared.txt>>"
        split = {
            "subtasks": [
                subtask("a", "<<write 1 into shared.txt>>"),
                subtask("b", "<<write 2 into shared.txt>>", ["b", "shared"]),
            ]
        }
        sid = (await sup.start(intent, repo, engine=engine_for(tmp_path), split=split)).session_id
        await run_to_gate(sup, sid)
        ledger = {p.subtask: p for p in sup.placements(sid)}
        assert ledger["s_a"].result == "integrated"
        assert ledger["s_b"].result == "conflict"
        assert ledger["s_b"].reason == "conflicts with s_a on shared.txt"
        log = journal(sup, sid)
        assert "engine_fallback" in log
        assert "s_b and s_a on shared.txt conflict; repairing on top of the verified union" in log
        detail = sup.get(sid).session
        assert detail.engine_ran == detail.engine.removeprefix("foreman:")
        assert "2" in (Path(detail.worktree or "") / "shared.txt").read_text()
        assert Path(ledger["s_b"].worktree or "").is_dir()  # kept for a look
    finally:
        await sup.close()
        kill_tmux(tmp_path)


async def test_a_subtask_that_fails_in_its_first_worktree_is_replaced_once_and_lands(
    tmp_path: Path,
) -> None:
    contract = OutcomeContract(checks=[module_check(m) for m in MODULES])
    repo = make_repo(tmp_path / "repo")
    # the agent leaves its mark outside its worktree, so the place must be one a
    # confined agent may write: a declared cache dir of the sandbox
    marks = tmp_path / "marks"
    marks.mkdir()
    sup = open_sup(tmp_path, contract, sandbox={"writable": [str(marks)]})
    await sup.open()
    try:
        intent = "set every module: " + " ".join(write(m) for m in MODULES)
        marker = marks / "first-worktree-of-s_b"
        split = {
            "subtasks": [
                subtask("a"),
                subtask("b", f"<<crash-in-first-worktree {marker}>>"),
                subtask("c"),
            ]
        }
        sid = (await sup.start(intent, repo, engine=engine_for(tmp_path), split=split)).session_id
        await run_to_gate(sup, sid)
        ledger = {p.subtask: p for p in sup.placements(sid)}
        assert [(p.result, p.attempt) for p in ledger.values()] == [
            ("integrated", 1),
            ("integrated", 2),
            ("integrated", 1),
        ]
        b = ledger["s_b"]
        assert "failed" in (b.first_reason or "") and "custom" in (b.first_reason or "")
        assert b.first_worktree == marker.read_text()  # where the first attempt ran
        assert Path(b.first_worktree).is_dir()  # kept for a look
        assert b.child_id.endswith("-s_b-2") and b.worktree != b.first_worktree
        assert "attempt 2 (the first failed: " in b.line()
        log = journal(sup, sid)
        assert "Subtask s_b failed: " in log and "Re-placing it once in a fresh worktree" in log
        assert "continues without it" not in log
        assert "engine_fallback" not in log  # the union was whole: nothing to repair
        assert sup.list()[0].progress == "3/3 subtasks verified"
        assert sup.get(sid).session.foreman_placements[1] == (
            "subtask=s_b host=local files=mod_b/value.txt"
        )
    finally:
        await sup.close()
    again = open_sup(tmp_path, contract)  # both attempts are in the store
    await again.open()
    try:
        b = {p.subtask: p for p in again.placements(sid)}["s_b"]
        assert (b.attempt, b.result, b.first_worktree) == (2, "integrated", marker.read_text())
    finally:
        await again.close()
        kill_tmux(tmp_path)


async def test_a_subtask_that_fails_twice_is_left_out_and_the_red_union_is_repaired_on_top(
    tmp_path: Path,
) -> None:
    contract = OutcomeContract(checks=[module_check(m) for m in MODULES])
    repo = make_repo(tmp_path / "repo")
    sup = open_sup(tmp_path, contract)
    await sup.open()
    try:
        intent = "set every module: " + " ".join(write(m) for m in MODULES)
        split = {"subtasks": [subtask("a"), subtask("b", "<<crash>>"), subtask("c")]}
        sid = (await sup.start(intent, repo, engine=engine_for(tmp_path), split=split)).session_id
        await run_to_gate(sup, sid)
        ledger = {p.subtask: p for p in sup.placements(sid)}
        assert ledger["s_b"].result == "failed"
        assert ledger["s_b"].attempt == 2  # re-placed once, not more
        assert "custom" in (ledger["s_b"].reason or "")
        assert "custom" in (ledger["s_b"].first_reason or "")
        assert Path(ledger["s_b"].first_worktree or "").is_dir()
        assert Path(ledger["s_b"].worktree or "").is_dir()
        log = journal(sup, sid)
        assert log.count("Re-placing it once") == 1
        assert "Subtask s_b failed again after its re-placement" in log
        assert "continues without it" in log
        assert "left out: s_b (failed" in log
        assert (
            "contract not satisfied after the foreman's verified union; repairing on top of "
            "the verified union"
        ) in log
        s = sup.get(sid).session
        assert s.foreman_placements == [
            "subtask=s_a host=local files=mod_a/value.txt",
            "subtask=s_c host=local files=mod_c/value.txt",
        ]
        assert sup.list()[0].progress == "2/3 subtasks verified"
    finally:
        await sup.close()
        kill_tmux(tmp_path)


async def test_a_subtask_whose_agent_is_not_installed_is_not_re_placed(
    tmp_path: Path,
) -> None:
    contract = OutcomeContract(checks=[module_check("a")])
    repo = make_repo(tmp_path / "repo")
    sup = open_sup(tmp_path, contract)
    await sup.open()
    try:
        agent = tmp_path / "uninstalled-agent"
        agent.write_text("#!/bin/sh\nexit 0\n")
        agent.chmod(0o755)
        split = {"subtasks": [subtask("a")]}
        engine = f"foreman:custom:{agent}"
        sid = (await sup.start(write("a"), repo, engine=engine, split=split)).session_id
        agent.unlink()  # uninstalled between the start and the run
        await sup.confirm(sid)
        row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED, S.ABANDONED}, timeout=90)
        assert row.state is S.FAILED
        [p] = sup.placements(sid)
        assert (p.result, p.attempt, p.first_reason) == ("failed", 1, None)
        assert "not installed" in (p.reason or "")
        log = journal(sup, sid)
        assert "Re-placing" not in log  # a fresh worktree would not install it
        assert "Subtask s_a failed: " in log and "continues without it" in log
    finally:
        await sup.close()
        kill_tmux(tmp_path)


async def test_cancel_stops_every_child_within_five_seconds_and_keeps_their_worktrees(
    tmp_path: Path,
) -> None:
    contract = OutcomeContract(checks=[module_check(m) for m in MODULES])
    repo = make_repo(tmp_path / "repo")
    sup = open_sup(tmp_path, contract)
    await sup.open()
    try:
        split = {"subtasks": [subtask(m, "<<sleep 60>>") for m in MODULES]}
        sid = (await sup.start("slow", repo, engine=engine_for(tmp_path), split=split)).session_id
        await sup.confirm(sid)
        deadline = time.monotonic() + 30
        children = [f"{sid}-s_{m}" for m in MODULES]
        while not all(sup.agent_pane(c) for c in children):
            assert time.monotonic() < deadline, "the children never started"
            await asyncio.sleep(0.2)
        began = time.monotonic()
        await sup.cancel(sid)
        took = time.monotonic() - began
        assert took < 5, took
        assert all(sup.agent_pane(c) is None for c in children)
        ledger = sup.placements(sid)
        assert [p.result for p in ledger] == ["cancelled"] * 3
        assert all(Path(p.worktree or "").is_dir() for p in ledger)
    finally:
        await sup.close()
        kill_tmux(tmp_path)


async def test_a_split_asked_of_an_engine_that_cannot_distribute_is_refused(
    tmp_path: Path,
) -> None:
    contract = OutcomeContract(checks=[module_check("a")])
    repo = make_repo(tmp_path / "repo")
    sup = open_sup(tmp_path, contract)
    await sup.open()
    try:
        with pytest.raises(CorralError, match="a split needs the foreman engine"):
            await sup.start("x", repo, engine="custom:true", split={"subtasks": [subtask("a")]})
        assert sup.list() == []  # refused before anything was made
        sid = (await sup.start("x", repo, engine="custom:true")).session_id
        with pytest.raises(CorralError, match="cannot distribute"):
            sup.set_foreman_split(sid, {"subtasks": [subtask("a")]})
    finally:
        await sup.close()
        kill_tmux(tmp_path)


async def test_closing_corral_mid_split_stops_the_children_and_the_next_owner_reads_why(
    tmp_path: Path,
) -> None:
    contract = OutcomeContract(checks=[module_check(m) for m in MODULES])
    repo = make_repo(tmp_path / "repo")
    sup = open_sup(tmp_path, contract)
    await sup.open()
    split = {"subtasks": [subtask(m, "<<sleep 60>>") for m in MODULES]}
    sid = (await sup.start("slow", repo, engine=engine_for(tmp_path), split=split)).session_id
    await sup.confirm(sid)
    deadline = time.monotonic() + 30
    while not all(sup.agent_pane(f"{sid}-s_{m}") for m in MODULES):
        assert time.monotonic() < deadline, "the children never started"
        await asyncio.sleep(0.2)
    await sup.close()
    again = open_sup(tmp_path, contract)
    await again.open()
    try:
        ledger = again.placements(sid)
        assert [p.result for p in ledger] == ["cancelled"] * 3
        assert all(p.reason == "corral closed while it ran; its worktree is kept" for p in ledger)
        assert all(Path(p.worktree or "").is_dir() for p in ledger)
        row = again.list()[0]
        assert row.state is S.FAILED and row.progress == "0/3 subtasks verified"
    finally:
        await again.close()
        kill_tmux(tmp_path)
