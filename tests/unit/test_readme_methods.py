"""README's table of the owner's methods is generated from the `Call`
records, the one statement of each method: a record added, renamed or given
other callers without the README following fails here.
`CORRAL_WRITE_README=1` writes the table into README.md instead."""

from __future__ import annotations

import os
import re
from pathlib import Path

from corral.supervisor.control.surface import method_table

README = Path(__file__).resolve().parents[2] / "README.md"
_BLOCK = re.compile(r"(<!-- methods:start[^\n]*-->\n)(.*?)(<!-- methods:end -->)", re.S)


def test_the_readme_method_table_is_the_records() -> None:
    text = README.read_text()
    m = _BLOCK.search(text)
    assert m, "README.md has no <!-- methods:start --> … <!-- methods:end --> block"
    table = method_table() + "\n"
    if os.environ.get("CORRAL_WRITE_README") and m.group(2) != table:
        README.write_text(text[: m.start(2)] + table + text[m.end(2) :])
        return
    assert m.group(2) == table, (
        "README.md's method table differs from control/surface.py's records: "
        "run CORRAL_WRITE_README=1 pytest tests/unit/test_readme_methods.py"
    )
