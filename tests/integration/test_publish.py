"""Publishing a delivered branch through the facade: `push` lands it on a real
(local, bare) remote, `pull_request` pushes and runs gh with the intent and the
contract's verification (gh is a recording stand-in: GitHub is out of reach),
and without gh nothing is pushed and the answer gives the push command."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.errors import CorralError
from corral.supervisor.states import CoderState
from tests.conftest import SupervisorFactory, git, proposed, run_to_gate
from tests.fakes.gh import URL, install_fake_gh, path_without_gh, recorded

S = CoderState


def _bare(tmp_path: Path, repo: Path, name: str = "origin") -> Path:
    remote = tmp_path / f"{name}.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", name, str(remote))
    return remote


def _remote_head(remote: Path, branch: str) -> str | None:
    out = git(remote, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False)
    return out.strip() or None


async def _delivered(sup: Supervisor, repo: Path) -> tuple[str, str, str]:
    sid = await proposed(sup, repo)
    assert (await run_to_gate(sup, sid)).state is S.NEEDS_APPROVAL
    done = await sup.approve(sid)
    assert done.state is S.MERGED and done.branch and done.commit
    return sid, done.branch, done.commit


async def test_push_lands_the_delivered_branch_on_the_remote(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    sup = await make_supervisor()
    remote = _bare(tmp_path, repo)
    gated = await proposed(sup, repo, "not delivered")
    with pytest.raises(CorralError, match="only a session approved to a branch"):
        await sup.push(gated)
    sid, branch, commit = await _delivered(sup, repo)
    with pytest.raises(CorralError, match="has no remote 'upstream'"):
        await sup.push(sid, "upstream")
    assert _remote_head(remote, branch) is None

    result = await sup.push(sid)
    assert (result.branch, result.remote, result.url) == (branch, "origin", str(remote))
    assert _remote_head(remote, branch) == commit
    assert git(remote, "show", f"{branch}:hello.txt") == "hi\n"

    git(repo, "branch", "-D", branch)  # the operator removed it since
    with pytest.raises(CorralError, match=f"branch {branch} is no longer in"):
        await sup.push(sid)


async def test_pull_request_pushes_then_runs_gh_with_the_contract(
    make_supervisor: SupervisorFactory,
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    record = tmp_path / "gh-argv.json"
    install_fake_gh(tmp_path / "bin", record)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    sup = await make_supervisor()
    remote = _bare(tmp_path, repo)
    sid, branch, commit = await _delivered(sup, repo)

    result = await sup.pull_request(sid)
    assert result.opened and result.url == URL
    assert _remote_head(remote, branch) == commit  # pushed before gh ran
    seen = recorded(record)
    assert Path(str(seen["cwd"])).resolve() == repo.resolve()
    argv = list(seen["argv"])  # type: ignore[call-overload]
    assert argv[:4] == ["pr", "create", "--head", branch]
    assert argv[argv.index("--title") + 1] == "say hi"
    body = argv[argv.index("--body") + 1]
    assert "hello.txt says hi" in body  # the contract
    assert "**hello** (passed)" in body  # how its check came out
    assert branch in body and commit[:12] in body


async def test_without_gh_nothing_is_pushed_and_the_push_command_is_given(
    make_supervisor: SupervisorFactory,
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", path_without_gh())
    sup = await make_supervisor()
    remote = _bare(tmp_path, repo)
    sid, branch, _commit = await _delivered(sup, repo)
    result = await sup.pull_request(sid)
    assert not result.opened and result.url is None
    assert result.message.startswith("gh (the GitHub CLI) is not installed here")
    assert result.push_command == (
        f"git -C {repo} push origin refs/heads/{branch}:refs/heads/{branch}"
    )
    assert _remote_head(remote, branch) is None


async def test_push_carries_the_attestations_and_merges_the_remotes(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    """The note beside the delivered commit travels with the push, so a clone
    can `corral verify` it; notes another corral pushed first are merged, not lost."""
    sup = await make_supervisor()
    remote = _bare(tmp_path, repo)
    # another machine's attestation on another commit is on the remote already
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(remote), str(other))
    git(other, "commit", "-q", "--allow-empty", "-m", "elsewhere")
    git(other, "notes", "--ref", "refs/notes/corral", "add", "-m", "theirs", "HEAD")
    git(other, "push", "-q", "origin", "HEAD:refs/heads/elsewhere", "refs/notes/corral")
    theirs = git(other, "rev-parse", "HEAD").strip()

    sid, _branch, commit = await _delivered(sup, repo)
    result = await sup.push(sid)
    assert (
        result.attestations == "attestations pushed (refs/notes/corral, merged with the remote's)"
    )
    ours = git(remote, "notes", "--ref", "refs/notes/corral", "show", commit)
    assert '"corral_attestation": 1' in ours
    assert git(remote, "notes", "--ref", "refs/notes/corral", "show", theirs) == "theirs\n"
