"""The owner's control API: the process that owns a state dir serves the
facade on a unix socket (`server`), clients reach it through `client`, and
the MCP tools (`mcp`) sit on top of the same facade.

Clients import it through the public module `corral.supervisor.remote`.
"""
