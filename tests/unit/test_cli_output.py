"""The command line writes through one function: whatever an agent or a model
put in what it prints, no character reaches the terminal that it would act
on, and JSON output still reads back as the same strings."""

from __future__ import annotations

import ast
import contextlib
import io
import json
from pathlib import Path

import pytest
from hypothesis import given, settings

from corral.tui.cli.output import json_text, say, say_json, write_json_bytes

from .test_safe_text import hostile, obeyable

CLI = Path(__file__).resolve().parents[2] / "tui" / "cli"
# the one writer, the agents' hook (a JSON line to a file), and MCP's stdio protocol
OWN_WRITERS = {"output.py", "hook.py", "mcp.py"}


def test_every_subcommand_writes_through_say() -> None:
    raw = []
    for path in sorted(CLI.glob("*.py")):
        if path.name in OWN_WRITERS:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if isinstance(f, ast.Name) and f.id == "print":
                raw.append(f"{path.name}:{node.lineno} print()")
            if isinstance(f, ast.Attribute) and f.attr == "write" and "std" in ast.unparse(f):
                raw.append(f"{path.name}:{node.lineno} {ast.unparse(f)}()")
    assert raw == [], "write with corral.tui.cli.output.say / say_json instead"


@settings(max_examples=300, deadline=None)
@given(value=hostile)
def test_say_shows_every_character_and_obeys_none(value: str) -> None:
    out = io.StringIO()
    say("intent:", value, file=out)
    assert obeyable(out.getvalue(), multiline=True) == []


@settings(max_examples=300, deadline=None)
@given(value=hostile)
def test_json_reads_back_the_same_and_obeys_none(value: str) -> None:
    value = value.encode("utf-8", "replace").decode("utf-8")  # JSON holds no lone surrogate
    for ensure_ascii in (True, False):
        with contextlib.redirect_stdout(io.StringIO()) as written:
            say_json({"intent": value}, ensure_ascii=ensure_ascii, indent=None)
        out = written.getvalue()
        assert obeyable(out, multiline=True) == []
        assert json.loads(out) == {"intent": value}
    assert json.loads(json_text(json.dumps([value], ensure_ascii=False))) == [value]


def test_stored_rows_as_bytes_are_escaped_too(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    data = json.dumps({"intent": "a\u202eb\x9b31m\u200b"}, ensure_ascii=False).encode()
    write_json_bytes(data)
    out = capsysbinary.readouterr().out.decode()
    assert obeyable(out, multiline=True) == []
    assert json.loads(out) == {"intent": "a\u202eb\x9b31m\u200b"}
