"""Publishing a delivered branch: push it to the repo's remote, and open a
pull request for it with the GitHub CLI (`gh`).

Unlike corral's own git calls (`run.git`: no hooks, no credential helpers),
the push is the operator's: it runs `git push` as they would in their shell,
with their credentials and their pre-push hook, only never prompting (the
owner has no terminal). Blocking; call through `asyncio.to_thread`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

from ..errors import CorralError
from ..models import CoderSession
from ..states import CoderState, label

PUSH_TIMEOUT_SECS = 300
GH_TIMEOUT_SECS = 120


def delivered_branch(session: CoderSession) -> str:
    """The branch a session delivered, or the sentence saying there is none."""
    if session.state is not CoderState.MERGED or session.result_delivery != "branch":
        where = (
            "was applied to your checkout, not delivered as a branch"
            if session.result_delivery == "checkout"
            else f"has no delivered branch (state: {session.state.value})"
        )
        raise CorralError(
            f"{label(session.id)} {where}: only a session approved to a branch (a on the "
            "board) can be pushed"
        )
    assert session.result_branch is not None
    return session.result_branch


def push_argv(repo: Path, remote: str, branch: str) -> list[str]:
    return ["git", "-C", str(repo), "push", remote, f"refs/heads/{branch}:refs/heads/{branch}"]


def push_command(repo: Path, remote: str, branch: str) -> str:
    """The same push, as a line to paste into a shell."""
    return shlex.join(push_argv(repo, remote, branch))


def _run(argv: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, GIT_TERMINAL_PROMPT="0")
    try:
        return subprocess.run(
            argv,
            cwd=str(cwd),
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        what = " ".join(a for a in argv[:4] if not a.startswith("/"))
        raise CorralError(f"{what} did not finish within {timeout:.0f} s") from exc


def _last_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = (proc.stderr or proc.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit {proc.returncode}"


def push_branch(repo: Path, remote: str, branch: str) -> str:
    """Push `branch` to `remote` (same name there); returns the remote's URL.
    Raises with git's own words when the remote or the branch is missing or
    the push is refused."""
    if not repo.is_dir():
        raise CorralError(f"the repository {repo} is gone: nothing to push from")
    url = _run(["git", "-C", str(repo), "remote", "get-url", remote], repo, 30)
    if url.returncode != 0:
        raise CorralError(
            f"{repo} has no remote '{remote}': add one (git remote add {remote} URL) or "
            "name another with --remote"
        )
    has = _run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", branch], repo, 30)
    if has.returncode != 0:
        raise CorralError(f"branch {branch} is no longer in {repo}: nothing to push")
    proc = _run(push_argv(repo, remote, branch), repo, PUSH_TIMEOUT_SECS)
    if proc.returncode != 0:
        raise CorralError(f"git push {remote} {branch} failed: {_last_line(proc)}")
    return url.stdout.strip()


NOTES_REF = "refs/notes/corral"  # as git/attestation.py names it
REMOTE_NOTES = "refs/notes/corral-remote"  # the remote's notes, fetched to merge ours into


def push_notes(repo: Path, remote: str) -> str:
    """Push the attestations (`refs/notes/corral`) beside a pushed branch, so
    `corral verify` can re-check it from a clone. When the remote's notes
    moved on (another corral pushed its own), they are fetched and merged
    first (each note is one commit's; on the same commit ours is kept).
    Returns the sentence saying what happened: a notes push that fails never
    fails the branch's push."""
    has = _run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", NOTES_REF], repo, 30)
    if has.returncode != 0:
        return "no attestations to push (this repository has no refs/notes/corral)"
    spec = f"{NOTES_REF}:{NOTES_REF}"
    proc = _run(["git", "-C", str(repo), "push", remote, spec], repo, PUSH_TIMEOUT_SECS)
    if proc.returncode == 0:
        return f"attestations pushed ({NOTES_REF})"
    fetched = _run(
        ["git", "-C", str(repo), "fetch", remote, f"+{NOTES_REF}:{REMOTE_NOTES}"],
        repo,
        PUSH_TIMEOUT_SECS,
    )
    if fetched.returncode != 0:
        return f"attestations not pushed: {_last_line(proc)}"
    merged = _run(
        ["git", "-C", str(repo), "notes", "--ref", NOTES_REF, "merge", "-q", "-s", "ours",
         REMOTE_NOTES],
        repo,
        60,
    )  # fmt: skip
    if merged.returncode != 0:
        return f"attestations not pushed: merging the remote's failed: {_last_line(merged)}"
    again = _run(["git", "-C", str(repo), "push", remote, spec], repo, PUSH_TIMEOUT_SECS)
    if again.returncode != 0:
        return f"attestations not pushed: {_last_line(again)}"
    return f"attestations pushed ({NOTES_REF}, merged with the remote's)"


def pr_title(session: CoderSession) -> str:
    first = session.intent.strip().splitlines()[0] if session.intent.strip() else ""
    return (session.name or first or label(session.id))[:200]


def pr_body(session: CoderSession, branch: str) -> str:
    """The intent, the contract that defined done and how its checks came out
    when corral re-ran them on the delivered tree."""
    parts = [session.intent.strip()]
    contract = session.contract
    if contract is not None:
        if contract.description.strip():
            parts.append("## Contract\n\n" + contract.description.strip())
        results = {r.name: r for r in session.last_check_results}
        lines = []
        for check in contract.checks:
            result = results.get(check.name)
            mark = "not run" if result is None else ("passed" if result.passed else "failed")
            lines.append(f"- **{check.name}** ({mark}): `{check.command}`")
        if lines:
            parts.append(
                "## Verification\n\nRe-run by corral on the delivered tree:\n\n" + "\n".join(lines)
            )
    commit = (session.result_commit or "")[:12]
    parts.append(f"Delivered by corral as branch `{branch}`" + (f" ({commit})." if commit else "."))
    if session.attestation and commit:
        parts.append(
            f"Attested in `{NOTES_REF}`: `git fetch origin {NOTES_REF}:{NOTES_REF} && "
            f"corral verify {commit}` re-runs its checks."
        )
    return "\n\n".join(p for p in parts if p)


def gh_path() -> str | None:
    return shutil.which("gh")


def create_pr(repo: Path, gh: str, branch: str, title: str, body: str) -> str:
    """`gh pr create` for `branch` (pushed already); returns what gh printed
    last (the pull request's URL)."""
    argv = [gh, "pr", "create", "--head", branch, "--title", title, "--body", body]
    proc = _run(argv, repo, GH_TIMEOUT_SECS)
    if proc.returncode != 0:
        raise CorralError(f"gh pr create failed: {_last_line(proc)}")
    out = proc.stdout.strip().splitlines()
    return out[-1] if out else ""
