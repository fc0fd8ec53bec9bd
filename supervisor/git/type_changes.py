"""What a change does to the kind of a path, in words, before it is written.

A diff's lines say little when a path changes kind: a symlink replaced by a
directory or a file, a file by a symlink (and where it points), a directory by
a file, an executable bit set or cleared, a submodule appearing or going. Gate
2 lists each (`DiffSummary.type_changes`), the confirm question and `corral
approve` repeat them before anything is written, and a checkout delivery that
would write through a symlink in the operator's checkout (git would replace
their link with a real directory) is refused with a sentence.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from ..errors import CorralError
from .result_tree import Change, shown
from .run import git_bytes

LINK, TREE, SUBMODULE = "120000", "040000", "160000"
KIND_WORDS = {
    LINK: "a symlink",
    "100644": "a file",
    "100755": "an executable file",
    SUBMODULE: "a submodule",
    TREE: "a directory",
}
MAX_SHOWN = 30


class SymlinkInTheWay(CorralError):
    """A checkout delivery would write through the operator's symlink."""


def _kind(mode: str) -> str:
    return KIND_WORDS.get(mode, f"an entry of mode {mode}")


def _link_target(repo: Path, sha: str) -> str:
    try:
        return shown(os.fsdecode(git_bytes(repo, "cat-file", "blob", sha)))
    except CorralError:
        return "?"


def type_changes(repo: Path, changes: Iterable[Change]) -> list[str]:
    """One sentence per path whose kind the change alters (from the change's
    entries: `diff-tree -r` lists a directory as the files under it)."""
    changes = list(changes)
    gone = {c.path: c.old for c in changes if c.old is not None and c.new is None}
    made = {c.path: c.new for c in changes if c.new is not None and c.old is None}
    said: list[str] = []

    def parents(path: str) -> list[str]:
        parts = path.split("/")
        return ["/".join(parts[:i]) for i in range(1, len(parts))]

    became_dir = sorted({p for path in made for p in parents(path) if p in gone})
    for path in became_dir:
        old = gone[path]
        assert old is not None
        said.append(f"{shown(path)}: {_kind(old[0])} becomes a directory")
    was_dir = sorted({p for path in gone for p in parents(path) if p in made})
    for path in was_dir:
        new = made[path]
        assert new is not None
        said.append(f"{shown(path)}: a directory becomes {_kind(new[0])}" + _to(repo, new))
    for c in changes:
        if c.old is None or c.new is None or c.old[0] == c.new[0]:
            continue
        before, after = c.old[0], c.new[0]
        if {before, after} == {"100644", "100755"}:
            verb = "becomes executable" if after == "100755" else "is no longer executable"
            said.append(f"{shown(c.path)}: {verb}")
        else:
            said.append(
                f"{shown(c.path)}: {_kind(before)} becomes {_kind(after)}" + _to(repo, c.new)
            )
    for path, new in sorted(made.items()):
        if new[0] in (LINK, SUBMODULE) and path not in was_dir:
            noun = "symlink" if new[0] == LINK else "submodule"
            said.append(f"{shown(path)}: a new {noun}" + _to(repo, new))
    if len(said) > MAX_SHOWN:
        said = [*said[:MAX_SHOWN], f"… and {len(said) - MAX_SHOWN} more"]
    return said


def _to(repo: Path, entry: tuple[str, str]) -> str:
    if entry[0] == LINK:
        return f" pointing to {_link_target(repo, entry[1])}"
    if entry[0] == SUBMODULE:
        return f" at commit {entry[1][:12]}"
    return ""


def symlinks_in_the_way(checkout: Path, paths: Iterable[str]) -> list[tuple[str, str]]:
    """(link, target) for each symlink in the operator's checkout that a path
    the delivery writes lies under: git would replace the link by a directory."""
    root = os.fsencode(checkout)
    found: dict[str, str] = {}
    for path in paths:
        parts = path.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            if parent in found:
                break
            full = os.path.join(root, os.fsencode(parent))
            if os.path.islink(full):
                found[parent] = shown(os.fsdecode(os.readlink(full)))
                break
    return sorted(found.items())


def refuse_symlinks_in_the_way(checkout: Path, paths: Iterable[str]) -> None:
    """Refuse, with nothing written, a checkout delivery through a symlink."""
    links = symlinks_in_the_way(checkout, paths)
    if not links:
        return
    named = ", ".join(f"{shown(link)} (→ {target})" for link, target in links[:5])
    raise SymlinkInTheWay(
        f"{named} {'is a symlink' if len(links) == 1 else 'are symlinks'} in your checkout and "
        "the change writes files inside, which would replace your link with a real directory; "
        "nothing was applied. Deliver to a branch instead, or replace the link yourself and "
        "approve again"
    )
