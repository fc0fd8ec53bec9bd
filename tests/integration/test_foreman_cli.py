"""`corral split` as a user runs it against `corral serve`: a foreman task
stopped at gate 1 prints its proposed split, takes the operator's from a
file, refuses a bad one with a sentence (exit 2, nothing lost), and
`corral get --json` shows what gate 1 shows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import init_repo
from tests.integration.test_control_cli import corral, serve, site, stop

__all__ = ["site"]  # the fixture, shared

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


@pytest.mark.slow
def test_the_split_is_printed_replaced_and_refused_from_the_command_line(
    site: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CORRAL_LLM_PROVIDER", raising=False)  # no model: one subtask per check
    repo = init_repo(site / "repo")
    contract = site / "c.json"
    checks = [
        {"name": "one", "command": "test -f one.txt", "timeout_secs": 10},
        {"name": "two", "command": "test -f two.txt", "timeout_secs": 10},
    ]
    contract.write_text(json.dumps({"description": "two files", "checks": checks}))
    owner = serve(site)
    try:
        out = corral(
            site, "run", "--repo", str(repo), "--intent", "write one.txt and two.txt",
            "--contract", str(contract), "--engine", "foreman:demo", "--json",
        )  # fmt: skip
        assert out.returncode == 3, out.stderr  # stopped at gate 1
        sid = json.loads(out.stdout.splitlines()[-1])["session_id"]
        out = corral(site, "split", sid[-8:])
        assert out.returncode == 0, out.stderr
        proposed = json.loads(out.stdout)
        assert proposed["proposed_by"] == "one per contract check"
        assert [t["checks"] for t in proposed["subtasks"]] == [["one"], ["two"]]

        bad = site / "bad.json"
        bad.write_text(json.dumps({"subtasks": [{"id": "s1", "intent": "x", "checks": ["nope"]}]}))
        out = corral(site, "split", sid[-8:], str(bad))
        assert out.returncode == 2
        assert "'nope' is not a check of the contract (its checks: one, two)" in out.stderr
        mine = site / "mine.json"
        mine.write_text(
            json.dumps(
                {"subtasks": [{"id": "both", "intent": "write both", "checks": ["one", "two"]}]}
            )
        )
        out = corral(site, "split", sid[-8:], str(mine))
        assert out.returncode == 0 and "1 subtask(s)" in out.stdout, out.stderr
        detail = json.loads(corral(site, "get", sid, "--json").stdout)
        assert detail["foreman"]["split"]["subtasks"][0]["id"] == "both"
        assert detail["foreman"]["split"]["proposed_by"] == "operator"
        corral(site, "cancel", sid)
    finally:
        stop(owner)
