"""Contracts as JSON files (`corral run --contract FILE`, the console's export).

Shape: {"description": ..., "checks": [{"name", "command", "timeout_secs",
"output_contains"?, "expect_exit_zero"?, "baseline"?, "differential"?}],
"hidden_checks"?: [{"name", "command", "timeout_secs"?, "files": [{"path",
"content" | "source"}]}]}. A hidden file's `source` (relative to the
contract file) is read when the file is loaded; the owner stores the content
in its state dir and keeps only its sha256 (`contracts.hidden`).
Every problem is reported at once, with the file's name.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from ..errors import CorralError
from ..models import ContractCheck, OutcomeContract


def _read_hidden_sources(data: object, base: Path | None, source: str) -> None:
    """Each hidden file's `source` read into its `content`, in place."""
    if not isinstance(data, dict) or not isinstance(data.get("hidden_checks"), list):
        return
    for check in data["hidden_checks"]:
        files = check.get("files") if isinstance(check, dict) else None
        for file in files if isinstance(files, list) else []:
            if not isinstance(file, dict) or "source" not in file:
                continue
            given = Path(str(file.pop("source"))).expanduser()
            path = given if given.is_absolute() or base is None else base / given
            try:
                file["content"] = path.read_text(encoding="utf-8")
            except FileNotFoundError:
                raise CorralError(
                    f"{source}: the hidden file {str(given)!r} does not exist"
                ) from None
            except (OSError, UnicodeDecodeError) as exc:
                raise CorralError(
                    f"{source}: cannot read the hidden file {str(given)!r} as text ({exc})"
                ) from None


def parse_contract(
    text: str, *, source: str = "contract", base: Path | None = None
) -> OutcomeContract:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CorralError(
            f"{source}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from exc
    _read_hidden_sources(data, base, source)
    try:
        contract = OutcomeContract.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'top level'}: {e['msg']}" for e in exc.errors()
        )
        raise CorralError(f"{source}: {problems}") from exc
    invalid = contract.validate_contract()
    if invalid:
        raise CorralError(f"{source}: " + "; ".join(invalid))
    return contract


def load_contract(path: Path) -> OutcomeContract:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CorralError(f"{path}: no such contract file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CorralError(f"{path}: cannot read it ({exc})") from exc
    return parse_contract(text, source=str(path), base=path.parent)


def _word(command: str) -> str:
    """The program a command runs, as a check name may hold it."""
    program = command.split()[0].rsplit("/", 1)[-1]
    return "".join(ch if ch.isalnum() else "_" for ch in program)[:40] or "cmd"


def checks_contract(
    commands: list[str], *, setup: list[str] | None = None, root: Path | None = None
) -> OutcomeContract:
    """A contract made of shell commands given on the command line (`--check`):
    each must exit 0; named by its position and first word.

    The checks replace the drafted ones, not the setup: with `root` (the
    repository) and no `setup`, the setup is the one drafting proposes there
    (a `pytest` check needs the project installed as much as a drafted one
    does); `setup` (`--setup`, repeatable; empty for none) replaces it."""
    if not commands or any(not c.strip() for c in commands):
        raise CorralError("--check needs a shell command (e.g. --check 'pytest -q')")
    checks = [
        ContractCheck(name=f"check_{i}_{_word(c)}", command=c) for i, c in enumerate(commands, 1)
    ]
    description = "the checks given with --check"
    if setup is not None:
        commands_setup = given_setup(setup)
        if commands_setup:
            description += "\nSetup: the commands given with --setup."
    elif root is not None:
        from .conventions import drafted_setup  # the drafting lane loads only here

        proposal = drafted_setup(root)
        commands_setup = proposal.commands
        if commands_setup:
            description += (
                "\nSetup drafted from the repository (--setup CMD replaces it; --no-setup "
                "drops it): " + "; ".join(proposal.notes)
            )
    else:
        commands_setup = []
    return OutcomeContract(description=description, checks=checks, setup=commands_setup)


def given_setup(commands: list[str]) -> list[str]:
    """The setup commands given with `--setup` (one each), checked."""
    if any(not c.strip() for c in commands):
        raise CorralError("--setup needs a shell command (e.g. --setup 'pip install -e .')")
    return [c.strip() for c in commands]


def dump_contract(contract: OutcomeContract) -> str:
    return contract.model_dump_json(indent=2, exclude_defaults=False) + "\n"


def save_contract(contract: OutcomeContract, path: Path) -> None:
    path.write_text(dump_contract(contract), encoding="utf-8")
