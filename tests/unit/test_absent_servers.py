"""A suite whose test files wait on servers this machine lacks (cachelib:
redis-server and memcached started by pytest-xprocess fixtures, a local
DynamoDB at localhost:8000, pymongo's default client) is noticed when the
contract is drafted, before anything runs: the drafted pytest check leaves
those files out and gate 1 says which, why and how to put them back.
Before, the check ran them, each test waited out its client's timeout, and
the untouched tree's run went past the limit (cachelib: ten minutes)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from corral.supervisor.contracts.absent_servers import waiting_on_absent_servers
from corral.supervisor.contracts.checks import run_check
from corral.supervisor.contracts.conventions import draft_contract
from corral.supervisor.models import CheckVerdict, ContractCheck

PY = sys.executable
SERVER = "corral-no-such-server"

# a conftest fixture that starts a server program, then waits for its port
# (what pytest-xprocess's ensure() does): without the program it waits
CONFTEST = f"""\
import socket, subprocess, time
import pytest

@pytest.fixture(scope="session")
def queue_server():
    try:
        proc = subprocess.Popen(["{SERVER}", "--port", "6399"])
    except FileNotFoundError:
        proc = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", 6399), timeout=1).close()
            break
        except OSError:
            time.sleep(0.2)
    yield
    if proc is not None:
        proc.terminate()
"""
# a client that retries its server for a minute, as pymongo's selection does
CLIENT = """\
import socket, time

def connect(address, patience=60):
    host, port = address.rsplit(":", 1)
    deadline = time.monotonic() + patience
    while True:
        try:
            return socket.create_connection((host, int(port)), timeout=1)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
"""
OWN_SERVER = """\
import socket, socketserver, threading
from client import connect

def test_talks_to_its_own_server():
    server = socketserver.TCPServer(("127.0.0.1", 6401), socketserver.BaseRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        connect("127.0.0.1:6401").close()
    finally:
        server.shutdown()
        server.server_close()
"""


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


# checks run this interpreter: confined unless it lives under /tmp (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("interpreter_visible")


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    root = tmp_path / "cachey"
    write(
        root,
        "pyproject.toml",
        "[project]\nname = 'cachey'\nversion = '1'\n\n"
        '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n',
    )
    write(root, "cachey/__init__.py", "")
    write(root, "tests/conftest.py", CONFTEST)
    write(root, "tests/client.py", CLIENT)
    write(
        root,
        "tests/test_queue.py",
        'import pytest\n\n@pytest.mark.usefixtures("queue_server")\n'
        "def test_queue():\n    assert True\n",
    )
    write(
        root,
        "tests/test_store.py",
        "from client import connect\n\ndef test_store():\n    connect('localhost:6400').close()\n",
    )
    write(root, "tests/test_own_server.py", OWN_SERVER)
    write(root, "tests/test_plain.py", "def test_plain():\n    assert 1 + 1 == 2\n")
    return root


@pytest.mark.slow
async def test_files_waiting_on_absent_servers_are_left_out_before_the_wait_and_said(
    suite: Path,
) -> None:
    contract = draft_contract(suite, "make it faster", path=os.environ["PATH"])
    (check,) = contract.checks
    assert check.command == (
        "python3 -m pytest -q -p no:cacheprovider"
        " --ignore=tests/test_queue.py --ignore=tests/test_store.py"
    )
    said = contract.description
    assert "tests/test_queue.py: left out of tests (`--ignore=tests/test_queue.py`)" in said
    assert f"its fixture `queue_server` starts `{SERVER}`, which is not installed here" in said
    assert "tests/test_store.py: left out" in said and "localhost:6400" in said
    assert "test_own_server.py: left out" not in said and "test_plain.py: left out" not in said
    assert f"To put them back: install {SERVER} (a fixture starts it), or start" in said
    assert "--check 'python3 -m pytest -q -p no:cacheprovider'" in said

    # the drafted check runs on the untouched tree inside its limit, test by
    # test; the whole suite waits past it (what the old drafted check ran)
    drafted = check.command.replace("python3", PY, 1)
    ran = await run_check(
        ContractCheck(name="tests", command=drafted, timeout_secs=20), suite, untouched=True
    )
    assert ran.verdict is CheckVerdict.PASSES, (ran.reason, ran.output_tail)
    assert ran.tests is not None and not ran.tests.failed
    ran_names = " ".join(ran.tests.passed)
    assert "test_plain" in ran_names and "test_talks_to_its_own_server" in ran_names
    assert "test_queue" not in ran_names and "test_store" not in ran_names
    whole = ContractCheck(
        name="tests", command=f"{PY} -m pytest -q -p no:cacheprovider", timeout_secs=20
    )
    waited = await run_check(whole, suite, untouched=True)
    assert waited.timed_out


def test_an_installed_server_program_keeps_its_tests(suite: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / SERVER
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    contract = draft_contract(suite, "x", path=f"{bin_dir}:{os.environ['PATH']}")
    (check,) = contract.checks
    assert "--ignore=tests/test_queue.py" not in check.command
    assert "--ignore=tests/test_store.py" in check.command  # nothing starts that one


def test_a_suite_every_file_of_which_needs_the_server_keeps_them_all(tmp_path: Path) -> None:
    """Leaving every file out would make a check that judges nothing: the
    timeout's own *cannot run* says why instead."""
    root = tmp_path / "p"
    write(root, "tests/conftest.py", CONFTEST)
    write(root, "tests/test_a.py", "def test_a(queue_server):\n    pass\n")
    tests = [root / "tests/test_a.py"]
    found = waiting_on_absent_servers(
        root, tests, [root / "tests/conftest.py"], on_path=lambda _: False
    )
    assert found == []


def test_a_mongo_client_with_no_address_is_a_local_server(tmp_path: Path) -> None:
    root = tmp_path / "p"
    write(root, "tests/test_m.py", "import pymongo\n\ndef test_m():\n    pymongo.MongoClient()\n")
    write(
        root,
        "tests/test_n.py",
        "import pymongo\n\ndef test_n():\n    pymongo.MongoClient('db:1')\n",
    )
    tests = [root / "tests/test_m.py", root / "tests/test_n.py"]
    found = waiting_on_absent_servers(root, tests, [], on_path=lambda _: False)
    assert [(f.path, "27017" in f.why) for f in found] == [("tests/test_m.py", True)]


def test_an_address_that_is_only_data_is_no_server(tmp_path: Path) -> None:
    """pooch's URL parser tests name `http://127.0.0.1:8080/test.nc` as data;
    cachelib's DynamoDB and memcached tests hand theirs to a client."""
    root = tmp_path / "p"
    write(
        root,
        "tests/test_parse.py",
        "import pytest\n\n@pytest.mark.parametrize('url,netloc', [\n"
        "    ('http://127.0.0.1:8080/test.nc', {'netloc': '127.0.0.1:8080'}),\n])\n"
        "def test_parse(url, netloc):\n    assert url\n",
    )
    write(
        root,
        "tests/test_dynamo.py",
        "def factory(kwargs):\n    kwargs['endpoint_url'] = 'http://localhost:8000'\n",
    )
    write(
        root,
        "tests/test_memcached.py",
        "def factory(kwargs):\n    kwargs.setdefault('servers', ['127.0.0.1:11212'])\n",
    )
    write(root, "tests/test_cfg.py", "CFG = {'endpoint_url': 'http://localhost:8000'}\n")
    write(root, "tests/test_plain.py", "def test_plain():\n    pass\n")
    names = ["test_parse", "test_dynamo", "test_memcached", "test_cfg", "test_plain"]
    tests = [root / f"tests/{name}.py" for name in names]
    found = waiting_on_absent_servers(root, tests, [], on_path=lambda _: False)
    assert [f.path for f in found] == [
        "tests/test_dynamo.py",
        "tests/test_memcached.py",
        "tests/test_cfg.py",
    ]


def test_a_hostile_program_name_is_never_taken_as_a_program(tmp_path: Path) -> None:
    """Only a plain word is looked up and shown; a computed command, a shell
    line with metacharacters or an escape sequence is not a program."""
    root = tmp_path / "p"
    write(
        root,
        "tests/conftest.py",
        "import pytest, subprocess\n\n@pytest.fixture\ndef s():\n"
        "    subprocess.Popen(['\\x1b[2Jrm;-rf'])\n    subprocess.Popen(['$(id)'])\n",
    )
    write(root, "tests/test_a.py", "def test_a(s):\n    pass\n")
    write(root, "tests/test_b.py", "def test_b():\n    pass\n")
    tests = [root / "tests/test_a.py", root / "tests/test_b.py"]
    asked: list[str] = []
    found = waiting_on_absent_servers(
        root, tests, [root / "tests/conftest.py"], on_path=lambda p: asked.append(p) or False
    )
    assert found == [] and asked == []
