"""Test files that wait on a server this machine does not have.

Some suites test a client against a real server: a conftest fixture starts
`redis-server` or `memcached` (pytest-xprocess), a test connects to
`localhost:8000` (a local DynamoDB) or builds `pymongo.MongoClient()` (a
mongod on localhost:27017). Where the program is not installed, or nothing
can listen (a check runs in a network namespace of its own, so only what
the check itself starts listens on localhost), those tests do not fail
fast: each waits out its client's timeout (pymongo's 30 s server selection,
a retrying boto3), and the whole suite runs past its limit on the untouched
tree. cachelib's ran ten minutes and was then *cannot run*.

This module notices that before anything runs, from the files alone: their
Python is parsed with `ast` (never imported or executed), and a program is
looked up on PATH, never started. The drafted pytest check leaves such files
out (`--ignore=`), and gate 1 says which, why, and how to put them back.
It is deliberately narrow (a false "needs a server" would silently drop
tests from the check): a file is left out only when

- it uses, by a fixture parameter or `usefixtures`, a fixture (its own or a
  conftest's) that starts a program not on PATH (a list literal naming the
  program, assigned to `args` as pytest-xprocess's `ProcessStarter` wants,
  or passed to `subprocess.Popen` / `run` / `call` / `check_*`), or
- it names a local server address with a port (`localhost:8000`,
  `127.0.0.1:11212`) or builds a `MongoClient()` with no arguments, and
  starts no server of its own (no subprocess, socket server or fixture that
  starts a program).

A suite where every test file would be left out keeps them all: a check
that runs nothing judges nothing, and the timeout's own *cannot run*
(contracts/verdicts.py) then says why.
"""

from __future__ import annotations

import ast
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

MAX_FILE_BYTES = 512 * 1024
#: A program name shown at gate 1 and looked up on PATH: a plain word only.
_PROGRAM = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+\-]{0,63}")
_LOCAL_ADDRESS = re.compile(r"\b(?:localhost|127\.0\.0\.1|\[::1\]):(\d{2,5})\b")
#: Settings that point a client at its server.
_CONNECT_NAMES = {
    "endpoint_url",
    "endpoint",
    "host",
    "hosts",
    "url",
    "uri",
    "server",
    "servers",
    "address",
    "dsn",
    "broker_url",
    "connection_string",
}
#: Calls that connect to the address they are given first.
_CONNECTS = {
    "connect",
    "create_connection",
    "open_connection",
    "MongoClient",
    "Redis",
    "StrictRedis",
    "from_url",
}
_STARTS = {"Popen", "run", "call", "check_call", "check_output", "create_subprocess_exec"}
#: Calls that make a server of the file's own: an address it names may be its own.
_SERVES = {
    "Popen",
    "create_subprocess_exec",
    "create_subprocess_shell",
    "HTTPServer",
    "ThreadingHTTPServer",
    "TCPServer",
    "ThreadingTCPServer",
    "UDPServer",
    "serve_forever",
    "make_server",
    "start_server",
    "create_server",
    "TestServer",
    "run_app",
    "listen",
    "bind",
}


@dataclass(frozen=True)
class LeftOut:
    """A test file the drafted check leaves out, and why (one clause)."""

    path: str  # relative to the directory the check runs in
    why: str
    program: str = ""  # the program to install, when a fixture starts one


def _parse(path: Path) -> ast.Module | None:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        return ast.parse(path.read_bytes(), filename=str(path))
    except (OSError, SyntaxError, ValueError):
        return None


def _call_name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return ""


def _program_of(node: ast.expr | None) -> str | None:
    """The program a command literal starts: `["redis-server", …]` or
    `"memcached -p 1"`; None for anything computed."""
    first: ast.expr | None = node
    if isinstance(node, (ast.List, ast.Tuple)):
        first = node.elts[0] if node.elts else None
    if isinstance(first, ast.Constant) and isinstance(first.value, str):
        words = first.value.split()
        if words and _PROGRAM.fullmatch(Path(words[0]).name):
            return words[0]
    return None


def _programs_started(body: ast.AST) -> list[str]:
    """Programs a function or class body starts, as literals say."""
    found: list[str] = []
    for node in ast.walk(body):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "args" for t in node.targets
        ):
            program = _program_of(node.value)
        elif isinstance(node, ast.Call) and _call_name(node) in _STARTS and node.args:
            program = _program_of(node.args[0])
        else:
            continue
        if program is not None and program not in found:
            found.append(program)
    return found


def _is_fixture(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for deco in func.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in ("fixture", "yield_fixture"):
            return True
    return False


def _fixtures(tree: ast.Module) -> dict[str, list[str]]:
    """Each fixture defined at the module's top level: the programs it starts."""
    return {
        node.name: _programs_started(node)
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _is_fixture(node)
    }


def _names_used(tree: ast.Module) -> set[str]:
    """Fixture names a test file may use: every function parameter and every
    string constant (`usefixtures("redis_server")`)."""
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            used.update(a.arg for a in (*node.args.posonlyargs, *node.args.args))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            used.add(node.value)
    return used


def _address(node: ast.expr | None) -> str | None:
    """A local server address a literal holds (`"http://localhost:8000"`,
    `["127.0.0.1:11212"]`), if any."""
    values = node.elts if isinstance(node, (ast.List, ast.Tuple)) else [node]
    for value in values:
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            m = _LOCAL_ADDRESS.search(value.value)
            if m:
                return m.group(0)
    return None


def _named(node: ast.expr | None) -> bool:
    return isinstance(node, ast.Constant) and node.value in _CONNECT_NAMES


def _local_server(tree: ast.Module) -> str | None:
    """The local server address a file's tests connect to, if it hands one
    to a client: as a connection setting (`endpoint_url=`, `kwargs["host"] =`,
    `{"servers": […]}`, `setdefault("servers", […])`), as a connecting call's
    first argument (`connect("localhost:6400")`), or as pymongo's default
    (`MongoClient()`). An address that is only data (a URL a parser test
    splits) is none."""
    for node in ast.walk(tree):
        found: str | None = None
        if isinstance(node, ast.keyword):
            found = _address(node.value) if node.arg in _CONNECT_NAMES else None
        elif isinstance(node, ast.Assign):
            named = any(isinstance(t, ast.Subscript) and _named(t.slice) for t in node.targets)
            found = _address(node.value) if named else None
        elif isinstance(node, ast.Dict):
            found = next(
                (
                    a
                    for k, v in zip(node.keys, node.values, strict=False)
                    if _named(k) and (a := _address(v))
                ),
                None,
            )
        elif isinstance(node, ast.Call):
            name = _call_name(node)
            if name == "MongoClient" and not node.args and not node.keywords:
                return "localhost:27017 (MongoClient() with no arguments)"
            if name in _CONNECTS and node.args:
                found = _address(node.args[0])
            elif len(node.args) >= 2 and _named(node.args[0]):
                found = _address(node.args[1])
        if found is not None:
            return found
    return None


def _serves(tree: ast.Module) -> bool:
    return any(isinstance(n, ast.Call) and _call_name(n) in _SERVES for n in ast.walk(tree))


def waiting_on_absent_servers(
    base: Path,
    test_files: list[Path],
    conftests: list[Path],
    *,
    on_path: Callable[[str], bool] | None = None,
) -> list[LeftOut]:
    """The test files (of `test_files`, under `base`) whose tests wait on a
    server this machine lacks; empty when none do, or when all would."""
    installed = on_path or (lambda program: shutil.which(program) is not None)
    shared: dict[str, list[str]] = {}
    for conftest in conftests:
        tree = _parse(conftest)
        if tree is not None:
            shared.update(_fixtures(tree))
    left: list[LeftOut] = []
    for path in test_files:
        tree = _parse(path)
        if tree is None:
            continue
        fixtures = {**shared, **_fixtures(tree)}
        used = _names_used(tree)
        missing = [
            (name, program)
            for name, programs in fixtures.items()
            if name in used
            for program in programs
            if not installed(program)
        ]
        rel = path.relative_to(base).as_posix()
        if missing:
            name, program = missing[0]
            why = f"its fixture `{name}` starts `{program}`, which is not installed here"
            left.append(LeftOut(rel, why, program))
            continue
        address = _local_server(tree)
        starts_any = any(programs for name, programs in fixtures.items() if name in used)
        if address is not None and not starts_any and not _serves(tree):
            why = (
                f"its tests connect to a server at {address} that nothing in the suite "
                "starts (a check has a network of its own: only what it starts listens)"
            )
            left.append(LeftOut(rel, why))
    if len(left) >= len(test_files):
        return []
    return left
