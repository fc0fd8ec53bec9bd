"""A worktree's files as a git tree, from their bytes.

What a worktree holds is read by corral itself, never through git's
conversions: no clean filter, no text/eol conversion, no `ident`, whatever
`.gitattributes` or config in reach of the worktree say. The paths come from
git (tracked ones from the worktree's index, untracked ones minus ignored);
each is opened relative to its directory without following a link anywhere
on the way (a path under a directory that became a link is not the tracked
file any more and is left out), so what is stored is exactly what was read.
Symlinks are stored as links (their target), the executable bit as the mode
(or the tracked mode where `core.fileMode` is false), submodule entries as
they are in the index while their directory exists. The blobs go in through
one `git fast-import`, the tree through `update-index --index-info` on a
throwaway index and `write-tree`: the worktree's own index is never written.

A file whose size, times, inode and mode are what the last snapshot saw,
and that was last modified well before that snapshot began, keeps its blob
id without being read again (`.corral-git/<name>.stat.json`, beside the
worktree's pins in the state dir)."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .errors import GitError
from .pins import pins_for, stat_cache_path
from .run import git, git_bytes, invocation

RACY_NS = 2_000_000_000  # a file changed this close to a snapshot's start is read again
GITLINK = "160000"


@dataclass
class _Tracked:
    mode: str
    blob: str


@dataclass
class _Found:
    mode: str
    blob: str | None  # None: to be read and stored
    data: bytes = b""
    key: list[int] = field(default_factory=list)  # stat data for the cache


def _stat_key(st: os.stat_result) -> list[int]:
    return [st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode]


class _Dirs:
    """Directory fds opened one component at a time, never through a link."""

    def __init__(self, root: Path) -> None:
        self.root = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        self.fds: dict[bytes, int | None] = {b"": self.root}

    def fd(self, directory: bytes) -> int | None:
        if directory in self.fds:
            return self.fds[directory]
        parent, _, name = directory.rpartition(b"/")
        base = self.fd(parent)
        fd: int | None = None
        if base is not None:
            try:
                fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=base)
            except OSError:
                fd = None
        self.fds[directory] = fd
        return fd

    def close(self) -> None:
        for fd in self.fds.values():
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)


def _read_regular(dir_fd: int, name: bytes) -> tuple[bytes, os.stat_result] | None:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        chunks: list[bytes] = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def _tracked(worktree: Path) -> dict[bytes, _Tracked]:
    out: dict[bytes, _Tracked] = {}
    for row in git_bytes(worktree, "ls-files", "-s", "-z").split(b"\0"):
        meta, _, path = row.partition(b"\t")
        if not path:
            continue
        mode, blob, _stage = meta.decode("ascii").split(" ")
        out[path] = _Tracked(mode, blob)  # a conflicted path: the worktree file decides
    return out


def _untracked(worktree: Path) -> list[bytes]:
    out = git_bytes(worktree, "ls-files", "-z", "--others", "--exclude-standard")
    return [p for p in out.split(b"\0") if p and not p.endswith(b"/")]  # nested repos: left out


def _cache_path(worktree: Path) -> Path | None:
    return stat_cache_path(worktree) if pins_for(worktree) is not None else None


def _load_cache(path: Path | None) -> tuple[int, dict[str, list[object]]]:
    if path is None:
        return 0, {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return int(data["started"]), dict(data["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0, {}


def _save_cache(path: Path | None, started: int, files: dict[str, list[object]]) -> None:
    if path is None:
        return
    fresh = path.with_name(f".{path.name}.{os.getpid()}")
    with contextlib.suppress(OSError):
        fresh.write_text(json.dumps({"started": started, "files": files}), encoding="utf-8")
        os.replace(fresh, path)


def _store_blobs(worktree: Path, pending: list[_Found]) -> None:
    """Write the pending blobs in one `git fast-import`; fill in their ids."""
    if not pending:
        return
    with tempfile.TemporaryDirectory(prefix="corral-blobs-") as tmp:
        marks = Path(tmp) / "marks"
        prefix, env = invocation(worktree)
        with open(Path(tmp) / "stderr", "w+b") as err:
            proc = subprocess.Popen(
                [*prefix, "fast-import", "--quiet", "--done", f"--export-marks={marks}"],
                cwd=str(worktree),
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
            assert proc.stdin is not None
            try:
                for n, found in enumerate(pending, start=1):
                    proc.stdin.write(b"blob\nmark :%d\ndata %d\n" % (n, len(found.data)))
                    proc.stdin.write(found.data)
                    proc.stdin.write(b"\n")
                proc.stdin.write(b"done\n")
                proc.stdin.close()
            except BrokenPipeError:
                pass
            code = proc.wait(timeout=600)
            if code != 0:
                err.seek(0)
                detail = err.read().decode("utf-8", "replace").strip().splitlines()
                raise GitError(f"git fast-import failed: {detail[-1] if detail else code}")
        ids: dict[int, str] = {}
        for line in marks.read_text(encoding="ascii").splitlines():
            mark, _, blob = line.partition(" ")
            ids[int(mark[1:])] = blob.strip()
    for n, found in enumerate(pending, start=1):
        found.blob = ids[n]
        found.data = b""


def snapshot_files(worktree: Path) -> str:
    """The worktree's content as a tree id, read as bytes (see the module)."""
    worktree = Path(os.path.realpath(worktree))
    started = time.time_ns()
    filemode = git(worktree, "config", "--bool", "core.fileMode", check=False).strip() != "false"
    tracked = _tracked(worktree)
    paths = sorted({*tracked, *_untracked(worktree)})
    cache_file = _cache_path(worktree)
    last_started, cache = _load_cache(cache_file)
    found: dict[bytes, _Found] = {}
    dirs = _Dirs(worktree)
    try:
        for path in paths:
            parent, _, name = path.rpartition(b"/")
            dir_fd = dirs.fd(parent)
            if dir_fd is None:
                continue
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                continue
            known = tracked.get(path)
            if stat.S_ISDIR(st.st_mode):
                if known is not None and known.mode == GITLINK:
                    found[path] = _Found(GITLINK, known.blob)
                continue
            if stat.S_ISLNK(st.st_mode):
                try:
                    target = os.readlink(name, dir_fd=dir_fd)
                except OSError:
                    continue
                found[path] = _Found("120000", None, os.fsencode(target))
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            if filemode or known is None or known.mode not in ("100644", "100755"):
                mode = "100755" if st.st_mode & 0o100 else "100644"
            else:
                mode = known.mode
            key = _stat_key(st)
            hit = cache.get(os.fsdecode(path))
            if hit and hit[:5] == key and st.st_mtime_ns < last_started - RACY_NS:
                found[path] = _Found(mode, str(hit[5]), key=key)
                continue
            read = _read_regular(dir_fd, name)
            if read is None:
                continue
            data, opened = read
            found[path] = _Found(mode, None, data, key=_stat_key(opened))
    finally:
        dirs.close()
    _store_blobs(worktree, [f for f in found.values() if f.blob is None])
    listing = b"".join(
        b"%s %s\t%s\0" % (f.mode.encode(), (f.blob or "").encode(), path)
        for path, f in found.items()
    )
    with tempfile.TemporaryDirectory(prefix="corral-index-") as tmp:
        index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git_bytes(worktree, "update-index", "-z", "--index-info", input_bytes=listing, env=index)
        tree = git(worktree, "write-tree", env=index).strip()
    _save_cache(
        cache_file,
        started,
        {os.fsdecode(p): [*f.key, f.blob] for p, f in found.items() if f.key},
    )
    return tree
