"""Fault injection for crash tests: with `CORRAL_FAULT=<point>` the process
ends at that point the way `kill -9` would end it (`os._exit(137)`: nothing
flushed, nothing saved), so a test can restart on exactly what was left.
Unset, a point costs one environment lookup.

Named points, in the order a session reaches them (what a restart shows at
each is tabled in README.md, "Crash tests", and asserted by
`tests/integration/test_fault_injection.py`):

- `start:worktree` — the session's worktree created, the session not saved;
- `start:session` — the session saved as `created`, drafting not begun;
- `contract:drafted` — the drafter returned a contract, nothing saved;
- `baseline:before` — the baseline's scratch worktree made, checks not run;
- `baseline:after` — the baseline checks ran, the scratch worktree still there;
- `contract:saved` — the contract saved as proposed, not yet announced;
- `run:engine-started` — confirmed and `running`, the engine being called;
- `run:edited` — mid-run: the engine's tool call (the scripted engine's file
  write, reported once made) journaled;
- `verify:before-checks` — the engine finished, no snapshot taken yet;
- `verify:between-snapshots` — the checks ran, the second snapshot not taken;
- `verify:recorded` — the verified tree anchored and stored with the session,
  its state (`running`) not yet moved on to approval;
- `delivery:partial-commit` — the commit of the approved part built, no ref;
- `delivery:result-ref` — `refs/corral/results/<id>` written, nothing else;
- `delivery:branch` — branch `corral/<id>` written, the state not yet saved;
- `delivery:checkout` — the change applied to the checkout, the state not
  yet saved.
"""

from __future__ import annotations

import os

ORDER = (
    "start:worktree",
    "start:session",
    "contract:drafted",
    "baseline:before",
    "baseline:after",
    "contract:saved",
    "run:engine-started",
    "run:edited",
    "verify:before-checks",
    "verify:between-snapshots",
    "verify:recorded",
    "delivery:partial-commit",
    "delivery:result-ref",
    "delivery:branch",
    "delivery:checkout",
)
POINTS = frozenset(ORDER)


def fault_point(name: str) -> None:
    """End the process here when `CORRAL_FAULT` names this point."""
    assert name in POINTS, name
    if os.environ.get("CORRAL_FAULT") == name:
        os._exit(137)
