"""Fakes for driving the real agent CLIs offline (see docs/agent-clis.md)."""
