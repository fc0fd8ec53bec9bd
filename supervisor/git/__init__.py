"""Git mechanics: repo root, base revisions, worktrees, diffs and delivery."""
