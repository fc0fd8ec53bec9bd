"""`corral verify REV | A..B`: re-run each attested commit's recorded exam on
its own tree and compare the verdicts (see `supervisor.provenance`). Needs no
state dir and no owner: a fresh clone with its notes fetched will do.

Exit codes: 0 every attested commit verified again (plain commits in a
range are "not delivered by corral", no failure); 1 at least one did not;
2 a refusal (not a repository, not a revision).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from corral.supervisor.errors import CorralError
from corral.supervisor.provenance import NOTES_REF, CommitVerdict, Verification

from .common import fail
from .output import say

NOT_VERIFIED = 1


def add_parser(sub: Any) -> None:
    verify = sub.add_parser(
        "verify",
        help="re-run attested commits' recorded checks and compare the verdicts",
        description="For each commit with a corral attestation (a git note under "
        f"{NOTES_REF}), check its signature, materialise its tree fresh, run the recorded "
        "setup and checks in corral's sandbox and compare the verdicts with the recorded "
        "ones. Exit 0 only when every attested commit is verified again. Fetch the notes "
        f"first on a clone: git fetch origin {NOTES_REF}:{NOTES_REF}",
    )
    verify.add_argument("revisions", nargs="+", metavar="REV", help="a commit, or a range A..B")
    verify.add_argument("--repo", default=argparse.SUPPRESS, help="the git repository")
    verify.add_argument("--json", action="store_true", help="print one JSON object")
    verify.add_argument(
        "--notes-ref", default=NOTES_REF, help=f"where the attestations are (default {NOTES_REF})"
    )
    verify.add_argument(
        "--allow-unconfined",
        action="store_true",
        help="run the recorded setup and checks even where bubblewrap cannot confine them "
        "(they are the commit author's code: a CI runner that runs it anyway)",
    )
    verify.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECS",
        help="at most this long for the setup and for each check (default: as recorded, "
        "at most an hour)",
    )
    verify.add_argument(
        "--require-signed",
        action="store_true",
        help="fail an attestation that is not signed by a key of gpg.ssh.allowedSignersFile",
    )


def plain(text: str) -> str:
    """Text from a commit or a note, printable as is: control characters shown as `?`."""
    return "".join(c if c.isprintable() or c == " " else "?" for c in text)


def _print(verdict: CommitVerdict) -> None:
    word = {
        "verified": "verified again",
        "failed": "FAILED",
        "not_attested": "not delivered by corral",
        "changed_after_delivery": "FAILED: changed after delivery",
        "unreadable": "FAILED: unreadable attestation",
    }[verdict.state]
    say(f"{verdict.commit[:12]}  {plain(verdict.subject)[:60]}")
    say(f"  {word}")
    if verdict.state == "not_attested":
        return
    for sentence in verdict.sentences:
        if sentence not in ("verified again", "not delivered by corral"):
            say(f"  - {plain(sentence)}")
    for check in verdict.checks:
        mark = "=" if check.same else "!"  # ASCII: CI logs in any locale
        say(f"  {mark} {plain(check.sentence)}")
    sys.stdout.flush()


def run_verify(args: argparse.Namespace) -> int:
    repo = Path(getattr(args, "repo", None) or Path.cwd())
    try:
        verification = Verification(
            repo,
            notes_ref=args.notes_ref,
            require_signed=args.require_signed,
            allow_unconfined=args.allow_unconfined,
            **({"timeout_ceiling": args.timeout} if args.timeout else {}),
            on_commit=None if args.json else _print,
        )
        if not verification.notes.present:
            say(
                f"corral verify: this repository has no {args.notes_ref}: no attestation can "
                f"be read (on a clone: git fetch origin {NOTES_REF}:{NOTES_REF})",
                file=sys.stderr,
            )
        report = asyncio.run(verification.run(list(args.revisions)))
    except CorralError as exc:
        return fail(str(exc))
    if args.json:
        say(
            json.dumps(
                {
                    "ok": report.ok,
                    "attested": report.attested,
                    "commits": [c.as_json() for c in report.commits],
                },
                indent=2,
            )
        )
    else:
        failed = sum(1 for c in report.commits if not c.ok)
        plain_commits = len(report.commits) - report.attested
        say(
            f"corral verify: {report.attested - failed} of {report.attested} attested "
            f"commit(s) verified again"
            + (f", {failed} not" if failed else "")
            + (f"; {plain_commits} not delivered by corral" if plain_commits else "")
        )
    return 0 if report.ok else NOT_VERIFIED
