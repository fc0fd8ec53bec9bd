"""The operator's policy files: where they live and how they parse.

`~/.config/corral/policy.toml` (or under `$XDG_CONFIG_HOME`) and
`<worktree>/.corral/policies/*.toml`, read once when a session's run starts::

    [deny]
    commands = ["\\\\bcurl\\\\b", "^make deploy"]   # regexes searched in shell commands
    paths = ["secrets/", "*.pem"]                # globs (worktree-relative or absolute)
    tools = ["shell"]                            # tools the model may not use

Policy files can only narrow: an `[allow]` table is refused. A file that does
not parse fails the run before any model turn.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..errors import CorralError
from .operator_policy import OperatorPolicy, OperatorRule


def global_policy_path(env: Mapping[str, str] | None = None) -> Path:
    """The operator's global policy file: `$XDG_CONFIG_HOME/corral/policy.toml`
    (default `~/.config/corral/policy.toml`)."""
    env = os.environ if env is None else env
    xdg = env.get("XDG_CONFIG_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".config"
    return base / "corral" / "policy.toml"


def worktree_policy_files(worktree: Path) -> list[Path]:
    """The project's policy files: `<worktree>/.corral/policies/*.toml`, sorted."""
    folder = worktree / ".corral" / "policies"
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.toml") if p.is_file())


class PolicyFileError(CorralError):
    """An operator policy file that does not parse (the message names the file)."""


_DENY_KEYS = ("commands", "paths", "tools")


def _string_list(path: Path, key: str, value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PolicyFileError(f"{path}: [deny] {key} must be a list of strings")
    return list(value)


def parse_policy_file(path: Path) -> OperatorRule:
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PolicyFileError(f"{path}: {exc}") from None
    if "allow" in data:
        raise PolicyFileError(
            f"{path}: policy files can only narrow what corral allows; [allow] is not supported"
        )
    deny = data.get("deny", {})
    if not isinstance(deny, dict):
        raise PolicyFileError(f"{path}: deny must be a table ([deny])")
    unknown = sorted(set(data) - {"deny", "deny_tool"})
    if unknown:
        raise PolicyFileError(
            f"{path}: unknown key {unknown[0]!r} (expected a [deny] table with "
            "commands, paths and tools)"
        )
    unknown = sorted(set(deny) - set(_DENY_KEYS))
    if unknown:
        raise PolicyFileError(
            f"{path}: unknown key [deny] {unknown[0]!r} (expected commands, paths or tools)"
        )
    commands: list[re.Pattern[str]] = []
    for i, pattern in enumerate(_string_list(path, "commands", deny.get("commands", []))):
        try:
            commands.append(re.compile(pattern))
        except re.error as exc:
            raise PolicyFileError(
                f"{path}: [deny] commands[{i}] {pattern!r} is not a valid regular expression: {exc}"
            ) from None
    paths = _string_list(path, "paths", deny.get("paths", []))
    if any(not p.strip() for p in paths):
        raise PolicyFileError(f"{path}: [deny] paths has an empty pattern")
    tools = _string_list(path, "tools", deny.get("tools", []))
    if "deny_tool" in data:  # the discussion surface's spelling
        tools += _string_list(path, "deny_tool", data["deny_tool"])
    return OperatorRule(
        source=path, commands=tuple(commands), paths=tuple(paths), tools=frozenset(tools)
    )


def load_operator_policy(
    worktree: Path, global_file: Path | None = None, *, home: Path | None = None
) -> OperatorPolicy:
    """The global policy file (default `~/.config/corral/policy.toml`) and the
    worktree's `.corral/policies/*.toml`. Raises `PolicyFileError`."""
    global_file = global_policy_path() if global_file is None else global_file
    files: list[Path] = []
    if global_file.exists():
        if not global_file.is_file():
            raise PolicyFileError(f"{global_file}: not a file")
        files.append(global_file)
    files.extend(worktree_policy_files(worktree))
    return OperatorPolicy([parse_policy_file(f) for f in files], home=home)
