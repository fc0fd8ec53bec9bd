"""Governance for the built-in engine's tools: an inspector chain that sees
every tool call before it runs.

The chain is the built-in rules followed by the operator's policy files. The
first inspector that denies wins; the engine returns its reason to the model
as the tool result and writes it to the event log.

Built-in rules:

- file tools stay inside the worktree (`..`, absolute paths and symlinks are
  resolved first) and never write into `.git` or `.corral/policies`;
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

Operator policy files can only narrow: `~/.config/corral/policy.toml` and
`<worktree>/.corral/policies/*.toml`, read once when a session's run starts::

    [deny]
    commands = ["\\\\bcurl\\\\b", "^make deploy"]   # regexes searched in shell commands
    paths = ["secrets/", "*.pem"]                # globs (worktree-relative or absolute)
    tools = ["shell"]                            # tools the model may not use

A path glob without `/` matches a file or directory name at any depth; one
with `/` matches the worktree-relative path; `*` also crosses `/`. For the
shell tool, each word of the command is matched as a path. A file that does
not parse fails the run before any model turn.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
import tempfile
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .errors import CorralError
from .policy import global_policy_path, worktree_policy_files

# --- requests, denials and the chain -----------------------------------------

FILE_TOOLS = frozenset(
    {"read_file", "list_dir", "find_files", "grep_files", "write_file", "edit_file"}
)
WRITE_TOOLS = frozenset({"write_file", "edit_file"})
PATH_ARGUMENTS = ("path",)  # the argument naming a file or directory for file tools


@dataclass(frozen=True)
class ToolRequest:
    """One tool call as the inspectors see it."""

    tool: str
    arguments: Mapping[str, Any]
    worktree: Path

    @property
    def command(self) -> str:
        value = self.arguments.get("command", "")
        return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class Denial:
    rule: str
    reason: str


class Inspector(Protocol):
    name: str

    def inspect(self, request: ToolRequest) -> str | None:
        """The reason to deny `request`, or None to let it through."""
        ...


class InspectorChain:
    """Every inspector sees the call; the first deny wins."""

    def __init__(self, inspectors: Iterable[Inspector]) -> None:
        self.inspectors = list(inspectors)

    def check(self, request: ToolRequest) -> Denial | None:
        for inspector in self.inspectors:
            reason = inspector.inspect(request)
            if reason:
                return Denial(rule=inspector.name, reason=reason)
        return None


def default_chain(operator: OperatorPolicy | None = None) -> InspectorChain:
    inspectors: list[Inspector] = [FileConfinement(), ShellGuard()]
    if operator is not None and operator.rules:
        inspectors.append(operator)
    return InspectorChain(inspectors)


# --- path confinement --------------------------------------------------------


class PathEscape(CorralError):
    """A file tool's path leaves the worktree."""


def _real(path: Path | str) -> Path:
    return Path(os.path.realpath(path))


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


def confine(worktree: Path, raw: object) -> Path:
    """The real path of `raw` (relative to the worktree, or absolute inside
    it), refusing anything that leaves the worktree lexically (`..`,
    absolute, `~`) or through a symlink."""
    if not isinstance(raw, str) or not raw.strip():
        raise PathEscape("a path is required (relative to the worktree)")
    if "\x00" in raw:
        raise PathEscape("the path contains a NUL byte")
    root = _real(worktree)
    text = os.path.expanduser(raw.strip())
    candidate = Path(text) if os.path.isabs(text) else root / text
    lexical = Path(os.path.normpath(candidate))
    if not _inside(lexical, root) and not _inside(lexical, Path(os.path.normpath(worktree))):
        raise PathEscape(
            f"path {raw!r} is outside the worktree; use paths relative to {root} and stay inside it"
        )
    # re-anchor on the real root, then follow symlinks
    try:
        relative = lexical.relative_to(root)
    except ValueError:
        relative = lexical.relative_to(Path(os.path.normpath(worktree)))
    real = _real(root / relative)
    if not _inside(real, root):
        raise PathEscape(
            f"path {raw!r} resolves through a symlink to {real}, outside the worktree; "
            "corral's file tools stay inside it"
        )
    return real


def relative_name(worktree: Path, path: Path) -> str:
    root = _real(worktree)
    try:
        rel = path.relative_to(root).as_posix()
    except ValueError:
        return str(path)
    return rel or "."


PROTECTED_WRITE = (".git", ".corral/policies")


class FileConfinement:
    """File tools stay inside the worktree and leave `.git` and the policy
    files alone."""

    name = "worktree confinement"

    def inspect(self, request: ToolRequest) -> str | None:
        if request.tool not in FILE_TOOLS:
            return None
        raw = request.arguments.get("path")
        if raw is None and request.tool in ("list_dir", "find_files", "grep_files"):
            raw = "."
        if isinstance(raw, str) and raw.strip():  # a missing path is the tool's error to report
            try:
                real = confine(request.worktree, raw)
            except PathEscape as exc:
                return str(exc)
            if request.tool in WRITE_TOOLS:
                rel = relative_name(request.worktree, real)
                for protected in PROTECTED_WRITE:
                    if rel == protected or rel.startswith(protected + "/"):
                        return f"{rel} is corral's to manage; do not write under {protected}/"
        pattern = request.arguments.get("pattern")
        if (
            request.tool == "find_files"
            and isinstance(pattern, str)
            and (os.path.isabs(os.path.expanduser(pattern)) or ".." in Path(pattern).parts)
        ):
            return f"pattern {pattern!r} leaves the worktree; use a relative glob such as '**/*.py'"
        return None


# --- shell parsing -----------------------------------------------------------

_PUNCT = set("();<>|&")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish"})
_KEYWORDS = frozenset(
    {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "!", "{", "}"}
)
# wrappers that run the rest of their arguments; the value names options that take an argument
_WRAPPERS: dict[str, frozenset[str]] = {
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "nohup": frozenset(),
    "time": frozenset({"-f", "--format", "-o", "--output"}),
    "command": frozenset(),
    "builtin": frozenset(),
    "exec": frozenset({"-a"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "-n", "-p"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "xargs": frozenset({"-I", "-i", "-n", "-P", "-d", "-L", "-s", "-E", "-a", "--arg-file"}),
    "unbuffer": frozenset(),
    "chronic": frozenset(),
    "flock": frozenset({"-w", "--timeout", "-E"}),
    "watch": frozenset({"-n", "--interval"}),
    "npx": frozenset({"-p", "--package"}),
    "bunx": frozenset(),
    "pnpx": frozenset(),
    "uvx": frozenset({"--from", "--with"}),
}


@dataclass
class SimpleCommand:
    argv: list[str]
    redirects: list[tuple[str, str]] = field(default_factory=list)  # (operator, target)


def _strip_heredocs(command: str) -> str:
    """Drop here-document bodies: they are data, not commands."""
    out: list[str] = []
    lines = command.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        for match in _HEREDOC.finditer(line):
            strip_tabs, word = match.group(1) == "-", match.group(3)
            while i < len(lines):
                body = lines[i].lstrip("\t") if strip_tabs else lines[i]
                i += 1
                if body == word:
                    break
    return "\n".join(out)


def _tokens(command: str) -> list[str]:
    text = _strip_heredocs(command).replace("`", " ; ").replace("\n", " ; ")
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError:  # unbalanced quotes: fall back to a rough split
        return re.findall(r"[;&|()<>]+|[^\s;&|()<>]+", text.replace('"', " ").replace("'", " "))


def split_commands(command: str) -> list[SimpleCommand]:
    """The simple commands of a command line (operators split, redirects set aside)."""
    tokens = _tokens(command)
    commands: list[SimpleCommand] = []
    current = SimpleCommand([])
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token and set(token) <= _PUNCT:
            if ">" in token or "<" in token:
                if i + 1 < len(tokens) and not set(tokens[i + 1]) <= _PUNCT:
                    current.redirects.append((token, tokens[i + 1]))
                    i += 2
                    continue
                i += 1
                continue
            if current.argv or current.redirects:
                commands.append(current)
            current = SimpleCommand([])
            i += 1
            continue
        current.argv.append(token)
        i += 1
    if current.argv or current.redirects:
        commands.append(current)
    return commands


def _base(word: str) -> str:
    return word.rsplit("/", 1)[-1] if "/" in word else word


def normalize_argv(argv: Sequence[str]) -> list[str]:
    """Strip assignments, shell keywords and wrappers (`env`, `timeout 5`,
    `nohup`, `xargs`, `npx`...); `python -m X` becomes `X`."""
    i = 0
    while i < len(argv):
        word = argv[i]
        base = _base(word)
        if _ASSIGNMENT.match(word) or base in _KEYWORDS:
            i += 1
            continue
        if base in _WRAPPERS:
            takes = _WRAPPERS[base]
            i += 1
            while i < len(argv) and argv[i].startswith("-") and argv[i] != "-":
                option = argv[i]
                i += 1
                if option in takes:
                    i += 1
            if base == "timeout" and i < len(argv):
                i += 1  # the duration
            continue
        break
    rest = list(argv[i:])
    if not rest:
        return rest
    rest[0] = _base(rest[0])
    if re.fullmatch(r"python[0-9.]*", rest[0]) and len(rest) > 2 and rest[1] == "-m":
        rest = [rest[2], *rest[3:]]
    return rest


def _positionals(args: Sequence[str]) -> list[str]:
    out: list[str] = []
    dashdash = False
    for arg in args:
        if dashdash:
            out.append(arg)
        elif arg == "--":
            dashdash = True
        elif not (arg.startswith("-") and arg != "-"):
            out.append(arg)
    return out


def _flags(args: Sequence[str]) -> tuple[set[str], set[str]]:
    """(long options without values, single-letter flags) before `--`."""
    longs: set[str] = set()
    shorts: set[str] = set()
    for arg in args:
        if arg == "--":
            break
        if arg.startswith("--"):
            longs.add(arg.split("=", 1)[0])
        elif arg.startswith("-") and len(arg) > 1:
            shorts.update(arg[1:])
    return longs, shorts


# --- the shell scan ----------------------------------------------------------

_DEV_SINKS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/zero"})


@dataclass
class _Scan:
    worktree: Path
    cwd: Path
    home: Path
    scratch: tuple[Path, ...]

    def resolve(self, token: str) -> Path | None:
        """The real path a shell word names (None when it cannot be known)."""
        text = token
        if text == "~" or text.startswith("~/"):
            text = str(self.home) + text[1:]
        elif text.startswith("~"):
            return None
        text = text.replace("${HOME}", str(self.home)).replace("$HOME", str(self.home))
        if "$" in text or not text:
            return None
        path = Path(text) if os.path.isabs(text) else self.cwd / text
        return _real(os.path.normpath(path))

    def inside(self, path: Path) -> bool:
        return _inside(path, self.worktree)

    def is_scratch(self, path: Path) -> bool:
        text = str(path)
        if text in _DEV_SINKS or text.startswith("/dev/fd/"):
            return True
        return any(_inside(path, d) for d in self.scratch)

    def outside(self, token: str, *, scratch_ok: bool = False) -> Path | None:
        """The path when `token` names one outside the worktree (and, when
        `scratch_ok`, not in the temp dir or a /dev sink)."""
        path = self.resolve(token)
        if path is None or self.inside(path):
            return None
        if scratch_ok and self.is_scratch(path):
            return None
        return path


def _scratch_dirs() -> tuple[Path, ...]:
    dirs = {_real(tempfile.gettempdir()), _real("/tmp"), _real("/var/tmp")}
    return tuple(sorted(dirs))


class ShellGuard:
    """The built-in rules for the `shell` tool (see the module docstring)."""

    name = "corral shell rules"

    def __init__(self, home: Path | None = None) -> None:
        self.home = _real(home or Path.home())
        self.scratch = _scratch_dirs()

    def inspect(self, request: ToolRequest) -> str | None:
        if request.tool != "shell":
            return None
        root = _real(request.worktree)
        scan = _Scan(worktree=root, cwd=root, home=self.home, scratch=self.scratch)
        return self._scan(request.command, scan, depth=0)

    def _scan(self, command: str, scan: _Scan, depth: int) -> str | None:
        if depth > 6:
            return "the command nests shells too deeply to inspect"
        for simple in split_commands(command):
            reason = self._simple(simple.argv, simple.redirects, scan, depth)
            if reason:
                return reason
        return None

    def _simple(
        self, raw_argv: list[str], redirects: list[tuple[str, str]], scan: _Scan, depth: int
    ) -> str | None:
        for word in [*raw_argv, *(target for _op, target in redirects)]:
            reason = _credential_word(word, scan)
            if reason:
                return reason
        for op, target in redirects:
            if ">" in op and not re.fullmatch(r"&?-?\d*-?", target):
                path = scan.outside(target, scratch_ok=True)
                if path is not None:
                    return _outside_sentence("redirects output to", path)
        argv = normalize_argv(raw_argv)
        if not argv:
            return None
        prog, args = argv[0], argv[1:]
        if prog in ("cd", "pushd"):
            target = _positionals(args)[:1]
            where = scan.resolve(target[0]) if target else scan.home
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
        for rule in (_publication, _history, _privilege, _destructive):
            reason = rule(prog, args, scan)
            if reason:
                return reason
        return None


def _outside_sentence(verb: str, path: Path) -> str:
    return (
        f"the command {verb} {path}, outside this worktree; corral only lets the engine "
        "change files inside the worktree"
    )


# --- rule: no remote mutation or publication ---------------------------------

_NO_PUBLISH = (
    "corral delivers the work itself after the operator approves the diff; do not push, "
    "publish, release or open pull requests"
)
_GIT_VALUE_OPTIONS = frozenset(
    {"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env"}
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


def _git_split(args: Sequence[str], scan: _Scan) -> tuple[str | None, list[str], str | None]:
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
                return None, [], _outside_sentence("runs git in", path)
    if i >= len(args):
        return None, [], None
    return args[i], list(args[i + 1 :]), None


def _publication(prog: str, args: list[str], scan: _Scan) -> str | None:
    if prog == "git":
        sub, rest, reason = _git_split(args, scan)
        if reason:
            return reason
        if sub == "push":
            longs, shorts = _flags(rest)
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
    positionals = _positionals(args)
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


# --- rule: no rewriting of shared history -----------------------------------

_NO_HISTORY = (
    "the engine works on this worktree's detached HEAD only and never rewrites branches, "
    "tags or reflogs"
)


def _history(prog: str, args: list[str], scan: _Scan) -> str | None:
    if prog not in ("git", "git-filter-repo"):
        return None
    if prog == "git-filter-repo":
        return f"`git filter-repo` rewrites history: {_NO_HISTORY}"
    sub, rest, _reason = _git_split(args, scan)
    if sub is None:
        return None
    longs, shorts = _flags(rest)
    positionals = _positionals(rest)
    if sub in ("filter-branch", "filter-repo"):
        return f"`git {sub}` rewrites history: {_NO_HISTORY}"
    if sub == "reflog" and positionals[:1] and positionals[0] in ("expire", "delete"):
        return f"`git reflog {positionals[0]}` discards history: {_NO_HISTORY}"
    if sub == "update-ref":
        values = [a for i, a in enumerate(rest) if i == 0 or rest[i - 1] != "-m"]
        values = _positionals([a for a in values if a != "-m"])
        if "--stdin" in longs or not values or values[0] != "HEAD":
            ref = values[0] if values else "refs from stdin"
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


# --- rule: no privilege escalation -------------------------------------------

_NO_PRIVILEGE = "the engine runs as the operator's user and never escalates privileges"


def _privilege(prog: str, args: list[str], scan: _Scan) -> str | None:
    if prog in ("sudo", "su", "doas", "pkexec", "runuser", "setpriv", "chroot", "nsenter"):
        return f"`{prog}` is not allowed: {_NO_PRIVILEGE}"
    if prog == "setcap":
        return f"`setcap` grants capabilities: {_NO_PRIVILEGE}"
    positionals = _positionals(args)
    if prog == "chmod" and positionals:
        mode = positionals[0]
        setid = re.search(r"[+=][rwxXt]*s", mode) or (
            re.fullmatch(r"[0-7]{4}", mode) and int(mode[0]) & 6
        )
        if setid:
            return f"`chmod {mode}` sets a setuid/setgid bit: {_NO_PRIVILEGE}"
    if prog in ("chown", "chgrp") and positionals:
        owner = re.split(r"[:.]", positionals[0])
        if any(part in ("root", "0", "wheel", "sudo", "admin") for part in owner if part):
            return f"`{prog} {positionals[0]}` hands files to a privileged owner: {_NO_PRIVILEGE}"
    return None


# --- rule: no credential reads -----------------------------------------------

CREDENTIAL_HOME_PATHS = (
    ".ssh",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".config/hub",
    ".netrc",
    ".git-credentials",
    ".docker/config.json",
    ".pypirc",
    ".npmrc",
    ".yarnrc.yml",
    ".kube/config",
    ".gnupg",
    ".password-store",
    ".vault-token",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".terraform.d/credentials.tfrc.json",
)
_OTHER_HOMES = re.compile(
    r"^/(?:root|home/[^/]+|Users/[^/]+)/("
    + "|".join(re.escape(p) for p in CREDENTIAL_HOME_PATHS)
    + r")(?:/|$)"
)
_SYSTEM_SECRETS = re.compile(r"^/(?:etc/(?:shadow|gshadow|sudoers)|proc/\d+/environ)(?:/|$)")
_DOTENV = re.compile(r"^\.env(?:\.[\w.-]+)?$")
_NO_CREDENTIALS = (
    "the engine never reads credentials (its environment is scrubbed on purpose); if the task "
    "needs a secret, ask the operator with ask_user"
)


def credential_path(path: Path, home: Path, worktree: Path) -> str | None:
    """Why reading `path` would read a credential (None when it would not)."""
    if _inside(path, worktree):
        return None
    for rel in CREDENTIAL_HOME_PATHS:
        if _inside(path, home / rel):
            return f"~/{rel}"
    text = path.as_posix()
    match = _OTHER_HOMES.match(text)
    if match:
        return text
    if _SYSTEM_SECRETS.match(text):
        return text
    if _DOTENV.match(path.name):
        return f"{path} (an .env file outside the worktree)"
    return None


def _credential_word(word: str, scan: _Scan) -> str | None:
    candidates = {word}
    for sep in ("=", ":"):
        if sep in word:
            candidates.add(word.split(sep, 1)[1])
    for candidate in candidates:
        if not candidate or candidate.startswith("-"):
            continue
        path = scan.resolve(candidate)
        if path is None:
            continue
        what = credential_path(path, scan.home, scan.worktree)
        if what:
            return f"the command touches {what}: {_NO_CREDENTIALS}"
    return None


# --- rule: nothing destructive outside the worktree --------------------------

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


def _destructive(prog: str, args: list[str], scan: _Scan) -> str | None:
    positionals = _positionals(args)
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
                return _outside_sentence(f"`{prog}` removes", path)
        return None
    if prog in _MODE_CHANGERS:
        for target in positionals[1:]:
            path = scan.outside(target)
            if path is not None:
                return _outside_sentence(f"`{prog}` changes", path)
        return None
    if prog == "mv":
        for target in positionals:
            path = scan.outside(target, scratch_ok=True)
            if path is not None:
                return _outside_sentence("`mv` moves", path)
        return None
    if prog in _WRITERS_TO_LAST and len(positionals) >= 2:
        path = scan.outside(positionals[-1], scratch_ok=True)
        if path is not None:
            return _outside_sentence(f"`{prog}` writes", path)
        return None
    if prog == "tee":
        for target in positionals:
            path = scan.outside(target, scratch_ok=True)
            if path is not None:
                return _outside_sentence("`tee` writes", path)
        return None
    if prog == "dd":
        for arg in args:
            if arg.startswith("of="):
                target = arg[3:]
                if target.startswith("/dev/") and target not in _DEV_SINKS:
                    return f"`dd of={target}` writes a device; it is never allowed"
                path = scan.outside(target, scratch_ok=True)
                if path is not None:
                    return _outside_sentence("`dd` writes", path)
        return None
    if prog == "find" and ("-delete" in args):
        for start in args:
            if start.startswith(("-", "(", "!")):
                break
            path = scan.outside(start)
            if path is not None:
                return _outside_sentence("`find -delete` removes files under", path)
        return None
    if prog == "git":
        sub, rest, reason = _git_split(args, scan)
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
            return f"`git {sub}` reads credentials: {_NO_CREDENTIALS}"
    return None


# --- operator policy files ---------------------------------------------------


class PolicyFileError(CorralError):
    """An operator policy file that does not parse (the message names the file)."""


@dataclass(frozen=True)
class OperatorRule:
    source: Path
    commands: tuple[re.Pattern[str], ...] = ()
    paths: tuple[str, ...] = ()
    tools: frozenset[str] = frozenset()


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


def _path_hit(pattern: str, path: Path, worktree: Path, home: Path) -> bool:
    pattern = pattern.strip()
    if pattern.endswith("/"):
        pattern = pattern.rstrip("/")
    if pattern.startswith("~"):
        pattern = str(home) + pattern[1:]
    if os.path.isabs(pattern):
        candidates = [path, *path.parents]
        return any(fnmatch.fnmatchcase(c.as_posix(), pattern) for c in candidates)
    if not _inside(path, worktree):
        return False
    rel = path.relative_to(worktree)
    if rel == Path("."):
        return False
    chain = [rel, *[p for p in rel.parents if p != Path(".")]]
    if "/" in pattern:
        pattern = pattern.removeprefix("./")
        return any(fnmatch.fnmatchcase(c.as_posix(), pattern) for c in chain)
    return any(fnmatch.fnmatchcase(c.name, pattern) for c in chain)


class OperatorPolicy:
    """The operator's deny rules, frozen when the run starts."""

    name = "operator policy"

    def __init__(self, rules: Sequence[OperatorRule] = (), home: Path | None = None) -> None:
        self.rules = list(rules)
        self.home = _real(home or Path.home())

    @property
    def sources(self) -> list[Path]:
        return [rule.source for rule in self.rules]

    @property
    def denied_tools(self) -> frozenset[str]:
        out: set[str] = set()
        for rule in self.rules:
            out |= rule.tools
        return frozenset(out)

    def inspect(self, request: ToolRequest) -> str | None:
        root = _real(request.worktree)
        for rule in self.rules:
            if request.tool in rule.tools:
                return f"the operator's policy ({rule.source}) denies the {request.tool} tool"
            if request.tool == "shell":
                command = request.command
                for pattern in rule.commands:
                    if pattern.search(command):
                        return (
                            f"the operator's policy ({rule.source}) denies commands matching "
                            f"{pattern.pattern!r}"
                        )
            if rule.paths:
                for path in self._paths(request, root):
                    for pattern in rule.paths:
                        if _path_hit(pattern, path, root, self.home):
                            return (
                                f"the operator's policy ({rule.source}) denies access to "
                                f"{relative_name(root, path)} (matches {pattern!r})"
                            )
        return None

    def path_denied(self, path: Path, worktree: Path) -> str | None:
        """The pattern that hides `path` from listings and searches, if any."""
        root = _real(worktree)
        for rule in self.rules:
            for pattern in rule.paths:
                if _path_hit(pattern, path, root, self.home):
                    return pattern
        return None

    def _paths(self, request: ToolRequest, root: Path) -> list[Path]:
        if request.tool in FILE_TOOLS:
            try:
                return [confine(root, request.arguments.get("path") or ".")]
            except PathEscape:
                return []
        if request.tool == "shell":
            scan = _Scan(worktree=root, cwd=root, home=self.home, scratch=())
            out: list[Path] = []
            for simple in split_commands(request.command):
                for word in [*simple.argv[1:], *(t for _op, t in simple.redirects)]:
                    if word.startswith("-"):
                        continue
                    path = scan.resolve(word)
                    if path is not None and path != root:
                        out.append(path)
            return out
        return []


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
