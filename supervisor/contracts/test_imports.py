"""Third-party modules a Python project's tests import but nothing declares.

Old sdists often ship tests that import a test helper (`hypothesis`,
`hypothesmith`) declared only in a tox.ini or CI file they do not ship, or
under `try: ... except ImportError` around code that then fails at import.
An import whose `except ImportError` imports something else instead (the
Python 2/3 `try: import thread / except ImportError: import _thread`) has
its fallback, so it is not needed and never installed by name.
The drafted setup installs such a module after the project, only when it is
still not importable there, and says which at gate 1. Import statements are
read with `ast` (never executed); only plain ASCII module names are kept, so
what reaches the setup command is a known-safe word.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

MAX_MODULES = 8
MAX_FILE_BYTES = 512 * 1024

#: Import names whose distribution on PyPI is named differently.
DISTRIBUTIONS = {
    "yaml": "PyYAML",
    "PIL": "Pillow",
    "dateutil": "python-dateutil",
    "bs4": "beautifulsoup4",
    "sklearn": "scikit-learn",
    "attr": "attrs",
    "OpenSSL": "pyOpenSSL",
    "jwt": "PyJWT",
    "dotenv": "python-dotenv",
    "git": "GitPython",
    "zmq": "pyzmq",
    "serial": "pyserial",
}
#: Never installed by name: the runner itself, packaging tools, and names that
#: are namespaces or differ too much from any one distribution.
_NEVER = frozenset(
    {"pytest", "_pytest", "py", "pkg_resources", "setuptools", "distutils", "google", "test"}
)
#: Python 2's standard library (old suites import it under `try`).
_PYTHON2_STDLIB = frozenset(
    {
        *("StringIO", "cStringIO", "UserDict", "UserList", "UserString", "urllib2"),
        *("urlparse", "ConfigParser", "Queue", "cPickle", "httplib", "HTMLParser"),
        *("__builtin__", "gdbm", "dbhash", "anydbm", "dumbdbm", "commands", "sets"),
        *("Tkinter", "tkFileDialog", "cookielib", "Cookie", "SocketServer", "xmlrpclib"),
        *("thread", "dummy_thread", "copy_reg", "htmlentitydefs", "robotparser"),
    }
)
_SAFE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Statements run when the module is imported (into `try`/`if`/`with`
    blocks, not into functions or classes: an import a test makes inside
    itself is that test's own business, usually skipped when missing)."""
    out: list[ast.stmt] = []
    for node in body:
        out.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        for field in ("body", "orelse", "finalbody"):
            out += _module_level(getattr(node, field, None) or [])
        for handler in getattr(node, "handlers", None) or []:
            out += _module_level(handler.body)
    return out


def _is_import(node: ast.stmt) -> bool:
    return isinstance(node, (ast.Import, ast.ImportFrom))


def _with_fallback(statements: list[ast.stmt]) -> set[int]:
    """The imports in a `try` whose handler imports something else instead:
    alternatives with a fallback, not requirements."""
    out: set[int] = set()
    for node in statements:
        if isinstance(node, ast.Try) and any(
            any(_is_import(s) for s in handler.body) for handler in node.handlers
        ):
            out |= {id(s) for s in node.body if _is_import(s)}
    return out


def _top_level_imports(path: Path) -> set[str]:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return set()
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return set()
    names: set[str] = set()
    statements = _module_level(tree.body)
    optional = _with_fallback(statements)
    for node in statements:
        if id(node) in optional:
            continue
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_files_importing(root: Path, module: str, limit: int = 200) -> tuple[int, int]:
    """(test files, of which import `module` at module level) under `root`,
    `test_*.py` and `*_test.py` outside hidden, virtualenv and vendored
    folders, at most `limit` looked at: whether leaving a conftest out
    (`--noconftest`) would let any test be collected."""
    seen = importing = 0
    skip = {"node_modules", "site-packages", "venv", "build", "dist"}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if any(p.startswith(".") or p in skip for p in parts[:-1]):
            continue
        name = parts[-1]
        if not (name.startswith("test_") or name.endswith("_test.py")):
            continue
        seen += 1
        importing += module in _top_level_imports(path)
        if seen >= limit:
            break
    return seen, importing


def _local_names(root: Path, files: list[Path]) -> set[str]:
    """Top-level names the repository itself provides (its packages and
    modules, and the test directories' own helper modules)."""
    names: set[str] = set()
    for base in {root, root / "src", root / "lib", *(f.parent for f in files)}:
        try:
            entries = list(base.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir() or entry.suffix == ".py":
                names.add(entry.name.removesuffix(".py"))
    return names


def undeclared_imports(root: Path, files: list[Path]) -> list[str]:
    """Third-party modules the test files import, sorted, at most MAX_MODULES."""
    local = _local_names(root, files)
    found: set[str] = set()
    for path in files:
        found |= _top_level_imports(path)
    wanted = [
        name
        for name in sorted(found)
        if _SAFE_NAME.fullmatch(name)
        and name not in sys.stdlib_module_names
        and name not in local
        and name not in _NEVER
        and name not in _PYTHON2_STDLIB
    ]
    return wanted[:MAX_MODULES]


def install_missing_command(python: str, modules: list[str]) -> str:
    """One setup step: each module not importable in the environment is
    installed by its distribution's name; one that cannot be is said, and
    the setup goes on (the check then says what it lacks)."""
    pairs = " ".join(f"{m}:{DISTRIBUTIONS.get(m, m)}" for m in modules)
    return (
        f'for m in {pairs}; do {python} -c "import ${{m%%:*}}" 2>/dev/null || '
        f'{python} -m pip install -q "${{m#*:}}" || '
        f'echo "[corral] could not install ${{m#*:}}"; done'
    )
