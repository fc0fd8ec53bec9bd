"""Attestations and `corral verify`: a delivery writes a git note under
refs/notes/corral beside its commit; anyone re-runs its recorded exam from
the repository alone (a fresh clone, no state dir) and learns whether the
verdicts hold; a commit changed after delivery, a tampered note and a plain
commit in a range are each told apart."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from corral.supervisor.git.attestation import NOTES_REF, canonical, envelope, parse
from corral.supervisor.states import CoderState as S
from tests.conftest import SupervisorFactory, git
from tests.fakes.scripted import ScriptedDrafter, ScriptedEngine, Write, contract

REPO_ROOT = Path(__file__).resolve().parents[2]
CHECKS = (("hello", "grep -q hi hello.txt"), ("count", "test $(wc -l < hello.txt) -le 3"))


def corral(*args: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """The CLI under test, with a state dir that does not exist (verify needs none)."""
    env = dict(os.environ, CORRAL_HOME=str(home), CORRAL_CONFIG=str(home / "none.toml"))
    env["PYTHONPATH"] = str(REPO_ROOT)
    return subprocess.run(
        [sys.executable, "-m", "corral.tui.cli", *args],
        cwd=str(cwd),
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def note_of(repo: Path, commit: str) -> dict:
    return json.loads(git(repo, "notes", "--ref", NOTES_REF, "show", commit))


async def deliver(make_supervisor: SupervisorFactory, repo: Path, text: str = "hi\n") -> str:
    """A session that writes hello.txt, delivered to a branch; its commit."""
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(*CHECKS, description="hello says hi")]),
        engine=ScriptedEngine([[Write("hello.txt", text)]]),
    )
    sid = (await sup.start("say hi", repo)).session_id
    await sup.confirm(sid)
    await sup.wait_for(sid, needs=True, timeout=30)
    result = await sup.approve(sid, delivery="branch")
    assert result.state is S.MERGED and result.commit
    session = sup.get(sid).session
    assert session.attestation and result.commit[:12] in session.attestation
    return result.commit


def fresh_clone(origin: Path, where: Path) -> Path:
    git(where.parent, "clone", "-q", str(origin), str(where))
    git(where, "fetch", "-q", "origin", f"{NOTES_REF}:{NOTES_REF}")
    return where


@pytest.mark.slow
async def test_a_delivery_is_attested_and_verified_again_from_a_fresh_clone(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    commit = await deliver(make_supervisor, repo)
    note = note_of(repo, commit)
    statement = note["statement"]
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["subject"][0]["digest"] == {"gitCommit": commit}
    predicate = statement["predicate"]
    assert [c["name"] for c in predicate["contract"]["checks"]] == ["hello", "count"]
    assert [(r["name"], r["passed"]) for r in predicate["results"]] == [
        ("hello", True),
        ("count", True),
    ]
    assert predicate["verified_tree"] == git(repo, "rev-parse", f"{commit}^{{tree}}").strip()
    assert predicate["approved_by"]["role"] == "operator"
    assert note["signature"] is None  # git is not configured to sign here
    assert len(json.dumps(note)) < 8192

    clone = fresh_clone(repo, tmp_path / "clone")
    home = tmp_path / "no-state"
    out = corral("verify", commit, "--json", cwd=clone, home=home)
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    assert report["ok"] and report["attested"] == 1
    assert report["commits"][0]["state"] == "verified"
    assert not home.exists()  # no state dir was made or needed

    text = corral("verify", commit, cwd=clone, home=home)
    assert text.returncode == 0 and "verified again" in text.stdout
    log = corral("log", commit, cwd=clone, home=home)
    assert log.returncode == 0 and "2/2 checks" in log.stdout and commit[:12] in log.stdout


async def test_a_commit_amended_after_delivery_fails_and_names_the_check(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    commit = await deliver(make_supervisor, repo)
    work = fresh_clone(repo, tmp_path / "work")
    git(work, "checkout", "-q", "--detach", commit)
    (work / "hello.txt").write_text("bye\n")
    git(work, "commit", "-q", "-a", "--amend", "--no-edit")  # trailers kept, note not
    amended = git(work, "rev-parse", "HEAD").strip()
    home = tmp_path / "no-state"

    out = corral("verify", amended, cwd=work, home=home)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "changed after delivery" in out.stdout

    # with its note carried over (notes.rewriteRef does this on amend and rebase)
    git(work, "notes", "--ref", NOTES_REF, "copy", commit, amended)
    out = corral("verify", amended, cwd=work, home=home)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "hello: passed at delivery, fails now" in out.stdout
    assert "count: passed again" in out.stdout
    assert f"made for commit {commit[:12]}" in out.stdout


async def test_a_range_mixing_attested_and_plain_commits(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    start = git(repo, "rev-parse", "HEAD").strip()
    commit = await deliver(make_supervisor, repo)
    work = fresh_clone(repo, tmp_path / "work")
    git(work, "checkout", "-q", "--detach", commit)
    (work / "other.txt").write_text("plain\n")
    git(work, "add", "other.txt")
    git(work, "commit", "-q", "-m", "a plain commit on top")
    out = corral("verify", f"{start}..HEAD", "--json", cwd=work, home=tmp_path / "none")
    assert out.returncode == 0, out.stdout + out.stderr
    report = json.loads(out.stdout)
    states = [c["state"] for c in report["commits"]]
    assert states == ["verified", "not_attested"]
    assert report["commits"][1]["sentences"] == ["not delivered by corral"]


def ssh_signing(repo: Path, tmp_path: Path) -> Path:
    """A throwaway ssh key configured as git's signing key, and an allowed signers file."""
    key = tmp_path / "keys" / "id_ed25519"
    key.parent.mkdir()
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", str(key)], check=True
    )
    allowed = tmp_path / "keys" / "allowed_signers"
    pub = (key.parent / "id_ed25519.pub").read_text().strip()
    allowed.write_text(f"test@example.com {pub}\n")
    for name, value in (
        ("gpg.format", "ssh"),
        ("user.signingkey", str(key)),
        ("user.email", "test@example.com"),
        ("user.name", "Test"),
        ("gpg.ssh.allowedSignersFile", str(allowed)),
    ):
        git(repo, "config", name, value)
    return allowed


async def test_a_signed_attestation_verifies_and_a_tampered_one_fails(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    allowed = ssh_signing(repo, tmp_path)
    commit = await deliver(make_supervisor, repo)
    # the delivery commit itself is signed with the operator's key
    shown = git(
        repo, "-c", f"gpg.ssh.allowedSignersFile={allowed}", "log", "-1", "--format=%G?", commit
    )
    assert shown.strip() == "G"
    note = note_of(repo, commit)
    assert note["signature"]["format"] == "ssh"
    home = tmp_path / "none"
    out = corral("verify", commit, "--require-signed", cwd=repo, home=home)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "signed by test@example.com" in out.stdout

    # a weaker exam written into the note: the signature no longer covers it
    note["statement"]["predicate"]["contract"]["checks"][0]["command"] = "true"
    text = envelope(note["statement"], note["signature"])
    git(repo, "notes", "--ref", NOTES_REF, "add", "-f", "-m", text, commit)
    out = corral("verify", commit, cwd=repo, home=home)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "signature check failed" in out.stdout

    # the signature removed: an unsigned note fails where a signed one is required
    unsigned = envelope(note["statement"], None)
    git(repo, "notes", "--ref", NOTES_REF, "add", "-f", "-m", unsigned, commit)
    out = corral("verify", commit, "--require-signed", cwd=repo, home=home)
    assert out.returncode == 1 and "signed attestation is required" in out.stdout


def test_the_signature_covers_the_canonical_bytes_of_the_parsed_note() -> None:
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "x", "digest": {"gitCommit": "a" * 40}}],
        "predicateType": "https://corral.dev/attestation/v1",
        "predicate": {"cost": 0.1 + 0.2, "text": "é\u2028"},
    }
    again = parse(envelope(statement, None))
    assert canonical(again.statement) == canonical(statement)
    assert again.subject_commit == "a" * 40


@pytest.mark.slow
async def test_the_pre_receive_hook_refuses_a_failing_push_and_accepts_a_passing_one(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    commit = await deliver(make_supervisor, repo)
    bare = tmp_path / "server.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    hook = bare / "hooks" / "pre-receive"
    hook.write_text((REPO_ROOT / "docs" / "ci" / "pre-receive").read_text())
    hook.chmod(0o755)
    # the hook calls the corral under test
    git(bare, "config", "corral.command", f"{sys.executable} -m corral.tui.cli")
    env_path = f"PYTHONPATH={REPO_ROOT}"
    base = git(repo, "rev-parse", f"{commit}^").strip()
    pushed = subprocess.run(
        ["env", env_path, "git", "push", "-q", str(bare), f"{base}:refs/heads/main"],
        cwd=repo, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert pushed.returncode == 0, pushed.stderr

    work = fresh_clone(repo, tmp_path / "work")
    git(work, "checkout", "-q", "--detach", commit)
    (work / "hello.txt").write_text("bye\n")
    git(work, "commit", "-q", "-a", "--amend", "--no-edit")
    git(work, "notes", "--ref", NOTES_REF, "copy", commit, "HEAD")
    refused = subprocess.run(
        ["env", env_path, "git", "push", str(bare), "HEAD:refs/heads/main", NOTES_REF],
        cwd=work, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert refused.returncode != 0, refused.stderr
    assert "hello: passed at delivery, fails now" in refused.stderr
    assert git(bare, "rev-parse", "main").strip() == base

    accepted = subprocess.run(
        ["env", env_path, "git", "push", str(bare), f"{commit}:refs/heads/main", NOTES_REF],
        cwd=repo, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert accepted.returncode == 0, accepted.stderr
    assert "verified again" in accepted.stderr
    assert git(bare, "rev-parse", "main").strip() == commit

    # a server that asks for signed attestations refuses an unsigned one
    git(bare, "config", "corral.requireSigned", "true")
    git(repo, "checkout", "-q", "--detach", commit)
    git(repo, "commit", "-q", "--allow-empty", "-m", "on top")
    git(repo, "notes", "--ref", NOTES_REF, "copy", commit, "HEAD")
    unsigned = subprocess.run(
        ["env", env_path, "git", "push", str(bare), "HEAD:refs/heads/main", NOTES_REF],
        cwd=repo, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert unsigned.returncode != 0 and "signed attestation is required" in unsigned.stderr
    assert git(bare, "rev-parse", "main").strip() == commit


@pytest.mark.slow
def test_corral_run_delivers_an_attestation_that_get_and_log_show(tmp_path: Path) -> None:
    from tests.conftest import init_repo

    repo = init_repo(tmp_path / "repo")
    home = tmp_path / "home"
    out = corral(
        "run", "--repo", str(repo), "--intent", "write notes",
        "--check", "grep -q notes DEMO_NOTES.md", "--yes", "--deliver", "branch", "--json",
        "--engine", "external:demo", "--on-question", "approve",
        cwd=tmp_path, home=home,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.splitlines()[-1])
    commit = result["result_commit"]
    assert result["attestation"].startswith(f"attested on {commit[:12]}")
    got = corral("get", result["session_id"], cwd=tmp_path, home=home)
    assert f"attestation: attested on {commit[:12]}" in got.stdout, got.stdout + got.stderr
    log = corral("log", result["result_branch"], "--json", cwd=repo, home=home)
    listed = json.loads(log.stdout)
    assert [e["commit"] for e in listed["attested"]] == [commit]
    assert listed["attested"][0]["checks"][0]["passed"] is True
    again = corral("verify", result["result_branch"], cwd=repo, home=tmp_path / "elsewhere")
    assert again.returncode == 0 and "verified again" in again.stdout, again.stdout


async def test_a_checkout_delivery_is_attested_on_its_result_commit(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(*CHECKS)]),
        engine=ScriptedEngine([[Write("hello.txt", "hi\n")]]),
    )
    sid = (await sup.start("say hi", repo)).session_id
    await sup.confirm(sid)
    await sup.wait_for(sid, needs=True, timeout=30)
    result = await sup.approve(sid, delivery="checkout")
    assert result.state is S.MERGED and result.commit
    ref = f"refs/corral/results/{sid}"
    assert git(repo, "rev-parse", ref).strip() == result.commit
    note = note_of(repo, result.commit)
    assert note["statement"]["subject"][0]["name"] == ref
    assert note["statement"]["predicate"]["delivery"]["kind"] == "checkout"
    out = corral("verify", ref, cwd=repo, home=tmp_path / "none")
    assert out.returncode == 0 and "verified again" in out.stdout, out.stdout + out.stderr


def rewrite_note(repo: Path, commit: str, note: dict) -> None:
    text = envelope(note["statement"], note["signature"])
    git(repo, "notes", "--ref", NOTES_REF, "add", "-f", "-m", text, commit)


@pytest.mark.slow
async def test_judge_files_and_hidden_checks_recorded_are_compared_and_reported(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    """The judge files' blobs (gate 1, and as delivered) and hidden checks'
    digests, as the judge and hidden lanes record them in the contract."""
    commit = await deliver(make_supervisor, repo)
    note = note_of(repo, commit)
    predicate = note["statement"]["predicate"]
    delivered = git(repo, "rev-parse", f"{commit}:hello.txt").strip()
    predicate["contract"]["judge_files"] = [
        {"path": "hello.txt", "blob": None, "section": None, "why": "the exam",
         "delivered_blob": delivered},
    ]  # fmt: skip
    predicate["contract"]["hidden_checks"] = [
        {"name": "secret", "command_sha256": "0" * 64, "timeout_secs": 60, "files": []}
    ]
    predicate["results"].append({"name": "secret", "passed": True, "hidden": True})
    rewrite_note(repo, commit, note)
    home = tmp_path / "none"
    out = corral("verify", commit, cwd=repo, home=home)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "judge file hello.txt differs from the one confirmed at gate 1" in out.stdout
    assert "secret: hidden check (passed at delivery), not re-run here" in out.stdout

    # the exam changed after delivery: hello.txt is a judge file here
    work = fresh_clone(repo, tmp_path / "work")
    git(work, "checkout", "-q", "--detach", commit)
    (work / "hello.txt").write_text("hi\nhi\n")
    git(work, "commit", "-q", "-a", "--amend", "--no-edit")
    git(work, "notes", "--ref", NOTES_REF, "copy", commit, "HEAD")
    out = corral("verify", "HEAD", cwd=work, home=home)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "judge file hello.txt differs from the one delivered" in out.stdout


def test_hidden_checks_are_recorded_as_digests_only() -> None:

    from corral.supervisor.gates.attestation import contract_record
    from corral.supervisor.models import OutcomeContract

    class WithHidden(OutcomeContract):  # the hidden lane's field, as its dump writes it
        hidden_checks: list[dict[str, Any]] = []

    secret = "pytest -q tests/hidden/test_edge.py"
    made = WithHidden(
        checks=contract(*CHECKS).checks,
        hidden_checks=[
            {"name": "edge", "command": secret, "timeout_secs": 60,
             "files": [{"path": "tests/hidden/test_edge.py", "sha256": "ab" * 32}]},
        ],
    )  # fmt: skip
    record = contract_record(made)
    assert secret not in json.dumps(record)
    hidden = record["hidden_checks"][0]
    assert hidden["files"] == [{"path": "tests/hidden/test_edge.py", "sha256": "ab" * 32}]
    assert len(hidden["command_sha256"]) == 64


@pytest.mark.slow
async def test_a_per_test_verdict_is_judged_again_against_the_recorded_untouched_tree(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    """Passing apart from a test already failing on the untouched tree, with a
    named test that must pass: verified again from the record alone; the
    named test gone (the note carried to the rewritten commit) fails, saying so."""
    from corral.supervisor.provenance import Verification
    from tests.integration.test_per_test_baselines import CALC, TEST_MUL, _project, _suite

    _project(repo)
    engine = ScriptedEngine(
        [[Write("calc.py", CALC + "\ndef mul(a, b):\n    return a * b\n"),
          Write("tests/test_mul.py", TEST_MUL)]]
    )  # fmt: skip
    drafted = _suite(must_pass=["tests/test_mul.py::test_mul"])
    sup = await make_supervisor(drafter=ScriptedDrafter([drafted]), engine=engine)
    sid = (await sup.start("add mul(a, b) to calc", repo)).session_id
    await sup.confirm(sid)
    await sup.wait_for(sid, needs=True, timeout=90)
    delivered = await sup.approve(sid)
    assert delivered.commit
    predicate = note_of(repo, delivered.commit)["statement"]["predicate"]
    assert predicate["baseline"]["already_failing"]["tests"]["names"] == [
        "tests.test_calc::test_unrelated_bug"
    ]
    assert predicate["results"][0]["tests"]["passed"] == 2

    verdict = await Verification(repo).commit(delivered.commit)
    assert verdict.state == "verified", verdict.sentences + [c.sentence for c in verdict.checks]

    work = fresh_clone(repo, tmp_path / "work")
    git(work, "checkout", "-q", "--detach", delivered.commit)
    git(work, "rm", "-q", "tests/test_mul.py")
    git(work, "commit", "-q", "--amend", "--no-edit")
    git(work, "notes", "--ref", NOTES_REF, "copy", delivered.commit, "HEAD")
    again = await Verification(work).commit(git(work, "rev-parse", "HEAD").strip())
    assert again.state == "failed"
    [check] = again.checks
    assert "tests: passed at delivery, fails now" in check.sentence
    assert "test_mul" in check.sentence


async def test_verify_runs_nothing_unconfined_unless_told(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    """The recorded setup and checks are the commit author's code (a pusher's,
    in a pre-receive hook): where bubblewrap cannot confine them they are not
    run, unless the caller says running them as itself is acceptable."""
    from corral.supervisor.provenance import Verification
    from corral.supervisor.sandbox import SandboxPolicy, set_active_policy

    commit = await deliver(make_supervisor, repo)
    marker = repo.parent / "ran-as-me"
    note = note_of(repo, commit)
    note["statement"]["predicate"]["contract"]["setup"] = [f"touch {marker}"]
    rewrite_note(repo, commit, note)
    set_active_policy(SandboxPolicy(enabled=False))  # as where bwrap cannot run
    refused = await Verification(repo).commit(commit)
    assert refused.state == "failed" and refused.confined is False
    assert "its checks were not run: bubblewrap cannot confine them here" in refused.sentences[-1]
    assert not marker.exists()
    allowed = await Verification(repo, allow_unconfined=True).commit(commit)
    assert allowed.state == "verified", allowed.sentences
    assert marker.exists()


@pytest.mark.slow
def test_the_ci_script_verifies_a_pushed_range_from_a_clone(tmp_path: Path) -> None:
    """docs/ci/verify.sh as a CI job runs it: a clone of origin, the notes
    fetched by the script, `corral verify origin/main..HEAD` (the corral under test)."""
    from tests.conftest import init_repo

    origin = init_repo(tmp_path / "origin")
    home = tmp_path / "home"
    out = corral(
        "run", "--repo", str(origin), "--intent", "write notes",
        "--check", "grep -q notes DEMO_NOTES.md", "--yes", "--deliver", "branch", "--json",
        "--engine", "external:demo", "--on-question", "approve",
        cwd=tmp_path, home=home,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    branch = json.loads(out.stdout.splitlines()[-1])["result_branch"]
    ci = tmp_path / "ci"
    git(tmp_path, "clone", "-q", str(origin), str(ci))
    git(ci, "checkout", "-q", "--detach", f"origin/{branch}")
    (ci / "later.txt").write_text("a plain commit\n")
    git(ci, "add", "later.txt")
    git(ci, "commit", "-q", "-m", "plain")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), CORRAL_HOME=str(tmp_path / "none"))
    env["CORRAL"] = f"{sys.executable} -m corral.tui.cli"  # instead of pip install corral
    script = REPO_ROOT / "docs" / "ci" / "verify.sh"
    run = subprocess.run(["sh", str(script)], cwd=ci, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "1 of 1 attested commit(s) verified again; 1 not delivered by corral" in run.stdout
    # the same job fails once the delivered work is broken on top
    (ci / "DEMO_NOTES.md").write_text("gone\n")
    git(ci, "commit", "-q", "-a", "--amend", "--no-edit")
    git(ci, "reset", "-q", "--soft", "HEAD~1")
    git(ci, "commit", "-q", "-C", f"origin/{branch}")  # the delivery's message, trailers too
    run = subprocess.run(["sh", str(script)], cwd=ci, env=env, capture_output=True, text=True)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "changed after delivery" in run.stdout
    workflow = (REPO_ROOT / "docs" / "ci" / "github-actions.yml").read_text()
    assert "sh docs/ci/verify.sh" in workflow and "fetch-depth: 0" in workflow


@pytest.mark.slow
async def test_an_openpgp_signing_setup_signs_the_commit_and_the_attestation(
    make_supervisor: SupervisorFactory,
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gnupg = tmp_path / "gnupg"
    gnupg.mkdir(mode=0o700)
    monkeypatch.setenv("GNUPGHOME", str(gnupg))
    try:
        subprocess.run(
            ["gpg", "--batch", "--passphrase", "", "--quick-gen-key",
             "Test <test@example.com>", "ed25519", "sign", "never"],
            check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        for name, value in (
            ("commit.gpgsign", "true"),
            ("user.signingkey", "test@example.com"),
            ("user.email", "test@example.com"),
        ):
            git(repo, "config", name, value)
        commit = await deliver(make_supervisor, repo)
        assert git(repo, "log", "-1", "--format=%G?", commit).strip() == "G"
        note = note_of(repo, commit)
        assert note["signature"]["format"] == "openpgp"
        home = tmp_path / "none"
        out = corral("verify", commit, "--require-signed", cwd=repo, home=home)
        assert out.returncode == 0, out.stdout + out.stderr
        note["statement"]["predicate"]["results"][0]["passed"] = False
        rewrite_note(repo, commit, note)
        out = corral("verify", commit, cwd=repo, home=home)
        assert out.returncode == 1 and "signature check failed" in out.stdout, out.stdout
    finally:
        subprocess.run(["gpgconf", "--kill", "gpg-agent"], capture_output=True, check=False)


async def test_a_broken_signing_setup_delivers_nothing_and_says_what_to_fix(
    make_supervisor: SupervisorFactory, repo: Path
) -> None:
    from corral.supervisor.errors import CorralError

    git(repo, "config", "gpg.format", "ssh")
    git(repo, "config", "user.signingkey", str(repo.parent / "no-such-key"))
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(*CHECKS)]),
        engine=ScriptedEngine([[Write("hello.txt", "hi\n")]]),
    )
    sid = (await sup.start("say hi", repo)).session_id
    await sup.confirm(sid)
    await sup.wait_for(sid, needs=True, timeout=30)
    with pytest.raises(CorralError, match="signing the delivery commit failed") as refused:
        await sup.approve(sid, delivery="branch")
    assert "git config corral.sign false" in str(refused.value)
    assert sup.get(sid).session.state is S.NEEDS_APPROVAL
    assert git(repo, "branch", "--list", "corral/*").strip() == ""
    git(repo, "config", "corral.sign", "false")
    result = await sup.approve(sid, delivery="branch")
    assert result.commit and note_of(repo, result.commit)["signature"] is None


@pytest.mark.slow
def test_verify_refuses_what_is_not_a_commit_or_a_range_in_one_sentence(
    repo: Path, tmp_path: Path
) -> None:
    home = tmp_path / "none"
    for spec, said in (
        ("nosuch", "nosuch is not a commit of this repository"),
        ("nosuch..HEAD", "nosuch in nosuch..HEAD is not a commit of this repository"),
        ("HEAD..nosuch", "nosuch in HEAD..nosuch is not a commit of this repository"),
        ("--upload-pack=x", "is not a revision"),
    ):
        out = corral("verify", "--", spec, cwd=repo, home=home)
        assert out.returncode == 2, (spec, out.stdout, out.stderr)
        assert said in out.stderr and "Traceback" not in out.stderr
    out = corral("verify", "HEAD", cwd=repo, home=home)  # a plain commit, no notes at all
    assert out.returncode == 0 and "not delivered by corral" in out.stdout
    assert "no refs/notes/corral" in out.stderr


def test_judge_files_are_recorded_with_their_blob_in_the_delivered_tree(repo: Path) -> None:
    """The judge lane's `judge_files` (path, gate-1 blob, section, why), read
    from the contract's own dump, gain the blob the delivered tree holds."""

    from corral.supervisor.gates.attestation import statement_for
    from corral.supervisor.models import CoderSession, OutcomeContract

    class WithJudge(OutcomeContract):
        judge_files: list[dict[str, Any]] = []

    start = git(repo, "rev-parse", "HEAD").strip()
    (repo / "test_hello.py").write_text("def test_hi():\n    assert True\n")
    git(repo, "add", "test_hello.py")
    git(repo, "commit", "-q", "-m", "the work")
    commit = git(repo, "rev-parse", "HEAD").strip()
    tree = git(repo, "rev-parse", "HEAD^{tree}").strip()
    judged = WithJudge(
        checks=contract(*CHECKS).checks,
        judge_files=[{"path": "test_hello.py", "blob": None, "section": None, "why": "tests"}],
    )
    session = CoderSession(id="s" * 32, repo=str(repo), intent="x", start_commit=start)
    session.contract = judged
    statement = statement_for(
        session, commit=commit, tree=tree, results=[], delivery="branch", branch="corral/x",
        approved_by={"role": "operator"},
    )  # fmt: skip
    [recorded] = statement["predicate"]["contract"]["judge_files"]
    assert recorded["blob"] is None
    assert recorded["delivered_blob"] == git(repo, "rev-parse", "HEAD:test_hello.py").strip()


async def test_the_setup_and_checks_see_the_commits_history_and_tags_in_the_sandbox(
    repo: Path,
) -> None:
    """A fresh verify checkout borrows the repository's objects: git inside
    the sandbox (setuptools-scm, `git describe`) sees the history and tags."""
    from corral.supervisor.git.attestation import PREDICATE_TYPE, write_note
    from corral.supervisor.provenance import Verification

    (repo / "f.txt").write_text("x\n")
    git(repo, "add", "f.txt")
    git(repo, "commit", "-q", "-m", "one")
    git(repo, "tag", "v1.0")
    commit = git(repo, "rev-parse", "HEAD").strip()
    checks = [
        {"name": "described", "command": 'grep -qx v1.0 "$CORRAL_ENV/version"'},
        {"name": "clean", "command": 'test -z "$(git status --porcelain)" && git log -1 --oneline'},
    ]
    statement = {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "x", "digest": {"gitCommit": commit}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "contract": {
                "setup": ['git describe --tags > "$CORRAL_ENV/version"'],
                "checks": checks,
            },
            "results": [{"name": "described", "passed": True}, {"name": "clean", "passed": True}],
        },
    }
    write_note(repo, commit, envelope(statement, None))
    verdict = await Verification(repo).commit(commit)
    assert verdict.confined is True
    assert verdict.state == "verified", verdict.sentences + [c.sentence for c in verdict.checks]


@pytest.mark.slow
async def test_corral_push_to_a_remote_whose_pre_receive_verifies_is_accepted(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`corral push` sends the attestations before the branch, so a remote
    running docs/ci/pre-receive finds the note and verifies the delivery."""
    bare = tmp_path / "server.git"
    git(tmp_path, "init", "-q", "--bare", str(bare))
    hook = bare / "hooks" / "pre-receive"
    hook.write_text((REPO_ROOT / "docs" / "ci" / "pre-receive").read_text())
    hook.chmod(0o755)
    git(bare, "config", "corral.command", f"{sys.executable} -m corral.tui.cli")
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    git(repo, "remote", "add", "origin", str(bare))
    sup = await make_supervisor(
        drafter=ScriptedDrafter([contract(*CHECKS)]),
        engine=ScriptedEngine([[Write("hello.txt", "hi\n")]]),
    )
    sid = (await sup.start("say hi", repo)).session_id
    await sup.confirm(sid)
    await sup.wait_for(sid, needs=True, timeout=30)
    delivered = await sup.approve(sid, delivery="branch")
    pushed = await sup.push(sid)
    assert pushed.attestations == "attestations pushed (refs/notes/corral)"
    assert git(bare, "rev-parse", f"refs/heads/{delivered.branch}").strip() == delivered.commit


HIDDEN_SCRIPT = 'test "$(cat hello.txt)" = "hi"\n'  # exactly "hi": the visible checks allow more


async def deliver_with_a_hidden_check(
    make_supervisor: SupervisorFactory, repo: Path, *, publish: bool
) -> str:
    """hello.txt says hi, judged by the visible checks and by a hidden check
    the operator holds back; delivered with `corral.publishHiddenChecks` as told."""
    from corral.supervisor.models import HiddenCheck, HiddenFile

    visible = contract(*CHECKS, description="hello says hi")
    hidden = HiddenCheck(
        name="exactly_hi",
        command="sh .corral-hidden/exactly_hi.sh",
        files=[HiddenFile(path=".corral-hidden/exactly_hi.sh", content=HIDDEN_SCRIPT)],
    )
    sup = await make_supervisor(
        drafter=ScriptedDrafter([visible.model_copy(update={"hidden_checks": [hidden]})]),
        engine=ScriptedEngine([[Write("hello.txt", "hi\n")]]),
    )
    if publish:
        git(repo, "config", "corral.publishHiddenChecks", "true")
    sid = (await sup.start("say hi", repo)).session_id
    await sup.confirm(sid)
    await sup.wait_for(sid, needs=True, timeout=60)
    result = await sup.approve(sid, delivery="branch")
    assert result.state is S.MERGED and result.commit
    attestation = sup.get(sid).session.attestation or ""
    assert ("hidden checks published" in attestation) is publish, attestation
    return result.commit


def cheat_on_top(repo: Path, commit: str, where: Path) -> Path:
    """A clone whose HEAD is `commit` amended to pass only the visible checks,
    with the delivery's note carried over (as notes.rewriteRef does)."""
    work = fresh_clone(repo, where)
    git(work, "checkout", "-q", "--detach", commit)
    (work / "hello.txt").write_text("hi, and more\n")
    git(work, "commit", "-q", "-a", "--amend", "--no-edit")
    git(work, "notes", "--ref", NOTES_REF, "copy", commit, "HEAD")
    return work


@pytest.mark.slow
async def test_published_hidden_checks_are_re_run_by_verify_and_catch_what_the_visible_pass(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    """With the operator's `corral.publishHiddenChecks`, the note carries the
    hidden check's command and file: a fresh clone re-runs it (verified again,
    hidden included), and a commit changed to pass only the visible checks
    fails on it, named. Not published, the same change verifies (the hidden
    check cannot be re-run), which is why publishing is the operator's choice."""
    commit = await deliver_with_a_hidden_check(make_supervisor, repo, publish=True)
    [held] = note_of(repo, commit)["statement"]["predicate"]["contract"]["hidden_checks"]
    assert held["command"] == "sh .corral-hidden/exactly_hi.sh"
    assert held["files"][0]["content"] == HIDDEN_SCRIPT
    home = tmp_path / "none"

    clone = fresh_clone(repo, tmp_path / "clone")
    out = corral("verify", commit, "--json", cwd=clone, home=home)
    assert out.returncode == 0, out.stdout + out.stderr
    [verdict] = json.loads(out.stdout)["commits"]
    assert {c["name"]: (c["recorded"], c["now"]) for c in verdict["checks"]} == {
        "hello": (True, True),
        "count": (True, True),
        "exactly_hi": (True, True),
    }
    assert "hidden" not in git(clone, "ls-tree", "-r", "--name-only", commit)  # nothing left

    work = cheat_on_top(repo, commit, tmp_path / "work")
    out = corral("verify", "HEAD", cwd=work, home=home)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "exactly_hi (hidden): passed at delivery, fails now" in out.stdout
    assert "hello: passed again" in out.stdout


@pytest.mark.slow
async def test_unpublished_hidden_checks_stay_digests_and_verify_says_it_cannot_re_run_them(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    commit = await deliver_with_a_hidden_check(make_supervisor, repo, publish=False)
    note = json.dumps(note_of(repo, commit))
    assert "exactly_hi.sh" in note and HIDDEN_SCRIPT.strip() not in note
    assert "sh .corral-hidden" not in note
    work = cheat_on_top(repo, commit, tmp_path / "work")
    out = corral("verify", "HEAD", cwd=work, home=tmp_path / "none")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "exactly_hi: hidden check (passed at delivery), not re-run here" in out.stdout
    assert "corral.publishHiddenChecks" in out.stdout


@pytest.mark.slow
async def test_a_published_hidden_check_changed_in_the_note_is_refused_and_never_run(
    make_supervisor: SupervisorFactory, repo: Path, tmp_path: Path
) -> None:
    """The note is the commit author's data: a published command or file that
    is not what its digest says, or a file placed outside the checkout, fails
    verification before anything runs."""
    commit = await deliver_with_a_hidden_check(make_supervisor, repo, publish=True)
    original = note_of(repo, commit)
    marker = tmp_path / "ran"
    home = tmp_path / "none"

    def tampered(change: Any) -> subprocess.CompletedProcess[str]:
        note = json.loads(json.dumps(original))
        change(note["statement"]["predicate"]["contract"]["hidden_checks"][0])
        rewrite_note(repo, commit, note)
        return corral("verify", commit, cwd=repo, home=home)

    def other_command(held: dict) -> None:
        held["command"] = f"touch {marker}"

    def other_file(held: dict) -> None:
        held["files"][0]["content"] = "true\n"

    def escaping_path(held: dict) -> None:
        import hashlib

        held["files"][0] = {
            "path": "../escaped.sh",
            "content": "true\n",
            "sha256": hashlib.sha256(b"true\n").hexdigest(),
        }

    for change, said in (
        (other_command, "is not the command its digest records"),
        (other_file, "is not what its digest records"),
        (escaping_path, "puts a file at '../escaped.sh'"),
    ):
        out = tampered(change)
        assert out.returncode == 1, out.stdout + out.stderr
        assert said in out.stdout, out.stdout
    assert not marker.exists()
    assert not (repo.parent / "escaped.sh").exists()
