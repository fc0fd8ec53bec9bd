"""Fault injection for crash tests: with `CORRAL_FAULT=<point>` the process
ends at that point the way `kill -9` would end it (`os._exit(137)`: nothing
flushed, nothing saved), so a test can restart on exactly what was left.
Unset, a point costs one environment lookup.

Named points, in the order delivery reaches them:

- `delivery:result-ref` — `refs/corral/results/<id>` written, nothing else;
- `delivery:branch` — branch `corral/<id>` written, the state not yet saved;
- `delivery:checkout` — the change applied to the checkout, the state not
  yet saved.
"""

from __future__ import annotations

import os

POINTS = frozenset({"delivery:result-ref", "delivery:branch", "delivery:checkout"})


def fault_point(name: str) -> None:
    """End the process here when `CORRAL_FAULT` names this point."""
    assert name in POINTS, name
    if os.environ.get("CORRAL_FAULT") == name:
        os._exit(137)
