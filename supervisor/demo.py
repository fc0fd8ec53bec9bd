"""`corral demo`: a generated demo repository, a demo drafter and a demo
agent, all labelled as such. Nothing here needs a model, a key or an
installed agent CLI.

The demo agent is scripted, but its work is real: it edits real files in the
session's real worktree, and the runtime verifies it by running the checks.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from corral.assets import path as asset_path

from .api import Supervisor
from .contracts.drafting import DraftRequest, ReviseRequest
from .models import ContractCheck, OutcomeContract
from .states import NeedsYou

DEMO_LABEL = "demo"
ASSETS = asset_path("demo_repo")

SLUG_FIX = '''"""URL slugs."""

import re
import unicodedata


def slugify(text: str) -> str:
    """Lower-case ASCII words joined by dashes; accents are folded (é → e)."""
    folded = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    words = re.findall(r"[a-z0-9]+", folded.lower())
    return "-".join(words)
'''

PAGES_FIX = '''"""Pagination."""


def paginate(items: list, size: int) -> list[list]:
    """Split items into pages of at most `size`; the last page may be short."""
    return [items[start : start + size] for start in range(0, len(items), size)]
'''

REPORT_JSON = '''"""A word-count report: `python3 -m textkit.report [--json] [FILE]`."""

import json
import sys
from collections import Counter


def counts(text: str) -> Counter:
    return Counter(text.split())


def main(argv: list[str]) -> int:
    as_json = "--json" in argv
    args = [a for a in argv if a != "--json"]
    text = open(args[0]).read() if args else "the quick brown fox jumps over the lazy dog"
    top = counts(text).most_common(5)
    if as_json:
        print(json.dumps([{"word": w, "count": n} for w, n in top]))
        return 0
    for word, n in top:
        print(f"{n:4d} {word}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
'''

# the json recipe also notes the flag in the demo README: a second file and a
# third hunk, so the demo's diff can be approved in part (leave README out)
README_JSON = (ASSETS / "README.md").read_text(encoding="utf-8").rstrip("\n") + (
    "\n\n`python3 -m textkit.report --json` prints the top words as JSON.\n"
)

UNIT_TESTS = ContractCheck(name="unit_tests", command="python3 -m unittest -q", timeout_secs=60)


def _topic(intent: str) -> str:
    text = intent.lower()
    for key in ("slug", "paginat", "json"):
        if key in text:
            return key
    return "other"


def demo_contract(intent: str) -> OutcomeContract:
    topic = _topic(intent)
    if topic == "slug":
        check = ContractCheck(
            name="slug_folds_accents",
            command='python3 -c "from textkit.slug import slugify; '
            "assert slugify('Crème Brûlée') == 'creme-brulee', slugify('Crème Brûlée')\"",
            timeout_secs=30,
        )
        desc = "slugify() folds accented letters to ASCII; existing tests keep passing."
    elif topic == "paginat":
        check = ContractCheck(
            name="last_page_kept",
            command='python3 -c "from textkit.pages import paginate; '
            'assert paginate([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]"',
            timeout_secs=30,
        )
        desc = "paginate() keeps the short last page; existing tests keep passing."
    elif topic == "json":
        check = ContractCheck(
            name="report_json",
            command="python3 -m textkit.report --json | python3 -c "
            "\"import json, sys; rows = json.load(sys.stdin); assert rows[0]['word'] == 'the'\"",
            timeout_secs=30,
        )
        desc = "`python3 -m textkit.report --json` prints the top words as JSON."
    else:
        check = ContractCheck(
            name="task_recorded",
            command="grep -qF -- " + _shell_quote(intent.strip()[:60]) + " DEMO_NOTES.md",
            timeout_secs=10,
        )
        desc = (
            "Demo contract: the demo agent records the task in DEMO_NOTES.md. "
            "(A real drafter proposes checks from the repository.)"
        )
    return OutcomeContract(description=desc, checks=[check, UNIT_TESTS])


def _shell_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


class DemoDrafter:
    """Drafts the demo's contracts from keywords in the intent (demo only)."""

    name = "demo drafter"

    async def draft(self, request: DraftRequest) -> OutcomeContract:
        return demo_contract(request.intent)

    async def revise(self, request: ReviseRequest) -> OutcomeContract:
        assert request.prior is not None
        return request.prior.model_copy(deep=True)


def make_demo_repo(parent: Path | None = None) -> Path:
    """Copy the demo template into a fresh git repository and commit it."""
    root = Path(tempfile.mkdtemp(prefix="corral-demo-", dir=parent)) / "textkit"
    shutil.copytree(ASSETS, root, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    env_id = ["-c", "user.name=corral demo", "-c", "user.email=demo@corral.local"]
    for cmd in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "-A"],
        ["git", *env_id, "commit", "-q", "-m", "textkit: initial import (corral demo)"],
    ):
        subprocess.run(cmd, cwd=root, check=True, capture_output=True)
    return root


DEMO_INTENTS = (
    "Make slugify() fold accents (Crème Brûlée → creme-brulee)",
    "Add a --json flag to the word-count report",
    "Fix the off-by-one in paginate() so the last page is not lost",
)


async def seed_demo(supervisor: Supervisor, repo: Path) -> list[str]:
    """Start the demo's sessions: one with a verified diff to approve, one
    working, one waiting for its contract to be confirmed."""
    ids: list[str] = []
    for i, intent in enumerate(DEMO_INTENTS):
        # the demo confirms the first two itself, and answers the first one's
        # question: no "needs you" notice for what the demo decides
        decided = [NeedsYou.CONTRACT] if i < 2 else []
        if i == 0:
            decided.append(NeedsYou.QUESTION)
        result = await supervisor.start(intent, repo, engine="auto", decided=decided)
        ids.append(result.session_id)
    for sid in ids[:2]:
        await supervisor.wait_for(sid, needs=True, timeout=60)
        await supervisor.confirm(sid)
    # the demo agent asks before editing; the demo answers "Yes" for the first one
    # so a verified diff is waiting when the operator looks
    for _ in range(3):
        row = await supervisor.wait_for(ids[0], needs=True, timeout=60)
        if row.needs_you != "question":
            break
        await supervisor.respond(ids[0], "Yes")
    return ids
