"""Engines: what does the work inside a session's worktree."""
