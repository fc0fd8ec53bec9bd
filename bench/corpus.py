"""The corpus table and its rates: for each real project
(tests/corpus/projects.toml) the setup's time cold (fresh environment) and
cached (a second worktree of the same repository), the baseline verdict of
its drafted contract, whether a scripted correct change was delivered through
`corral run` in the default configuration (and passed again when re-checked
independently: the session's contract verbatim in fresh clones with fresh
environments, compared per test by the corpus's own reading of the output),
and how a scripted regression ended: *caught* (a check failed at
verification and named the broken test), *unnamed* (a check failed, its
runner naming no test), *not delivered for another reason* (a timeout, a
setup failure, a run left waiting), or delivered.

Rates: correct changes delivered with no operator edit (goal >= 90 %),
regressions caught by a check naming the test (goal 100 %); unnamed and
not-delivered-other are printed apart and never count as caught. Projects
chosen by the unseen rule (bench/README.md) are marked `*` and their rates
printed apart too. Exits 1 when either rate is under its goal. Downloads are
cached in ~/.cache/corral-corpus and packages in pip's / npm's own caches
(warm them with one run first).

Run (from the repo root): .venv/bin/python bench/corpus.py [--only NAME ...]
[--set all|shapes|unseen] [--parallel N] [--no-sessions]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.corpus.runner import Outcome, projects, run_all  # noqa: E402

DELIVERY_GOAL = 0.90
REGRESSION_GOAL = 1.0


def took(secs: float) -> str:
    return f"{secs:.1f}s" if secs >= 1 else f"{secs * 1000:.0f}ms"


def row(o: Outcome) -> tuple[str, ...]:
    if o.cold is None:
        cold = cached = "no setup"
    else:
        cold = took(o.cold_secs)
        reused = "reused" if o.cached is not None and o.cached.cached else "rebuilt"
        cached = f"{took(o.cached_secs)} ({reused})"
    if o.regress is None:
        refused = "-"
    elif o.regression_caught:  # a check failed and named the broken test
        refused = o.regress.why_not()[:70]
    elif o.regress.caught:  # a check named failing tests, but not the one it breaks
        refused = f"not the test it breaks ({o.project.breaks}): {o.regress.why_not()}"[:70]
    elif o.regress.failed_unnamed:  # a check failed, its runner naming no test
        refused = f"unnamed: {o.regress.why_not()}"[:70]
    elif o.regression_refused:
        refused = f"not delivered (other): {o.regress.why_not()}"[:70]
    else:
        refused = "DELIVERED"
    expected = "" if o.project.delivers else " (expected: " + o.project.why_not[:40] + ")"
    return (
        o.project.id + (" *" if o.project.unseen else ""),
        o.project.shape[:38],
        cold,
        cached,
        (
            o.verdict()
            + (f" ({len(o.already_failing)} already failing)" if o.already_failing else "")
        )[:64],
        (o.delivery() + expected)[:90],
        refused,
    )


def said_at_once(o: Outcome) -> None:
    """One project's row and reasons the moment it finishes: a run stopped
    early (a deadline, a loaded machine) keeps what it measured."""
    print("done: " + " | ".join(row(o)), flush=True)
    if o.change is not None and o.change.delivered:
        print(f"  {o.project.id}: independent re-check: {o.recheck.why}", flush=True)
    elif o.change is not None:
        print(f"  {o.project.id}: correct change not delivered: {o.change.why_not()}", flush=True)
    if o.regress is not None:
        print(f"  {o.project.id}: regression: {o.regress.why_not()}", flush=True)


def rate(hits: int, total: int) -> str:
    return f"{hits}/{total} = {100 * hits / max(total, 1):.0f}%"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="project names to run")
    parser.add_argument(
        "--parallel", type=int, default=1, help="projects at a time (timings honest at 1)"
    )
    parser.add_argument(
        "--no-sessions", action="store_true", help="gate 1 only: no change, no regression"
    )
    parser.add_argument(
        "--set",
        choices=("all", "shapes", "unseen"),
        default="all",
        help="the projects chosen for their shape, those chosen by the unseen rule, or both",
    )
    args = parser.parse_args()
    started = time.monotonic()
    chosen = [
        p
        for p in projects()
        if (not args.only or p.name in args.only)
        and (args.set == "all" or p.unseen == (args.set == "unseen"))
    ]
    if args.only:  # in the order asked
        chosen.sort(key=lambda p: args.only.index(p.name))
    left_out = [p for p in chosen if p.missing_tools()]
    for p in left_out:
        print(
            f"left out {p.id}: {', '.join(p.missing_tools())} not installed (.ci/run installs it)"
        )
    if len(left_out) == len(chosen):
        print("nothing to run")
        return 1
    with tempfile.TemporaryDirectory(prefix="corral-corpus-") as tmp:
        outcomes = run_all(
            Path(tmp) / "work",
            Path(tmp) / "state",
            [p.name for p in chosen if p not in left_out],
            parallel=args.parallel,
            sessions=not args.no_sessions,
            on_done=said_at_once,
        )
    header = (
        "project",
        "shape",
        "setup cold",
        "setup cached",
        "baseline",
        "correct change",
        "regression",
    )
    rows = [header, *(row(o) for o in outcomes)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    for cells in rows:
        print("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())
    for o in outcomes:  # the whole reason, where the table cut it
        if o.change is not None and o.change.delivered and not o.recheck.ok:
            print(f"{o.project.id}: independent re-check: {o.recheck.why}")
        elif o.change is not None and not o.change.delivered:
            print(f"{o.project.id}: correct change not delivered: {o.change.why_not()}")
        if o.regress is not None and o.regress.delivered:
            print(f"{o.project.id}: regression delivered")
    print(f"\n{len(outcomes)} projects in {time.monotonic() - started:.0f}s")
    if args.no_sessions:
        print("(--no-sessions: no rates, nothing judged)")
        return 0
    for label, group in (("unseen (*)", [o for o in outcomes if o.project.unseen]),):
        if group and len(group) < len(outcomes):
            print(
                f"{label}: delivered {rate(sum(o.delivered for o in group), len(group))}, "
                f"caught {rate(sum(o.regression_caught for o in group), len(group))}"
            )
    delivered = sum(o.delivered for o in outcomes)
    caught = sum(o.regression_caught for o in outcomes)
    unnamed = sum(o.regress is not None and o.regress.failed_unnamed for o in outcomes)
    other = sum(
        o.regression_refused and not o.regression_caught and not o.regress.failed_unnamed  # type: ignore[union-attr]
        for o in outcomes
    )
    per_test = sum(bool(o.recheck.per_test) and not o.recheck.exit_only for o in outcomes)
    colds = sorted(o.cold_secs for o in outcomes if o.cold is not None)
    cached = sorted(o.cached_secs for o in outcomes if o.cached is not None)
    surprises = [
        o.project.name
        for o in outcomes
        if o.delivered != o.project.delivers or o.regression_caught != o.project.refuses_regression
    ]
    print(
        "correct change delivered with no operator edit (re-checked independently): "
        f"{rate(delivered, len(outcomes))} (goal >= {DELIVERY_GOAL:.0%})"
    )
    print(
        "regressions caught (a check failed and named the broken test): "
        f"{rate(caught, len(outcomes))} (goal {REGRESSION_GOAL:.0%})"
    )
    print(f"regressions refused by a check that named no test: {rate(unnamed, len(outcomes))}")
    print(f"regressions not delivered for another reason: {rate(other, len(outcomes))}")
    print(f"regressions delivered: {rate(len(outcomes) - caught - unnamed - other, len(outcomes))}")
    print(
        f"delivered changes re-checked per test (not by exit code alone): "
        f"{per_test}/{sum(o.delivered for o in outcomes)}"
    )
    if colds:
        print(
            f"setup cold: median {took(colds[len(colds) // 2])}, max {took(colds[-1])}; "
            f"cached: median {took(cached[len(cached) // 2])}, max {took(cached[-1])}"
        )
    if surprises:
        print(f"differs from projects.toml (delivers / refuses_regression): {', '.join(surprises)}")
    if delivered < DELIVERY_GOAL * len(outcomes) or caught < REGRESSION_GOAL * len(outcomes):
        print("UNDER GOAL")
        return 1
    return 0


if __name__ == "__main__":
    from load import run_with_load  # bench/load.py: --load N busy loops

    sys.exit(run_with_load(lambda: main()))
