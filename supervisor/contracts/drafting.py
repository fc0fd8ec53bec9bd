"""The drafter seam: something that turns an intent into a contract and
revises it on request. Scripted drafters (tests, demo), the conventions lane
and model drafters all plug in here."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..errors import CorralError
from ..models import CHECK_NAME_RE, ContractCheck, JudgeFile, OutcomeContract

MAX_REVISION_BYTES = 16 * 1024


@dataclass
class DraftRequest:
    session_id: str
    intent: str
    repo: Path
    worktree: Path | None
    constraints: list[str] = field(default_factory=list)
    # The session's pinned model (a configured model's name), kept strictly
    # through drafting, revision and every repair; None: the default order.
    model: str | None = None
    # Hooks of the session a model drafter reports to (`llm.chain`): each
    # hop between models, a pinned model's rejected key (waits for a fix),
    # and the ledger of which models served and what they used.
    on_hop: Callable[[Any], None] | None = None
    auth_wait: Callable[[str, str], Awaitable[None]] | None = None
    ledger: Any = None


@dataclass
class ReviseRequest(DraftRequest):
    prior: OutcomeContract | None = None
    request: str = ""


#: How to continue when nothing in the repository says how to check the work.
GIVE_CHECKS = (
    'say how to check the work: `corral run --check "CMD"` (repeatable) or '
    "`--contract FILE`; in the console, /check name command"
)


class DraftingError(CorralError):
    """The drafter could not produce a contract. `auth` marks a rejected
    credential, which the operator fixes by signing in; `no_checks` marks a
    repository where nothing says how to check the work, which the operator
    fixes by giving the checks (`GIVE_CHECKS`)."""

    def __init__(self, message: str, *, auth: bool = False, no_checks: bool = False) -> None:
        super().__init__(message)
        self.auth = auth
        self.no_checks = no_checks


class ContractDrafter(Protocol):
    @property
    def name(self) -> str: ...

    async def draft(self, request: DraftRequest) -> OutcomeContract: ...

    async def revise(self, request: ReviseRequest) -> OutcomeContract: ...


class DrafterOnFirstUse:
    """A drafter built when it is first asked for something (its name, a
    draft, a revision). The model drafter and the conventions lane are large
    modules; an owner that drafts no contract never loads them."""

    def __init__(self, build: Callable[[], ContractDrafter]) -> None:
        self._build = build
        self._drafter: ContractDrafter | None = None

    @property
    def drafter(self) -> ContractDrafter:
        if self._drafter is None:
            self._drafter = self._build()
        return self._drafter

    @property
    def name(self) -> str:
        return self.drafter.name

    async def draft(self, request: DraftRequest) -> OutcomeContract:
        return await self.drafter.draft(request)

    async def revise(self, request: ReviseRequest) -> OutcomeContract:
        return await self.drafter.revise(request)


_CHECK_CMD = re.compile(r"^/check(?:\s+(\S+))?(?:\s(.*))?$", re.DOTALL)


def apply_remove(prior: OutcomeContract, request: str) -> OutcomeContract:
    """`/remove name`: drop a check (the model is never called)."""
    name = request[len("/remove") :].strip()
    if name and any(h.name == name for h in prior.hidden_checks):  # a hidden check too
        kept = [h for h in prior.hidden_checks if h.name != name]
        return prior.model_copy(update={"hidden_checks": kept})
    if not name or not any(c.name == name for c in prior.checks):
        known = ", ".join([c.name for c in prior.checks] + [h.name for h in prior.hidden_checks])
        raise CorralError(f"Use /remove name with one of: {known}.")
    return prior.model_copy(update={"checks": [c for c in prior.checks if c.name != name]})


def apply_judge_edit(prior: OutcomeContract, request: str) -> OutcomeContract:
    """`/judge PATH`: a file that judges the work besides the ones found;
    `/not-judge PATH`: a path (or folder) that does not (model never called)."""
    command, _, rest = request.partition(" ")
    path = rest.strip().removeprefix("./").strip("/")
    if not path or command not in ("/judge", "/not-judge"):
        raise CorralError("Use /judge PATH or /not-judge PATH (a repo-relative path or folder).")
    if command == "/judge":
        judged = [f for f in prior.judge_files if not (f.path == path and f.section is None)]
        return prior.model_copy(
            update={
                "judge_files": [*judged, JudgeFile(path=path, why="named by the operator")],
                "not_judged": [p for p in prior.not_judged if p != path],
            }
        )
    kept = [f for f in prior.judge_files if f.path != path and not f.path.startswith(path + "/")]
    not_judged = [*prior.not_judged, path] if path not in prior.not_judged else prior.not_judged
    return prior.model_copy(update={"judge_files": kept, "not_judged": not_judged})


def apply_setup_edit(prior: OutcomeContract, request: str) -> OutcomeContract:
    """`/setup command`: set the setup verbatim (one command per line; the
    model is never called). `/setup` alone removes the setup."""
    body = request[len("/setup") :]
    if body[:1] and not body[:1].isspace():
        raise CorralError("Use /setup command (or /setup alone to remove the setup).")
    commands = [line.strip() for line in body.strip().splitlines() if line.strip()]
    return prior.model_copy(update={"setup": commands})


def apply_check_edit(prior: OutcomeContract, request: str) -> OutcomeContract:
    """`/check name command`: set a check's command verbatim (model never called).

    An existing name keeps its timeout, assertions and capture settings; a new
    name is appended with defaults. The command keeps trailing newlines.
    """
    body = request[len("/check") :]
    if not body.strip() or not body[:1].isspace():
        raise CorralError("Use /check name command to set a verification command verbatim.")
    body = body.lstrip()
    name, _, command = body.partition(" ")
    if "\n" in name:
        name, _, rest = name.partition("\n")
        command = rest if not command else rest + " " + command
    if not CHECK_NAME_RE.match(name):
        raise CorralError(
            "Use /check name command; the name must contain only letters, numbers, or underscores."
        )
    if not command.strip():
        raise CorralError("Use /check name command to set a verification command verbatim.")
    if command.lstrip().startswith("-"):
        # `/check python3 -c …` would make a check named `python3` running `-c …`, which no
        # shell can run: the operator left out the name, so say so instead of baselining it.
        raise CorralError(
            f"Use /check name command: `{name}` would be the check's name and "
            f"`{command.strip()[:40]}` its command; give the check a name first, "
            f"e.g. /check my_check {name} {command.strip()[:40]}"
        )
    checks = [c.model_copy() for c in prior.checks]
    for i, check in enumerate(checks):
        if check.name == name:
            checks[i] = check.model_copy(update={"command": command})
            break
    else:
        checks.append(ContractCheck(name=name, command=command))
    return prior.model_copy(update={"checks": checks})


class FixedDrafter:
    """Serves a contract the operator wrote (`corral run --contract FILE`)."""

    name = "contract file"

    def __init__(self, contract: OutcomeContract) -> None:
        self.contract = contract

    async def draft(self, request: DraftRequest) -> OutcomeContract:
        return self.contract.model_copy(deep=True)

    async def revise(self, request: ReviseRequest) -> OutcomeContract:
        raise DraftingError(
            "free-text revision needs a model; configure one (see `corral doctor`) or use "
            "/check name command"
        )


class GivenSetup:
    """A drafter whose contracts carry the setup the operator gave: `corral
    run --setup CMD` (repeatable) in place of the drafted one, `--no-setup`
    for none, `--setup-add CMD` after it. The headless way to fix a setup
    that cannot install the checks' tools, where the console has /setup."""

    def __init__(
        self, drafter: ContractDrafter, setup: list[str] | None, add: list[str] | None = None
    ) -> None:
        self.drafter = drafter
        self.setup = list(setup) if setup is not None else None
        self.add = list(add or [])

    @property
    def name(self) -> str:
        return self.drafter.name

    def _given(self, contract: OutcomeContract) -> OutcomeContract:
        return with_given_setup(contract, self.setup, self.add)

    async def draft(self, request: DraftRequest) -> OutcomeContract:
        return self._given(await self.drafter.draft(request))

    async def revise(self, request: ReviseRequest) -> OutcomeContract:
        return self._given(await self.drafter.revise(request))


def with_given_setup(
    contract: OutcomeContract, setup: list[str] | None, add: list[str] | None = None
) -> OutcomeContract:
    """`contract` with the setup given on the command line (`setup` in
    place of its own, None: its own kept) and `add` after it, said in its
    description."""
    if setup is None and not add:
        return contract
    commands = list(contract.setup if setup is None else setup) + list(add or [])
    if setup is not None:
        said = "Setup: the commands given with --setup." if setup else "No setup (--no-setup)."
    else:
        said = ""
    if add:
        said = (
            (said + " " if said else "") + "Setup lines added with --setup-add: " + "; ".join(add)
        )
    description = f"{contract.description}\n{said}" if contract.description else said
    return contract.model_copy(update={"setup": commands, "description": description})
