"""The checks run on exactly the tree that is delivered: a fresh checkout of
it, with nothing else in it. An agent's ignored leftovers (a compiled `.pyc`,
a `node_modules` module) cannot pass a check the delivered tree fails; files a
check writes are not blamed on the agent; a branch that lacks the operator's
uncommitted files is verified as it is and refused with the reason, while the
checkout delivery (which has them) passes."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from corral.supervisor.errors import CorralError
from corral.supervisor.models import EventKind
from corral.supervisor.states import CoderState
from tests.conftest import (
    SupervisorFactory,
    events_of,
    eventually,
    git,
    plan_texts,
    run_to_gate,
)
from tests.fakes.scripted import Run, ScriptedDrafter, ScriptedEngine, Write, contract

S = CoderState

GREETS = "python3 -c \"import greet, sys; sys.exit(0 if greet.greet() == 'hi' else 1)\""


def commit_files(repo: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "files")


def no_branch(repo: Path) -> bool:
    return git(repo, "branch", "--list", "corral/*").strip() == ""


async def test_an_ignored_pyc_compiled_from_a_correct_version_does_not_pass_the_checks(
    make_supervisor: SupervisorFactory, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Python keeps and reads its caches beside the sources here, as it does
    # for most people: with a cache prefix the pyc would be written elsewhere
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    commit_files(
        repo, {".gitignore": "__pycache__/\n", "greet.py": "def greet():\n    return 'no'\n"}
    )
    # a correct greet.py compiled into an unchecked pyc (Python never compares
    # it with the source), then the source left wrong
    cheat = (
        "printf \"def greet():\\n    return 'hi'\\n\" > greet.py && python3 -c "
        '\'import py_compile as p; p.compile("greet.py", '
        "invalidation_mode=p.PycInvalidationMode.UNCHECKED_HASH)' && "
        "printf \"def greet():\\n    return 'ho'\\n\" > greet.py"
    )
    engine = ScriptedEngine([[Run(cheat)]])
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(("greets", GREETS))]), engine=engine, repair_invokes=0
    )
    sid = (await sup.start("greet with hi", repo)).session_id
    row = await run_to_gate(sup, sid)

    worktree = Path(sup.get(sid).session.worktree or "")
    assert list((worktree / "__pycache__").glob("greet.*.pyc"))  # the cheat is there
    assert row.state is S.FAILED
    assert [r.passed for r in sup.get(sid).session.last_check_results] == [False]
    assert no_branch(repo)


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node")
async def test_an_ignored_node_modules_module_the_check_imports_is_not_there(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    commit_files(repo, {".gitignore": "node_modules/\n", "index.js": "module.exports = 1;\n"})
    leftover = (
        "mkdir -p node_modules/greeter && "
        "echo \"module.exports = () => 'hi';\" > node_modules/greeter/index.js && "
        "echo \"module.exports = require('greeter');\" > index.js"
    )
    engine = ScriptedEngine([[Run(leftover)]])
    check = ("greets", "node -e \"process.exit(require('./index.js')() === 'hi' ? 0 : 1)\"")
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(check)]), engine=engine, repair_invokes=0
    )
    sid = (await sup.start("greet with hi", repo)).session_id
    assert await sup.confirm(sid) == {"state": "running"}
    row = await sup.wait_for(sid, needs=True, timeout=60)  # node starts slowly

    assert (Path(sup.get(sid).session.worktree or "") / "node_modules" / "greeter").is_dir()
    # the module is missing where the checks run: the check cannot pass (node's
    # "Cannot find module" reads as a check that cannot run, so corral asks)
    assert row.state is not S.NEEDS_APPROVAL
    assert [r.passed for r in sup.get(sid).session.last_check_results] == [False]
    assert no_branch(repo)


async def test_coverage_files_a_check_writes_are_not_a_moving_worktree(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    writes = (
        "echo $RANDOM$$ > .coverage && mkdir -p .nyc_output && date +%N > .nyc_output/out.json"
        " && grep -q hi hello.txt"
    )
    engine = ScriptedEngine([[Write("hello.txt", "hi\n")]])
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(("hello", writes))]), engine=engine, repair_invokes=0
    )
    sid = (await sup.start("say hi", repo)).session_id
    row = await run_to_gate(sup, sid)

    assert row.state is S.NEEDS_APPROVAL, sup.get(sid).session.error
    assert [e for e in events_of(sup, sid) if e.kind is EventKind.WORKTREE_CHANGED] == []
    worktree = Path(sup.get(sid).session.worktree or "")
    assert not (worktree / ".coverage").exists() and not (worktree / ".nyc_output").exists()
    result = await sup.approve(sid)
    names = git(repo, "ls-tree", "-r", "--name-only", result.branch or "").split()
    assert names == ["hello.txt"]


async def test_a_branch_without_the_operators_untracked_file_fails_where_the_checkout_passes(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    (repo / "fixture.txt").write_text("needed by the suite\n")  # untracked, never committed
    check = ("suite", "test -f fixture.txt && grep -q hi hello.txt")
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(check)]),
        engine=ScriptedEngine([[Write("hello.txt", "hi\n")]]),
    )
    sid = (await sup.start("say hi", repo)).session_id
    row = await run_to_gate(sup, sid)
    assert row.state is S.NEEDS_APPROVAL

    with pytest.raises(CorralError) as refused:
        await sup.approve(sid, delivery="branch")
    said = str(refused.value)
    assert "suite" in said and "fixture.txt" in said and "untracked" in said
    assert "checkout" in said
    assert no_branch(repo)
    assert sup.get(sid).session.state is S.NEEDS_APPROVAL

    result = await sup.approve(sid, delivery="checkout")
    assert result.state is S.MERGED
    assert (repo / "hello.txt").read_text() == "hi\n"
    assert any("your checkout's files" in t for t in plan_texts(sup, sid))


# -- names are bytes ---------------------------------------------------------------------

CAFE = os.fsdecode(b"caf\xe9.txt")
NEW = os.fsdecode(b"n\xe9w.txt")
ODD = ["with\nnewline.txt", "with space.txt", "-leading-dash.txt", '"quoted".txt']


def non_utf8_repo(repo: Path) -> None:
    with open(os.path.join(os.fsencode(repo), os.fsencode(CAFE)), "wb") as fh:
        fh.write(b"old\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "a latin-1 name")


def names_engine() -> ScriptedEngine:
    script = (
        "printf 'new\\n' > \"$(printf 'caf\\351.txt')\" && "
        "printf 'created\\n' > \"$(printf 'n\\351w.txt')\" && "
        "printf 'nl\\n' > \"$(printf 'with\\nnewline.txt')\" && "
        "printf 'sp\\n' > 'with space.txt' && printf 'dash\\n' > ./-leading-dash.txt && "
        "printf 'q\\n' > '\"quoted\".txt' && printf 'hi\\n' > hello.txt"
    )
    return ScriptedEngine([[Run(script)]])


def read(root: Path, name: str) -> bytes:
    with open(os.path.join(os.fsencode(root), os.fsencode(name)), "rb") as fh:
        return fh.read()


@pytest.mark.parametrize("delivery", ["branch", "checkout"])
async def test_names_that_are_not_utf8_or_plain_text_arrive_exactly(
    make_supervisor: SupervisorFactory, repo: Path, delivery: str
) -> None:
    non_utf8_repo(repo)
    check = ("names", "grep -q new \"$(printf 'caf\\351.txt')\" && grep -q hi hello.txt")
    sup = await make_supervisor(drafter=ScriptedDrafter([contract(check)]), engine=names_engine())
    sid = (await sup.start("names", repo)).session_id
    row = await run_to_gate(sup, sid)
    assert row.state is S.NEEDS_APPROVAL, sup.get(sid).session.error

    diff = sup.get(sid).session.diff
    assert diff is not None
    shown = {f.path for f in diff.files}
    assert '"caf\\351.txt"' in shown and '"n\\351w.txt"' in shown  # escaped, not mangled
    assert '"with\\nnewline.txt"' in shown and "with space.txt" in shown

    result = await sup.approve(sid, delivery=delivery)
    assert result.state is S.MERGED
    expected = {CAFE: b"new\n", NEW: b"created\n", "hello.txt": b"hi\n"}
    expected |= {ODD[0]: b"nl\n", ODD[1]: b"sp\n", ODD[2]: b"dash\n", ODD[3]: b"q\n"}
    if delivery == "checkout":
        for name, data in expected.items():
            assert read(repo, name) == data, name
    else:
        listed = subprocess.run(
            ["git", "ls-tree", "-r", "-z", "--name-only", result.branch or ""],
            cwd=repo,
            capture_output=True,
            check=True,
        ).stdout.split(b"\0")
        assert {os.fsencode(n) for n in expected} <= set(listed)
        for name, data in expected.items():
            blob = subprocess.run(
                ["git", "cat-file", "blob", f"{result.branch}:".encode() + os.fsencode(name)],
                cwd=repo,
                capture_output=True,
                check=True,
            ).stdout
            assert blob == data, name


# -- no size cap that lies -------------------------------------------------------------------

# 4,000 files of 10 kB of incompressible text (hex): a 40 MB change whose
# patch text is far over the 32 MiB that corral reads from one git command
BIG_CHANGE = (
    'python3 -c "import os\n'
    "for i in range(4000):\n"
    "    os.makedirs(f'gen/d{i // 100}', exist_ok=True)\n"
    "    open(f'gen/d{i // 100}/f{i}.txt', 'w').write(os.urandom(5000).hex())\n\""
)


async def test_a_40_mb_change_of_thousands_of_files_is_delivered_to_the_checkout(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    check = ("generated", "test $(find gen -type f | wc -l) -eq 4000")
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(check)]), engine=ScriptedEngine([[Run(BIG_CHANGE)]])
    )
    sid = (await sup.start("generate", repo)).session_id
    assert await sup.confirm(sid) == {"state": "running"}
    row = await sup.wait_for(sid, needs=True, timeout=120)
    assert row.state is S.NEEDS_APPROVAL, sup.get(sid).session.error
    tree = sup.get(sid).session.review_tree

    result = await sup.approve(sid, delivery="checkout")
    assert result.state is S.MERGED
    assert sum(1 for _ in (repo / "gen").rglob("*.txt")) == 4000
    for name in [f"gen/d{i // 100}/f{i}.txt" for i in (0, 1999, 3999)]:
        assert (repo / name).read_text() == git(repo, "show", f"{tree}:{name}")


# -- what a setup writes into the tree -------------------------------------------------------

# A shared environment (every command names $CORRAL_ENV) whose build also
# writes an ignored version file into the source tree, as hatch-vcs'
# `version-file` and setuptools-scm's `write_to` do.
VERSION_FILE_SETUP = [
    'mkdir -p "$CORRAL_ENV" && echo built >> "$CORRAL_ENV/builds"',
    "printf \"VERSION = '1.0'\\n\" > _version.py  # the build of $CORRAL_ENV writes it",
]


async def test_a_version_file_the_setup_writes_exists_in_every_verification_tree(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    commit_files(repo, {".gitignore": "_version.py\n"})
    checks = contract(("imports", "python3 -c 'import _version' && grep -q hi hello.txt"))
    checks.setup = VERSION_FILE_SETUP
    sup = await make_supervisor(
        drafter=ScriptedDrafter([checks]),
        engine=ScriptedEngine([[Write("hello.txt", "hi\n")]]),
        repair_invokes=0,
    )
    for _ in range(2):  # the second session finds the environment ready
        sid = (await sup.start("say hi", repo)).session_id
        assert await sup.confirm(sid) == {"state": "running"}
        row = await sup.wait_for(sid, needs=True, timeout=30)
        assert row.state is S.NEEDS_APPROVAL, sup.get(sid).session.last_check_results
        assert not (Path(sup.get(sid).session.worktree or "") / "_version.py").exists()
        await sup.approve(sid, approve=False)


async def test_a_check_that_commits_in_its_checkout_leaves_nothing_behind(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sneaky = (
        "echo x > c.txt && git add c.txt && git -c user.name=a -c user.email=a@a commit -qm "
        'sneaky && git rev-parse HEAD > "$(git rev-parse --git-dir)/moved" && grep -q hi hello.txt'
    )
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(("sneaky", sneaky))]),
        engine=ScriptedEngine([[Write("hello.txt", "hi\n")]]),
    )
    sid = (await sup.start("say hi", repo)).session_id
    row = await run_to_gate(sup, sid)
    assert row.state is S.NEEDS_APPROVAL, sup.get(sid).session.last_check_results
    # the checkouts kept ready for the next checks hold nothing the check did
    for ready in (sup.state_dir / "scratch").glob("[!.]*"):
        assert git(ready, "status", "--porcelain", "--ignored").strip() == ""
        assert "sneaky" not in git(ready, "log", "-1", "--format=%s")
    await sup.close()
    assert list((sup.state_dir / "scratch").glob("[!.]*")) == []
    listed = git(repo, "worktree", "list", "--porcelain")
    assert "/scratch/" not in listed


async def test_a_change_too_large_to_split_is_refused_for_partial_approval_with_its_size(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(("generated", "test -d gen"))]),
        engine=ScriptedEngine([[Run(BIG_CHANGE)]]),
    )
    sid = (await sup.start("generate", repo)).session_id
    assert await sup.confirm(sid) == {"state": "running"}
    assert (await sup.wait_for(sid, needs=True, timeout=120)).state is S.NEEDS_APPROVAL
    with pytest.raises(CorralError, match=r"over 32 MiB.*approve it whole"):
        await sup.approve(sid, selection={"gen/d0/f0.txt": None})
    assert no_branch(repo)


async def test_gate_1_names_a_setup_that_writes_thousands_of_unignored_files(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    fills = contract(("hello", "grep -q hi hello.txt"))
    fills.setup = ["mkdir -p mods && for i in $(seq 1200); do : > mods/m$i.js; done"]
    sup = await make_supervisor(drafter=ScriptedDrafter([fills]))
    sid = (await sup.start("say hi", repo)).session_id

    def setup_tail() -> str | None:
        done = [e for e in events_of(sup, sid) if e.kind is EventKind.SETUP_COMPLETED]
        return done[0].data.outcome.output_tail if done else None  # type: ignore[attr-defined]

    outcome = await eventually(setup_tail, timeout=30)
    assert "the setup wrote 1200 files into the tree that no .gitignore covers" in outcome
