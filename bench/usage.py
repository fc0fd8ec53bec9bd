"""Benchmark of reading agents' usage records (agents/usage_records.py) for
100 sessions, as the usage watch does every `usage_secs`.

Each session has a Claude Code transcript of ~2 MB (assistant lines with
usage, and long tool-result lines without). Timed, each the median of
several passes over all 100 files:

- first read: every file read from its start (an owner that just opened);
- idle pass: nothing appended (the common case: an fstat per file);
- append pass: each file grew by one assistant message (a turn ended).

Budgets: idle pass ≤ 5 ms (a stat per file), append pass ≤ 50 ms for 100 sessions (the watch
runs off the event loop, every 10 s); first read ≤ 3 s.

Run: .venv/bin/python bench/usage.py [--sessions N] [--mb SIZE] [--load N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from corral.supervisor.agents.usage_records import UsageRecords

BUDGET_IDLE_MS = 5.0
BUDGET_APPEND_MS = 50.0
BUDGET_FIRST_S = 3.0


def assistant(session: str, n: int) -> str:
    usage = {
        "input_tokens": 12,
        "output_tokens": 300,
        "cache_creation_input_tokens": 2000,
        "cache_read_input_tokens": 40000,
    }
    message = {"id": f"msg_{n}", "model": "claude-sonnet-4-5", "usage": usage, "content": "x"}
    return json.dumps({"type": "assistant", "sessionId": session, "message": message}) + "\n"


def tool_result(session: str) -> str:
    return json.dumps({"type": "user", "sessionId": session, "toolUseResult": "y" * 20000}) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--mb", type=float, default=2.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / ".claude" / "projects"
        (root / "-work").mkdir(parents=True)
        readers = []
        for i in range(args.sessions):
            sid = f"00000000-0000-4000-8000-{i:012d}"
            path = root / "-work" / f"{sid}.jsonl"
            with path.open("w") as fh:
                n = 0
                while fh.tell() < args.mb * 1024 * 1024:
                    fh.write(assistant(sid, n) + tool_result(sid))
                    n += 1
            readers.append(UsageRecords("claude", path, sid, [root]))

        def one_pass() -> float:
            begin = time.perf_counter()
            for r in readers:
                r.read()
            return time.perf_counter() - begin

        first = one_pass()
        idle = statistics.median(one_pass() for _ in range(9)) * 1000
        appends = []
        for turn in range(9):
            for r in readers:
                with r.path.open("a") as fh:
                    fh.write(assistant(r.agent_session, 10**6 + turn))
            appends.append(one_pass() * 1000)
        append = statistics.median(appends)
        assert all(r.refused is None and r.usage() for r in readers)
    print(f"{args.sessions} sessions × {args.mb:g} MB transcripts")
    print(f"first read: {first:.2f} s (budget {BUDGET_FIRST_S:g} s)")
    print(f"idle pass: {idle:.2f} ms median (budget {BUDGET_IDLE_MS:g} ms)")
    print(f"append pass: {append:.2f} ms median (budget {BUDGET_APPEND_MS:g} ms)")
    over = first > BUDGET_FIRST_S or idle > BUDGET_IDLE_MS or append > BUDGET_APPEND_MS
    return 1 if over else 0


if __name__ == "__main__":
    from load import run_with_load  # bench/load.py: --load N busy loops

    sys.exit(run_with_load(main))
