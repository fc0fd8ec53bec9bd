"""Gate 1 of a foreman session: the split is proposed by the configured model
(a fake OpenAI-compatible server on 127.0.0.1), shown beside the contract,
replaceable by the operator; a reply that is not a usable split falls back
to one subtask per contract check, and says so. No agent runs here."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.errors import CorralError
from corral.supervisor.factory import build_supervisor
from corral.supervisor.llm.openai_compat import OpenAICompatProvider
from corral.supervisor.models import ContractCheck, OutcomeContract
from corral.supervisor.states import CoderState as S
from tests.conftest import fast_config, git
from tests.fakes.llm_fakes import FakeOpenAIServer, Reply

CONTRACT = OutcomeContract(
    checks=[
        ContractCheck(name="a", command="grep -qx A mod_a/value.txt"),
        ContractCheck(name="b", command="grep -qx B mod_b/value.txt"),
    ]
)
ENGINE = f"foreman:custom:{sys.executable} -c pass"


def make_repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    for m in "ab":
        (path / f"mod_{m}").mkdir()
        (path / f"mod_{m}" / "value.txt").write_text("old\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "init")
    return path


async def open_with_model(tmp_path: Path, server: FakeOpenAIServer) -> Supervisor:
    sup = build_supervisor(
        tmp_path / "state",
        FixedDrafter(CONTRACT),
        socket_dir=tmp_path / "tmux",
        config=fast_config(),
        provider=OpenAICompatProvider(server.base_url, "fake-model", "k"),
    )
    await sup.open()
    return sup


MODEL_SPLIT = {
    "subtasks": [
        {"id": "mod_a", "intent": "set A", "files": ["mod_a/"], "checks": ["a"]},
        {"id": "mod_b", "intent": "set B", "files": ["mod_b/"], "checks": ["b"]},
    ]
}


async def test_the_model_proposes_the_split_shown_at_gate_one_and_the_operator_replaces_it(
    tmp_path: Path,
) -> None:
    with FakeOpenAIServer([Reply(text="Here:\n" + json.dumps(MODEL_SPLIT))]) as server:
        sup = await open_with_model(tmp_path, server)
        try:
            sid = (
                await sup.start("set both modules", make_repo(tmp_path / "r"), engine=ENGINE)
            ).session_id
            assert sup.get(sid).session.state is S.CONTRACT_PROPOSED
            split = await sup.foreman_split(sid)
            assert split.proposed_by == "model fake-model"
            assert [(t.id, t.files, t.checks) for t in split.subtasks] == [
                ("mod_a", ["mod_a/"], ["a"]),
                ("mod_b", ["mod_b/"], ["b"]),
            ]
            asked = json.dumps(server.requests[-1].body)
            assert "grep -qx A mod_a/value.txt" in asked and "mod_a" in asked
            view = sup.get(sid).foreman
            assert view is not None and view.split == split  # what the session view shows
            # the operator's own: refused whole when it names a check the contract lacks
            with pytest.raises(CorralError, match="'c' is not a check of the contract"):
                sup.set_foreman_split(
                    sid, {"subtasks": [{"id": "x", "intent": "y", "checks": ["c"]}]}
                )
            assert (await sup.foreman_split(sid)) == split  # nothing lost
            mine = sup.set_foreman_split(
                sid,
                json.dumps({"subtasks": [{"id": "all", "intent": "both", "checks": ["a", "b"]}]}),
            )
            assert mine.proposed_by == "operator"
            assert (await sup.foreman_split(sid)).subtasks[0].id == "all"
        finally:
            await sup.close()


async def test_a_reply_that_is_no_split_falls_back_to_one_subtask_per_check_and_says_so(
    tmp_path: Path,
) -> None:
    with FakeOpenAIServer([Reply(text="I would rather not.")]) as server:
        sup = await open_with_model(tmp_path, server)
        try:
            sid = (await sup.start("set both", make_repo(tmp_path / "r"), engine=ENGINE)).session_id
            split = await sup.foreman_split(sid)
            assert split.proposed_by == "one per contract check"
            assert [t.checks for t in split.subtasks] == [["a"], ["b"]]
            log = sup.journal_path(sid).read_text()
            assert "The model's split was not usable (the model's reply held no JSON)" in log
        finally:
            await sup.close()
