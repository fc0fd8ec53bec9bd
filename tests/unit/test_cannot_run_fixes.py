"""Every *cannot run* says its real cause and a way on that works headless:
a `corral run` flag or a contract line to copy, not only the console's
/setup. Each cause is produced by a real command (sandboxed like any
check) in a real directory, and a name from the runner's output reaches a
suggested command line only when it is a plain package name."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from corral.supervisor.contracts.checks import run_check
from corral.supervisor.contracts.environment import setup_reason
from corral.supervisor.contracts.verdicts import setup_failed
from corral.supervisor.models import CheckResult, CheckVerdict, ContractCheck, SetupOutcome

PY = sys.executable
HEADLESS = "corral run --"


pytestmark = pytest.mark.usefixtures("interpreter_visible")


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


async def verdict(root: Path, command: str) -> CheckResult:
    result = await run_check(ContractCheck(name="c", command=command, timeout_secs=60), root)
    assert result.verdict is CheckVerdict.CANNOT_RUN, (result.reason, result.output_tail)
    return result


@pytest.fixture
def python_project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    write(root, "pyproject.toml", "[project]\nname = 'proj'\nversion = '1'\n")
    write(root, "proj/__init__.py", "")
    return root


async def test_a_missing_tool_in_a_python_project_says_the_pip_line(python_project: Path) -> None:
    result = await verdict(python_project, "nosuchtool --version")
    assert result.reason == "command not found: nosuchtool"
    assert (
        "corral run --setup-add '\"$CORRAL_ENV/bin/python\" -m pip install nosuchtool'"
        in result.fix
    )


async def test_a_missing_tool_in_a_node_project_says_the_npm_line(tmp_path: Path) -> None:
    write(tmp_path, "package.json", '{"name": "p"}')
    result = await verdict(tmp_path, "nosuchtool")
    assert "corral run --setup-add 'npm install --no-save nosuchtool'" in result.fix


async def test_a_missing_script_in_the_checkout_asks_for_the_check(tmp_path: Path) -> None:
    result = await verdict(tmp_path, "./run-tests.sh")
    assert result.reason.startswith("command not found: ")
    assert "corral run --check CMD" in result.fix


async def test_a_hostile_name_never_reaches_a_suggested_command(tmp_path: Path) -> None:
    write(tmp_path, "pyproject.toml", "")
    result = await verdict(tmp_path, "'x$(touch${IFS}pwned)'")
    assert "pip install" not in result.fix and "pwned" not in result.fix
    assert "--setup-add CMD" in result.fix  # the general way on


async def test_a_file_that_is_not_executable_says_how_to_run_it(tmp_path: Path) -> None:
    write(tmp_path, "run-tests", "#!/bin/sh\nexit 0\n")
    result = await verdict(tmp_path, "./run-tests")
    assert result.reason == "the command is not executable here"
    assert "sh FILE" in result.fix and "corral run --check CMD" in result.fix


async def test_a_missing_python_module_names_its_distribution(python_project: Path) -> None:
    result = await verdict(python_project, f"{PY} -c 'import yaml_surely_absent'")
    assert result.reason == "missing module: yaml_surely_absent (not installed)"
    assert "-m pip install yaml_surely_absent'" in result.fix and HEADLESS in result.fix
    mapped = await verdict(
        python_project, f"{PY} -c 'raise ModuleNotFoundError(\"No module named yaml\")'"
    )
    assert "-m pip install PyYAML'" in mapped.fix  # the import name is not the package's


async def test_python_2_standard_library_says_an_old_release_was_resolved(
    python_project: Path,
) -> None:
    """The issue's case: a tagless setuptools-scm checkout made pip resolve a
    pytest from 2017, and corral said "missing module: UserDict" with advice
    that led nowhere."""
    result = await verdict(python_project, f"{PY} -c 'import UserDict'")
    assert "Python 2's standard library" in result.reason
    assert "install a current release" in result.fix and "--setup-add" in result.fix


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
async def test_a_missing_node_module_says_the_npm_line(tmp_path: Path) -> None:
    write(tmp_path, "package.json", '{"name": "p"}')
    result = await verdict(tmp_path, "node -e \"require('@scope/left-pad/sub')\"")
    assert result.reason == "missing module: @scope/left-pad/sub (not installed)"
    assert "corral run --setup-add 'npm install --no-save @scope/left-pad'" in result.fix


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
async def test_a_node_script_that_throws_names_the_error_and_its_place(tmp_path: Path) -> None:
    """inherits' plain `node test` (round 8): its failure read `exit 1:
    Node.js v20.20.2`, node's version; it names the assertion and where it
    failed, the nearest a suite without test names can be named."""
    write(tmp_path, "package.json", '{"name": "p", "scripts": {"test": "node test"}}')
    write(
        tmp_path,
        "node_modules/helper/index.js",
        "module.exports = (ok) => { if (!ok) throw new TypeError('bad'); };\n",
    )
    write(
        tmp_path,
        "test.js",
        "var assert = require('assert')\n\nfunction check(c) {\n  assert(c.super_ === 1)\n}\n"
        "check({})\nconsole.log('ok')\n",
    )
    result = await run_check(
        ContractCheck(name="c", command="node test", timeout_secs=60), tmp_path
    )
    assert result.verdict is CheckVerdict.FAILS
    assert result.reason.startswith("exit 1: AssertionError"), result.output_tail
    assert "at test.js:4" in result.reason, result.output_tail
    # a frame inside node_modules is not the test's place
    write(tmp_path, "test.js", "require('helper')(true)\n\nrequire('helper')(false)\n")
    result = await run_check(
        ContractCheck(name="c", command="node test", timeout_secs=60), tmp_path
    )
    assert result.reason.startswith("exit 1: TypeError"), result.output_tail
    assert "at test.js:3" in result.reason and "node_modules" not in result.reason


async def test_no_network_says_how_to_declare_it(tmp_path: Path) -> None:
    result = await verdict(
        tmp_path,
        f"{PY} -c 'import socket; socket.getaddrinfo(\"pypi.org\", 443)'",
    )
    assert result.reason.startswith("the host, not the work: no network")
    assert '"network": true' in result.fix and "corral run --contract FILE" in result.fix


async def test_pytest_collecting_nothing_asks_for_the_check(tmp_path: Path) -> None:
    write(tmp_path, "tests/helper.py", "X = 1\n")
    result = await verdict(tmp_path, f"{PY} -m pytest -q -p no:cacheprovider tests")
    assert result.reason == "pytest collected no tests"
    assert "corral run --check CMD" in result.fix


async def test_pytest_rejecting_an_option_names_the_plugin_way(tmp_path: Path) -> None:
    write(tmp_path, "tests/test_a.py", "def test_a():\n    pass\n")
    result = await verdict(tmp_path, f"{PY} -m pytest -q -p no:cacheprovider --no-such-flag tests")
    assert result.reason == "pytest rejected its command line (usage error)"
    assert "pip install PLUGIN" in result.fix and "corral run --check CMD" in result.fix


def test_a_failed_setup_says_the_tools_own_words_and_the_flags() -> None:
    outcome = SetupOutcome(
        ok=False,
        exit_code=1,
        failed_command='"$CORRAL_ENV/bin/python" -m pip install -q -e .',
        output_tail="Collecting x\n\x1b[31mERROR: No matching distribution found for nosuchpkg\x1b[0m\n",
    )
    why = setup_reason(outcome)
    assert why.endswith("exited 1: ERROR: No matching distribution found for nosuchpkg")
    result = setup_failed("tests", why)
    assert "pip found no release that fits" in result.fix
    assert "corral run --setup CMD" in result.fix


def test_a_setup_that_could_not_reach_the_index_says_so() -> None:
    outcome = SetupOutcome(
        ok=False,
        exit_code=1,
        failed_command="npm ci",
        output_tail=(
            "npm ERR! code EAI_AGAIN\nnpm ERR! errno EAI_AGAIN\nnpm ERR! request to "
            "https://registry.npmjs.org/tape failed, reason: getaddrinfo EAI_AGAIN "
            "registry.npmjs.org\n"
        ),
    )
    result = setup_failed("tests", setup_reason(outcome))
    assert "getaddrinfo EAI_AGAIN registry.npmjs.org" in result.reason
    assert "could not reach a package index" in result.fix and "--no-setup" in result.fix


async def test_a_module_a_conftest_lacks_says_so_and_the_way_without_it(
    python_project: Path,
) -> None:
    """azure-mgmt-containerservice 41.8.0: tests/conftest.py imports
    devtools_testutils, a test tool on no package index the setup reaches;
    the pip line alone (which the setup had already tried) led nowhere."""
    write(python_project, "tests/conftest.py", "import devtools_testutils_xyz\n")
    write(python_project, "tests/test_a.py", "def test_a():\n    assert True\n")
    result = await verdict(python_project, f"{PY} -m pytest -q -p no:cacheprovider tests")
    assert result.reason == (
        "missing module: devtools_testutils_xyz (not installed), imported by tests/conftest.py, "
        "which pytest loads before any test"
    )
    assert "-m pip install devtools_testutils_xyz" in result.fix
    assert "--noconftest" in result.fix and HEADLESS in result.fix


@pytest.mark.slow
async def test_when_every_test_file_imports_what_the_conftest_lacks_noconftest_is_not_offered(
    python_project: Path,
) -> None:
    """azure-mgmt-containerservice 41.8.0: its conftest and all six of its
    test files import devtools_testutils, so `--noconftest` would collect
    none of them: that way on led nowhere; say so and give the ones that
    can work headless."""
    write(python_project, "tests/conftest.py", "import devtools_testutils_xyz\n")
    write(
        python_project,
        "tests/test_a.py",
        "from devtools_testutils_xyz import Case\n\ndef test_a():\n    assert Case\n",
    )
    result = await verdict(python_project, f"{PY} -m pytest -q -p no:cacheprovider tests")
    assert result.reason.startswith("missing module: devtools_testutils_xyz (not installed)")
    assert "every test file here (1) imports devtools_testutils_xyz too" in result.fix
    assert "--setup-add" in result.fix and "tests/test_NEW.py" in result.fix
    assert "(the tests that need their fixtures then fail" not in result.fix


@pytest.mark.slow
async def test_a_suite_that_waits_past_its_limit_on_the_untouched_tree_cannot_run_and_says_why(
    python_project: Path,
) -> None:
    """cachelib 0.17.0: its MongoDB, DynamoDB and redis tests wait on
    servers this machine lacks, and the baseline ran for ten minutes; a
    timeout on the untouched tree was a red *fails* ("timed out") with no
    way on, and every verification would wait as long again."""
    write(python_project, "tests/test_a.py", "def test_a():\n    assert True\n")
    write(
        python_project,
        "tests/test_server.py",
        "import time\n\ndef test_waits_for_a_server():\n    time.sleep(60)\n",
    )
    check = ContractCheck(
        name="tests", command=f"{PY} -m pytest -q -p no:cacheprovider tests", timeout_secs=3
    )
    result = await run_check(check, python_project, untouched=True)
    assert result.timed_out and result.verdict is CheckVerdict.CANNOT_RUN
    assert result.reason.startswith("ran past its time limit (3s) on the untouched tree")
    assert "--check 'python3 -m pytest" in result.fix and HEADLESS in result.fix
    assert '"timeout_secs"' in result.fix
    # after the work (not untouched) a timeout is still the work's failure
    after = await run_check(check, python_project)
    assert after.timed_out and after.verdict is CheckVerdict.FAILS


@pytest.mark.slow
@pytest.mark.parametrize("through", ["conftest", "plugin"])
async def test_a_suite_whose_conftest_crashes_on_the_untouched_tree_cannot_run_and_says_why(
    python_project: Path, through: str
) -> None:
    """apache-airflow-providers-cncf-kubernetes 10.25.0: its conftest loads
    `tests_common.pytest_plugin`, which runs `uv` at import; without uv,
    pytest stopped before any test (exit 1), and the red baseline was taken
    as one the work must turn green: the run went on, and the correct
    change was refused. Raised in the conftest itself, pytest exits 4 and
    the old reason was "rejected its command line (usage error)"."""
    crash = "import subprocess\nsubprocess.check_call(['corral-no-such-tool', 'run', 'x'])\n"
    if through == "conftest":
        write(python_project, "tests/conftest.py", crash)
    else:
        write(python_project, "tests/conftest.py", 'pytest_plugins = "helper_plugin"\n')
        write(python_project, "tests/helper_plugin.py", crash)
    write(python_project, "tests/test_a.py", "def test_a():\n    assert True\n")
    check = ContractCheck(
        name="tests", command=f"{PY} -m pytest -q -p no:cacheprovider", timeout_secs=60
    )
    result = await run_check(check, python_project, untouched=True)
    assert result.verdict is CheckVerdict.CANNOT_RUN, (result.reason, result.output_tail)
    assert result.reason.startswith(
        "pytest stopped while loading the suite's conftest files and plugins, before any test, "
        "on the untouched tree: FileNotFoundError: [Errno 2] No such file or directory: "
        "'corral-no-such-tool'"
    )
    raised_in = "tests/conftest.py" if through == "conftest" else "tests/helper_plugin.py"
    assert result.reason.endswith(f"(raised in {raised_in})")
    assert "the suite runs `corral-no-such-tool`, which is not installed here" in result.fix
    assert HEADLESS in result.fix and "--noconftest" in result.fix
    # at verification, the very crash the untouched tree had is the environment
    # again (before, the run went on and the correct change was refused) ...
    again = await run_check(check, python_project, before=result, judged=True)
    assert again.verdict is CheckVerdict.CANNOT_RUN, (again.reason, again.output_tail)
    assert again.reason == f"as on the untouched tree, {result.reason}"
    assert again.fix == result.fix
    if through == "plugin":
        # ... but the same crash after a baseline whose suite ran is the work's
        after = await run_check(check, python_project)
        assert after.verdict is CheckVerdict.FAILS
        ran = result.model_copy(update={"verdict": CheckVerdict.PASSES, "reason": ""})
        assert (await run_check(check, python_project, before=ran)).verdict is CheckVerdict.FAILS
