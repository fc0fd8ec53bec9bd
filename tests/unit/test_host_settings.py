"""`[[hosts]]` in the config file: read as written, and a clear error for a
host entry that could not work."""

from __future__ import annotations

from pathlib import Path

import pytest

from corral.supervisor.config import load_config
from corral.supervisor.errors import ConfigError
from corral.supervisor.hosts.connection import connection_lost, explain
from corral.supervisor.hosts.settings import HostSettings


def test_hosts_are_read_with_their_defaults(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        '[[hosts]]\nname = "gpu1"\ndestination = "me@gpu1.lan"\n\n'
        '[[hosts]]\nname = "ci"\ndestination = "ci-box"\nmax_sessions = 9\n'
        'ssh_options = ["-p", "2222"]\nstate_dir = "/srv/corral"\n'
    )
    hosts = load_config(path).hosts
    assert [h.name for h in hosts] == ["gpu1", "ci"]
    assert hosts[0].state_dir == "~/.local/state/corral" and hosts[0].max_sessions == 4
    assert hosts[1].ssh_options == ["-p", "2222"] and hosts[1].max_sessions == 9


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ('name = "a"\ndestination = "-oProxyCommand=x"', "destination"),
        ('name = "a b"\ndestination = "h"', "name"),
        ('name = "a"\ndestination = "h"\nmax_sessions = 0', "max_sessions"),
        ('name = "a"\ndestination = "h"\nport = 22', "port"),
    ],
)
def test_a_broken_host_entry_names_the_file_and_the_field(
    tmp_path: Path, entry: str, words: str
) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f"[[hosts]]\n{entry}\n")
    with pytest.raises(ConfigError, match=words) as info:
        load_config(path)
    assert str(path) in str(info.value)


def test_two_hosts_with_one_name_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(
        '[[hosts]]\nname = "a"\ndestination = "x"\n\n[[hosts]]\nname = "a"\ndestination = "y"\n'
    )
    with pytest.raises(ConfigError, match="configured twice"):
        load_config(path)


@pytest.mark.parametrize(
    ("stderr", "words"),
    [
        ("root@h: Permission denied (publickey).", "refused our SSH key"),
        ("Host key verification failed.", "host key is unknown or changed"),
        ("ssh: Could not resolve hostname nope: Name or service not known", "does not resolve"),
        ("ssh: connect to host h port 22: Connection refused", "refused the connection"),
        ("ssh: connect to host h port 22: Connection timed out", "does not answer"),
    ],
)
def test_ssh_failures_become_sentences_naming_the_host(stderr: str, words: str) -> None:
    host = HostSettings(name="gpu1", destination="me@gpu1.lan")
    sentence = explain(host, stderr)
    assert sentence.startswith("host gpu1 (me@gpu1.lan)") and words in sentence


def test_a_cut_connection_is_an_outage_whatever_ssh_printed() -> None:
    """Status 255 is ssh's own: with its message, or with none at all (a
    connection cut mid-command), the host is down, not the command failed."""
    assert connection_lost(255, "")
    assert connection_lost(255, "Connection to 127.0.0.1 closed by remote host.\n")
    assert connection_lost(255, "mux_client_request_session: read from master failed")
    assert not connection_lost(1, "")  # the remote command's own failure
    assert not connection_lost(255, "error: some program of ours exited 255 and said so")
