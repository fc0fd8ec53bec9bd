"""The operator's exam and hidden checks on sessions on another host, over a
real SSH server (Debian's sshd on 127.0.0.1; the "remote machine" is a
directory tree of its own) with real pytest runs there.

A scripted agent on the host rigs the exam in its worktree there (a
`conftest.py` that rewrites every report to "passed", a deleted test file
beside a broken function): the checks run on the host with the judge files
as they were at gate 1, so it is not delivered as verified, and the rigging
is named where a person reads it. A hidden check (its file kept in the
operator's state dir here) catches special-cased inputs on the host, and its
file is found nowhere on the host afterwards. Honest work there still
delivers, and a judge change there waits for a person.

Before the exam was built for host sessions, the two riggings were
delivered (approve merged them), and a contract with hidden checks was
refused at gate 1 for a session on a host."""

# ruff: noqa: F811 - the sshd and cleanup fixtures come from test_host_sessions
from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.contracts.hidden import hidden_check_from_file
from corral.supervisor.errors import CorralError
from corral.supervisor.factory import build_supervisor
from corral.supervisor.hosts.configured import Hosts
from corral.supervisor.hosts.settings import HostSettings
from corral.supervisor.models import OutcomeContract
from corral.supervisor.states import CoderState as S
from tests.conftest import eventually, fast_config, git, plan_texts
from tests.fakes.scripted import ScriptedDrafter, contract
from tests.fakes.sshd import SshServer, sshd_missing
from tests.integration.test_host_sessions import (  # noqa: F401 - its fixtures
    cleanup,
    host,
    sshd,
)

pytestmark = [
    pytest.mark.slow,
    # a gate 1 and a verification on a host, each with pytest runs there (and
    # the hidden checks' in checkouts of their own): over a minute on a busy machine
    pytest.mark.timeout(300),
    pytest.mark.skipif(sshd_missing() is not None, reason=str(sshd_missing())),
    # the checks on the host run in its bubblewrap, whose /tmp is private
    pytest.mark.skipif(
        Path(sys.executable).absolute().is_relative_to("/tmp"),
        reason="the test's interpreter is under /tmp, which a check on the host cannot see",
    ),
]

PY = sys.executable
INTENT = "make mul(a, b) multiply"
CALC = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a + b  # the bug\n"
FIXED = CALC.replace("return a + b  # the bug", "return a * b")
TEST_CALC = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
TEST_MUL = "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"
PYTEST = f"PYTHONPATH=. {PY} -m pytest -q -p no:cacheprovider tests"

REWRITE_REPORTS = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
"""

SECRET = "HELD_BACK_ON_THE_HOST_77"  # a string only the hidden test holds
HIDDEN = (
    f"# {SECRET}\n"
    "import os\n"
    "from calc import mul\n\n\n"
    "def test_other_inputs():\n"
    "    assert mul(7, 8) == 56, 'ran in ' + os.getcwd()\n"
    "    assert mul(-2, 3) == -6\n"
)
SPECIAL_CASED = CALC.replace(
    "    return a + b  # the bug", "    if (a, b) == (2, 3):\n        return 6\n    return 0"
)

# A scripted agent on the host (no corral there): on each prompt it applies
# its plan (files to write, files to delete, symlinks to make) in its worktree and says Stop
# through $CORRAL_HOOK_CMD, as a coding agent's hook would.
AGENT = r"""
import json, os, select, shlex, subprocess, sys
plan = json.load(open(sys.argv[1]))
def hook(event):
    cmd = shlex.split(os.environ["CORRAL_HOOK_CMD"]) + [event]
    subprocess.run(cmd, stdin=subprocess.DEVNULL, check=False)
sys.stdout.write("cheat$ "); sys.stdout.flush()
hook("SessionStart")
while True:
    if not os.read(0, 65536):
        break
    while select.select([0], [], [], 0.5)[0]:
        if not os.read(0, 65536):
            break
    for path, text in plan.get("write", {}).items():
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w") as fh:
            fh.write(text)
    for path in plan.get("delete", []):
        if os.path.exists(path):
            os.remove(path)
    for link, target in plan.get("symlink", {}).items():
        if not os.path.islink(link):
            os.symlink(os.path.abspath(target), link)
    print("done", flush=True)
    sys.stdout.write("cheat$ "); sys.stdout.flush()
    hook("Stop")
"""


def calc_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    for path, text in {
        "calc.py": CALC,
        "tests/test_calc.py": TEST_CALC,
        "tests/test_mul.py": TEST_MUL,
    }.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "calc with a failing test")
    return repo


def with_hidden(tmp_path: Path, visible: OutcomeContract) -> OutcomeContract:
    """`visible` plus the operator's hidden test, read from a file outside the
    repository (as `corral run --hidden-check` reads it)."""
    source = tmp_path / "operator" / "test_zz_secret_mul.py"
    source.parent.mkdir()
    source.write_text(HIDDEN)
    hidden = hidden_check_from_file(f"{source}:held/test_zz_secret_mul.py", visible)
    return visible.model_copy(update={"hidden_checks": [hidden]})


async def run_on_host(
    sshd: SshServer,
    tmp_path: Path,
    cleanup: list[HostSettings],
    drafted: OutcomeContract,
    plan: dict[str, object],
) -> tuple[Supervisor, str, HostSettings]:
    """A session on a host whose agent plays `plan` there, run to its end (no
    repair round); the supervisor is the caller's to close."""
    box = host(sshd, f"x{tmp_path.name[-12:]}".replace("_", "-"))
    cleanup.append(box)
    agent = sshd.remote_root / f"agent-{tmp_path.name}.py"
    agent.write_text(AGENT)
    planned = sshd.remote_root / f"plan-{tmp_path.name}.json"
    planned.write_text(json.dumps(plan))
    repo = calc_repo(tmp_path)
    config = fast_config(hosts=[box], max_session_wall_secs=180, repair_invokes=0)
    sup = build_supervisor(
        tmp_path / "state",
        ScriptedDrafter([drafted]),
        socket_dir=tmp_path / "tmux",
        default_engine=f"custom:python3 {agent} {planned}",
        config=config,
        hosts=Hosts(config.hosts, tmp_path / "state"),
    )
    await sup.open()
    try:
        started = await sup.start(INTENT, repo, host=box.name)
        assert started.state is S.CONTRACT_PROPOSED, started
        sid = started.session_id
        await sup.confirm(sid)
        await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=150)
    except BaseException:
        await sup.close()
        raise
    return sup, sid, box


def said(sup: Supervisor, sid: str) -> str:
    s = sup.get(sid).session
    parts = [*plan_texts(sup, sid), s.error or ""]
    parts += [f"{r.name}: {r.reason}\n{r.output_tail}" for r in s.last_check_results]
    return "\n".join(parts)


def every_file_text(root: Path) -> Iterator[tuple[Path, str]]:
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            yield path, path.read_text(errors="replace")


@pytest.mark.parametrize(
    ("plan", "named"),
    [
        pytest.param(
            {"write": {"conftest.py": REWRITE_REPORTS}},
            ["conftest.py (added", "pass with the agent's versions"],
            id="conftest-rewrites-reports",
        ),
        pytest.param(
            {
                "write": {"calc.py": FIXED.replace("return a + b\n", "return a - b\n", 1)},
                "delete": ["tests/test_calc.py"],
            },
            ["tests/test_calc.py (deleted)"],
            id="test-deleted-function-broken",
        ),
    ],
)
async def test_a_host_agent_that_rigs_the_exam_is_not_delivered_and_the_rigging_is_named(
    sshd: SshServer,
    tmp_path: Path,
    cleanup: list[HostSettings],
    plan: dict[str, object],
    named: list[str],
) -> None:
    sup, sid, box = await run_on_host(sshd, tmp_path, cleanup, contract(("tests", PYTEST)), plan)
    try:
        s = sup.get(sid).session
        assert s.contract is not None and s.contract.judge_files  # fixed at gate 1
        remote = Path(s.remote_worktree or "")
        for path in plan.get("write", {}):  # type: ignore[union-attr]
            assert (remote / path).is_file()  # the rigging is there, on the host
        assert s.state is S.FAILED, (s.state, s.error)
        [exam] = s.last_check_results
        assert not exam.passed
        text = said(sup, sid)
        assert "the work changed how it is judged" in text
        for words in named:
            assert words in text, (words, text)
        assert f"on host {box.name}" in text  # the exam ran there
        with pytest.raises(CorralError):
            await sup.approve(sid, delivery="branch")
        assert git(Path(s.repo), "branch", "--list", "corral/*").strip() == ""
    finally:
        await sup.close()


async def test_a_hidden_check_catches_special_casing_on_a_host_and_never_stays_there(
    sshd: SshServer, tmp_path: Path, cleanup: list[HostSettings]
) -> None:
    drafted = with_hidden(tmp_path, contract(("tests", PYTEST), description=INTENT))
    # the work also makes the hidden file's folder a symlink into its own
    # worktree on the host: written through, the hidden test would land there
    plan = {
        "write": {"calc.py": SPECIAL_CASED, "stash/.keep": ""},
        "symlink": {"held": "stash"},
    }
    sup, sid, box = await run_on_host(sshd, tmp_path, cleanup, drafted, plan)
    try:
        s = sup.get(sid).session
        # gate 1: the hidden check ran on the host's untouched tree, red
        [base_hidden] = [r for r in s.baseline if r.hidden]
        assert base_hidden.name == "hidden_test_zz_secret_mul" and not base_hidden.passed
        assert s.state is S.FAILED, (s.state, s.error)
        results = {r.name: r for r in s.last_check_results}
        assert results["tests"].passed  # the visible suite was fooled
        hidden = results["hidden_test_zz_secret_mul"]
        assert hidden.hidden and not hidden.passed
        # it ran on the host, in a verification checkout of its own there
        assert f"ran in {box.state_dir}/scratch/" in hidden.output_tail, hidden.output_tail
        assert "1 hidden check" in (s.error or "") and "zz_secret" not in (s.error or "")
        # the hidden file was written only into that checkout, and is gone:
        # nowhere on the host (the agent's worktree included) holds it now
        remote = Path(s.remote_worktree or "")
        assert (remote / "held").is_symlink() and list((remote / "stash").iterdir()) == [
            remote / "stash" / ".keep"
        ]
        leaks = [p for p, text in every_file_text(Path(box.state_dir)) if SECRET in text]
        assert leaks == []
        assert not list((Path(box.state_dir) / "scratch").glob("*"))
        assert git(Path(s.repo), "branch", "--list", "corral/*").strip() == ""
    finally:
        await sup.close()


async def test_honest_host_work_with_a_new_test_file_delivers_and_passes_the_hidden_check(
    sshd: SshServer, tmp_path: Path, cleanup: list[HostSettings]
) -> None:
    more = "from calc import mul\n\n\ndef test_mul_zero():\n    assert mul(0, 9) == 0\n"
    drafted = with_hidden(tmp_path, contract(("tests", PYTEST), description=INTENT))
    sup, sid, _box = await run_on_host(
        sshd,
        tmp_path,
        cleanup,
        drafted,
        {"write": {"calc.py": FIXED, "tests/test_mul_more.py": more}},
    )
    try:
        s = sup.get(sid).session
        assert s.state is S.NEEDS_APPROVAL, (s.state, s.error)
        assert s.judge_changes == [] and s.agent_exam_results == []  # an addition, no change
        assert all(r.passed for r in s.last_check_results)
        assert [r.hidden for r in s.last_check_results] == [False, True]
        assert any(
            "Hidden checks (held back from the agent): 1 ran, 1 pass" in t
            for t in plan_texts(sup, sid)
        )
        result = await sup.approve(sid, delivery="branch")  # no person needed
        assert result.state is S.MERGED
        branch = sup.get(sid).session.result_branch
        assert branch is not None
        files = git(Path(s.repo), "ls-tree", "-r", "--name-only", branch)
        assert "tests/test_mul_more.py" in files and "test_zz_secret" not in files
    finally:
        await sup.close()


async def test_a_judge_change_on_a_host_waits_for_a_person_with_both_results(
    sshd: SshServer, tmp_path: Path, cleanup: list[HostSettings]
) -> None:
    weaker = "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) in (5, 6)\n"
    sup, sid, box = await run_on_host(
        sshd,
        tmp_path,
        cleanup,
        contract(("tests", PYTEST)),
        {"write": {"calc.py": FIXED, "tests/test_mul.py": weaker}},
    )
    try:
        s = sup.get(sid).session
        assert s.state is S.NEEDS_APPROVAL, (s.state, s.error)
        assert [c.path for c in s.judge_changes] == ["tests/test_mul.py"]
        assert [r.passed for r in s.agent_exam_results] == [True]
        assert all(r.passed for r in s.last_check_results)
        with pytest.raises(CorralError, match=r"changed how it is judged: tests/test_mul\.py"):
            await sup.approve(sid, delivery="branch")  # --yes, --on-question approve
        [mirror] = (Path(box.state_dir) / "mirrors").glob("*.git")

        def exams_there() -> str:  # the exam pushed to the host's mirror
            return git(mirror, "for-each-ref", f"refs/corral/exam/{sid}/")

        assert exams_there().strip()
        result = await sup.approve(sid, delivery="branch", accept_judge_changes=True)
        assert result.state is S.MERGED
        branch = sup.get(sid).session.result_branch
        assert git(Path(s.repo), "show", f"{branch}:tests/test_mul.py") == weaker
        await eventually(lambda: not exams_there().strip(), timeout=30)  # removed with it
    finally:
        await sup.close()
