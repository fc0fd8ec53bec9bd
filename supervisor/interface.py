"""The names the console and the command line may use besides the facade,
re-exported on purpose.

`corral.tui` imports from `corral.supervisor` only the public modules: `api`
(the `Supervisor` facade), `models`, `states`, `errors`, the rooms the
command line reads without an owner (`stored_board`, `worktree_pruning`,
`pane_cleanup`, `doctor`), `factory` (how a client builds the facade),
`paths` (where the state dir is) and this one. Everything else is the engine's business; an import
contract in `make lint` keeps it so (pyproject.toml, tests/unit/test_layers.py).

What is here: the types that appear in the facade's signatures (a
subscription and its endings, the board's watcher, a file's patch, an agent's
screen), a discussion's typed events (the ones the console narrows to), the
contract drafters a client may pass when it builds a supervisor,
reading a contract file, finding a repository's root, and the demo. All but
`repo_root` load on first use: importing this module costs the board's first
paint nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .git.repo import repo_root

if TYPE_CHECKING:
    from .acp.agents import AcpPreset, is_acp
    from .acp.agents import presets as acp_presets
    from .contracts.drafting import ContractDrafter, FixedDrafter, GivenSetup, with_given_setup
    from .contracts.files import checks_contract, given_setup, load_contract
    from .contracts.hidden import hidden_check_from_file
    from .contracts.per_test import unseen_regressions
    from .demo import seed_demo
    from .discuss import (
        DiscussAssistantDeltaEvent,
        DiscussAssistantMessageEvent,
        DiscussErrorEvent,
        DiscussEvent,
        Discussion,
        Discussions,
        DiscussRefusalEvent,
        DiscussSubscription,
        DiscussTaskPreparedEvent,
        DiscussToolCallEvent,
        DiscussUserMessageEvent,
        PreparedTask,
    )
    from .git.patches import FilePatch, Hunk
    from .panes.base import Screen as AgentScreen
    from .session.board import WatchDropped, Watcher
    from .session.journal import Subscription, SubscriptionClosed, SubscriptionDropped

__all__ = [
    "AcpPreset",
    "AgentScreen",
    "ContractDrafter",
    "DiscussAssistantDeltaEvent",
    "DiscussAssistantMessageEvent",
    "DiscussErrorEvent",
    "DiscussEvent",
    "DiscussRefusalEvent",
    "DiscussSubscription",
    "DiscussTaskPreparedEvent",
    "DiscussToolCallEvent",
    "DiscussUserMessageEvent",
    "Discussion",
    "Discussions",
    "FilePatch",
    "FixedDrafter",
    "GivenSetup",
    "Hunk",
    "PreparedTask",
    "Subscription",
    "SubscriptionClosed",
    "SubscriptionDropped",
    "WatchDropped",
    "Watcher",
    "acp_presets",
    "checks_contract",
    "given_setup",
    "hidden_check_from_file",
    "is_acp",
    "load_contract",
    "repo_root",
    "seed_demo",
    "unseen_regressions",
    "with_given_setup",
]

_ON_FIRST_USE = {  # name → (module, its name there when not the same)
    "AgentScreen": "panes.base:Screen",
    "ContractDrafter": "contracts.drafting",
    "FixedDrafter": "contracts.drafting",
    "GivenSetup": "contracts.drafting",
    "given_setup": "contracts.files",
    "with_given_setup": "contracts.drafting",
    "load_contract": "contracts.files",
    "checks_contract": "contracts.files",
    "hidden_check_from_file": "contracts.hidden",
    "unseen_regressions": "contracts.per_test",  # gates 1 and 2: what a failing test hides
    "FilePatch": "git.patches",
    "Hunk": "git.patches",
    "WatchDropped": "session.board",
    "Watcher": "session.board",
    "Subscription": "session.journal",
    "SubscriptionClosed": "session.journal",
    "SubscriptionDropped": "session.journal",
    "DiscussAssistantDeltaEvent": "discuss",
    "DiscussAssistantMessageEvent": "discuss",
    "DiscussErrorEvent": "discuss",
    "DiscussEvent": "discuss",
    "DiscussRefusalEvent": "discuss",
    "DiscussSubscription": "discuss",
    "DiscussTaskPreparedEvent": "discuss",
    "DiscussToolCallEvent": "discuss",
    "DiscussUserMessageEvent": "discuss",
    "Discussion": "discuss",
    "Discussions": "discuss",
    "PreparedTask": "discuss",
    "seed_demo": "demo",
    "is_acp": "acp.agents",  # the engine speaks ACP: its session has a conversation view
    "acp_presets": "acp.agents:presets",  # `corral agents`, `corral doctor`
    "AcpPreset": "acp.agents",
}


def __getattr__(name: str) -> Any:
    """Everything but `repo_root` loads only when a caller asks: the console's
    first frame needs none of it."""
    where = _ON_FIRST_USE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    module, _, there = where.partition(":")
    value = getattr(import_module(f".{module}", __package__), there or name)
    globals()[name] = value
    return value
