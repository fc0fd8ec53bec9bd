"""No rewriting of shared history: the engine works on its worktree's
detached HEAD and never moves, deletes or force-creates branches and tags,
rewrites history or expires reflogs."""

from __future__ import annotations

from ..shell_scan import ShellScan
from ..shell_words import option_flags, positional_args
from .git_invocation import split_git

_NO_HISTORY = (
    "the engine works on this worktree's detached HEAD only and never rewrites branches, "
    "tags or reflogs"
)


def deny_history_rewrite(prog: str, args: list[str], scan: ShellScan) -> str | None:
    """Why the git command rewrites shared history (None when it does not)."""
    if prog not in ("git", "git-filter-repo"):
        return None
    if prog == "git-filter-repo":
        return f"`git filter-repo` rewrites history: {_NO_HISTORY}"
    sub, rest, _reason = split_git(args, scan)
    if sub is None:
        return None
    longs, shorts = option_flags(rest)
    positionals = positional_args(rest)
    if sub in ("filter-branch", "filter-repo"):
        return f"`git {sub}` rewrites history: {_NO_HISTORY}"
    if sub == "reflog" and positionals[:1] and positionals[0] in ("expire", "delete"):
        return f"`git reflog {positionals[0]}` discards history: {_NO_HISTORY}"
    if sub == "update-ref":
        words = [a for i, a in enumerate(rest) if i == 0 or rest[i - 1] != "-m"]
        refs = positional_args([a for a in words if a != "-m"])
        if "--stdin" in longs or not refs or refs[0] != "HEAD":
            ref = refs[0] if refs else "refs from stdin"
            return f"`git update-ref {ref}` moves a shared ref: {_NO_HISTORY}"
    if sub == "branch" and (
        {"--delete", "--force", "--move", "--copy"} & longs or set("DdfmMC") & shorts
    ):
        return f"`git branch {' '.join(rest)}` deletes, moves or forces a branch: {_NO_HISTORY}"
    if sub == "tag" and ({"--delete", "--force"} & longs or set("df") & shorts):
        return f"`git tag {' '.join(rest)}` deletes or moves a tag: {_NO_HISTORY}"
    if sub in ("checkout", "switch") and ("--force-create" in longs or set("BC") & shorts):
        return f"`git {sub} -B/-C` force-moves a branch: {_NO_HISTORY}"
    if sub == "rebase":
        values: list[str] = []
        skip = False
        for arg in rest:
            if skip:
                skip = False
                continue
            if arg in ("--onto", "-s", "--strategy", "-X", "--strategy-option", "-x", "--exec"):
                skip = True
                continue
            if not arg.startswith("-"):
                values.append(arg)
        if len(values) >= 2 or "--update-refs" in longs:
            return f"`git rebase {' '.join(rest)}` rewrites another branch: {_NO_HISTORY}"
    return None
