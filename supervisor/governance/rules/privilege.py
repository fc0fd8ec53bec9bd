"""No privilege escalation: the engine runs as the operator's user (no
`sudo`, `su`, `doas`, setuid bits, capabilities or handing files to root)."""

from __future__ import annotations

import re

from ..shell_scan import ShellScan
from ..shell_words import positional_args

_NO_PRIVILEGE = "the engine runs as the operator's user and never escalates privileges"


def deny_privilege_escalation(prog: str, args: list[str], scan: ShellScan) -> str | None:
    """Why the command escalates privileges (None when it does not)."""
    if prog in ("sudo", "su", "doas", "pkexec", "runuser", "setpriv", "chroot", "nsenter"):
        return f"`{prog}` is not allowed: {_NO_PRIVILEGE}"
    if prog == "setcap":
        return f"`setcap` grants capabilities: {_NO_PRIVILEGE}"
    positionals = positional_args(args)
    if prog == "chmod" and positionals:
        mode = positionals[0]
        setid = re.search(r"[+=][rwxXt]*s", mode) or (
            re.fullmatch(r"[0-7]{4}", mode) and int(mode[0]) & 6
        )
        if setid:
            return f"`chmod {mode}` sets a setuid/setgid bit: {_NO_PRIVILEGE}"
    if prog in ("chown", "chgrp") and positionals:
        owner = re.split(r"[:.]", positionals[0])
        if any(part in ("root", "0", "wheel", "sudo", "admin") for part in owner if part):
            return f"`{prog} {positionals[0]}` hands files to a privileged owner: {_NO_PRIVILEGE}"
    return None
