"""The foreman's split rules and its ledger in the state dir's database."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from corral.supervisor.foreman.split import (
    MAX_SUBTASKS,
    parse_split,
    split_per_check,
    subtask_contract,
)
from corral.supervisor.gates.approval import commit_message
from corral.supervisor.models import (
    CoderSession,
    ContractCheck,
    OutcomeContract,
    Placement,
)
from corral.supervisor.store import DB_NAME, Store
from corral.supervisor.store.placements import PlacementStore

CONTRACT = OutcomeContract(
    checks=[ContractCheck(name=n, command=f"test -f {n}.txt") for n in ("a", "b", "c")]
)


def sub(i: int, checks: list[object] | None = None) -> dict[str, object]:
    return {"id": f"s{i}", "intent": f"part {i}", "checks": checks or ["a"]}


def test_a_split_is_refused_whole_with_every_problem_named() -> None:
    many = {"subtasks": [sub(i) for i in range(MAX_SUBTASKS + 1)]}
    with pytest.raises(ValueError, match=r"at most 10 subtasks \(this one has 11\)"):
        parse_split(many, CONTRACT)
    bad = {
        "subtasks": [
            sub(1),
            sub(1, ["zzz"]),
            {"id": "bad id!", "intent": " ", "checks": []},
        ]
    }
    with pytest.raises(ValueError) as caught:
        parse_split(bad, CONTRACT)
    text = str(caught.value)
    assert "subtask 2 (s1): the id is used twice" in text
    assert "'zzz' is not a check of the contract (its checks: a, b, c)" in text
    assert "its intent is empty" in text and "at least one check" in text
    assert "1-16 letters" in text
    with pytest.raises(ValueError, match="not valid JSON of the expected shape"):
        parse_split("{nope", CONTRACT)


def test_a_subtask_is_verified_on_the_contract_checks_it_names_or_its_own() -> None:
    own = {"name": "narrow", "command": "test -s a.txt"}
    split = parse_split({"subtasks": [sub(1, ["b", own])]}, CONTRACT)
    checks = subtask_contract(split.subtasks[0], CONTRACT).checks
    assert [(c.name, c.command) for c in checks] == [
        ("b", "test -f b.txt"),
        ("narrow", "test -s a.txt"),
    ]


def test_without_a_model_each_check_becomes_a_subtask_up_to_the_default_five() -> None:
    wide = OutcomeContract(checks=[ContractCheck(name=f"c{i}", command="true") for i in range(7)])
    split = split_per_check("do it", wide)
    assert len(split.subtasks) == 5
    assert split.subtasks[0].checks == ["c0", "c5"]
    assert "Your part of this task only" in split.subtasks[0].intent


def test_the_ledger_lives_in_its_own_tables_beside_the_sessions(tmp_path: Path) -> None:
    Store(tmp_path).close()  # the session store's schema, as a real state dir has it
    ledger = PlacementStore(tmp_path / DB_NAME)
    row = Placement(session_id="p1", subtask="s1", position=0, child_id="p1-s1")
    ledger.record(row)
    row.result, row.files = "integrated", ["a.txt", "b.txt"]
    ledger.record(row)
    ledger.record(Placement(session_id="p1", subtask="s2", position=1, child_id="p1-s2"))
    ledger.save_split("p1", '{"subtasks": []}')
    ledger.close()
    again = PlacementStore(tmp_path / DB_NAME)  # created idempotently
    assert [(p.subtask, p.result, p.files) for p in again.placements("p1")] == [
        ("s1", "integrated", ["a.txt", "b.txt"]),
        ("s2", "pending", []),
    ]
    assert again.interrupt_unfinished(set(), "corral stopped") == ["p1"]
    assert again.placements("p1")[1].result == "interrupted"
    assert again.load_split("p1") == '{"subtasks": []}'
    again.close()
    with sqlite3.connect(tmp_path / DB_NAME) as conn:
        version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert version is not None  # the session store's own version is untouched by the ledger


def test_a_ledger_written_before_re_placement_existed_is_read_and_extended(
    tmp_path: Path,
) -> None:
    db = tmp_path / DB_NAME
    with sqlite3.connect(db) as conn:  # the table as it first shipped, with one row
        conn.execute(
            "CREATE TABLE foreman_placements (session_id TEXT NOT NULL, subtask TEXT NOT NULL, "
            "position INTEGER NOT NULL, child_id TEXT NOT NULL, host TEXT NOT NULL, "
            "worktree TEXT, result TEXT NOT NULL, reason TEXT, files TEXT NOT NULL DEFAULT '', "
            "commit_id TEXT, updated_at REAL NOT NULL, PRIMARY KEY (session_id, subtask))"
        )
        conn.execute(
            "INSERT INTO foreman_placements VALUES "
            "('p1', 's1', 0, 'p1-s1', 'local', '/w/p1-s1', 'integrated', NULL, 'a.txt', NULL, 1)"
        )
    ledger = PlacementStore(db)
    old = ledger.placements("p1")[0]
    assert (old.result, old.attempt, old.first_reason) == ("integrated", 1, None)
    again = Placement(
        session_id="p1",
        subtask="s2",
        position=1,
        child_id="p1-s2-2",
        worktree="/w/p1-s2-2",
        result="integrated",
        attempt=2,
        first_reason="its agent crashed",
        first_worktree="/w/p1-s2",
    )
    ledger.record(again)
    ledger.close()
    row = PlacementStore(db).placements("p1")[1]
    assert (row.attempt, row.first_reason, row.first_worktree) == (
        2,
        "its agent crashed",
        "/w/p1-s2",
    )
    assert row.line() == (
        "s2 · local · p1-s2-2 · integrated · attempt 2 (the first failed: its agent crashed)"
    )


def test_the_delivered_commit_carries_one_placement_trailer_per_integrated_subtask() -> None:
    s = CoderSession(id="abc", repo="/r", intent="split work", contract=CONTRACT)
    s.foreman_placements = [
        "subtask=s1 host=local files=a.txt",
        "subtask=s3 host=local files=c.txt",
    ]
    body = commit_message(s)
    assert "Corral-Placement: subtask=s1 host=local files=a.txt\n" in body
    assert "Corral-Placement: subtask=s3 host=local files=c.txt\n" in body
    plain = commit_message(CoderSession(id="abd", repo="/r", intent="x", contract=CONTRACT))
    assert "Corral-Placement" not in plain  # a local run's commit is as before


def test_the_commit_message_does_not_repeat_its_subject_and_keeps_the_whole_contract() -> None:
    from corral.supervisor.models import OutcomeContract

    contract = OutcomeContract(
        description="The report covers:\n- totals per day\n- a --json flag", checks=CONTRACT.checks
    )
    one_line = commit_message(CoderSession(id="a1", repo="/r", intent="Add a --json flag",
                                           contract=contract))  # fmt: skip
    subject, blank, *body = one_line.splitlines()
    assert subject == "Add a --json flag" and blank == ""
    assert "Add a --json flag" not in body  # the subject is not the body's first line again
    text = "\n".join(body)
    assert "Contract: The report covers:\n- totals per day\n- a --json flag" in text
    long = "Rewrite the report " + "so that it " * 10
    intent = f"{long}\nand say why"
    body = commit_message(CoderSession(id="a2", repo="/r", intent=intent, contract=contract))
    assert body.splitlines()[0].endswith("…")
    assert intent in body  # a cut subject: the whole intent follows
    two = commit_message(CoderSession(id="a3", repo="/r", intent="Fix it\nin both places"))
    assert two.splitlines()[:4] == ["Fix it", "", "in both places", ""]
