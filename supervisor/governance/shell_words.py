"""Shell words: a command line cut into simple commands, with the wrappers
that merely run their arguments (`env`, `timeout 5`, `nohup`, `xargs`, `npx`,
...) stripped so the rules see the program that really runs.

This reads the command line the way a careful human would (splitting `;`,
`&&`, pipes, `$(...)` and backquotes, setting redirects and here-document
bodies aside); it is not a shell and does not expand variables.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

_PUNCT = set("();<>|&")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")
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
    """One program and its words, with its redirects set aside."""

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


def positional_args(args: Sequence[str]) -> list[str]:
    """The arguments that are not options (everything after `--` counts)."""
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


def option_flags(args: Sequence[str]) -> tuple[set[str], set[str]]:
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
