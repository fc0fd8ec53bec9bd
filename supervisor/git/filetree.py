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
they are in the index while their directory exists; nested repositories that
are not submodules are left out. The blobs go in through one `git
fast-import`, the tree through `update-index --index-info` on a throwaway
index and `write-tree`: the worktree's own index is never written.

A file whose size, times, inode and mode are what the last snapshot saw,
and that was last modified well before that snapshot began, keeps its blob
id without being read again (`.corral-git/<name>.stat`, beside the
worktree's pins in the state dir, written only by corral). The first
snapshot of a worktree starts from the stat data of its index instead, which
`git worktree add` wrote and confined code cannot write (its git dir inside
is a private one), trusted as git trusts it: for files written before it."""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import stat
import subprocess
import tempfile
import time
from pathlib import Path

from .errors import GitError
from .pins import pins_for, stat_cache_path
from .run import git, git_bytes, invocation

RACY_NS = 2_000_000_000  # a file changed this close to a snapshot's start is read again
GITLINK = b"160000"
REGULAR = (b"100644", b"100755")

StatKey = tuple[int, int, int, int, int]
Cache = dict[bytes, tuple[StatKey, bytes]]


class _Dirs:
    """Directory fds opened one component at a time, never through a link."""

    def __init__(self, root: Path) -> None:
        self.fds: dict[bytes, int | None] = {b"": os.open(root, os.O_RDONLY | os.O_DIRECTORY)}

    def fd(self, directory: bytes) -> int | None:
        found = self.fds.get(directory, -1)
        if found != -1:
            return found
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


def _read_regular(dir_fd: int, name: bytes) -> tuple[bytes, StatKey] | None:
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
        key = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, st.st_mode)
        return b"".join(chunks), key
    finally:
        os.close(fd)


def _tracked(worktree: Path) -> tuple[dict[bytes, tuple[bytes, bytes]], Cache]:
    """path -> (mode, blob id) of the index (a conflicted path: any stage; the
    worktree file decides), and what the index's stat data says of them, in
    the stat cache's form (its mode field: 0, matched on the other fields)."""
    out: dict[bytes, tuple[bytes, bytes]] = {}
    stats: Cache = {}
    pieces = git_bytes(worktree, "ls-files", "-s", "--debug", "-z").split(b"\0")
    header = pieces[0]
    for piece in pieces[1:]:
        # five debug lines, then the next entry's header (its path may hold "\n")
        lines = piece.split(b"\n", 5)
        meta, _, path = header.partition(b"\t")
        header = lines[5] if len(lines) > 5 else b""
        if not path:
            continue
        mode, blob, _stage = meta.split(b" ")
        out[path] = (mode, blob)
        try:
            ctime = lines[0].split(b": ", 1)[1].split(b":")
            mtime = lines[1].split(b": ", 1)[1].split(b":")
            ino = int(lines[2].rsplit(b": ", 1)[1])
            size = int(lines[4].split(b"\t")[0].split(b": ", 1)[1])
            m_ns = int(mtime[0]) * 1_000_000_000 + int(mtime[1])
            c_ns = int(ctime[0]) * 1_000_000_000 + int(ctime[1])
        except (IndexError, ValueError):
            continue
        stats[path] = ((m_ns, c_ns, size, ino, 0), blob)
    return out, stats


def _index_seed(worktree: Path, stats: Cache) -> tuple[int, Cache]:
    """For a first snapshot: the index's own stat data, trusted (as git
    does) for entries written before the index itself."""
    pins = pins_for(worktree)
    if pins is None:
        return 0, {}
    try:
        written = os.stat(pins.admin / "index").st_mtime_ns
    except OSError:
        return 0, {}
    return written + RACY_NS, stats


def _untracked(worktree: Path) -> list[bytes]:
    out = git_bytes(worktree, "ls-files", "-z", "--others", "--exclude-standard")
    return [p for p in out.split(b"\0") if p and not p.endswith(b"/")]


Last = tuple[bytes, str]  # the digest of a snapshot's entries, and its tree id


def _load_cache(path: Path | None) -> tuple[int, Cache, Last | None]:
    if path is None:
        return 0, {}, None
    try:
        started, files, last = marshal.loads(path.read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return 0, {}, None
    if not isinstance(started, int) or not isinstance(files, dict):
        return 0, {}, None
    if not (isinstance(last, tuple) and len(last) == 2):
        last = None
    return started, files, last


def _has_tree(worktree: Path, tree: str) -> bool:
    """Whether the repository still holds `tree`: `write-tree` left it a loose
    object, so while that file is there no git process is asked (an unchanged
    worktree is read every few seconds); once gc packed or pruned it, git is."""
    pins = pins_for(worktree)
    if pins is not None and len(tree) > 2:
        with contextlib.suppress(OSError):
            if stat.S_ISREG(os.stat(pins.common / "objects" / tree[:2] / tree[2:]).st_mode):
                return True
    out = git(worktree, "cat-file", "-t", tree, check=False)
    return out.strip() == "tree"


def _save_cache(path: Path | None, started: int, files: Cache, last: Last | None = None) -> None:
    if path is None:
        return
    fresh = path.with_name(f".{path.name}.{os.getpid()}")
    with contextlib.suppress(OSError):
        fresh.write_bytes(marshal.dumps((started, files, last)))
        os.replace(fresh, path)


def _store_blobs(worktree: Path, data: list[bytes]) -> list[bytes]:
    """Write blobs in one `git fast-import`; their ids, in order."""
    if not data:
        return []
    prefix, env = invocation(worktree)
    with tempfile.TemporaryDirectory(prefix="corral-blobs-") as tmp:
        marks = Path(tmp) / "marks"
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
            with contextlib.suppress(BrokenPipeError):
                for n, blob in enumerate(data, start=1):
                    proc.stdin.write(b"blob\nmark :%d\ndata %d\n%s\n" % (n, len(blob), blob))
                proc.stdin.write(b"done\n")
                proc.stdin.close()
            code = proc.wait(timeout=600)
            if code != 0:
                err.seek(0)
                detail = err.read().decode("utf-8", "replace").strip().splitlines()
                raise GitError(f"git fast-import failed: {detail[-1] if detail else code}")
        ids: dict[int, bytes] = {}
        for line in marks.read_bytes().splitlines():
            mark, _, blob = line.partition(b" ")
            ids[int(mark[1:])] = blob.strip()
    return [ids[n] for n in range(1, len(data) + 1)]


def snapshot_files(worktree: Path) -> str:
    """The worktree's content as a tree id, read as bytes (see the module)."""
    worktree = Path(os.path.realpath(worktree))
    started = time.time_ns()
    filemode: list[bool] = []  # asked of git only when a tracked file's mode differs

    def keeps_tracked_mode() -> bool:
        if not filemode:
            said = git(worktree, "config", "--bool", "core.fileMode", check=False).strip()
            filemode.append(said != "false")
        return not filemode[0]

    tracked, index_stats = _tracked(worktree)
    paths = sorted({*tracked, *_untracked(worktree)})
    cache_file = stat_cache_path(worktree) if pins_for(worktree) is not None else None
    last_started, cache, last = _load_cache(cache_file)
    if not cache:
        last_started, cache = _index_seed(worktree, index_stats)
    trust_before = last_started - RACY_NS
    seen: Cache = {}
    entries: list[tuple[bytes, bytes | None, bytes]] = []  # mode, blob (None: read), path
    pending: list[bytes] = []  # data of the entries to store, in order
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
            how = st.st_mode
            if stat.S_ISREG(how):
                known = tracked.get(path)
                mode = REGULAR[1] if how & 0o100 else REGULAR[0]
                if known is not None and known[0] != mode and known[0] in REGULAR:
                    mode = known[0] if keeps_tracked_mode() else mode
                key = (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino, how)
                hit = cache.get(path)
                if (
                    hit is not None
                    and st.st_mtime_ns < trust_before
                    and (hit[0] == key or (hit[0][4] == 0 and hit[0][:4] == key[:4]))
                ):
                    entries.append((mode, hit[1], path))
                    seen[path] = (key, hit[1])
                    continue
                read = _read_regular(dir_fd, name)
                if read is None:
                    continue
                entries.append((mode, None, path))
                pending.append(read[0])
                seen[path] = (read[1], b"")
            elif stat.S_ISLNK(how):
                try:
                    target = os.readlink(name, dir_fd=dir_fd)
                except OSError:
                    continue
                entries.append((b"120000", None, path))
                pending.append(os.fsencode(target))
            elif stat.S_ISDIR(how):
                known = tracked.get(path)
                if known is not None and known[0] == GITLINK:
                    entries.append((GITLINK, known[1], path))
    finally:
        dirs.close()
    stored = iter(_store_blobs(worktree, pending))
    listing: list[bytes] = []
    for mode, blob, path in entries:
        if blob is None:
            blob = next(stored)
            if path in seen:
                seen[path] = (seen[path][0], blob)
        listing.append(b"%s %s\t%s\0" % (mode, blob, path))
    content = b"".join(listing)
    digest = hashlib.sha256(content).digest()
    if last is not None and last[0] == digest and _has_tree(worktree, last[1]):
        tree = last[1]  # the same entries as last time: the same tree
    else:
        with tempfile.TemporaryDirectory(prefix="corral-index-") as tmp:
            index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            git_bytes(
                worktree, "update-index", "-z", "--index-info", input_bytes=content, env=index
            )
            tree = git(worktree, "write-tree", env=index).strip()
    _save_cache(cache_file, started, seen, (digest, tree))
    return tree
