"""No remote mutation or publication: corral delivers the work itself once
the operator approves the diff, so the engine never pushes, publishes,
releases or opens pull requests (git, gh, package registries, image
registries, copies to other machines)."""

from __future__ import annotations

import re

from ..shell_scan import ShellScan
from ..shell_words import option_flags, positional_args
from .git_invocation import split_git

_NO_PUBLISH = (
    "corral delivers the work itself after the operator approves the diff; do not push, "
    "publish, release or open pull requests"
)
_GH_GROUPS = frozenset(
    {
        "pr",
        "issue",
        "release",
        "repo",
        "gist",
        "workflow",
        "run",
        "secret",
        "variable",
        "label",
        "project",
        "cache",
        "ruleset",
        "codespace",
        "ssh-key",
        "gpg-key",
        "org",
        "extension",
    }
)
_GH_READ = frozenset({"view", "list", "ls", "status", "diff", "checks", "download", "watch"})
_PUBLISHERS: dict[str, frozenset[str]] = {
    "npm": frozenset({"publish", "unpublish", "deprecate", "adduser", "login", "owner", "token"}),
    "pnpm": frozenset({"publish"}),
    "yarn": frozenset({"publish"}),
    "bun": frozenset({"publish"}),
    "twine": frozenset({"upload", "register"}),
    "cargo": frozenset({"publish", "yank", "owner", "login"}),
    "docker": frozenset({"push", "login"}),
    "podman": frozenset({"push", "login"}),
    "buildah": frozenset({"push"}),
    "poetry": frozenset({"publish"}),
    "flit": frozenset({"publish"}),
    "hatch": frozenset({"publish"}),
    "uv": frozenset({"publish"}),
    "pdm": frozenset({"publish"}),
    "maturin": frozenset({"publish", "upload"}),
    "gem": frozenset({"push", "yank", "owner", "signin"}),
    "mvn": frozenset({"deploy"}),
    "helm": frozenset({"push"}),
    "vsce": frozenset({"publish"}),
    "ovsx": frozenset({"publish"}),
}


def deny_publication(prog: str, args: list[str], scan: ShellScan) -> str | None:
    """Why the command pushes, publishes or changes something remote (None when it does not)."""
    if prog == "git":
        sub, rest, reason = split_git(args, scan)
        if reason:
            return reason
        if sub == "push":
            longs, shorts = option_flags(rest)
            forced = "--force" in longs or "--force-with-lease" in longs or "f" in shorts
            what = "`git push --force` (a rewrite of remote history)" if forced else "`git push`"
            return f"{what} is not allowed: {_NO_PUBLISH}"
        if sub == "remote" and rest[:1] and rest[0] in ("add", "set-url", "rename", "remove", "rm"):
            return f"`git remote {rest[0]}` changes where this repository publishes: {_NO_PUBLISH}"
        if sub == "send-email":
            return f"`git send-email` publishes patches: {_NO_PUBLISH}"
        return None
    if prog == "gh":
        sub = args[0] if args else ""
        rest = args[1:]
        if sub == "api":
            method = None
            for i, arg in enumerate(rest):
                if arg in ("-X", "--method") and i + 1 < len(rest):
                    method = rest[i + 1]
                elif arg.startswith("--method="):
                    method = arg.split("=", 1)[1]
                elif arg.startswith("-X") and len(arg) > 2:
                    method = arg[2:]
            fields = any(
                a in ("-f", "-F", "--field", "--raw-field", "--input")
                or a.startswith(("--field=", "--raw-field=", "--input="))
                for a in rest
            )
            if (method and method.upper() != "GET") or (fields and method is None):
                return f"`gh api` with a write method changes things on GitHub: {_NO_PUBLISH}"
            return None
        if sub == "auth":
            verb = rest[0] if rest else ""
            if verb == "token" or (verb == "status" and ({"-t", "--show-token"} & set(rest))):
                return "`gh auth token` reveals a credential; the engine never reads credentials"
            if verb in ("login", "logout", "refresh", "setup-git", "switch"):
                return f"`gh auth {verb}` changes the operator's GitHub credentials"
            return None
        if sub in _GH_GROUPS:
            verb = next((a for a in rest if not a.startswith("-")), "")
            if verb and verb not in _GH_READ:
                return (
                    f"`gh {sub} {verb}` is not read-only (corral allows gh's view, list, status, "
                    f"diff and checks): {_NO_PUBLISH}"
                )
        return None
    positionals = positional_args(args)
    if prog in _PUBLISHERS:
        verbs = _PUBLISHERS[prog]
        if prog == "yarn" and positionals[:2] == ["npm", "publish"]:
            return f"`yarn npm publish` publishes a package: {_NO_PUBLISH}"
        if prog in ("npm", "pnpm", "yarn") and positionals[:1] == ["run"]:
            script = positionals[1] if len(positionals) > 1 else ""
            if script.startswith(("publish", "release", "deploy")):
                return f"`{prog} run {script}` looks like a publication script: {_NO_PUBLISH}"
        for verb in positionals[:2]:
            if verb in verbs:
                return f"`{prog} {verb}` publishes or changes a registry: {_NO_PUBLISH}"
        return None
    if prog == "dotnet" and positionals[:2] == ["nuget", "push"]:
        return f"`dotnet nuget push` publishes a package: {_NO_PUBLISH}"
    if prog in ("gradle", "gradlew"):
        for task in positionals:
            name = task.rsplit(":", 1)[-1]
            if name.startswith("publish") and name != "publishToMavenLocal":
                return f"gradle `{task}` publishes artifacts: {_NO_PUBLISH}"
        return None
    if re.fullmatch(r"python[0-9.]*", prog) and "setup.py" in positionals:
        if {"upload", "register"} & set(positionals):
            return f"`setup.py upload` publishes a package: {_NO_PUBLISH}"
        return None
    if prog in ("scp", "rsync", "sftp") and positionals:
        target = positionals[-1]
        if re.match(r"^([\w.-]+@)?[\w.-]+:", target):
            return f"`{prog}` to {target} copies to another machine: {_NO_PUBLISH}"
    return None
