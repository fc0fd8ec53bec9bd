"""`corral delete ID [--yes]` as a user runs it against `corral serve`: a
gated session is refused in one sentence, a script without --yes is told to
add it, and a delivered session goes while its branch stays."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import git, init_repo
from tests.integration.test_control_cli import corral, serve, site, stop

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

__all__ = ["site"]  # the fixture, shared with the control tests


def _ids(site: Path) -> set[str]:
    out = corral(site, "sessions", "--json")
    assert out.returncode == 0, out.stderr
    return {r["session_id"] for r in json.loads(out.stdout)}


@pytest.mark.slow
def test_delete_through_the_owner(site: Path) -> None:
    repo = init_repo(site / "repo")
    contract = site / "c.json"
    check = {"name": "noted", "command": "grep -q notes DEMO_NOTES.md", "timeout_secs": 10}
    contract.write_text(json.dumps({"description": "notes", "checks": [check]}))
    run = ["run", "--repo", str(repo), "--contract", str(contract), "--engine", "external:demo"]
    owner = serve(site)
    try:
        out = corral(site, *run, "--intent", "first notes", "--json")
        assert out.returncode == 3, out.stderr  # waits at gate 1
        gated = json.loads(out.stdout.splitlines()[-1])["session_id"]
        out = corral(site, "delete", gated[-8:], "--yes")
        assert out.returncode == 2 and out.stderr.count("\n") == 1
        assert "only a finished session can be deleted (cancel it first" in out.stderr
        assert gated in _ids(site)

        out = corral(
            site, *run, "--intent", "write notes", "--yes", "--on-question", "approve",
            "--deliver", "branch", "--json",
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        sid = json.loads(out.stdout.splitlines()[-1])["session_id"]
        detail = json.loads(corral(site, "get", sid, "--json").stdout)["session"]
        branch, worktree = detail["result_branch"], detail["worktree"]
        assert branch and detail["state"] == "merged"

        out = corral(site, "delete", sid[-8:])  # no terminal to ask on: --yes is needed
        assert out.returncode == 2 and "add --yes" in out.stderr
        assert sid in _ids(site)

        out = corral(site, "delete", sid[-8:], "--yes")
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith(f"corral delete: corral-{sid[-8:]} is deleted")
        assert f"branch {branch} kept" in out.stdout
        assert sid not in _ids(site) and gated in _ids(site)
        assert not Path(worktree).exists()
        assert "write notes" in git(repo, "show", f"{branch}:DEMO_NOTES.md")
    finally:
        stop(owner)
