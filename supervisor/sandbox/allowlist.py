"""What a confined run may see at all: an allow-list, not a deny-list.

The sandbox's root is empty; into it go, read-only, the system's toolchain
dirs (`SYSTEM_ROOTS`), each directory on the run's PATH (a `.../bin` dir
brings its install prefix: `~/.nvm/versions/node/v20`, `~/.cargo`), corral's own runtime (its Python
and package) and the install prefix of an agent's own program. Every home (the passwd entry's and
whatever `$HOME` says) is an empty private tmpfs: a run gets back only what
its grant names. Never shown whole: a home, `/`, or a directory holding a
home, corral's state or the operator's checkout — there the run gets only
the narrower directory (or file) it needs.

`SYSTEM_ROOTS` hold programs, libraries and system-wide config. Left out on
purpose: /home and /root (homes), /tmp and /var/tmp (private tmpfs), /run
(sockets: ssh-agent, tmux, dbus, the user's runtime dir; only the resolver's
directory comes back so DNS works where /etc/resolv.conf points there), /mnt,
/media, /srv, /var (databases, spools, other users' mail) and any other
top-level dir (checkouts like /work live there). /sys is kept: runtimes read
CPU and cgroup limits there, and it holds no user data.
"""

from __future__ import annotations

import os
import pwd
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from . import witness as fs

CORRAL_ROOT = Path(__file__).resolve().parents[2]  # the folder holding corral's packages

SYSTEM_ROOTS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc",
    "/opt",
    "/nix",
    "/snap",
    "/sys",
)
PRIVATE_TMP = ("/tmp", "/var/tmp")
BINS = ("bin", ".bin")  # a program dir whose parent is its install prefix (node_modules/.bin)
RESOLVER = "/etc/resolv.conf"


def real(path: str | Path) -> str:
    return fs.real(path)


def within(path: str, roots: Iterable[str]) -> bool:
    """Whether `path` is one of `roots` or lies under one."""
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def passwd_home() -> str:
    """The real home from the passwd entry, whatever `$HOME` says."""
    return fs.recorded(_passwd_home)


def _passwd_home() -> str:
    try:
        return pwd.getpwuid(os.getuid()).pw_dir
    except KeyError:
        return ""


def homes(env: Mapping[str, str]) -> list[str]:
    """Every home a run could look for secrets in, resolved: the passwd
    entry's, this process's `$HOME` and the run's `$HOME`."""
    out: list[str] = []
    for raw in (passwd_home(), fs.host_env("HOME") or "", env.get("HOME", "")):
        if raw and os.path.isabs(raw):
            home = real(raw)
            if home != "/" and home not in out:
                out.append(home)
    return out


def system_mounts(scratch: str | None = None) -> list[str]:
    """bwrap arguments showing the system roots read-only (a top-level link
    such as /bin -> usr/bin stays a link), the resolver's directory, a
    fresh /dev and /proc, and private /tmp and /var/tmp (tmpfs, or the
    `scratch` dir's `tmp` and `var/tmp`, which corral reads afterwards)."""
    args: list[str] = []
    for root in SYSTEM_ROOTS:
        if fs.islink(root):
            args += ["--symlink", fs.readlink(root), root]
        elif fs.isdir(root):
            args += ["--ro-bind", root, root]
    resolver = os.path.dirname(real(RESOLVER))
    if fs.isdir(resolver) and resolver.startswith("/run/") and not within(resolver, ["/run/user"]):
        args += ["--ro-bind", resolver, resolver]
    args += ["--dev", "/dev", "--proc", "/proc"]
    for tmp in PRIVATE_TMP:
        if scratch is None:
            args += ["--tmpfs", tmp]
        else:
            place = os.path.join(scratch, tmp.lstrip("/"))
            os.makedirs(place, mode=0o700, exist_ok=True)
            args += ["--bind", place, tmp]
    return args


def _holds(candidate: str, anchors: Iterable[str]) -> bool:
    """Whether `candidate` is `/`, one of `anchors` or an ancestor of one."""
    return candidate == "/" or any(within(a, [candidate]) for a in anchors)


def _narrowest(choices: Iterable[str], anchors: list[str]) -> str | None:
    for choice in choices:
        if not _holds(choice, anchors):
            return choice
    return None


def path_prefixes(env: Mapping[str, str], anchors: list[str]) -> list[str]:
    """The run's PATH directories that exist, each widened to its install
    prefix when it is a `bin` (or `node_modules/.bin`) dir, unless that prefix would hold one of
    `anchors` (a home, a state dir, the operator's checkout)."""
    out: list[str] = []
    for raw in env.get("PATH", "").split(os.pathsep):
        if not raw or not os.path.isabs(raw) or not fs.isdir(raw):
            continue
        directory = real(raw)
        if within(directory, SYSTEM_ROOTS):
            continue
        wider = [os.path.dirname(directory)] if os.path.basename(directory) in BINS else []
        chosen = _narrowest([*wider, directory], anchors)
        for shown in (chosen, _rustup_home(env, directory, anchors)):
            if shown is not None and not within(shown, out):
                out = [kept for kept in out if not within(kept, [shown])]  # one mount for both
                out.append(shown)
    return out


def _rustup_home(env: Mapping[str, str], directory: str, anchors: list[str]) -> str | None:
    """Where rustup keeps the toolchains its `cargo`/`rustc` proxies in
    `directory` run (RUSTUP_HOME, else `.rustup` beside `~/.cargo`)."""
    if not fs.isfile(os.path.join(directory, "rustup")):
        return None
    home = env.get("RUSTUP_HOME") or os.path.join(
        os.path.dirname(os.path.dirname(directory)), ".rustup"
    )
    if not os.path.isabs(home) or not fs.isdir(home):
        return None
    return _narrowest([real(home)], anchors)


def corral_runtime(python: str = sys.executable) -> tuple[Path, ...]:
    """What corral's own programs run from (`corral hook`, a check's
    `python`): the interpreter, its prefixes, corral itself."""
    paths = [Path(sys.prefix), Path(sys.base_prefix), CORRAL_ROOT]
    exe = Path(real(python))
    paths += [Path(python).parent.parent, exe.parent.parent]
    return tuple(dict.fromkeys(paths))


def runtime_dirs(anchors: list[str]) -> list[str]:
    """`corral_runtime` as dirs to show, none that would hold an anchor."""
    out: list[str] = []
    for path in corral_runtime():
        shown = real(path)
        if fs.isdir(shown) and not within(shown, SYSTEM_ROOTS) and not _holds(shown, anchors):
            out.append(shown)
    return out


def install_prefix(binary: str, anchors: list[str]) -> str | None:
    """Where an agent's program lives: the `node_modules` tree holding it
    (a CLI loads its dependencies and platform binaries from siblings), else
    its dir (the dir above a `bin`), else the file alone when that dir would
    hold one of `anchors`."""
    if not binary:
        return None
    path = real(binary)
    if not fs.exists(path) or within(path, SYSTEM_ROOTS):
        return None
    parts = Path(path).parts
    choices: list[str] = []
    if "node_modules" in parts:
        choices.append(str(Path(*parts[: parts.index("node_modules") + 1])))
    directory = os.path.dirname(path)
    if os.path.basename(directory) in BINS:
        choices.append(os.path.dirname(directory))
    choices += [directory, path]
    return _narrowest(choices, anchors)
