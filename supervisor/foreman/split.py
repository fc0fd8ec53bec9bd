"""The split of one task into subtasks: what each subtask is asked to do, the
files or areas it owns, and the checks that verify it on its own (contract
checks named by their name, or narrower checks of its own).

A split is proposed (by the configured model, else one subtask per contract
check) and shown at gate 1 beside the contract; the operator may replace it.
Bad input is refused whole with every problem named, so nothing half-valid
is ever stored.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from ..models import ContractCheck, OutcomeContract, Split, Subtask

MAX_SUBTASKS = 10
DEFAULT_SUBTASKS = 5
SUBTASK_ID_RE = re.compile(r"^[A-Za-z0-9_]{1,16}$")


def split_problems(split: Split, contract: OutcomeContract | None) -> list[str]:
    """Every problem with `split` at once (empty: it can run)."""
    problems: list[str] = []
    n = len(split.subtasks)
    if n == 0:
        problems.append("a split needs at least one subtask")
    if n > MAX_SUBTASKS:
        problems.append(f"a split has at most {MAX_SUBTASKS} subtasks (this one has {n})")
    names = {c.name for c in contract.checks} if contract else set()
    seen: set[str] = set()
    for i, sub in enumerate(split.subtasks, start=1):
        where = f"subtask {i} ({sub.id or 'no id'})"
        if not SUBTASK_ID_RE.match(sub.id):
            problems.append(f"{where}: the id must be 1-16 letters, numbers or underscores")
        if sub.id in seen:
            problems.append(f"{where}: the id is used twice")
        seen.add(sub.id)
        if not sub.intent.strip():
            problems.append(f"{where}: say what the subtask should do (its intent is empty)")
        if not sub.checks:
            problems.append(f"{where}: give it at least one check (a contract check's name)")
        for check in sub.checks:
            if isinstance(check, str) and contract is not None and check not in names:
                known = ", ".join(sorted(names)) or "none"
                problems.append(
                    f"{where}: {check!r} is not a check of the contract (its checks: {known})"
                )
            if isinstance(check, ContractCheck) and not check.command.strip():
                problems.append(f"{where}: check {check.name!r} has no command")
    return problems


def parse_split(data: str | dict[str, Any] | Split, contract: OutcomeContract | None) -> Split:
    """A split from JSON text, a dict or a `Split`; raises `ValueError` with
    one sentence naming every problem."""
    try:
        if isinstance(data, Split):
            split = data
        elif isinstance(data, str):
            split = Split.model_validate_json(data)
        else:
            split = Split.model_validate(data)
    except (ValidationError, ValueError) as exc:
        first = exc.errors()[0] if isinstance(exc, ValidationError) else None
        where = ".".join(str(p) for p in first["loc"]) if first else ""
        why = first["msg"] if first else str(exc)
        raise ValueError(
            f"the split is not valid JSON of the expected shape ({where}: {why}); write "
            '{"subtasks": [{"id": "s1", "intent": "…", "files": ["…"], "checks": ["<check name>"]}]}'
        ) from None
    problems = split_problems(split, contract)
    if problems:
        raise ValueError("the split cannot run: " + "; ".join(problems))
    return split


def subtask_contract(sub: Subtask, contract: OutcomeContract) -> OutcomeContract:
    """The checks that verify one subtask on its own (same setup as the
    whole). The hidden checks judge the whole union only, when the foreman
    session itself is verified: a part would fail them, and its agent must
    not hear of them."""
    by_name = {c.name: c for c in contract.checks}
    checks = [by_name[c] if isinstance(c, str) else c for c in sub.checks]
    return contract.model_copy(
        update={
            "checks": [c.model_copy() for c in checks],
            "description": sub.intent,
            "hidden_checks": [],
        }
    )


def split_per_check(intent: str, contract: OutcomeContract, most: int = DEFAULT_SUBTASKS) -> Split:
    """Without a model: one subtask per contract check (checks beyond `most`
    are shared out in turn), each told the whole task and its own part."""
    checks = [c for c in contract.checks if not c.baseline]
    groups: list[list[ContractCheck]] = [[] for _ in range(min(most, len(checks)) or 1)]
    for i, check in enumerate(checks):
        groups[i % len(groups)].append(check)
    subtasks = []
    for i, group in enumerate(g for g in groups if g):
        parts = "; ".join(f"`{c.command.strip()}` must pass" for c in group)
        subtasks.append(
            Subtask(
                id=f"s{i + 1}",
                intent=f"{intent.strip()}\n\nYour part of this task only: {parts}.",
                checks=[c.name for c in group],
            )
        )
    return Split(subtasks=subtasks, proposed_by="one per contract check")


SPLIT_PROMPT = """Split this coding task into at most {most} independent subtasks that
separate agents can do in parallel, each in its own copy of the repository.
Each subtask owns distinct files, so their changes merge cleanly.

Task: {intent}

Contract checks (name: command):
{checks}

Top-level entries of the repository: {entries}

Reply with JSON only:
{{"subtasks": [{{"id": "s1", "intent": "what this agent must do",
  "files": ["paths it owns"], "checks": ["names of the contract checks that verify it"]}}]}}
"""


def split_prompt(intent: str, contract: OutcomeContract, entries: list[str], most: int) -> str:
    checks = "\n".join(f"- {c.name}: {c.command.strip()}" for c in contract.checks)
    return SPLIT_PROMPT.format(
        most=most, intent=intent.strip(), checks=checks, entries=", ".join(entries[:60])
    )


def split_from_reply(text: str, contract: OutcomeContract, model: str) -> Split:
    """The model's reply as a split; raises `ValueError` saying what was wrong."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        raise ValueError("the model's reply held no JSON")
    try:
        data = json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise ValueError(f"the model's reply is not JSON ({exc.msg})") from None
    if isinstance(data, dict):
        data["proposed_by"] = f"model {model}"
    return parse_split(data, contract)
