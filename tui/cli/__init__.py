"""The `corral` command line: one module per subcommand, `main` parses and
dispatches. Each subcommand only parses, calls the supervisor's public API
and prints; the decisions are the supervisor's (`housekeeping` for what the
command line may do about a state dir without owning it).

Nothing is imported here: agents run `python -m corral.tui.cli hook` on every
hook, and it must return in milliseconds.
"""
