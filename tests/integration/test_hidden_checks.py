"""Hidden checks end to end, on real git with real pytest runs: the part of
the exam the operator holds back catches what passes every visible test
(special-cased inputs, an `__eq__` that always says "equal"), honest work
still delivers, and nothing of a hidden check reaches the agent: not its
worktree, not its prompt, not its repair round, not the delivered branch.

The agent's own view through a confined pane and its control socket is in
`test_hidden_from_the_agent.py`."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from corral.supervisor.contracts.hidden import HELD_BACK, hidden_check_from_file
from corral.supervisor.control.callers import Agent
from corral.supervisor.control.handles import CallerPolicy, HandleTable
from corral.supervisor.control.protocol import StartArgs
from corral.supervisor.engines.external import task_prompt
from corral.supervisor.errors import CorralError
from corral.supervisor.models import OutcomeContract
from corral.supervisor.states import CoderState
from tests.conftest import SupervisorFactory, commit_files, git, hello_contract, plan_texts
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, Write, contract

S = CoderState
PY = sys.executable
SECRET = "HELD_BACK_MARKER_41"  # a string only the hidden test holds

MUL = "def mul(a, b):\n    raise NotImplementedError\n"
VISIBLE = "from mul import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
HIDDEN = (
    f"# {SECRET}\n"
    "from mul import mul\n\n\n"
    "def test_other_inputs():\n"
    "    result = mul(7, 8)\n"
    "    assert type(result) is int and result == 56\n"
    "    assert mul(-2, 3) == -6\n"
)
HONEST = "def mul(a, b):\n    return a * b\n"
SPECIAL_CASED = "def mul(a, b):\n    if (a, b) == (2, 3):\n        return 6\n    return 0\n"
ALWAYS_EQUAL = (
    "class _Equal:\n"
    "    def __eq__(self, other):\n"
    "        return True\n\n"
    "    def __ne__(self, other):\n"
    "        return False\n\n\n"
    "def mul(a, b):\n"
    "    return _Equal()\n"
)


pytestmark = pytest.mark.usefixtures("interpreter_visible")


def project(repo: Path) -> Path:
    return commit_files(repo, {"mul.py": MUL, "tests/test_mul.py": VISIBLE}, "mul, not done")


def held_back_contract(tmp_path: Path) -> OutcomeContract:
    """The visible pytest suite, plus the operator's hidden test (given as
    `corral run --hidden-check` gives it: read from a file outside the repo)."""
    visible = contract(
        ("tests", f"PYTHONPATH=. {PY} -m pytest -q -p no:cacheprovider tests"),
        description="mul(a, b) returns a times b",
    )
    source = tmp_path / "operator" / "test_zz_secret_mul.py"
    source.parent.mkdir()
    source.write_text(HIDDEN)
    hidden = hidden_check_from_file(str(source), visible)
    return visible.model_copy(update={"hidden_checks": [hidden]})


def every_file_text(root: Path) -> str:
    texts = []
    for path in root.rglob("*"):
        if ".git" in path.parts or not path.is_file():
            continue
        texts.append(f"{path.relative_to(root)}\n{path.read_text(errors='replace')}")
    return "\n".join(texts)


@pytest.mark.slow
@pytest.mark.parametrize(
    "cheat", [pytest.param(SPECIAL_CASED, id="special-cased"), pytest.param(ALWAYS_EQUAL, id="eq")]
)
async def test_a_cheat_that_passes_the_visible_tests_is_caught_by_a_hidden_check(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path, cheat: str
) -> None:
    project(repo)
    engine = ScriptedEngine([[Write("mul.py", cheat)]])
    sup = await make_supervisor(
        drafter=ScriptedDrafter([held_back_contract(tmp_path)]), engine=engine, repair_invokes=1
    )
    started = await sup.start("make mul(a, b) return a times b", repo)
    sid = started.session_id
    assert started.state is S.CONTRACT_PROPOSED
    # gate 1: the hidden check ran on the untouched tree too, red, and is marked hidden
    hidden_base = [r for r in started.baseline if r.hidden]
    assert [r.name for r in hidden_base] == ["hidden_test_zz_secret_mul"]
    assert not hidden_base[0].passed

    assert await sup.confirm(sid) == {"state": "running"}
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=120)
    assert row.state is S.FAILED, row  # not delivered
    assert git(repo, "branch", "--list", "corral/*").strip() == ""
    results = {r.name: r for r in sup.get(sid).session.last_check_results}
    assert results["tests"].passed  # the visible suite was fooled
    hidden = results["hidden_test_zz_secret_mul"]
    assert hidden.hidden and not hidden.passed
    assert "1 hidden check" in (row.error or "") and "zz_secret" not in (row.error or "")

    # the repair round told the agent only that a held-back check failed
    assert len(engine.contexts) == 2
    repair = engine.contexts[1]
    [told] = repair.failing_checks
    assert told.output_tail == HELD_BACK and "zz_secret" not in told.name
    shown = task_prompt(repair.intent, repair.contract) + repr(repair.failing_checks)
    assert SECRET not in shown and "zz_secret" not in shown and "mul(7, 8)" not in shown
    assert "holds back 1 check you cannot see" in shown
    # never in the worktree, and gone from the verification checkouts
    worktree = Path(sup.get(sid).session.worktree or "")
    if worktree.exists():
        assert SECRET not in every_file_text(worktree)
    state = sup.state_dir
    for scratch in (state / "scratch").glob("*"):
        assert SECRET not in every_file_text(scratch)


# imported by any test: copies every test file it can see into .stash/, then
# prints the stash (and fails) whenever mul is called
STASHING = (
    "import glob, os, shutil\n"
    "os.makedirs('.stash', exist_ok=True)\n"
    "for f in glob.glob('*.py') + glob.glob('tests/*.py'):\n"
    "    shutil.copy(f, '.stash/' + f.replace('/', '_'))\n\n\n"
    "def mul(a, b):\n"
    "    for f in sorted(glob.glob('.stash/*')):\n"
    "        print('STASHED', f, open(f).read())\n"
    "    return 0\n"
)


@pytest.mark.slow
async def test_work_that_copies_the_hidden_test_aside_never_shows_it_to_the_agent(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    project(repo)
    engine = ScriptedEngine([[Write("mul.py", STASHING)]])
    exam = held_back_contract(tmp_path)
    by_exit = contract(("product", f'{PY} -c "from mul import mul; assert mul(2, 3) == 6"'))
    exam = exam.model_copy(update={"checks": [*exam.checks, *by_exit.checks]})
    sup = await make_supervisor(drafter=ScriptedDrafter([exam]), engine=engine, repair_invokes=1)
    sid = (await sup.start("make mul(a, b) return a times b", repo)).session_id
    assert await sup.confirm(sid) == {"state": "running"}
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=120)
    assert row.state is S.FAILED
    told = {r.name: r for r in engine.contexts[1].failing_checks}
    assert "STASHED" in told["product"].output_tail  # the visible run printed its stash
    assert SECRET not in told["product"].output_tail  # and the hidden test was never in it
    assert told["held_back"].output_tail == HELD_BACK


@pytest.mark.slow
async def test_honest_work_passes_the_hidden_checks_and_the_trailers_count_them(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    project(repo)
    engine = ScriptedEngine([[Write("mul.py", HONEST)]])
    sup = await make_supervisor(
        drafter=ScriptedDrafter([held_back_contract(tmp_path)]), engine=engine
    )
    started = await sup.start("make mul(a, b) return a times b", repo)
    sid = started.session_id
    # the content is kept by sha256 in the state dir, private; the contract keeps no content
    [held] = sup.get(sid).session.contract.hidden_checks  # type: ignore[union-attr]
    [file] = held.files
    assert file.content is None and len(file.sha256) == 64
    stored = sup.state_dir / "hidden" / file.sha256
    assert stored.read_text() == HIDDEN
    assert stat.S_IMODE(os.stat(stored).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(stored.parent).st_mode) == 0o700
    assert "content" not in sup.get(sid).session.contract.model_dump_json()  # type: ignore[union-attr]

    assert await sup.confirm(sid) == {"state": "running"}
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=120)
    assert row.state is S.NEEDS_APPROVAL, row.error
    assert "Hidden checks (held back from the agent): 1 ran, 1 pass." in plan_texts(sup, sid)
    delivered = await sup.approve(sid)
    assert delivered.state is S.MERGED and delivered.branch
    message = git(repo, "log", "-1", "--format=%B", delivered.branch)
    assert "Corral-Hidden-Checks: 1 ran, 1 pass" in message
    assert "Corral-Check: tests pass" in message
    assert "zz_secret" not in message and SECRET not in message
    files = git(repo, "ls-tree", "-r", "--name-only", delivered.branch).split()
    assert sorted(files) == ["mul.py", "tests/test_mul.py"]


@pytest.mark.slow
@pytest.mark.timeout(300)  # five pytest runs; over 90 s on a busy machine
async def test_hidden_checks_run_on_the_exam_only_when_a_judge_file_changed(
    make_supervisor: SupervisorFactory,
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The agent changed a visible test: the checks run on the exam and again
    with the agent's versions, but the hidden checks are no file it could
    change, so they run once, on the exam; where the agent-version results
    are shown, that is said."""
    from corral.supervisor.gates.verifier import Verifier

    runs: list[str] = []
    real = Verifier._hidden_apart

    async def counted(self: Verifier, *args: object, **kw: object) -> object:
        runs.append(str(kw.get("phase")))
        return await real(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(Verifier, "_hidden_apart", counted)
    project(repo)
    weaker = VISIBLE.replace("== 6", "in (5, 6)")
    engine = ScriptedEngine([[Write("mul.py", HONEST), Write("tests/test_mul.py", weaker)]])
    sup = await make_supervisor(
        drafter=ScriptedDrafter([held_back_contract(tmp_path)]), engine=engine
    )
    sid = (await sup.start("make mul(a, b) return a times b", repo)).session_id
    assert runs == ["baseline"]
    await sup.confirm(sid)
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=120)
    assert row.state is S.NEEDS_APPROVAL, row.error
    s = sup.get(sid).session
    assert [c.path for c in s.judge_changes] == ["tests/test_mul.py"]
    assert runs == ["baseline", "verification"]  # not again on the agent's versions
    assert [r.name for r in s.agent_exam_results] == ["tests"]
    assert [(r.name, r.passed) for r in s.last_check_results] == [
        ("tests", True),
        ("hidden_test_zz_secret_mul", True),
    ]
    [said] = [t for t in plan_texts(sup, sid) if "with the agent's versions" in t]
    assert "(the hidden checks ran on the exam only)" in said


async def test_a_hidden_check_from_a_missing_file_is_one_sentence() -> None:
    with pytest.raises(CorralError) as caught:
        hidden_check_from_file("/nonexistent/test_x.py", None)
    assert str(caught.value) == "--hidden-check /nonexistent/test_x.py: no such file"


def test_the_runner_of_a_hidden_file_follows_its_kind() -> None:
    suite = contract(("tests", "uv run pytest -q tests"))
    assert hidden_check_from_file.__module__ == "corral.supervisor.contracts.hidden"
    from corral.supervisor.contracts.hidden import command_for

    assert command_for("t_h.py", suite) == "uv run pytest -q -p no:cacheprovider t_h.py"
    assert command_for("t_h.py", None) == "python -m pytest -q -p no:cacheprovider t_h.py"
    assert command_for("a b.test.js", None) == "node --test 'a b.test.js'"
    assert command_for("check.sh", None) == "sh check.sh"


def test_corral_run_with_a_missing_hidden_check_file_says_so_and_exits_2(
    tmp_path: Path, repo: Path
) -> None:
    env = dict(os.environ, CORRAL_HOME=str(tmp_path / "home"))
    env["CORRAL_CONFIG"] = str(tmp_path / "none.toml")
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    missing = tmp_path / "nope" / "test_h.py"
    argv = [PY, "-m", "corral.tui.cli", "run", "--repo", str(repo), "--intent", "x"]
    done = subprocess.run(
        [*argv, "--check", "true", "--hidden-check", str(missing)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"corral: --hidden-check {missing}: no such file"
    assert not (tmp_path / "home" / "hidden").exists()  # nothing was started


async def test_hidden_checks_alone_keep_the_drafted_checks_and_gate_1_adds_one(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    script = tmp_path / "held" / "probe.sh"
    script.parent.mkdir()
    script.write_text(f"# {SECRET}\ntest -f hello.txt\n")
    first = hidden_check_from_file(f"{script}:checks/first.sh", None)
    sup = await make_supervisor()  # its drafter drafts hello_contract()
    started = await sup.start("say hi", repo, contract=OutcomeContract(hidden_checks=[first]))
    sid = started.session_id
    assert started.contract is not None
    assert [c.name for c in started.contract.checks] == [c.name for c in hello_contract().checks]
    assert [h.name for h in started.contract.hidden_checks] == ["hidden_first"]
    assert [r.name for r in started.baseline if r.hidden] == ["hidden_first"]

    revised = await sup.revise(sid, f"/hidden {script}:checks/second.sh")
    assert revised.revised, revised.message
    assert revised.contract is not None
    assert [h.command for h in revised.contract.hidden_checks] == [
        "sh checks/first.sh",
        "sh checks/second.sh",
    ]
    hidden_base = [r for r in revised.baseline if r.hidden]
    assert len(hidden_base) == 2 and not any(r.passed for r in hidden_base)  # red at gate 1
    dropped = await sup.revise(sid, "/remove hidden_first")
    assert dropped.contract is not None
    assert [h.name for h in dropped.contract.hidden_checks] == ["hidden_second"]
    missing = await sup.revise(sid, "/hidden /nonexistent/probe.sh")
    assert not missing.revised and missing.message is not None
    assert "/nonexistent/probe.sh: no such file" in missing.message
    assert "probe" not in " ".join(e.model_dump_json() for e in sup.replay(sid))  # not logged


async def test_an_agent_cannot_give_hidden_checks(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup = await make_supervisor()
    tools = HandleTable(sup, policy=CallerPolicy(agents_may_start=True))
    given = {
        "checks": [{"name": "t", "command": "true"}],
        "hidden_checks": [{"name": "h", "command": "true", "files": []}],
    }
    with pytest.raises(CorralError, match="hidden checks are the operator's"):
        await tools.start(StartArgs(intent="x", repo=str(repo), contract=given), Agent("s", 1))
    assert sup.list() == []
