"""What every subcommand shares: the refusal line, the version, and the exit
codes of `corral run` (here so that `--help` does not import the supervisor)."""

from __future__ import annotations

import sys

from .output import say

RUN_ENGINES = """\
engines (--engine, or --agent):
  auto                      the first installed agent CLI, else the built-in engine
  native                    the built-in model loop
  <agent>, external:<agent> claude, codex, gemini, opencode, aider, demo
  custom:<command line>     any interactive agent; the task is pasted at its prompt
                            (a command that does its work and exits 0 ends its turn)
  oneshot:<command line>    a command that does the task and exits: the prompt goes
                            where a word says {prompt} (one argument, never through a
                            shell) or {prompt_file} (a private file); with neither, on
                            stdin. Exit 0 -> verified; other -> failed, with the
                            status and its last output. Repairs re-run it.
  claude-p, codex-exec,     one-shot presets: claude -p, codex exec, gemini -p,
  gemini-p, aider-msg       aider --message (see `corral agents`)
  acp:<command line>        an agent that speaks the Agent Client Protocol on stdio
  gemini-acp, claude-acp,   ACP presets: gemini --acp, claude-code-acp, codex-acp
  codex-acp                 (status, questions and files over the protocol)
  foreman:<agent>           split the task into parallel subtasks, each run by
                            <agent> (any engine above) in its own worktree"""

RUN_EXIT_CODES = """\
exit codes:
  0  delivered, or reported (nothing to deliver)
  1  failed
  2  refused before anything started (bad input, or the state dir's owner does
     not serve clients)
  3  stopped at the contract gate (no --yes), or no check could be drafted
     (give them: --check "CMD" or --contract FILE)
  4  waiting for you: an answer to an agent's question, or a sign-in (a model
     rejected its key; as a client of an owner, which keeps retrying)
  5  waiting for approval (--deliver none)
  6  abandoned
  7  delivery refused: the session waits at approval (the reason is on stderr)
  8  the disk holding the state dir is full (stderr names it and its free space)
  9  not delivered: the work changed how it is judged (a test, test configuration
     or test script it is checked by, or added code reaching into the test
     harness); it waits at approval for a person (stderr names what changed;
     `corral approve ID --accept-judge-changes` after reading it)
  10 not delivered: a check passed only on its immediate re-run (a test failed,
     then passed: flaky); the approval gate holds that for a person, so a
     headless run never delivers it: it waits at approval (stderr names the
     tests; `corral approve ID --accept-flaky` after reading it)
  130  interrupted (ctrl+c)
  141  the reader of stdout went away (e.g. `| head`)"""

DELIVERY_REFUSED = 7  # see RUN_EXIT_CODES
DISK_FULL = 8
JUDGE_CHANGED = 9
FLAKY_HELD = 10


def fail(message: str) -> int:
    """Every refusal is one line on stderr that says what to do, and exit 2."""
    say(f"corral: {message}", file=sys.stderr)
    return 2


# what `warn_if_config_broken` found: ("config", the file as stat saw it
# before reading it, whether it read as TOML); None: not looked at
_config_checked: tuple[str, list[int] | None, bool] | None = None


def config_checked() -> tuple[str, list[int] | None, bool] | None:
    """What this process's `warn_if_config_broken` found (see above): a
    result kept with it is served again only while the file is as it was
    when it read fine (`corral sessions --json`'s lean start, main.py)."""
    return _config_checked


def warn_if_config_broken() -> None:
    """A command that reads no setting still says when the config file is
    broken (one line on stderr, then it goes on): otherwise the operator
    learns only when the console or a run refuses to start. TOML syntax
    only, with the standard library: `corral status --tmux` stays cheap."""
    import tomllib

    from corral.supervisor.paths import config_path, config_stamp

    global _config_checked
    path = config_path()
    stamp = config_stamp(path)
    try:
        tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        _config_checked = ("config", None, stamp is None)
        return
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        _config_checked = ("config", stamp, False)
        say(
            f"corral: warning: {path}: not valid TOML ({exc}); fix or remove the file"
            " (`corral doctor` checks it)",
            file=sys.stderr,
        )
    else:
        _config_checked = ("config", stamp, True)


def corral_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # slow: only when asked

    try:
        return version("corral")
    except PackageNotFoundError:
        return "0+unknown"
