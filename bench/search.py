"""Benchmark of the board's `/` search over everything (supervisor/session/
search.py): 1,000 sessions, each with a journal of realistic events (tool
calls, agent status, checks with output), 200 of them with a Claude Code
transcript, searched for a word only one journal holds, a word only one
transcript holds, and a word none holds (the worst case: every file read).

Prints the median of the runs per query (files cold in memory only on the
first run; the page cache keeps them after, as it does on a real machine).

No budget in ARCHITECTURE.md and no peer: figures only (the README quotes
them); every query must find exactly the session that holds its word.

Run: .venv/bin/python bench/search.py [--sessions N] [--events N] [--runs N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from corral.supervisor.session.search import search
from tests.fakes.claude_transcript import write_transcript


def build(root: Path, sessions: int, events: int) -> dict[str, str]:
    journals = root / "journals"
    journals.mkdir(parents=True)
    transcripts: dict[str, str] = {}
    in_journal, in_transcript = sessions // 2, (sessions * 7 // 10) // 5 * 5  # one each
    for i in range(sessions):
        sid = f"{i:024x}"
        lines = []
        for seq in range(events):
            kind = ("tool_call", "agent_status", "check_result")[seq % 3]
            data = {
                "tool": "shell",
                "command": f"python -m pytest tests/test_{seq}.py",
                "output": "collected 12 items\n............ [100%]\n12 passed in 0.4s",
            }
            lines.append(json.dumps({"seq": seq, "session_id": sid, "kind": kind, "data": data}))
        if i == in_journal:
            lines.append(json.dumps({"kind": "plan_text", "data": {"text": "zanzibar"}}))
        (journals / f"{sid}.events.jsonl").write_text("\n".join(lines) + "\n")
        if i % 5 == 0:
            answer = "quetzalcoatl" if i == in_transcript else "Done."
            path = write_transcript(root / "claude" / f"{sid}.jsonl", "Fix the tests", answer)
            transcripts[sid] = str(path)
    return transcripts


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--events", type=int, default=300)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        transcripts = build(root, args.sessions, args.events)
        size = sum(p.stat().st_size for p in (root / "journals").iterdir())
        print(
            f"{args.sessions} sessions, {args.events} events each: {size / 1e6:.1f} MB of journals"
        )
        for words, expect in (("zanzibar", 1), ("quetzalcoatl", 1), ("nowhere-at-all", 0)):
            times = []
            for _ in range(args.runs):
                start = time.perf_counter()
                hits = search(words, [], root / "journals", transcripts)
                times.append(time.perf_counter() - start)
                assert len(hits) == expect, (words, hits)
            print(f"search {words!r:>18}: median {statistics.median(times) * 1000:.0f} ms")
    return 0


if __name__ == "__main__":
    from load import run_with_load  # bench/load.py: --load N busy loops

    sys.exit(run_with_load(lambda: main()))
