"""ACP agents stream on the ACP loop (`supervisor/acp/loop.py`), never on the
owner's: a console that owns the state dir keeps its loop for keys while
50 agents talk. What the agents say reaches the owner in batches, pieces of
speech coalesced, and nothing of it may be lost or reordered: the journal and
the conversation view hold every chunk's text, in order."""

from __future__ import annotations

import shutil
import sys
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from corral.supervisor.acp.client import CorralClient
from corral.supervisor.api import Supervisor
from corral.supervisor.contracts.drafting import FixedDrafter
from corral.supervisor.events import ConversationData
from corral.supervisor.factory import build_supervisor
from corral.supervisor.models import ContractCheck, OutcomeContract
from corral.supervisor.session.journal import read_journal
from corral.supervisor.states import CoderState as S
from corral.tui.conversation_blocks import fold
from tests.conftest import fast_config, init_repo
from tests.fakes.acp_agent import BURST_THOUGHT_EVERY, burst_pieces

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

FAKE = Path(__file__).resolve().parents[1] / "fakes" / "acp_agent.py"
NOTES = OutcomeContract(
    description="notes.txt says done",
    checks=[ContractCheck(name="notes_done", command="grep -q done notes.txt", timeout_secs=10)],
)
LINES = 300


@pytest.fixture
async def sup(tmp_path: Path) -> AsyncIterator[Supervisor]:
    supervisor = build_supervisor(
        tmp_path / "state", FixedDrafter(NOTES), socket_dir=tmp_path / "tmux", config=fast_config()
    )
    await supervisor.open()
    yield supervisor
    await supervisor.close()


async def burst_session(sup: Supervisor, repo: Path) -> str:
    engine = " ".join(["acp:" + sys.executable, str(FAKE), "burst", str(LINES)])
    sid = (await sup.start("Write done to notes.txt", repo, engine=engine)).session_id
    await sup.confirm(sid)
    row = await sup.wait_for(sid, {S.NEEDS_APPROVAL, S.FAILED}, timeout=120)
    assert row.state is S.NEEDS_APPROVAL, row.error
    return sid


def expected_blocks() -> list[tuple[str, str]]:
    """What the burst said, as the conversation view shows it: runs of
    message lines, each broken by its one-line thought."""
    # every turn of the scripted agent opens with a thought and these words
    blocks: list[tuple[str, list[str]]] = [
        ("thought", ["Thinking about notes."]),
        ("message", ["Working on it now."]),
    ]

    def said(part: str, line: str) -> None:
        if blocks and blocks[-1][0] == part:
            blocks[-1][1].append(line)
        else:
            blocks.append((part, [line]))

    for i in range(1, LINES + 1):
        if i % BURST_THOUGHT_EVERY == 0:
            said("thought", f"considering {i}")
        said("message", "".join(burst_pieces(i)).rstrip("\n"))
    return [(part, "\n".join(lines)) for part, lines in blocks]


@pytest.mark.slow
async def test_a_burst_of_chunks_is_journaled_whole_and_in_order_in_fewer_appends(
    tmp_path: Path, sup: Supervisor
) -> None:
    sid = await burst_session(sup, init_repo(tmp_path / "repo"))
    # the journal on disk, as a later corral (or the conversation view) reads it
    journal = read_journal(tmp_path / "state" / "journals" / f"{sid}.events.jsonl")
    spoken = [
        e for e in journal if isinstance(e.data, ConversationData) and e.data.part == "message"
    ]
    blocks = [(b.kind, b.text) for b in fold(journal).blocks if b.kind in ("message", "thought")]
    assert blocks == expected_blocks()  # every piece's text, in order, none twice
    # 900 pieces, 300 lines: coalesced per tick, not one append per line
    assert len(spoken) <= LINES // 4, f"{len(spoken)} message events for {LINES} lines"


@pytest.mark.slow
async def test_the_agents_stream_is_handled_off_the_owners_loop(
    tmp_path: Path, sup: Supervisor, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = threading.current_thread()
    handled_on: set[threading.Thread] = set()
    original: Callable[..., Any] = CorralClient.session_update

    async def watched(self: CorralClient, session_id: str, update: Any, **kw: Any) -> None:
        handled_on.add(threading.current_thread())
        await original(self, session_id, update, **kw)

    monkeypatch.setattr(CorralClient, "session_update", watched)
    sid = await burst_session(sup, init_repo(tmp_path / "repo"))
    assert handled_on, "the agent's updates were never handled"
    assert owner not in handled_on, "the agent's stream was parsed on the owner's loop"
    # and what it said still reached the owner's log and board
    said = [e.data for e in sup.replay(sid) if isinstance(e.data, ConversationData)]
    assert any(d.part == "turn_end" and d.text == "end_turn" for d in said)
