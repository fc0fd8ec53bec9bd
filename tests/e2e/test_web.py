"""`corral web` in a real browser: headless chromium (Debian's `chromium` and
`chromium-driver`) driven by Selenium loads the console with the token, the
board paints, keys reach it (a session is opened and named from the browser:
the name lands in the store), a screenshot is kept; a wrong or missing token
is refused."""

from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from corral.supervisor.models import CoderSession
from corral.supervisor.session.summaries import summary_json
from corral.supervisor.states import CoderState
from corral.supervisor.store import Store
from tests.conftest import init_repo

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        shutil.which("chromium") is None or shutil.which("chromedriver") is None,
        reason="chromium and chromium-driver are not installed (apt-get install chromium "
        "chromium-driver)",
    ),
]

SID = "0" * 16 + "feedbeef"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    """`corral web` on a free port over a state dir holding one failed session:
    yields (the printed URL, the state dir, the repo)."""
    repo = init_repo(tmp_path / "repo")
    home = tmp_path / "home"
    store = Store(home, summarize=summary_json)
    store.save_session(
        CoderSession(
            id=SID,
            repo=str(repo),
            intent="Make the web test pass",
            state=CoderState.FAILED,
            error="checks stayed red",
        )
    )
    store.close()
    port = _free_port()
    env = {**os.environ, "CORRAL_HOME": str(home), "CORRAL_TMUX_SOCKET_DIR": str(tmp_path / "t")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "corral.tui.cli",
            "--backend",
            "pty",
            "web",
            "--repo",
            str(repo),
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("corral web: http://127.0.0.1:"), line
        url = line.split(": ", 1)[1].strip()
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(url, timeout=2).close()
                break
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        yield url, home, repo
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_wrong_or_missing_token_is_refused(served: tuple[str, Path, Path]) -> None:
    url, home, _repo = served
    base = url.split("?", 1)[0]
    assert _status(url) == 200
    assert _status(base) == 403
    assert _status(base + "?token=not-the-token") == 403
    assert _status(base + "ws") == 403
    token = url.split("token=", 1)[1]
    assert (home / "web-token").read_text().strip() == token
    assert (home / "web-token").stat().st_mode & 0o777 == 0o600


def _name_of(home: Path) -> str | None:
    conn = sqlite3.connect(f"file:{home / 'corral.sqlite3'}?mode=ro", uri=True)
    try:
        (data,) = conn.execute("SELECT data FROM sessions WHERE id=?", (SID,)).fetchone()
    finally:
        conn.close()
    return CoderSession.model_validate_json(data).name


def test_the_console_in_a_headless_browser(served: tuple[str, Path, Path], tmp_path: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    url, home, _repo = served
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'chromium'}",
        "--window-size=1400,900",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(
        service=Service(shutil.which("chromedriver") or "chromedriver"), options=options
    )
    try:
        driver.get(url)
        driver.find_element(By.CSS_SELECTOR, ".textual-terminal")

        def painted() -> bool:
            # the console drew something: the page marks its first byte
            return "-first-byte" in (
                driver.find_element(By.TAG_NAME, "body").get_attribute("class") or ""
            )

        deadline = time.monotonic() + 60
        while not painted():
            assert time.monotonic() < deadline, "the console never painted in the browser"
            time.sleep(0.3)
        time.sleep(3)  # the board's first frame after the console's start-up
        board_shot = tmp_path / "web-board.png"
        driver.save_screenshot(str(board_shot))
        # the whole console fits the window (its footer too), and it has the
        # keyboard without a click first
        bottom = driver.execute_script(
            "return document.querySelector('#terminal').getBoundingClientRect().bottom"
        )
        assert bottom <= driver.execute_script("return window.innerHeight")
        assert (
            driver.execute_script("return document.activeElement && document.activeElement.tagName")
            == "TEXTAREA"
        ), "the console does not have the keyboard without a click"
        # open the one session, name it: the name reaches the store
        actions = ActionChains(driver)
        actions.send_keys(Keys.ENTER).pause(2).send_keys("N").pause(1)
        actions.send_keys("web").pause(0.5).send_keys(Keys.ENTER).perform()
        deadline = time.monotonic() + 30
        while _name_of(home) != "web":
            assert time.monotonic() < deadline, (
                "keys typed in the browser never reached the console"
            )
            time.sleep(0.3)
        time.sleep(1)
        shot = tmp_path / "web-session.png"
        driver.save_screenshot(str(shot))
        print(f"screenshots: {board_shot} {shot}")
        assert shot.stat().st_size > 10_000 and board_shot.stat().st_size > 10_000
    finally:
        driver.quit()
