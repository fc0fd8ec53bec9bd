"""No product code swallows an exception without a word: every broad
`suppress` is `errors.swallowed(log, what)` (it logs what was being done and
what failed), and every `except Exception:` / bare `except:` that neither
re-raises nor uses the exception logs it. A failure nobody can read about is a
bug nobody finds."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

from corral.supervisor.errors import swallowed

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("supervisor", "tui", "corral")
LOGS = {"debug", "info", "warning", "error", "exception", "critical", "log"}
BROAD = {"Exception", "BaseException"}


def _broad(names: list[str]) -> bool:
    return any(name.rsplit(".", 1)[-1] in BROAD for name in names)


def _says_or_raises(handler: ast.ExceptHandler) -> bool:
    for node in ast.walk(ast.Module(body=handler.body, type_ignores=[])):
        if isinstance(node, ast.Raise):
            return True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in LOGS
        ):
            return True
        if handler.name and isinstance(node, ast.Name) and node.id == handler.name:
            return True  # the exception is used: said, recorded or passed on
    return False


def swallowing_sites(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                ctx = item.context_expr
                if not isinstance(ctx, ast.Call):
                    continue
                name = ctx.func.attr if isinstance(ctx.func, ast.Attribute) else None
                name = name or (ctx.func.id if isinstance(ctx.func, ast.Name) else None)
                if name == "suppress" and _broad([ast.unparse(a) for a in ctx.args]):
                    found.append(f"{where}: {ast.unparse(ctx)}")
        if isinstance(node, ast.ExceptHandler):
            kind = node.type
            names = (
                ["Exception"]
                if kind is None
                else [
                    ast.unparse(e) for e in (kind.elts if isinstance(kind, ast.Tuple) else [kind])
                ]
            )
            if _broad(names) and not _says_or_raises(node):
                found.append(f"{where}: except {', '.join(names)} without a word")
    return found


def test_no_product_code_swallows_an_exception_unlogged() -> None:
    sites = [
        site
        for folder in PRODUCT
        for path in sorted((ROOT / folder).rglob("*.py"))
        for site in swallowing_sites(path)
    ]
    assert not sites, (
        "log what is swallowed: `with swallowed(log, 'what corral was doing'):` "
        "(corral.supervisor.errors), or `except Exception as exc: log.info(..., exc)`:\n"
        + "\n".join(sites)
    )


def test_the_check_sees_a_silent_suppress_and_a_silent_except(tmp_path: Path) -> None:
    bad = ROOT / "build" / "swallow-probe.py"
    bad.parent.mkdir(exist_ok=True)
    bad.write_text(
        "import contextlib\n"
        "with contextlib.suppress(ValueError, Exception):\n    pass\n"
        "try:\n    pass\nexcept Exception:\n    pass\n"
        "try:\n    pass\nexcept:\n    x = None\n"
        "try:\n    pass\nexcept Exception as exc:\n    log.info('%s', exc)\n"
    )
    try:
        assert [s.split(": ", 1)[0].rsplit(":", 1)[1] for s in swallowing_sites(bad)] == [
            "2",
            "6",
            "10",
        ]
    finally:
        bad.unlink()


def test_swallowed_logs_what_it_swallowed(caplog: pytest.LogCaptureFixture) -> None:
    log = logging.getLogger("corral.test.swallowed")
    with caplog.at_level(logging.INFO, "corral.test.swallowed"), swallowed(log, "closing a pipe"):
        raise OSError("broken pipe")
    assert caplog.messages == ["closing a pipe failed, and corral carried on: OSError: broken pipe"]
    with pytest.raises(KeyboardInterrupt), swallowed(log, "never this"):
        raise KeyboardInterrupt  # not an Exception: never swallowed
