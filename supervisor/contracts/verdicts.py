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
from pathlib import Path

from ..models import CheckResult, CheckVerdict

FIX_SETUP = "edit the setup (/setup command) so the check's tools and dependencies are installed"
PLUGINS_REJECTED = "pytest could not load the suite's plugins"
_PYTEST_VERSION = re.compile(r"\bpytest-(\d+)\.\d+")


def older_pytest_fix(output: str) -> str:
    """What to do when pytest rejects the suite's conftest or plugin hooks:
    they were written for an older pytest, which the setup can pin."""
    m = _PYTEST_VERSION.search(output)
    below = f"pytest<{m.group(1)}" if m else "pytest<N"
    which = "" if m else " (N: this pytest's major version, `pytest --version`)"
    return (
        f"the suite was written for an older pytest: end the setup with "
        f"`\"$CORRAL_ENV/bin/python\" -m pip install '{below}'`{which} — /setup in the "
        "console; headless, run with --contract FILE whose setup ends with that line"
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
    a missing name under the repository's own package is the work."""
    if result.passed:
        return result.model_copy(update={"verdict": CheckVerdict.PASSES, "reason": "", "fix": ""})
    verdict, reason = _cannot_run_reason(result, command, root, intent)
    if verdict is CheckVerdict.FAILS:
        return result.model_copy(update={"verdict": verdict, "reason": reason, "fix": ""})
    fix = (
        older_pytest_fix(_ANSI.sub("", result.output_tail))
        if reason.startswith(PLUGINS_REJECTED)
        else FIX_SETUP
    )
    return result.model_copy(update={"verdict": verdict, "reason": reason, "fix": fix})


def _cannot_run_reason(
    result: CheckResult, command: str, root: Path, intent: str
) -> tuple[CheckVerdict, str]:
    output = _ANSI.sub("", result.output_tail)
    code = result.exit_code
    if result.timed_out:
        return CheckVerdict.FAILS, "timed out"
    if code == 127:
        m = _NOT_FOUND.search(output)
        what = m.group(1) if m else command.split()[0] if command.split() else command
        return CheckVerdict.CANNOT_RUN, f"command not found: {what}"
    if code == 126:
        return CheckVerdict.CANNOT_RUN, "the command is not executable here"
    host = _host_cause(output)
    if host is not None:
        return CheckVerdict.CANNOT_RUN, f"the host, not the work: {host}"
    environment, work = _missing(output, _local_roots(root))
    if environment:
        return CheckVerdict.CANNOT_RUN, f"missing module: {environment[0]} (not installed)"
    collection = result.tests.collection_errors if result.tests else []
    intended = [name for name in work if belongs_to_intent(name, intent)]
    if intended:  # a name under the repository's own package the intent asks for
        return CheckVerdict.FAILS, f"the repository does not provide {intended[0]} yet"
    pytest_red = _is_pytest(command) and code in _PYTEST_CANNOT_RUN_EXITS
    if work or collection or (pytest_red and "error collecting" in output.lower()):
        words = collection[0] if collection else _collection_words(output)
        if not words and work:
            words = f"cannot import {work[0]}"
        return CheckVerdict.CANNOT_RUN, f"the tests could not be collected: {words}"
    rejected = [m for p in _PLUGIN_REJECTED if (m := p.search(output))]
    if rejected and _is_pytest(command):
        words = rejected[0].group(0).strip()[:200]
        return CheckVerdict.CANNOT_RUN, f"{PLUGINS_REJECTED}: {words}"
    node = _NODE_MISSING.search(output)
    if node:
        return CheckVerdict.CANNOT_RUN, f"missing module: {node.group(1)} (not installed)"
    go = _GO_MISSING.search(output)
    if go:
        return CheckVerdict.CANNOT_RUN, f"missing Go module: {go.group(1)} (not downloaded)"
    if pytest_red:
        lowered = output.lower()
        if code == 5 or "no tests ran" in lowered:
            return CheckVerdict.CANNOT_RUN, "pytest collected no tests"
        if "importerror" in lowered or any(c in lowered for c in _COLLECTION):
            words = _collection_words(output)
            return CheckVerdict.CANNOT_RUN, "pytest could not collect the tests" + (
                f": {words}" if words else ""
            )
        if code == 4:
            return CheckVerdict.CANNOT_RUN, "pytest rejected its command line (usage error)"

    last = next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "")
    why = f"exit {code}" if code is not None else "failed"
    if last and not last.startswith("[corral]"):
        why += f": {last[:120]}"
    elif last:
        why = last.removeprefix("[corral]").strip()[:120]
    return CheckVerdict.FAILS, why


SETUP_FAILED = "setup failed"
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
        fix="edit the setup (/setup command) and revise; the check did not run",
        output_tail="[corral] not run: the setup failed",
    )
