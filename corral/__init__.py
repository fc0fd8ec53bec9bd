"""corral: one console for many coding agents.

The distribution installs the repository's root folders under this one name so
nothing collides with other packages (PyPI has its own `supervisor` and `tui`):
`supervisor/` is `corral.supervisor` (the engine), `tui/` is `corral.tui` (the
console and the command line) and `assets/` is `corral.assets` (the demo repo,
the demo agent; read with `importlib.resources`). `setup.py` holds the mapping.
"""
