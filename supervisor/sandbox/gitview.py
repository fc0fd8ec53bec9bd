"""A confined run's private git: everything git writes inside the sandbox
lands in corral's state dir, nothing of the real repository is writable.

Each worktree gets `<state>/sandbox-git/<key>/` (the state dir is never
visible inside, so a run cannot swap any of it for a link):

- `gitdir/`, bound over the worktree's real admin dir: a git dir of its own
  (no `commondir`), made on first use with HEAD detached at the worktree's
  HEAD, a copy of its index (so `git status` is right and fast), its own
  `objects/` whose `info/alternates` names the real object store (visible
  read-only), and a config that includes the repository's. Commits, `git
  stash` (its ref, reflog and lock files) and the objects they write stay
  here and persist across the sandboxed runs of that worktree. `git gc` and
  `git prune` inside only ever see these private objects (`gc.packRefs` is
  off: the operator's refs below are not the run's to pack).
- `user-refs/<n>/`: read-only copies of the operator's branches, tags and
  remote refs (packed or loose), written by corral when they changed and
  bound read-only at `refs/heads`, `refs/tags`, `refs/remotes` inside, so
  `git log main` works; the operator's stash is not among them (the sandbox
  has a stash of its own).
- `dotgit`: what corral wrote into the worktree's `.git` file, bound
  read-only over it after the worktree's own bind, so the pointer cannot be
  changed from inside.

The real shared git dir is bound read-only (objects, refs, config, hooks,
other worktrees), and so is its `info/` inside the private one. corral only
creates these directories and removes them once their worktree is gone; it
never reads what a run left in them.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .layout import GitLayout

VIEWS = "sandbox-git"
SHOWN_REFS = ("heads", "tags", "remotes")
KEPT_REF_COPIES = 3
VIEW_BUILD_SECS = 60.0  # a view younger than this without its admin file is being made


@dataclass(frozen=True)
class GitMounts:
    """bwrap arguments for the repository, in two places of the mount order:
    `shared` after the hiding mounts and before anything writable, `pointer`
    right after the worktree's own read-write bind."""

    shared: list[str] = field(default_factory=list)
    pointer: list[str] = field(default_factory=list)


def _key(admin: Path) -> str:
    """Stable for one worktree; a worktree re-made at the same path gets a
    fresh view (its admin dir is a new inode), so an old stash never shows."""
    try:
        inode = os.stat(admin).st_ino
    except OSError:
        inode = 0
    return hashlib.sha256(f"{admin}\0{inode}".encode()).hexdigest()[:20]


def prune_views(state_dir: Path) -> list[Path]:
    """Remove the views of worktrees that are gone; returns what was removed."""
    root = state_dir / VIEWS
    removed: list[Path] = []
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in root.iterdir():
            try:
                admin = Path((entry / "admin").read_text(encoding="utf-8").strip())
            except (OSError, UnicodeDecodeError):
                admin = None
            with contextlib.suppress(OSError):
                if admin is None and now - entry.stat().st_mtime < VIEW_BUILD_SECS:
                    continue  # another run is making it right now
            if admin is None or not admin.is_dir() or _key(admin) != entry.name:
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry)
    return removed


def discard_view(layout: GitLayout, state_dir: Path | None) -> None:
    """Forget a worktree's private git dir, so the next confined run there
    gets a fresh one at the worktree's current HEAD and index (a checkout
    that is reused for another tree must not show the last run's git)."""
    if layout.admin is None:
        return
    shutil.rmtree((state_dir or _fallback_root()) / VIEWS / _key(layout.admin), ignore_errors=True)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="surrogateescape").strip()
    except OSError:
        return ""


def _head_commit(admin: Path, common: Path) -> str:
    """The worktree's HEAD as a commit id (a detached HEAD, or one ref deep)."""
    head = _read(admin / "HEAD")
    if head.startswith("ref:"):
        name = head[4:].strip()
        loose = _read(common / name)
        if loose and not loose.startswith("ref:"):
            return loose
        return _user_refs(common).get(name, "")
    return head


def _repo_format(common: Path) -> list[str]:
    """The config lines a git dir must hold itself (not through an include)."""
    lines: list[str] = []
    section = ""
    for raw in _read(common / "config").splitlines():
        line = raw.strip()
        if line.startswith("["):
            section = line.strip("[]").strip().lower()
            continue
        name, _, value = line.partition("=")
        name = name.strip().lower()
        if (section, name) in (
            ("core", "repositoryformatversion"),
            ("extensions", "objectformat"),
        ):
            lines.append(f"[{section}]\n\t{name} = {value.strip()}\n")
    return lines


def _create(home: Path, admin: Path, common: Path) -> None:
    """The private git dir, built aside and moved in place (two runs starting
    at once make one)."""
    home.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=".gitdir-", dir=home))
    (build / "objects" / "info").mkdir(parents=True)
    (build / "objects" / "pack").mkdir()
    (build / "objects" / "info" / "alternates").write_text(f"{common / 'objects'}\n")
    for sub in ("refs", "logs", "info", *(f"refs/{name}" for name in SHOWN_REFS)):
        (build / sub).mkdir(exist_ok=True)
    (build / "HEAD").write_text(f"{_head_commit(admin, common)}\n")
    with contextlib.suppress(OSError):
        shutil.copy2(admin / "index", build / "index")  # its mtime too: racy entries stay racy
    config = [
        f"[include]\n\tpath = {common / 'config'}\n",
        *_repo_format(common),
        "[core]\n\tbare = false\n\tlogallrefupdates = true\n",
        "[gc]\n\tpackRefs = false\n",
    ]
    (build / "config").write_text("".join(config))
    try:
        os.rename(build, home / "gitdir")
    except OSError:
        shutil.rmtree(build, ignore_errors=True)  # another run made it first


def _user_refs(common: Path) -> dict[str, str]:
    """The operator's branches, tags and remote refs: packed, then loose."""
    refs: dict[str, str] = {}
    for line in _read(common / "packed-refs").splitlines():
        if line.startswith(("#", "^")):
            continue
        sha, _, name = line.partition(" ")
        if name.startswith(tuple(f"refs/{s}/" for s in SHOWN_REFS)):
            refs[name] = sha
    for sub in SHOWN_REFS:
        top = common / "refs" / sub
        for directory, _dirs, files in os.walk(top):
            for name in files:
                if name.endswith(".lock"):
                    continue
                path = Path(directory) / name
                value = _read(path)
                if value:
                    refs[str(path.relative_to(common))] = value
    return refs


def _refs_signature(common: Path) -> str:
    """Changes whenever a ref is added, moved or removed (git replaces ref
    files by rename, so their directories' times change too)."""
    parts: list[str] = []
    with contextlib.suppress(OSError):
        st = os.stat(common / "packed-refs")
        parts.append(f"p{st.st_ino}:{st.st_mtime_ns}:{st.st_size}")
    for sub in SHOWN_REFS:
        for directory, _dirs, _files in os.walk(common / "refs" / sub):
            with contextlib.suppress(OSError):
                parts.append(f"{directory}:{os.stat(directory).st_mtime_ns}")
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _ref_copies(home: Path, common: Path) -> Path:
    """The current read-only copy of the operator's refs (written when they
    changed; older copies beyond the last few are removed)."""
    root = home / "user-refs"
    copy = root / _refs_signature(common)
    if copy.is_dir():
        return copy
    root.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=".refs-", dir=root))
    for sub in SHOWN_REFS:
        (build / sub).mkdir()
    for name, value in _user_refs(common).items():
        target = build / name.removeprefix("refs/")
        if ".." in Path(name).parts:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"{value}\n", encoding="utf-8", errors="surrogateescape")
    try:
        os.rename(build, copy)
    except OSError:
        shutil.rmtree(build, ignore_errors=True)
    older = sorted(
        (p for p in root.iterdir() if p != copy and not p.name.startswith(".")),
        key=lambda p: p.stat().st_mtime,
    )
    for stale in older[: max(0, len(older) - KEPT_REF_COPIES + 1)]:
        shutil.rmtree(stale, ignore_errors=True)
    return copy


def _pointer_file(home: Path, layout: GitLayout) -> Path:
    """The `.git` file as corral wrote it, to bind read-only over the real one."""
    assert layout.admin is not None
    content = layout.dotgit if layout.dotgit is not None else f"gitdir: {layout.admin}\n".encode()
    path = home / "dotgit"
    if not path.is_file() or path.read_bytes() != content:
        fresh = home / f".dotgit.{os.getpid()}"
        fresh.write_bytes(content)
        os.replace(fresh, path)
    return path


def private_gitdir(layout: GitLayout, state_dir: Path) -> Path:
    """The worktree's private git dir (made on first use); its home is the
    parent directory."""
    assert layout.admin is not None and layout.common is not None
    home = state_dir / VIEWS / _key(layout.admin)
    if not (home / "gitdir" / "HEAD").is_file():
        prune_views(state_dir)
        home.mkdir(parents=True, exist_ok=True)
        # named first: a prune by a run starting beside this one keeps it
        (home / "admin").write_text(str(layout.admin), encoding="utf-8")
        _create(home, layout.admin, layout.common)
    return home / "gitdir"


def _fallback_root() -> Path:
    """Where private git dirs go without a state dir: the host's /tmp, which
    every sandbox covers with a private one."""
    root = Path("/tmp") / f"corral-sandbox-git-{os.getuid()}"
    root.mkdir(mode=0o700, exist_ok=True)
    return root


def git_mounts(layout: GitLayout, state_dir: Path | None) -> GitMounts:
    """The repository inside a sandbox (see the module): nothing of it
    writable. Without a state dir the private git dirs live in the host's
    /tmp; a main checkout gets its `.git` read-only again over the
    worktree's bind."""
    common = layout.common
    if common is None:
        return GitMounts()
    shared = ["--ro-bind", str(common), str(common)]
    if layout.admin is None:
        return GitMounts(shared, ["--ro-bind", str(common), str(common)])
    gitdir = private_gitdir(layout, state_dir or _fallback_root())
    home = gitdir.parent
    admin = layout.admin
    shared += ["--bind", str(gitdir), str(admin)]
    shared += ["--ro-bind-try", str(common / "info"), str(admin / "info")]
    copies = _ref_copies(home, common)
    for sub in SHOWN_REFS:
        shared += ["--ro-bind", str(copies / sub), str(admin / "refs" / sub)]
    pointer = _pointer_file(home, layout)
    return GitMounts(shared, ["--ro-bind", str(pointer), str(layout.top / ".git")])
