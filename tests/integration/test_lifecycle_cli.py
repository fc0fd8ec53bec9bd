"""`corral rename|archive|unarchive|retry|revive <id>` as a user runs them
against `corral serve`: each acts through the owner and says in one line what
it did, a refusal is one sentence on stderr (exit 2) and changes nothing."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import init_repo
from tests.integration.test_control_cli import corral, serve, site, stop

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

__all__ = ["site"]  # the fixture, shared with the control tests


def _rows(site: Path) -> dict[str, dict[str, object]]:
    out = corral(site, "sessions", "--json")
    assert out.returncode == 0, out.stderr
    return {r["session_id"]: r for r in json.loads(out.stdout)}


@pytest.mark.slow
@pytest.mark.timeout(300)  # about twenty command-line starts, each a Python start
def test_the_lifecycle_commands_act_through_the_owner(site: Path) -> None:
    repo = init_repo(site / "repo")
    contract = site / "c.json"
    check = {"name": "noted", "command": "grep -q notes DEMO_NOTES.md", "timeout_secs": 10}
    contract.write_text(json.dumps({"description": "notes", "checks": [check]}))
    out = corral(site, "rename", "abc", "x")  # nobody owns the state dir
    assert out.returncode == 2 and "no corral owns" in out.stderr

    owner = serve(site)
    try:
        out = corral(
            site, "run", "--repo", str(repo), "--intent", "write notes", "--contract",
            str(contract), "--engine", "external:demo", "--json",
        )  # fmt: skip
        assert out.returncode == 3, out.stderr  # waits at gate 1
        sid = json.loads(out.stdout.splitlines()[-1])["session_id"]
        tail = sid[-8:]

        out = corral(site, "archive", tail)  # still at a gate: refused, nothing changes
        assert out.returncode == 2
        assert out.stderr.count("\n") == 1 and "only a finished session can be archived" in (
            out.stderr
        )
        assert _rows(site)[sid]["archived"] is False
        out = corral(site, "retry", tail)
        assert out.returncode == 2 and "only a failed, rejected or cancelled" in out.stderr
        out = corral(site, "revive", tail)
        assert out.returncode == 2 and "cannot be revived" in out.stderr

        out = corral(site, "rename", tail, "notes task")
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("corral rename: corral-")
        assert out.stdout.endswith(" is named “notes task”\n")
        assert _rows(site)[sid]["name"] == "notes task"

        assert corral(site, "cancel", tail).returncode == 0
        out = corral(site, "archive", tail)
        assert out.returncode == 0 and "left the board" in out.stdout, out.stderr
        assert _rows(site)[sid]["archived"] is True
        out = corral(site, "unarchive", tail)
        assert out.returncode == 0 and "back on the board" in out.stdout, out.stderr
        assert _rows(site)[sid]["archived"] is False

        out = corral(site, "retry", tail, "--json")
        assert out.returncode == 0, out.stderr
        new = json.loads(out.stdout)["session_id"]
        rows = _rows(site)
        assert new != sid and rows[new]["intent"] == "write notes"
        assert rows[new]["name"] == "notes task"  # the name goes with the task
        assert rows[sid]["state"] == "abandoned"  # the old one stays as it was

        # the cancelled attempt kept its worktree: a retry can start from its files
        (Path(str(rows[sid]["worktree"])) / "DEMO_NOTES.md").write_text("notes so far\n")
        out = corral(site, "retry", tail, "--keep-edits", "--json")
        assert out.returncode == 0, out.stderr
        kept = json.loads(out.stdout)["session_id"]
        worktree = Path(str(_rows(site)[kept]["worktree"]))
        assert (worktree / "DEMO_NOTES.md").read_text() == "notes so far\n"

        out = corral(site, "rename", new, "")
        assert out.returncode == 0 and "has no name now" in out.stdout
        assert _rows(site)[new]["name"] is None
    finally:
        stop(owner)
