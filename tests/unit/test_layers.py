"""The console's import contract cannot go stale.

corral.tui may import only the supervisor's public modules (`[tool.corral]
supervisor_public_modules` in pyproject.toml); an import-linter contract forbids
every other top-level module and subpackage of corral.supervisor. A module added
to `supervisor/` is in neither list until someone decides: these tests fail,
and their message prints both lists regenerated from the folder.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = "the console and the command line use only the supervisor's public modules"
PREFIX = "corral.supervisor."


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def public_modules() -> set[str]:
    return set(_pyproject()["tool"]["corral"]["supervisor_public_modules"])


def forbidden_modules() -> set[str]:
    contracts = _pyproject()["tool"]["importlinter"]["contracts"]
    contract = next(c for c in contracts if c["name"] == CONTRACT)
    assert contract["source_modules"] == ["corral.tui"]
    names = set()
    for module in contract["forbidden_modules"]:
        assert module.startswith(PREFIX) and "." not in module.removeprefix(PREFIX), (
            f"{module}: list top-level modules and subpackages of corral.supervisor only"
        )
        names.add(module.removeprefix(PREFIX))
    return names


def supervisor_modules() -> set[str]:
    """Top-level modules and subpackages of `supervisor/` as they are now."""
    folder = ROOT / "supervisor"
    modules = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    packages = {p.name for p in folder.iterdir() if (p / "__init__.py").is_file()}
    return modules | packages


def _regenerated(public: set[str]) -> str:
    forbidden = sorted(supervisor_modules() - public)
    lines = "\n".join(f'  "{PREFIX}{name}",' for name in forbidden)
    return (
        f"\npublic now: {sorted(public & supervisor_modules())}\n"
        f"the contract's forbidden_modules, regenerated:\n[\n{lines}\n]"
    )


def test_every_supervisor_module_is_public_or_forbidden_to_the_console() -> None:
    public, forbidden, present = public_modules(), forbidden_modules(), supervisor_modules()
    undecided = present - public - forbidden
    assert not undecided, (
        f"supervisor modules neither public nor forbidden to corral.tui: {sorted(undecided)}; "
        "add each to supervisor_public_modules (on purpose) or to the contract"
        + _regenerated(public)
    )


def test_the_lists_name_only_modules_that_exist_and_never_both() -> None:
    public, forbidden, present = public_modules(), forbidden_modules(), supervisor_modules()
    assert not public & forbidden, f"both public and forbidden: {sorted(public & forbidden)}"
    gone = (public | forbidden) - present
    assert not gone, f"listed but not in supervisor/: {sorted(gone)}" + _regenerated(public)


def _supervisor_imports(path: Path) -> set[str]:
    """The corral.supervisor top-level names a file imports (anywhere in it)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
            if node.module == "corral.supervisor":
                names = [f"{PREFIX}{alias.name}" for alias in node.names]
        else:
            continue
        found |= {n.removeprefix(PREFIX).split(".")[0] for n in names if n.startswith(PREFIX)}
    return found


def test_the_console_imports_only_public_modules() -> None:
    """What the contract checks in `make lint`, without the installed view."""
    public = public_modules()
    offenders = {
        str(path.relative_to(ROOT)): sorted(_supervisor_imports(path) - public)
        for path in sorted((ROOT / "tui").rglob("*.py"))
    }
    assert not {k: v for k, v in offenders.items() if v}


FLOORS = "the supervisor's floors: an import goes down, or sideways to a room listed before it"


def test_every_supervisor_module_has_a_floor() -> None:
    """The floors contract names each top-level module and subpackage once: a
    room it does not list is not checked at all."""
    contracts = _pyproject()["tool"]["importlinter"]["contracts"]
    contract = next(c for c in contracts if c["name"] == FLOORS)
    assert contract["type"] == "layers" and contract["containers"] == ["corral.supervisor"]
    listed = [name for layer in contract["layers"] for name in layer.replace(":", "|").split("|")]
    listed = [name.strip() for name in listed]
    assert len(listed) == len(set(listed)), "a room is listed twice in the floors contract"
    present = supervisor_modules()
    assert set(listed) == present, (
        f"missing from the floors contract: {sorted(present - set(listed))}; "
        f"listed but not in supervisor/: {sorted(set(listed) - present)} "
        "(place each at its floor, as docs/architecture.md section 2 says)"
    )
