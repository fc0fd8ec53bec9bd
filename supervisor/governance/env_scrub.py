"""Environment scrubbing for everything corral starts (checks, agents).

Credential-shaped variables are removed unless a caller names them: a check
or an agent gets only the secrets it was explicitly given. Git credential
helpers are disabled for the child. `CORRAL_INVOKED_BY` marks the child so
nested corral invocations can refuse to recurse.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

CREDENTIAL_SHAPED = re.compile(
    r"(_API_KEY|_APIKEY|_TOKEN|_SECRET|_SECRET_KEY|_PASSWORD|_PASSWD|_CREDENTIALS?|_PAT)$"
    r"|^(GITHUB_TOKEN|GH_TOKEN|GITLAB_TOKEN|NPM_TOKEN|PYPI_TOKEN|TWINE_PASSWORD|"
    r"AWS_ACCESS_KEY_ID|AWS_SECRET_ACCESS_KEY|AWS_SESSION_TOKEN|GOOGLE_APPLICATION_CREDENTIALS|"
    r"AZURE_CLIENT_SECRET|DOCKER_AUTH_CONFIG|SSH_AUTH_SOCK)$",
    re.IGNORECASE,
)


def is_credential_name(name: str) -> bool:
    return bool(CREDENTIAL_SHAPED.search(name))


def scrubbed_env(
    base: Mapping[str, str] | None = None,
    *,
    allow: Iterable[str] = (),
    keep_credentials: bool = False,
    invoked_by: str = "corral",
) -> dict[str, str]:
    """A copy of `base` (default: this process's environment) without
    credential-shaped variables except those in `allow`."""
    env = dict(os.environ if base is None else base)
    allowed = set(allow)
    if not keep_credentials:
        for name in list(env):
            if name not in allowed and is_credential_name(name):
                del env[name]
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
