"""Adoption: agent panes the user started on their own tmux server, observed
and steered by corral (status, questions, messages, the live terminal)
without a contract or a worktree. corral never kills a pane it did not start:
releasing one, cancelling it or closing corral only removes the owner marker.
"""
