"""The built-in rules for the `shell` tool.

- no remote mutation or publication (`git push`, `git remote add/set-url`,
  gh's non-read commands, `npm publish`, `twine upload`, `cargo publish`,
  `docker push`, ...);
- no rewriting of shared history (`git update-ref` of anything but HEAD,
  `git branch -D/-f/-m`, `git tag -d/-f`, `git rebase` of another branch,
  `git filter-branch`, `git reflog expire`, `git checkout -B`);
- no privilege escalation (`sudo`, `su`, `doas`, `chmod +s`, `chown root`);
- no reads of credentials (`~/.ssh`, `~/.aws`, `~/.config/gcloud`, `~/.netrc`,
  `~/.docker/config.json`, ..., `.env` files outside the worktree). Dumping the
  environment (`env`, `printenv`) is allowed: the shell's environment is
  already scrubbed of credential-shaped variables;
- nothing destructive outside the worktree (`rm`/`mv`/`chmod` of paths
  outside it, writes and redirects outside it except to the temp dir and
  `/dev/null`, `mkfs`, `dd of=/dev/...`, `pkill`, `shutdown`).

Be clear about what this is: shell-command inspection is a guard against
accidents and against a model that misunderstands its brief, not a sandbox.
It reads the command line (splitting `;`, `&&`, pipes, `$(...)`, `bash -c`
strings, common wrappers such as `env` and `timeout`); a program that decides
to evade it can (a script file, `python -c`, variables, encodings). The
boundary that holds regardless is the scrubbed environment (no credentials,
no git credential helpers) and the operator's review of the diff.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from .confinement import real_path
from .rules.credentials import deny_credential_word
from .rules.destruction import deny_destruction
from .rules.history import deny_history_rewrite
from .rules.privilege import deny_privilege_escalation
from .rules.publication import deny_publication
from .shell_scan import ShellScan, outside_sentence, scratch_dirs
from .shell_words import normalize_argv, positional_args, split_commands
from .tool_request import ToolRequest

# a rule family: (program, its arguments, the scan) -> the reason to deny, or None
ShellRule = Callable[[str, list[str], ShellScan], str | None]

SHELL_RULES: tuple[ShellRule, ...] = (
    deny_publication,
    deny_history_rewrite,
    deny_privilege_escalation,
    deny_destruction,
)

_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish"})


class ShellGuard:
    """The built-in rules for the `shell` tool (see the module docstring)."""

    name = "corral shell rules"

    def __init__(self, home: Path | None = None) -> None:
        self.home = real_path(home or Path.home())
        self.scratch = scratch_dirs()

    def inspect(self, request: ToolRequest) -> str | None:
        if request.tool != "shell":
            return None
        root = real_path(request.worktree)
        scan = ShellScan(worktree=root, cwd=root, home=self.home, scratch=self.scratch)
        return self._scan(request.command, scan, depth=0)

    def _scan(self, command: str, scan: ShellScan, depth: int) -> str | None:
        if depth > 6:
            return "the command nests shells too deeply to inspect"
        for simple in split_commands(command):
            reason = self._simple(simple.argv, simple.redirects, scan, depth)
            if reason:
                return reason
        return None

    def _simple(
        self, raw_argv: list[str], redirects: list[tuple[str, str]], scan: ShellScan, depth: int
    ) -> str | None:
        for word in [*raw_argv, *(target for _op, target in redirects)]:
            reason = deny_credential_word(word, scan)
            if reason:
                return reason
        for op, target in redirects:
            if ">" in op and not re.fullmatch(r"&?-?\d*-?", target):
                path = scan.outside(target, scratch_ok=True)
                if path is not None:
                    return outside_sentence("redirects output to", path)
        argv = normalize_argv(raw_argv)
        if not argv:
            return None
        prog, args = argv[0], argv[1:]
        if prog in ("cd", "pushd"):
            destination = positional_args(args)[:1]
            where = scan.resolve(destination[0]) if destination else scan.home
            if where is not None:
                scan.cwd = where
            return None
        if prog in _SHELLS:
            for i, arg in enumerate(args):
                is_c = arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:]
                if is_c and i + 1 < len(args):
                    return self._scan(args[i + 1], scan, depth + 1)
            return None
        if prog == "eval":
            return self._scan(" ".join(args), scan, depth + 1)
        if prog == "find":
            for i, arg in enumerate(args):
                if arg in ("-exec", "-execdir", "-ok", "-okdir"):
                    nested: list[str] = []
                    for word in args[i + 1 :]:
                        if word in (";", "+"):
                            break
                        nested.append(word)
                    reason = self._simple(nested, [], scan, depth + 1)
                    if reason:
                        return reason
        for rule in SHELL_RULES:
            reason = rule(prog, args, scan)
            if reason:
                return reason
        return None
