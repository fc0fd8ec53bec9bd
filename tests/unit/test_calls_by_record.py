"""The command line and the MCP bridge call the owner by record
(`client.request(Calls.approve, params.ApproveParams(...))`), never by a
method's name: a misspelled method or parameter is then a type error mypy
reports, not a refusal at run time. One test walks the code, one runs mypy
on a wrong call."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CALLERS_BY_RECORD = [
    *sorted((ROOT / "tui" / "cli").glob("*.py")),
    ROOT / "supervisor/control/mcp.py",
]


def _calls_by_name(path: Path) -> list[str]:
    """Every `<x>.call(...)` (the untyped name-and-kwargs form), and every
    `request`/`answer` whose record is not `Calls.<name>` or a variable."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        where = f"{path.relative_to(ROOT)}:{node.lineno}"
        if node.func.attr == "call":
            found.append(f"{where}: .call(...) by name")
        elif node.func.attr in ("request", "answer") and node.args:
            record = node.args[0]
            if isinstance(record, ast.Constant):
                found.append(f"{where}: .{node.func.attr}({record.value!r}, ...)")
    return found


def test_the_command_line_and_mcp_call_the_owner_only_by_record() -> None:
    by_name = [hit for path in CALLERS_BY_RECORD for hit in _calls_by_name(path)]
    assert not by_name, (
        "call the owner by record (client.request(Calls.<method>, params.<Model>(...)), or "
        "client.answer(...) for the JSON as sent), not by name:\n" + "\n".join(by_name)
    )


MYPY = [sys.executable, "-m", "mypy"]
WRONG = """\
from corral.supervisor.remote import Calls, ControlClient, params


def misspelled(client: ControlClient) -> None:
    client.answer(Calls.approve, params.ApproveParams(session_id="x", delivry="branch"))


def wrong_model(client: ControlClient) -> None:
    client.request(Calls.approve, params.SessionParams(session_id="x"))


def wrong_type(client: ControlClient) -> None:
    client.request(Calls.reject, params.RejectParams(session_id="x", comment=3))
"""


@pytest.mark.slow
def test_mypy_sees_a_wrong_method_parameter(tmp_path: Path) -> None:
    """The package as it installs (`corral.*`), linked like `make view`."""
    view = tmp_path / "view"
    (view / "corral").mkdir(parents=True)
    (view / "corral" / "__init__.py").symlink_to(ROOT / "corral" / "__init__.py")
    for folder in ("supervisor", "tui"):
        (view / "corral" / folder).symlink_to(ROOT / folder)
    (view / "wrong.py").write_text(WRONG)
    cache = ROOT / "build" / "mypy-calls-by-record"  # warm after the first run
    done = subprocess.run(
        [
            *MYPY,
            "wrong.py",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(cache),
        ],
        cwd=view,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = done.stdout
    assert 'Unexpected keyword argument "delivry" for "ApproveParams"' in out, out
    assert 'type parameter "P" of "request"' in out, out
    assert 'Argument "comment" to "RejectParams" has incompatible type "int"' in out, out
