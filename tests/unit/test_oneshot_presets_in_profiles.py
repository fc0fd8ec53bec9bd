"""A one-shot preset (`claude-p`, `codex-exec`, …) is stated in its agent's
profile and nowhere else: no other module of corral names a preset or builds
one, and an agent registered with a one-shot form gets a working preset —
start path, `corral doctor`, its provider home — with nothing else touched."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.supervisor import doctor
from corral.supervisor.agents import profiles
from corral.supervisor.agents.base import AgentProfile, OneShotForm
from corral.supervisor.agents.oneshot import is_oneshot, oneshot_profile, preset_forms
from corral.supervisor.agents.provider_home import layout_for

ROOT = Path(__file__).resolve().parents[2]
PROFILES_FILE = ROOT / "supervisor" / "agents" / "profiles.py"


def product_files() -> Iterator[Path]:
    for folder in ("supervisor", "tui"):
        yield from sorted((ROOT / folder).rglob("*.py"))


def test_every_preset_comes_from_a_profile() -> None:
    forms = preset_forms()
    assert {"claude-p", "codex-exec", "gemini-p", "aider-msg"} <= set(forms)
    for name, (form, agent) in forms.items():
        assert agent.one_shot is form and form.name == name
        assert profiles.PROFILES[agent.name] is agent


def test_no_preset_is_named_or_built_outside_the_profiles() -> None:
    names = set(preset_forms())
    found: list[str] = []
    for path in product_files():
        if path == PROFILES_FILE:
            continue
        text = path.read_text(encoding="utf-8")
        if "OneShotForm" not in text and not any(n in text for n in names):
            continue  # parsed only where a name could be
        tree = ast.parse(text)
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Constant) and node.value in names:
                found.append(f"{where} names the preset {node.value!r}")
            if isinstance(node, ast.Call):
                called = node.func
                name = called.attr if isinstance(called, ast.Attribute) else None
                name = called.id if isinstance(called, ast.Name) else name
                if name == "OneShotForm":
                    found.append(f"{where} builds a one-shot form")
    assert not found, "a one-shot preset belongs in its agent's profile: " + "; ".join(found)


@pytest.fixture
def new_agent() -> Iterator[AgentProfile]:
    agent = AgentProfile(
        name="quillcli",
        label="Quill",
        binaries=("quillcli",),
        env_allow=("QUILL_API_KEY",),
        network_hosts=("api.quill.example",),
        own_dirs=(".quill",),
        one_shot=OneShotForm("quill-p", "Quill, one-shot (quillcli -p)", "quillcli -p {prompt}"),
    )
    profiles.register(agent, preferred=False)
    yield agent
    profiles.unregister(agent.name)


def test_an_agent_added_by_its_profile_alone_has_its_preset(new_agent: AgentProfile) -> None:
    assert is_oneshot("quill-p") and is_oneshot("external:quill-p")
    preset = oneshot_profile("quill-p")
    assert preset.command == "quillcli -p {prompt}"
    assert preset.binaries == ("quillcli",)
    assert preset.settings_key == "quillcli"  # `[agents.quillcli]` applies
    assert preset.env_allow == ("QUILL_API_KEY",)
    assert preset.network_hosts == ("api.quill.example",)
    assert preset.own_paths({"HOME": "/h"})[0] == [Path("/h/.quill")]
    listed = {cli.name: cli for cli in doctor.oneshot_presets()}
    assert listed["quill-p"].version == "quillcli -p {prompt}"


def test_a_preset_shares_its_agents_provider_home() -> None:
    for name, (_form, agent) in preset_forms().items():
        assert layout_for(name) is layout_for(agent.name)
    assert layout_for("claude-p") is not None


def test_the_static_help_names_exactly_the_profiles_one_shot_presets() -> None:
    """`--help` names the presets by hand (so it never loads the supervisor):
    a preset added to or dropped from a profile must show there too."""
    import re

    from corral.supervisor.agents.oneshot import preset_forms
    from corral.tui.cli.common import RUN_ENGINES

    block = RUN_ENGINES.split("one-shot presets:")[0].rsplit("\n", 1)[-1]
    block += "\n" + RUN_ENGINES.split("one-shot presets:")[1].split("\n", 2)[1]
    named = set(re.findall(r"\b([a-z]+-(?:p|exec|msg))\b", block))
    assert named == set(preset_forms())
