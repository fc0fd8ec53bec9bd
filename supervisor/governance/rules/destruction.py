"""Nothing destructive outside the worktree: removing, moving, changing or
writing files outside it (the temp dir and `/dev/null` excepted for writes),
acting on devices, services or the machine, killing processes by name, and
git commands that change other worktrees or the global configuration."""

from __future__ import annotations

from ..shell_scan import DEV_SINKS, ShellScan, outside_sentence
from ..shell_words import positional_args
from .credentials import NO_CREDENTIALS
from .git_invocation import split_git

_REMOVERS = frozenset({"rm", "rmdir", "shred", "unlink", "truncate", "srm", "wipe"})
_MODE_CHANGERS = frozenset({"chmod", "chown", "chgrp", "chattr", "setfacl"})
_WRITERS_TO_LAST = frozenset({"cp", "install", "ln", "rsync"})
_DEVICE_TOOLS = frozenset(
    {
        "mkswap",
        "swapoff",
        "fdisk",
        "sfdisk",
        "gdisk",
        "parted",
        "wipefs",
        "blkdiscard",
        "shutdown",
        "reboot",
        "halt",
        "poweroff",
    }
)
_SYSTEMCTL_READ = frozenset(
    {"status", "show", "cat", "list-units", "list-unit-files", "is-active", "is-enabled"}
)


def deny_destruction(prog: str, args: list[str], scan: ShellScan) -> str | None:
    """Why the command destroys or changes something outside the worktree (None when not)."""
    positionals = positional_args(args)
    if prog.startswith("mkfs") or prog in _DEVICE_TOOLS:
        return f"`{prog}` acts on the machine, not the worktree; it is never allowed"
    if prog in ("systemctl", "service"):
        verb = positionals[-1] if prog == "service" and len(positionals) > 1 else ""
        verb = verb or (positionals[0] if positionals else "")
        if verb and verb not in _SYSTEMCTL_READ:
            return f"`{prog} {verb}` changes system services; it is never allowed"
        return None
    if prog in ("pkill", "killall", "killall5"):
        return f"`{prog}` can kill processes the operator (or corral) is running; kill by pid"
    if prog == "kill" and args and args[-1] == "-1":
        return "`kill -1` signals every process of the user; kill by pid"
    if prog in _REMOVERS:
        for target in positionals:
            path = scan.outside(target)
            if path is not None:
                return outside_sentence(f"`{prog}` removes", path)
        return None
    if prog in _MODE_CHANGERS:
        for target in positionals[1:]:
            path = scan.outside(target)
            if path is not None:
                return outside_sentence(f"`{prog}` changes", path)
        return None
    if prog == "mv":
        for target in positionals:
            path = scan.outside(target, scratch_ok=True)
            if path is not None:
                return outside_sentence("`mv` moves", path)
        return None
    if prog in _WRITERS_TO_LAST and len(positionals) >= 2:
        path = scan.outside(positionals[-1], scratch_ok=True)
        if path is not None:
            return outside_sentence(f"`{prog}` writes", path)
        return None
    if prog == "tee":
        for target in positionals:
            path = scan.outside(target, scratch_ok=True)
            if path is not None:
                return outside_sentence("`tee` writes", path)
        return None
    if prog == "dd":
        for arg in args:
            if arg.startswith("of="):
                target = arg[3:]
                if target.startswith("/dev/") and target not in DEV_SINKS:
                    return f"`dd of={target}` writes a device; it is never allowed"
                path = scan.outside(target, scratch_ok=True)
                if path is not None:
                    return outside_sentence("`dd` writes", path)
        return None
    if prog == "find" and ("-delete" in args):
        for start in args:
            if start.startswith(("-", "(", "!")):
                break
            path = scan.outside(start)
            if path is not None:
                return outside_sentence("`find -delete` removes files under", path)
        return None
    if prog == "git":
        sub, rest, reason = split_git(args, scan)
        if reason:
            return reason
        if sub == "worktree" and rest[:1] and rest[0] != "list":
            return (
                f"`git worktree {rest[0]}` changes other worktrees of this repository; "
                "corral manages worktrees itself"
            )
        if sub == "config" and {"--global", "--system"} & set(rest):
            reads = {"--get", "--get-all", "--get-regexp", "--list", "-l", "get", "list"}
            if not reads & set(rest):
                return (
                    "`git config --global/--system` writes configuration outside this worktree; "
                    "use `git -c key=value` for one command instead"
                )
        if sub in ("credential", "credential-store", "credential-cache"):
            return f"`git {sub}` reads credentials: {NO_CREDENTIALS}"
    return None
