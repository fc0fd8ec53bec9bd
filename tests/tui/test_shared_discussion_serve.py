"""Two consoles attached to a real `corral serve` process speak in one
discussion: each sees the other's turn and the model's answers, the owner's
saved record keeps both turns, and the consoles' process builds no discussion
store at all (the owner, another process, holds the only one). The model is a
fake HTTP endpoint the owner reaches through its configured `[llm]`."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from corral.supervisor.api import Supervisor
from corral.supervisor.remote import AttachedSupervisor
from corral.tui.app import CorralApp
from tests.conftest import fast_config, init_repo
from tests.fakes.model_server import FakeModelServer, Reply
from tests.integration.test_control_cli import env_for, serve
from tests.integration.test_shared_discussion import consoles_said

from .conftest import until
from .test_shared_discussion_consoles import open_discussion, say, shown, stores_built

pytestmark = [pytest.mark.slow]


@pytest.fixture
def owner(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, Path, subprocess.Popen[str]]]:
    """A `corral serve` whose discussions answer through a fake model."""
    site = Path(tmp_path_factory.mktemp("sv"))
    repo = init_repo(site / "repo")
    with FakeModelServer(final=Reply("an answer from the model")) as model:
        config = site / "config.toml"
        config.write_text(
            "[llm]\norder = ['fake']\n"
            f"[[llm.models]]\nname = 'fake'\nprovider = 'anthropic'\nbase_url = '{model.url}'\n"
            "model = 'fake-model'\napi_key_env = 'FAKE_MODEL_KEY'\n"
        )
        proc = serve(site, CORRAL_CONFIG=str(config), FAKE_MODEL_KEY="sk-fake")
        try:
            yield site, repo, proc
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate(timeout=10)


async def test_two_consoles_on_a_real_owner_share_one_discussion(
    owner: tuple[Path, Path, subprocess.Popen[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    site, repo, proc = owner
    for name, value in env_for(site).items():
        monkeypatch.setenv(name, value)
    built = stores_built(monkeypatch)

    a, b = (
        CorralApp(
            cast(Supervisor, AttachedSupervisor(site / "home", config=fast_config())),
            default_repo=repo,
            attached=True,
        )
        for _ in range(2)
    )
    async with a.run_test(size=(120, 34)) as pa, b.run_test(size=(120, 34)) as pb:
        on_a = await open_discussion(a, pa)  # none saved: A starts one at the owner
        assert on_a.discussion is not None
        await say(pa, "from console A", "an answer from the model", on_a)
        on_b = await open_discussion(b, pb)  # B resumes the repository's newest: A's
        assert on_b.discussion is not None and on_b.discussion.id == on_a.discussion.id
        await shown(pb, (on_b,), "from console A", "an answer from the model")  # replayed
        await pb.press(*"from console B", "enter")
        await shown(pb, (on_b, on_a), "from console B")  # live on A's console too
        did = on_a.discussion.id
        record = site / "home" / "discussions" / f"{did}.json"
        await until(pa, "both turns saved by the owner", lambda: len(consoles_said(record)) == 2)

        proc.kill()  # the owner dies: each discussion screen says so, none goes quiet
        await shown(pa, (on_a, on_b), "went away: this discussion is no longer followed")

    assert built == [], "a console built its own discussion store"
    assert consoles_said(record) == ["from console A", "from console B"]
