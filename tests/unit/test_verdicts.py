"""Honest baselines: a red check is *fails* only when it ran and its assertion
failed; a command not found, a module that is not installed, or a test run
that could not collect the tests is *cannot run*. Every case runs a real
command (sandboxed like any check) in a real directory."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from corral.supervisor.contracts.checks import run_check
from corral.supervisor.models import CheckResult, CheckVerdict, ContractCheck
from corral.supervisor.sandbox import (
    SandboxPolicy,
    sandbox_status,
    set_active_policy,
)

PY = sys.executable  # has pytest, whatever the host's python3 has


pytestmark = pytest.mark.usefixtures("interpreter_visible")  # about verdicts, not confinement


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


async def verdict(root: Path, command: str) -> CheckResult:
    return await run_check(ContractCheck(name="c", command=command, timeout_secs=60), root)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A src-layout package `mypkg` with a function `add`."""
    root = tmp_path / "proj"
    write(root, "src/mypkg/__init__.py", "def add(a, b):\n    return a + b\n")
    return root


async def test_an_assertion_that_fails_is_the_red_that_proves_the_work(project: Path) -> None:
    result = await verdict(project, "python3 -c 'assert 1 + 1 == 3'")
    assert result.verdict is CheckVerdict.FAILS
    assert result.fix == ""


async def test_a_command_not_found_cannot_run(project: Path) -> None:
    result = await verdict(project, "definitely-not-a-tool --version")
    assert result.exit_code == 127
    assert result.verdict is CheckVerdict.CANNOT_RUN
    assert result.reason == "command not found: definitely-not-a-tool"
    assert "/setup" in result.fix


@pytest.mark.parametrize(
    "command",
    [
        "if true; then exec definitely-not-a-tool; fi",
        "true && definitely-not-a-tool --version",
        "bash -c 'definitely-not-a-tool'",
    ],
)
async def test_a_command_not_found_inside_a_shell_line_names_the_missing_tool(
    project: Path, command: str
) -> None:
    result = await verdict(project, command)
    assert result.verdict is CheckVerdict.CANNOT_RUN
    assert result.reason == "command not found: definitely-not-a-tool"


async def test_a_third_party_module_that_is_not_installed_cannot_run(project: Path) -> None:
    result = await verdict(project, "python3 -c 'import no_such_dependency_xyz'")
    assert result.verdict is CheckVerdict.CANNOT_RUN
    assert result.reason == "missing module: no_such_dependency_xyz (not installed)"


async def test_the_project_itself_not_being_importable_cannot_run(project: Path) -> None:
    # src layout, nothing installed: the check would be red before and after any work
    result = await verdict(project, "python3 -c 'import mypkg'")
    assert result.verdict is CheckVerdict.CANNOT_RUN
    assert "mypkg" in result.reason


async def test_a_missing_name_inside_the_project_is_the_work_not_the_environment(
    project: Path,
) -> None:
    cmd = "PYTHONPATH=src python3 -c 'from mypkg import subtract'"
    result = await verdict(project, cmd)
    assert result.verdict is CheckVerdict.FAILS
    assert result.reason == "the repository does not provide mypkg.subtract yet"
    sub = await verdict(project, "PYTHONPATH=src python3 -c 'import mypkg.newmod'")
    assert sub.verdict is CheckVerdict.FAILS


@pytest.mark.slow
async def test_pytest_collection_errors_cannot_run(project: Path) -> None:
    write(project, "tests/test_x.py", "import no_such_dependency_xyz\n\ndef test_x():\n    pass\n")
    result = await verdict(project, f"{PY} -m pytest -q -p no:cacheprovider tests")
    assert result.exit_code == 2
    assert result.verdict is CheckVerdict.CANNOT_RUN


@pytest.mark.slow
async def test_a_conftest_written_for_an_older_pytest_cannot_run(project: Path) -> None:
    """A hook taking an argument this pytest does not pass (as `path` after
    pytest 8): the suite never ran, so nothing the work does can turn it green."""
    write(
        project,
        "tests/conftest.py",
        "def pytest_collection_modifyitems(items, fspath_of_old):\n    pass\n",
    )
    write(project, "tests/test_x.py", "def test_x():\n    pass\n")
    result = await verdict(project, f"{PY} -m pytest -q -p no:cacheprovider tests")
    assert result.exit_code != 0
    assert result.verdict is CheckVerdict.CANNOT_RUN
    assert result.reason.startswith("pytest could not load the suite's plugins: ")
    assert "fspath_of_old" in result.reason
    # what to do, usable headless too: pin an older pytest in the setup
    assert "written for an older pytest" in result.fix
    assert '-m pip install "pytest<N"' in result.fix and "corral run --setup-add" in result.fix


@pytest.mark.slow
async def test_pytest_with_no_tests_cannot_run(project: Path) -> None:
    (project / "tests").mkdir()
    result = await verdict(project, f"{PY} -m pytest -q -p no:cacheprovider tests")
    assert result.exit_code == 5
    assert result.verdict is CheckVerdict.CANNOT_RUN
    assert result.reason == "pytest collected no tests"


@pytest.mark.slow
async def test_a_failing_test_fails(project: Path) -> None:
    write(
        project,
        "tests/test_x.py",
        "from mypkg import add\n\ndef test_add():\n    assert add(1, 1) == 3\n",
    )
    result = await verdict(project, f"PYTHONPATH=src {PY} -m pytest -q -p no:cacheprovider")
    assert result.exit_code == 1
    assert result.verdict is CheckVerdict.FAILS


async def test_a_passing_check_passes(project: Path) -> None:
    assert (await verdict(project, "true")).verdict is CheckVerdict.PASSES


async def verdict_for(root: Path, command: str, intent: str) -> CheckResult:
    check = ContractCheck(name="c", command=command, timeout_secs=60)
    return await run_check(check, root, intent=intent)


@pytest.mark.slow
async def test_a_suite_that_does_not_collect_cannot_run_in_pytests_words(project: Path) -> None:
    # an sdist that ships tests/ without __init__.py: `from tests import ...` fails to collect
    write(project, "tests/test_x.py", "from tests import OrderedDict\n\ndef test_x():\n    pass\n")
    cmd = f"{PY} -m pytest -q -p no:cacheprovider tests"
    result = await verdict_for(project, cmd, "make add() accept floats")
    assert result.exit_code == 2
    assert result.verdict is CheckVerdict.CANNOT_RUN
    assert result.reason.startswith("the tests could not be collected: ")
    assert "cannot import name 'OrderedDict' from 'tests'" in result.reason
    assert "does not provide" not in result.reason


async def test_a_missing_name_the_intent_names_is_the_work(project: Path) -> None:
    cmd = "PYTHONPATH=src python3 -c 'from mypkg import subtract'"
    named = await verdict_for(project, cmd, "add subtract(a, b) to mypkg")
    assert named.verdict is CheckVerdict.FAILS
    assert named.reason == "the repository does not provide mypkg.subtract yet"
    other = await verdict_for(project, cmd, "make add() accept floats")
    assert other.verdict is CheckVerdict.CANNOT_RUN


async def test_a_check_writing_to_its_home_and_temp_dir_works(project: Path) -> None:
    # confined whatever `interpreter_visible` chose: this is about confinement
    # (its commands are the shell's, so a checkout under /tmp does not matter)
    set_active_policy(SandboxPolicy())
    marker = f"corral-test-home-{project.name}-{id(project)}"
    cmd = f'echo hi > ~/.{marker} && cat ~/.{marker} && echo t > "$TMPDIR/t" && cat "$TMPDIR/t"'
    result = await verdict(project, cmd)
    assert result.verdict is CheckVerdict.PASSES, result.output_tail
    status = sandbox_status()
    assert status.available, f"the check ran unconfined: {status.detail}"
    assert not (Path.home() / f".{marker}").exists()  # a private home, not the operator's
    again = await verdict(project, f"test ! -e ~/.{marker}")
    assert again.passed  # and not shared between checks


async def test_failures_the_host_causes_cannot_run_and_say_which(project: Path) -> None:
    erofs = await verdict(
        project,
        "python3 -c \"import errno, os; raise OSError(errno.EROFS, os.strerror(errno.EROFS), '/x')\"",
    )
    assert erofs.verdict is CheckVerdict.CANNOT_RUN
    assert erofs.reason.startswith("the host, not the work: a path the check writes is read-only")
    offline = await verdict(
        project, "python3 -c \"import socket; socket.getaddrinfo('pypi.invalid', 443)\""
    )
    assert offline.verdict is CheckVerdict.CANNOT_RUN
    assert "no network" in offline.reason
    zone = await verdict(
        project, "python3 -c \"import zoneinfo; zoneinfo.ZoneInfo('Nowhere/Atlantis')\""
    )
    assert zone.verdict is CheckVerdict.CANNOT_RUN
    assert "time zone data" in zone.reason


@pytest.mark.skipif(
    shutil.which("go") is None, reason="go is not installed (.ci/run: apt-get install golang-go)"
)
async def test_a_go_module_whose_requirements_are_not_downloaded_cannot_run(tmp_path: Path) -> None:
    root = tmp_path / "m"
    write(root, "go.mod", "module example.com/m\n\ngo 1.19\n\nrequire example.org/dep v1.0.0\n")
    write(root, "m.go", 'package m\n\nimport _ "example.org/dep"\n')
    write(root, "m_test.go", 'package m\n\nimport "testing"\n\nfunc TestX(t *testing.T) {}\n')
    result = await verdict(root, "go test ./...")
    assert result.verdict is CheckVerdict.CANNOT_RUN, result.output_tail
    assert result.reason == "missing Go module: example.org/dep (not downloaded)"
    assert result.fix


async def test_an_operators_bytecode_prefix_never_serves_a_previous_trees_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trees checked one after the other at one path, a module rewritten at
    the same size and second: each check runs the module as written, even
    when the operator's environment keeps bytecode apart
    (PYTHONPYCACHEPREFIX), where Python would take the first tree's as fresh."""
    set_active_policy(SandboxPolicy(enabled=False))  # unconfined: the prefix is writable
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", str(tmp_path / "pycache"))
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    tree = tmp_path / "tree"
    outcomes = []
    for value in ("1", "2"):
        shutil.rmtree(tree, ignore_errors=True)
        write(tree, "m.py", f"def v():\n    return {value}\n")
        os.utime(tree / "m.py", (1_000_000_000, 1_000_000_000))  # the same second both times
        result = await verdict(tree, "python3 -c 'import m; assert m.v() == 1'")
        outcomes.append(result.passed)
    assert outcomes == [True, False]


def test_a_setup_failure_is_the_changes_only_when_the_untouched_tree_set_up_and_no_host_failed_it() -> (
    None
):
    from corral.supervisor.contracts.verdicts import change_broke_setup, setup_failed

    ran = [CheckResult(name="tests", passed=True)]
    words = "error: subprocess-exited-with-error\nAttributeError: 'NoneType' has no 'group'"
    assert change_broke_setup(words, False, ran)
    assert not change_broke_setup(words, False, None)  # the baseline itself
    assert not change_broke_setup(words, True, ran)  # out of time: maybe the load
    # it never set up on the untouched tree either: not the change's
    assert not change_broke_setup(words, False, [setup_failed("tests", "exit 1")])
    for host in (
        "WARNING: Retrying (Retry(total=4)) after connection broken by 'ReadTimeoutError'",
        "Max retries exceeded with url: /simple/pytest/",
        "Temporary failure in name resolution",
    ):
        assert not change_broke_setup(host, False, ran), host
