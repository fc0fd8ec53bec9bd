"""A host as a place sessions run: its connection, its private tmux server,
and what a session there needs done on it — the base commit pushed to a bare
mirror, a worktree made from it, the agent's helper files installed, the
contract's checks run (inside bubblewrap when the host has it), the worktree
snapshotted into a commit, and that commit fetched home.

The repository stays the operator's local one: corral pushes the session's
base commit to `<state>/mirrors/<hash>.git` on the host (one bare mirror per
local repository), and results come back with `git fetch` over the same
multiplexed connection. Every method blocks; callers use `asyncio.to_thread`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import secrets
import shlex
import threading
from dataclasses import dataclass
from pathlib import Path

from ..git.run import GitError, git
from ..states import label
from .connection import HostConnection
from .fetch import fetch_commit, remote_url
from .probe import remote_path
from .remote_tmux import RemoteTmuxBackend
from .settings import HostSettings
from .unreachable import HostUnreachable
from .worktrees import add_worktree, remove_worktree

log = logging.getLogger("corral.hosts")
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
OUTPUT_LIMIT = 4 * 1024 * 1024  # bytes of a check's output brought home, at most
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"

# The hook command agents on the host run (stdlib only): one JSON line per
# event appended to the session's hooks file there, mirrored home by the sweep.
HOOK_SCRIPT = r"""import json, os, sys, time
args, path, inc, rest = sys.argv[1:], None, None, []
it = iter(args)
for a in it:
    if a == "--file": path = next(it, None)
    elif a == "--incarnation": inc = next(it, None)
    else: rest.append(a)
raw = "" if sys.stdin.isatty() else sys.stdin.read(1000000)
try: payload = json.loads(raw) if raw.strip() else {}
except ValueError: payload = {"raw": raw[:10000]}
row = {"event": rest[0] if rest else "", "ts": time.time(), "payload": payload}
if inc and inc.isdigit(): row["incarnation"] = int(inc)
try:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a") as f: f.write(json.dumps(row) + "\n")
except (OSError, TypeError): pass
"""

_FACTS = """d={state}
mkdir -p "$d" && cd "$d" && printf 'state=%s\\n' "$(pwd)"
printf 'home=%s\\n' "$HOME"
command -v bwrap >/dev/null 2>&1 && printf 'bwrap=yes\\n'
command -v python3 >/dev/null 2>&1 && printf 'python3=%s\\n' "$(command -v python3)"
exit 0
"""

_CHECK = """wt=$1 t=$2 net=$3 confine=$4 cmd=$5 nonce=$6 env=$7
cd "$wt" 2>/dev/null || { printf '%s\\n' "the worktree $wt is missing on this host"; printf '%s %s\\n' "$nonce" 97; exit 0; }
if [ -n "$env" ] && [ -f "$env/.corral-env.json" ]; then
  export CORRAL_ENV="$env" PATH="$env/bin:$PATH"
  [ -f "$env/pyvenv.cfg" ] && export VIRTUAL_ENV="$env"
else
  env=$wt
fi
out=$(mktemp)
if [ "$confine" = 1 ]; then
  if [ "$net" = 1 ]; then share=; else share=--unshare-net; fi
  timeout -k 2 "$t" bwrap --die-with-parent --ro-bind / / --dev /dev --proc /proc \\
    --tmpfs /tmp --ro-bind "$env" "$env" --bind "$wt" "$wt" $share --chdir "$wt" \\
    bash -c "$cmd" </dev/null >"$out" 2>&1
else
  timeout -k 2 "$t" bash -c "$cmd" </dev/null >"$out" 2>&1
fi
code=$?
tail -c {limit} "$out"; rm -f "$out"
printf '\\n%s %s\\n' "$nonce" "$code"
"""

# The setup phase on the host: each command in the worktree with the
# network, `$CORRAL_ENV` (the environment dir there) writable, inside
# bubblewrap when the host has it. The environment is the worktree's own and
# is marked ready (with its key) only after every command passed, so later
# verifications of the same worktree reuse it.
_SETUP = """wt=$1 env=$2 t=$3 confine=$4 key=$5 nonce=$6
shift 6
cd "$wt" 2>/dev/null || { printf '%s\\n' "the worktree $wt is missing on this host"; printf '\\n%s fail 97 -\\n' "$nonce"; exit 0; }
if [ -f "$env/.corral-env.json" ] && grep -q "$key" "$env/.corral-env.json"; then printf '\\n%s cached\\n' "$nonce"; exit 0; fi
rm -rf "$env" && mkdir -p "$env" || { printf '\\n%s fail 98 -\\n' "$nonce"; exit 0; }
export CORRAL_ENV="$env"
end=$(( $(date +%s) + t )) i=0 out=$(mktemp)
for cmd in "$@"; do
  left=$(( end - $(date +%s) )); [ "$left" -lt 1 ] && left=1
  printf '$ %s\\n' "$cmd"
  if [ "$confine" = 1 ]; then
    timeout -k 2 "$left" bwrap --die-with-parent --ro-bind / / --dev /dev --proc /proc \\
      --tmpfs /tmp --bind "$wt" "$wt" --bind "$env" "$env" --chdir "$wt" bash -c "$cmd" </dev/null >"$out" 2>&1
  else
    timeout -k 2 "$left" bash -c "$cmd" </dev/null >"$out" 2>&1
  fi
  code=$?
  tail -c {limit} "$out"
  if [ "$code" != 0 ]; then rm -f "$out"; printf '\\n%s fail %s %s\\n' "$nonce" "$code" "$i"; exit 0; fi
  i=$((i+1))
done
rm -f "$out"
printf '{"key": "%s"}\\n' "$key" > "$env/.corral-env.json"
printf '\\n%s ok\\n' "$nonce"
"""

# Hidden checks' files put into (or taken out of) a verification checkout on
# the host: nothing is followed (a symlink or file the work left where a file
# or its folder goes is removed, never written through), files are 0600. The
# checkout is disposable and removed right after, so nothing is put back.
_HIDDEN_FILES = r"""import base64, json, os, shutil, sys
spec = json.load(sys.stdin)
root = spec["root"]
def clear(p):
    if os.path.isdir(p) and not os.path.islink(p): shutil.rmtree(p)
    elif os.path.lexists(p): os.unlink(p)
for rel, data in spec["files"]:
    parts = rel.split("/")
    here = root
    for part in parts[:-1]:
        here = os.path.join(here, part)
        if os.path.islink(here) or (os.path.lexists(here) and not os.path.isdir(here)):
            os.unlink(here)
        if data is not None and not os.path.isdir(here):
            os.mkdir(here, 0o700)
    target = os.path.join(here, parts[-1])
    if os.path.lexists(target) or data is None:
        if os.path.isdir(os.path.dirname(target)): clear(target)
    if data is not None:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        os.write(fd, base64.b64decode(data)); os.close(fd)
print("ok")
"""

# corral's git in a worktree on a host: no hooks, fsmonitor or untracked cache
# an agent there could have set up (the snapshot script sets the same)
_NO_HOOKS = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")

_SNAPSHOT = """set -e
cd "$1"
idx=$(mktemp)
trap 'rm -f "$idx"' EXIT
export GIT_ATTR_NOSYSTEM=1 GIT_CONFIG_NOSYSTEM=1 GIT_OPTIONAL_LOCKS=0
h="-c core.hooksPath=/dev/null -c core.fsmonitor=false -c core.untrackedCache=false"
cp "$(git $h rev-parse --git-path index)" "$idx" 2>/dev/null || rm -f "$idx"
GIT_INDEX_FILE=$idx git $h add -A -- . >&2
tree=$(GIT_INDEX_FILE=$idx git $h write-tree)
commit=$(git $h commit-tree "$tree" -p "$2" -m "corral: the worktree of $3 as verified on this host")
printf '%s %s\\n' "$tree" "$commit"
"""


@dataclass(frozen=True)
class HostFacts:
    """What a session on the host needs to know about it (one round trip)."""

    state_dir: str  # corral's state dir there, absolute
    home: str
    bwrap: bool
    python3: str


class HostPlace:
    """One configured host, as a place where sessions run."""

    def __init__(self, settings: HostSettings, state_dir: Path) -> None:
        self.settings = settings
        self.name = settings.name
        self.conn = HostConnection(settings, state_dir)
        self.backend = RemoteTmuxBackend(self.conn, settings.state_dir)
        self._facts: HostFacts | None = None
        self._installed: set[str] = set()
        self._lock = threading.Lock()

    # -- what the host is ---------------------------------------------------------------

    def facts(self) -> HostFacts:
        """The host's absolute state dir, home, sandbox and python (asked once)."""
        with self._lock:
            if self._facts is not None:
                return self._facts
            result = self.conn.run_script(_FACTS.format(state=remote_path(self.settings.state_dir)))
            found = dict(
                line.partition("=")[::2] for line in result.text.splitlines() if "=" in line
            )
            if not found.get("state"):
                raise GitError(
                    f"corral's state dir {self.settings.state_dir} cannot be made on host "
                    f"{self.name}: {result.error or 'check its permissions there'}"
                )
            self._facts = HostFacts(
                found["state"], found.get("home", ""), "bwrap" in found, found.get("python3", "")
            )
            return self._facts

    def worktree_path(self, session_id: str) -> str:
        return f"{self.facts().state_dir}/worktrees/{label(session_id)}"

    def mirror_path(self, local_repo: Path) -> str:
        """The bare mirror of `local_repo` on the host (one per local repository)."""
        digest = hashlib.sha256(str(Path(local_repo).resolve()).encode()).hexdigest()[:16]
        return f"{self.facts().state_dir}/mirrors/{Path(local_repo).name}-{digest}.git"

    def where(self, path: str) -> str:
        """`host:path`, as the operator reads it."""
        return f"{self.name}:{path}"

    # -- the session's checkout there ---------------------------------------------------

    def push_base(self, local_repo: Path, commit: str, session_id: str) -> str:
        """Push `commit` from the local repository to its bare mirror on the
        host (made on first use); returns the mirror's path."""
        return self.push(local_repo, {commit: f"refs/corral/base/{session_id}"})

    def push(self, local_repo: Path, refs: dict[str, str]) -> str:
        """Push commits from the local repository to its bare mirror on the
        host (made on first use), each to its ref there; returns the mirror's path."""
        for commit in refs:
            if not _COMMIT.fullmatch(commit):
                raise GitError(f"{commit!r} is not a full commit id")
        mirror = self.mirror_path(local_repo)
        made = self.conn.run(
            [
                "sh",
                "-c",
                'git init --quiet --bare "$1" >/dev/null 2>&1 || [ -d "$1" ]',
                "sh",
                mirror,
            ]
        )
        if made.returncode != 0:
            raise GitError(f"cannot make the mirror {mirror} on host {self.name}: {made.error}")
        self.conn.connect()  # git's ssh rides the master
        env = {"GIT_SSH_COMMAND": shlex.join(self.conn.ssh_base()), "GIT_SSH_VARIANT": "ssh"}
        try:
            git(
                local_repo,
                "push",
                "--quiet",
                "--force",
                remote_url(self.conn, mirror),
                *(f"{commit}:{ref}" for commit, ref in refs.items()),
                timeout=600,
                env=env,
            )
        except GitError as exc:
            shown = ", ".join(c[:12] for c in refs)
            raise GitError(f"cannot push {shown} to host {self.name}: {exc}", exc.stderr) from exc
        return mirror

    def make_worktree(self, local_repo: Path, commit: str, session_id: str) -> tuple[str, str]:
        """The session's worktree on the host at `commit`: (mirror, worktree path)."""
        mirror = self.push_base(local_repo, commit, session_id)
        path = self.worktree_path(session_id)
        add_worktree(self.conn, mirror, path, commit)
        return mirror, path

    def scratch(self, local_repo: Path, commit: str, session_id: str) -> tuple[str, str]:
        """A disposable worktree at `commit` on the host (for the baseline)."""
        self.push_base(local_repo, commit, session_id)
        return self.scratch_at(local_repo, commit, session_id)

    def scratch_at(self, local_repo: Path, commit: str, session_id: str) -> tuple[str, str]:
        """A disposable worktree on the host at a commit its mirror already
        holds (a snapshot of a worktree there): (mirror, path)."""
        mirror = self.mirror_path(local_repo)
        path = f"{self.facts().state_dir}/scratch/{label(session_id)}-{secrets.token_hex(3)}"
        add_worktree(self.conn, mirror, path, commit)
        return mirror, path

    def remove(self, mirror: str, path: str) -> None:
        remove_worktree(self.conn, mirror, path)

    # -- files the agent needs there ----------------------------------------------------

    def install(self, name: str, data: bytes, *, executable: bool = False) -> str:
        """Put one of corral's helper files in `<state>/bin` on the host
        (once per process, and again when its content changed); returns its path."""
        digest = hashlib.sha256(data).hexdigest()[:12]
        path = f"{self.facts().state_dir}/bin/{name}"
        if f"{name}:{digest}" in self._installed:
            return path
        self.put(path, data, executable=executable)
        self._installed.add(f"{name}:{digest}")
        return path

    def put(self, path: str, data: bytes, *, executable: bool = False) -> None:
        """Write a file on the host (its directory made, replaced whole)."""
        script = 'mkdir -p "$(dirname "$1")" && cat > "$1.tmp" && chmod "$2" "$1.tmp" && mv "$1.tmp" "$1"'
        mode = "755" if executable else "600"
        result = self.conn.run(["sh", "-c", script, "sh", path, mode], input=data)
        if result.returncode != 0:
            raise GitError(f"cannot write {path} on host {self.name}: {result.error}")

    def session_dir(self, session_id: str) -> str:
        """The session's own directory on the host (hooks, an agent's run files)."""
        return f"{self.facts().state_dir}/agents/{session_id}"

    def hook_command(self, session_id: str, incarnation: int | None) -> str:
        """The shell command an agent on the host runs for a hook (its event
        name is appended), writing to the hooks file the sweep mirrors home."""
        facts = self.facts()
        if not facts.python3:
            raise GitError(f"python3 is not installed on host {self.name}: hooks need it there")
        script = self.install("corral-hook.py", HOOK_SCRIPT.encode())
        parts = [facts.python3, script, "--file", self.backend.remote_hooks_file(session_id)]
        if incarnation is not None:
            parts += ["--incarnation", str(incarnation)]
        words = [shlex.quote(p) for p in parts]
        words[3] = remote_path(parts[3])  # `~/` there means the remote user's home
        return " ".join(words)

    def env(self) -> dict[str, str]:
        """A minimal environment for an agent on the host."""
        facts = self.facts()
        env = {"PATH": DEFAULT_PATH, "LANG": "C.UTF-8", "TERM": "xterm-256color"}
        if facts.home:
            env["HOME"] = facts.home
        return env

    # -- checks and results -------------------------------------------------------------

    def run_check(
        self, command: str, worktree: str, timeout: float, *, network: bool, env_dir: str = ""
    ) -> tuple[int | None, str, bool]:
        """Run one check's command in `worktree` on the host, confined by
        bubblewrap when the host has it, inside the setup's environment
        `env_dir` once it is ready; (exit code or None, output, timed out)."""
        nonce = secrets.token_hex(8)
        seconds = max(1, round(timeout))
        argv = [
            "sh",
            "-c",
            _CHECK.replace("{limit}", str(OUTPUT_LIMIT)),
            "sh",
            worktree,
            str(seconds),
            "1" if network else "0",
            "1" if self.facts().bwrap else "0",
            command,
            nonce,
            env_dir,
        ]
        result = self.conn.run(argv, timeout=seconds + 30)
        text = result.stdout.decode("utf-8", "replace")
        body, _, tail = text.rpartition(f"\n{nonce} ")
        code_text = tail.strip()
        if not code_text.lstrip("-").isdigit():
            raise HostUnreachable(
                self.name, f"host {self.name} did not finish the check: {result.error or text}"
            )
        code = int(code_text)
        if code in (124, 137):  # timeout's own status, or killed after the grace
            return None, body, True
        return code, body, False

    def hidden_files(self, checkout: str, files: list[tuple[str, bytes | None]]) -> None:
        """Write (bytes) or remove (None) hidden checks' files in a
        verification checkout on the host (see `_HIDDEN_FILES`), in one round trip."""
        facts = self.facts()
        if not facts.python3:
            raise GitError(f"python3 is not installed on host {self.name}: hidden checks need it")
        spec = {
            "root": checkout,
            "files": [
                [rel, None if data is None else base64.b64encode(data).decode()]
                for rel, data in files
            ],
        }
        result = self.conn.run(
            [facts.python3, "-c", _HIDDEN_FILES],
            input=json.dumps(spec).encode(),
            timeout=120,
        )
        if result.returncode != 0 or result.text.strip() != "ok":
            why = result.error.splitlines()[-1] if result.error else f"status {result.returncode}"
            raise GitError(f"cannot place the hidden checks' files on host {self.name}: {why}")

    def env_dir(self, worktree: str, setup: list[str]) -> tuple[str, str]:
        """Where the setup's environment of `worktree` lives on the host, and
        its key (the commands and the worktree: it is the worktree's own)."""
        digest = hashlib.sha256("\0".join([worktree, *setup]).encode()).hexdigest()[:20]
        return f"{self.facts().state_dir}/envs/{digest}", digest

    def run_setup(
        self, setup: list[str], worktree: str, timeout: float
    ) -> tuple[str, str, bool, int | None, str, bool]:
        """Run the setup commands in `worktree` on the host (see `_SETUP`):
        (env dir, output, cached, exit code or None when it timed out, the
        failed command, timed out); exit code 0 means ready."""
        env, key = self.env_dir(worktree, setup)
        nonce = secrets.token_hex(8)
        seconds = max(1, round(timeout))
        confine = "1" if self.facts().bwrap else "0"
        script = _SETUP.replace("{limit}", str(OUTPUT_LIMIT))
        argv = ["sh", "-c", script, "sh", worktree, env, str(seconds), confine, key, nonce, *setup]
        result = self.conn.run(argv, timeout=seconds + 60)
        text = result.stdout.decode("utf-8", "replace")
        body, _, tail = text.rpartition(f"\n{nonce} ")
        words = tail.split()
        if not words or words[0] not in ("ok", "cached", "fail"):
            raise HostUnreachable(
                self.name, f"host {self.name} did not finish the setup: {result.error or text}"
            )
        if words[0] != "fail":
            return env, body, words[0] == "cached", 0, "", False
        code = int(words[1]) if len(words) > 1 and words[1].isdigit() else 1
        index = int(words[2]) if len(words) > 2 and words[2].isdigit() else -1
        failed = setup[index] if 0 <= index < len(setup) else ""
        timed_out = code in (124, 137)
        return env, body, False, None if timed_out else code, failed, timed_out

    def remove_env(self, env_dir: str) -> None:
        """Remove a setup environment on the host (a disposable worktree's)."""
        self.conn.run(["rm", "-rf", "--", env_dir])

    def snapshot(self, worktree: str, start_commit: str, session_id: str) -> tuple[str, str]:
        """The worktree's content on the host as (tree id, a commit of it on
        `start_commit`); its own index is untouched."""
        result = self.conn.run(
            ["sh", "-c", _SNAPSHOT, "sh", worktree, start_commit, label(session_id)], timeout=300
        )
        words = result.text.split()
        if result.returncode != 0 or len(words) != 2 or not all(map(_COMMIT.fullmatch, words)):
            why = result.error.splitlines()[-1] if result.error else f"status {result.returncode}"
            raise GitError(f"cannot snapshot {worktree} on host {self.name}: {why}")
        return words[0], words[1]

    def changed(self, worktree: str, a: str, b: str) -> list[str]:
        """Paths that differ between two trees on the host, sorted."""
        result = self.conn.run(
            [
                *("git", "-C", worktree, *_NO_HOOKS),
                *("diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--no-textconv"),
                *(a, b, "--"),
            ]
        )
        if result.returncode != 0:
            raise GitError(f"cannot compare two snapshots on host {self.name}: {result.error}")
        return sorted({p for p in result.text.split("\0") if p})

    def bring_home(self, mirror: str, commit: str, local_repo: Path) -> str:
        """Fetch `commit` from the host's mirror into the local repository."""
        return fetch_commit(self.conn, mirror, commit, local_repo)

    def close(self) -> None:
        self.backend.close()
        self.conn.close()
