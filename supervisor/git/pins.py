"""Where a worktree's git metadata is, as corral recorded it when it made the
worktree, and the check that it is still so.

`git worktree add` writes three pointers: the worktree's `.git` file
(`gitdir: <admin>`), the admin dir's `commondir` (to the shared git dir) and
its `gitdir` (back to the `.git` file). Whoever can write them decides which
config, attributes and hooks git reads. So corral records their exact bytes
right after it creates a worktree, in its own state dir beside the worktree
(`<parent>/.corral-git/<name>.json`, which confined code never sees), runs
its own git on that worktree with the recorded dirs passed explicitly, and
reads the three files before every call: a changed one is refused with
`WorktreeMetadataChanged` and no git runs. Reading three small files costs
no subprocess.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from .errors import GitError

PINS_DIR = ".corral-git"
METADATA_CHANGED = "the worktree's git metadata was changed"


class WorktreeMetadataChanged(GitError):
    """A pointer of a corral worktree is not what corral wrote: nothing ran."""

    def __init__(self, worktree: Path | str, what: str) -> None:
        super().__init__(f"{METADATA_CHANGED} ({what} in {worktree}); no git command ran there")
        self.worktree = str(worktree)
        self.what = what


@dataclass(frozen=True)
class WorktreePins:
    worktree: Path  # the worktree's real path
    admin: Path  # its admin dir (`<common>/worktrees/<name>`)
    common: Path  # the repository's shared git dir
    dotgit: bytes  # the exact bytes of `<worktree>/.git`
    commondir: bytes  # ... of `<admin>/commondir`
    gitdir: bytes  # ... of `<admin>/gitdir`

    @property
    def env(self) -> dict[str, str]:
        """What git is told instead of discovering it."""
        return {
            "GIT_DIR": str(self.admin),
            "GIT_COMMON_DIR": str(self.common),
            "GIT_WORK_TREE": str(self.worktree),
        }

    def check(self) -> None:
        """Raise WorktreeMetadataChanged unless the three pointers are exactly
        the recorded ones (regular files, not links)."""
        for what, path, want in (
            (".git file", self.worktree / ".git", self.dotgit),
            ("commondir", self.admin / "commondir", self.commondir),
            ("gitdir", self.admin / "gitdir", self.gitdir),
        ):
            if _read_plain(path) != want:
                raise WorktreeMetadataChanged(self.worktree, what)
        if os.path.islink(self.admin) or not self.admin.is_dir():
            raise WorktreeMetadataChanged(self.worktree, "admin dir")


def _read_plain(path: Path) -> bytes | None:
    """The bytes of a regular file, never through a link (None otherwise)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
            if sum(map(len, chunks)) > 1 << 20:
                return None
        return b"".join(chunks)
    finally:
        os.close(fd)


def pins_path(worktree: Path | str) -> Path:
    real = Path(os.path.realpath(worktree))
    return real.parent / PINS_DIR / f"{real.name}.json"


def pin_worktree(worktree: Path, common: Path) -> WorktreePins:
    """Record the pointers `git worktree add` just wrote (call it right after;
    nothing else has run in the worktree yet). Refuses pointers that do not
    lead from the worktree to `common/worktrees/<name>` and back."""
    real = Path(os.path.realpath(worktree))
    common = Path(os.path.realpath(common))
    dotgit = _read_plain(real / ".git")
    text = (dotgit or b"").decode("utf-8", "surrogateescape").strip()
    if not text.startswith("gitdir:"):
        raise GitError(f"{real} has no .git file that git worktree add writes")
    raw = text[len("gitdir:") :].strip()
    admin = Path(os.path.realpath(raw if os.path.isabs(raw) else real / raw))
    if admin.parent != common / "worktrees":
        raise GitError(f"{real}'s admin dir {admin} is not in {common}/worktrees")
    commondir = _read_plain(admin / "commondir")
    gitdir = _read_plain(admin / "gitdir")
    if commondir is None or gitdir is None:
        raise GitError(f"{admin} lacks the commondir or gitdir that git worktree add writes")
    pins = WorktreePins(real, admin, common, dotgit or b"", commondir, gitdir)
    record = pins_path(real)
    record.parent.mkdir(parents=True, exist_ok=True)
    fresh = record.with_name(f".{record.name}.{os.getpid()}")
    fresh.write_text(
        json.dumps(
            {
                "worktree": str(real),
                "admin": str(admin),
                "common": str(common),
                "dotgit": os.fsdecode(pins.dotgit),
                "commondir": os.fsdecode(commondir),
                "gitdir": os.fsdecode(gitdir),
            }
        ),
        encoding="utf-8",
    )
    os.replace(fresh, record)
    return pins


def pins_for(cwd: Path | str) -> WorktreePins | None:
    """The recorded pointers of the worktree at `cwd` (its top level), None
    when corral did not make it."""
    record = pins_path(cwd)
    try:
        data = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    try:
        pins = WorktreePins(
            worktree=Path(data["worktree"]),
            admin=Path(data["admin"]),
            common=Path(data["common"]),
            dotgit=os.fsencode(data["dotgit"]),
            commondir=os.fsencode(data["commondir"]),
            gitdir=os.fsencode(data["gitdir"]),
        )
    except (KeyError, TypeError):
        return None
    return pins if pins.worktree == Path(os.path.realpath(cwd)) else None


def check_worktree(worktree: Path | str) -> None:
    """Raise WorktreeMetadataChanged when a worktree corral made no longer
    has the pointers it recorded (nothing for any other directory)."""
    pins = pins_for(worktree)
    if pins is not None:
        pins.check()


def stat_cache_path(worktree: Path | str) -> Path:
    """Where the snapshot keeps what it last saw of this worktree's files."""
    record = pins_path(worktree)
    return record.with_name(record.name.removesuffix(".json") + ".stat")


def unpin(worktree: Path | str) -> None:
    """Forget a removed worktree's record and what its snapshots saw."""
    record = pins_path(worktree)
    record.unlink(missing_ok=True)
    stat_cache_path(worktree).unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # the last one gone: no empty dir is left beside them
        record.parent.rmdir()
