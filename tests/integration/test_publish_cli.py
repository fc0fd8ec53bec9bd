"""`corral push ID [--remote]` and `corral pr ID` as a user runs them against
`corral serve`: the delivered branch lands on a real local bare remote, `pr`
runs gh (a recording stand-in: GitHub is out of reach) and prints its URL,
and an owner without gh says so in one sentence and prints the push command."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import git, init_repo
from tests.fakes.gh import URL, install_fake_gh, path_without_gh, recorded
from tests.integration.test_control_cli import corral, serve, site, stop

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

__all__ = ["site"]  # the fixture, shared with the control tests


def _remote_head(remote: Path, branch: str) -> str:
    return git(remote, "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}", check=False)


@pytest.mark.slow
def test_push_and_pr_through_the_owner(site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = init_repo(site / "repo")
    remote = site / "origin.git"
    git(site, "init", "-q", "--bare", str(remote))
    git(repo, "remote", "add", "origin", str(remote))
    contract = site / "c.json"
    check = {"name": "noted", "command": "grep -q notes DEMO_NOTES.md", "timeout_secs": 10}
    contract.write_text(json.dumps({"description": "notes are written", "checks": [check]}))
    record = site / "gh.json"
    install_fake_gh(site / "bin", record)
    monkeypatch.setenv("PATH", f"{site / 'bin'}{os.pathsep}{os.environ['PATH']}")

    owner = serve(site)
    try:
        out = corral(
            site, "run", "--repo", str(repo), "--contract", str(contract), "--engine",
            "external:demo", "--intent", "write notes", "--yes", "--on-question", "approve",
            "--deliver", "branch", "--json",
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        sid = json.loads(out.stdout.splitlines()[-1])["session_id"]
        detail = json.loads(corral(site, "get", sid, "--json").stdout)["session"]
        branch, commit = detail["result_branch"], detail["result_commit"]

        out = corral(site, "push", sid[-8:], "--remote", "nowhere")
        assert out.returncode == 2 and "has no remote 'nowhere'" in out.stderr
        assert out.stderr.count("\n") == 1
        out = corral(site, "push", sid[-8:])
        assert out.returncode == 0, out.stderr
        assert out.stdout == (
            f"corral push: branch {branch} pushed to origin ({remote})\n"
            "corral push: attestations pushed (refs/notes/corral)\n"
        )
        assert _remote_head(remote, branch).strip() == commit

        out = corral(site, "pr", sid[-8:])
        assert out.returncode == 0, out.stderr
        assert out.stdout == f"corral pr: pull request for {branch} opened: {URL}\n"
        argv = recorded(record)["argv"]
        assert isinstance(argv, list) and argv[:4] == ["pr", "create", "--head", branch]
        assert argv[argv.index("--title") + 1] == "write notes"
        assert "notes are written" in argv[argv.index("--body") + 1]
    finally:
        stop(owner)

    monkeypatch.setenv("PATH", path_without_gh())  # an owner where gh is not installed
    record.unlink()
    owner = serve(site)
    try:
        out = corral(site, "pr", sid[-8:])
        assert out.returncode == 2
        assert out.stderr.startswith("corral pr: gh (the GitHub CLI) is not installed here")
        assert out.stderr.count("\n") == 1
        assert out.stdout == (
            f"git -C {repo} push origin refs/heads/{branch}:refs/heads/{branch}\n"
        )
        assert not record.exists()
    finally:
        stop(owner)
