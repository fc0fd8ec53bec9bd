"""Agent panes: where agent CLIs run (tmux windows, or ptys without tmux)."""
