"""The conventions lane proposes a setup from what a repository declares
(real files; tool availability by a PATH of stub executables), and the
environment cache key follows the files that define it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from corral.supervisor.contracts.conventions import draft_contract
from corral.supervisor.contracts.environment import env_key, reuse_basis
from corral.supervisor.contracts.setup_draft import propose_setup


def write(root: Path, rel: str, text: str = "") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def stub_bin(tmp_path: Path, *tools: str) -> str:
    bin_dir = tmp_path / "stub-bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in tools:
        exe = bin_dir / tool
        exe.write_text("#!/bin/sh\nexit 0\n")
        exe.chmod(0o755)
    return str(bin_dir)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    return root


SRC_LAYOUT = """
[project]
name = "lib"
version = "1"
[project.optional-dependencies]
docs = ["sphinx"]
tests = ["pytest", "hypothesis"]
dev = ["ruff"]
[tool.pytest.ini_options]
testpaths = ["tests"]
"""


def test_a_src_layout_library_gets_a_venv_with_its_test_extras(repo: Path, tmp_path: Path) -> None:
    write(repo, "pyproject.toml", SRC_LAYOUT)
    write(repo, "src/lib/__init__.py")
    write(repo, "tests/test_lib.py")
    contract = draft_contract(repo, "x", path=stub_bin(tmp_path, "python3"))
    assert contract.setup == [
        'python3 -m venv "$CORRAL_ENV"',
        # a `dev` toolbox (ruff) is not what the checks use: only the test extra
        "\"$CORRAL_ENV/bin/python\" -m pip install -q -e '.[tests]'",
    ]
    # pytest is not on PATH, but the environment provides it: the runner is proposed
    assert [c.command for c in contract.checks] == ["python3 -m pytest -q -p no:cacheprovider"]
    assert "Setup (runs before the baseline" in contract.description
    assert "with the network" in contract.description
    assert reuse_basis(contract.setup, repo) == "manifests"


def test_tox_deps_fill_in_when_no_extras_are_declared(repo: Path, tmp_path: Path) -> None:
    write(repo, "setup.py", "from setuptools import setup\nsetup(name='x')\n")
    write(
        repo,
        "tox.ini",
        "[tox]\nenvlist = py3\n[testenv]\ndeps =\n    pytest\n    mock>=2\n    py38: oldthing\ncommands = pytest\n",
    )
    write(repo, "tests/test_x.py")
    proposal = propose_setup(repo, path=stub_bin(tmp_path, "python3"))
    assert (
        proposal.commands[1] == "\"$CORRAL_ENV/bin/python\" -m pip install -q -e . pytest 'mock>=2'"
    )
    contract = draft_contract(repo, "x", path=stub_bin(tmp_path, "python3", "tox"))
    # tox would build its own environments from the network: not a check, said so
    assert [c.name for c in contract.checks] == ["tests"]
    assert "tox: `tox -q` (tox.ini) — it builds its own environments" in contract.description


def test_pytest_is_added_when_nothing_declares_a_test_dependency(
    repo: Path, tmp_path: Path
) -> None:
    write(repo, "setup.py", "from setuptools import setup\nsetup(name='x')\n")
    write(repo, "tests/test_x.py")
    proposal = propose_setup(repo, path=stub_bin(tmp_path, "python3"))
    assert proposal.commands[1].endswith("-e . pytest")


def test_a_lock_file_picks_the_tool_only_when_it_is_installed(repo: Path, tmp_path: Path) -> None:
    write(repo, "pyproject.toml", SRC_LAYOUT)
    write(repo, "uv.lock")
    with_uv = propose_setup(repo, path=stub_bin(tmp_path, "python3", "uv"))
    assert with_uv.commands == [
        'UV_PROJECT_ENVIRONMENT="$CORRAL_ENV" uv sync --frozen --extra tests'
    ]
    without = propose_setup(repo, path=str(tmp_path / "empty"))
    assert without.commands[0] == 'python3 -m venv "$CORRAL_ENV"'
    assert any("uv, which is not installed here: using pip instead" in n for n in without.notes)


def test_poetry_and_pdm_lock_files(repo: Path, tmp_path: Path) -> None:
    write(repo, "pyproject.toml", "[tool.poetry]\nname='x'\n")
    write(repo, "poetry.lock")
    poetry = propose_setup(repo, path=stub_bin(tmp_path, "poetry"))
    assert poetry.commands == [
        'python3 -m venv "$CORRAL_ENV" && VIRTUAL_ENV="$CORRAL_ENV" poetry install --no-interaction'
    ]
    (repo / "poetry.lock").unlink()
    write(repo, "pdm.lock")
    pdm = propose_setup(repo, path=stub_bin(tmp_path, "pdm"))
    assert "pdm install" in pdm.commands[0] and "$CORRAL_ENV" in pdm.commands[0]


@pytest.mark.parametrize(
    ("lock", "extra", "command"),
    [
        ("package-lock.json", "", "npm ci --no-audit --no-fund"),
        ("pnpm-lock.yaml", "", "pnpm install --frozen-lockfile"),
        ("yarn.lock", ".yarnrc.yml", "yarn install --immutable"),
        ("yarn.lock", "", "yarn install --frozen-lockfile"),
    ],
)
def test_node_lock_files_decide_the_install(
    repo: Path, tmp_path: Path, lock: str, extra: str, command: str
) -> None:
    write(repo, "package.json", '{"devDependencies": {"tap": "1"}, "scripts": {"test": "tap"}}')
    write(repo, lock)
    if extra:
        write(repo, extra)
    proposal = propose_setup(repo, path=stub_bin(tmp_path, "node", "npm", "pnpm", "yarn"))
    assert proposal.commands == [command]
    # node_modules lands in the worktree, but only the manifests decide it
    assert reuse_basis(proposal.commands, repo) == "manifests"


def test_rust_go_and_make(repo: Path, tmp_path: Path) -> None:
    write(repo, "Cargo.toml")
    write(repo, "go.mod")
    proposal = propose_setup(repo)
    assert proposal.commands == ["cargo fetch", "go mod download"]
    assert reuse_basis(proposal.commands, repo) == "manifests"  # global caches only
    other = tmp_path / "m"
    write(other, "Makefile", "deps:\n\ttrue\ninstall:\n\ttrue\n")
    assert propose_setup(other).commands == ["make install"]
    # what `make install` reads is unknown: the whole tree decides its result
    assert reuse_basis(["make install"], other) == "tree"


def committed(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True)


def test_a_c_extension_is_reused_until_its_compiled_sources_change(repo: Path) -> None:
    write(
        repo,
        "setup.py",
        "from setuptools import Extension, setup\nsetup(ext_modules=[Extension('x', ['x.c'])])\n",
    )
    write(repo, "x.c", "int x;\n")
    write(repo, "x_test.py", "")
    commands = propose_setup(repo).commands
    assert reuse_basis(commands, repo) == "compiled_sources"
    other = repo.parent / "other"
    for rel in ("setup.py", "x.c", "x_test.py"):
        write(other, rel, (repo / rel).read_text())
    committed(repo)
    committed(other)
    # another checkout of the same sources reuses the build
    assert env_key(repo, commands, "compiled_sources") == env_key(
        other, commands, "compiled_sources"
    )
    write(other, "x_test.py", "changed = True\n")  # Python code is not compiled
    committed(other)
    assert env_key(repo, commands, "compiled_sources") == env_key(
        other, commands, "compiled_sources"
    )
    write(other, "x.c", "int y;\n")  # a changed C source is built again
    committed(other)
    assert env_key(repo, commands, "compiled_sources") != env_key(
        other, commands, "compiled_sources"
    )


def test_the_key_follows_defining_files_and_commands_not_the_worktree(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    for root in (one, two):
        write(root, "pyproject.toml", SRC_LAYOUT)
        write(root, "src/lib/__init__.py", "")
    commands = ['python3 -m venv "$CORRAL_ENV"']
    assert env_key(one, commands, "manifests") == env_key(two, commands, "manifests")
    write(one, "src/lib/__init__.py", "x = 1")  # code is not a defining file
    assert env_key(one, commands, "manifests") == env_key(two, commands, "manifests")
    write(two, "requirements-dev.txt", "pytest\n")
    assert env_key(one, commands, "manifests") != env_key(two, commands, "manifests")
    assert env_key(one, commands, "manifests") != env_key(one, [*commands, "x"], "manifests")


TOX_WITH_EXTRAS = """[tox]
envlist = py3
[testenv]
extras = i18n
deps =
    pytest
    babel
commands_pre =
    python setup.py compile_catalog
commands =
    pytest {posargs:tests/unit} -p no:randomly
    py38: pytest --old
"""


def test_tox_commands_deps_extras_and_commands_pre_are_the_runner(
    repo: Path, tmp_path: Path
) -> None:
    write(
        repo,
        "setup.py",
        "from setuptools import setup\nsetup(name='x', extras_require={'i18n': ['babel'],\n})\n",
    )
    write(repo, "tox.ini", TOX_WITH_EXTRAS)
    write(repo, "test/test_x.py", "def test_x():\n    pass\n")  # test/, no pytest config
    contract = draft_contract(repo, "x", path=stub_bin(tmp_path, "python3", "tox"))
    assert contract.setup == [
        'python3 -m venv "$CORRAL_ENV"',
        "\"$CORRAL_ENV/bin/python\" -m pip install -q -e '.[i18n]' pytest babel",
        'PATH="$CORRAL_ENV/bin:$PATH" python setup.py compile_catalog',
    ]
    [check] = contract.checks
    assert check.command == "pytest tests/unit -p no:randomly"
    assert "tox.ini [testenv] commands" in contract.description


def test_a_compile_step_among_tox_commands_runs_before_the_tests(
    repo: Path, tmp_path: Path
) -> None:
    # without the compiled catalogues the translation tests skip themselves:
    # dropping the step would pass a suite that never ran them
    write(repo, "setup.py", "from setuptools import setup\nsetup(name='x')\n")
    write(
        repo,
        "tox.ini",
        "[testenv]\ndeps =\n    pytest\n    babel\ncommands =\n"
        "    flake8 x\n    pybabel compile -d {toxinidir}/x/locale -D x\n"
        "    pytest {posargs}\n    coverage report\n",
    )
    write(repo, "tests/test_x.py", "def test_x():\n    pass\n")
    contract = draft_contract(repo, "x", path=stub_bin(tmp_path, "python3", "tox"))
    assert contract.setup[-1] == 'PATH="$CORRAL_ENV/bin:$PATH" pybabel compile -d ./x/locale -D x'
    assert not any("flake8" in c for c in contract.setup)  # a linter is no setup step
    [check] = contract.checks
    assert check.command == "pytest"  # the line after the tests is no check
    # what it compiles is the tree's (.po files no manifest names): a changed
    # catalogue gets a fresh setup, never the last tree's compiled copy
    assert reuse_basis(contract.setup, repo) == "tree"


@pytest.mark.parametrize(
    "name",
    [
        "dev.requirements.txt",
        "dev-requirements.txt",
        "requirements/test.txt",
        "tests/requirements.txt",
    ],
)
def test_common_dev_requirement_files_are_installed(repo: Path, tmp_path: Path, name: str) -> None:
    write(repo, "setup.py", "from setuptools import setup\nsetup(name='x')\n")
    write(repo, name, "pytest\nfreezegun\n")
    write(repo, "tests/test_x.py")
    proposal = propose_setup(repo, path=stub_bin(tmp_path, "python3"))
    assert proposal.commands[1].endswith(f"-e . -r {name}")  # pytest comes from the file


POETRY_WITHOUT_LOCK = """
[tool.poetry]
name = "lib"
[tool.poetry.dependencies]
python = ">=3.8"
[tool.poetry.dev-dependencies]
pytest = "^7.2.0"
PyYAML = "^6.0"
mypy = "^0.990"
Sphinx = "^4.3.2"
[tool.poetry.group.test.dependencies]
hypothesis = { version = "~6.1", optional = false }
zerover = "^0.4"
exact = "1.2.3"
anything = "*"
[tool.poetry.group.docs.dependencies]
furo = "*"
"""


def test_poetry_dev_dependencies_are_installed_without_poetry(repo: Path, tmp_path: Path) -> None:
    """A poetry project with no lock file (or no poetry here) still gets the
    test needs it declares only to poetry (PyYAML), as pip ranges — and not
    the type checker, the docs tools or a docs group no check uses."""
    write(repo, "pyproject.toml", POETRY_WITHOUT_LOCK)
    write(repo, "tests/test_x.py")
    proposal = propose_setup(repo, path=stub_bin(tmp_path, "python3"))
    assert proposal.commands[1] == (
        "\"$CORRAL_ENV/bin/python\" -m pip install -q -e . 'pytest>=7.2.0,<8' 'PyYAML>=6.0,<7' "
        "'hypothesis>=6.1,<6.2' 'zerover>=0.4,<0.5' exact==1.2.3 anything"
    )
    assert any("poetry dev-dependencies" in n for n in proposal.notes)


RYE_CLIENT = """\
[project]
name = "client"
version = "1.0.0"
dependencies = ["httpx>=0.23.0"]

[tool.rye]
managed = true
dev-dependencies = [
    "pyright==1.1.399",
    "mypy==1.17",
    "respx",
    "pytest",
    "pytest-asyncio",
    "ruff",
    "time-machine",
    "nox",
    "pytest-xdist>=3.6.1",
]

[tool.pytest.ini_options]
testpaths = ["tests"]
addopts = "--tb=short -n auto"
"""


def test_rye_dev_dependencies_are_installed_without_rye(repo: Path, tmp_path: Path) -> None:
    """groq 1.7.0's shape (a generated API client): its pytest plugins
    (`-n auto` is pytest-xdist's, asyncio_mode pytest-asyncio's) and test
    helpers are listed only in `[tool.rye] dev-dependencies`; without them
    every check could not run. The type checkers and linters stay out."""
    write(repo, "pyproject.toml", RYE_CLIENT)
    write(repo, "tests/test_x.py")
    proposal = propose_setup(repo, path=stub_bin(tmp_path, "python3"))
    assert proposal.commands[1] == (
        '"$CORRAL_ENV/bin/python" -m pip install -q -e . respx pytest pytest-asyncio '
        "time-machine 'pytest-xdist>=3.6.1'"
    )
    assert any("dev-dependencies pyproject.toml lists" in n for n in proposal.notes)


def test_modules_the_tests_import_that_nothing_declares_are_installed(
    repo: Path, tmp_path: Path
) -> None:
    """An sdist whose tests import a helper declared only in files it does not
    ship (mccabe's hypothesis, under `try`) gets it in the setup — by its
    distribution's name — but not the standard library, Python 2's, the
    project's own modules, or an import a test makes inside itself."""
    write(repo, "setup.py", "from setuptools import setup\nsetup(name='pkg')\n")
    write(repo, "pkg/__init__.py")
    write(repo, "tests/helpers.py")
    write(
        repo,
        "tests/test_pkg.py",
        "import os\nimport pkg\nimport helpers\nimport yaml\n"
        "try:\n    import StringIO\n    from hypothesis import given\nexcept ImportError:\n    pass\n"
        "def test_android():\n    import jnius\n",
    )
    contract = draft_contract(repo, "x", path=stub_bin(tmp_path, "python3"))
    step = contract.setup[-1]
    assert step.startswith("for m in hypothesis:hypothesis yaml:PyYAML; do ")
    assert "the tests import hypothesis, yaml" in contract.description
    # the step itself: only what is not importable is installed; a failure is said
    log = tmp_path / "calls"
    python = write(
        tmp_path,
        "fake-python",
        f'#!/bin/sh\necho "$*" >> {log}\n'
        '[ "$1" = -c ] && [ "$2" = "import yaml" ] && exit 0\n'
        '[ "$1" = -m ] && [ "$5" = hypothesis ] && exit 1\n'
        '[ "$1" = -m ] && exit 0\nexit 1\n',
    )
    python.chmod(0o755)
    done = subprocess.run(
        ["bash", "-c", step.replace('"$CORRAL_ENV/bin/python"', str(python))],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0
    assert log.read_text().splitlines() == [
        "-c import hypothesis",
        "-m pip install -q hypothesis",
        "-c import yaml",
    ]
    assert done.stdout == "[corral] could not install hypothesis\n"


def test_a_tox_only_unittest_suite_is_drafted_verbose(repo: Path, tmp_path: Path) -> None:
    """tox.ini's `python -m unittest discover` is run with `-v`: without it
    unittest names no passing test, and the check could only be judged by
    its exit code (a test already failing would block every change)."""
    write(repo, "setup.py", "from setuptools import setup\nsetup(name='x')\n")
    write(
        repo,
        "tox.ini",
        "[testenv]\ncommands =\n    python -m unittest discover -s tests {posargs}\n",
    )
    write(repo, "tests/test_x.py", "import unittest\n")
    contract = draft_contract(repo, "x", path=stub_bin(tmp_path, "python3", "tox"))
    [check] = contract.checks
    assert check.command == "python -m unittest discover -s tests -v"


def test_a_tox_test_script_no_runner_names_is_the_check_not_a_setup_step(
    repo: Path, tmp_path: Path
) -> None:
    # pox 0.3.7: tox runs `{envpython} pox/tests/__main__.py`, a script that
    # runs each test file; it named no known runner, so it was drafted as a
    # setup step, the suite ran at setup and one failing test made every
    # check *cannot run* ("setup failed: ... exited 1: F")
    write(repo, "setup.py", "from setuptools import setup\nsetup(name='pox')\n")
    write(
        repo,
        "tox.ini",
        "[testenv]\ndeps =\n#   pytest\ncommands =\n"
        "    {envpython} -m pip install .\n    {envpython} pox/tests/__main__.py\n",
    )
    write(repo, "pox/__init__.py")
    write(repo, "pox/tests/__main__.py", "print('.')\n")
    write(repo, "pox/tests/test_utils.py", "def test_x():\n    pass\n")
    contract = draft_contract(repo, "x", path=stub_bin(tmp_path, "python3", "tox"))
    assert not any("__main__" in step for step in contract.setup), contract.setup
    assert contract.setup[-1] == 'PATH="$CORRAL_ENV/bin:$PATH" python -m pip install .'
    # pytest collects its test_*.py: judged test by test (a test failing on
    # this host is listed as already failing, not a red for the work)
    [check] = contract.checks
    assert "pytest" in check.command and "pox/tests" in check.command
    # ppft 1.7.8: the same tox shape over demo scripts pytest collects none of
    (repo / "pox/tests/test_utils.py").rename(repo / "pox/tests/quicksort.py")
    contract = draft_contract(repo, "x", path=stub_bin(tmp_path, "python3", "tox"))
    assert not any("__main__" in step for step in contract.setup), contract.setup
    [check] = contract.checks
    assert check.command == "python pox/tests/__main__.py"


@pytest.mark.slow
def test_a_cffi_module_the_build_generates_is_made_in_the_venv(repo: Path, tmp_path: Path) -> None:
    # soundfile 0.14.0 (unseen): setup.py's cffi_modules generate _soundfile
    # at build time; the editable install made none, so every check was
    # "cannot run: missing module: _soundfile" on the untouched tree
    pytest.importorskip("cffi")
    write(
        repo,
        "setup.py",
        "from setuptools import setup\n"
        "setup(name='sf', py_modules=['sf'], cffi_modules=['sf_build.py:ffibuilder'])\n",
    )
    write(
        repo,
        "sf_build.py",
        "from cffi import FFI\nffibuilder = FFI()\nffibuilder.set_source('_sf', None)\n"
        "ffibuilder.cdef('int abs(int);')\n"
        "if __name__ == '__main__':\n    ffibuilder.compile()\n",
    )
    write(repo, "tests/test_sf.py", "import _sf\n\ndef test_sf():\n    assert _sf.ffi\n")
    contract = draft_contract(repo, "x", path=stub_bin(tmp_path, "python3"))
    [step] = [s for s in contract.setup if "sf_build.py" in s]
    env = tmp_path / "env"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", str(env)],
        check=True,
        capture_output=True,
    )
    ran = subprocess.run(
        ["bash", "-c", step],
        cwd=repo,
        env={**os.environ, "CORRAL_ENV": str(env)},
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0, ran.stderr
    assert not (repo / "_sf.py").exists()  # not in the tree: a second worktree has it too
    imported = subprocess.run(
        [str(env / "bin/python"), "-c", "import _sf; print(_sf.ffi)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert imported.returncode == 0, imported.stderr


def test_modules_a_conftest_imports_are_installed_too(repo: Path, tmp_path: Path) -> None:
    """azure-mgmt-containerservice 41.8.0's shape: tests/conftest.py imports
    `dotenv` (python-dotenv), which nothing declares; pytest loads it before
    any test, so every check could not run ("missing module: dotenv")."""
    write(repo, "setup.py", "from setuptools import setup\nsetup(name='pkg')\n")
    write(repo, "pkg/__init__.py")
    write(repo, "conftest.py", "import pytest\n")
    write(repo, "tests/conftest.py", "import os\nfrom dotenv import load_dotenv\n")
    write(repo, "tests/test_pkg.py", "import pkg\n")
    contract = draft_contract(repo, "x", path=stub_bin(tmp_path, "python3"))
    assert contract.setup[-1].startswith("for m in dotenv:python-dotenv; do ")
