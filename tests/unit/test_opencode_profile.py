"""The OpenCode profile against OpenCode 1.18.33's real screens (captured with
`tmux capture-pane -p`, 120×40 and 200×50, in tests/unit/data/opencode; see
docs/agent-clis.md): busy, a permission question with its options, idle; the
answer keys for its one-row menu; the launch plan; corral's plugin."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from corral.assets import path as asset_path
from corral.supervisor.agents.profiles import OPENCODE, opencode_config_content, profile_for
from corral.supervisor.panes.base import PaneHandle, Screen
from corral.supervisor.panes.manager import PaneManager, PaneRecord
from corral.supervisor.panes.tmux import standalone_ansi
from corral.supervisor.status import ANSI, AgentStatus, StatusTracker, classify

SCREENS = Path(__file__).parent / "data" / "opencode"
ALLOW = ("Allow once", "Allow always", "Reject")


def screen(name: str) -> list[str]:
    return (SCREENS / f"{name}.txt").read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("name", ["busy", "busy_wide", "esc_once"])
def test_a_running_turn_is_busy(name: str) -> None:
    assert classify(screen(name), OPENCODE.markers).status is AgentStatus.RUNNING


@pytest.mark.parametrize(
    ("name", "prompt"),
    [
        ("permission_edit", "Permission required: Edit hello.txt"),
        ("permission_edit_wide", "Permission required: Edit hello.txt"),
        ("permission_bash", "Permission required: Shell command $ echo hi > bash.txt"),
        (
            "permission_external_dir",
            "Permission required: Access external directory /tmp/oc/exp/t1/repo",
        ),
    ],
)
def test_a_permission_prompt_is_a_question_with_its_three_options(name: str, prompt: str) -> None:
    reading = classify(screen(name), OPENCODE.markers)
    assert reading.status is AgentStatus.WAITING
    assert reading.question is not None
    assert reading.question.prompt == prompt
    assert reading.question.options == ALLOW


def test_allow_always_asks_to_confirm() -> None:
    reading = classify(screen("permission_always_confirm"), OPENCODE.markers)
    assert reading.status is AgentStatus.WAITING
    assert reading.question is not None
    assert reading.question.prompt.startswith("Always allow: This will allow the following")
    assert reading.question.options == ("Confirm", "Cancel")


@pytest.mark.parametrize(
    "name", ["idle_after_turn", "idle_wide", "interrupted", "error_401", "home"]
)
def test_after_a_turn_and_at_the_home_screen_it_is_idle(name: str) -> None:
    assert classify(screen(name), OPENCODE.markers).status is AgentStatus.IDLE


def test_the_blank_screen_while_it_boots_is_not_idle() -> None:
    # OpenCode draws nothing for several seconds at start: never "idle" then
    assert classify([""] * 40, OPENCODE.markers).status is AgentStatus.UNKNOWN


class _Keys:
    """A pane backend that records the keys sent; once keys were sent its
    screen shows the agent working again (the answer landed)."""

    name = "stub"

    def __init__(self) -> None:
        self.sent: list[list[str]] = []

    def send_keys(self, handle: PaneHandle, keys: list[str]) -> None:
        self.sent.append(list(keys))

    def capture(self, handles: list[PaneHandle]) -> dict[str, Screen]:
        lines = ["  Thinking...", "  esc interrupt"] if self.sent else []
        return {h.owner: Screen(lines=lines) for h in handles}


@pytest.mark.parametrize(
    ("answer", "keys"),
    [
        ("Allow once", ["Enter"]),
        ("allow always", ["Right", "Enter"]),
        ("3", ["Right", "Right", "Enter"]),
    ],
)
def test_an_answer_moves_right_from_the_first_option(
    tmp_path: Path, answer: str, keys: list[str]
) -> None:
    """The menu takes no digits and draws its selection only in colour; it
    opens on `Allow once`, so the answer is that many Right presses, then Enter."""
    backend = _Keys()
    manager = PaneManager(backend, tmp_path)  # type: ignore[arg-type]
    lines = screen("permission_edit")
    tracker = StatusTracker(markers=OPENCODE.markers)
    manager.records["s1"] = PaneRecord(
        "s1",
        PaneHandle("stub", "%1", "owner"),
        OPENCODE,
        tmp_path / "hooks.jsonl",
        tracker,
        screen=Screen(lines=lines),
    )
    question = classify(lines, OPENCODE.markers).question
    assert question is not None
    asyncio.run(manager.choose("s1", question, answer))
    assert backend.sent == [keys]


def ansi_screen(name: str) -> Screen:
    """A `capture-pane -e` fixture as the tmux backend hands it over."""
    raw = (SCREENS / "ansi" / f"{name}.ans").read_text(encoding="utf-8").splitlines()
    ansi = standalone_ansi(raw)
    return Screen(lines=[ANSI.sub("", line) for line in ansi], ansi=ansi)


@pytest.mark.parametrize(
    ("name", "selected"),
    [
        ("permission_selected_1", 1),
        ("permission_selected_2", 2),
        ("permission_selected_3", 3),
        ("always_selected_1", 1),
        ("always_selected_2", 2),
    ],
)
def test_the_selected_option_is_read_from_its_colour(name: str, selected: int) -> None:
    menu = OPENCODE.markers.menu
    assert menu is not None
    assert menu.selected(ansi_screen(name).ansi) == selected
    assert menu.selected(screen("idle_after_turn")) is None


@pytest.mark.parametrize(
    ("name", "answer", "keys"),
    [
        ("permission_selected_3", "Allow once", ["Left", "Left", "Enter"]),
        ("permission_selected_2", "Reject", ["Right", "Enter"]),
        ("permission_selected_2", "Allow always", ["Enter"]),
        ("always_selected_2", "Confirm", ["Left", "Enter"]),
    ],
)
def test_an_answer_starts_from_the_option_selected_on_screen(
    tmp_path: Path, name: str, answer: str, keys: list[str]
) -> None:
    """Someone moved the selection in the pane by hand: the keys count
    from where it is now, not from where the menu opened."""
    backend = _Keys()
    manager = PaneManager(backend, tmp_path)  # type: ignore[arg-type]
    shown = ansi_screen(name)
    manager.records["s1"] = PaneRecord(
        "s1",
        PaneHandle("stub", "%1", "owner"),
        OPENCODE,
        tmp_path / "hooks.jsonl",
        StatusTracker(markers=OPENCODE.markers),
        screen=shown,
    )
    question = classify(shown.lines, OPENCODE.markers).question
    assert question is not None
    asyncio.run(manager.choose("s1", question, answer))
    assert backend.sent == [keys]


def test_the_task_goes_in_prompt_and_the_plugin_in_the_inline_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENCODE_CONFIG_CONTENT", raising=False)
    plan = profile_for("opencode").plan(
        "/bin/opencode", prompt="Fix it", session_dir=tmp_path, hook_cmd="corral-hook --file F"
    )
    assert plan.argv == ["/bin/opencode", "--prompt", "Fix it"]
    assert plan.paste_prompt is None
    assert plan.env_extra["CORRAL_HOOK_CMD"] == "corral-hook --file F"
    config = json.loads(plan.env_extra["OPENCODE_CONFIG_CONTENT"])
    plugin = asset_path("opencode", "corral_hooks.js")
    assert config == {"plugin": [plugin.resolve().as_uri()]}
    assert plugin.is_file()
    assert OPENCODE.hooks and not OPENCODE.dialogs


def test_the_operators_inline_config_is_kept() -> None:
    merged = json.loads(opencode_config_content('{"model": "a/b", "plugin": ["theirs"]}') or "")
    assert merged["model"] == "a/b"
    assert merged["plugin"][0] == "theirs" and merged["plugin"][1].endswith("corral_hooks.js")
    # twice is once
    again = json.loads(opencode_config_content(json.dumps(merged)) or "")
    assert again == merged
    # not a JSON object we can extend: left alone (no hooks; the screen still works)
    assert opencode_config_content("{ model: a/b }") is None
    assert opencode_config_content('{"plugin": "x"}') is None


PLUGIN_DRIVER = """
import { CorralHooks } from "./corral_hooks.mjs";
const hooks = await CorralHooks({});
const events = JSON.parse(process.argv[2]);
for (const event of events) await hooks.event({ event });
"""


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_plugin_reports_turn_edges_of_the_main_session_only(tmp_path: Path) -> None:
    """Fed OpenCode's bus events (as 1.18.33 emits them), the plugin runs
    the hook command once per edge, with Claude Code hook names."""
    shutil.copy(asset_path("opencode", "corral_hooks.js"), tmp_path / "corral_hooks.mjs")
    (tmp_path / "drive.mjs").write_text(PLUGIN_DRIVER, encoding="utf-8")
    out = tmp_path / "hooks.jsonl"
    recorder = tmp_path / "record.sh"
    recorder.write_text(
        '#!/bin/sh\nprintf \'{"event":"%s","payload":%s}\\n\' "$2" "$(cat)" >> "$1"\n',
        encoding="utf-8",
    )
    recorder.chmod(0o755)

    def ev(kind: str, **props: object) -> dict[str, object]:
        return {"type": kind, "properties": props}

    events = [
        ev("session.created", sessionID="main", info={"id": "main"}),
        ev("session.status", sessionID="main", status={"type": "busy"}),
        ev("session.status", sessionID="main", status={"type": "busy"}),
        ev("permission.asked", sessionID="main", id="per_1", permission="edit"),
        ev("permission.replied", sessionID="main", requestID="per_1", reply="once"),
        ev("session.created", sessionID="sub", info={"id": "sub", "parentID": "main"}),
        ev("session.status", sessionID="sub", status={"type": "busy"}),
        ev("session.idle", sessionID="sub"),
        ev("message.part.updated", sessionID="main"),
        ev("session.idle", sessionID="main"),
        ev("session.status", sessionID="main", status={"type": "idle"}),
        ev("session.idle", sessionID="main"),  # an interrupt idles twice: one Stop
    ]
    subprocess.run(
        [str(shutil.which("node")), str(tmp_path / "drive.mjs"), json.dumps(events)],
        cwd=tmp_path,
        env={"PATH": os.environ.get("PATH", ""), "CORRAL_HOOK_CMD": f"{recorder} {out}"},
        check=True,
        timeout=30,
    )
    expected = ["PermissionRequest", "PostToolUse", "Stop", "UserPromptSubmit"]
    rows: list[dict[str, Any]] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # the hook processes are not waited for
        rows = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
        if len(rows) >= len(expected):
            time.sleep(0.3)  # and nothing more comes (the sub-session's edges)
            rows = [json.loads(x) for x in out.read_text().splitlines()]
            break
        time.sleep(0.05)
    assert sorted(r["event"] for r in rows) == expected
    assert all(r["payload"]["session_id"] == "main" for r in rows)
    asked = next(r["payload"] for r in rows if r["event"] == "PermissionRequest")
    assert asked["tool_name"] == "edit" and asked["hook_event_name"] == "PermissionRequest"


def test_the_key_variables_its_config_names_pass_the_scrub(tmp_path: Path) -> None:
    from corral.supervisor.agents.agent_env import opencode_config_env

    user = tmp_path / "xdg" / "opencode"
    user.mkdir(parents=True)
    (user / "opencode.jsonc").write_text(
        '{\n  // gateway\n  "provider": {"gw": {"options": {"apiKey": "{env:MY_GATEWAY_KEY}"}}}\n}\n',
        encoding="utf-8",
    )
    extra = tmp_path / "run.json"
    extra.write_text('{"provider": {"x": {"options": {"apiKey": "{env:RUN_KEY}"}}}}')
    env = {
        "HOME": str(tmp_path / "home"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg"),
        "OPENCODE_CONFIG": str(extra),
        "OPENCODE_CONFIG_CONTENT": '{"provider": {"y": {"options": {"apiKey": "{env:INLINE_KEY}"}}}}',
    }
    assert opencode_config_env(env) == ("INLINE_KEY", "MY_GATEWAY_KEY", "RUN_KEY")
    assert opencode_config_env({"HOME": str(tmp_path / "nobody")}) == ()


def test_a_session_is_resumed_with_session_before_prompt(tmp_path: Path) -> None:
    plan = OPENCODE.plan("opencode", prompt="go on", session_dir=tmp_path, hook_cmd="hook")
    again = OPENCODE.with_resume(plan, "ses_abc")
    assert again is not None
    assert again.argv == ["opencode", "--session", "ses_abc", "--prompt", "go on"]
    assert OPENCODE.resumable
