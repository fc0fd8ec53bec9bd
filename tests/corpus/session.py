"""A scripted agent's work on a corpus project, through `corral run` as a
new user runs it headless: default configuration (repairs on, no config
file, questions left to the operator), the conventions lane drafts the
contract, `--yes` confirms it, a one-shot agent applies scripted edits,
corral verifies and delivers to a branch. A correct change (an edit of
existing code in the project's style plus a test) must be delivered and
pass again when re-checked independently of corral: the contract the
session used (its setup and checks, verbatim) runs in a fresh clone of the
delivered branch with a fresh environment, by plain shell, never through
corral's environments or its drafting. A regression (an edit that breaks
one tested behaviour) must be *caught*: a check failed at verification and
said which — any other way of not being delivered (a timeout, a setup that
failed, a run left waiting) is counted apart. Used by tests/corpus/runner.py."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .reading import newly_failing, read_run

ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_SECS = 900

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


#: `corral run`'s exits that leave a verified session waiting at approval for a person
HELD = {
    9: "the work changed how it is judged",
    10: "a check passed only on its immediate re-run (flaky)",
}


@dataclass
class SessionResult:
    """How one `corral run` ended, as its exit code and last JSON line say,
    with the contract it ran and what its verifications said."""

    exit_code: int
    state: str
    branch: str
    error: str
    secs: float
    contract: dict[str, Any] | None = None
    # "check: reason" for each check a verification found failing (it ran and
    # its assertion failed: the *fails* verdict), in order
    failed_checks: tuple[str, ...] = ()
    # the tests those failing checks named (their runner's per-test report),
    # less those already failing on the untouched tree
    failed_tests: tuple[str, ...] = ()

    @property
    def delivered(self) -> bool:
        return self.exit_code == 0 and bool(self.branch)

    @property
    def caught(self) -> bool:
        """Not delivered because a check failed and named the broken test: a
        regression caught."""
        return not self.delivered and bool(self.failed_checks) and bool(self.failed_tests)

    @property
    def failed_unnamed(self) -> bool:
        """Not delivered because a check failed, but its runner named no test
        (judged by exit code or counts alone): counted apart from a catch."""
        return not self.delivered and bool(self.failed_checks) and not self.failed_tests

    def names(self, fragment: str) -> bool:
        """Whether a failing test the checks named contains `fragment`."""
        return any(fragment in name for name in self.failed_tests)

    def why_not(self) -> str:
        """One line: why it was not delivered."""
        if self.caught:
            return f"caught: {self.failed_tests[0]} ({self.failed_checks[-1]})"
        if self.failed_unnamed:
            return f"a check failed, naming no test: {self.failed_checks[-1]}"
        if self.exit_code in HELD:
            return f"exit {self.exit_code}, waits for a person: {HELD[self.exit_code]}"
        return (
            self.error.splitlines()[0] if self.error else self.state
        ) or f"exit {self.exit_code}"


def _agent_script(where: Path, name: str, edits: list[Edit]) -> Path:
    script = where / f"{name}.py"
    script.write_text(APPLY.format(edits=json.dumps(edits)), encoding="utf-8")
    return script


def corral_run(repo: Path, home: Path, intent: str, script: Path) -> SessionResult:
    """`corral run` headless with a one-shot agent running `script`, in the
    default configuration a new user has (repairs on; no config file)."""
    home.mkdir(parents=True, exist_ok=True)
    config = home / "no-config.toml"  # absent: every setting at its default
    env = dict(os.environ, CORRAL_HOME=str(home), CORRAL_CONFIG=str(config))
    env["CORRAL_TMUX_SOCKET_DIR"] = str(home / "tmux")
    env["PYTHONPATH"] = str(ROOT)
    argv = [sys.executable, "-m", "corral.tui.cli", "run", "--repo", str(repo)]
    argv += ["--intent", intent, "--agent", f"oneshot:{sys.executable} {script}"]
    # headless as a new user runs it: nobody answers on stdin (a question or a
    # check that cannot run ends the run waiting for the operator, exit 4)
    argv += ["--yes", "--deliver", "branch", "--json"]
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
    contract: dict[str, Any] | None = None
    failed: list[str] = []
    named: list[str] = []
    before: set[str] = set()
    for line in proc.stdout.strip().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        last = event
        data = event.get("data") if isinstance(event.get("data"), dict) else {}
        if event.get("kind") == "contract_proposed":
            contract = data.get("contract")
        elif event.get("kind") in ("contract_baseline", "contract_evaluated", "check_completed"):
            results = data.get("results") or [data.get("result") or {}]
            # a baseline's tests failing on the untouched tree are not the catch
            before.update(t for r in results for t in r.get("already_failing") or [])
        if event.get("kind") == "contract_evaluated" and not data.get("passed", True):
            for r in data.get("results") or []:
                if r.get("verdict") != "fails":
                    continue
                failed.append(f"{r.get('name')}: {r.get('reason')}")
                report = r.get("tests") if isinstance(r.get("tests"), dict) else {}
                named += list(report.get("failed") or [])
    error = str(last.get("error") or "") or proc.stderr.strip()[-600:]
    return SessionResult(
        exit_code=proc.returncode,
        state=str(last.get("state", "")),
        branch=str(last.get("result_branch") or ""),
        error=error,
        secs=secs,
        contract=contract,
        failed_checks=tuple(failed),
        failed_tests=tuple(dict.fromkeys(n for n in named if n not in before)),
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


@dataclass
class Recheck:
    """The delivered branch re-checked independently of corral."""

    ok: bool
    why: str
    red_before: bool = False  # a check red on the untouched clone too, no new test failing
    setup_secs: float = 0.0
    # checks whose output named or counted tests (compared per test), and
    # those compared by exit code alone (the corpus's reading knew no form)
    per_test: tuple[str, ...] = ()
    exit_only: tuple[str, ...] = ()


def _shell(command: str, cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str]:
    try:
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout:.0f}s"
    return done.returncode, (done.stdout + done.stderr)[-2_000_000:]


def _fresh_clone(repo: Path, ref: str, where: Path) -> Path:
    subprocess.run(
        ["git", "clone", "-q", "--no-hardlinks", str(repo), str(where)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    target = ref if ref == "HEAD" else f"origin/{ref}"  # a clone has the branch as a remote one
    subprocess.run(
        ["git", "checkout", "-q", "--detach", target], cwd=where, check=True, capture_output=True
    )
    return where


def _run_contract_verbatim(
    contract: dict[str, Any], tree: Path, env_dir: Path
) -> tuple[str | None, dict[str, tuple[int, str]]]:
    """The setup, then each check, by plain bash in `tree` with a fresh
    `$CORRAL_ENV`; the checks with its bin/ first on PATH (and VIRTUAL_ENV
    for a venv), as the contract documents. (setup failure, check → (exit, tail))."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CORRAL_", "VIRTUAL_ENV"))}
    env["CORRAL_ENV"] = str(env_dir)
    for command in contract.get("setup") or []:
        code, tail = _shell(command, tree, env, float(contract.get("setup_timeout_secs") or 900))
        if code != 0:
            said = " | ".join(tail.strip().splitlines()[-4:])
            return f"setup `{command}` exited {code}: {said}", {}
    if (env_dir / "bin").is_dir():
        env["PATH"] = f"{env_dir / 'bin'}{os.pathsep}{env.get('PATH', os.defpath)}"
    if (env_dir / "pyvenv.cfg").is_file():
        env["VIRTUAL_ENV"] = str(env_dir)
    results = {
        str(check["name"]): _shell(
            str(check["command"]), tree, env, float(check.get("timeout_secs") or 900)
        )
        for check in contract.get("checks") or []
    }
    return None, results


def independent_recheck(repo: Path, branch: str, contract: dict[str, Any], where: Path) -> Recheck:
    """The contract the session ran, verbatim, in fresh clones of the
    untouched tree and of the delivered branch, each with a fresh
    environment: no corral code decides anything here. A check must exit 0
    on the delivered branch unless it was red on the untouched clone too;
    either way no test may fail on the delivered clone that did not fail on
    the untouched one, as the corpus's own reading of the two outputs names
    them (tests/corpus/reading.py, not corral's parsers), or, where a run
    names no test, as its failure counts say. A check red on both with no
    test newly failing is counted as `red_before`."""
    shutil.rmtree(where, ignore_errors=True)
    where.mkdir(parents=True)
    started = time.monotonic()
    base = _fresh_clone(repo, "HEAD", where / "untouched")
    delivered = _fresh_clone(repo, branch, where / "delivered")
    failed_setup, before = _run_contract_verbatim(contract, base, where / "env-untouched")
    if failed_setup:
        return Recheck(False, f"untouched clone: {failed_setup}")
    failed_setup, after = _run_contract_verbatim(contract, delivered, where / "env-delivered")
    secs = time.monotonic() - started
    if failed_setup:
        return Recheck(False, f"delivered clone: {failed_setup}", setup_secs=secs)
    per_test = tuple(n for n, (_, out) in after.items() if read_run(out).read)
    exit_only = tuple(n for n in after if n not in per_test)
    seen = {"setup_secs": secs, "per_test": per_test, "exit_only": exit_only}
    red = [name for name, (code, _) in after.items() if code != 0]
    new_red = [name for name in red if before.get(name, (0, ""))[0] == 0]
    if new_red:
        tail = after[new_red[0]][1].strip().splitlines()[-1:] or [""]
        said = f"{new_red[0]} exits {after[new_red[0]][0]}: {tail[0][:120]}"
        return Recheck(False, said, **seen)  # type: ignore[arg-type]
    for name, (_, out) in after.items():  # per test: a test failing now that passed before
        new, counted = newly_failing(before.get(name, (0, ""))[1], out)
        if new or counted:
            said = f"{name}: newly failing {', '.join(new[:3]) or counted}"
            return Recheck(False, said, **seen)  # type: ignore[arg-type]
    if red:
        said = f"red on both clones, no test newly failing: {', '.join(red)}"
        return Recheck(True, said, red_before=True, **seen)  # type: ignore[arg-type]
    return Recheck(True, "every check exits 0, no test newly failing", **seen)  # type: ignore[arg-type]


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
