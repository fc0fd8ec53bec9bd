"""A headless run the approval gate holds needs a person, and says so.

`corral run --yes --deliver branch` decides the contract and the approve
ahead, so neither is announced. When the gate then refuses that approve —
the checks passed only on their immediate re-run (exit 10), or the work
changed how it is judged (exit 9) — the session needs a person about
something nobody decided. Through a real `corral serve` owner, with a real
script as its `[notify] on_needs_you` hook: the hook runs once for the
session, with the gate's sentence (what is held, the command that accepts
it) as its reason, and `corral sessions --json` and `corral get` show the
session needing you for that reason. On the old code the hook never ran
(the need had been decided ahead) and the rows said only "diff ready for
approval"."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path

import pytest

from corral.supervisor.api import Notice
from corral.supervisor.errors import FlakyPassHeld
from corral.supervisor.states import NeedsYou, short_id
from tests.conftest import SupervisorFactory, eventually, git
from tests.fakes.flaky import INTENT, PY, calc_contract, calc_project, flaky_session, rigged_agent
from tests.fakes.headless import NO_REPAIRS, Corral, corral_home
from tests.integration.test_cheats import AGENT as JUDGE_AGENT
from tests.integration.test_cheats import FIXED, _calc, _pytest_contract

pytestmark = [
    pytest.mark.slow,
    pytest.mark.usefixtures("interpreter_visible"),
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

# one record per hook run, ended by RS: event | session | needs | reason
LINE = 'printf "%s|%s|%s|%s\\036" "$CORRAL_EVENT" "$CORRAL_SESSION_ID" "$CORRAL_NEEDS_YOU" '
LINE += '"$CORRAL_NEEDS_YOU_REASON" >> "$0"'


def _config(log: Path) -> str:
    hook = json.dumps(["sh", "-c", LINE, str(log)])
    return NO_REPAIRS + f"\n[notify]\ndesktop = false\non_needs_you = {hook}\n"


def _heard(log: Path, settle: float = 3.0) -> list[list[str]]:
    """The hook's records once one came and `settle` seconds passed with no
    other (a second run of the hook would have come by then)."""
    deadline = time.monotonic() + 20
    while not (log.exists() and log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(settle)
    if not log.exists():
        return []
    return [record.split("|") for record in log.read_text().split("\x1e")[:-1]]


def _held_run(corral: Corral, cwd: Path, repo: Path, contract: Path, agent: Path) -> str:
    out = corral(
        "run", "--repo", str(repo), "--intent", INTENT, "--contract", str(contract),
        "--agent", f"oneshot:{PY} {agent}", "--yes", "--deliver", "branch",
        "--on-question", "approve", "--json", cwd=cwd, timeout=240,
    )  # fmt: skip
    assert out.returncode in (9, 10), (out.returncode, out.stdout[-1500:], out.stderr[-1500:])
    return str(json.loads(out.stdout.splitlines()[-1])["session_id"])


def _needs_you(corral: Corral, cwd: Path, sid: str, accepts: str) -> None:
    """The owner's row and `corral get` say the session needs you for the hold."""
    rows = json.loads(corral("sessions", "--json", cwd=cwd).stdout)
    rows = rows["sessions"] if isinstance(rows, dict) else rows
    (row,) = [r for r in rows if r["session_id"] == sid]
    assert row["needs_you"] == "merge", row
    assert row["approval_held"] == row["needs_you_label"], row
    assert row["needs_you_label"].startswith("held: ") and accepts in row["needs_you_label"]
    shown = corral("get", sid, cwd=cwd).stdout
    assert f"  needs you: {row['needs_you_label']}\n" in shown, shown


def _heard_once(log: Path, sid: str, accepts: str) -> None:
    heard = _heard(log)
    assert [r[:3] for r in heard] == [["needs_you", sid, "merge"]], heard
    reason = heard[0][3]
    assert reason.startswith("held: ") and f"corral approve {short_id(sid)} {accepts}" in reason


def test_a_flaky_pass_held_after_corral_run_deliver_is_announced_once(
    repo: Path, tmp_path: Path
) -> None:
    calc_project(repo)
    contract = tmp_path / "c.json"
    contract.write_text(json.dumps(calc_contract().model_dump(mode="json")))
    agent = rigged_agent(tmp_path / "agent.py")
    log = tmp_path / "hooks.log"
    with corral_home(tmp_path / "home", _config(log)) as corral, corral.serving(tmp_path):
        sid = _held_run(corral, tmp_path, repo, contract, agent)
        _heard_once(log, sid, "--accept-flaky")
        _needs_you(corral, tmp_path, sid, "--accept-flaky")
    assert git(repo, "branch", "--list", "corral/*").strip() == ""


def test_a_judge_change_held_after_corral_run_deliver_is_announced_once(
    repo: Path, tmp_path: Path
) -> None:
    _calc(repo)
    contract = tmp_path / "c.json"
    contract.write_text(json.dumps(_pytest_contract().model_dump(mode="json")))
    agent = tmp_path / "agent.py"
    agent.write_text(JUDGE_AGENT.format(fixed=FIXED))
    log = tmp_path / "hooks.log"
    with corral_home(tmp_path / "home", _config(log)) as corral, corral.serving(tmp_path):
        sid = _held_run(corral, tmp_path, repo, contract, agent)
        _heard_once(log, sid, "--accept-judge-changes")
        _needs_you(corral, tmp_path, sid, "--accept-judge-changes")
    assert git(repo, "branch", "--list", "corral/*").strip() == ""


# -- in process: what the console's listener hears (its desktop OSC notice) ------------------

QUIET = {"notify": {"desktop": False}}


async def test_the_console_hears_the_hold_of_an_approve_decided_ahead_once(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    sup, sid = await flaky_session(
        make_supervisor, repo, decided={NeedsYou.CONTRACT, NeedsYou.MERGE}, **QUIET
    )
    heard: list[Notice] = []
    assert sup.listen_for_notices(heard.append)
    for _ in range(2):  # the approve decided ahead, then a second one: one hold, heard once
        with pytest.raises(FlakyPassHeld):
            await sup.approve(sid)
    await eventually(lambda: len(heard) >= 1, timeout=10)
    await asyncio.sleep(0.5)  # a second notice would have come by now
    (notice,) = heard
    assert notice.session_id == sid and notice.needs_you == "merge"
    assert notice.needs_you_label is not None and notice.needs_you_label.startswith("held: ")
    assert f"corral approve {short_id(sid)} --accept-flaky" in notice.body
    (row,) = [r for r in sup.list() if r.session_id == sid]
    assert row.needs_you_label == row.approval_held == notice.needs_you_label


async def test_a_persons_own_refused_approve_is_not_announced_again(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    """They were told it needs them ("diff ready for approval") and are
    looking at the refusal: the row says the hold, no second notice comes."""
    sup, sid = await flaky_session(make_supervisor, repo, **QUIET)
    heard: list[Notice] = []
    assert sup.listen_for_notices(heard.append)
    await eventually(lambda: sup.needs_you_of(sid) is not None, timeout=10)
    with pytest.raises(FlakyPassHeld):
        await sup.approve(sid)
    await asyncio.sleep(1)
    assert heard == [], [n.needs_you_label for n in heard]
    held = sup.needs_you_of(sid)
    assert held is not None and held.startswith("held: ")
