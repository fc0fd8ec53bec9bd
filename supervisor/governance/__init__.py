"""Governance: what corral's children may see and what the built-in engine's
tools may do.

Every process corral starts gets a scrubbed environment (`env_scrub`; what a
credential looks like by name and by value is `secret_shapes`). Every
tool call of the built-in engine passes the inspector chain (`chain`) before
it runs: worktree confinement for the file tools (`confinement`), the built-in
shell rules (`shell_guard`, one module per rule family under `rules/`), then
the operator's policy files (`operator_policy`, `policy_files`). A denial is
returned to the model as a sentence it can act on.
"""
