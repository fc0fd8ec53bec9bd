"""`corral agents`: the agent CLIs corral can run here."""

from __future__ import annotations

from corral.supervisor.doctor import agent_clis, oneshot_presets
from corral.supervisor.interface import acp_presets

from .output import say


def list_agents() -> int:
    for agent in agent_clis():
        if agent.binary is None:
            how = f": {agent.install}" if agent.install else ""
            say(f"-- {agent.name:<9} {agent.label:<22} not installed{how}")
            continue
        version = agent.version or "version unknown"
        say(f"ok {agent.name:<9} {agent.label:<22} {agent.binary} ({version})")
    say("   custom    any command: engine custom:<command line>")
    say("   oneshot   a command that does the task and exits: engine oneshot:<command line>")
    say("             (the prompt as {prompt}, as a file {prompt_file}, else on stdin)")
    for preset in oneshot_presets():
        where = "" if preset.binary else "  (not installed)"
        mark = "ok" if preset.binary else "--"
        say(f"{mark} {preset.name:<10} {preset.version}{where}")
    say("   acp:      an agent that speaks ACP on stdio: engine acp:<command line>")
    for acp in acp_presets():
        if acp.binary is None:
            say(f"-- {acp.name:<10} {acp.label:<26} not installed: {acp.install}")
        else:
            say(f"ok {acp.name:<10} {acp.label:<26} {acp.binary}")
    return 0
