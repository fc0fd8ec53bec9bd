"""Every dependency corral declares earns its place: some module of the
product imports it. A dependency nothing imports is weight every user
installs (and a version every user can conflict with) for no behaviour; it
is dropped with its reason in pyproject.toml instead."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("supervisor", "tui", "corral", "assets")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*")


def _declared() -> list[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    names = []
    for spec in data["project"]["dependencies"]:
        m = _NAME.match(spec)
        assert m, spec
        names.append(m.group(0))
    return names


def _imported_top_levels() -> set[str]:
    found: set[str] = set()
    for folder in PRODUCT:
        for path in (ROOT / folder).rglob("*.py"):
            tree = ast.parse(path.read_bytes(), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    found.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.add(node.module.split(".")[0])
    return found


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_declared_dependency_is_imported_by_the_product() -> None:
    provides: dict[str, set[str]] = {}
    for module, dists in importlib.metadata.packages_distributions().items():
        for dist in dists:
            provides.setdefault(_normal(dist), set()).add(module)
    imported = _imported_top_levels()
    unused = []
    for dist in _declared():
        modules = provides.get(_normal(dist))
        assert modules, f"{dist} is declared but not installed: run make install"
        if not modules & imported:
            unused.append(f"{dist} (provides {', '.join(sorted(modules))})")
    assert not unused, (
        "declared in pyproject.toml but imported by no product module: "
        + "; ".join(unused)
        + " — use it, or drop it and say why beside the dependency list"
    )
