"""Attestations: what corral records beside a delivered commit, in a git note
under `refs/notes/corral`, so it travels with `git push`/`git fetch` of notes
and anyone can re-check it (`corral verify`).

A note is one JSON object (docs/attestation.md is the format's reference):

    {"corral_attestation": 1,
     "statement": {in-toto Statement v1: _type, subject, predicateType, predicate},
     "signature": null | {"format": "ssh", "namespace": "corral-attestation",
                          "signer": "...", "signature": "-----BEGIN SSH SIGNATURE-----..."}}

The signature (when the operator's git is configured to sign) is made with
the operator's own git signing key over `canonical(statement)`: the statement
as JSON with sorted keys, no spaces and ASCII escapes, so any reader rebuilds
the exact bytes from the parsed note. It is checked as git checks an SSH
commit signature: `ssh-keygen -Y find-principals` and `-Y verify` against
`gpg.ssh.allowedSignersFile`. No key of corral's own exists.

Blocking (git and ssh-keygen subprocesses); call through `asyncio.to_thread`.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .run import GitError, git

NOTES_REF = "refs/notes/corral"
ENVELOPE_KEY = "corral_attestation"
ENVELOPE_VERSION = 1
STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE = "https://corral.dev/attestation/v1"
SIGNATURE_NAMESPACE = "corral-attestation"
MAX_NOTE_BYTES = 256 * 1024  # a note larger than this is not read (corral writes ~2-10 KiB)
SSH_KEYGEN_TIMEOUT = 30.0


class AttestationError(Exception):
    """A note that is not a readable corral attestation; the message says why."""


def canonical(statement: dict[str, Any]) -> bytes:
    """The bytes a signature covers: rebuilt identically from any parse of the note."""
    return json.dumps(statement, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode(
        "ascii"
    )


@dataclass(frozen=True)
class SigningKey:
    """The operator's git signing setup, as git itself would use it."""

    format: str  # "ssh" or "openpgp"
    key: str  # user.signingkey as configured
    program: str  # gpg.ssh.program / gpg.program, or the default


@dataclass(frozen=True)
class Attestation:
    """One note, parsed: the statement, and its signature as written (unchecked)."""

    statement: dict[str, Any]
    signature: dict[str, Any] | None

    @property
    def predicate(self) -> dict[str, Any]:
        value = self.statement.get("predicate")
        return value if isinstance(value, dict) else {}

    @property
    def subject_commit(self) -> str | None:
        for subject in self.statement.get("subject") or []:
            if isinstance(subject, dict):
                digest = subject.get("digest") or {}
                if isinstance(digest, dict) and isinstance(digest.get("gitCommit"), str):
                    return str(digest["gitCommit"])
        return None


def git_config(repo: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """The repository's git config (global and local; the last value of a key
    wins, as for git), read in one call: keys lower-cased as git does."""
    out = git(repo, "config", "-z", "--list", check=False, env=env)
    config: dict[str, str] = {}
    for item in out.split("\0"):
        key, _, value = item.partition("\n")
        if key:
            config[key.lower()] = value
    return config


def _config(repo: Path | dict[str, str], key: str) -> str:
    if isinstance(repo, dict):
        return repo.get(key.lower(), "").strip()
    return git(repo, "config", "--get", key, check=False).strip()


def signing_key(repo: Path | dict[str, str]) -> SigningKey | None:
    """The key git would sign the operator's commits with, when the operator
    asked git to sign: `commit.gpgsign = true`, or an SSH `user.signingkey`
    (`gpg.format = ssh`). `git config corral.sign false` turns it off for
    corral alone; `corral.sign true` asks for it without `commit.gpgsign`."""
    choice = _config(repo, "corral.sign").lower()
    if choice in ("false", "no", "off", "0"):
        return None
    key = _config(repo, "user.signingkey")
    fmt = (_config(repo, "gpg.format") or "openpgp").lower()
    gpgsign = _config(repo, "commit.gpgsign").lower() in ("true", "yes", "on", "1")
    wanted = choice in ("true", "yes", "on", "1") or gpgsign or (fmt == "ssh" and bool(key))
    if not wanted or fmt not in ("ssh", "openpgp"):
        return None
    if fmt == "ssh":
        if not key:
            return None
        program = _config(repo, "gpg.ssh.program") or "ssh-keygen"
        return SigningKey("ssh", key, program)
    program = _config(repo, "gpg.openpgp.program") or _config(repo, "gpg.program") or "gpg"
    return SigningKey("openpgp", key, program)


def publishes_hidden_checks(repo: Path | dict[str, str]) -> bool:
    """Whether the operator chose to publish hidden checks in attestations
    (`git config corral.publishHiddenChecks true`): their commands and files
    are then in the note, so anyone holding the repository re-runs them (and
    any agent that later reads the repository's notes learns them). Off by
    default: a hidden check is the operator's secret."""
    return _config(repo, "corral.publishHiddenChecks").lower() in ("true", "yes", "on", "1")


def _ssh_key_file(key: str, scratch: Path) -> tuple[Path, list[str]]:
    """The file `ssh-keygen -Y sign -f` takes for `user.signingkey` (a path, or
    a literal `key::ssh-…` / `ssh-…` public key whose private half the agent holds)."""
    literal = key.removeprefix("key::")
    if literal.startswith(("ssh-", "ecdsa-", "sk-")):
        pub = scratch / "signing-key.pub"
        pub.write_text(literal + "\n", encoding="utf-8")
        return pub, ["-U"]
    return Path(os.path.expanduser(key)), []


def sign(payload: bytes, key: SigningKey, signer: str | None) -> dict[str, Any]:
    """A signature over `payload` with the operator's key (raises
    AttestationError naming what failed: a locked key, a missing agent)."""
    if key.format != "ssh":
        return _sign_openpgp(payload, key)
    with tempfile.TemporaryDirectory(prefix="corral-sign-") as tmp:
        keyfile, extra = _ssh_key_file(key.key, Path(tmp))
        proc = _run(
            [key.program, "-Y", "sign", "-n", SIGNATURE_NAMESPACE, "-f", str(keyfile), *extra],
            payload,
        )
    if proc.returncode != 0 or b"BEGIN SSH SIGNATURE" not in proc.stdout:
        raise AttestationError(
            f"signing the attestation with {key.key} failed: {_last_line(proc.stderr)}"
        )
    return {
        "format": "ssh",
        "namespace": SIGNATURE_NAMESPACE,
        "signer": signer,
        "signature": proc.stdout.decode("ascii", "replace"),
    }


def _sign_openpgp(payload: bytes, key: SigningKey) -> dict[str, Any]:
    argv = [key.program, "--batch", "--armor", "--detach-sign"]
    if key.key:
        argv += ["--local-user", key.key]
    proc = _run(argv, payload)
    if proc.returncode != 0 or b"BEGIN PGP SIGNATURE" not in proc.stdout:
        raise AttestationError(
            f"signing the attestation with OpenPGP key {key.key or '(default)'} failed: "
            f"{_last_line(proc.stderr)}"
        )
    return {
        "format": "openpgp",
        "namespace": SIGNATURE_NAMESPACE,
        "signer": key.key,
        "signature": proc.stdout.decode("ascii", "replace"),
    }


def _run(argv: list[str], data: bytes) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(
            argv, input=data, capture_output=True, timeout=SSH_KEYGEN_TIMEOUT, check=False
        )
    except FileNotFoundError as exc:
        raise AttestationError(f"{argv[0]} is not installed; git's signing setup needs it") from exc
    except subprocess.TimeoutExpired as exc:
        raise AttestationError(
            f"{argv[0]} did not answer within {SSH_KEYGEN_TIMEOUT:.0f}s"
        ) from exc


def _last_line(data: bytes) -> str:
    lines = data.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else "no message"


@dataclass(frozen=True)
class SignatureCheck:
    """What checking a note's signature found: `good` only when the
    signature verifies for a principal the allowed signers file names."""

    state: str  # "good", "bad", "unsigned", "unchecked"
    sentence: str
    principal: str | None = None

    @property
    def good(self) -> bool:
        return self.state == "good"


def check_signature(repo: Path | dict[str, str], attestation: Attestation) -> SignatureCheck:
    """Check the note's signature as git checks an SSH commit signature."""
    signature = attestation.signature
    if not signature:
        return SignatureCheck("unsigned", "unsigned")
    fmt = signature.get("format")
    text = signature.get("signature")
    if signature.get("namespace") != SIGNATURE_NAMESPACE or not isinstance(text, str):
        return SignatureCheck("bad", "the signature is not a corral attestation signature")
    payload = canonical(attestation.statement)
    if fmt == "openpgp":
        return _check_openpgp(repo, payload, text)
    if fmt != "ssh":
        return SignatureCheck("bad", f"unknown signature format {str(fmt)[:20]!r}")
    allowed = _config(repo, "gpg.ssh.allowedSignersFile")
    if not allowed:
        return SignatureCheck(
            "unchecked",
            "signed, but not checked: set gpg.ssh.allowedSignersFile (git config) to the "
            "allowed signers file to check it",
        )
    program = _config(repo, "gpg.ssh.program") or "ssh-keygen"
    allowed_path = os.path.expanduser(allowed)
    with tempfile.TemporaryDirectory(prefix="corral-verify-sig-") as tmp:
        sig_file = Path(tmp) / "note.sig"
        sig_file.write_text(text, encoding="ascii", errors="replace")
        found = _run(
            [program, "-Y", "find-principals", "-s", str(sig_file), "-f", allowed_path], b""
        )
        principals = found.stdout.decode("utf-8", "replace").split()
        if found.returncode != 0 or not principals:
            return SignatureCheck(
                "bad", "the signature's key is not in the allowed signers file " + allowed
            )
        principal = principals[0]
        proc = _run(
            [
                *(program, "-Y", "verify", "-n", SIGNATURE_NAMESPACE),
                *("-f", allowed_path, "-I", principal, "-s", str(sig_file)),
            ],
            payload,
        )
    if proc.returncode != 0:
        return SignatureCheck(
            "bad",
            f"the signature does not match the attestation (made by {principal}; the note "
            "was changed after it was signed, or the signature is not over it)",
            principal,
        )
    return SignatureCheck("good", f"signed by {principal}", principal)


def _check_openpgp(repo: Path | dict[str, str], payload: bytes, text: str) -> SignatureCheck:
    program = _config(repo, "gpg.openpgp.program") or _config(repo, "gpg.program") or "gpg"
    with tempfile.TemporaryDirectory(prefix="corral-verify-sig-") as tmp:
        sig_file, data_file = Path(tmp) / "note.asc", Path(tmp) / "note.json"
        sig_file.write_text(text, encoding="ascii", errors="replace")
        data_file.write_bytes(payload)
        proc = _run([program, "--batch", "--verify", str(sig_file), str(data_file)], b"")
    if proc.returncode != 0:
        return SignatureCheck(
            "bad", f"the OpenPGP signature does not verify: {_last_line(proc.stderr)}"
        )
    return SignatureCheck("good", "signed (OpenPGP, a key in your keyring)")


def envelope(statement: dict[str, Any], signature: dict[str, Any] | None) -> str:
    """The note's text: readable (indented), one JSON object."""
    body = {ENVELOPE_KEY: ENVELOPE_VERSION, "statement": statement, "signature": signature}
    return json.dumps(body, indent=1, sort_keys=True, ensure_ascii=True) + "\n"


def write_note(repo: Path, commit: str, text: str, *, ref: str = NOTES_REF) -> None:
    """Attach `text` to `commit` under `ref`, replacing an earlier note of ours."""
    git(repo, "notes", "--ref", ref, "add", "-f", "-F", "-", commit, input_text=text)


def parse(text: str) -> Attestation:
    """A note's text as an attestation (AttestationError: why it is not one)."""
    if len(text.encode("utf-8", "replace")) > MAX_NOTE_BYTES:
        raise AttestationError(f"the note is over {MAX_NOTE_BYTES // 1024} KiB")
    try:
        body = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AttestationError(f"the note is not JSON ({exc.msg})") from exc
    if not isinstance(body, dict) or body.get(ENVELOPE_KEY) is None:
        raise AttestationError("the note is not a corral attestation")
    if body.get(ENVELOPE_KEY) != ENVELOPE_VERSION:
        raise AttestationError(
            f"the attestation is format {body.get(ENVELOPE_KEY)!r}, newer than this corral "
            f"reads ({ENVELOPE_VERSION}); upgrade corral"
        )
    statement = body.get("statement")
    if not isinstance(statement, dict) or statement.get("predicateType") != PREDICATE_TYPE:
        raise AttestationError(f"the attestation's statement is not a {PREDICATE_TYPE} statement")
    signature = body.get("signature")
    return Attestation(statement, signature if isinstance(signature, dict) else None)


class Notes:
    """The notes of one notes ref (or notes commit), read once: commit → blob.
    Reads the notes tree itself, so a notes commit pushed but not yet a ref
    (a pre-receive hook's) reads like a ref."""

    def __init__(self, repo: Path, ref: str = NOTES_REF, env: dict[str, str] | None = None):
        self._repo = repo
        self._env = env
        self._blobs: dict[str, str] = {}
        tree = git(
            repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{tree}}", check=False, env=env
        ).strip()
        self.present = bool(tree)
        if not tree:
            return
        listing = git(repo, "ls-tree", "-r", "-z", tree, env=env, timeout=120)
        for entry in listing.split("\0"):
            meta, _, path = entry.partition("\t")
            parts = meta.split()
            if len(parts) == 3 and parts[1] == "blob":
                self._blobs[path.replace("/", "")] = parts[2]

    def text(self, commit: str) -> str | None:
        blob = self._blobs.get(commit)
        if blob is None:
            return None
        try:
            return git(self._repo, "cat-file", "blob", blob, env=self._env)
        except GitError:
            return None
