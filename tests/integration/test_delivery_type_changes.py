"""A delivery that changes what kind of thing a path is says so before it
writes, and never writes through the operator's symlink: a symlink replaced by
a directory, a file by a symlink, an executable bit, a directory by a file are
listed at gate 2 (and by the confirm question and `corral approve`); a checkout
delivery that would replace the operator's symlinked directory with a real one
(tracked link or untracked) is refused with a sentence and writes nothing."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import pytest

from corral.supervisor.errors import CorralError
from corral.supervisor.states import CoderState as S
from tests.conftest import SupervisorFactory, git
from tests.fakes.scripted import Run, ScriptedDrafter, ScriptedEngine, contract


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


async def at_gate_2(make_supervisor: SupervisorFactory, repo: Path, command: str) -> Any:
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(("done", "test -f done.txt"))]),
        engine=ScriptedEngine([[Run(command + " && touch done.txt")]]),
    )
    sid = (await sup.start("change kinds", repo)).session_id
    await sup.confirm(sid)
    row = await sup.wait_for(sid, needs=True, timeout=20)
    assert row.state is S.NEEDS_APPROVAL, sup.get(sid).session.error
    return sup, sid


async def test_a_tracked_symlinked_directory_is_never_replaced_in_the_checkout(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    (repo / "real_docs").mkdir()
    (repo / "real_docs" / "a.md").write_text("the operator's docs\n")
    os.symlink("real_docs", repo / "docs")
    commit_all(repo, "docs is a link")
    sup, sid = await at_gate_2(
        make_supervisor, repo, "rm docs && mkdir docs && echo new > docs/new.md"
    )
    kinds = sup.get(sid).session.diff.type_changes
    assert kinds == ["docs: a symlink becomes a directory"]

    with pytest.raises(CorralError, match=r"docs \(→ real_docs\) is a symlink in your checkout"):
        await sup.approve(sid, delivery="checkout")
    assert os.readlink(repo / "docs") == "real_docs"  # nothing was written
    assert not (repo / "real_docs" / "new.md").exists()
    assert sup.get(sid).session.state is S.NEEDS_APPROVAL

    result = await sup.approve(sid, delivery="branch")  # a branch touches no working file
    assert result.state is S.MERGED and result.branch
    assert git(repo, "ls-tree", result.branch, "docs").split()[:2] == ["040000", "tree"]
    assert os.readlink(repo / "docs") == "real_docs"


async def test_an_untracked_symlink_in_the_checkout_is_never_written_through(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    sup, sid = await at_gate_2(make_supervisor, repo, "mkdir notes && echo x > notes/x.md")
    os.symlink(outside, repo / "notes")  # the operator's own link, made while the agent worked
    with pytest.raises(CorralError, match=r"notes \(→ .*outside\) is a symlink in your checkout"):
        await sup.approve(sid, delivery="checkout")
    assert os.listdir(outside) == []
    assert os.path.islink(repo / "notes")


async def test_every_kind_change_is_listed_at_gate_2(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    (repo / "tool.sh").write_text("echo\n")
    (repo / "plain.txt").write_text("plain\n")
    (repo / "folder").mkdir()
    (repo / "folder" / "inner.txt").write_text("inner\n")
    os.symlink("plain.txt", repo / "link")
    commit_all(repo, "kinds")
    sup, sid = await at_gate_2(
        make_supervisor,
        repo,
        "chmod +x tool.sh && rm plain.txt && ln -s /etc/passwd plain.txt"
        " && rm -r folder && echo now-a-file > folder && rm link && echo text > link"
        " && ln -s ../../.ssh keys",
    )
    assert sorted(sup.get(sid).session.diff.type_changes) == sorted(
        [
            "folder: a directory becomes a file",
            "tool.sh: becomes executable",
            "plain.txt: a file becomes a symlink pointing to /etc/passwd",
            "link: a symlink becomes a file",
            "keys: a new symlink pointing to ../../.ssh",
        ]
    )


def test_corral_approve_says_the_kind_changes_before_it_delivers(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The owner is a stand-in here (what it answers is the real shape of
    `get`): the sentence is on stdout before `approve` is called."""
    from corral.tui.cli import client as cli

    said_before: list[str] = []

    class Owner:
        def __enter__(self) -> Owner:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def list(self) -> list[Any]:
            return [argparse.Namespace(session_id="a" * 24)]

        def answer(self, call: Any, params: Any) -> Any:
            if call.name == "get":
                kinds = ["docs: a symlink becomes a directory"]
                return {"session": {"diff": {"type_changes": kinds}}}
            said_before.append(capsys.readouterr().out)
            return {"state": "merged"}

    monkeypatch.setattr(cli, "_client", Owner)
    args = argparse.Namespace(
        command="approve", session="a" * 24, delivery="checkout", comment=None, files=None,
        accept_finding=False, accept_judge_changes=False, accept_flaky=False, json=False,
    )  # fmt: skip
    assert cli.act(args) == 0
    assert said_before and "docs: a symlink becomes a directory" in said_before[0]


def test_submodules_coming_and_going_are_named(tmp_path: Path) -> None:
    from corral.supervisor.git.result_tree import Change
    from corral.supervisor.git.type_changes import type_changes

    sha = "a" * 40
    changes = [
        Change("lib", ("160000", sha), ("100644", "b" * 40)),
        Change("vendor/x", None, ("160000", "c" * 40)),
        Change("tool", ("100644", sha), ("160000", "d" * 40)),
    ]
    assert type_changes(tmp_path, changes) == [
        "lib: a submodule becomes a file",
        "tool: a file becomes a submodule at commit dddddddddddd",
        "vendor/x: a new submodule at commit cccccccccccc",
    ]
