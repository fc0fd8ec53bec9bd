"""Proposing a contract's setup from what the repository declares.

Python: a venv at `$CORRAL_ENV` (corral's private area, see `environment`)
with the project installed editable plus the test extras it declares
(`test`, `tests`, `testing`, `dev`), its test dependency groups, test
requirement files and tox's `deps` — or `uv sync` / `poetry install` /
`pdm install` / `hatch env create` when a lock file (or hatch's own
environments) says the project uses that tool and the tool is installed
(else the pip path, with a note saying so). Node: `npm ci` / `pnpm install
--frozen-lockfile` / `yarn install --immutable`. Rust: `cargo fetch`. Go:
`go mod download`. A Makefile `install`/`setup`/`deps` target when nothing
else applies.
"""

from __future__ import annotations

import configparser
import json
import re
import shlex
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .environment import RUN_IN_ENV
from .vcs_version import has_tags, pretend_version, versioned_by_tags

TEST_EXTRAS: tuple[str, ...] = ("test", "tests", "testing", "dev")
#: Extras that hold a whole developer toolbox (linters, release tools): used
#: only when no extra is about tests, so the setup installs what checks use.
DEV_EXTRAS = frozenset({"dev"})
#: Test requirement files, in preference order; the first one found is used
#: (a dev file often pins everything, the project itself included).
REQUIREMENT_FILES: tuple[str, ...] = (
    *("requirements-test.txt", "requirements-tests.txt", "requirements_test.txt"),
    *("test-requirements.txt", "test.requirements.txt", "tests-requirements.txt"),
    *("requirements/test.txt", "requirements/tests.txt", "requirements/testing.txt"),
    *("tests/requirements.txt", "test/requirements.txt"),
    *("requirements-dev.txt", "requirements_dev.txt", "dev-requirements.txt"),
    *("dev.requirements.txt", "requirements/dev.txt"),
)
MAKE_TARGETS: tuple[str, ...] = ("install", "setup", "deps")

VENV = 'python3 -m venv "$CORRAL_ENV"'
PIP = '"$CORRAL_ENV/bin/python" -m pip install -q'


@dataclass
class SetupProposal:
    """Setup commands, what they were chosen from, and which toolchain they prepare."""

    commands: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    python: bool = False  # a venv at $CORRAL_ENV provides python3 and the test tools
    tox_deps: list[str] = field(default_factory=list)
    # Requirement strings the pip path installs (None: a project tool decides what)
    installs: list[str] | None = None

    def installs_tool(self, tool: str) -> bool | None:
        """Whether the environment will have `tool` (None: cannot tell)."""
        if self.installs is None:
            return None
        wanted = tool.lower()
        return any(
            re.split(r"[\s\[<>=!~;@]", r.strip().strip("'\""), maxsplit=1)[0].lower() == wanted
            for r in self.installs
        )


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
    except OSError:
        return None


def _toml(root: Path) -> dict[str, Any]:
    text = _read(root / "pyproject.toml")
    if text is None:
        return {}
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}


def declared_extras(root: Path, pyproject: dict[str, Any]) -> list[str]:
    """Every optional-dependency (extra) name the project declares."""
    names: list[str] = []
    project = pyproject.get("project")
    if isinstance(project, dict) and isinstance(project.get("optional-dependencies"), dict):
        names += list(project["optional-dependencies"])
    cfg_text = _read(root / "setup.cfg")
    if cfg_text is not None:
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(cfg_text)
            if parser.has_section("options.extras_require"):
                names += list(parser["options.extras_require"])
        except configparser.Error:
            pass
    setup_py = _read(root / "setup.py")
    if setup_py is not None:
        m = re.search(r"extras_require\s*=\s*(\{.*?\n\s*\})", setup_py, re.S)
        if m:
            names += re.findall(r"['\"]([\w.-]+)['\"]\s*:", m.group(1))
    return list(dict.fromkeys(names))


def _group_requirements(pyproject: dict[str, Any], name: str, depth: int = 0) -> list[str]:
    """A PEP 735 dependency group's requirement strings (includes followed)."""
    groups = pyproject.get("dependency-groups")
    if not isinstance(groups, dict) or depth > 5:
        return []
    out: list[str] = []
    for item in groups.get(name) or []:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict) and isinstance(item.get("include-group"), str):
            out += _group_requirements(pyproject, item["include-group"], depth + 1)
    return out


#: Developer tools no test imports or runs: left out of a poetry dev group,
#: so the setup installs what the checks use.
_DEV_ONLY_TOOLS = re.compile(
    r"(pre-commit|mypy|pyright|black|ruff|isort|pylint|flake8.*|twine|build|tox|nox|ipython|ipdb|"
    r"sphinx.*|furo|mkdocs.*|myst-.*|towncrier|bump.*|types-.*|.*-stubs)",
    re.IGNORECASE,
)
POETRY_TEST_GROUPS = ("test", "tests", "testing", "dev")


def _poetry_constraint(name: str, spec: object) -> str | None:
    """A poetry dependency as a pip requirement (`^6.0` -> `>=6.0,<7`)."""
    if isinstance(spec, dict):
        if "git" in spec or "path" in spec or "url" in spec:
            return None
        spec = spec.get("version", "*")
    if not isinstance(spec, str):
        return None
    spec = spec.strip()
    m = re.fullmatch(r"([\^~])\s*(\d+)(?:\.(\d+))?(?:\.(\d+))?", spec)
    if m:
        op, major, minor = m.group(1), int(m.group(2)), int(m.group(3) or 0)
        lower = spec[1:].strip()
        if op == "^":
            upper = f"{major + 1}" if major else f"0.{minor + 1}"
        else:
            upper = f"{major}.{minor + 1}"
        return f"{name}>={lower},<{upper}"
    if spec in ("", "*"):
        return name
    if re.fullmatch(r"\d+(\.\d+)*", spec):
        return f"{name}=={spec}"
    return f"{name}{spec}" if re.match(r"[<>=!~]", spec) else name


def poetry_test_requirements(pyproject: dict[str, Any]) -> list[str]:
    """Poetry's dev-dependencies and test/dev groups as pip requirements,
    without the developer tools no check uses (linters, type checkers, docs)."""
    poetry = (
        pyproject.get("tool", {}).get("poetry") if isinstance(pyproject.get("tool"), dict) else None
    )
    if not isinstance(poetry, dict):
        return []
    tables: list[object] = [poetry.get("dev-dependencies")]
    groups = poetry.get("group")
    if isinstance(groups, dict):
        tables += [
            g.get("dependencies")
            for n, g in groups.items()
            if n in POETRY_TEST_GROUPS and isinstance(g, dict)
        ]
    out: list[str] = []
    for table in tables:
        if not isinstance(table, dict):
            continue
        for name, spec in table.items():
            if name == "python" or _DEV_ONLY_TOOLS.fullmatch(name):
                continue
            requirement = _poetry_constraint(name, spec)
            if requirement is not None and requirement not in out:
                out.append(requirement)
    return out


def listed_dev_requirements(pyproject: dict[str, Any]) -> list[str]:
    """The dev-dependency lists rye and uv keep in pyproject.toml
    (`[tool.rye] dev-dependencies`, `[tool.uv] dev-dependencies`: PEP 508
    strings) and pdm's `[tool.pdm.dev-dependencies]` groups, without the
    developer tools no check uses: a generated client's suite (groq) needs its
    pytest plugins (`-n auto` is pytest-xdist's) and test helpers from there."""
    tool = pyproject.get("tool")
    if not isinstance(tool, dict):
        return []
    lists: list[object] = []
    for manager in ("rye", "uv"):
        table = tool.get(manager)
        if isinstance(table, dict):
            lists.append(table.get("dev-dependencies"))
    pdm = tool.get("pdm")
    if isinstance(pdm, dict) and isinstance(pdm.get("dev-dependencies"), dict):
        lists += list(pdm["dev-dependencies"].values())
    out: list[str] = []
    for items in lists:
        if not isinstance(items, list):
            continue
        for item in items:
            if not isinstance(item, str) or item.startswith(("-", "git+", "file:")):
                continue
            name = re.match(r"[A-Za-z0-9_.\-]+", item.strip())
            if name is None or _DEV_ONLY_TOOLS.fullmatch(name.group(0)):
                continue
            if item.strip() not in out:
                out.append(item.strip())
    return out


def _extra_requirements(pyproject: dict[str, Any], extras: list[str], root: Path) -> list[str]:
    """The requirement strings of the chosen extras (pyproject and setup.cfg)."""
    out: list[str] = []
    project = pyproject.get("project")
    table = project.get("optional-dependencies") if isinstance(project, dict) else None
    if isinstance(table, dict):
        for extra in extras:
            out += [r for r in table.get(extra) or [] if isinstance(r, str)]
    cfg_text = _read(root / "setup.cfg")
    if cfg_text is not None:
        parser = configparser.ConfigParser(interpolation=None)
        try:
            parser.read_string(cfg_text)
            if parser.has_section("options.extras_require"):
                for extra in extras:
                    out += parser.get("options.extras_require", extra, fallback="").splitlines()
        except configparser.Error:
            pass
    return [r for r in out if r.strip()]


def _tox_parser(root: Path) -> configparser.ConfigParser | None:
    text = _read(root / "tox.ini")
    if text is None:
        return None
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    return parser if parser.has_section("testenv") else None


def _tox_lines(parser: configparser.ConfigParser, key: str) -> list[str]:
    """One `[testenv]` setting's lines, without comments, factor-conditional
    lines (`py38: ...`) or continuation backslashes."""
    raw = parser.get("testenv", key, fallback="").replace("\\\n", " ")
    out: list[str] = []
    for line in raw.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        if re.match(r"^[\w.,!-]+:\s", line) and not line.startswith("-"):
            continue
        out.append(line)
    return out


_TOX_SUBSTITUTIONS = {
    "{envpython}": "python",
    "{toxinidir}": ".",
    "{tox_root}": ".",
    "{envbindir}/": "",
}
_TOX_POSARGS = re.compile(r"\{posargs(?::([^}]*))?\}")
#: A tox command that runs the tests (what a check can be), by its words.
_TOX_TEST_COMMAND = re.compile(r"\b(pytest|py\.test|unittest|coverage run|nosetests|trial)\b")


#: A tox command that checks rather than prepares (a linter before the tests):
#: never a setup step, whose failure would block every check.
_TOX_CHECKER = re.compile(
    r"(^|[\s/])(pre-commit|mypy|black|ruff|isort|pylint|flake8|pyflakes|pycodestyle|bandit|"
    r"pyright|check-manifest|twine|sphinx-build|codespell|pydocstyle)\b"
)


_UNITTEST_RUN = re.compile(r"-m\s+unittest\b")
_VERBOSE = re.compile(r"\s(-v|--verbose)(\s|$)")


def verbose_unittest(command: str) -> str:
    """A drafted `python -m unittest ...` with `-v` at its end: only then
    does unittest name each test and its outcome, so the check is judged
    test by test (a test already failing on the untouched tree does not
    block a correct change)."""
    if not _UNITTEST_RUN.search(command) or _VERBOSE.search(command):
        return command
    return f"{command} -v"


def _tox_command(line: str) -> str | None:
    """A tox command as a shell command in the setup's environment, or None
    when it uses tox machinery that has no meaning outside tox."""
    line = line.removeprefix("-").strip()  # tox's "ignore the exit status" marker
    line = _TOX_POSARGS.sub(lambda m: m.group(1) or "", line)
    for key, value in _TOX_SUBSTITUTIONS.items():
        line = line.replace(key, value)
    if "{" in line or not line.strip():
        return None
    return " ".join(line.split())


@dataclass
class ToxTestenv:
    """What tox.ini's `[testenv]` says about running the tests here."""

    commands: list[str] = field(default_factory=list)  # the test commands, as checks run them
    # steps before them: `commands_pre`, and `commands` lines before the
    # first test command (a compile step)
    commands_pre: list[str] = field(default_factory=list)
    extras: list[str] = field(default_factory=list)
    changedir: str = ""  # where tox runs the commands ("" : the project root)
    # the last command when none names a known runner: the test run by a
    # script of the project's own (`{envpython} pkg/tests/__main__.py`)
    script: str = ""

    def check_command(self) -> str:
        """The test commands as one shell command, in tox's directory."""
        joined = " && ".join(self.commands)
        return f"cd {shlex.quote(self.changedir)} && {joined}" if self.changedir else joined


def tox_testenv(root: Path) -> ToxTestenv | None:
    """tox.ini's `[testenv]` test commands, `commands_pre` and `extras`, or
    None when there is no `[testenv]`."""
    parser = _tox_parser(root)
    if parser is None:
        return None
    env = ToxTestenv()
    changedir = _tox_command(parser.get("testenv", "changedir", fallback="").strip())
    env.changedir = changedir if changedir and changedir != "." else ""
    for line in _tox_lines(parser, "commands_pre"):
        command = _tox_command(line)
        if command is not None:
            env.commands_pre.append(command)
    steps: list[str] = []  # `commands` lines before the first test command
    for line in _tox_lines(parser, "commands"):
        command = _tox_command(line)
        if command is None:
            continue
        if _TOX_TEST_COMMAND.search(command):
            env.commands.append(verbose_unittest(command))
        elif not env.commands and not _TOX_CHECKER.search(command):
            steps.append(command)  # a step before the tests (a compile step)
    if not env.commands and steps:
        # no line names a known runner (`{envpython} pkg/tests/__main__.py`):
        # tox's last command is still its test run, never a setup step (the
        # suite run at setup would make every check *cannot run* when one
        # test fails); the conventions draft it, or pytest where pytest
        # collects the test files (test by test beats one exit code)
        env.script = steps.pop()
    env.commands_pre += steps
    for line in _tox_lines(parser, "extras"):
        env.extras += [e.strip() for e in line.split(",") if re.fullmatch(r"[\w.-]+", e.strip())]
    return env


def tox_deps(root: Path) -> list[str]:
    """`[testenv] deps` of tox.ini: what tox would install to run the tests."""
    parser = _tox_parser(root)
    if parser is None or not parser.has_option("testenv", "deps"):
        return []
    deps: list[str] = []
    for line in parser.get("testenv", "deps").splitlines():
        line = line.split("#", 1)[0].strip()
        if ":" in line.split(" ", 1)[0] and not line.startswith("-"):  # a factor-conditional line
            continue
        if not line or "{" in line or line.startswith("-c"):
            continue
        if line.startswith("-r"):
            target = line[2:].strip()
            if (root / target).is_file():
                deps.append(f"-r {shlex.quote(target)}")
            continue
        if line.startswith("-e") or line == ".":
            continue
        deps.append(shlex.quote(line))
    return deps


def _has(tool: str, path: str | None) -> bool:
    return shutil.which(tool, path=path) is not None


def _is_python(root: Path) -> bool:
    return any((root / m).is_file() for m in ("pyproject.toml", "setup.py", "setup.cfg"))


def _python(root: Path, path: str | None, needs_pytest: bool) -> SetupProposal:
    pyproject = _toml(root)
    tool = pyproject.get("tool") if isinstance(pyproject.get("tool"), dict) else {}
    assert isinstance(tool, dict)
    proposal = SetupProposal(python=True)
    declared = declared_extras(root, pyproject)
    extras = [e for e in declared if e in TEST_EXTRAS and e not in DEV_EXTRAS]
    if not extras:  # a developer toolbox only when nothing is about tests
        extras = [e for e in declared if e in DEV_EXTRAS]
    tox = tox_testenv(root)
    if tox is not None:  # the extras tox installs for its tests
        extras += [e for e in tox.extras if e in declared and e not in extras]
    managed: tuple[str, str, str] | None = None
    if (root / "uv.lock").is_file():
        extra_flags = "".join(f" --extra {e}" for e in extras)
        managed = (
            "uv",
            "uv.lock",
            f'UV_PROJECT_ENVIRONMENT="$CORRAL_ENV" uv sync --frozen{extra_flags}',
        )
    elif (root / "poetry.lock").is_file():
        command = f'{VENV} && VIRTUAL_ENV="$CORRAL_ENV" poetry install --no-interaction'
        managed = ("poetry", "poetry.lock", command)
    elif (root / "pdm.lock").is_file():
        command = f'{VENV} && VIRTUAL_ENV="$CORRAL_ENV" PDM_IGNORE_SAVED_PYTHON=1 pdm install'
        managed = ("pdm", "pdm.lock", command)
    elif "hatch" in tool and isinstance(tool["hatch"], dict) and "envs" in tool["hatch"]:
        managed = (
            "hatch",
            "[tool.hatch.envs]",
            'HATCH_ENV_TYPE_VIRTUAL_PATH="$CORRAL_ENV" hatch env create',
        )
    pretend = _tagless_version(root, pyproject, proposal)
    if managed is not None:
        manager, declared_by, command = managed
        if _has(manager, path):
            proposal.commands = [f"{pretend} {command}" if pretend and manager == "uv" else command]
            proposal.notes.append(f"{declared_by}: the project's environment is made by {manager}")
            return proposal
        proposal.notes.append(
            f"{declared_by} says {manager}, which is not installed here: using pip instead"
        )

    proposal.installs = _extra_requirements(pyproject, extras, root)
    target = "." + (f"[{','.join(extras)}]" if extras else "")
    install = [shlex.quote(target) if extras else "."]
    why = [f"extras {', '.join(extras)}"] if extras else []
    for group in TEST_EXTRAS:
        reqs = _group_requirements(pyproject, group)
        proposal.installs += reqs
        if reqs:
            install += [shlex.quote(r) for r in reqs]
            why.append(f"dependency group {group}")
    poetry = [r for r in poetry_test_requirements(pyproject) if r not in proposal.installs]
    if poetry:
        proposal.installs += poetry
        install += [shlex.quote(r) for r in poetry]
        why.append("poetry dev-dependencies")
    listed = [r for r in listed_dev_requirements(pyproject) if r not in proposal.installs]
    if listed:
        proposal.installs += listed
        install += [shlex.quote(r) for r in listed]
        why.append("the dev-dependencies pyproject.toml lists (rye, uv, pdm)")
    for rel in REQUIREMENT_FILES:
        if (root / rel).is_file():
            install.append(f"-r {shlex.quote(rel)}")
            why.append(rel)
            proposal.installs += (_read(root / rel) or "").splitlines()
            break
    deps = [d for d in tox_deps(root) if d not in install]
    if deps:
        install += deps
        why.append("tox.ini [testenv] deps")
        proposal.tox_deps = deps
        proposal.installs += deps
    if needs_pytest and not proposal.installs_tool("pytest") and not extras:
        install.append("pytest")
        proposal.installs.append("pytest")
        why.append("pytest to run the tests")
    pip = f"{pretend} {PIP}" if pretend else PIP
    proposal.commands = [VENV, f"{pip} -e {' '.join(install)}"]
    proposal.notes.append(
        "a venv in corral's environment dir with the project installed editable"
        + (f" plus {', '.join(why)}" if why else "")
    )
    for script, builder in cffi_builds(root):
        # the module cffi generates at build time (soundfile's _soundfile)
        # is not in the tree, and an editable install does not make it:
        # generated into the venv, every worktree sharing it imports it
        code = (
            f"import runpy, sysconfig; runpy.run_path({script!r})[{builder!r}]"
            ".compile(tmpdir=sysconfig.get_paths()['purelib'])"
        )
        proposal.commands.append(f'"$CORRAL_ENV/bin/python" -c {shlex.quote(code)}')
        proposal.notes.append(
            f"setup.py's cffi_modules: {script}:{builder} generated into the venv "
            "(an editable install does not make it)"
        )
    if tox is not None and tox.commands_pre:
        # tox's steps before the tests (a translation compile step), in the venv
        proposal.commands += [f"{RUN_IN_ENV}{c}" for c in tox.commands_pre]
        proposal.notes.append(
            "tox.ini [testenv] steps before the tests: " + "; ".join(tox.commands_pre)
        )
    return proposal


_CFFI_MODULES = re.compile(r"cffi_modules\s*=\s*\[([^\]]*)\]")
_CFFI_ENTRY = re.compile(r"""['"]([\w./-]+\.py):(\w+)['"]""")


def cffi_builds(root: Path) -> list[tuple[str, str]]:
    """setup.py's `cffi_modules` entries ("build_script.py:ffibuilder") whose
    script is in the tree: (script, the builder object's name)."""
    found = _CFFI_MODULES.search(_read(root / "setup.py") or "")
    if found is None:
        return []
    return [
        (script, builder)
        for script, builder in _CFFI_ENTRY.findall(found.group(1))
        if ".." not in script and (root / script).is_file()
    ]


def _tagless_version(root: Path, pyproject: dict[str, Any], proposal: SetupProposal) -> str:
    """The `VAR=version` a project versioned by git tags needs in a checkout
    without any (see `vcs_version`), noted for gate 1; "" when none."""
    pretend = pretend_version(root, pyproject)
    if pretend is not None:
        proposal.notes.append(
            f"the project takes its version from git tags and this checkout has none: it is "
            f"installed as {pretend.version}, read from {pretend.source} "
            f"({pretend.variable})"
        )
        return shlex.quote(pretend.assignment)
    if versioned_by_tags(root, pyproject) and not has_tags(root):
        proposal.notes.append(
            "the project takes its version from git tags and this checkout has none, and no "
            "PKG-INFO or version file says it: it installs as 0.1.dev0, which test "
            "dependencies pinned to its releases reject; tag the checkout (git tag v1.0.0) or "
            "give the setup with SETUPTOOLS_SCM_PRETEND_VERSION=X before the pip line (--setup)"
        )
    return ""


def _node(root: Path, path: str | None) -> SetupProposal | None:
    text = _read(root / "package.json")
    if text is None:
        return None
    try:
        manifest = json.loads(text)
    except ValueError:
        return None
    if not isinstance(manifest, dict):
        return None
    if not (manifest.get("dependencies") or manifest.get("devDependencies")):
        return None
    if (root / "pnpm-lock.yaml").is_file():
        choice = ("pnpm", "pnpm install --frozen-lockfile", "pnpm-lock.yaml")
    elif (root / "yarn.lock").is_file():
        berry = (root / ".yarnrc.yml").is_file()
        flag = "--immutable" if berry else "--frozen-lockfile"
        choice = ("yarn", f"yarn install {flag}", "yarn.lock")
    elif (root / "package-lock.json").is_file() or (root / "npm-shrinkwrap.json").is_file():
        choice = ("npm", "npm ci --no-audit --no-fund", "package-lock.json")
    else:
        choice = ("npm", "npm install --no-package-lock --no-audit --no-fund", "package.json")
    tool, command, why = choice
    note = f"{why}: node_modules in the worktree by {tool}"
    if not _has(tool, path):
        note += f" ({tool} is not installed here, so the setup will say it cannot run)"
    return SetupProposal(commands=[command], notes=[note])


def propose_setup(
    root: Path, *, path: str | None = None, needs_pytest: bool = True
) -> SetupProposal:
    """The setup the repository's declarations call for (empty when none)."""
    proposal = SetupProposal()
    parts: list[SetupProposal] = []
    if _is_python(root):
        parts.append(_python(root, path, needs_pytest))
    node = _node(root, path)
    if node is not None:
        parts.append(node)
    if (root / "Cargo.toml").is_file():
        parts.append(
            SetupProposal(commands=["cargo fetch"], notes=["Cargo.toml: crates by cargo fetch"])
        )
    if (root / "go.mod").is_file():
        parts.append(
            SetupProposal(
                commands=["go mod download"], notes=["go.mod: modules by go mod download"]
            )
        )
    if not parts:
        makefile = _read(root / "Makefile")
        if makefile is not None:
            for target in MAKE_TARGETS:
                if re.search(rf"^{target}\s*:(?!=)", makefile, re.M):
                    parts.append(
                        SetupProposal(
                            commands=[f"make {target}"], notes=[f"Makefile has {target}:"]
                        )
                    )
                    break
    for part in parts:
        proposal.commands += part.commands
        proposal.notes += part.notes
        proposal.python = proposal.python or part.python
        proposal.tox_deps += part.tox_deps
        if part.installs is not None:
            proposal.installs = [*(proposal.installs or []), *part.installs]
    return proposal
