"""`corral log [REV]`: the attested commits reachable from REV (default
HEAD), each with its recorded verdicts, who approved it and whether its
attestation is signed. Reads the notes only; `corral verify` re-runs them."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from corral.supervisor.errors import CorralError
from corral.supervisor.provenance import MAX_LOG_COMMITS, NOTES_REF, attested_log

from .common import fail
from .output import say, say_json
from .verify import plain


def add_parser(sub: Any) -> None:
    log = sub.add_parser(
        "log",
        help="list the attested commits reachable from REV with their recorded verdicts",
    )
    log.add_argument("rev", nargs="?", default="HEAD", help="a revision or range (default HEAD)")
    log.add_argument("--repo", default=argparse.SUPPRESS, help="the git repository")
    log.add_argument("--json", action="store_true", help="print JSON")
    log.add_argument("--notes-ref", default=NOTES_REF, help=f"default {NOTES_REF}")
    log.add_argument(
        "-n", "--max-count", type=int, default=MAX_LOG_COMMITS, help="commits walked at most"
    )


def run_log(args: argparse.Namespace) -> int:
    repo = Path(getattr(args, "repo", None) or Path.cwd())
    try:
        entries, walked = attested_log(
            repo, args.rev, notes_ref=args.notes_ref, limit=max(1, args.max_count)
        )
    except CorralError as exc:
        return fail(str(exc))
    if args.json:
        say_json({"walked": walked, "attested": [e.as_json() for e in entries]})
        return 0
    for e in entries:
        if e.problem:
            say(f"{e.commit[:12]}  {plain(e.subject)[:60]}")
            say(f"  unreadable attestation: {plain(e.problem)}")
            continue
        passing = sum(1 for _n, p in e.results if p)
        checks = ", ".join(f"{plain(n)} {'pass' if p else 'FAIL'}" for n, p in e.results)
        who = f" · approved by {plain(e.approved_by)}" if e.approved_by else ""
        signed = "signed" if e.signed else "unsigned"
        say(f"{e.commit[:12]}  {plain(e.subject)[:60]}")
        say(f"  {passing}/{len(e.results)} checks: {checks} · {signed}{who}")
    say(f"corral log: {len(entries)} attested of {walked} commit(s) walked")
    return 0
