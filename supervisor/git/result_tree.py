"""The tree a delivery produces, composed from git objects.

A change is the list of entries that differ between the start commit and the
verified tree (`changes_between`): per path the entry before and after
(mode and object id, or absent). The tree a delivery writes is its base — the
checkout's HEAD for a branch, the checkout's current files for the checkout —
with those entries put in place (`compose`), in a private index. No patch
text is made or applied, so nothing depends on a diff's size, on text
encodings or on `git apply` agreeing with `git diff`.

Paths are bytes end to end: git prints them C-quoted (`core.quotePath=true`,
so every byte beyond ASCII arrives as an octal escape and nothing is lost to a
text decoding) and reads them back quoted; in Python they are `str` holding
the raw bytes through `surrogateescape` (`os.fsdecode`), so `os.fsencode`
gives back exactly git's bytes and file-system calls reach exactly that name.

Blocking; call through `asyncio.to_thread`.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from ..errors import CorralError
from .run import MAX_OUTPUT_BYTES, git
from .snapshot import PrivateIndex

_QUOTED = ["-c", "core.quotePath=true"]
_NULL_MODE = "000000"
_ESCAPES = {"n": 10, "t": 9, '"': 34, "\\": 92, "a": 7, "b": 8, "f": 12, "r": 13, "v": 11}
_QUOTE_BACK = {v: k for k, v in _ESCAPES.items()}

Entry = tuple[str, str]
"""(mode, object id) of a path in a tree."""


def unquote(text: str) -> str:
    """A path as git printed it (C-quoted when unusual) → the exact name,
    its bytes kept through `surrogateescape`."""
    if not (len(text) >= 2 and text.startswith('"') and text.endswith('"')):
        return os.fsdecode(text.encode("utf-8", "surrogateescape"))
    body = text[1:-1]
    raw = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in "0123" and i + 3 < len(body) + 1 and body[i + 2 : i + 4].isdigit():
                raw.append(int(body[i + 1 : i + 4], 8) & 0xFF)
                i += 4
                continue
            raw.append(_ESCAPES.get(nxt, ord(nxt)))
            i += 2
            continue
        raw += ch.encode("utf-8", "surrogateescape")
        i += 1
    return os.fsdecode(bytes(raw))


def quote(path: str) -> str:
    """The C-quoted form git reads (and prints) for a path: plain ASCII as
    is, anything else between double quotes with escapes."""
    raw = os.fsencode(path)
    if all(0x20 <= b < 0x7F and b not in (0x22, 0x5C) for b in raw):
        return raw.decode("ascii")
    out = ['"']
    for b in raw:
        if b in _QUOTE_BACK:
            out.append("\\" + _QUOTE_BACK[b])
        elif 0x20 <= b < 0x7F:
            out.append(chr(b))
        else:
            out.append(f"\\{b:03o}")
    out.append('"')
    return "".join(out)


def shown(path: str) -> str:
    """A path for people: the name itself when it is printable UTF-8, else
    git's escaped form (a newline or a stray byte never reaches a screen raw)."""
    raw = os.fsencode(path)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return quote(path)
    return text if text.isprintable() else quote(path)


@dataclass(frozen=True)
class Change:
    """One path's entry before (in the start commit) and after (in the
    verified tree); None where the path is absent."""

    path: str
    old: Entry | None
    new: Entry | None


class ChangeTooLarge(CorralError):
    """The list of changed paths is larger than corral reads from git."""


def _entry(mode: str, sha: str) -> Entry | None:
    return None if mode == _NULL_MODE else (mode, sha)


def changes_between(repo: Path, a: str, b: str) -> list[Change]:
    """Every path whose entry differs between trees (or commits) `a` and `b`,
    sorted by name; subtrees are walked, renames are a deletion plus an
    addition."""
    out = git(repo, *_QUOTED, "diff-tree", "-r", "--no-renames", a, b, "--", timeout=300)
    if len(out) >= MAX_OUTPUT_BYTES:
        raise ChangeTooLarge(
            f"the change lists more than {MAX_OUTPUT_BYTES // (1024 * 1024)} MiB of changed "
            "paths, more than corral reads in one go; split the task"
        )
    changes: list[Change] = []
    for line in out.splitlines():
        if not line.startswith(":"):
            continue
        meta, _, name = line.partition("\t")
        old_mode, new_mode, old_sha, new_sha, _status = meta[1:].split(" ")
        changes.append(Change(unquote(name), _entry(old_mode, old_sha), _entry(new_mode, new_sha)))
    return changes


def _index_line(path: str, entry: Entry | None) -> str:
    if entry is None:
        return f"0 {'0' * 40}\t{quote(path)}\n"
    mode, sha = entry
    return f"{mode} {sha}\t{quote(path)}\n"


@dataclass(frozen=True)
class Composed:
    """`base` with a change put in place: the tree, and the changed paths
    where `base` held something else than the start commit (and than the
    change's result), which the change would overwrite."""

    tree: str
    conflicts: list[str]
    differs: list[Change]  # the change's paths whose entry in `base` is not the result


def entries_of(repo: Path, tree: str, paths: Iterable[str]) -> dict[str, Entry]:
    """The entries of `paths` in `tree` (a path absent from it is left out)."""
    wanted = set(paths)
    if not wanted:
        return {}
    out = git(repo, *_QUOTED, "ls-tree", "-r", "--full-tree", tree, timeout=300)
    found: dict[str, Entry] = {}
    for line in out.splitlines():
        meta, _, name = line.partition("\t")
        path = unquote(name)
        if path in wanted:
            mode, _kind, sha = meta.split(" ")
            found[path] = (mode, sha)
    return found


def compose(repo: Path, base: str, start: str, changes: list[Change]) -> Composed:
    """The tree of `base` with `changes` (made on `start`) in place, built in a
    private index from objects only; `conflicts` names the paths where `base`
    differs from both `start` and the change's result."""
    moved = {c.path: c for c in changes_between(repo, start, base)} if base != start else {}
    conflicts = [
        c.path
        for c in changes
        if c.path in moved and moved[c.path].new != c.new and moved[c.path].new != c.old
    ]
    if not changes:
        return Composed(base_tree(repo, base), conflicts, [])
    if base == start:
        differs = list(changes)
    else:
        differs = [c for c in changes if (moved[c.path].new if c.path in moved else c.old) != c.new]
    with PrivateIndex(repo, seed_from_repo=False) as index:
        git(repo, "read-tree", base, env=index.env, timeout=300)
        # removals first: a file may make way for a directory of the same name
        lines = [_index_line(c.path, None) for c in changes if c.new is None]
        lines += [_index_line(c.path, c.new) for c in changes if c.new is not None]
        git(
            repo,
            "update-index",
            "--index-info",
            input_text="".join(lines),
            env=index.env,
            timeout=300,
        )
        tree = git(repo, "write-tree", env=index.env, timeout=300).strip()
    return Composed(tree, conflicts, differs)


def base_tree(repo: Path, rev: str) -> str:
    return git(repo, "rev-parse", "--verify", f"{rev}^{{tree}}").strip()


# -- writing a change into working files --------------------------------------------------


def blob_id(data: bytes, object_format: str = "sha1") -> str:
    """The id git gives `data` as a blob (no filters), computed here."""
    digest = hashlib.sha256() if object_format == "sha256" else hashlib.sha1()
    digest.update(b"blob %d\0" % len(data))
    digest.update(data)
    return digest.hexdigest()


def working_entry(root: Path, path: str, *, filemode: bool, object_format: str) -> Entry | None:
    """A working file as git would store it: a symlink by its target, a file
    by its bytes and executable bit (only where the checkout tracks modes),
    a non-empty directory as a tree; None when nothing is there."""
    target = os.path.join(os.fsencode(root), os.fsencode(path))
    try:
        st = os.lstat(target)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(st.st_mode):
        return "120000", blob_id(os.readlink(target), object_format)
    if stat.S_ISREG(st.st_mode):
        with open(target, "rb") as fh:
            sha = blob_id(fh.read(), object_format)
        executable = filemode and bool(st.st_mode & 0o100)
        return ("100755" if executable else "100644"), sha
    if stat.S_ISDIR(st.st_mode):
        return ("040000", "tree") if os.listdir(target) else None
    return "other", "other"


def same_entry(now: Entry | None, want: Entry | None, *, filemode: bool) -> bool:
    if now is None or want is None:
        return now == want
    if not filemode and now[0] != "120000" and want[0] in ("100644", "100755"):
        return now[1] == want[1]
    return now == want


def write_entries(root: Path, changes: list[Change]) -> None:
    """Make the working files at `changes`' paths hold their new entries
    (objects checked out through a private index holding only those paths;
    removed paths are deleted, and directories left empty by that go too).
    The checkout's HEAD and index are never touched."""
    raw_root = os.fsencode(root)
    for c in changes:
        full = os.path.join(raw_root, os.fsencode(c.path))
        if os.path.islink(full) or os.path.isfile(full):
            os.unlink(full)
        elif c.new is not None and os.path.isdir(full) and not os.listdir(full):
            os.rmdir(full)
        if c.new is None:
            _prune_empty_parents(raw_root, full)
    present = [c for c in changes if c.new is not None]
    if not present:
        return
    with PrivateIndex(root, seed_from_repo=False) as index:
        git(
            root,
            "update-index",
            "--index-info",
            input_text="".join(_index_line(c.path, c.new) for c in present),
            env=index.env,
            timeout=300,
        )
        git(root, "checkout-index", "-a", "-f", env=index.env, timeout=600)


def _prune_empty_parents(root: bytes, path: bytes) -> None:
    parent = os.path.dirname(path)
    while parent and parent != root and len(parent) > len(root):
        try:
            os.rmdir(parent)
        except OSError:
            return
        parent = os.path.dirname(parent)


def checkout_filemode(root: Path) -> bool:
    return git(root, "config", "--bool", "core.fileMode", check=False).strip() != "false"


def object_format(repo: Path) -> str:
    """sha1 or sha256: how this repository names its objects."""
    return git(repo, "rev-parse", "--show-object-format", check=False).strip() or "sha1"
