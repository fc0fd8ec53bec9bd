"""File-system look-ups that remember what their answers depended on, so a
result built from them (a sandbox's mount list) can be kept and used again
while, and only while, every path it looked at is as it was.

Each look-up walks its path as the kernel resolves it (component by
component, following links) and records the `lstat` of every component it
passed, and of every one it found missing. An answer depends on nothing else:
on what each component is (its type and permissions), which object it is
(device and inode) and, for a link, where it points — a link's target never
changes without its inode. So `Witness.holds()` (one `lstat` per recorded
path, read again) says whether the same look-ups would answer the same now:
a link swapped for a directory or a directory for a link, a credential file
made where there was none, a permission changed, each changes a recorded
`lstat`. What else the result read (an environment variable, the passwd
entry's home) is recorded as a value and read again.

A link replaced by another link could get the freed inode number back; its
ctime then differs, unless both fell in the same timestamp tick. A witness
that saw a link changed less than `RACY_SECS` before the recording is
`racy()` (git calls such index entries "racily clean") and its result is not
kept.

Without a witness in effect (`watching`), the look-ups are plain `os.path`
calls: nothing is recorded."""

from __future__ import annotations

import contextlib
import os
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field

RACY_SECS = 2.0
MAX_LINKS = 40  # as the kernel's limit on links followed in one look-up

# (mode, device, inode, a link's ctime ns) of an lstat; None: nothing there.
# A directory's times are left out: they move with every entry made or
# removed in it, and what the look-ups saw in it is recorded entry by entry.
Signature = tuple[int, int, int, int] | None


def _signature(path: str) -> Signature:
    try:
        st = os.lstat(path)
    except (OSError, ValueError):
        return None
    changed = st.st_ctime_ns if stat.S_ISLNK(st.st_mode) else 0
    return (st.st_mode, st.st_dev, st.st_ino, changed)


@dataclass
class Witness:
    """What a computation looked at: paths (their lstat) and values."""

    paths: dict[str, Signature] = field(default_factory=dict)
    values: list[tuple[Callable[[], object], object]] = field(default_factory=list)
    unsure: bool = False  # a look-up it could not follow (a link loop): never kept

    def look(self, path: str) -> Signature:
        if path not in self.paths:
            self.paths[path] = _signature(path)
        return self.paths[path]

    def value(self, read: Callable[[], object]) -> object:
        got = read()
        self.values.append((read, got))
        return got

    def holds(self) -> bool:
        """Whether every recorded path and value is still as recorded."""
        if self.unsure:
            return False
        for path, seen in self.paths.items():
            if _signature(path) != seen:
                return False
        return all(read() == got for read, got in self.values)

    def racy(self, now: float | None = None) -> bool:
        """Whether a recorded link changed too recently to be trusted."""
        if self.unsure:
            return True
        edge = int(((time.time() if now is None else now) - RACY_SECS) * 1e9)
        return any(s is not None and s[3] >= edge for s in self.paths.values())


_current: ContextVar[Witness | None] = ContextVar("corral_sandbox_witness", default=None)


@contextlib.contextmanager
def watching(witness: Witness) -> Iterator[Witness]:
    """Record every look-up of this module made inside the block."""
    token = _current.set(witness)
    try:
        yield witness
    finally:
        _current.reset(token)


def _walk(w: Witness, path: str, follow_last: bool) -> tuple[str, Signature]:
    """`os.path.realpath(path)` (non-strict), recording every component's
    lstat; with the final component's signature (its target's when it is a
    link and `follow_last`)."""
    path = os.fspath(path)
    if not path.startswith("/"):  # resolved from the working dir: read again on `holds()`
        path = os.path.join(str(w.value(os.getcwd)), path)
    links = [0]

    def join(resolved: str, rest: str, follow: bool) -> tuple[str, Signature]:
        names = [n for n in rest.split("/") if n and n != "."]
        sig: Signature = w.look(resolved)
        for i, name in enumerate(names):
            if name == "..":
                resolved = os.path.dirname(resolved) or "/"
                sig = w.look(resolved)
                continue
            candidate = ("" if resolved == "/" else resolved) + "/" + name
            sig = w.look(candidate)
            last = i == len(names) - 1
            if sig is None or not stat.S_ISLNK(sig[0]) or (last and not follow):
                resolved = candidate
                continue
            links[0] += 1
            if links[0] > MAX_LINKS:
                w.unsure = True  # a loop: nothing resolves (as `os.stat` finds)
                return os.path.realpath(candidate), None
            try:
                target = os.readlink(candidate)
            except OSError:
                w.unsure = True
                resolved = candidate
                continue
            start = "/" if target.startswith("/") else resolved
            resolved, sig = join(start, target, True)
        return resolved, sig

    return join("/", path, follow_last)


def real(path: str | os.PathLike[str]) -> str:
    """`os.path.realpath`, recorded."""
    w = _current.get()
    if w is None:
        return os.path.realpath(path)
    return _walk(w, os.fspath(path), True)[0]


def _mode(path: str | os.PathLike[str], follow: bool) -> int | None:
    w = _current.get()
    if w is None:
        try:
            st = os.stat(path) if follow else os.lstat(path)
        except (OSError, ValueError):
            return None
        return st.st_mode
    sig = _walk(w, os.fspath(path), follow)[1]
    return None if sig is None else sig[0]


def exists(path: str | os.PathLike[str]) -> bool:
    return _mode(path, True) is not None


def lexists(path: str | os.PathLike[str]) -> bool:
    return _mode(path, False) is not None


def isdir(path: str | os.PathLike[str]) -> bool:
    mode = _mode(path, True)
    return mode is not None and stat.S_ISDIR(mode)


def isfile(path: str | os.PathLike[str]) -> bool:
    mode = _mode(path, True)
    return mode is not None and stat.S_ISREG(mode)


def islink(path: str | os.PathLike[str]) -> bool:
    mode = _mode(path, False)
    return mode is not None and stat.S_ISLNK(mode)


def readlink(path: str | os.PathLike[str]) -> str:
    """`os.readlink` of a link `islink` saw (its inode recorded: a link's
    target never changes without its inode)."""
    islink(path)
    return os.readlink(path)


def host_env(key: str) -> str | None:
    """`os.environ.get(key)`, recorded."""
    w = _current.get()
    if w is None:
        return os.environ.get(key)
    got = w.value(lambda: os.environ.get(key))
    return got if isinstance(got, str) else None


def recorded(read: Callable[[], str]) -> str:
    """`read()`, recorded as a value read again on `holds()`."""
    w = _current.get()
    if w is None:
        return read()
    got = w.value(read)
    return got if isinstance(got, str) else ""


class RecordedEnv(Mapping[str, str]):
    """A run's environment whose reads are recorded (the key and what it held)."""

    def __init__(self, env: Mapping[str, str], witness: Witness) -> None:
        self._env = env
        self._witness = witness
        self.read: dict[str, str | None] = {}

    def __getitem__(self, key: str) -> str:
        value = self._env.get(key)
        self.read[key] = value
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        raise TypeError("a recorded environment is read by key only")

    def __len__(self) -> int:
        return len(self._env)

    def same_reads(self, env: Mapping[str, str]) -> bool:
        """Whether `env` holds what this one was read for."""
        return all(env.get(key) == value for key, value in self.read.items())
