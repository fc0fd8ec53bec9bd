"""The hidden checks' store and their place in corral's checkout: content
kept by sha256 and refused when changed, files written only where they go
(never through a symlink or file the work left in the way, which is put
back afterwards), and nothing of a hidden check in what an agent reads."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from corral.supervisor.contracts.hidden import (
    HELD_BACK,
    HiddenStore,
    for_agent,
    materialized,
    names_of,
    visible_to_agent,
)
from corral.supervisor.errors import CorralError
from corral.supervisor.models import (
    CheckResult,
    ContractCheck,
    HiddenCheck,
    HiddenFile,
    OutcomeContract,
    SessionDetail,
)

SECRET = "assert mul(7, 8) == 56  # HELD_BACK_MARKER_9"


def stored_check(store: HiddenStore, path: str = "tests/test_h.py") -> HiddenCheck:
    sha = store.put(SECRET.encode())
    return HiddenCheck(
        name="hidden_h", command="pytest -q", files=[HiddenFile(path=path, sha256=sha)]
    )


def test_a_changed_stored_file_is_refused(tmp_path: Path) -> None:
    store = HiddenStore(tmp_path / "state")
    check = stored_check(store)
    (store.root / check.files[0].sha256).write_text("assert True")
    with pytest.raises(CorralError, match="was changed"):
        store.get(check.files[0].sha256)


def test_files_go_where_they_belong_never_through_a_link_the_work_left(tmp_path: Path) -> None:
    store = HiddenStore(tmp_path / "state")
    checkout, outside = tmp_path / "checkout", tmp_path / "outside"
    checkout.mkdir()
    outside.mkdir()
    (checkout / "tests").symlink_to(outside)  # the agent's tree: tests/ points away
    check = stored_check(store)
    with materialized(checkout, [check], store):
        written = checkout / "tests" / "test_h.py"
        assert not written.parent.is_symlink() and written.read_text() == SECRET
        assert list(outside.iterdir()) == []  # nothing written through the link
    assert (checkout / "tests").is_symlink() and os.readlink(checkout / "tests") == str(outside)
    assert sorted(p.name for p in checkout.iterdir()) == ["tests"]  # removed, put back


def test_a_file_of_the_work_at_the_same_place_is_put_back(tmp_path: Path) -> None:
    store = HiddenStore(tmp_path / "state")
    checkout = tmp_path / "checkout"
    (checkout / "tests").mkdir(parents=True)
    (checkout / "tests" / "test_h.py").write_text("the agent's own")
    with materialized(checkout, [stored_check(store)], store):
        assert (checkout / "tests" / "test_h.py").read_text() == SECRET
    assert (checkout / "tests" / "test_h.py").read_text() == "the agent's own"
    assert sorted(p.name for p in (checkout / "tests").iterdir()) == ["test_h.py"]


def test_what_an_agent_reads_holds_no_hidden_check(tmp_path: Path) -> None:
    store = HiddenStore(tmp_path / "state")
    check = stored_check(store)
    hidden_result = CheckResult(
        name="hidden_h", passed=False, exit_code=1, output_tail=SECRET, hidden=True
    )
    contract = OutcomeContract(
        checks=[ContractCheck(name="tests", command="pytest")], hidden_checks=[check]
    )
    data = {
        "session": {"contract": contract.model_dump(mode="json")},
        "results": [
            CheckResult(name="tests", passed=True).model_dump(mode="json"),
            hidden_result.model_dump(mode="json"),
        ],
    }
    seen = json.dumps(for_agent(data))
    assert "HELD_BACK_MARKER" not in seen and "hidden_h" not in seen
    assert check.files[0].sha256 not in seen and "tests/test_h.py" not in seen
    assert json.loads(seen)["results"][1]["output_tail"] == HELD_BACK
    [told] = [r for r in visible_to_agent([hidden_result]) if r.hidden]
    assert told.output_tail == HELD_BACK and told.name == "held_back"
    assert names_of([hidden_result, CheckResult(name="lint", passed=False)]) == (
        "lint, 1 hidden check"
    )
    assert SessionDetail  # the shape `get` answers with


def test_a_contract_holds_no_hidden_content_once_stored(tmp_path: Path) -> None:
    given = OutcomeContract(
        checks=[ContractCheck(name="tests", command="pytest")],
        hidden_checks=[
            HiddenCheck(
                name="hidden_h",
                command="pytest -q t_h.py",
                files=[HiddenFile(path="t_h.py", content=SECRET)],
            )
        ],
    )
    stored = HiddenStore(tmp_path / "state").absorb(given)
    assert "HELD_BACK_MARKER" not in stored.model_dump_json()
    assert stored.hidden_checks[0].files[0].sha256
    assert OutcomeContract().model_dump() == {
        "description": "",
        "checks": [],
        "allow_credentials": False,
    }  # none: written as before


@pytest.mark.parametrize("bad", ["/etc/x", "../x", "a/../b", ".git/hooks/pre-commit", ""])
def test_a_hidden_file_goes_inside_the_repository_only(bad: str) -> None:
    contract = OutcomeContract(
        checks=[ContractCheck(name="tests", command="pytest")],
        hidden_checks=[
            HiddenCheck(name="h", command="sh x", files=[HiddenFile(path=bad, content="x")])
        ],
    )
    assert any("file path" in p for p in contract.validate_contract())
