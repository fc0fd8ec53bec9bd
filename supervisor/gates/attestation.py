"""The attestation of a delivery: what gate 2 writes beside the delivered
commit (format: `git/attestation.py`, docs/attestation.md).

It records what a third party needs to re-run the exam (`corral verify`):
the contract as confirmed at gate 1 (setup, checks, `must_pass`, the judge
files' blobs; hidden checks as digests only, their content stays in the
state dir, unless the operator publishes them: `corral.publishHiddenChecks`), the baseline facts the verdicts were judged against (the capture
checks' values, the tests already failing on the untouched tree), the tree
the checks ran on and each check's verdict, plus who did the work (agent,
models, tokens, cost), the corral version and who approved it. Approval is a
person's call (an agent's is refused before it reaches the gate), so the
approver is the operator: their login and git identity.

Small by construction: per-test lists are capped (`MAX_TEST_NAMES`), output
is never recorded (a digest of the contract, not the logs, is the claim).

Blocking (git, ssh-keygen); call through `asyncio.to_thread`.
"""

from __future__ import annotations

import base64
import datetime
import functools
import getpass
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..contracts.checks import captures_from
from ..git.attestation import (
    PREDICATE_TYPE,
    STATEMENT_TYPE,
    AttestationError,
    canonical,
    envelope,
    git_config,
    publishes_hidden_checks,
    sign,
    signing_key,
    write_note,
)
from ..git.result_tree import entries_of
from ..models import CheckResult, CoderSession, OutcomeContract
from ..session.spend import totals

PREDICATE_VERSION = 1
MAX_TEST_NAMES = 50  # failing / already-failing test names kept per check
MAX_TEXT = 500  # characters of the intent and the contract's description kept
#: published hidden checks' files, all together, at most (the note stays small)
MAX_PUBLISHED_BYTES = 256 * 1024

#: a hidden file's content by its sha256 (the operator's hidden store)
HiddenFiles = Callable[[str], bytes]


@functools.cache
def corral_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("corral")
    except PackageNotFoundError:
        return "0+unknown"


def _capped(names: list[str]) -> dict[str, Any]:
    return {"names": names[:MAX_TEST_NAMES], "count": len(names)}


def contract_record(
    contract: OutcomeContract, published: HiddenFiles | None = None
) -> dict[str, Any]:
    """The contract as confirmed, for the record. Fields other branches add
    to the contract (judge files) come through its own dump; hidden checks
    are reduced to digests (their commands and files are the operator's
    secret: an agent that saw them could pass them and nothing else), unless
    `published` reads their files: the operator chose to publish them, and
    their commands and files go in beside the digests (all of them, or none
    when together they are over `MAX_PUBLISHED_BYTES`)."""
    data = contract.model_dump(mode="json")
    data["description"] = str(data.get("description", ""))[:MAX_TEXT]
    hidden = data.pop("hidden_checks", None) or []
    if hidden:
        digests = [_hidden_digest(h) for h in hidden if isinstance(h, dict)]
        if published is not None:
            digests = _published(hidden, digests, published)
        data["hidden_checks"] = digests
    return data


def _published(
    hidden: list[Any], digests: list[dict[str, Any]], read: HiddenFiles
) -> list[dict[str, Any]]:
    """The digests with each check's command and files' content beside them;
    the digests alone when the files together are too large for a note."""
    out: list[dict[str, Any]] = []
    size = 0
    for check, digest in zip(hidden, digests, strict=True):
        files = []
        for file, entry in zip(check.get("files") or [], digest["files"], strict=True):
            data = read(str(file.get("sha256")))
            size += len(data)
            try:
                files.append({**entry, "content": data.decode("utf-8")})
            except UnicodeDecodeError:
                files.append({**entry, "content_base64": base64.b64encode(data).decode("ascii")})
        size += len(str(check.get("command", "")))
        out.append({**digest, "command": str(check.get("command", "")), "files": files})
    return out if size <= MAX_PUBLISHED_BYTES else digests


def _hidden_digest(check: dict[str, Any]) -> dict[str, Any]:
    command = str(check.get("command", ""))
    return {
        "name": check.get("name"),
        "command_sha256": hashlib.sha256(command.encode("utf-8")).hexdigest(),
        "timeout_secs": check.get("timeout_secs"),
        "files": [
            {"path": f.get("path"), "sha256": f.get("sha256")}
            for f in check.get("files") or []
            if isinstance(f, dict)
        ],
    }


def result_record(result: CheckResult) -> dict[str, Any]:
    """One check's verdict, its duration and its per-test counts (names capped)."""
    record: dict[str, Any] = {
        "name": result.name,
        "passed": result.passed,
        "verdict": str(result.verdict.value if result.verdict else ""),
        "exit_code": result.exit_code,
        "duration_ms": result.duration_ms,
    }
    if result.timed_out:
        record["timed_out"] = True
    if getattr(result, "hidden", False):
        record["hidden"] = True
    if result.tests is not None:
        record["tests"] = {
            "passed": len(result.tests.passed),
            "failed": _capped(list(result.tests.failed)),
            "skipped": len(result.tests.skipped),
            "collection_errors": len(result.tests.collection_errors),
        }
    return record


def baseline_record(session: CoderSession) -> dict[str, Any]:
    """What the verdicts were judged against on the untouched tree."""
    contract = session.contract
    captures: dict[str, str] = {}
    if contract is not None:
        captures = captures_from(contract, session.baseline)
    already: dict[str, Any] = {}
    for r in session.baseline:  # the tests the untouched tree failed (its report's own word)
        failing = list(r.tests.failed) if r.tests is not None else list(r.already_failing)
        if failing:
            already[r.name] = _capped(failing)
    out: dict[str, Any] = {}
    if captures:
        out["captures"] = captures
    if already:
        out["already_failing"] = already
    return out


def judge_blobs(repo: Path, tree: str, contract: OutcomeContract) -> list[dict[str, Any]]:
    """The judge files (fixed at gate 1) with their blob in the delivered tree too."""
    judged = [j for j in contract.model_dump(mode="json").get("judge_files") or []]
    if not judged:
        return []
    paths = [str(j.get("path")) for j in judged if isinstance(j, dict) and j.get("path")]
    now = entries_of(repo, tree, paths)
    out = []
    for j in judged:
        if not isinstance(j, dict):
            continue
        entry = now.get(str(j.get("path")))
        out.append({**j, "delivered_blob": entry[1] if entry is not None else None})
    return out


def approver(config: dict[str, str]) -> dict[str, Any]:
    """The person who approved: the operator (approve is a person's method,
    refused to agents), by their login and git identity."""
    return {
        "role": "operator",
        "user": getpass.getuser(),
        "name": config.get("user.name") or None,
        "email": config.get("user.email") or None,
    }


def statement_for(
    session: CoderSession,
    *,
    commit: str,
    tree: str,
    results: list[CheckResult],
    delivery: str,
    branch: str | None,
    approved_by: dict[str, Any],
    override: str | None = None,
    partial: bool = False,
    now: float | None = None,
    hidden_files: HiddenFiles | None = None,
) -> dict[str, Any]:
    """The in-toto statement whose subject is the delivered commit
    (`hidden_files`: the operator publishes the hidden checks; see
    `contract_record`)."""
    contract = session.contract or OutcomeContract()
    spent = totals(session)
    models = list(session.model_use) or ([session.model] if session.model else [])
    for name in session.agent_usage:
        if name not in models:
            models.append(name)
    when = datetime.datetime.fromtimestamp(
        now if now is not None else datetime.datetime.now().timestamp(), tz=datetime.UTC
    )
    record = contract_record(contract, hidden_files)
    judged = judge_blobs(Path(session.repo), tree, contract)
    if judged:
        record["judge_files"] = judged
    predicate: dict[str, Any] = {
        "version": PREDICATE_VERSION,
        "corral_version": corral_version(),
        "session": session.id,
        "intent": session.intent.strip()[:MAX_TEXT],
        "delivery": {
            "kind": delivery,
            "branch": branch,
            "scope": "partial" if partial else "full",
            "override": override,
        },
        "start_commit": session.start_commit,
        "verified_tree": tree,
        "contract": record,
        "baseline": baseline_record(session),
        "results": [result_record(r) for r in results],
        "agent": {
            "engine": session.engine_ran or session.engine,
            "models": models,
            "model_pinned": session.model_pinned,
            "authored_by": list(session.authored_by),
        },
        "usage": {
            "tokens_in": spent.tokens.input,
            "tokens_out": spent.tokens.output,
            "tokens_cache_write": spent.tokens.cache_write,
            "tokens_cache_read": spent.tokens.cache_read,
            "cost_usd": None if spent.cost_usd is None else round(spent.cost_usd, 6),
            "price_unknown": spent.price_unknown,
        },
        "approved_by": approved_by,
        "approved_at": when.isoformat(timespec="seconds"),
    }
    return {
        "_type": STATEMENT_TYPE,
        "subject": [
            {
                "name": branch or f"refs/corral/results/{session.id}",
                "digest": {"gitCommit": commit},
            }
        ],
        "predicateType": PREDICATE_TYPE,
        "predicate": predicate,
    }


def attest(repo: Path, commit: str, statement: dict[str, Any], config: dict[str, str]) -> str:
    """Sign (when the operator's git signs) and write the note; returns the
    one-line summary the session keeps. Raises AttestationError when the
    operator's signing setup fails (nothing is written then: an unsigned
    note where a signed one was asked for would read as a lesser claim)."""
    key = signing_key(config)
    signer = config.get("user.email")
    signature = sign(canonical(statement), key, signer) if key is not None else None
    write_note(repo, commit, envelope(statement, signature))
    results = statement["predicate"]["results"]
    passing = sum(1 for r in results if r.get("passed"))
    signed = f", signed ({key.format})" if key is not None else ", unsigned"
    hidden = statement["predicate"]["contract"].get("hidden_checks") or []
    if any("command" in h for h in hidden):
        signed += ", hidden checks published"
    elif hidden and publishes_hidden_checks(config):
        signed += f", hidden checks as digests only (over {MAX_PUBLISHED_BYTES // 1024} KiB)"
    return (
        f"attested on {commit[:12]} in refs/notes/corral: {passing} of {len(results)} "
        f"checks passing{signed}"
    )


__all__ = [
    "AttestationError",
    "approver",
    "attest",
    "corral_version",
    "git_config",
    "publishes_hidden_checks",
    "signing_key",
    "statement_for",
]
