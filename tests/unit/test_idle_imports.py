"""The idle console (`corral` on an empty store: the board, the supervisor
built and opened, the control socket and MCP served) loads only what an idle
board uses. The agent engines, the model providers and their HTTP stack, the
contract drafter, the hooks watcher, the session screen, the attached
console's client, the ACP and MCP SDKs load when first needed. Each one
costs the idle console memory (bench/tui.py (d) measures it); this test
names them, so one that comes back into the idle import set fails here.

A fresh interpreter runs the console's own entry (`run_console`), headless,
until the owner serves its state dir, then reports its modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# what an idle board must not have loaded, and where each loads instead
LAZY = {
    # the hooks watcher starts with the first tracked pane
    "watchfiles": "panes/manager.py",
    "anyio": "panes/manager.py (watchfiles)",
    # screens load when pushed; the keymap check reads key_actions
    "corral.tui.screens.session": "board.py, on open",
    "corral.tui.screens.diff": "board.py, on review",
    "corral.tui.screens.new_session": "board.py, on new",
    "corral.tui.screens.discuss": "board.py, on discuss",
    "textual.widgets._rich_log": "the session screen",
    "rich.pretty": "the session screen (RichLog)",
    "pygments": "a diff's syntax",
    # engines load when a session of their kind is created
    "corral.supervisor.engines.external": "engines/registry.py",
    "corral.supervisor.engines.oneshot": "engines/registry.py",
    "corral.supervisor.engines.native": "engines/registry.py",
    "corral.supervisor.engines.acp": "engines/registry.py",
    "acp": "the ACP SDK, with an ACP session",
    # a model provider loads when a model of its kind is first built
    "corral.supervisor.llm.anthropic": "llm/providers.py",
    "corral.supervisor.llm.openai_compat": "llm/providers.py",
    "corral.supervisor.llm.retry": "llm/providers.py",
    "http.client": "llm/retry.py",
    "urllib.request": "llm/retry.py",
    # the drafter is built at the first draft
    "corral.supervisor.contracts.model_drafter": "factory.default_drafter",
    "corral.supervisor.contracts.conventions": "factory.default_drafter",
    "configparser": "contracts/setup_draft.py",
    "xml.etree.ElementTree": "contracts/test_reports.parse_junit",
    # discussions are made on first use; the demo only for `corral demo`
    "corral.supervisor.discuss.manager": "factory.make_discussions",
    "corral.supervisor.demo": "factory (the demo)",
    # pydantic's plugin scan is skipped (corral.supervisor's __init__)
    "importlib.metadata": "nowhere: corral's models use no pydantic plugins",
    # the hosts' machinery loads when a host is configured ([[hosts]])
    "corral.supervisor.hosts.place": "hosts/configured.py, with a configured host",
    "corral.supervisor.hosts.connection": "hosts/place.py (or the doctor's probe)",
    "corral.supervisor.hosts.remote_tmux": "hosts/place.py",
    "corral.supervisor.gates.host_tree": "gates/verifier.py, a session on a host",
    # the foreman's engine loads with a foreman session's run
    "corral.supervisor.foreman.engine": "foreman/service.py, Foreman.engine",
    "corral.supervisor.foreman.union": "foreman/engine.py",
    # adopting loads with the first adoption (or stored sessions to settle)
    "corral.supervisor.adoption.service": "api.py, Supervisor._adoptions",
    # agents' usage records load with the first session that has any
    "corral.supervisor.agents.usage_records": "session/usage.py",
    # a check's report plan loads with the first check that runs
    "corral.supervisor.contracts.test_reports": "contracts/checks.py",
    # shipped assets are found beside corral.assets, with no zip readers
    "zipfile": "nowhere: corral.assets reads its own directory",
    "importlib.resources": "nowhere: corral.assets reads its own directory",
    # an owner serves without the clients' side of the socket
    "corral.supervisor.control.attached": "remote (a second console)",
    "corral.supervisor.control.client": "remote (the command line)",
    # MCP over HTTP: the SDK and the server load when the first client knocks
    "mcp": "control/mcp.py",
    "uvicorn": "control/mcp.py",
}

CHILD = r"""
import asyncio, json, sys
from pathlib import Path

from corral.tui.app import CorralApp
from corral.tui.cli import console

out, repo = Path(sys.argv[1]), Path(sys.argv[2])


async def idle(app):
    async with app.run_test(headless=True, size=(200, 50)) as pilot:
        for _ in range(600):  # at most 30 s
            services = app.services
            if (
                app.ready.is_set()
                and services is not None
                and services.socket_path is not None
                and (services.mcp_url is not None or services.problems)
            ):
                break
            await pilot.pause(0.05)
        served = {
            "ready": app.ready.is_set(),
            "socket": str(app.services.socket_path) if app.services else None,
            "problems": app.services.problems if app.services else None,
        }
        out.write_text(json.dumps({"served": served, "modules": sorted(sys.modules)}))
        app.exit()


CorralApp.run = lambda self, **kwargs: asyncio.run(idle(self))  # the terminal, headless
sys.exit(console.run_console(repo, backend="pty"))
"""


@pytest.mark.slow
def test_the_idle_console_loads_nothing_it_does_not_use(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(
        "git init -q -b main && git -c user.name=t -c user.email=t@t commit -q --allow-empty "
        "-m init",
        shell=True,
        cwd=repo,
        check=True,
    )
    config = tmp_path / "config.toml"
    config.write_text("")
    dropped = ("CORRAL_LLM_PROVIDER", "CORRAL_LLM_MODEL")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(CORRAL_HOME=str(tmp_path / "home"), CORRAL_CONFIG=str(config))
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(out), str(repo)],
        env=env,
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and out.exists(), done.stderr[-3000:]
    report = json.loads(out.read_text())
    served = report["served"]
    modules = set(report["modules"])
    # the console really reached idle: built, opened and serving
    assert served["ready"] and served["socket"], served
    assert Path(served["socket"]).name == "control.sock"
    for needed in ("corral.supervisor.api", "corral.supervisor.control.server", "textual.app"):
        assert needed in modules, f"{needed} was not loaded: the child did not reach idle"
    loaded = {name: where for name, where in LAZY.items() if name in modules}
    assert not loaded, "the idle console loaded what it does not use: " + ", ".join(
        f"{name} (loads at: {where})" for name, where in sorted(loaded.items())
    )
