"""The pytest a suite was written for, when its conftest hooks say so.

A conftest's hook implementations are checked against the running pytest's
hook specifications when the conftest loads: a hook argument a later pytest
removed (pytest 8 removed `path` from the collection hooks) makes pytest
refuse the whole suite with pluggy's `PluginValidationError`, and an old
sdist that names no pytest version cannot say which it needs. So when the
suite's conftest files define hooks and no requirement the setup installs
pins pytest's version, the drafted (pip) setup ends with one
step that asks the installed pytest to collect those directories and, while
it rejects their hooks, installs the newest release below its major version
(at most three times); the step prints what it did. Hooks are found with `ast`, never by
importing the conftest; the probe runs in the setup's sandbox like the
install before it, writing no bytecode or cache into the tree.
"""

from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

MAX_CONFTEST_BYTES = 512 * 1024
#: What pluggy raises when a hook implementation does not fit its spec.
REJECTED = "PluginValidationError"
#: How many major versions the setup steps down at most.
MAX_MAJORS_DOWN = 3
_PYTEST_PIN = re.compile(r"^['\"]?pytest\s*(\[[^\]]*\])?\s*[<>=~!]", re.IGNORECASE)


def pins_pytest(requirements: list[str]) -> bool:
    """Whether the project's own requirements choose pytest's version (then
    the setup never picks another)."""
    return any(_PYTEST_PIN.match(r.strip()) for r in requirements)


def _hooks(path: Path) -> list[str]:
    """The `pytest_*` functions a conftest defines at module level."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_CONFTEST_BYTES:
            return []
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return []
    return [
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.name.startswith("pytest_")
    ]


def conftest_hooks(root: Path, test_files: list[Path]) -> dict[str, list[str]]:
    """Hook implementations by conftest directory (relative to `root`, "."
    for the root): the conftest files pytest loads for these test files."""
    dirs = {root}
    for test in test_files:
        for parent in test.parents:
            if parent == root or root not in parent.parents:
                break
            dirs.add(parent)
    found: dict[str, list[str]] = {}
    for where in sorted(dirs):
        hooks = _hooks(where / "conftest.py")
        if hooks:
            found[where.relative_to(root).as_posix() if where != root else "."] = hooks
    return found


def older_pytest_step(python: str, dirs: list[str]) -> str:
    """One setup step: collect `dirs`; while this pytest rejects their hooks
    (at most MAX_MAJORS_DOWN times), install the newest pytest below its
    major version, saying so."""
    targets = " ".join(shlex.quote(d) for d in dirs)
    major = f"$({python} -c \"import pytest; print(pytest.__version__.split('.')[0])\")"
    rounds = " ".join(str(n) for n in range(1, MAX_MAJORS_DOWN + 1))
    return (
        f"for _ in {rounds}; do PYTHONDONTWRITEBYTECODE=1 {python} -m pytest --collect-only -q "
        f"-p no:cacheprovider {targets} 2>&1 | grep -q {REJECTED} || break; v={major}; "
        "echo \"[corral] pytest $v rejects the suite's conftest hooks (written for an older "
        'pytest): installing pytest<$v"; '
        f'{python} -m pip install -q "pytest<$v" || break; done'
    )
