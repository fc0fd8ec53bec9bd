"""Where a failed test failed, read from what its runner printed.

A test already failing on the untouched tree used to hide any regression in
it: it fails either way. What it fails *with* tells them apart: the
exception's type and the innermost frame in the test's own file (a
regression that breaks something the test asserts earlier makes it fail
earlier, or with another exception). That site is kept only in a stable
form: the type, the file as named from the checkout, the line and its
source text; never the message (addresses, times, temp paths change from
run to run) and never an absolute path (the untouched tree and the verified
one are checked out in different places).

Read from: pytest's JUnit report (the failure's long or short traceback,
`path:line: Type` locations), Python tracebacks (unittest `-v`, pytest
`--tb=native`), Jest/Vitest `failureMessages` (`at … (file:line:col)`),
`node --test`'s TAP diagnostics (`name:` and the first `stack:` frame in
the test's `location:` file), and `go test`'s first `file_test.go:12:` line.
A failure whose site cannot be read (`--tb=line`, `--tb=no`, a runner this
does not know, a frame never in the test's file, a Go panic) has none: its
test keeps the old sentence, a regression in it cannot be seen.

Also here: `runner_crash`, the file of the tree a test runner that wrote no
report died in (a project the runner itself imports, broken by the work).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from ..models import FailureSite

# pytest's long traceback: each entry ends with `path:line: ` (the innermost
# with the exception's type); `--tb=short` writes `path:line: in func`
_PYTEST_LOCATION = re.compile(r"^(\S[^:\n]*?):(\d+): ?(in \S+|[\w.]+)?\s*$")
_PYTEST_SOURCE = re.compile(r"^>\s+(.*\S)\s*$")
_PYTEST_E = re.compile(r"^E\s+(assert\b|[A-Za-z_][\w.]*(?::|$))")
# a Python traceback's frame, and the exception line that ends it
_PY_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+), in (\S+)\s*$')
_PY_EXCEPTION = re.compile(
    r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Failure))\b"
)
_PY_EXCEPTION_ANY = re.compile(r"^([A-Za-z_][\w.]*)(?::\s|:?$)")
_UNITTEST_HEADER = re.compile(r"^(FAIL|ERROR): (\w+) \(([\w.]+)\)")
_JS_FRAME = re.compile(r"\bat (?:.*? \()?(?:file://)?([^()\s]+?):(\d+):\d+\)?\s*$")
_JS_KIND = re.compile(r"^\s*([A-Za-z_$][\w$.]*)(?::|$)")
_GO_LOCATION = re.compile(r"^\s+([\w.-]+_test\.go):(\d+): ")
_GO_PANIC = re.compile(r"^panic: ")


def _module_path(dotted: str, frame_path: str) -> str | None:
    """The test file a frame is in, named from the checkout, when the frame's
    file is the module `dotted` (a test id's leading dotted part) names:
    `/tmp/x/tests/test_a.py` for `tests.test_a.TestK.test_m` is `tests/test_a.py`."""
    parts = frame_path.replace("\\", "/").removesuffix(".py").split("/")
    for start in range(len(parts)):
        module = ".".join(parts[start:])
        if module and (dotted == module or dotted.startswith(module + ".")):
            return "/".join(parts[start:]) + ".py"
    return None


def from_pytest(text: str, test_file: str) -> FailureSite | None:
    """A JUnit `failure`/`error` body of pytest's (long or short traceback):
    the last location in `test_file` (the testcase's `file`), the source line
    marked `>` above it, and the exception's type (the innermost location's
    word, else the last `E` line's, else the message's)."""
    if not test_file:
        return None
    lines = text.splitlines()
    site: tuple[str, int, str] | None = None
    kind = ""
    for i, line in enumerate(lines):
        m = _PYTEST_LOCATION.match(line)
        if not m:
            continue
        word = m.group(3) or ""
        if word and not word.startswith("in "):
            kind = word
        path = m.group(1).replace("\\", "/")
        if path == test_file or path.endswith("/" + test_file) or test_file.endswith("/" + path):
            source = ""
            for above in reversed(lines[max(0, i - 40) : i]):
                marked = _PYTEST_SOURCE.match(above)
                if marked:
                    source = marked.group(1)
                    break
                if _PYTEST_LOCATION.match(above):
                    break
            if word.startswith("in ") and i + 1 < len(lines):  # --tb=short: the source follows
                source = lines[i + 1].strip()
            site = (test_file, int(m.group(2)), source)
    if site is None:
        return None
    if not kind:
        marks = [m.group(1) for m in map(_PYTEST_E.match, lines) if m]
        kind = _python_kind(marks[-1]) if marks else ""
    if not kind:
        return None
    return FailureSite(kind=kind, path=site[0], line=site[1], text=site[2][:200])


def _python_kind(word: str) -> str:
    """`assert x == 2` (pytest's rewritten assertion) is an AssertionError."""
    return "AssertionError" if word == "assert" else word.removesuffix(":")


def from_python_traceback(text: str, test_id: str) -> FailureSite | None:
    """The last traceback in `text` (a chained one's last): its innermost
    frame in the file `test_id` names, and the exception line's type."""
    frames: list[tuple[str, int, str]] = []
    kind = ""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last):"):
            frames, kind = [], ""
            continue
        frame = _PY_FRAME.match(line)
        if frame:
            path = _module_path(test_id, frame.group(1))
            if path is not None:
                source = lines[i + 1].strip() if i + 1 < len(lines) else ""
                frames.append((path, int(frame.group(2)), source))
            continue
        if frames and not kind and not line.startswith(" "):
            exc = _PY_EXCEPTION.match(line) or _PY_EXCEPTION_ANY.match(line)
            if exc:
                kind = exc.group(1)
    if not frames or not kind:
        return None
    path, line_no, source = frames[-1]
    return FailureSite(kind=kind, path=path, line=line_no, text=source[:200])


def from_unittest(output: str) -> dict[str, FailureSite]:
    """unittest's `FAIL: test_x (module.Class.test_x)` blocks, each read as a
    Python traceback, keyed as test_reports names unittest's tests."""
    sites: dict[str, FailureSite] = {}
    blocks: list[tuple[str, list[str]]] = []
    current: list[str] | None = None
    for line in output.splitlines():
        header = _UNITTEST_HEADER.match(line)
        if header:
            method, where = header.group(2), header.group(3)
            test_id = where if where.endswith(f".{method}") else f"{where}.{method}"
            current = []
            blocks.append((test_id, current))
            continue
        if current is not None:
            if line.startswith("=" * 20) or line.startswith("Ran "):
                current = None
                continue
            current.append(line)
    for test_id, body in blocks:
        site = from_python_traceback("\n".join(body), test_id)
        if site is not None:
            sites.setdefault(test_id, site)
    return sites


def from_js(message: str, test_file: str, checkout: str | None) -> FailureSite | None:
    """A Jest/Vitest failure message: its first line's type (`Error`,
    `TypeError`, `AssertionError`) and the first stack frame in the test's
    file (the innermost: a stack lists it first)."""
    lines = message.splitlines()
    if not lines or not test_file:
        return None
    kind_match = _JS_KIND.match(_strip_ansi(lines[0]))
    if kind_match is None:
        return None
    for line in lines[1:]:
        frame = _JS_FRAME.search(line)
        if not frame:
            continue
        path = frame.group(1)
        if checkout is not None and os.path.isabs(path):
            inside = os.path.relpath(path, checkout)
            path = path if inside.startswith("..") else inside
        if path == test_file or path.endswith("/" + test_file):
            return FailureSite(kind=kind_match.group(1), path=test_file, line=int(frame.group(2)))
    return None


_YAML_FIELD = re.compile(r"^\s*(location|name|code):\s*'?([^']*?)'?\s*$")
_TAP_STACK_FRAME = re.compile(r"\(?(?:file://)?(/[^()\s]+?):(\d+):\d+\)?\s*$")


def from_tap_yaml(block: list[str], checkout: str | None) -> FailureSite | None:
    """Node's test runner's YAML diagnostics under a `not ok`: the error's
    `name` (its type, `AssertionError`; else its `code`), and the first
    `stack` frame in the test's file (`location`), named from the checkout."""
    fields: dict[str, str] = {}
    for line in block:
        m = _YAML_FIELD.match(line)
        if m and m.group(1) not in fields:
            fields[m.group(1)] = m.group(2)
    location = fields.get("location", "")
    kind = fields.get("name") or fields.get("code") or ""
    test_file = location.rsplit(":", 2)[0] if location.count(":") >= 2 else ""
    if not kind or not test_file or checkout is None:
        return None
    inside = os.path.relpath(test_file, checkout)
    if inside.startswith(".."):
        return None  # an absolute path outside the checkout is not stable
    in_stack = False
    for line in block:
        if line.strip().startswith("stack:"):
            in_stack = True
            continue
        frame = _TAP_STACK_FRAME.search(line) if in_stack else None
        if frame and frame.group(1) == test_file:
            return FailureSite(kind=kind, path=inside, line=int(frame.group(2)))
    return None


def from_go(lines: list[str]) -> FailureSite | None:
    """A Go test's output: the first `x_test.go:12:` line it reported (the
    first `t.Error`/`t.Fatal`; later ones may follow from it), or a panic."""
    for line in lines:
        if _GO_PANIC.match(line):
            return None  # a panic's frames carry goroutine ids and addresses
        m = _GO_LOCATION.match(line)
        if m:
            return FailureSite(kind="failed", path=m.group(1), line=int(m.group(2)))
    return None


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


#: How a runner crash names its file before it is known whether the work
#: changed it (`said_changed` says so where it did).
IN_THE_TREE = "a file of the tree checked"
_CRASH_FILE = re.compile(r"its traceback ends in (\S+) line \d+ ")
_PYTEST_FRAME = re.compile(r"^(\S[^:\n]*?\.py):(\d+): in \S+")
_INSTALLED = ("/site-packages/", "/dist-packages/")


def runner_crash(output: str, checkout: Path) -> str | None:
    """Why a test runner that wrote no per-test report died, when its last
    traceback ends in a file of the tree being checked (not an installed
    package's): `src/packaging/version.py line 12 (TypeError: …)`. pytest
    imports what the project may be (packaging, pluggy): a change that
    breaks it kills the runner before it reports any test. None: no such
    traceback (the runner's own failure says why)."""
    lines = output.splitlines()
    frames: list[tuple[str, int]] = []
    raised = ""
    root = checkout.resolve()
    for line in lines:
        if line.startswith("Traceback (most recent call last):"):
            frames, raised = [], ""
            continue
        frame = _PY_FRAME.match(line) or _PYTEST_FRAME.match(line)
        if frame:
            inside = _in_tree(frame.group(1), root)
            if inside is not None:
                frames.append((inside, int(frame.group(2))))
            continue
        if frames and not line.startswith(" "):
            said = line.removeprefix("E").strip() if line.startswith("E ") else line.strip()
            if _PY_EXCEPTION.match(said) or _PY_EXCEPTION_ANY.match(said):
                raised = said
    if not frames or not raised:
        return None
    path, line_no = frames[-1]
    shown = re.sub(r"[\x00-\x1f\x7f]", " ", raised)[:200]
    return f"{path} line {line_no} ({shown})"


def _in_tree(path: str, root: Path) -> str | None:
    """`path` named from the checked tree's root, when it is a file of that
    tree and not of an environment installed inside it."""
    if any(part in path for part in _INSTALLED):
        return None
    candidate = Path(path) if os.path.isabs(path) else root / path
    try:
        real = candidate.resolve()
    except OSError:
        return None
    if not real.is_relative_to(root) or not real.is_file():
        return None
    return real.relative_to(root).as_posix()


def said_changed(reason: str, changed: set[str]) -> str:
    """A runner crash's reason, saying "which this work changed" where the
    file its traceback ends in is one of the change's paths (`changed`)."""
    m = _CRASH_FILE.search(reason)
    if m is None or IN_THE_TREE not in reason or m.group(1) not in changed:
        return reason
    return reason.replace(IN_THE_TREE, "a file this work changed", 1)
