"""The `corral` command line: one module per subcommand, `main` parses and
dispatches. Each subcommand only parses, calls the supervisor's public API
and prints; the decisions are the supervisor's (`stored_board`,
`worktree_pruning`, `pane_cleanup` and `doctor` for what the command line may
learn or do about a state dir and this machine without owning the state dir).

Nothing is imported here: agents run `python -m corral.tui.cli hook` on every
hook, and it must return in milliseconds.
"""
