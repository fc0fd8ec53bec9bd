"""Running contract checks: the runtime's own verdict, never a model's.

Each check runs `bash -c <command>` in its own process group with a timeout,
confined by the sandbox (`..sandbox`) when one can run here;
on timeout or cancel the whole group is killed and reaped. Output is capped
to a tail. A differential check compares its output with the value a capture
check recorded on the untouched tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import math
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Protocol

from ..governance.env_scrub import scrubbed_env
from ..models import (
    CheckResult,
    CheckVerdict,
    ContractCheck,
    DeltaWithin,
    OutcomeContract,
    TestReport,
)
from ..sandbox import Grant, SandboxPolicy, active_policy, confined_argv, sandbox_status
from ..sandbox.argv import confined_env, identity
from .per_test import Judgement, against_baseline, names, on_untouched_tree
from .verdicts import STARTUP_CRASH, classify, untouched_startup_crash, untouched_timeout


class CheckEnvironment(Protocol):
    """What a check needs of a ready setup environment (`environment.py`'s
    `CheckEnvironment` is one): said here so the runner does not import the
    setup, which runs its commands with this module's `run_command`."""

    @property
    def grant(self) -> Grant: ...

    def apply(self, env: Mapping[str, str]) -> dict[str, str]: ...


OUTPUT_TAIL_CHARS = 4000
MAX_READ_BYTES = 4 * 1024 * 1024


# Runs a check's command elsewhere (another host): (command, timeout, network)
# -> (exit code or None, combined output, timed out).
CommandRunner = Callable[[str, float, bool], Awaitable[tuple[int | None, str, bool]]]


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


def confines(policy: SandboxPolicy) -> bool:
    """Whether a command runs confined under `policy` here."""
    status = sandbox_status()
    return policy.enabled and status.available and status.bwrap is not None


def sandboxed_argv(
    command: str,
    cwd: Path,
    env: dict[str, str],
    *,
    network: bool = False,
    policy: SandboxPolicy | None = None,
    grant: Grant | None = None,
) -> tuple[list[str], dict[str, str]]:
    """`bash -c command`, inside the sandbox when the policy is on and one
    can run here (else as is: `sandbox_status` and the CLI say so)."""
    policy = active_policy() if policy is None else policy
    argv = ["bash", "-c", command]
    status = sandbox_status()
    if not confines(policy) or status.bwrap is None:
        return argv, env
    return (
        confined_argv(argv, cwd, policy, env, network=network, bwrap=status.bwrap, grant=grant),
        confined_env(env, git_identity=True),
    )


# Tool homes that default to places under $HOME: kept where they were when
# a check gets its own home, so its toolchains and module caches still resolve.
_TOOL_HOMES = {
    "CARGO_HOME": ".cargo",
    "RUSTUP_HOME": ".rustup",
    "GOPATH": "go",
}


def private_home_env(env: dict[str, str], private: Path) -> dict[str, str]:
    """`env` with HOME and the temp dir in `private` (a check's own writable
    place: a tool that writes under ~ or $TMPDIR works, and nothing is shared
    between checks); the git identity and toolchain homes stay as they were."""
    out = dict(env)
    home, tmp = private / "home", private / "tmp"
    home.mkdir(exist_ok=True)
    tmp.mkdir(exist_ok=True)
    real_home = env.get("HOME", "")
    if real_home:
        for key, value in identity(real_home).items():
            out.setdefault(key, value)
        for key, rel in _TOOL_HOMES.items():
            if key not in out and os.path.isdir(os.path.join(real_home, rel)):
                out[key] = os.path.join(real_home, rel)
    out["HOME"] = str(home)
    for key in ("TMPDIR", "TMP", "TEMP"):
        out[key] = str(tmp)
    return out


async def run_command(
    command: str,
    cwd: Path,
    timeout: float,
    env: dict[str, str] | None = None,
    *,
    network: bool = False,
    policy: SandboxPolicy | None = None,
    grant: Grant | None = None,
    private: Path | None = None,
) -> tuple[int | None, str, bool]:
    """Run a shell command; returns (exit code or None, combined output, timed_out).
    With `private` (a dir the caller owns), a confined command's HOME and
    temp dir are in it, writable inside the sandbox; an unconfined one (the
    operator opted out) keeps the operator's."""
    run_env = scrubbed_env(invoked_by="corral-check") if env is None else dict(env)
    policy = active_policy() if policy is None else policy
    if private is not None and not confines(policy):
        private = None
    if private is not None:
        grant = grant or Grant()
        grant = Grant(
            writable=(*grant.writable, private),
            readable=grant.readable,
            terminal=grant.terminal,
            programs=grant.programs,
        )
    argv, run_env = sandboxed_argv(
        command, cwd, run_env, network=network, policy=policy, grant=grant
    )
    if private is not None:
        run_env = private_home_env(run_env, private)
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=str(cwd),
        env=run_env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    chunks: list[bytes] = []
    size = 0

    async def pump() -> None:
        nonlocal size
        assert proc.stdout is not None
        while True:
            data = await proc.stdout.read(65536)
            if not data:
                break
            chunks.append(data)
            size += len(data)
            while size > MAX_READ_BYTES and len(chunks) > 1:
                size -= len(chunks.pop(0))
        await proc.wait()

    timed_out = False
    try:
        await asyncio.wait_for(pump(), timeout)
    except TimeoutError:
        timed_out = True
        _kill_group(proc)
        with contextlib.suppress(ProcessLookupError):
            await proc.wait()
    except asyncio.CancelledError:
        _kill_group(proc)
        with contextlib.suppress(ProcessLookupError):
            await asyncio.shield(proc.wait())
        raise
    finally:
        # A check may leave children in its group; never let them outlive it.
        _kill_group(proc)
    text = b"".join(chunks).decode("utf-8", errors="replace")
    return (None if timed_out else proc.returncode), text, timed_out


def _number(text: str) -> float | None:
    """The output's last word as a finite number (nan and inf compare false
    or unbounded with every limit, so they are no number here)."""
    try:
        value = float(text.strip().split()[-1])
    except (ValueError, IndexError):
        return None
    return value if math.isfinite(value) else None


CAPTURE_PREFIX = "sha256:"
# an output this long may have lost its head (run_command keeps the tail)
COMPARABLE_BYTES = MAX_READ_BYTES - 65536


def capture_of(output: str) -> str | None:
    """What a capture records of its output: a digest of all of it (so a
    long output, or one that prints corral's own "[corral]" lines, compares
    whole) and its last word (for a numeric differential). None when the
    output may have been cut."""
    if len(output.encode("utf-8", "replace")) >= COMPARABLE_BYTES:
        return None
    text = output.strip()
    digest = hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()
    last = text.split()[-1][:200] if text.split() else ""
    return f"{CAPTURE_PREFIX}{digest}\n{last}"


def _differential_ok(check: ContractCheck, output: str, captures: dict[str, str]) -> str | None:
    """None when the differential holds, else why not."""
    diff = check.differential
    if diff is None:
        return None
    before = captures.get(diff.baseline)
    if before is None:
        return f"no baseline value was captured for '{diff.baseline}'"
    if before.startswith(CAPTURE_PREFIX):  # recorded whole (see `capture_of`)
        now_capture = capture_of(output)
        if now_capture is None:
            return "the output is too long to compare whole: make the check print the value"
        same = now_capture.split("\n")[0] == before.split("\n")[0]
        before_value = before.partition("\n")[2]
    else:  # a baseline recorded before captures were kept whole: its tail
        same = output.strip() == before.strip()
        before_value = before
    now = output.strip()
    shown = before_value.strip()
    if diff.expect == "changed":
        return None if not same else f"output did not change from its captured value ({shown!r})"
    if diff.expect == "unchanged":
        return None if same else f"output changed from its captured value ({shown!r})"
    assert isinstance(diff.expect, DeltaWithin)
    before = before_value
    a, b = _number(before), _number(now)
    if a is None or b is None:
        return f"cannot compare non-numeric values {before.strip()!r} and {now!r}"
    delta = b - a
    if diff.expect.min is not None and delta < diff.expect.min:
        return f"changed by {delta:g}, less than {diff.expect.min:g}"
    if diff.expect.max is not None and delta > diff.expect.max:
        return f"changed by {delta:g}, more than {diff.expect.max:g}"
    return None


# option lists a runner reads from the environment: ours are appended to what is there
_OPTION_LISTS = ("PYTEST_ADDOPTS", "GOFLAGS")


def _with_report_env(env: dict[str, str], extra: dict[str, str]) -> dict[str, str]:
    """`env` plus what asks the runner for its report; options the
    environment already passes to pytest or go are kept, ours come after;
    any other setting the environment already has (a GOPROXY) wins.

    Python keeps a check's bytecode in the tree it checks, removed with it:
    an operator's PYTHONPYCACHEPREFIX would keep it apart, where a later tree
    at the same path finds it and Python takes it as fresh when a source has
    the same size and second (the previous tree's code would run)."""
    out = {k: v for k, v in env.items() if k != "PYTHONPYCACHEPREFIX"}
    for key, value in extra.items():
        if not env.get(key):
            out[key] = value
        elif key in _OPTION_LISTS:
            out[key] = f"{env[key]} {value}"
    return out


def _emptied(private: Path) -> bool:
    """`private` with nothing left in it (dirs a run made unwritable made
    writable again first): what a check's run wrote under its HOME, its temp
    dir or beside its report is gone before the next run. False when
    something stayed (the next run would not start clean)."""

    def writable(folder: Path) -> None:
        with contextlib.suppress(OSError):
            folder.chmod(0o700)
        with contextlib.suppress(OSError):
            for child in folder.iterdir():
                if child.is_dir() and not child.is_symlink():
                    writable(child)

    writable(private)
    with contextlib.suppress(OSError):
        for child in list(private.iterdir()):
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
    try:
        return not any(private.iterdir())
    except OSError:
        return False


# A flake is a test or a few (a timing test on a loaded machine); a change
# that breaks more than this at once is the work's, and re-running a large
# suite to ask again would double a long verification for nothing (a
# 27,000-test suite with 2,874 newly failing ran past its deadline).
FLAKY_RERUN_MAX_TESTS = 10


def _may_be_flaky(
    judgement: Judgement | None,
    report: TestReport | None,
    baseline: TestReport | None,
    deadline: float | None,
) -> bool:
    """Whether a verification's per-test failure earns one immediate re-run:
    every test that fails now and did not fail on the untouched tree passed
    there (a test the work adds must pass every time: never a flake), they
    are few (`FLAKY_RERUN_MAX_TESTS`), and time is left."""
    if judgement is None or judgement.passed or report is None or baseline is None:
        return False
    if deadline is not None and deadline - time.monotonic() < 1:
        return False
    new = [t for t in report.failed if t not in set(baseline.failed)]
    return 0 < len(new) <= FLAKY_RERUN_MAX_TESTS and set(new) <= set(baseline.passed)


def _rerun_judgement(
    check: ContractCheck,
    first: TestReport | None,
    again: tuple[int | None, str, bool, TestReport | None],
    baseline: TestReport | None,
) -> tuple[Judgement, list[str]] | None:
    """The re-run's verdict where it shows the first failure was a flake:
    the whole check passes the same per-test judgement on the re-run, and
    every test that failed the first time passed. None: a regression (the
    first verdict stands)."""
    code, _, timed_out, report = again
    if timed_out or report is None or first is None or baseline is None:
        return None
    judged = against_baseline(check, code, report, baseline)
    if (judged is None and code != 0) or (judged is not None and not judged.passed):
        return None
    flaky = sorted(t for t in first.failed if t not in set(baseline.failed))
    if not set(flaky) <= set(report.passed):
        return None
    note = (
        f"flaky, not counted as a regression: {len(flaky)} test(s) failed, then passed on an "
        f"immediate re-run of the check: {names(flaky)}"
    )
    if judged is not None:
        note += f"; {judged.note}"
    return Judgement(True, note, judged.already_failing if judged else ()), flaky


def _runner_crash_named(judgement: Judgement, output: str, cwd: Path) -> Judgement:
    """A runner that reported per test on the untouched tree and now wrote no
    report: when its traceback ends in a file of the tree checked, that is
    the cause (the work broke something the runner itself imports), said so
    rather than "cannot judge"."""
    from .failure_sites import IN_THE_TREE, runner_crash

    where = runner_crash(output, cwd)
    if where is None:
        return judgement
    return Judgement(
        False,
        f"the test runner failed before it reported any test (it did on the untouched tree): "
        f"its traceback ends in {where}, {IN_THE_TREE}: the work broke "
        "something the runner itself imports or runs",
    )


def _may_have_moved(judgement: Judgement, deadline: float | None) -> bool:
    """Whether a verification failed only because tests already failing on
    the untouched tree fail differently now, and time is left to run it once
    more: a test that fails at a place that moves by itself (a timing test)
    would otherwise hold back correct work."""
    if judgement.passed or not judgement.changed_only:
        return False
    if len(judgement.changed_only) > FLAKY_RERUN_MAX_TESTS:
        return False
    return deadline is None or deadline - time.monotonic() >= 1


def _moved_judgement(
    check: ContractCheck,
    again: tuple[int | None, str, bool, TestReport | None],
    baseline: TestReport | None,
    first: Judgement,
) -> tuple[Judgement, list[str]] | None:
    """The re-run's verdict when it shows where those tests fail is not
    stable: the re-run passes the per-test judgement (each fails as on the
    untouched tree, or passes). They are then named as flaky (held for the
    operator like any flake, never passed silently). None: they failed
    differently again, the work's (the first verdict stands)."""
    code, _, timed_out, report = again
    if timed_out or report is None or baseline is None:
        return None
    judged = against_baseline(check, code, report, baseline)
    if (judged is None and code != 0) or (judged is not None and not judged.passed):
        return None
    moved = sorted(first.changed_only)
    note = (
        f"flaky, not counted as a regression: {len(moved)} test(s) already failing on the "
        f"untouched tree failed differently, then as there on an immediate re-run of the "
        f"check (where they fail is not stable: a regression in them cannot be seen): "
        f"{names(moved)}"
    )
    if judged is not None:
        note += f"; {judged.note}"
    return Judgement(True, note, judged.already_failing if judged else ()), moved


async def run_check(
    check: ContractCheck,
    cwd: Path,
    *,
    captures: dict[str, str] | None = None,
    timeout_ceiling: float | None = None,
    deadline: float | None = None,
    env: dict[str, str] | None = None,
    allow_credentials: bool = False,
    environment: CheckEnvironment | None = None,
    runner: CommandRunner | None = None,
    untouched: bool = False,
    before: CheckResult | None = None,
    intent: str = "",
    readable: tuple[Path, ...] = (),
    judged: bool = False,
) -> CheckResult:
    """Run one check and classify a failure (*fails* or *cannot run*); with
    `runner`, the command runs there (on another host) instead of here.

    Where the runner reports per-test outcomes, a test-suite check is judged
    test by test (`per_test`): on the untouched tree (`untouched`), or
    against that run's result (`before`; `judged`: this is a verification,
    so a check the untouched tree has no result for is still held to its
    named tests). `readable`: more paths the confined check may read (the
    objects a `corral verify` checkout borrows)."""
    timeout = float(check.timeout_secs)
    if timeout_ceiling is not None:
        timeout = min(timeout, timeout_ceiling)
    clamped = False
    if deadline is not None:
        left = max(0.1, deadline - time.monotonic())
        if left < timeout:
            timeout, clamped = left, True
    started = time.monotonic()
    if env is None:
        env = scrubbed_env(keep_credentials=allow_credentials, invoked_by="corral-check")
    grant = None
    if environment is not None:
        env = environment.apply(env)
        grant = environment.grant
    if readable:
        grant = Grant(readable=(*(grant.readable if grant else ()), *readable))
    private = None if runner is not None else Path(tempfile.mkdtemp(prefix="corral-check-"))
    flaky: list[str] = []
    try:
        report_dir = None
        if private is not None:
            report_dir = private / "report"
            report_dir.mkdir()
        from .test_reports import plan_for  # loaded by the first check that runs

        plan = plan_for(check.command, report_dir, cwd, network=check.network)

        async def run_once() -> tuple[int | None, str, bool, TestReport | None]:
            limit = timeout  # a re-run keeps to the deadline too
            if deadline is not None:
                limit = min(timeout, max(0.1, deadline - time.monotonic()))
            if private is not None and report_dir is not None:
                # each run starts from an empty private dir (HOME, TMPDIR, the
                # report): a re-run never sees what the first run wrote there,
                # and one that cannot start clean is not run (no flaky pass)
                if not await asyncio.to_thread(_emptied, private):
                    return 1, "", False, None
                report_dir.mkdir()
            if runner is not None:
                code, output, timed_out = await runner(check.command, limit, check.network)
            else:
                code, output, timed_out = await run_command(
                    check.command,
                    cwd,
                    limit,
                    _with_report_env(env, plan.env),
                    network=check.network,
                    grant=grant,
                    private=private,
                )
            report = None if timed_out else plan.read(output)
            return code, plan.shown(output), timed_out, report

        code, output, timed_out, report = await run_once()
        judgement: Judgement | None = None
        if untouched:
            judgement = on_untouched_tree(check, code, report)
        elif before is not None or judged:
            baseline = before.tests if before is not None else None
            judgement = against_baseline(check, code, report, baseline)
            if judgement is not None and report is None and not judgement.passed:
                judgement = _runner_crash_named(judgement, output, cwd)
            if _may_be_flaky(judgement, report, baseline, deadline):
                again = await run_once()
                rerun = _rerun_judgement(check, report, again, baseline)
                if rerun is not None:
                    judgement, flaky = rerun
                    code, output, timed_out, report = again
            elif judgement is not None and _may_have_moved(judgement, deadline):
                again = await run_once()
                moved = _moved_judgement(check, again, baseline, judgement)
                if moved is not None:
                    judgement, flaky = moved
                    code, output, timed_out, report = again
    finally:
        if private is not None:
            await asyncio.to_thread(shutil.rmtree, private, True)
    passed = not timed_out
    notes: list[str] = []
    if timed_out:
        notes.append(f"[corral] timed out after {timeout:.0f}s")
    elif judgement is not None:
        passed = judgement.passed
        notes.append(f"[corral] {judgement.note}")
    elif check.expect_exit_zero and code != 0:
        passed = False
    if passed and check.output_contains is not None and check.output_contains not in output:
        passed = False
        notes.append(f"[corral] output does not contain {check.output_contains!r}")
    if passed and check.differential is not None and captures is not None:
        why = _differential_ok(check, output, captures)
        if why:
            passed = False
            notes.append(f"[corral] differential: {why}")
    tail = output[-OUTPUT_TAIL_CHARS:]
    if notes:
        tail = tail + ("\n" if tail and not tail.endswith("\n") else "") + "\n".join(notes)
    result = CheckResult(
        name=check.name,
        passed=passed,
        exit_code=code,
        output_tail=tail,
        duration_ms=int((time.monotonic() - started) * 1000),
        timed_out=timed_out,
        deadline_clamped=clamped,
        credentials_allowed=allow_credentials,
        tests=report,
        already_failing=list(judgement.already_failing) if judgement and untouched else [],
        flaky=flaky,
        capture=capture_of(output) if untouched and check.baseline and not timed_out else None,
    )
    classified = classify(result, check.command, cwd, intent=intent)
    if timed_out and untouched:  # no work yet: the limit cannot judge anything
        reason, fix = untouched_timeout(check.command, timeout)
        update = {"verdict": CheckVerdict.CANNOT_RUN, "reason": reason, "fix": fix}
        classified = classified.model_copy(update=update)
    if judgement is not None and not judgement.passed:  # tests ran and failed: the work
        update = {"verdict": CheckVerdict.FAILS, "reason": judgement.note, "fix": ""}
        classified = classified.model_copy(update=update)
    no_test_ran = report is None or not (report.passed or report.failed)
    if untouched and not passed and not timed_out and no_test_ran:
        crash = untouched_startup_crash(output, check.command, cwd)
        # a specific cause already found (a missing module, hooks for an
        # older pytest) keeps its own way on; a generic one gives way
        generic = classified.verdict is CheckVerdict.FAILS or classified.reason.startswith(
            ("pytest could not collect", "pytest rejected its command line", "the tests could not")
        )
        if crash is not None and generic:
            update = {"verdict": CheckVerdict.CANNOT_RUN, "reason": crash[0], "fix": crash[1]}
            classified = classified.model_copy(update=update)
    elif not passed and not timed_out and no_test_ran and _crashed_as_before(before, output, check):
        # the untouched tree's pytest stopped the same way before any test:
        # the environment again, not the work (a crash the work causes, on a
        # tree whose suite ran, stays the work's red)
        assert before is not None
        update = {
            "verdict": CheckVerdict.CANNOT_RUN,
            "reason": f"as on the untouched tree, {before.reason}",
            "fix": before.fix,
        }
        classified = classified.model_copy(update=update)
    return classified


def _crashed_as_before(before: CheckResult | None, output: str, check: ContractCheck) -> bool:
    """Whether this run stopped while loading conftest files and plugins
    with the very exception the untouched tree's run stopped with."""
    if before is None or before.verdict is not CheckVerdict.CANNOT_RUN:
        return False
    crash = untouched_startup_crash(output, check.command, Path("/nonexistent"))
    if crash is None or not before.reason.startswith(STARTUP_CRASH):
        return False
    now = crash[0].removeprefix(STARTUP_CRASH).split(" (raised in ")[0]
    then = before.reason.removeprefix(STARTUP_CRASH).split(" (raised in ")[0]
    return now == then


async def run_contract(
    contract: OutcomeContract,
    cwd: Path,
    *,
    captures: dict[str, str] | None = None,
    timeout_ceiling: float | None = None,
    deadline: float | None = None,
    on_result: Callable[[CheckResult], None] | None = None,
    environment: CheckEnvironment | None = None,
    runner: CommandRunner | None = None,
    untouched: bool = False,
    baseline: list[CheckResult] | None = None,
    readable: tuple[Path, ...] = (),
) -> list[CheckResult]:
    """Run every check in order (all of them, even after a failure), inside
    the setup's environment when there is one. `untouched`: this is the
    baseline run; `baseline`: that run's results, which a test-suite check
    is judged against test by test."""
    before = {r.name: r for r in baseline or []}
    results: list[CheckResult] = []
    for check in contract.checks:
        result = await run_check(
            check,
            cwd,
            captures=captures,
            timeout_ceiling=timeout_ceiling,
            deadline=deadline,
            allow_credentials=contract.allow_credentials,
            environment=environment,
            runner=runner,
            untouched=untouched,
            before=before.get(check.name),
            intent=contract.description,
            readable=readable,
            judged=baseline is not None,
        )
        results.append(result)
        if on_result is not None:
            on_result(result)
    return results


def captures_from(contract: OutcomeContract, baseline: list[CheckResult]) -> dict[str, str]:
    """Before-values recorded by capture checks on the untouched tree; a
    capture that timed out or failed there captured nothing (its error is no
    value a change could be measured from)."""
    checks = {c.name: c for c in contract.checks if c.baseline}
    out: dict[str, str] = {}
    for result in baseline:
        check = checks.get(result.name)
        if check is None or result.timed_out or result.cannot_run:
            continue
        if check.expect_exit_zero and result.exit_code != 0:
            continue
        if result.capture is not None:
            out[result.name] = result.capture
        elif not result.output_tail:
            continue
        else:  # recorded by an older corral: the tail it kept
            out[result.name] = result.output_tail.split("\n[corral]")[0].strip()
    return out
