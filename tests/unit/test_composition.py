"""The supervisor is composed, not stacked: no class mixes behaviour from
several bases, and the session and gate services reach each other only
through public methods. A service that calls `self._x` defined elsewhere (the
old mixin stack did) or `other._x` of another module's object fails here."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import textwrap
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from typing import Generic, Protocol

import corral.supervisor

ROOT = Path(corral.supervisor.__file__).parent
SERVICE_FILES = sorted(
    [*(ROOT / "session").glob("*.py"), *(ROOT / "gates").glob("*.py"), ROOT / "api.py"]
)


# --- one behavioural base at most ------------------------------------------------------


def _supervisor_classes() -> Iterator[type]:
    for info in pkgutil.walk_packages(corral.supervisor.__path__, "corral.supervisor."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__:
                yield cls


def _behavioural_bases(cls: type) -> list[type]:
    """Bases that bring behaviour: not object, Protocols, Generic, exceptions or enums."""
    return [
        base
        for base in cls.__bases__
        if base not in (object, Generic, Protocol)
        and not getattr(base, "_is_protocol", False)
        and not issubclass(base, (BaseException, Enum))
    ]


def test_no_supervisor_class_inherits_from_more_than_one_behavioural_base() -> None:
    classes = list(_supervisor_classes())
    assert len(classes) > 100, "the walk should see every supervisor module"
    stacked = {
        f"{cls.__module__}.{cls.__qualname__}": [b.__name__ for b in _behavioural_bases(cls)]
        for cls in classes
        if len(_behavioural_bases(cls)) > 1
    }
    assert stacked == {}


def test_the_base_check_sees_a_mixin_stack() -> None:
    class Core: ...

    class Gate(Core): ...

    class Loop(Core): ...

    class Stacked(Gate, Loop): ...

    class Failure(KeyError, ValueError): ...

    assert [b.__name__ for b in _behavioural_bases(Stacked)] == ["Gate", "Loop"]
    assert _behavioural_bases(Failure) == []


# --- private names stay with their owner -----------------------------------------------


def _is_private(name: str) -> bool:
    """`_x`, but not `__x__` nor an enum's `_value_`-style names (public API)."""
    return name.startswith("_") and not name.endswith("_")


def _defined_in(node: ast.AST) -> set[str]:
    """Private names a class (or module) defines: methods, class attributes,
    `__slots__` entries and `self._x = ...` assignments."""
    names: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(sub.name)
        elif isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store):
            names.add(sub.attr)
        elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            names.add(sub.id)
        elif isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name):
            names.add(sub.target.id)
        elif (
            isinstance(sub, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in sub.targets)
            and isinstance(sub.value, ast.Tuple | ast.List)
        ):
            names.update(
                e.value
                for e in sub.value.elts
                if isinstance(e, ast.Constant) and isinstance(e.value, str)
            )
    return {n for n in names if _is_private(n)}


def private_reaches(source: str) -> tuple[list[str], int]:
    """Every `self._x` that its class does not define and every `other._x` that
    no class of the module defines; plus how many private accesses were checked."""
    tree = ast.parse(source)
    module_names = _defined_in(tree)
    problems: list[str] = []
    checked = 0

    def visit(node: ast.AST, own: set[str] | None) -> None:
        nonlocal checked
        if isinstance(node, ast.ClassDef):
            own = _defined_in(node)
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            checked += 1
            value = node.value
            if isinstance(value, ast.Name) and value.id in ("self", "cls"):
                if own is None or node.attr not in own:
                    problems.append(f"line {node.lineno}: {value.id}.{node.attr}")
            elif node.attr not in module_names:
                problems.append(f"line {node.lineno}: {ast.unparse(value)}.{node.attr}")
        for child in ast.iter_child_nodes(node):
            visit(child, own)

    visit(tree, None)
    return problems, checked


def test_services_reach_each_other_only_through_public_methods() -> None:
    assert len(SERVICE_FILES) >= 12, "the session and gates rooms should be scanned"
    found: dict[str, list[str]] = {}
    checked = 0
    for path in SERVICE_FILES:
        problems, n = private_reaches(path.read_text(encoding="utf-8"))
        checked += n
        if problems:
            found[str(path.relative_to(ROOT))] = problems
    assert checked > 100, "the services use private state; the check must have seen it"
    assert found == {}


def test_the_private_check_sees_the_old_mixin_calls() -> None:
    mixin = textwrap.dedent(
        """
        class Approval(SupervisorCore):
            async def reverify(self, sid):
                entry = self._entry(sid)
                await self._verify(entry)
        """
    )
    reach = textwrap.dedent(
        """
        class ApprovalGate:
            def __init__(self, run_loop):
                self._run_loop = run_loop

            def hand_on(self, live):
                self._run_loop._run(live)
        """
    )
    friends = textwrap.dedent(
        """
        class Mailbox:
            def __init__(self):
                self._items = []

        class Feed:
            def offer(self, box, item):
                box._items.append(item)
        """
    )
    assert private_reaches(mixin)[0] == ["line 4: self._entry", "line 5: self._verify"]
    assert private_reaches(reach)[0] == ["line 7: self._run_loop._run"]
    assert private_reaches(friends)[0] == []
