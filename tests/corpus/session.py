"""A scripted agent's work on a corpus project, through `corral run` as a
user runs it headless: the conventions lane drafts the contract, `--yes`
confirms it, a one-shot agent applies scripted edits, corral verifies and
delivers to a branch. A correct change (a small real edit plus a test) must be
delivered and pass again on a clean checkout of the delivered branch; a
regression (an edit that breaks what the project's tests cover) must be
refused. Used by tests/corpus/runner.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from corral.supervisor.contracts.checks import run_contract
from corral.supervisor.contracts.environment import Environments

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_SECS = 420

#: Edits as the one-shot agent applies them, relative to its worktree.
Edit = dict[str, str]

APPLY = """import json, pathlib, sys
for edit in json.loads({edits!r}):
    path = pathlib.Path(edit["path"])
    if "write" in edit:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(edit["write"])
    elif "append" in edit:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((path.read_text() if path.exists() else "") + edit["append"])
    else:
        text = path.read_text()
        if edit["old"] not in text:
            sys.exit(f"{{path}}: {{edit['old']!r}} not found")
        path.write_text(text.replace(edit["old"], edit["new"], 1))
print("applied", len(json.loads({edits!r})), "edits")
"""


@dataclass
class SessionResult:
    """How one `corral run` ended, as its exit code and last JSON line say."""

    exit_code: int
    state: str
    branch: str
    error: str
    secs: float

    @property
    def delivered(self) -> bool:
        return self.exit_code == 0 and bool(self.branch)


def _agent_script(where: Path, name: str, edits: list[Edit]) -> Path:
    script = where / f"{name}.py"
    script.write_text(APPLY.format(edits=json.dumps(edits)), encoding="utf-8")
    return script


def corral_run(repo: Path, home: Path, intent: str, script: Path) -> SessionResult:
    """`corral run` headless with a one-shot agent running `script`."""
    home.mkdir(parents=True, exist_ok=True)
    config = home / "config.toml"
    # a regression is refused on its first verification: no repair rounds
    config.write_text("[supervisor]\nrepair_invokes = 0\n", encoding="utf-8")
    env = dict(os.environ, CORRAL_HOME=str(home), CORRAL_CONFIG=str(config))
    env["CORRAL_TMUX_SOCKET_DIR"] = str(home / "tmux")
    env["PYTHONPATH"] = str(ROOT)
    argv = [sys.executable, "-m", "corral.tui.cli", "run", "--repo", str(repo)]
    argv += ["--intent", intent, "--agent", f"oneshot:{sys.executable} {script}"]
    # headless as in CI: nobody answers (a question or a check that cannot run
    # ends the run waiting for the operator, exit 4)
    argv += ["--yes", "--deliver", "branch", "--json", "--on-question", "deny"]
    started = time.monotonic()
    try:
        proc = subprocess.run(
            argv,
            cwd=repo,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_SECS,
        )
    except subprocess.TimeoutExpired:
        secs = time.monotonic() - started
        return SessionResult(-1, "", "", f"corral run took over {RUN_TIMEOUT_SECS}s", secs)
    finally:
        _stop_private_tmux(home)
    secs = time.monotonic() - started
    last: dict[str, Any] = {}
    for line in reversed(proc.stdout.strip().splitlines()):
        try:
            last = json.loads(line)
            break
        except ValueError:
            continue
    error = str(last.get("error") or "") or proc.stderr.strip()[-600:]
    return SessionResult(
        exit_code=proc.returncode,
        state=str(last.get("state", "")),
        branch=str(last.get("result_branch") or ""),
        error=error,
        secs=secs,
    )


def _stop_private_tmux(home: Path) -> None:
    """A run that ended waiting for the operator keeps its session's panes
    (it can be resumed); the corpus resumes nothing, so its private tmux
    server goes."""
    for socket in (home / "tmux").glob("*"):
        if socket.is_socket():
            subprocess.run(
                ["tmux", "-S", str(socket), "kill-server"], capture_output=True, timeout=30
            )


async def passes_on_clean_checkout(
    repo: Path, branch: str, where: Path, envs: Environments, git: Any
) -> tuple[bool, str]:
    """The delivered branch, checked out afresh, set up and checked with the
    contract drafted from the untouched tree, judged test by test against
    that tree's own run (as corral judges a verification)."""
    from corral.supervisor.contracts.conventions import draft_contract

    base, clean = where / "untouched", where / "delivered"
    git(repo, "worktree", "add", "-q", "--detach", str(base), "HEAD")
    git(repo, "worktree", "add", "-q", "--detach", str(clean), branch)
    try:
        contract = draft_contract(base, "re-verify the delivered branch")
        baseline = None
        for tree in (base, clean):
            setup = await envs.prepare(contract, tree)
            if setup is not None and not setup.outcome.ok:
                return False, f"setup failed in {tree.name}: {setup.outcome.failed_command}"
            environment = setup.environment if setup is not None else None
            results = await run_contract(
                contract,
                tree,
                environment=environment,
                untouched=baseline is None,
                baseline=baseline,
            )
            baseline = results if baseline is None else baseline
        failing = [r for r in results if not r.passed]
        if failing:
            return False, f"{failing[0].name}: {failing[0].reason}"
        return True, "passes"
    finally:
        for tree in (base, clean):
            git(repo, "worktree", "remove", "--force", str(tree))


def verified_from_fresh_clone(repo: Path, branch: str, where: Path) -> tuple[bool, str]:
    """`corral verify` of the delivered branch's attestation from a fresh
    clone with its notes fetched, with a state dir that does not exist (a
    second, state-less run, as on another machine or in CI)."""
    clone, home = where / "clone", where / "no-state"
    where.mkdir(parents=True, exist_ok=True)
    plain = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    for argv, cwd in (
        (["git", "clone", "-q", str(repo), str(clone)], where),
        (["git", "fetch", "-q", "origin", "refs/notes/corral:refs/notes/corral"], clone),
        (["git", "checkout", "-q", "--detach", f"origin/{branch}"], clone),
    ):
        subprocess.run(argv, cwd=cwd, env=plain, check=True, capture_output=True, timeout=120)
    env = dict(os.environ, CORRAL_HOME=str(home), CORRAL_CONFIG=str(where / "none.toml"))
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-m", "corral.tui.cli", "verify", "HEAD", "--json"],
        cwd=clone, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECS,
    )  # fmt: skip
    if home.exists():
        return False, "corral verify made a state dir"
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        return False, f"exit {proc.returncode}: {proc.stderr.strip()[-300:]}"
    commit = report["commits"][0] if report.get("commits") else {}
    said = "; ".join(
        commit.get("sentences", []) + [c["sentence"] for c in commit.get("checks", [])]
    )
    return proc.returncode == 0 and commit.get("state") == "verified", said[:600]


def agent_scripts(where: Path, change: list[Edit], regress: list[Edit]) -> tuple[Path, Path]:
    where.mkdir(parents=True, exist_ok=True)
    return _agent_script(where, "change", change), _agent_script(where, "regress", regress)
