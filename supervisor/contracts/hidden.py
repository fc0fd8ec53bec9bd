"""Hidden checks: the part of the exam the operator holds back from the agent.

Special-casing the visible tests' inputs (`if (a, b) == (2, 3): return 6`) or
an `__eq__` that always says "equal" passes every test the agent can read; only
a test it never saw catches it. So a contract may hold hidden checks whose
name, command and files the agent never learns:

- their files live in the state dir, content-addressed (`hidden/<sha256>`,
  0600, the directory 0700), never in the worktree, the agent's prompt, its
  sandbox (which never shows the state dir) or anything an agent may read
  through the control socket or MCP (`for_agent` redacts them);
- they run in a verification checkout of their own (the same tree, the
  setup again, from its cache when it has one; at gate 1 too, so gate 1
  shows their verdict on the untouched tree): no visible check ran the
  work's code there, so nothing it planted can touch them, and nothing the
  work's code copied out of a hidden file while they ran is left where a
  visible check, whose output the agent reads, could print it. Their files
  are written in after the setup and removed after them, and the checkout
  is reset (`git clean -ffdx`) when they are done;
- a failing hidden check goes back to the agent only as "a check the operator
  holds back failed", with no name, command or output: its output would
  show the hidden test's inputs and expectations, and the next round would
  special-case those too. The operator sees everything (the console, the
  journal); the delivery trailers carry the count and verdicts only.

Where the agent runs unconfined (the operator turned the agents' sandbox
off), it can read anything the operator's user can, the state dir included:
hidden then means "not in its prompt or worktree", nothing more.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from ..errors import CorralError
from ..models import (
    MAX_HIDDEN_FILE_BYTES,
    SHA256_RE,
    CheckResult,
    CheckVerdict,
    HiddenCheck,
    HiddenFile,
    OutcomeContract,
    hidden_path_problem,
)
from ..paths import ensure_private_dir

HIDDEN_DIR = "hidden"
HELD_BACK_NAME = "held_back"
HELD_BACK = (
    "A check the operator holds back failed. corral shows you neither its name, its command "
    "nor its output. Make the work right for every input the task means, not only for the "
    "visible tests' inputs."
)
ASIDE_PREFIX = ".corral-aside-"


class HiddenFiles(Protocol):
    """Where hidden files are read from by their sha256: the operator's
    store, or the files an attestation publishes (`corral verify`)."""

    def get(self, sha: str) -> bytes: ...


class HiddenStore:
    """Hidden files by content: `<state dir>/hidden/<sha256>`, private."""

    def __init__(self, state_dir: Path) -> None:
        self.root = state_dir / HIDDEN_DIR

    def put(self, data: bytes) -> str:
        """Store `data` (once) and return its sha256."""
        if len(data) > MAX_HIDDEN_FILE_BYTES:
            raise CorralError(
                f"a hidden check's file is {len(data)} bytes, over the "
                f"{MAX_HIDDEN_FILE_BYTES} byte limit: hold back a smaller test file"
            )
        sha = hashlib.sha256(data).hexdigest()
        ensure_private_dir(self.root)
        target = self.root / sha
        if target.is_file() and not target.is_symlink():
            return sha
        tmp = self.root / f".{sha}.{uuid.uuid4().hex[:8]}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.replace(tmp, target)
        return sha

    def get(self, sha: str) -> bytes:
        """The stored content; refused when it is missing or not what its name says."""
        if not SHA256_RE.match(sha):
            raise CorralError(f"{sha!r} is not a hidden file's sha256")
        try:
            fd = os.open(self.root / sha, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            raise CorralError(
                f"a hidden check's file ({sha[:12]}) is no longer in {self.root}: add the "
                "hidden check again"
            ) from None
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(MAX_HIDDEN_FILE_BYTES + 1)
        if hashlib.sha256(data).hexdigest() != sha:
            raise CorralError(f"the hidden file {sha[:12]} in {self.root} was changed")
        return data

    def absorb(self, contract: OutcomeContract) -> OutcomeContract:
        """`contract` with every hidden file's content stored and replaced by
        its sha256 (what a contract file or a client handed over inline)."""
        if not contract.hidden_checks:
            return contract
        checks: list[HiddenCheck] = []
        for hidden in contract.hidden_checks:
            files: list[HiddenFile] = []
            for file in hidden.files:
                if file.content is not None:
                    sha = self.put(file.content.encode("utf-8"))
                else:
                    self.get(file.sha256)  # it must be here
                    sha = file.sha256
                files.append(HiddenFile(path=file.path, sha256=sha))
            checks.append(hidden.model_copy(update={"files": files}))
        return contract.model_copy(update={"hidden_checks": checks})


# -- the checkout ------------------------------------------------------------------------


@contextlib.contextmanager
def materialized(checkout: Path, checks: list[HiddenCheck], store: HiddenFiles) -> Iterator[None]:
    """The hidden checks' files written into `checkout` for the block, then
    removed, and whatever the tree had in their way put back. Nothing is
    followed: a symlink or file the work left where a hidden file or its
    directory goes is set aside, never written through."""
    contents = [(f.path, store.get(f.sha256)) for h in checks for f in h.files]
    made: list[Path] = []  # files and directories this wrote, in order
    aside: list[tuple[Path, Path]] = []  # (where it was, where it waits)
    try:
        for rel, data in contents:
            _write(checkout, rel, data, made, aside)
        yield
    finally:
        for path in reversed(made):
            with contextlib.suppress(OSError):
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
        for original, waiting in reversed(aside):
            with contextlib.suppress(OSError):
                os.rename(waiting, original)


def _set_aside(path: Path, checkout: Path, aside: list[tuple[Path, Path]]) -> None:
    waiting = checkout / f"{ASIDE_PREFIX}{uuid.uuid4().hex[:10]}"
    os.rename(path, waiting)
    aside.append((path, waiting))


def _write(
    checkout: Path, rel: str, data: bytes, made: list[Path], aside: list[tuple[Path, Path]]
) -> None:
    parts = rel.split("/")
    here = checkout
    for part in parts[:-1]:
        here = here / part
        if here.is_symlink() or (here.exists() and not here.is_dir()):
            _set_aside(here, checkout, aside)
        if not here.exists():
            here.mkdir()
            made.append(here)
    target = here / parts[-1]
    if target.is_symlink() or target.exists():
        _set_aside(target, checkout, aside)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    made.append(target)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


# -- running them -------------------------------------------------------------------------


def hidden_contract(contract: OutcomeContract) -> OutcomeContract:
    """The hidden checks as a contract of their own: each is the operator's
    exam whole, judged on its own, never against the baseline (a hidden test
    red on the untouched tree is what the work must turn green, not a test
    "already failing"), see `strict`."""
    return OutcomeContract(
        description=contract.description,
        checks=[h.as_check() for h in contract.hidden_checks],
        allow_credentials=contract.allow_credentials,
    )


def strict(result: CheckResult) -> CheckResult:
    """A hidden check passes only when its command passed and, where its
    runner reported test by test, every test it ran passed and at least one
    did (a suite skipped or deselected whole proves nothing)."""
    report = result.tests
    if not result.passed or report is None:
        return result
    if report.failed or report.collection_errors:
        why = f"{len(report.failed) + len(report.collection_errors)} hidden test(s) failed"
    elif not report.passed:
        why = f"no hidden test passed ({len(report.skipped)} skipped)"
    else:
        return result
    return result.model_copy(
        update={"passed": False, "verdict": CheckVerdict.FAILS, "reason": why, "fix": ""}
    )


def as_hidden(result: CheckResult) -> CheckResult:
    """A hidden check's result: judged by `strict`, marked hidden."""
    return strict(result).model_copy(update={"hidden": True})


def not_placed(contract: OutcomeContract, exc: Exception) -> list[CheckResult]:
    """Every hidden check as "cannot run": its files could not be put in the checkout."""
    return [
        CheckResult(
            name=h.name,
            passed=False,
            hidden=True,
            verdict=CheckVerdict.CANNOT_RUN,
            reason=f"its files could not be put in the verification checkout: {exc}",
            fix="add the hidden check again (its stored file is gone or unreadable)",
        )
        for h in contract.hidden_checks
    ]


# -- from a file on the command line -------------------------------------------------------

_JS = (".test.js", ".test.mjs", ".test.cjs", ".mjs", ".cjs", ".js")


_PYTEST = re.compile(
    r"((?:(?:uv|poetry|pdm|pipenv)\s+run\s+)?(?:[^\s;&|()]*python3?\s+-m\s+pytest|[^\s;&|()]*pytest))"
    r"(?=\s|$)"
)


def _pytest_runner(contract: OutcomeContract | None) -> str:
    """How the contract runs pytest (`.venv/bin/python -m pytest`, `uv run
    pytest`), so a hidden test runs in the same environment; else `python -m pytest`."""
    for check in contract.checks if contract is not None else []:
        found = _PYTEST.search(check.command)
        if found:
            return found.group(1)
    return "python -m pytest"


def command_for(dest: str, contract: OutcomeContract | None) -> str:
    """The command a hidden file runs with, by its name: a `.py` file with the
    contract's pytest, a JavaScript test with `node --test`, a shell script
    with `sh`."""
    quoted = shlex.quote(dest)
    if dest.endswith(".py"):
        return f"{_pytest_runner(contract)} -q -p no:cacheprovider {quoted}"
    if dest.endswith(_JS):
        return f"node --test {quoted}"
    if dest.endswith(".sh"):
        return f"sh {quoted}"
    raise CorralError(
        f"--hidden-check {dest}: corral runs .py files with pytest, .js/.mjs/.cjs tests with "
        "node --test and .sh scripts with sh; for another kind give the command in a contract "
        "file's hidden_checks"
    )


def hidden_check_from_file(
    spec: str, contract: OutcomeContract | None, taken: set[str] | None = None
) -> HiddenCheck:
    """`FILE[:DEST]` from `--hidden-check`: the file read now (its content
    goes to the owner, which stores it), put at DEST (default: its own name,
    at the repository's top) in the verification checkout."""
    source, _, dest = spec.partition(":")
    path = Path(source).expanduser()
    if not path.is_file():
        raise CorralError(f"--hidden-check {source}: no such file")
    dest = dest.strip() or path.name
    why = hidden_path_problem(dest)
    if why:
        raise CorralError(f"--hidden-check {spec}: the place in the repository {dest!r} {why}")
    try:
        content = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CorralError(f"--hidden-check {source}: cannot read it as text ({exc})") from None
    stem = re.sub(r"[^A-Za-z0-9_]", "_", Path(dest).name.split(".")[0])[:40] or "file"
    name, n = f"hidden_{stem}", 2
    while taken is not None and name in taken:
        name, n = f"hidden_{stem}_{n}", n + 1
    if taken is not None:
        taken.add(name)
    return HiddenCheck(
        name=name,
        command=command_for(dest, contract),
        files=[HiddenFile(path=dest, content=content)],
    )


# -- what an agent may know ----------------------------------------------------------------


def agent_contract(contract: OutcomeContract) -> OutcomeContract:
    """The contract as an engine hands it to its agent: the hidden checks
    only counted (placeholders with no name, command or file)."""
    if not contract.hidden_checks:
        return contract
    held = [HiddenCheck(name=HELD_BACK_NAME, command="") for _ in contract.hidden_checks]
    return contract.model_copy(update={"hidden_checks": held})


def visible_to_agent(results: list[CheckResult]) -> list[CheckResult]:
    """Results as the agent is told them: a hidden one is only "a check the
    operator holds back failed" (or passed), nothing that shows its content."""
    out: list[CheckResult] = []
    for r in results:
        if not r.hidden:
            out.append(r)
            continue
        out.append(
            CheckResult(
                name=HELD_BACK_NAME,
                passed=r.passed,
                hidden=True,
                output_tail=HELD_BACK if not r.passed else "",
            )
        )
    return out


def names_of(results: list[CheckResult]) -> str:
    """`tests, lint and 2 hidden checks`: the names the agent may read."""
    shown = [r.name for r in results if not r.hidden]
    hidden = sum(1 for r in results if r.hidden)
    if hidden:
        shown.append(f"{hidden} hidden check{'s' if hidden != 1 else ''}")
    return ", ".join(shown)


def hidden_tally(results: list[CheckResult]) -> str | None:
    """`2 pass` / `1 pass, 1 fail`: how the hidden checks ended (None: none ran)."""
    hidden = [r for r in results if r.hidden]
    if not hidden:
        return None
    passed = sum(1 for r in hidden if r.passed)
    failed = len(hidden) - passed
    parts = [f"{passed} pass"] if passed else []
    if failed:
        parts.append(f"{failed} fail")
    return ", ".join(parts)


def for_agent(value: Any) -> Any:
    """A JSON value (a session, an event, a list of them) as an agent may
    read it: every contract's hidden checks reduced to how many there are,
    every hidden check's result to its verdict."""
    if isinstance(value, list):
        return [for_agent(v) for v in value]
    if not isinstance(value, dict):
        return value
    if value.get("hidden") is True and "passed" in value and "name" in value:
        return {
            "name": HELD_BACK_NAME,
            "passed": bool(value.get("passed")),
            "hidden": True,
            "output_tail": "" if value.get("passed") else HELD_BACK,
        }
    out: dict[str, Any] = {}
    for key, item in value.items():
        if key == "hidden_checks" and isinstance(item, list):
            out[key] = [{"name": HELD_BACK_NAME, "command": "", "files": []} for _ in item]
        else:
            out[key] = for_agent(item)
    return out
