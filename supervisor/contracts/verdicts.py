"""What a red check means: the work is missing (*fails*), or the check could
not run here (*cannot run*).

Only a check that ran and whose assertion failed proves the work. A command
that is not found, a test runner that could not import or collect the
project, or a module that is not installed says something about the
environment, not the code: gate 1 shows it in its own colour with the fix
(edit the setup), and runtime verification never hands it to the agent as a
repair.

A missing name under the repository's own package (`mypkg.newmod`, or
`cannot import name 'new' from 'mypkg'`) is the behaviour being absent, so it
stays *fails* — when the name plausibly belongs to the intent (the contract's
description names it), or nothing says what the intent is. A missing
top-level package (the project itself not installed, or a third-party
dependency) is *cannot run*, and so is a suite the runner could not collect
for any other reason: the reason quotes the runner's own words.

A failure the host causes is *cannot run* and says which: a read-only path
(EROFS), no network (name resolution or an unreachable network: checks run
without one unless they ask), missing time zone data.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from ..models import CheckResult, CheckVerdict
from .test_imports import DISTRIBUTIONS, test_files_importing

FIX_SETUP = (
    "edit the setup so the check's tools and dependencies are installed: /setup in the console; "
    "headless, `corral run --setup-add CMD` (after the drafted setup) or --setup CMD (in its place)"
)
PLUGINS_REJECTED = "pytest could not load the suite's plugins"
ENV_PYTHON = '"$CORRAL_ENV/bin/python"'
# a name from a runner's output goes into a command line only when it is a plain package name
_PACKAGE_NAME = re.compile(r"(@[a-z0-9][\w.-]{0,63}/)?[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")
#: Python 2's standard library: a suite importing it runs code from that era
_PYTHON2_STDLIB = frozenset(
    {
        *("StringIO", "cStringIO", "UserDict", "UserList", "UserString", "urllib2"),
        *("urlparse", "ConfigParser", "Queue", "cPickle", "httplib", "HTMLParser"),
        *("__builtin__", "cookielib", "SocketServer", "xmlrpclib", "commands", "sets"),
    }
)


def add_setup_fix(command: str, what: str) -> str:
    """The way on for something the setup must install: one line to add,
    headless as a flag to copy, in the console as /setup."""
    return (
        f"{what}: headless, `corral run --setup-add {shlex.quote(command)}` (run after the "
        "drafted setup); in the console, add that line with /setup"
    )


def _project_kind(root: Path) -> str:
    if any((root / m).is_file() for m in ("pyproject.toml", "setup.py", "setup.cfg")):
        return "python"
    if (root / "package.json").is_file():
        return "node"
    return ""


def _install_fix(name: str, root: Path, *, python_module: bool = False) -> str:
    """How to install `name` (a program or a module) in the setup, for this project."""
    if not _PACKAGE_NAME.fullmatch(name):
        return FIX_SETUP
    kind = "python" if python_module else _project_kind(root)
    if kind == "python":
        dist = DISTRIBUTIONS.get(name.split(".")[0], name.split(".")[0])
        return add_setup_fix(f"{ENV_PYTHON} -m pip install {dist}", f"install {dist} in the setup")
    if kind == "node":
        return add_setup_fix(f"npm install --no-save {name}", f"install {name} in the setup")
    return FIX_SETUP


_PYTEST_VERSION = re.compile(r"\bpytest-(\d+)\.\d+")


def older_pytest_fix(output: str) -> str:
    """What to do when pytest rejects the suite's conftest or plugin hooks:
    they were written for an older pytest, which the setup can pin."""
    m = _PYTEST_VERSION.search(output)
    below = f"pytest<{m.group(1)}" if m else "pytest<N"
    which = "" if m else " (N: this pytest's major version, `pytest --version`)"
    return add_setup_fix(
        f'{ENV_PYTHON} -m pip install "{below}"',
        f"the suite was written for an older pytest{which}: install it in the setup",
    )


_NO_MODULE = re.compile(r"No module named '?([A-Za-z_][\w.]*)'?")
_CANNOT_IMPORT = re.compile(r"cannot import name '?(\w+)'? from '?([A-Za-z_][\w.]*)'?")
# bash ("bash: line 1: X: command not found") and dash ("sh: 1: exec: X: not found")
_NOT_FOUND = re.compile(
    r"(?:^|\n)(?:\S*sh: (?:line )?(?:\d+: )?)?(?:exec: )?([^\s:]+): (?:command )?not found"
)
_NODE_MISSING = re.compile(r"Cannot find module '([^'./][^']*)'")
# go cannot resolve an import to a module it has (not in go.mod, go.sum or the module cache)
_GO_MISSING = re.compile(
    r"(?:missing go\.sum entry for module providing package|no required module provides package"
    r"|cannot find module providing package) (\S+?);?(?:\s|$)"
)
_PYTEST_CANNOT_RUN_EXITS = frozenset({2, 3, 4, 5})  # interrupted, internal, usage, no tests
_COLLECTION = ("error collecting", "errors during collection", "no tests ran")
_COLLECTING = re.compile(r"_+ ERROR collecting (\S+) _+")
_E_LINE = re.compile(r"^E\s+(.+)$", re.MULTILINE)
# a conftest or plugin this pytest cannot load (a hook written for an older pytest)
_PLUGIN_REJECTED = (
    re.compile(r"^.*declared in the hookimpl but can not be found.*$", re.M),
    re.compile(r"^.*PluginValidationError: .*$", re.M),
)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# (pattern, what the host lacks): failures no change to the code can fix
_HOST_CAUSES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"EROFS|Read-only file system", re.IGNORECASE),
        "a path the check writes is read-only here",
    ),
    (
        re.compile(
            r"ENETUNREACH|EAI_AGAIN|ENOTFOUND|getaddrinfo|Network is unreachable|"
            r"Temporary failure in name resolution|Name or service not known|"
            r"Could not resolve host|nodename nor servname|"
            r"module lookup disabled by GOPROXY=off",
        ),
        "no network (checks run without one unless they declare network = true)",
    ),
    (
        re.compile(
            r"ZoneInfoNotFoundError|UnknownTimeZoneError|No time zone found|"
            r"/usr/share/zoneinfo|time zone data",
            re.IGNORECASE,
        ),
        "time zone data is missing on this host",
    ),
)
# terminal colour and control sequences a runner prints: never part of a reason
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def _local_roots(root: Path) -> set[str]:
    """Top-level import names the repository itself provides (flat and src layouts)."""
    names: set[str] = set()
    for base in (root, root / "src", root / "lib"):
        try:
            entries = list(base.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            if entry.is_dir() or entry.suffix in (".py", ".pyi"):
                names.add(entry.name.removesuffix(".pyi").removesuffix(".py"))
    return names


def _missing(output: str, local: set[str]) -> tuple[list[str], list[str]]:
    """(names that say the environment lacks something, names the work has not provided yet)."""
    environment: list[str] = []
    work: list[str] = []
    for m in _NO_MODULE.finditer(output):
        name = m.group(1)
        top = name.split(".")[0]
        (work if "." in name and top in local else environment).append(name)
    for m in _CANNOT_IMPORT.finditer(output):
        name, module = m.group(1), m.group(2)
        target = work if module.split(".")[0] in local else environment
        target.append(f"{module}.{name}")
    return environment, work


_CONFTEST_FAILED = re.compile(r"ImportError while loading conftest '([^'\n]{1,500})'")
_PLAIN_PATH = re.compile(r"[\w./-]{1,200}")


def _conftest_that_failed(output: str, root: Path) -> str | None:
    """The conftest.py pytest could not load (relative to the checkout, a
    plain path: the runner's output is the work's text), or None."""
    m = _CONFTEST_FAILED.search(output)
    if m is None:
        return None
    raw = m.group(1)
    try:
        shown = Path(raw).resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError):
        shown = Path(raw).name
    return (
        shown if _PLAIN_PATH.fullmatch(shown) and shown.endswith("conftest.py") else "a conftest.py"
    )


def _without_conftest_fix(module: str, root: Path) -> str:
    """The way on past a conftest's missing module that no index has: leave
    the conftest files out, unless every test file imports the module too
    (azure's generated tests all import devtools_testutils), where that
    would collect nothing and only the tests the work adds can judge it."""
    seen, importing = test_files_importing(root, module)
    if seen and importing == seen:
        return (
            f"; every test file here ({seen}) imports {module} too, so leaving the conftest "
            "out (`--noconftest`) collects none of them: if no package index the setup "
            f"reaches has it, install it from where you have it (`corral run --setup-add "
            f"'{ENV_PYTHON} -m pip install PATH'`), or judge the work by the tests it adds: "
            "headless, `corral run --check 'python3 -m pytest -q -p no:cacheprovider "
            "--noconftest tests/test_NEW.py'` naming the new test file"
        )
    return (
        "; if no package index the setup reaches has it (a project's own test tools), "
        "run the tests without the conftest files: headless, `corral run --check "
        "'python3 -m pytest -q -p no:cacheprovider --noconftest'` (the tests that need "
        "their fixtures then fail on the untouched tree too and are listed as already "
        "failing)"
    )


def untouched_timeout(command: str, limit: float) -> tuple[str, str]:
    """Why a check that ran out of time on the untouched tree cannot judge
    the work, and the ways on that work headless. The work did not cause it:
    the usual cause is a test waiting on something this machine lacks (a
    server a fixture starts or connects to — cachelib's redis, memcached,
    MongoDB and DynamoDB tests — or the network); run again, it would only
    wait as long again, at gate 1 and at every verification."""
    reason = (
        f"ran past its time limit ({limit:.0f}s) on the untouched tree, so it cannot judge "
        "the work: tests waiting on something this machine lacks (a server a fixture starts "
        "or connects to, the network) are the usual cause"
    )
    if _is_pytest(command):
        narrow = (
            "give a check over the tests that run here: headless, `corral run --check "
            "'python3 -m pytest -q -p no:cacheprovider tests/test_A.py tests/test_B.py'` "
            "(or `--ignore=tests/test_NEEDS_SERVER.py`; `-v` on the check shows the test it "
            "waits in)"
        )
    else:
        narrow = "give a check over the tests that run here: headless, `corral run --check CMD`"
    return reason, (
        narrow + "; or, if the suite is only slow, a longer limit in a contract (`corral run "
        '--contract FILE` with "timeout_secs" on the check)'
    )


#: pytest's own frames while it loads conftest files and plugins, before any test
_LOADING_CONFTESTS = re.compile(
    r"_pytest[/\\]config[/\\]__init__\.py\", line \d+, in "
    r"(?:_importconftest|import_plugin|_try_load_conftest|pytest_load_initial_conftests"
    r"|_loadconftestmodules|consider_conftest|_import_plugin_specs)"
)
_FRAME = re.compile(r'^\s*File "([^"\n]{1,500})", line (\d+), in ', re.M)
_EXCEPTION = re.compile(r"^(?:E\s+)?([A-Za-z_][\w.]*(?:Error|Exception)): (.{1,200})$", re.M)
_NO_SUCH_PROGRAM = re.compile(
    r"FileNotFoundError: \[Errno 2\] No such file or directory: '([^'/\s]+)'"
)


STARTUP_CRASH = (
    "pytest stopped while loading the suite's conftest files and plugins, before any test, "
    "on the untouched tree: "
)


def untouched_startup_crash(output: str, command: str, root: Path) -> tuple[str, str] | None:
    """Why a pytest check that crashed while loading the suite's conftest
    files and plugins, on the untouched tree, cannot judge the work (None
    when it did not): no test ran, and none would after any work.
    apache-airflow-providers-cncf-kubernetes: its conftest loads
    `tests_common.pytest_plugin`, which runs `uv run <a monorepo script>` at
    import; without uv, pytest stopped at exit 1 before collecting, and the
    red baseline was taken as one the work must turn green."""
    conftest = _conftest_that_failed(output, root)
    if not _is_pytest(command) or not (conftest or _LOADING_CONFTESTS.search(output)):
        return None
    raised = _EXCEPTION.findall(output)
    words = f"{raised[-1][0]}: {raised[-1][1]}" if raised else "a traceback"
    frames = [
        path
        for path, _ in _FRAME.findall(output)
        if "_pytest" not in path
        and "pluggy" not in path
        and "<frozen" not in path
        and ("site-packages" in path or "/lib/python3" not in path)
    ]
    where = f" (raised in {conftest})" if conftest else ""
    if frames and not where:
        frame = Path(frames[-1])
        if frame.is_relative_to(root):
            shown = frame.relative_to(root).as_posix()
        else:  # an installed plugin: named from its package
            shown = frames[-1].split("site-packages/")[-1]
        if _PLAIN_PATH.fullmatch(shown):
            where = f" (raised in {shown})"
    reason = f"{STARTUP_CRASH}{words}{where}"
    without = (
        "or run the tests without the conftest files: headless, `corral run --check "
        "'python3 -m pytest -q -p no:cacheprovider --noconftest'` (tests that need their "
        "fixtures then fail on the untouched tree too, and are not held against the work)"
    )
    program = _NO_SUCH_PROGRAM.search(output)
    if program and _PACKAGE_NAME.fullmatch(program.group(1)):
        name = program.group(1)
        first = (
            f"the suite runs `{name}`, which is not installed here: install it on the host, "
            "or, if it is a Python tool, "
            + add_setup_fix(f"{ENV_PYTHON} -m pip install {name}", f"install {name} in the setup")
        )
    else:
        first = FIX_SETUP
    return reason, f"{first}; {without}"


def _is_pytest(command: str) -> bool:
    return "pytest" in command or "py.test" in command


def belongs_to_intent(name: str, intent: str) -> bool:
    """Whether a missing dotted name plausibly is the work: one of its parts
    below the package is a word of the intent (or there is no intent to ask)."""
    if not intent.strip():
        return True
    words = {w.lower() for w in _WORD.findall(intent)}
    parts = [p.lower() for p in name.split(".")[1:] if p]
    return any(p in words for p in parts)


def _collection_words(output: str) -> str:
    """pytest's own words for what it could not collect: the module and its last `E` line."""
    where = _COLLECTING.search(output)
    after = output[where.end() :] if where else output
    error = _E_LINE.search(after)
    words = error.group(1).strip() if error else ""
    if where and words:
        return f"{where.group(1)}: {words}"[:200]
    return (words or (where.group(1) if where else ""))[:200]


def _host_cause(output: str) -> str | None:
    for pattern, what in _HOST_CAUSES:
        m = pattern.search(output)
        if m:
            line = next((ln for ln in output.splitlines() if m.group(0) in ln), m.group(0))
            return f"{what} ({line.strip()[:120]})"
    return None


def classify(result: CheckResult, command: str, root: Path, *, intent: str = "") -> CheckResult:
    """`result` with its verdict, reason and fix set (a passing result is
    `passes`); `intent` is the contract's description, which decides whether
    a missing name under the repository's own package is the work. A
    *cannot run* names its cause and a way on that works headless (a flag
    or a contract line to copy), not only the console's /setup."""
    if result.passed:
        return result.model_copy(update={"verdict": CheckVerdict.PASSES, "reason": "", "fix": ""})
    verdict, reason, fix = _cannot_run_reason(result, command, root, intent)
    if verdict is CheckVerdict.FAILS:
        return result.model_copy(update={"verdict": verdict, "reason": reason, "fix": ""})
    return result.model_copy(update={"verdict": verdict, "reason": reason, "fix": fix or FIX_SETUP})


_GIVE_CHECK = (
    "give the check that runs the tests here: headless, `corral run --check CMD` (the drafted "
    "setup stays); in the console, /check name command"
)
_NETWORK_FIX = (
    "checks run without the network: if this check must reach it, say so in a contract "
    '(`corral run --contract FILE` with "network": true on the check; /check in the console '
    "keeps the setting); if it fetches what the tests need, fetch it in the setup instead: "
    "`corral run --setup-add CMD`"
)
_READ_ONLY_FIX = (
    "the check writes outside the worktree and its private temp dir (both writable): point it "
    "at $TMPDIR or the worktree — headless, `corral run --check CMD` with the path changed"
)
_TZ_FIX = (
    "time zone data is missing on this host: install the host's tzdata package (apt-get "
    "install tzdata), or for Python "
    + add_setup_fix(f"{ENV_PYTHON} -m pip install tzdata", "install tzdata in the setup")
)


def _host_fix(host: str) -> str:
    if host.startswith("no network"):
        return _NETWORK_FIX
    if host.startswith("time zone"):
        return _TZ_FIX
    return _READ_ONLY_FIX


def _cannot_run_reason(
    result: CheckResult, command: str, root: Path, intent: str
) -> tuple[CheckVerdict, str, str]:
    output = _ANSI.sub("", result.output_tail)
    code = result.exit_code
    if result.timed_out:
        return CheckVerdict.FAILS, "timed out", ""
    if code == 127:
        m = _NOT_FOUND.search(output)
        what = m.group(1) if m else command.split()[0] if command.split() else command
        if "/" in what:  # a path: not a tool to install
            fix = f"{what} is not in this checkout: {_GIVE_CHECK}"
        else:
            fix = _install_fix(what, root)
        return CheckVerdict.CANNOT_RUN, f"command not found: {what}", fix
    if code == 126:
        return (
            CheckVerdict.CANNOT_RUN,
            "the command is not executable here",
            "run it through its interpreter (`sh FILE`, `python FILE`): headless, `corral run "
            "--check CMD`; or mark it executable in the repository (git update-index --chmod=+x "
            "FILE)",
        )
    host = _host_cause(output)
    if host is not None:
        return CheckVerdict.CANNOT_RUN, f"the host, not the work: {host}", _host_fix(host)
    environment, work = _missing(output, _local_roots(root))
    if environment:
        name = environment[0]
        top = name.split(".")[0]
        if top in _PYTHON2_STDLIB:
            return (
                CheckVerdict.CANNOT_RUN,
                f"missing module: {name} (Python 2's standard library: something installed is "
                "from the Python 2 era — pip may have resolved an old release)",
                "find the package that imports it in the check's output and install a current "
                "release in the setup: "
                + add_setup_fix(f"{ENV_PYTHON} -m pip install -U PACKAGE", "for example"),
            )
        conftest = _conftest_that_failed(output, root)
        if conftest is not None:
            # pytest loads it before any test: one module it lacks stops them
            # all; a module on no index the setup reaches (azure's
            # devtools_testutils) is no pip line away, so say the other way on
            return (
                CheckVerdict.CANNOT_RUN,
                f"missing module: {name} (not installed), imported by {conftest}, which "
                "pytest loads before any test",
                _install_fix(top, root, python_module=True) + _without_conftest_fix(top, root),
            )
        return (
            CheckVerdict.CANNOT_RUN,
            f"missing module: {name} (not installed)",
            _install_fix(top, root, python_module=True),
        )
    collection = result.tests.collection_errors if result.tests else []
    intended = [name for name in work if belongs_to_intent(name, intent)]
    if intended:  # a name under the repository's own package the intent asks for
        return CheckVerdict.FAILS, f"the repository does not provide {intended[0]} yet", ""
    pytest_red = _is_pytest(command) and code in _PYTEST_CANNOT_RUN_EXITS
    if work or collection or (pytest_red and "error collecting" in output.lower()):
        words = collection[0] if collection else _collection_words(output)
        if not words and work:
            words = f"cannot import {work[0]}"
        return CheckVerdict.CANNOT_RUN, f"the tests could not be collected: {words}", FIX_SETUP
    rejected = [m for p in _PLUGIN_REJECTED if (m := p.search(output))]
    if rejected and _is_pytest(command):
        words = rejected[0].group(0).strip()[:200]
        return (
            CheckVerdict.CANNOT_RUN,
            f"{PLUGINS_REJECTED}: {words}",
            older_pytest_fix(output),
        )
    node = _NODE_MISSING.search(output)
    if node:
        name = node.group(1)
        package = "/".join(name.split("/")[:2]) if name.startswith("@") else name.split("/")[0]
        return (
            CheckVerdict.CANNOT_RUN,
            f"missing module: {name} (not installed)",
            _install_fix(package, root) if _project_kind(root) == "node" else FIX_SETUP,
        )
    go = _GO_MISSING.search(output)
    if go:
        return (
            CheckVerdict.CANNOT_RUN,
            f"missing Go module: {go.group(1)} (not downloaded)",
            "checks run without the network, so modules come from the setup: if go.mod names "
            "it, "
            + add_setup_fix("go mod download", "download it in the setup")
            + "; if not, the work must add it to go.mod",
        )
    if pytest_red:
        lowered = output.lower()
        if code == 5 or "no tests ran" in lowered:
            return (
                CheckVerdict.CANNOT_RUN,
                "pytest collected no tests",
                f"the command selects no tests here: {_GIVE_CHECK}",
            )
        if "importerror" in lowered or any(c in lowered for c in _COLLECTION):
            words = _collection_words(output)
            return (
                CheckVerdict.CANNOT_RUN,
                "pytest could not collect the tests" + (f": {words}" if words else ""),
                FIX_SETUP,
            )
        if code == 4:
            return (
                CheckVerdict.CANNOT_RUN,
                "pytest rejected its command line (usage error)",
                "an option it was given belongs to a plugin the setup did not install, or is "
                "misspelt: install the plugin ("
                + add_setup_fix(f"{ENV_PYTHON} -m pip install PLUGIN", "for example")
                + f") or {_GIVE_CHECK}",
            )

    last = next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "")
    from .test_reports import failure_site  # loaded with the first red check read

    last = failure_site(output, root) or last  # a script's uncaught error: where it died
    why = f"exit {code}" if code is not None else "failed"
    if last and not last.startswith("[corral]"):
        why += f": {last[:120]}"
    elif last:
        why = last.removeprefix("[corral]").strip()[:120]
    return CheckVerdict.FAILS, why, ""


SETUP_FAILED = "setup failed"
SETUP_FIX = (
    "the check did not run: fix the setup — headless, `corral run --setup CMD` (repeat it per "
    "line, in place of the drafted setup) or --no-setup; in the console, /setup"
)
# a package index the setup could not reach for a moment: the host, not the work
_SETUP_NETWORK = re.compile(
    r"ConnectionError|ConnectTimeout|ReadTimeout|Connection reset|Connection refused|"
    r"Max retries exceeded|ProxyError|SSLError|HTTP error 5\d\d|\b50[234]\b"
)


def change_broke_setup(output: str, timed_out: bool, baseline: list[CheckResult] | None) -> bool:
    """Whether a setup that failed at verification failed because of the
    change: the same setup succeeded on the untouched tree (its checks ran
    there), it did not run out of time, and nothing in its output says the
    host or the network (a package index) failed it."""
    if baseline is None or not baseline or timed_out:
        return False
    if any(r.reason.startswith(SETUP_FAILED) for r in baseline):
        return False
    clean = _ANSI.sub("", output)
    return _host_cause(clean) is None and not _SETUP_NETWORK.search(clean)


def setup_fix(why: str) -> str:
    """The way on for a failed setup, by its cause."""
    if _SETUP_NETWORK.search(why) or _host_cause(why) is not None:
        return (
            "the setup could not reach a package index (it runs with the network): run again "
            "when it is reachable; behind a proxy, set HTTPS_PROXY for corral; or give a setup "
            "that needs none: headless, `corral run --setup CMD` or --no-setup"
        )
    if "timed out" in why:
        return (
            "the setup ran out of time: give it longer in a contract (`corral run --contract "
            'FILE` with "setup_timeout_secs"), or a lighter setup: `corral run --setup CMD`'
        )
    if "No matching distribution" in why or "Could not find a version" in why:
        return (
            "pip found no release that fits (a pin this Python cannot install, or a package "
            "named differently on PyPI): give the setup with that requirement changed — "
            + SETUP_FIX.removeprefix("the check did not run: fix the setup — ")
        )
    return SETUP_FIX


def setup_failed(
    name: str, why: str, *, by_the_change: bool = False, output: str = ""
) -> CheckResult:
    """The result a check gets when the setup before it failed: it never ran.
    `by_the_change`: the setup succeeded on the untouched tree, so the work
    broke it (a version read from a file it emptied): the work's, a repair,
    with the setup's `output` for the agent to read."""
    if by_the_change:
        return CheckResult(
            name=name,
            passed=False,
            verdict=CheckVerdict.FAILS,
            reason=f"the setup no longer succeeds after the change (it did on the untouched "
            f"tree): {why}",
            output_tail=f"{_ANSI.sub('', output)[-2000:]}\n[corral] not run: the change broke the setup",
        )
    return CheckResult(
        name=name,
        passed=False,
        verdict=CheckVerdict.CANNOT_RUN,
        reason=f"{SETUP_FAILED}: {why}",
        fix=setup_fix(why),
        output_tail="[corral] not run: the setup failed",
    )
