"""Which modules a project's tests import that the drafted setup installs
by name: never one with a fallback the tests import instead."""

from __future__ import annotations

from pathlib import Path

from corral.supervisor.contracts.test_imports import undeclared_imports


def _tests(tmp_path: Path, source: str) -> list[Path]:
    test = tmp_path / "tests" / "test_x.py"
    test.parent.mkdir()
    test.write_text(source, encoding="utf-8")
    return [test]


def test_an_import_with_a_fallback_import_is_not_installed(tmp_path: Path) -> None:
    files = _tests(
        tmp_path,
        "try:\n    from thread import get_ident\n    import simplejson as json\n"
        "except ImportError:\n    from _thread import get_ident\n    import json\n",
    )
    assert undeclared_imports(tmp_path, files) == []


def test_an_optional_import_without_a_fallback_is_still_installed(tmp_path: Path) -> None:
    # the suite needs it at import time: `hypothesmith = None` is no fallback
    files = _tests(
        tmp_path,
        "try:\n    import hypothesmith\nexcept ImportError:\n    hypothesmith = None\n"
        "import attr\n",
    )
    assert undeclared_imports(tmp_path, files) == ["attr", "hypothesmith"]
