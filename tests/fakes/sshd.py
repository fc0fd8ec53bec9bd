"""A real OpenSSH server for tests: Debian's sshd on 127.0.0.1, a free port,
a temporary host key and one authorized client key; a client ssh_config that
trusts only that host key."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = "/usr/sbin/sshd"


def sshd_missing() -> str | None:
    """Why the SSH tests cannot run here, or None."""
    if not Path(SSHD).exists():
        return "sshd is not installed (apt-get install openssh-server)"
    if shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        return "the OpenSSH client is not installed (apt-get install openssh-client)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _keygen(path: Path) -> None:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        capture_output=True,
    )


@dataclass
class SshServer:
    proc: subprocess.Popen[bytes]
    port: int
    config: Path  # the client's ssh_config (-F)
    alias: str  # a Host alias in that config
    bad_alias: str  # the same server, with a key it does not accept
    remote_root: Path  # the "remote machine"'s directory tree
    log: Path

    def ssh_options(self) -> list[str]:
        return ["-F", str(self.config)]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def restart(self) -> None:
        """Listen again on the same port with the same keys (after `stop`)."""
        self.proc = _serve(self.config.parent / "sshd_config", self.port, self.log)


def start_sshd(base: Path) -> SshServer:
    base.mkdir(parents=True, exist_ok=True)
    os.chmod(base, 0o700)
    host_key = base / "host_key"
    client_key = base / "client_key"
    stranger_key = base / "stranger_key"
    for key in (host_key, client_key, stranger_key):
        _keygen(key)
    authorized = base / "authorized_keys"
    authorized.write_text((base / "client_key.pub").read_text())
    remote_root = base / "remote"
    remote_root.mkdir()
    port = _free_port()
    log = base / "sshd.log"
    sshd_config = base / "sshd_config"
    sshd_config.write_text(
        f"""Port {port}
ListenAddress 127.0.0.1
HostKey {host_key}
AuthorizedKeysFile {authorized}
PidFile {base / "sshd.pid"}
UsePAM no
StrictModes no
PermitRootLogin yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
AllowTcpForwarding no
X11Forwarding no
PrintMotd no
PrintLastLog no
UseDNS no
PermitUserRC no
MaxSessions 50
MaxStartups 50:30:100
"""
    )
    known = base / "known_hosts"
    known.write_text(f"[127.0.0.1]:{port} " + (base / "host_key.pub").read_text())
    client = base / "ssh_config"
    common = f"""  HostName 127.0.0.1
  Port {port}
  UserKnownHostsFile {known}
  StrictHostKeyChecking yes
  IdentitiesOnly yes
  LogLevel ERROR
"""
    client.write_text(
        f"Host testhost\n{common}  IdentityFile {client_key}\n\n"
        f"Host strangerhost\n{common}  IdentityFile {stranger_key}\n"
    )
    proc = _serve(sshd_config, port, log)
    return SshServer(proc, port, client, "testhost", "strangerhost", remote_root, log)


def _serve(sshd_config: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    # sshd insists on its privilege separation directory (normally made by systemd)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    proc = subprocess.Popen(
        [SSHD, "-D", "-e", "-f", str(sshd_config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=log.open("ab"),
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited: {log.read_text()}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("sshd did not listen within 10 s")
