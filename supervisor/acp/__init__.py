"""Agents that speak the Agent Client Protocol (JSON-RPC over stdio).

`agents` names them (`acp:<command>` and the presets `gemini-acp`,
`claude-acp`, `codex-acp`); `wire` is the stdio transport (a line that is not
JSON-RPC is reported, an answer is known sent only once written); `files`
and `terminals` are the client side corral serves them, confined to the
session's worktree and corral's sandbox; `contained` finds what the agent's
own shell wrote outside the worktree that its sandbox kept or refused;
`client` turns what the agent says
and asks into the session's typed events and questions. The engine that
drives a session through them is `engines/acp.py`.
"""
