"""`corral agents`: the agent CLIs corral can run here."""

from __future__ import annotations

from corral.supervisor.housekeeping import agent_clis


def list_agents() -> int:
    for agent in agent_clis():
        if agent.binary is None:
            print(f"-- {agent.name:<9} {agent.label:<22} not installed")
            continue
        version = agent.version or "version unknown"
        print(f"ok {agent.name:<9} {agent.label:<22} {agent.binary} ({version})")
    print("   custom    any command: engine custom:<command line>")
    return 0
