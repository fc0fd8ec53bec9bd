"""An agent's usage records are written by the agent: each test hands the
reader a hostile file and asserts the tokens it reports are only what this
conversation's well-formed records say (or nothing), that it reads only what
was appended since the last call, and that it never blocks or follows a
link out. Prices: a known model is priced, an unknown one never guessed."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from corral.supervisor.agents import usage_records
from corral.supervisor.agents.prices import price_of, priced
from corral.supervisor.agents.usage_records import UsageRecords
from corral.supervisor.config import BudgetSettings, ModelPrice
from corral.supervisor.models import CoderSession, ModelUse, TokenUse
from corral.supervisor.session.spend import budget_sentence, totals

SID = "6f1c2d3e-aaaa-4bbb-8ccc-0123456789ab"
THREAD = "019a0000-1111-7222-8333-444455556666"


def claude_line(
    message_id: str = "msg_1",
    *,
    session: str = SID,
    model: str = "claude-sonnet-4-5",
    **usage: object,
) -> str:
    counts = {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    counts.update(usage)
    message = {"id": message_id, "model": model, "usage": counts}
    return json.dumps({"type": "assistant", "sessionId": session, "message": message})


@pytest.fixture
def projects(tmp_path: Path) -> Path:
    root = tmp_path / ".claude" / "projects"
    (root / "-work-repo").mkdir(parents=True)
    return root


def claude(projects: Path, lines: list[str], name: str = SID) -> UsageRecords:
    path = projects / "-work-repo" / f"{name}.jsonl"
    path.write_text("".join(line + "\n" for line in lines))
    return UsageRecords("claude", path, SID, [projects])


def test_a_message_written_in_several_lines_counts_once_and_appends_are_read_alone(
    projects: Path,
) -> None:
    records = claude(
        projects,
        [claude_line("msg_1", output_tokens=1), claude_line("msg_1", output_tokens=7)],
    )
    assert records.read()
    assert records.usage() == {"claude-sonnet-4-5": TokenUse(input=10, output=7)}
    offset = records.offset
    assert not records.read(), "an unchanged file reported a change"
    with records.path.open("a") as fh:
        fh.write(claude_line("msg_2", cache_read_input_tokens=900) + "\n")
        fh.write(claude_line("msg_3")[:40])  # a line still being written
    assert records.read()
    assert records.offset > offset and records.offset < records.path.stat().st_size
    assert records.usage()["claude-sonnet-4-5"] == TokenUse(input=20, output=12, cache_read=900)


def test_garbage_negative_and_absurd_counts_are_dropped(projects: Path) -> None:
    lines = [
        "not json at all",
        "[1, 2, 3]",
        '"a string"',
        "{",
        "\x00\xff garbage",
        json.dumps({"type": "assistant", "sessionId": SID, "message": "text"}),
        json.dumps({"type": "assistant", "sessionId": SID, "message": {"id": 5}}),
        claude_line("neg", output_tokens=-1_000_000),
        claude_line("float", output_tokens=3.5),
        claude_line("bool", output_tokens=True),
        claude_line("text", output_tokens="900"),
        claude_line("huge", input_tokens=10**30),
        claude_line("nousage", model="claude-sonnet-4-5", input_tokens=None),
        claude_line("synthetic", model="<synthetic>"),
        claude_line("good", input_tokens=3, output_tokens=4),
    ]
    records = claude(projects, lines)
    records.read()
    assert records.usage() == {"claude-sonnet-4-5": TokenUse(input=3, output=4)}


def test_a_record_claiming_another_conversation_is_ignored(projects: Path) -> None:
    records = claude(projects, [claude_line("a", session="someone-else"), claude_line("b")])
    records.read()
    assert records.usage() == {"claude-sonnet-4-5": TokenUse(input=10, output=5)}


def test_a_record_working_outside_the_sessions_worktree_is_anothers(projects: Path) -> None:
    def at(cwd: str, key: str) -> str:
        line = json.loads(claude_line(key))
        return json.dumps({**line, "cwd": cwd})

    records = claude(
        projects,
        [at("/work/other-session", "a"), at("/work/wt-ab", "b"), at("/work/wt/sub", "c")],
    )
    records.workdir = "/work/wt"
    records.read()
    assert records.usage() == {"claude-sonnet-4-5": TokenUse(input=10, output=5)}


def test_a_rollout_of_a_thread_working_elsewhere_is_refused(tmp_path: Path) -> None:
    meta = {"type": "session_meta", "payload": {"id": THREAD, "cwd": "/work/other"}}
    path = codex_file(tmp_path, [meta, TURN, token_count(100, 0, 10)])
    records = UsageRecords("codex", path, THREAD, [tmp_path / ".codex" / "sessions"])
    records.workdir = "/work/wt"
    records.read()
    assert records.usage() == {} and records.refused == "its thread works in another directory"


def test_a_file_named_for_another_conversation_is_refused(projects: Path) -> None:
    other = claude(projects, [claude_line()], name="another-session")
    assert not other.read()
    assert other.usage() == {} and other.refused is not None


def test_a_symlink_to_another_file_is_not_followed(projects: Path, tmp_path: Path) -> None:
    secret = tmp_path / "elsewhere.jsonl"
    secret.write_text(claude_line(output_tokens=999) + "\n")
    link = projects / "-work-repo" / f"{SID}.jsonl"
    link.symlink_to(secret)
    records = UsageRecords("claude", link, SID, [projects])
    assert not records.read()
    assert records.usage() == {}


def test_a_directory_link_leading_out_of_the_agents_own_directories_is_refused(
    projects: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / f"{SID}.jsonl").write_text(claude_line(output_tokens=999) + "\n")
    (projects / "-escape").symlink_to(outside)
    records = UsageRecords("claude", projects / "-escape" / f"{SID}.jsonl", SID, [projects])
    records.read()
    assert records.usage() == {} and records.refused is not None


def test_a_fifo_in_its_place_neither_blocks_nor_counts(projects: Path) -> None:
    fifo = projects / "-work-repo" / f"{SID}.jsonl"
    os.mkfifo(fifo)
    records = UsageRecords("claude", fifo, SID, [projects])
    done = threading.Event()
    worker = threading.Thread(target=lambda: (records.read(), done.set()), daemon=True)
    worker.start()
    assert done.wait(5), "reading a FIFO blocked"
    assert records.usage() == {} and records.refused is not None


def test_a_huge_line_is_skipped_whole_and_the_next_one_still_counts(
    projects: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(usage_records, "MAX_LINE", 1000)
    monkeypatch.setattr(usage_records, "READ_BUDGET", 4000)
    # a line claiming a huge count, longer than a line may be, split over reads
    huge = claude_line("huge", output_tokens=10**6)[:-1] + ', "pad": "' + "x" * 9000 + '"}'
    records = claude(projects, [claude_line("a"), huge, claude_line("b")])
    reads = 0
    while records.offset < records.path.stat().st_size and reads < 20:
        records.read()
        reads += 1
    assert records.usage() == {"claude-sonnet-4-5": TokenUse(input=20, output=10)}
    assert records.skipped_lines == 1
    assert reads >= 3, "a read took more than its budget"


def test_a_rewritten_file_is_read_again_from_its_start(projects: Path) -> None:
    records = claude(projects, [claude_line("a"), claude_line("b"), claude_line("c")])
    records.read()
    records.path.write_text(claude_line("z", output_tokens=1) + "\n")  # shorter: replaced
    assert records.read()
    assert records.usage() == {"claude-sonnet-4-5": TokenUse(input=10, output=1)}


def codex_file(tmp_path: Path, lines: list[dict[str, object]], thread: str = THREAD) -> Path:
    day = tmp_path / ".codex" / "sessions" / "2026" / "12" / "03"
    day.mkdir(parents=True, exist_ok=True)
    path = day / f"rollout-2026-12-03T10-00-00-{thread}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def token_count(given: object, cached: object, out: object) -> dict[str, object]:
    total = {"input_tokens": given, "cached_input_tokens": cached, "output_tokens": out}
    return {
        "type": "event_msg",
        "payload": {"type": "token_count", "info": {"total_token_usage": total}},
    }


META = {"type": "session_meta", "payload": {"id": THREAD}}
TURN = {"type": "turn_context", "payload": {"model": "gpt-5-codex"}}


def test_codexs_running_total_is_taken_as_a_total_and_bad_ones_dropped(tmp_path: Path) -> None:
    path = codex_file(
        tmp_path,
        [
            META,
            TURN,
            token_count(100, 0, 10),
            token_count(900, 600, 40),
            token_count(100, 200, 50),  # more cached than sent: not a count
            token_count(-5, 0, 50),
            {"type": "event_msg", "payload": {"type": "token_count", "info": None}},
        ],
    )
    records = UsageRecords("codex", path, THREAD, [tmp_path / ".codex" / "sessions"])
    records.read()
    assert records.usage() == {"gpt-5-codex": TokenUse(input=300, output=40, cache_read=600)}


def test_a_rollout_whose_header_names_another_thread_is_refused(tmp_path: Path) -> None:
    forged = {"type": "session_meta", "payload": {"id": "someone-else"}}
    path = codex_file(tmp_path, [forged, TURN, token_count(100, 0, 10)])
    records = UsageRecords("codex", path, THREAD, [tmp_path / ".codex" / "sessions"])
    records.read()
    assert records.usage() == {} and records.refused == "its header names another thread"
    with path.open("a") as fh:
        fh.write(json.dumps(token_count(500, 0, 50)) + "\n")
    assert not records.read() and records.usage() == {}


def test_prices_are_known_by_name_and_never_guessed() -> None:
    sonnet = price_of("claude-sonnet-4-5-20250929", {})
    assert sonnet is not None and sonnet.input == 3.0
    assert price_of("anthropic/claude-sonnet-4-5", {}) == sonnet
    assert price_of("claude-sonnet-4-5-turbo-preview", {}) is None  # similar is not the same
    assert price_of("gpt-fake", {}) is None
    mine = ModelPrice(input=1, output=2)
    assert price_of("gpt-fake", {"gpt-fake": mine}) == mine
    cost, unknown = priced(
        {
            "claude-sonnet-4-5": TokenUse(input=1_000_000, cache_read=1_000_000),
            "gpt-fake": TokenUse(output=5),
            "empty": TokenUse(),
        },
        {},
    )
    assert cost == pytest.approx(3.30) and unknown == ["gpt-fake"]
    # a cache price left out is the input price
    assert priced({"m": TokenUse(cache_write=1_000_000)}, {"m": mine})[0] == pytest.approx(1.0)


def test_the_budget_sums_the_agents_records_and_corrals_own_models() -> None:
    session = CoderSession(id="s", intent="x", repo="/r", engine="external:claude")
    session.agent_usage = {"m": TokenUse(input=600, output=300)}
    session.agent_cost_usd = 2.0
    session.model_use = {"drafter": ModelUse(tokens_in=100, tokens_out=10, cost_usd=None)}
    session.cost_usd = 0.5
    spent = totals(session)
    assert spent.tokens.total == 1010 and spent.cost_usd == 2.5 and spent.price_unknown
    assert budget_sentence(spent, BudgetSettings(per_session_usd=3.0)) is None
    assert budget_sentence(spent, BudgetSettings(per_session_usd=2.5)) == (
        "over budget: $2.50 of $2.50"
    )
    assert budget_sentence(spent, BudgetSettings(per_session_tokens=1000)) == (
        "over budget: 1,010 of 1,000 tokens"
    )


def test_budget_and_prices_are_read_from_the_config_and_bad_ones_named(tmp_path: Path) -> None:
    from corral.supervisor.config import load_config
    from corral.supervisor.errors import ConfigError

    path = tmp_path / "config.toml"
    path.write_text(
        '[budget]\nper_session_usd = 5.0\n\n[prices."my-model"]\ninput = 1.0\noutput = 4.0\n'
    )
    config = load_config(path)
    assert config.budget.per_session_usd == 5.0 and config.budget.per_session_tokens is None
    assert config.prices["my-model"] == ModelPrice(input=1.0, output=4.0)
    path.write_text("[budget]\nper_session_usd = -1\n")
    with pytest.raises(ConfigError, match=r"budget\.per_session_usd"):
        load_config(path)
    path.write_text('[prices."m"]\ninput = 1.0\n')
    with pytest.raises(ConfigError, match=r"prices\.m\.output"):
        load_config(path)
    path.write_text('budget = "lots"\n')
    with pytest.raises(ConfigError, match=r"\[budget\] must be a table"):
        load_config(path)


def gemini_file(tmp_path: Path, lines: list[dict[str, object]]) -> Path:
    chats = tmp_path / ".gemini" / "tmp" / "project" / "chats"
    chats.mkdir(parents=True, exist_ok=True)
    path = chats / f"session-2026-12-03T10-00-{SID[:8]}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def gemini_message(key: str, **tokens: object) -> dict[str, object]:
    counts = {"input": 100, "output": 10, "cached": 0, "thoughts": 0, "tool": 0}
    counts.update(tokens)
    return {"id": key, "type": "gemini", "model": "gemini-2.5-pro", "tokens": counts}


def test_gemini_messages_rewritten_as_they_grow_count_once_and_cached_is_inside_input(
    tmp_path: Path,
) -> None:
    path = gemini_file(
        tmp_path,
        [
            {"sessionId": SID, "projectHash": "p"},
            {"id": "u1", "type": "user", "content": "hi"},
            gemini_message("g1", output=1),
            {"$set": {"lastUpdated": "now"}},
            gemini_message("g1", input=900, cached=600, output=30, thoughts=5),
            gemini_message("g2", input=10, cached=20),  # more cached than sent: dropped
        ],
    )
    records = UsageRecords("gemini", path, SID, [tmp_path / ".gemini" / "tmp"])
    records.read()
    assert records.usage() == {"gemini-2.5-pro": TokenUse(input=300, output=35, cache_read=600)}


def test_a_gemini_file_whose_first_record_names_another_session_is_refused(
    tmp_path: Path,
) -> None:
    path = gemini_file(tmp_path, [{"sessionId": SID[:8] + "-other"}, gemini_message("g1")])
    records = UsageRecords("gemini", path, SID, [tmp_path / ".gemini" / "tmp"])
    records.read()
    assert records.usage() == {} and records.refused is not None


def test_a_flood_of_messages_and_model_names_stays_bounded(
    projects: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(usage_records, "MAX_OPEN_RECORDS", 50)
    lines = [claude_line(f"m{i}", model=f"model-{i}", output_tokens=1) for i in range(500)]
    records = claude(projects, lines)
    records.read()
    usage = records.usage()
    assert len(usage) == usage_records.MAX_MODELS + 1
    assert usage["other models"].output == 500 - usage_records.MAX_MODELS
    assert sum(u.output for u in usage.values()) == 500


def test_only_the_pattern_corral_made_is_searched_never_one_a_hook_named() -> None:
    from corral.supervisor.agents.profiles import gemini_chats
    from corral.supervisor.session.usage import corrals_own_pattern

    sid = "0b7d4c3e-1111-4222-8333-944455556666"
    assert corrals_own_pattern("gemini", gemini_chats(sid), sid)
    # a hook payload's transcript_path is the agent's word: a pattern in it
    # would have the owner walk the disk on every pass
    assert not corrals_own_pattern("claude", "/*/*/*/*/*/*/*/*.jsonl", sid)
    assert not corrals_own_pattern("gemini", "/*/*/*/*/*/*.jsonl", sid)
    assert not corrals_own_pattern("gemini", gemini_chats("another-conversation"), sid)
