"""Unified diffs as files and hunks, so an operator can approve part of one.

`parse_patch` splits `git diff --binary --full-index` output per file and per
hunk; `build_patch` writes back exactly the selected part, renumbering the
new-side line numbers of the kept hunks so `git apply` takes it as is. Binary
files, renames without content changes, mode changes, new and deleted files
are whole-file units.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from .result_tree import shown, unquote

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")


def unquote_path(text: str) -> str:
    """A path as the patch names it (C-quoted when unusual), as people read
    it: the name itself when it is printable UTF-8, else escaped. The patch
    text keeps git's own quoting, so applying it reaches the exact bytes."""
    return shown(unquote(text))


def _side_path(line: str, prefix: str) -> str | None:
    name = line[4:].rstrip("\n")
    if name.endswith("\t"):
        name = name[:-1]
    name = unquote_path(name)
    if name == "/dev/null":
        return None
    return name[len(prefix) :] if name.startswith(prefix) else name


def _git_line_path(rest: str) -> str:
    """The new side's path from `diff --git a/x b/x` (a binary file's patch
    names it nowhere else): C-quoted when the name is unusual."""
    if rest.startswith('"'):
        end = 1
        while end < len(rest) and rest[end] != '"':
            end += 2 if rest[end] == "\\" else 1
        second = unquote(rest[end + 2 :])
        return shown(second[2:] if second.startswith("b/") else second)
    half = len(rest) // 2
    return rest[half + 1 :][2:] if rest[half] == " " else rest


@dataclass
class Hunk:
    old_start: int
    old_len: int
    new_start: int
    new_len: int
    section: str
    lines: list[str]
    raw: str = ""

    @property
    def added(self) -> int:
        return sum(1 for ln in self.lines if ln.startswith("+"))

    @property
    def removed(self) -> int:
        return sum(1 for ln in self.lines if ln.startswith("-"))

    def header(self, new_start: int | None = None) -> str:
        if new_start is None and self.raw:
            return self.raw
        start = self.new_start if new_start is None else new_start
        return f"@@ -{self.old_start},{self.old_len} +{start},{self.new_len} @@{self.section}"


@dataclass
class FilePatch:
    path: str
    old_path: str | None
    header: list[str]
    hunks: list[Hunk] = field(default_factory=list)
    body: list[str] = field(default_factory=list)  # binary patch or other non-hunk lines
    change: str = "modified"

    @property
    def hunk_selectable(self) -> bool:
        return self.change == "modified" and bool(self.hunks) and not self.body

    @property
    def added(self) -> int:
        return sum(h.added for h in self.hunks)

    @property
    def removed(self) -> int:
        return sum(h.removed for h in self.hunks)

    def text(self, keep: set[int] | None = None) -> str:
        """The file's patch with only hunks `keep` (None = all)."""
        if keep is None or not self.hunk_selectable:
            out = [*self.header]
            for h in self.hunks:
                out.append(h.header())
                out.extend(h.lines)
            out.extend(self.body)
            return "".join(s if s.endswith("\n") else s + "\n" for s in out)
        out = [*self.header]
        shift = 0
        for i, h in enumerate(self.hunks):
            if i in keep:
                out.append(h.header(h.old_start + shift + (0 if h.old_len else 1)))
                out.extend(h.lines)
                shift += h.new_len - h.old_len
        return "".join(s if s.endswith("\n") else s + "\n" for s in out)


def parse_patch(text: str) -> list[FilePatch]:
    files: list[FilePatch] = []
    current: FilePatch | None = None
    hunk: Hunk | None = None
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            current = FilePatch(path="", old_path=None, header=[line])
            files.append(current)
            hunk = None
            i += 1
            old = new = None
            while i < len(lines) and not lines[i].startswith(("@@ ", "diff --git ")):
                h = lines[i]
                if h.startswith("GIT binary patch") or h.startswith("Binary files "):
                    current.change = "binary"
                    while i < len(lines) and not lines[i].startswith("diff --git "):
                        current.body.append(lines[i])
                        i += 1
                    break
                current.header.append(h)
                if h.startswith("--- "):
                    old = _side_path(h, "a/")
                elif h.startswith("+++ "):
                    new = _side_path(h, "b/")
                elif h.startswith("rename from "):
                    old = unquote_path(h[len("rename from ") :].rstrip("\n"))
                    current.change = "renamed"
                elif h.startswith("rename to "):
                    new = unquote_path(h[len("rename to ") :].rstrip("\n"))
                elif h.startswith("new file mode"):
                    current.change = "added"
                elif h.startswith("deleted file mode"):
                    current.change = "deleted"
                i += 1
            if new is None and old is None:
                new = old = _git_line_path(line[len("diff --git ") :].rstrip("\n"))
            current.path = new or old or ""
            current.old_path = old
            continue
        m = _HUNK.match(line.rstrip("\n"))
        if m and current is not None:
            hunk = Hunk(
                old_start=int(m.group(1)),
                old_len=int(m.group(2)) if m.group(2) is not None else 1,
                new_start=int(m.group(3)),
                new_len=int(m.group(4)) if m.group(4) is not None else 1,
                section=m.group(5),
                lines=[],
                raw=line.rstrip("\n"),
            )
            current.hunks.append(hunk)
        elif hunk is not None:
            hunk.lines.append(line)
        i += 1
    return files


Selection = Mapping[str, set[int] | None]
"""path → hunk indices to keep (None = the whole file). Paths absent are left out."""


def build_patch(files: list[FilePatch], selection: Selection | None) -> str:
    if selection is None:
        return "".join(f.text() for f in files)
    out: list[str] = []
    for f in files:
        if f.path not in selection:
            continue
        keep = selection[f.path]
        if keep is not None and f.hunk_selectable:
            keep = {k for k in keep if 0 <= k < len(f.hunks)}
            if not keep:
                continue
            if keep == set(range(len(f.hunks))):
                keep = None
        out.append(f.text(keep))
    return "".join(out)


def validate_selection(files: list[FilePatch], selection: Selection) -> list[str]:
    """Problems with a selection, all at once (unknown paths, bad hunk numbers)."""
    by_path = {f.path: f for f in files}
    problems: list[str] = []
    for path, keep in selection.items():
        f = by_path.get(path)
        if f is None:
            problems.append(f"{path} is not part of the verified diff")
            continue
        if keep is None:
            continue
        if not f.hunk_selectable:
            problems.append(f"{path} can only be approved as a whole file ({f.change})")
            continue
        bad = sorted(k for k in keep if not 0 <= k < len(f.hunks))
        if bad:
            problems.append(f"{path} has {len(f.hunks)} hunk(s); no hunk {bad[0] + 1}")
    return problems
