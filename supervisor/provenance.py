"""`corral verify` and `corral log`: re-checking what a delivery's attestation
claims, from the repository alone (no state dir, no owner, a fresh clone or a
CI runner will do).

For each attested commit, the commit's tree is materialised fresh (a new
private repository borrowing the objects, checked out at the commit: no
ignored file, nothing of anyone's worktree), the recorded setup runs in an
environment made for this run alone, the recorded checks run through the
same runner the owner uses (`contracts.checks.run_contract`, confined by
bubblewrap where it can run, no network unless the check recorded it), and
each verdict is compared with the one recorded. The per-test judgement is
made against what the attestation recorded of the untouched tree (the tests
already failing there, the capture checks' values).

What it proves: the recorded exam, re-run on this commit's tree, gives the
recorded verdicts. What it does not: that the exam was a good one — the
gate-1 judge files and hidden checks are how an operator makes it good, and
hidden checks (their content is in the operator's state dir only) are not
re-run here; their recorded verdicts are reported as such.

A commit carrying corral's trailers (`Corral-Session:`) but no attestation
for itself was changed after delivery (amended, rebased without its note,
squashed): that fails. A plain commit is "not delivered by corral", which is
no failure.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .contracts.checks import confines, run_contract
from .contracts.environment import Environments, SetupRun, setup_reason
from .contracts.hidden import as_hidden, materialized
from .errors import CorralError
from .git.attestation import (
    NOTES_REF,
    Attestation,
    AttestationError,
    Notes,
    SignatureCheck,
    check_signature,
    git_config,
    parse,
)
from .git.run import GitError, git
from .models import (
    MAX_CHECK_TIMEOUT_SECS,
    CheckResult,
    ContractCheck,
    HiddenCheck,
    HiddenFile,
    OutcomeContract,
    TestReport,
    hidden_path_problem,
)
from .sandbox import active_policy

TRAILER = "Corral-Session:"
# checkout writes files in parallel (one worker per core) past 200 files
PARALLEL_CHECKOUT = ("-c", "checkout.workers=0", "-c", "checkout.thresholdForParallelism=200")
MAX_LOG_COMMITS = 1000
MAX_RANGE_COMMITS = 5000

#: environment variables that point git at a repository's objects, kept for
#: the git calls reading the repository (a pre-receive hook's quarantine)
_OBJECT_ENV = ("GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_QUARANTINE_PATH")


def repository_env() -> dict[str, str]:
    """What of this process's git environment reading the repository needs:
    a pre-receive hook sees pushed objects only through its quarantine."""
    return {k: os.environ[k] for k in _OBJECT_ENV if os.environ.get(k)}


@dataclass
class CheckComparison:
    """One recorded check against its run here."""

    name: str
    recorded: bool | None  # passed at delivery (None: not recorded)
    now: bool | None  # passes here (None: not run here: hidden)
    sentence: str

    @property
    def same(self) -> bool:
        return self.now is None or self.recorded == self.now


@dataclass
class CommitVerdict:
    """What `corral verify` found for one commit."""

    commit: str
    subject: str
    state: str  # verified, failed, not_attested, changed_after_delivery, unreadable
    sentences: list[str] = field(default_factory=list)
    checks: list[CheckComparison] = field(default_factory=list)
    signature: str | None = None  # good, bad, unsigned, unchecked
    session: str | None = None
    seconds: float = 0.0
    checks_seconds: float = 0.0  # the setup's and the checks' own time
    confined: bool | None = None

    @property
    def ok(self) -> bool:
        return self.state in ("verified", "not_attested")

    def as_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "subject": self.subject,
            "state": self.state,
            "ok": self.ok,
            "session": self.session,
            "signature": self.signature,
            "confined": self.confined,
            "sentences": self.sentences,
            "checks": [
                {"name": c.name, "recorded": c.recorded, "now": c.now, "sentence": c.sentence}
                for c in self.checks
            ],
            "seconds": round(self.seconds, 3),
            "checks_seconds": round(self.checks_seconds, 3),
        }


@dataclass
class VerifyReport:
    commits: list[CommitVerdict]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.commits)

    @property
    def attested(self) -> int:
        return sum(1 for c in self.commits if c.state != "not_attested")


def commits_of(repo: Path, spec: str, env: dict[str, str] | None = None) -> list[str]:
    """The commits `spec` names, oldest first: a range (`A..B`, `A...B`) or one revision."""
    if spec.startswith("-"):
        raise CorralError(f"{spec!r} is not a revision; name a commit or a range A..B")
    if ".." in spec:
        low, _, high = spec.partition("..")
        for end in (low or "HEAD", high.removeprefix(".") or "HEAD"):
            if _resolves(repo, end, env) is None:
                raise CorralError(
                    f"{end} in {spec} is not a commit of this repository; name two commits "
                    "A..B (on a clone, fetch them first)"
                )
        out = git(
            repo, "rev-list", "--reverse", f"--max-count={MAX_RANGE_COMMITS}", spec,
            "--", env=env, timeout=120,
        )  # fmt: skip
        return out.split()
    commit = _resolves(repo, spec, env)
    if commit is None:
        raise CorralError(f"{spec} is not a commit of this repository; name a commit or A..B")
    return [commit]


def _resolves(repo: Path, rev: str, env: dict[str, str] | None) -> str | None:
    out = git(
        repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}",
        check=False, env=env,
    ).strip()  # fmt: skip
    return out or None


def _message(repo: Path, commit: str, env: dict[str, str] | None) -> str:
    return git(repo, "log", "-1", "--format=%B", commit, "--", env=env)


def _tree(repo: Path, commit: str, env: dict[str, str] | None) -> str:
    return git(repo, "rev-parse", f"{commit}^{{tree}}", env=env).strip()


def _blob_at(repo: Path, commit: str, path: str, env: dict[str, str] | None) -> str | None:
    out = git(repo, "rev-parse", "--verify", "--quiet", f"{commit}:{path}", check=False, env=env)
    return out.strip() or None


class Verification:
    """One `corral verify` run over a repository."""

    def __init__(
        self,
        repo: Path,
        *,
        notes_ref: str = NOTES_REF,
        require_signed: bool = False,
        allow_unconfined: bool = False,
        timeout_ceiling: float | None = MAX_CHECK_TIMEOUT_SECS,
        on_commit: Callable[[CommitVerdict], None] | None = None,
    ) -> None:
        self.repo = repo
        self.allow_unconfined = allow_unconfined
        self.env = repository_env() or None
        self.notes = Notes(repo, notes_ref, self.env)
        self.config = git_config(repo, self.env)
        self.require_signed = require_signed
        self.timeout_ceiling = timeout_ceiling
        self.on_commit = on_commit

    async def run(self, specs: list[str]) -> VerifyReport:
        commits: list[str] = []
        for spec in specs:
            for commit in await asyncio.to_thread(commits_of, self.repo, spec, self.env):
                if commit not in commits:
                    commits.append(commit)
        verdicts = []
        for commit in commits:
            verdict = await self.commit(commit)
            verdicts.append(verdict)
            if self.on_commit is not None:
                self.on_commit(verdict)
        return VerifyReport(verdicts)

    async def commit(self, commit: str) -> CommitVerdict:
        started = time.monotonic()
        message = await asyncio.to_thread(_message, self.repo, commit, self.env)
        subject = message.strip().splitlines()[0] if message.strip() else ""
        verdict = CommitVerdict(commit, subject[:200], "not_attested")
        text = self.notes.text(commit)
        if text is None:
            if TRAILER in message:
                verdict.state = "changed_after_delivery"
                verdict.sentences.append(
                    "it carries corral's delivery trailers but no attestation for this commit: "
                    "it was changed after delivery (amended, rebased or squashed without its "
                    "note), or its notes were not fetched (git fetch origin "
                    f"{NOTES_REF}:{NOTES_REF})"
                )
            else:
                verdict.sentences.append("not delivered by corral")
            return self._done(verdict, started)
        try:
            attestation = parse(text)
        except AttestationError as exc:
            verdict.state = "unreadable"
            verdict.sentences.append(f"its note is not a readable attestation: {exc}")
            return self._done(verdict, started)
        verdict.session = str(attestation.predicate.get("session") or "") or None
        signature = await asyncio.to_thread(check_signature, self.config, attestation)
        verdict.signature = signature.state
        if not self._signature_acceptable(verdict, signature):
            return self._done(verdict, started)
        await self._compare_identity(verdict, attestation)
        if verdict.state == "failed":
            return self._done(verdict, started)
        await self._rerun(verdict, attestation)
        return self._done(verdict, started)

    def _signature_acceptable(self, verdict: CommitVerdict, check: SignatureCheck) -> bool:
        if check.state == "bad":
            verdict.state = "failed"
            verdict.sentences.append(f"signature check failed: {check.sentence}")
            return False
        if check.state != "good" and self.require_signed:
            verdict.state = "failed"
            verdict.sentences.append(
                f"a signed attestation is required and this one is {check.sentence}"
            )
            return False
        verdict.sentences.append(check.sentence)
        return True

    async def _compare_identity(self, verdict: CommitVerdict, attestation: Attestation) -> None:
        """The commit against what was attested: its id, its tree, the judge files."""
        commit = verdict.commit
        predicate = attestation.predicate
        subject = attestation.subject_commit
        if subject != commit:
            verdict.sentences.append(
                f"the attestation was made for commit {str(subject)[:12]} and is attached to "
                "this one (its note was carried over by a rewrite: amend or rebase); the "
                "exam is re-run on this commit's tree"
            )
        tree = await asyncio.to_thread(_tree, self.repo, commit, self.env)
        recorded_tree = predicate.get("verified_tree")
        if recorded_tree and recorded_tree != tree:
            verdict.sentences.append(
                f"this commit's tree ({tree[:12]}) is not the tree the checks ran on at "
                f"delivery ({str(recorded_tree)[:12]})"
            )
        contract = predicate.get("contract") if isinstance(predicate.get("contract"), dict) else {}
        for judge in (contract or {}).get("judge_files") or []:
            if not isinstance(judge, dict) or not isinstance(judge.get("path"), str):
                continue
            path = judge["path"]
            now = await asyncio.to_thread(_blob_at, self.repo, commit, path, self.env)
            delivered = judge.get("delivered_blob", judge.get("blob"))
            if "delivered_blob" in judge and now != delivered:
                verdict.state = "failed"
                verdict.sentences.append(
                    f"judge file {path} differs from the one delivered (changed after "
                    "delivery: the exam itself was changed)"
                )
            elif now != judge.get("blob"):
                verdict.sentences.append(
                    f"judge file {path} differs from the one confirmed at gate 1 (the work "
                    "changed how it is judged; the operator approved that at gate 2)"
                )

    async def _rerun(self, verdict: CommitVerdict, attestation: Attestation) -> None:
        predicate = attestation.predicate
        try:
            contract = recorded_contract(predicate.get("contract"))
        except CorralError as exc:
            verdict.state = "unreadable"
            verdict.sentences.append(str(exc))
            return
        recorded = [r for r in predicate.get("results") or [] if isinstance(r, dict)]
        delivery = predicate.get("delivery")
        override = delivery.get("override") if isinstance(delivery, dict) else None
        if override:
            verdict.sentences.append(f"the operator overrode at gate 2: {override}")
        baseline = predicate.get("baseline") if isinstance(predicate.get("baseline"), dict) else {}
        verdict.confined = confines(active_policy())
        if not verdict.confined:
            if not self.allow_unconfined:
                verdict.state = "failed"
                verdict.sentences.append(
                    "its checks were not run: bubblewrap cannot confine them here (corral "
                    "doctor says why), and the recorded setup and checks are the commit's "
                    "author's code. Install bubblewrap, or pass --allow-unconfined where "
                    "running that code as you is acceptable (a CI runner)"
                )
                return
            verdict.sentences.append(
                "the checks ran unconfined (--allow-unconfined): bubblewrap cannot run here"
            )
        if contract.allow_credentials:
            contract = contract.model_copy(update={"allow_credentials": False})
            verdict.sentences.append(
                "the contract let its checks see credentials at delivery; here they run without any"
            )
        try:
            hidden = published_hidden(predicate.get("contract"))
        except CorralError as exc:
            verdict.state = "failed"
            verdict.sentences.append(str(exc))
            return
        with _fresh_checkout(self.repo, verdict.commit, self.env) as fresh:
            ran, setup_seconds = await self._run_checks(contract, fresh, baseline or {}, recorded)
        if hidden.checks:
            # a checkout of their own: nothing the visible checks ran can touch them
            with _fresh_checkout(self.repo, verdict.commit, self.env) as fresh:
                held, held_seconds = await self._run_hidden(contract, hidden, fresh)
            ran += held
            setup_seconds += held_seconds
        verdict.checks_seconds = sum(r.duration_ms for r in ran) / 1000.0 + setup_seconds
        now = {r.name: r for r in ran if not r.hidden}
        held_now = {r.name: r for r in ran if r.hidden}
        for record in recorded:
            name = str(record.get("name"))
            was = bool(record.get("passed"))
            if record.get("hidden"):
                if name in held_now:
                    verdict.checks.append(_compare(name, was, held_now[name], hidden=True))
                    continue
                verdict.checks.append(
                    CheckComparison(
                        name, was, None,
                        f"{name}: hidden check ({'passed' if was else 'failed'} at delivery), "
                        "not re-run here: its files are in the operator's state dir only "
                        "(git config corral.publishHiddenChecks true publishes them)",
                    )
                )  # fmt: skip
                continue
            result = now.get(name)
            if result is None:
                verdict.checks.append(
                    CheckComparison(name, was, False, f"{name}: recorded, but not in the contract")
                )
                continue
            verdict.checks.append(_compare(name, was, result))
        for result in ran:
            if not any(c.name == result.name for c in verdict.checks):
                if result.hidden:
                    verdict.checks.append(
                        CheckComparison(
                            result.name, None, result.passed,
                            f"{result.name}: a published hidden check with no recorded verdict",
                        )
                    )  # fmt: skip
                    continue
                verdict.checks.append(
                    CheckComparison(
                        result.name, None, result.passed,
                        f"{result.name}: in the contract but no verdict was recorded",
                    )
                )  # fmt: skip
        if verdict.state != "failed":
            same = all(c.same and c.recorded is not None for c in verdict.checks)
            verdict.state = "verified" if same else "failed"
        if verdict.state == "verified":
            verdict.sentences.insert(0, "verified again")

    async def _setup(
        self, contract: OutcomeContract, fresh: FreshCheckout
    ) -> tuple[SetupRun | None, float, str | None]:
        """The recorded setup in `fresh`: what it prepared, its seconds, and
        why it failed (None: it did not)."""
        setup = await Environments(fresh.scratch).prepare(
            contract,
            fresh.path,
            phase="verification",
            timeout_ceiling=self.timeout_ceiling,
            readable=fresh.borrowed,
        )
        seconds = setup.outcome.duration_ms / 1000.0 if setup is not None else 0.0
        if setup is not None and not setup.outcome.ok:
            return setup, seconds, setup_reason(setup.outcome)
        return setup, seconds, None

    async def _run_checks(
        self,
        contract: OutcomeContract,
        fresh: FreshCheckout,
        baseline: dict[str, Any],
        recorded: list[dict[str, Any]],
    ) -> tuple[list[CheckResult], float]:
        """The recorded checks here, after the recorded setup, and the setup's seconds."""
        setup, setup_seconds, why = await self._setup(contract, fresh)
        if why is not None:
            failed = [
                CheckResult(name=c.name, passed=False, reason=f"the setup failed: {why}")
                for c in contract.checks
            ]
            return failed, setup_seconds
        captures = baseline.get("captures") if isinstance(baseline.get("captures"), dict) else {}
        results = await run_contract(
            contract,
            fresh.path,
            captures={str(k): str(v) for k, v in (captures or {}).items()},
            timeout_ceiling=self.timeout_ceiling,
            environment=setup.environment if setup is not None else None,
            baseline=before_of(baseline, recorded),
            readable=fresh.borrowed,
        )
        return results, setup_seconds

    async def _run_hidden(
        self, contract: OutcomeContract, hidden: PublishedHidden, fresh: FreshCheckout
    ) -> tuple[list[CheckResult], float]:
        """The published hidden checks, as gate 2 ran them: the recorded setup
        again, their files written in, each judged on its own (`as_hidden`)."""
        setup, setup_seconds, why = await self._setup(contract, fresh)
        if why is not None:
            return [
                CheckResult(
                    name=h.name, passed=False, hidden=True, reason=f"the setup failed: {why}"
                )
                for h in hidden.checks
            ], setup_seconds
        exam = OutcomeContract(
            description=contract.description, checks=[h.as_check() for h in hidden.checks]
        )
        with materialized(fresh.path, hidden.checks, hidden):
            results = await run_contract(
                exam,
                fresh.path,
                timeout_ceiling=self.timeout_ceiling,
                environment=setup.environment if setup is not None else None,
                readable=fresh.borrowed,
            )
        return [as_hidden(r) for r in results], setup_seconds

    def _done(self, verdict: CommitVerdict, started: float) -> CommitVerdict:
        verdict.seconds = time.monotonic() - started
        return verdict


def before_of(baseline: dict[str, Any], recorded: list[dict[str, Any]]) -> list[CheckResult]:
    """What the untouched tree's runs are known as, for the per-test judgement:
    each check judged test by test at delivery (its result has `tests`) is
    judged so again, against the tests recorded as already failing there
    (none known: every failing test is the work's, and `must_pass` holds)."""
    already = baseline.get("already_failing")
    already = already if isinstance(already, dict) else {}
    per_test = {str(r.get("name")) for r in recorded if isinstance(r.get("tests"), dict)}
    before: list[CheckResult] = []
    for name in sorted(per_test | {str(k) for k in already}):
        entry = already.get(name)
        names = entry.get("names") if isinstance(entry, dict) else None
        failed = [str(t) for t in names] if isinstance(names, list) else []
        before.append(CheckResult(name=name, passed=True, tests=TestReport(failed=failed)))
    return before


@dataclass(frozen=True)
class PublishedHidden:
    """The hidden checks an attestation publishes (the operator set
    `corral.publishHiddenChecks`), and their files by sha256."""

    checks: list[HiddenCheck]
    files: dict[str, bytes]

    def get(self, sha: str) -> bytes:
        return self.files[sha]


def published_hidden(data: object) -> PublishedHidden:
    """The published hidden checks of an attestation's contract (those with
    their command beside the digests). The note is the commit author's data:
    a command or file that is not what its digest says, or a path that leaves
    the checkout, is refused (CorralError), never written or run."""
    entries = data.get("hidden_checks") if isinstance(data, dict) else None
    checks: list[HiddenCheck] = []
    files: dict[str, bytes] = {}
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("command"), str):
            continue
        name = str(entry.get("name") or "")
        command = entry["command"]
        if hashlib.sha256(command.encode("utf-8")).hexdigest() != entry.get("command_sha256"):
            raise CorralError(
                f"the published hidden check {name!r} is not the command its digest records "
                "(the note was changed)"
            )
        placed: list[HiddenFile] = []
        for file in entry.get("files") or []:
            path = str(file.get("path") if isinstance(file, dict) else "")
            problem = hidden_path_problem(path)
            if problem is not None or not isinstance(file, dict):
                raise CorralError(
                    f"the published hidden check {name!r} puts a file at {path!r}, which "
                    f"{problem or 'does not read'}"
                )
            content = _published_content(file)
            sha = hashlib.sha256(content).hexdigest() if content is not None else None
            if sha is None or sha != file.get("sha256"):
                raise CorralError(
                    f"the published hidden check {name!r} has a file ({path}) that is not "
                    "what its digest records (the note was changed)"
                )
            files[sha] = content  # type: ignore[assignment]
            placed.append(HiddenFile(path=path, sha256=sha))
        try:
            timeout = int(entry.get("timeout_secs") or MAX_CHECK_TIMEOUT_SECS)
            checks.append(
                HiddenCheck(name=name, command=command, timeout_secs=timeout, files=placed)
            )
        except ValueError as exc:
            raise CorralError(f"the published hidden check {name!r} does not read: {exc}") from exc
    return PublishedHidden(checks, files)


def _published_content(file: dict[str, Any]) -> bytes | None:
    if isinstance(file.get("content"), str):
        return str(file["content"]).encode("utf-8")
    if isinstance(file.get("content_base64"), str):
        try:
            return base64.b64decode(file["content_base64"], validate=True)
        except (binascii.Error, ValueError):
            return None
    return None


def _compare(name: str, was: bool, result: CheckResult, *, hidden: bool = False) -> CheckComparison:
    word = {True: "passed", False: "failed"}
    if hidden:
        name_shown = f"{name} (hidden)"
        if result.passed == was:
            return CheckComparison(name, was, result.passed, f"{name_shown}: {word[was]} again")
        how = result.reason or _last_line(result.output_tail) or f"exit {result.exit_code}"
        return CheckComparison(
            name, was, result.passed,
            f"{name_shown}: {word[was]} at delivery, {'passes' if result.passed else 'fails'} "
            f"now ({how})",
        )  # fmt: skip
    if result.passed == was:
        return CheckComparison(name, was, result.passed, f"{name}: {word[was]} again")
    how = result.reason or _last_line(result.output_tail) or f"exit {result.exit_code}"
    if result.timed_out:
        how = "timed out"
    return CheckComparison(
        name,
        was,
        result.passed,
        f"{name}: {word[was]} at delivery, {'passes' if result.passed else 'fails'} now ({how})",
    )


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def recorded_contract(data: object) -> OutcomeContract:
    """The contract the attestation recorded, as this corral runs it (fields
    it does not run, like judge files and hidden checks' digests, are read
    from the record itself)."""
    if not isinstance(data, dict):
        raise CorralError("the attestation records no contract")
    check_fields = set(ContractCheck.model_fields)
    checks = [
        {k: v for k, v in c.items() if k in check_fields}
        for c in data.get("checks") or []
        if isinstance(c, dict)
    ]
    keep = ("description", "setup", "setup_timeout_secs", "allow_credentials")
    try:
        contract = OutcomeContract.model_validate(
            {**{k: data[k] for k in keep if k in data}, "checks": checks}
        )
    except ValueError as exc:
        raise CorralError(f"the attestation's contract does not read: {exc}") from exc
    problems = contract.validate_contract()
    if problems:
        raise CorralError("the attestation's contract is not a valid one: " + "; ".join(problems))
    return contract


@dataclass(frozen=True)
class FreshCheckout:
    """A checkout `corral verify` made: its path, a scratch dir beside it, and
    the object stores it borrows (the setup and checks may read them, so git
    inside the sandbox sees the history: `git describe`, setuptools-scm)."""

    path: Path
    scratch: Path
    borrowed: tuple[Path, ...]


@contextlib.contextmanager
def _fresh_checkout(repo: Path, commit: str, env: dict[str, str] | None) -> Iterator[FreshCheckout]:
    """A new private repository borrowing `repo`'s objects (and holding its
    tags), checked out at `commit` (a real `.git`, so tools reading git
    metadata work), and a scratch dir beside it for the setup's
    environment; both removed after."""
    root = Path(tempfile.mkdtemp(prefix="corral-verify-"))
    try:
        checkout, scratch = root / "tree", root / "scratch"
        scratch.mkdir()
        objects = git(
            repo, "rev-parse", "--path-format=absolute", "--git-path", "objects", env=env
        ).strip()
        borrowed = [objects]
        extra = (env or {}).get("GIT_ALTERNATE_OBJECT_DIRECTORIES", "")
        borrowed += [p for p in extra.split(os.pathsep) if p]
        subprocess.run(
            ["git", "init", "-q", str(checkout)], check=True, capture_output=True, env=_plain_env()
        )
        (checkout / ".git" / "objects" / "info" / "alternates").write_text(
            "\n".join(borrowed) + "\n", encoding="utf-8"
        )
        # the tags too, as a clone has them: `git describe`, setuptools-scm
        tags = git(repo, "for-each-ref", "--format=%(objectname) %(refname)", "refs/tags",
                   env=env, timeout=120)  # fmt: skip
        if tags.strip():
            lines = [
                f"create {ref} {oid}"
                for oid, _, ref in (t.partition(" ") for t in tags.split("\n"))
                if ref
            ]
            git(checkout, "update-ref", "--stdin", input_text="\n".join(lines) + "\n", timeout=120)
        git(
            checkout, *PARALLEL_CHECKOUT, "-c", "advice.detachedHead=false",
            "checkout", "-q", "--detach", commit, timeout=600,
        )  # fmt: skip
        yield FreshCheckout(checkout, scratch, tuple(Path(p) for p in borrowed))
    except GitError as exc:
        raise CorralError(f"could not check out {commit[:12]} afresh: {exc}") from exc
    finally:
        _remove(root)


def _plain_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_CONFIG_NOSYSTEM"] = "1"
    return env


def _remove(root: Path) -> None:
    """Remove a verification dir, also where a check left a read-only directory."""

    def unlock(_func: Any, path: str, _exc: Any) -> None:
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(path), stat.S_IRWXU)
            if os.path.isdir(path) and not os.path.islink(path):
                os.chmod(path, stat.S_IRWXU)
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)

    shutil.rmtree(root, onerror=unlock)


# -- corral log ---------------------------------------------------------------------------


@dataclass
class LogEntry:
    """One attested commit, as its note records it (nothing re-run)."""

    commit: str
    subject: str
    session: str | None
    results: list[tuple[str, bool]]
    signed: bool
    approved_by: str | None
    problem: str | None = None  # the note did not read

    def as_json(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "subject": self.subject,
            "session": self.session,
            "checks": [{"name": n, "passed": p} for n, p in self.results],
            "signed": self.signed,
            "approved_by": self.approved_by,
            "problem": self.problem,
        }


def attested_log(
    repo: Path, rev: str = "HEAD", *, notes_ref: str = NOTES_REF, limit: int = MAX_LOG_COMMITS
) -> tuple[list[LogEntry], int]:
    """The attested commits reachable from `rev` (newest first, at most
    `limit` walked), and how many were walked."""
    if rev.startswith("-"):
        raise CorralError(f"{rev!r} is not a revision; name a commit or a range A..B")
    env = repository_env() or None
    notes = Notes(repo, notes_ref, env)
    out = git(
        repo, "log", f"--max-count={limit}", "--format=%H%x00%s", "--end-of-options", rev, "--",
        check=False, env=env, timeout=120,
    )  # fmt: skip
    if not out and _resolves(repo, rev.split("..")[-1] or "HEAD", env) is None:
        raise CorralError(f"{rev} is not a revision of this repository")
    entries: list[LogEntry] = []
    walked = 0
    for line in out.splitlines():
        commit, _, subject = line.partition("\0")
        walked += 1
        text = notes.text(commit)
        if text is None:
            continue
        try:
            attestation = parse(text)
        except AttestationError as exc:
            entries.append(LogEntry(commit, subject, None, [], False, None, str(exc)))
            continue
        predicate = attestation.predicate
        results = [
            (str(r.get("name")), bool(r.get("passed")))
            for r in predicate.get("results") or []
            if isinstance(r, dict)
        ]
        who = predicate.get("approved_by") if isinstance(predicate.get("approved_by"), dict) else {}
        person = (who or {}).get("name") or (who or {}).get("user")
        entries.append(
            LogEntry(
                commit,
                subject,
                str(predicate.get("session") or "") or None,
                results,
                attestation.signature is not None,
                str(person) if person else None,
            )
        )
    return entries, walked


def note_summary(repo: Path, commit: str, *, notes_ref: str = NOTES_REF) -> str | None:
    """One line on the attestation beside `commit`, as the repository holds it
    now (None: there is none, or the repository is gone)."""
    try:
        text = git(repo, "notes", "--ref", notes_ref, "show", commit, check=False)
    except (GitError, OSError):
        return None
    if not text.strip():
        return None
    try:
        attestation = parse(text)
    except AttestationError as exc:
        return f"unreadable attestation on {commit[:12]}: {exc}"
    results = [r for r in attestation.predicate.get("results") or [] if isinstance(r, dict)]
    passing = sum(1 for r in results if r.get("passed"))
    signature = attestation.signature
    signed = f"signed ({signature.get('format')})" if signature else "unsigned"
    return (
        f"attested on {commit[:12]} in {notes_ref}: {passing} of {len(results)} checks "
        f"passing, {signed} (corral verify {commit[:12]} re-runs it)"
    )
