"""Environment scrubbing for everything corral starts (checks, the built-in
engine's shell, agents).

A variable is removed when its name is credential-shaped or its value carries
a credential (`secret_shapes` says what that looks like), unless the caller
names it in `allow` (exact names or `fnmatch` patterns such as `AIDER_*`): a
check or an agent gets only the secrets it was explicitly given. A proxy
variable whose address holds credentials keeps the address without them.
Git credential helpers are disabled for the child. `CORRAL_INVOKED_BY` marks
the child so nested corral invocations can refuse to recurse.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase

from .secret_shapes import carries_credential, is_credential_name, is_proxy_name, without_userinfo


def is_allowed(name: str, allow: Iterable[str]) -> bool:
    """Whether `name` is one of `allow` (exact, case-sensitive, or a pattern)."""
    return any(name == pattern or fnmatchcase(name, pattern) for pattern in allow)


def scrub(env: Mapping[str, str], allow: Iterable[str] = ()) -> dict[str, str]:
    """`env` without credentials, except the variables `allow` names."""
    allowed = tuple(allow)
    out: dict[str, str] = {}
    for name, value in env.items():
        if is_allowed(name, allowed):
            out[name] = value
            continue
        if is_credential_name(name):
            continue
        if is_proxy_name(name):
            value = without_userinfo(value)
        if carries_credential(value):
            continue
        out[name] = value
    return out


def scrubbed_env(
    base: Mapping[str, str] | None = None,
    *,
    allow: Iterable[str] = (),
    keep_credentials: bool = False,
    invoked_by: str = "corral",
) -> dict[str, str]:
    """A copy of `base` (default: this process's environment) without
    credentials except those `allow` names; `keep_credentials` (a contract
    check that asked for them at gate 1) keeps everything."""
    env = dict(os.environ if base is None else base)
    if not keep_credentials:
        env = scrub(env, allow)
    env["GIT_TERMINAL_PROMPT"] = "0"
    env["GIT_CONFIG_COUNT"] = "1"
    env["GIT_CONFIG_KEY_0"] = "credential.helper"
    env["GIT_CONFIG_VALUE_0"] = ""
    env["CORRAL_INVOKED_BY"] = invoked_by
    return env


def invoked_by_chain(link: str, env: Mapping[str, str] | None = None) -> str:
    """The `CORRAL_INVOKED_BY` value for a child started on behalf of `link`
    (e.g. `engine:native`): the inherited chain, then `corral`, then `link`."""
    chain = (os.environ if env is None else env).get("CORRAL_INVOKED_BY", "")
    links = [part for part in chain.split(">") if part]
    return ">".join([*links, "corral", link])
