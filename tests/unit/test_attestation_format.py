"""The attestation note's format and when corral signs: read strictly (a
note that is not ours, or from a newer corral, is said so, never guessed at),
and signed exactly when the operator's git signs."""

from __future__ import annotations

import json

import pytest

from corral.supervisor.git.attestation import (
    PREDICATE_TYPE,
    AttestationError,
    envelope,
    parse,
    signing_key,
)

STATEMENT = {
    "_type": "https://in-toto.io/Statement/v1",
    "subject": [{"name": "corral/x", "digest": {"gitCommit": "b" * 40}}],
    "predicateType": PREDICATE_TYPE,
    "predicate": {"results": []},
}


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("not json", "not JSON"),
        (json.dumps({"hello": 1}), "not a corral attestation"),
        (json.dumps({"corral_attestation": 2, "statement": STATEMENT}), "upgrade corral"),
        (
            json.dumps({"corral_attestation": 1, "statement": {"predicateType": "x"}}),
            "is not a https://corral.dev/attestation/v1 statement",
        ),
        ("x" * (300 * 1024), "over 256 KiB"),
    ],
)
def test_a_note_that_is_not_a_readable_attestation_says_why(text: str, said: str) -> None:
    with pytest.raises(AttestationError, match=said):
        parse(text)


def test_a_note_reads_back_as_written() -> None:
    read = parse(envelope(STATEMENT, None))
    assert read.statement == STATEMENT and read.signature is None
    assert read.subject_commit == "b" * 40


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, None),
        ({"user.signingkey": "ABC"}, None),  # a key alone: git does not sign with it
        ({"gpg.format": "ssh", "user.signingkey": "~/.ssh/id"}, ("ssh", "~/.ssh/id")),
        ({"gpg.format": "ssh"}, None),  # ssh without a key cannot sign
        ({"commit.gpgsign": "true"}, ("openpgp", "")),
        ({"commit.gpgsign": "true", "user.signingkey": "ABC"}, ("openpgp", "ABC")),
        ({"commit.gpgsign": "true", "corral.sign": "false"}, None),
        ({"corral.sign": "true", "user.signingkey": "ABC"}, ("openpgp", "ABC")),
        ({"commit.gpgsign": "true", "gpg.format": "x509"}, None),
    ],
)
def test_corral_signs_exactly_when_git_would(
    config: dict[str, str], expected: tuple[str, str] | None
) -> None:
    key = signing_key(config)
    assert (None if key is None else (key.format, key.key)) == expected
