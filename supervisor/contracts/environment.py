"""The setup phase: a per-worktree environment the checks run in.

Where it lives: `<state dir>/envs/<key>/` — corral's private area, never the
worktree's tracked tree (a venv there would show up in every diff and be
hashed into every verified tree). Setup commands see it as `$CORRAL_ENV`;
checks run with its `bin` first on PATH, and with `VIRTUAL_ENV` set when it
is a Python venv.

Reuse: the key hashes the files that define the environment (lock files,
`pyproject.toml`, `setup.cfg`, `setup.py`, `package.json`, …), the setup
commands, the interpreter, and whatever else the setup's result depends on
(`reuse_basis`): nothing more for installs into `$CORRAL_ENV`, global
package caches and package-manager installs (`npm ci` filling
`node_modules`); the compiled sources (`.c`, `.pyx`, …) for a C extension
built in place; the whole tracked tree for any other command. Never the
worktree's path: the tenth session on a repository, and every fresh checkout
of one session (baseline, verification, delivery), finds a ready environment
(a marker file written only after every command passed) and runs nothing.

What a setup writes into the tree itself (`node_modules`, a built `.so`, a
version file) is kept beside the environment (`<key>/tree/`) and copied into
each later checkout instead of running the setup again: copy-on-write where
the filesystem can (`cp --reflink=auto`), else a plain copy. Never a
hardlink: a check runs the tree's own (agent-written) code with the tree
writable, and a write through a hardlink would change the copy every later
session gets. Environments keyed by a whole tree are pruned a day after
their last use.

Editable installs: `pip install -e .` points the venv at the worktree it ran
in (often the baseline's disposable copy). A Python environment is
therefore used with the worktree's own import roots first on `PYTHONPATH`
(`src/` for a src layout, else the worktree): path entries win over the
editable finder and `.pth` paths, so every worktree imports its own code
while the dependencies, scripts and metadata come from the reused venv.

Isolation: setup runs in the sandbox *with* the network (package indexes) and
with the environment dir and the package managers' download caches writable;
checks run without the network and see the environment read-only.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..git.run import git
from ..governance.env_scrub import scrubbed_env
from ..models import OutcomeContract, SetupOutcome
from ..sandbox import Grant
from .checks import run_command

ENV_VAR = "CORRAL_ENV"
READY_MARKER = ".corral-env.json"
OUTPUT_TAIL_CHARS = 4000
MANY_TREE_FILES = 1000  # a setup writing this many unignored files into the tree is named

#: Files whose content decides what the environment holds.
DEFINING_FILES: tuple[str, ...] = (
    *("pyproject.toml", "setup.cfg", "setup.py", "uv.lock", "poetry.lock", "pdm.lock"),
    *("Pipfile", "Pipfile.lock", "tox.ini", "noxfile.py"),
    *("package.json", "package-lock.json", "npm-shrinkwrap.json", "pnpm-lock.yaml", "yarn.lock"),
    *("Cargo.toml", "Cargo.lock", "go.mod", "go.sum", "Makefile"),
)
_REQUIREMENTS = re.compile(r"^requirements.*\.(txt|in)$")
_GLOBAL_FETCH = re.compile(r"^\s*(cargo fetch|go mod download)(\s|$)")
# installs whose result depends on the manifests alone (defining files)
_MANIFEST_INSTALL = re.compile(r"^\s*(npm (ci|install|i)|pnpm (install|i)|yarn( install)?)(\s|$)")
TREE_COPY = "tree"  # what the setup wrote into the tree, kept beside its environment
STALE_TREE_ENV_SECS = 24 * 3600  # a tree-keyed environment unused this long is pruned
#: Sources a C extension's in-place build reads (its key hashes them).
COMPILED_SUFFIXES: tuple[str, ...] = (
    *(".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx", ".pyx", ".pxd", ".pxi"),
    *(".f", ".f90", ".m", ".mm", ".rs", ".go", ".S", ".asm"),
)

#: What an environment's content depends on, beyond its defining files and commands.
ReuseBasis = Literal["manifests", "compiled_sources", "tree"]

#: Download caches setup may fill (they exist only once a tool created them).
CACHE_DIRS: tuple[str, ...] = (
    *(".cache/pip", ".cache/uv", ".cache/pypoetry", ".cache/pdm", ".cache/hatch"),
    *(".npm", ".cache/yarn", ".local/share/pnpm", ".cargo/registry", ".cargo/git", "go/pkg/mod"),
)


def defining_files(root: Path) -> list[Path]:
    """The environment-defining files present at the repository root, sorted."""
    found = [root / name for name in DEFINING_FILES if (root / name).is_file()]
    with contextlib.suppress(OSError):
        found += [p for p in root.iterdir() if _REQUIREMENTS.match(p.name) and p.is_file()]
    return sorted(set(found))


def has_c_extension(root: Path) -> bool:
    """A Python project that compiles code in place (its build reads its C sources)."""
    setup_py = root / "setup.py"
    with contextlib.suppress(OSError):
        text = setup_py.read_text(encoding="utf-8", errors="replace") if setup_py.is_file() else ""
        if "ext_modules" in text or "Extension(" in text:
            return True
    pyproject = root / "pyproject.toml"
    with contextlib.suppress(OSError):
        if pyproject.is_file() and "ext-modules" in pyproject.read_text("utf-8", "replace"):
            return True
    return False


#: How a setup runs a project's own step (a tox compile step) with the
#: environment's tools first on PATH: what it writes is the project's
#: business (usually the tree), so it never counts as an install into the env.
RUN_IN_ENV = f'PATH="${ENV_VAR}/bin:$PATH" '


def _names_env(command: str) -> bool:
    if command.startswith(RUN_IN_ENV):
        return False
    return f"${ENV_VAR}" in command or f"${{{ENV_VAR}}}" in command


def reuse_basis(commands: list[str], root: Path) -> ReuseBasis:
    """What else decides the setup's result: nothing but the manifests for
    installs (into `$CORRAL_ENV`, a global cache, or `node_modules` by a
    package manager), the compiled sources for a C extension, else the whole
    tracked tree (a command corral cannot read, e.g. `make build`, or a
    project's own step run in the environment, e.g. a catalogue compile
    whose `.po` sources no manifest names)."""
    if any(c.startswith(RUN_IN_ENV) for c in commands):
        return "tree"
    if has_c_extension(root):
        return "compiled_sources"
    if all(_names_env(c) or _GLOBAL_FETCH.match(c) or _MANIFEST_INSTALL.match(c) for c in commands):
        return "manifests"
    return "tree"


def tracked_digest(root: Path, suffixes: tuple[str, ...] | None = None) -> bytes:
    """The tracked files' content as one digest (their blob ids from the
    index), optionally only those whose names end in `suffixes`."""
    listing = git(root, "ls-files", "-s", "-z", check=False)
    digest = hashlib.sha256()
    for entry in sorted(e for e in listing.split("\0") if e):
        if suffixes is None or entry.endswith(suffixes):
            digest.update(entry.encode() + b"\0")
    return digest.digest()


def env_key(root: Path, commands: list[str], basis: ReuseBasis) -> str:
    """The cache key: defining files, setup commands, interpreter, and what
    `basis` adds (the compiled sources, or the whole tracked tree)."""
    digest = hashlib.sha256()
    digest.update(b"corral-env-2\0")
    python = shutil.which("python3") or sys.executable
    digest.update(os.path.realpath(python).encode() + b"\0")
    for path in defining_files(root):
        digest.update(path.name.encode() + b"\0")
        with contextlib.suppress(OSError):
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    for command in commands:
        digest.update(command.strip().encode() + b"\0")
    digest.update(basis.encode() + b"\0")
    if basis == "compiled_sources":
        digest.update(tracked_digest(root, COMPILED_SUFFIXES))
    elif basis == "tree":
        digest.update(tracked_digest(root))
    return digest.hexdigest()[:20]


def import_roots(worktree: Path) -> list[str]:
    """Where the worktree's own Python code is imported from (src layout first)."""
    src = worktree / "src"
    roots = [str(src)] if src.is_dir() else []
    return [*roots, str(worktree)]


@dataclass(frozen=True)
class CheckEnvironment:
    """What a check gets from a ready environment: variables and read access."""

    env_dir: Path
    worktree: Path
    shared: bool

    @property
    def grant(self) -> Grant:
        return Grant(readable=(self.env_dir,))

    def apply(self, env: Mapping[str, str]) -> dict[str, str]:
        out = dict(env)
        out[ENV_VAR] = str(self.env_dir)
        bin_dir = self.env_dir / "bin"
        if bin_dir.is_dir():
            out["PATH"] = f"{bin_dir}{os.pathsep}{out.get('PATH', os.defpath)}"
        if (self.env_dir / "pyvenv.cfg").is_file():
            out["VIRTUAL_ENV"] = str(self.env_dir)
            out.pop("PYTHONHOME", None)
            if self.shared:
                roots = import_roots(self.worktree)
                if out.get("PYTHONPATH"):
                    roots.append(out["PYTHONPATH"])
                out["PYTHONPATH"] = os.pathsep.join(roots)
        return out


def setup_env(env_dir: Path) -> dict[str, str]:
    """The environment setup commands run with (credentials scrubbed like checks)."""
    env = scrubbed_env(invoked_by="corral-setup")
    env[ENV_VAR] = str(env_dir)
    # uv and hatch put their environment where they are told (not in the worktree)
    env["UV_PROJECT_ENVIRONMENT"] = str(env_dir)
    env["HATCH_ENV_TYPE_VIRTUAL_PATH"] = str(env_dir)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env.pop("VIRTUAL_ENV", None)
    return env


def _cache_dirs() -> tuple[Path, ...]:
    home = Path.home()
    return tuple(home / rel for rel in CACHE_DIRS if (home / rel).is_dir())


@dataclass
class SetupRun:
    """A finished setup: the outcome to show, and the environment checks use."""

    outcome: SetupOutcome
    environment: CheckEnvironment | None = None
    discard: list[Path] = field(default_factory=list)  # envs to remove with a scratch worktree


class Environments:
    """Builds, finds and locks environments under `<state dir>/envs`."""

    def __init__(self, state_dir: Path) -> None:
        self.root = state_dir / "envs"

    def _dir(self, key: str) -> Path:
        return self.root / key

    async def _lock(self, key: str) -> int:
        """An exclusive lock on one key (across processes); polled so a
        cancelled wait never leaves a lock held."""
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                try:
                    await asyncio.sleep(0.2)
                except asyncio.CancelledError:
                    os.close(fd)
                    raise

    async def prepare(
        self,
        contract: OutcomeContract,
        worktree: Path,
        *,
        phase: Literal["baseline", "verification"] = "baseline",
        timeout_ceiling: float | None = None,
        readable: tuple[Path, ...] = (),
    ) -> SetupRun | None:
        """Make the contract's environment ready for `worktree` (None: no
        setup). `readable`: more paths the setup may read (the objects a
        `corral verify` checkout borrows)."""
        if not contract.setup:
            return None
        started = time.monotonic()
        basis = reuse_basis(contract.setup, worktree)
        key = await asyncio.to_thread(env_key, worktree, contract.setup, basis)
        env_dir = self._dir(key)
        shared = basis != "tree"
        # every checkout imports its own code first (the venv may be another's)
        environment = CheckEnvironment(env_dir=env_dir, worktree=worktree, shared=True)
        fd = await self._lock(key)
        try:
            base = SetupOutcome(ok=True, env_dir=str(env_dir), shared=shared, phase=phase)
            ready = _ready_marker(env_dir)
            if ready is not None and await asyncio.to_thread(_reuse, env_dir, ready, worktree):
                base.cached = True
                base.duration_ms = int((time.monotonic() - started) * 1000)
                return SetupRun(base, environment)
            await asyncio.to_thread(shutil.rmtree, env_dir, True)  # never reuse a partial one
            env_dir.mkdir(parents=True)
            env = setup_env(env_dir)
            grant = Grant(writable=(env_dir, *_cache_dirs()), readable=readable)
            budget = float(contract.setup_timeout_secs)
            if timeout_ceiling is not None:
                budget = min(budget, timeout_ceiling)
            deadline = time.monotonic() + budget
            log: list[str] = []
            for command in contract.setup:
                left = max(0.1, deadline - time.monotonic())
                code, output, timed_out = await run_command(
                    command, worktree, left, env, network=True, grant=grant
                )
                log.append(f"$ {command}\n{output}")
                if timed_out or code != 0:
                    tail = "\n".join(log)[-OUTPUT_TAIL_CHARS:]
                    if timed_out:
                        tail += f"\n[corral] setup timed out after {budget:.0f}s"
                    failed = base.model_copy(
                        update={
                            "ok": False,
                            "exit_code": code,
                            "timed_out": timed_out,
                            "output_tail": tail,
                            "failed_command": command,
                            "duration_ms": int((time.monotonic() - started) * 1000),
                        }
                    )
                    return SetupRun(failed, None, [env_dir])
            written = await asyncio.to_thread(_written_into, worktree)
            kept = await asyncio.to_thread(_keep_tree_outputs, worktree, env_dir)
            marker = {
                "key": key,
                "setup": contract.setup,
                "basis": basis,
                "tree_outputs": kept,
                "at": time.time(),
            }
            (env_dir / READY_MARKER).write_text(json.dumps(marker), encoding="utf-8")
            if len(written.unignored) >= MANY_TREE_FILES:
                log.append(
                    f"[corral] the setup wrote {len(written.unignored)} files into the tree that "
                    f"no .gitignore covers (e.g. {written.unignored[0]}); an agent running it "
                    "would put them in its diff: ignore them"
                )
            base.output_tail = "\n".join(log)[-OUTPUT_TAIL_CHARS:]
            base.duration_ms = int((time.monotonic() - started) * 1000)
            return SetupRun(base, environment)
        finally:
            os.close(fd)

    def prune(self, now: float | None = None) -> list[Path]:
        """Remove environments no checkout will ask for again: those keyed by
        a whole tree and unused for `STALE_TREE_ENV_SECS`, and (from older
        corral versions) a worktree's own whose worktree is gone. One keyed by
        manifests or compiled sources stays: the next session reuses it."""
        removed: list[Path] = []
        now = time.time() if now is None else now
        try:
            entries = list(self.root.iterdir())
        except OSError:
            return removed
        for env_dir in entries:
            path = env_dir / READY_MARKER
            try:
                marker = json.loads(path.read_text(encoding="utf-8"))
                used = path.stat().st_mtime
            except (OSError, ValueError):
                continue
            if not isinstance(marker, dict):
                continue
            owner = marker.get("worktree")
            gone = isinstance(owner, str) and not Path(owner).is_dir()
            stale = marker.get("basis") == "tree" and now - used > STALE_TREE_ENV_SECS
            if gone or stale:
                shutil.rmtree(env_dir, ignore_errors=True)
                removed.append(env_dir)
        return removed


def _ready_marker(env_dir: Path) -> dict[str, object] | None:
    """The ready marker of a complete environment (None: not ready)."""
    try:
        marker = json.loads((env_dir / READY_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) else {}


@dataclass(frozen=True)
class TreeWrites:
    """Files a setup left in the fresh checkout it ran in."""

    unignored: list[str]
    ignored: list[str]


def _written_into(worktree: Path) -> TreeWrites:
    """What the tree holds beyond its commit (the setup ran in a fresh
    checkout, so anything untracked or ignored there is its own)."""
    out = git(worktree, "status", "--porcelain", "--ignored", "--untracked-files=all", check=False)
    unignored = [line[3:] for line in out.splitlines() if line.startswith("?? ")]
    ignored = [line[3:] for line in out.splitlines() if line.startswith("!! ")]
    return TreeWrites(unignored, ignored)


def _tree_outputs(worktree: Path) -> list[str]:
    """What the setup wrote into the tree, as few entries as git names them:
    a directory holding nothing tracked is one entry (`node_modules`)."""
    out = git(
        worktree,
        "status",
        "--porcelain",
        "-z",
        "--ignored",
        "--untracked-files=normal",
        check=False,
    )
    entries = [e[3:].rstrip("/") for e in out.split("\0") if e[:3] in ("?? ", "!! ")]
    return sorted(e for e in entries if e and e != ".git" and not e.startswith(".git/"))


def _copy(source_root: Path, entries: list[str], target_root: Path) -> None:
    """`entries` (paths relative to `source_root`) to the same paths under
    `target_root`, copy-on-write where the filesystem can; symlinks stay links."""
    if not entries:
        return
    target_root.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["cp", "-a", "--parents", "--reflink=auto", "-t", str(target_root), "--", *entries],
        cwd=source_root,
        check=True,
        capture_output=True,
        timeout=600,
    )


def _keep_tree_outputs(worktree: Path, env_dir: Path) -> list[str]:
    """Copy what the setup wrote into the tree beside its environment."""
    entries = _tree_outputs(worktree)
    _copy(worktree, entries, env_dir / TREE_COPY)
    return entries


def _reuse(env_dir: Path, marker: dict[str, object], worktree: Path) -> bool:
    """Make a ready environment this checkout's: copy in what its setup wrote
    into the tree (skipping paths the tree already has). False: it cannot be
    reused (an older format, or the copy failed) and must be built again."""
    entries = marker.get("tree_outputs")
    if "basis" not in marker or not isinstance(entries, list):
        return False
    wanted = [
        e
        for e in entries
        if isinstance(e, str) and not (worktree / e).exists() and not (worktree / e).is_symlink()
    ]
    try:
        _copy(env_dir / TREE_COPY, wanted, worktree)
        os.utime(env_dir / READY_MARKER)  # its last use, for `prune`
    except (OSError, subprocess.SubprocessError):
        return False
    return True


_SETUP_ERROR = re.compile(
    r"^\s*(?:ERROR:|error:|error\[|npm ERR!|npm error|fatal:|E: |Error:|\S*sh: .*not found)",
)
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|[\x00-\x08\x0b-\x1f\x7f]"
)


def setup_error_line(output: str) -> str:
    """The tool's own words for why a setup command failed: its last error
    line (pip's `ERROR: …`, npm's `npm ERR! …`, a shell's `not found`), else
    its last line."""
    lines = [line.strip() for line in _ESCAPES.sub("", output).splitlines() if line.strip()]
    errors = [line for line in lines if _SETUP_ERROR.match(line)]
    words = errors[-1] if errors else (lines[-1] if lines else "")
    return words[:200]


def setup_reason(outcome: SetupOutcome) -> str:
    """One line: why the setup failed, in the failing tool's own words."""
    if outcome.timed_out:
        return f"`{outcome.failed_command}` timed out"
    said = setup_error_line(outcome.output_tail)
    return f"`{outcome.failed_command}` exited {outcome.exit_code}" + (f": {said}" if said else "")
