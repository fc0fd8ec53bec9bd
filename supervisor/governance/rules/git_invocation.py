"""Git's global options (`-C`, `--git-dir`, `-c key=value`, ...) set aside to
find the subcommand; the rule families that read git commands share this."""

from __future__ import annotations

from collections.abc import Sequence

from ..shell_scan import ShellScan, outside_sentence

_GIT_VALUE_OPTIONS = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env"}
)


def split_git(args: Sequence[str], scan: ShellScan) -> tuple[str | None, list[str], str | None]:
    """(subcommand, its arguments, a reason to deny) after git's global options."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        option = args[i]
        name, _, inline = option.partition("=")
        value: str | None = inline or None
        i += 1
        if name in _GIT_VALUE_OPTIONS and not inline:
            value = args[i] if i < len(args) else None
            i += 1
        if name in ("-C", "--git-dir", "--work-tree") and value is not None:
            path = scan.outside(value)
            if path is not None:
                return None, [], outside_sentence("runs git in", path)
    if i >= len(args):
        return None, [], None
    return args[i], list(args[i + 1 :]), None
