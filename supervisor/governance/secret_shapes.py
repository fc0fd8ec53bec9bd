"""What a credential looks like, by a variable's name and by its value.

A name is credential-shaped when it is, or ends in (after `_`), a word that
means a secret: `API_KEY`, `TOKEN`, `SECRET`, `PASSWORD`, `PASSWD`, `PASS`,
`PASSPHRASE`, `CREDENTIALS`, `PAT`, `DSN`, `AUTH`, `AUTH_IDENT`, `AUTHORIZATION`,
`SESSION`, `WEBHOOK`, `WEBHOOK_URL`, `CONNECTION_STRING`, `ACCESS_KEY_ID`; or
ends in `_PWD`; or is a qualified key (`SECRET_KEY`, `PRIVATE_KEY`,
`ACCESS_KEY`, `AUTH_KEY`, `MASTER_KEY`, `SIGNING_KEY`, `ENCRYPTION_KEY`,
`LICENSE_KEY`, `DEPLOY_KEY`); or is a framework's signing secret
(`SECRET_KEY_BASE` for Rails, `APP_KEY` for Laravel); or holds `COOKIE` or `ASKPASS` anywhere (an
askpass program hands out the user's git credentials); or is one of the named
ones (`PGPASSWORD`, `SSH_AUTH_SOCK`, `DOCKER_AUTH_CONFIG`, `OP_SESSION_*`, an
`NPM_CONFIG_*` auth setting).

A bare `*_KEY` is deliberately not enough: `GPG_KEY` (a fingerprint),
`CACHE_KEY` and `SORT_KEY` are settings, and a key pasted into one is caught
by its value instead. `PWD` and `OLDPWD` (the working directory) and
`DESKTOP_SESSION` (the desktop's name) are kept.

A value carries a credential when it holds a URL whose userinfo has a password
(`scheme://user:pw@host`), a well-known token format (GitHub, GitLab, Slack,
OpenAI/Anthropic `sk-…`, Stripe (`sk_live_…`, `sk_test_…`, `rk_live_…`,
`rk_test_…`, `whsec_…`), AWS access key ids, Google API keys, npm,
PyPI, Hugging Face, JWTs, `Bearer …`), a PEM private key, or a Slack or
Discord webhook address.
"""

from __future__ import annotations

import re

_WORDS = (
    r"API_?KEY|TOKEN|SECRETS?|PASSWORD|PASSWD|PASS|PASSPHRASE|CREDENTIALS?|PAT|DSN"
    r"|AUTH|AUTH_IDENT|AUTHORIZATION|SESSION|WEBHOOK|WEBHOOK_URL|CONNECTION_STRING"
    r"|ACCESS_KEY_ID|SECRET_KEY_BASE|APP_KEY"
    r"|(SECRET|PRIVATE|ACCESS|AUTH|MASTER|SIGNING|ENCRYPTION|LICENSE|DEPLOY)_?KEY"
)

CREDENTIAL_NAME = re.compile(
    rf"(^|_)({_WORDS})$"
    r"|_PWD$"
    r"|COOKIE|ASKPASS"
    r"|^(PGPASSWORD|SSH_AUTH_SOCK|DOCKER_AUTH_CONFIG)$"
    r"|^OP_SESSION_"
    r"|^NPM_CONFIG_.*(_AUTH|_PASSWORD|_TOKEN)"
)

# Names that match a shape above but hold nothing secret.
HARMLESS_NAMES = frozenset({"DESKTOP_SESSION"})

URL_WITH_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s/?#@:]*:[^\s/?#@]+@")

TOKEN_FORMATS = re.compile(
    "|".join(
        (
            r"\bgh[pousr]_[A-Za-z0-9]{30,}",  # GitHub
            r"\bgithub_pat_[A-Za-z0-9_]{30,}",
            r"\bglpat-[A-Za-z0-9_\-]{20,}",  # GitLab
            r"\bxox[abprs]-[A-Za-z0-9\-]{10,}",  # Slack
            r"(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{20,}",  # OpenAI, Anthropic (sk-ant-…)
            r"\b[sr]k_(live|test)_[A-Za-z0-9]{16,}",  # Stripe secret and restricted keys
            r"\bwhsec_[A-Za-z0-9]{16,}",  # Stripe webhook signing secret
            r"\b(AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key id
            r"\bAIza[0-9A-Za-z_\-]{35}",  # Google API key
            r"\bnpm_[A-Za-z0-9]{36}\b",
            r"\bpypi-AgE[A-Za-z0-9_\-]{50,}",
            r"\bhf_[A-Za-z0-9]{30,}",  # Hugging Face
            r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",  # JWT
            r"\b[Bb]earer\s+[A-Za-z0-9\-._~+/]{16,}",
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----",
            r"hooks\.slack\.com/services/",
            r"discord(app)?\.com/api/webhooks/",
        )
    )
)

PROXY_NAME = re.compile(r"PROXY$", re.IGNORECASE)
# The userinfo of a proxy address, with or without a scheme (`u:pw@proxy:3128`).
_PROXY_USERINFO = re.compile(r"^(\s*(?:[A-Za-z][A-Za-z0-9+.\-]*://)?)[^\s/?#@]*@")


def is_credential_name(name: str) -> bool:
    """Whether `name` says it holds a secret (case does not matter)."""
    upper = name.upper()
    return upper not in HARMLESS_NAMES and bool(CREDENTIAL_NAME.search(upper))


def carries_credential(value: str) -> bool:
    """Whether `value` holds a password in a URL, a known token or a private key."""
    return bool(URL_WITH_PASSWORD.search(value) or TOKEN_FORMATS.search(value))


def is_proxy_name(name: str) -> bool:
    """`HTTPS_PROXY`, `all_proxy`, `npm_config_proxy`, …: their value is an address."""
    return bool(PROXY_NAME.search(name))


def without_userinfo(proxy: str) -> str:
    """The proxy address without its `user:password@` part: the child still
    goes through the proxy, and an authenticating one answers 407, which
    says what is missing, instead of leaking the password."""
    return _PROXY_USERINFO.sub(r"\1", proxy, count=1)
