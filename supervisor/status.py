"""Agent status: `running | waiting | idle | exited | error | unknown`, with a
reason and, when waiting, the question and its options.

Structured signals win: agent hooks (Claude Code settings hooks, Codex
`notify`, the demo agent) give exact edges. Pane heuristics fill the gaps,
per profile: only the last ~30 lines, ANSI stripped, busy markers before
waiting markers, an idle debounce, and a minimum hold before a question counts.
Ambiguity reports `unknown`: never a false "waiting", never a keypress.

An agent that says it is not signed in (its own words near the bottom of
its screen, or a hook that reports an authentication failure) reads `auth`:
it cannot work until the operator acts, so its idle prompt is not the end of
a turn and no repair prompt is sent to it.

Agents without hooks get one more, slower rule (the quiet rule): a screen
unchanged for `quiet_secs` whose last line is a prompt the cursor waits on
reads idle. Screens are read off the event loop (`read_screen`) into
`ScreenFacts` that carry their capture time; the tracker only folds them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*(?:\x07|\x1b\\)|\x1b[()][A-Za-z0-9]")
BOX = re.compile(r"^[\s│┃|─━╭╮╰╯┌┐└┘├┤┬┴┼═║╔╗╚╝\-_=+]*$")
LEAD = re.compile(r"^[\s│┃║△⚠•·*]+")  # frame and glyphs before a menu's text
# the cursor before the selected option: ❯ (Claude Code), › (Codex), ● (Gemini CLI)
OPTION = re.compile(r"^\s*(?:[❯›>»●]\s*)?(\d{1,2})[.)]\s+(.+?)\s*$")


#: What time it is, in seconds (monotonic): the status pipeline reads it through
#: this, so tests drive time instead of sleeping.
Clock = Callable[[], float]


class AgentStatus(StrEnum):
    RUNNING = "running"
    WAITING = "waiting"
    IDLE = "idle"
    EXITED = "exited"
    ERROR = "error"
    AUTH = "auth"  # the agent says it is not signed in
    UNKNOWN = "unknown"
    UNREACHABLE = "unreachable"  # its host does not answer: not an exit, nothing asked


@dataclass(frozen=True)
class Question:
    prompt: str
    options: tuple[str, ...] = ()


@dataclass(frozen=True)
class StatusReading:
    status: AgentStatus
    reason: str
    question: Question | None = None
    source: str = "pane"  # "hook" | "pane" | "process"
    # the agent's own sentence saying its model provider refused a request
    # for a rate limit or a used-up quota (a typed `blocked` event, by provider)
    limit: str | None = None


@dataclass(frozen=True)
class InlineMenu:
    """A question whose options sit side by side on one row, the selection
    shown only by colour (OpenCode: `Allow once   Allow always   Reject`
    under `△ Permission required`). Such a menu takes no digits: it is
    answered with arrows from the selected option (read from the colours,
    else the first, where it opens), then Enter."""

    title: re.Pattern[str]  # the line that opens the question
    row: re.Pattern[str]  # group "options": the options, two or more spaces apart

    def find(self, lines: list[str], reach: int = 16) -> Question | None:
        """The question: its title and first detail line, and the options."""
        for i in range(len(lines) - 1, -1, -1):
            match = self.row.search(lines[i])
            if match:
                break
        else:
            return None
        options = tuple(re.split(r"\s{2,}", match.group("options").strip()))
        for j in range(i - 1, max(-1, i - reach), -1):
            if self.title.search(lines[j]):
                body = [LEAD.sub("", ln) for ln in lines[j + 1 : i]]
                body = [ln.rstrip() for ln in body if ln.strip()]
                # a heading (`# Shell command`) says less than the line under it
                detail = " ".join(body[:2] if body and body[0].startswith("#") else body[:1])
                head = LEAD.sub("", lines[j]).strip()
                detail = detail.lstrip("#→← ").strip()
                return Question(f"{head}: {detail}" if detail else head, options)
        return None

    def selected(self, ansi_lines: list[str]) -> int | None:
        """The selected option (1-based), read from the colours of the
        options row (`capture-pane -e`): the one option whose background
        differs from the row's, else the one option drawn in a style the
        others do not share. None when the row is absent or that is unclear."""
        for raw in reversed(ansi_lines):
            cells = styled_cells(raw)
            plain = "".join(ch for ch, _ in cells)
            match = self.row.search(plain)
            if match:
                break
        else:
            return None
        starts, pos = [], match.start("options")
        for option in re.split(r"\s{2,}", match.group("options").strip()):
            pos = plain.find(option, pos)
            starts.append(pos)
            pos += len(option)
        styles = [cells[i][1] for i in starts]
        end = match.end("options")
        gaps = [cells[i][1][1] for i in range(match.start("options"), end) if plain[i] == " "]
        if gaps:
            base = max(set(gaps), key=gaps.count)
            marked = [n for n, style in enumerate(styles, 1) if style[1] != base]
            if len(marked) == 1:
                return marked[0]
        unique = [n for n, style in enumerate(styles, 1) if styles.count(style) == 1]
        return unique[0] if len(unique) == 1 and len(styles) > 2 else None

    @staticmethod
    def keys(index: int, selected: int = 1) -> list[str]:
        """The keys that move from option `selected` (where a fresh menu
        opens: the first) to option `index` (1-based) and confirm it."""
        step = "Right" if index >= selected else "Left"
        return [step] * abs(index - selected) + ["Enter"]


SGR = re.compile(r"\x1b\[([0-9;:]*)m")
Style = tuple[str | None, str | None, frozenset[str]]  # foreground, background, attributes


def styled_cells(raw: str) -> list[tuple[str, Style]]:
    """Each visible character of one ANSI line with the SGR style it is
    drawn in (other escape sequences dropped)."""
    fg: str | None = None
    bg: str | None = None
    attrs: set[str] = set()
    cells: list[tuple[str, Style]] = []
    i = 0
    while i < len(raw):
        match = ANSI.match(raw, i)
        if match is None:
            cells.append((raw[i], (fg, bg, frozenset(attrs))))
            i += 1
            continue
        i = match.end()
        sgr = SGR.fullmatch(match.group(0))
        if sgr is None:
            continue
        params = re.split("[;:]", sgr.group(1))
        j = 0
        while j < len(params):
            code = params[j] or "0"
            if code in ("38", "48") and j + 1 < len(params):
                width = 3 if params[j + 1] == "5" else 5
                color = ";".join(params[j + 1 : j + width])
                fg, bg = (color, bg) if code == "38" else (fg, color)
                j += width
                continue
            if code == "0":
                fg, bg, attrs = None, None, set()
            elif code == "39":
                fg = None
            elif code == "49":
                bg = None
            elif code.isdigit() and (30 <= int(code) <= 37 or 90 <= int(code) <= 97):
                fg = code
            elif code.isdigit() and (40 <= int(code) <= 47 or 100 <= int(code) <= 107):
                bg = code
            else:
                attrs.add(code)
            j += 1
    return cells


@dataclass(frozen=True)
class Markers:
    """Per-profile screen patterns (compiled, case-insensitive)."""

    busy: tuple[re.Pattern[str], ...] = ()
    waiting: tuple[re.Pattern[str], ...] = ()
    idle: tuple[re.Pattern[str], ...] = ()
    auth: tuple[re.Pattern[str], ...] = ()  # the agent's own "not signed in" sentences
    menu: InlineMenu | None = None  # questions drawn as one row of options
    # the agent's own "rate limited" / "quota used up" error sentences: an
    # error line's shape, never the bare words (an agent may be writing a rate
    # limiter, and its output says so)
    limit: tuple[re.Pattern[str], ...] = ()


def compile_all(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.IGNORECASE) for p in patterns)


GENERIC = Markers(
    busy=compile_all(
        r"esc to interrupt",
        r"ctrl\+c to interrupt",
        r"esc to cancel\b.*working",
        r"^[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏✱✲✳✴✵✶✷✸✹✺✻✼✽✾✿·•⏺*]\s+\w+(ing|ed)?…",
    ),
    waiting=compile_all(
        r"^\s*(do you want|would you like)\b.*\?\s*$",
        r"^\s*[❯›>]\s*1[.)]\s+yes\b",
        r"\(y/n\)|\[y/n\]|\(yes/no\)",
        r"allow once|yes, allow",
        r"press enter to (select|confirm)",
    ),
    idle=compile_all(r"^\s*[>❯›]\s*$"),
    auth=compile_all(r"\bnot logged in\b", r"please run /login", r"\binvalid api key\b"),
    limit=compile_all(
        r"\b429 too many requests\b",
        r"\bratelimiterror\b",
        r"\bapi error\b.*(\b429\b|rate.?limit|quota|resource_exhausted)",
        r"\binsufficient_quota\b",
    ),
)

# Only the bottom of the screen (its last non-blank lines) speaks for the agent's present: a sign-in
# error further up may already be fixed (and an agent's own work may print
# "401 Unauthorized" in a diff).
AUTH_WINDOW = 8


def clean_lines(lines: list[str], n: int = 30) -> list[str]:
    """The last `n` meaningful lines: ANSI stripped, NBSP normalised,
    box-drawing rules and trailing blanks dropped, a run of blank lines kept
    as one (an agent that pins its input box to the bottom leaves the screen's
    middle empty; what it said last is just above that gap). Works from the
    bottom up and stops at `n`: a sweep reads up to a hundred screens."""
    out: list[str] = []
    for raw in reversed(lines):
        line = ANSI.sub("", raw) if "\x1b" in raw else raw
        if "\xa0" in line:
            line = line.replace("\xa0", " ")
        line = line.rstrip()
        # a dialog box's side borders, also when the box is indented (Gemini CLI)
        if line.lstrip()[:1] in ("│", "┃", "║"):
            line = line.strip("│┃║ ").rstrip()
        if not line.strip():
            if out and out[-1]:
                out.append("")
            continue
        if BOX.match(line):
            continue
        out.append(line)
        if len(out) >= n:
            break
    out.reverse()
    return out


def find_question(lines: list[str]) -> Question | None:
    """A question with numbered options near the bottom of the screen:
    the line ending in '?' above a run of `1. … 2. …` options."""
    options: list[tuple[int, str]] = []
    end = None
    for i in range(len(lines) - 1, -1, -1):
        m = OPTION.match(lines[i])
        if m:
            options.append((int(m.group(1)), m.group(2).strip()))
            end = i
        elif options:
            break
    if not options or end is None:
        return None
    options.reverse()
    numbers = [n for n, _ in options]
    if numbers != list(range(1, len(numbers) + 1)) or len(numbers) < 2:
        return None
    prompt = ""
    for j in range(end - 1, max(-1, end - 6), -1):
        text = lines[j].strip()
        if text:
            prompt = text
            if text.endswith("?") or text.endswith(":"):
                break
    if not prompt:
        return None
    return Question(prompt=prompt, options=tuple(text for _, text in options))


MENU_CURSOR = ("❯", "›")
MENU_FOOTER = re.compile(
    r"\b(enter|⏎) to (confirm|select)\b|↑/↓ to (select|navigate)", re.IGNORECASE
)


def _menu_item(line: str) -> tuple[int, bool, str]:
    """(column where the item's text starts, cursor on it, its text)."""
    body = line.lstrip()
    indent = len(line) - len(body)
    marked = body[:1] in MENU_CURSOR
    if marked:
        rest = body[1:]
        body = rest.lstrip()
        indent += 1 + len(rest) - len(body)
    return indent, marked, body.rstrip()


def find_menu(lines: list[str]) -> Question | None:
    """An unnumbered menu: a question line, then option lines aligned with
    the one that carries the cursor (❯/›), then an "Enter to confirm" footer.
    Claude Code draws its API-key dialog this way; reading it as a free-text
    question once sent typed words (and Enter on the default option) into a
    menu."""
    footer = next((i for i in range(len(lines) - 1, -1, -1) if MENU_FOOTER.search(lines[i])), None)
    if footer is None:
        return None
    window = range(max(0, footer - 12), footer)
    cursor = next((i for i in reversed(window) if _menu_item(lines[i])[1]), None)
    if cursor is None:
        return None
    column = _menu_item(lines[cursor])[0]
    first = last = cursor
    while first - 1 >= window.start and lines[first - 1].strip():
        if _menu_item(lines[first - 1])[0] != column:
            break
        first -= 1
    while last + 1 < footer and lines[last + 1].strip():
        if _menu_item(lines[last + 1])[0] != column:
            break
        last += 1
    options = [
        re.sub(r"^\d{1,2}[.)]\s+", "", _menu_item(lines[i])[2]) for i in range(first, last + 1)
    ]
    above = [lines[i].strip() for i in range(max(0, first - 3), first) if lines[i].strip()]
    prompt = above[-1] if above else ""
    if len(options) < 2 or not prompt.endswith(("?", ":")):
        return None
    return Question(prompt=prompt, options=tuple(options))


def rate_limited(tail: list[str], markers: Markers) -> str | None:
    """The agent's own sentence saying its provider refused a request for a
    rate limit or quota, if one is among the bottom lines of its screen."""
    meaningful = [line for line in tail if line.strip()]
    for line in reversed(meaningful[-AUTH_WINDOW:]):
        if any(p.search(line) for p in markers.limit + GENERIC.limit):
            return line.strip().lstrip("⎿●✻*·■✕ ").strip()[:160]
    return None


# what a message, error code or error text from an agent's protocol (ACP) or
# a model server says when it is a rate limit or a quota used up
LIMIT_WORDS = re.compile(
    r"rate.?limit|\b429\b|too many requests|quota|resource_exhausted|usage limit",
    re.IGNORECASE,
)


def limit_refusal(code: object, text: str) -> bool:
    """Whether an error an agent's protocol answered with (its `code`, its
    message and data as `text`) is a rate limit or a used-up quota."""
    return code == 429 or bool(LIMIT_WORDS.search(text))


def signed_out(tail: list[str], markers: Markers) -> str | None:
    """The agent's own sentence saying it is not signed in, if one is among
    the bottom lines of its screen."""
    meaningful = [line for line in tail if line.strip()]
    for line in reversed(meaningful[-AUTH_WINDOW:]):
        if any(p.search(line) for p in markers.auth + GENERIC.auth):
            return line.strip().lstrip("⎿●✻*· ").strip()[:160]
    return None


# A prompt's last character: shells ($ # %), REPLs and agent inputs (> ❯ › »),
# and "Enter the task:" style questions (: ?).
PROMPT_END = re.compile(r"[>$#%❯›»:?]$")
PROMPT_MAX = 60  # a longer last line is output, not a prompt


def looks_like_prompt(line: str, cursor_after: bool | None = None) -> bool:
    """The quiet rule's prompt test: a short last line ending in a prompt
    character. `cursor_after`, when the screen's cursor is known, must be
    true: a prompt leaves the cursor right after it, while a log line ending
    in ':' or '>' is followed by a newline and the cursor sits below it."""
    text = line.strip()
    if not text or len(text) > PROMPT_MAX or not PROMPT_END.search(text):
        return False
    return cursor_after is not False


def classify(lines: list[str], markers: Markers = GENERIC) -> StatusReading:
    """One screen, no memory: busy before waiting before idle; else unknown."""
    tail = clean_lines(lines)
    if not tail:
        return StatusReading(AgentStatus.UNKNOWN, "blank screen")
    sentence = signed_out(tail, markers)
    if sentence is not None:
        return StatusReading(AgentStatus.AUTH, sentence)
    for pattern in markers.busy + GENERIC.busy:
        for line in tail:
            if pattern.search(line):
                return StatusReading(AgentStatus.RUNNING, f"busy marker: {line.strip()[:80]}")
    limit = rate_limited(tail, markers)
    reading = _classify_rest(tail, markers)
    return reading if limit is None else replace(reading, limit=limit)


def _classify_rest(tail: list[str], markers: Markers) -> StatusReading:
    """`classify` once neither a sign-in nor a busy marker is on screen."""
    question = find_question(tail) or find_menu(tail)
    if question is None and markers.menu is not None:
        question = markers.menu.find(tail)
    waiting = any(p.search(line) for p in markers.waiting + GENERIC.waiting for line in tail)
    if question is not None and waiting:
        return StatusReading(AgentStatus.WAITING, "a question is on screen", question)
    if waiting:
        # a waiting marker without parseable options: say so, but offer no answers
        prompt = next((ln.strip() for ln in reversed(tail) if ln.strip().endswith("?")), "")
        return StatusReading(
            AgentStatus.WAITING, "a prompt is on screen", Question(prompt or tail[-1].strip())
        )
    last = tail[-1]
    if any(p.search(last) for p in markers.idle + GENERIC.idle):
        return StatusReading(AgentStatus.IDLE, "at its prompt")
    return StatusReading(AgentStatus.UNKNOWN, "no marker on screen")


# --- hooks ---------------------------------------------------------------------

PERMISSION_WORDS = re.compile(r"permission|approve|allow", re.IGNORECASE)
AUTH_FAILURES = frozenset({"authentication_failed", "oauth_token_expired", "invalid_api_key"})
LIMIT_FAILURES = frozenset({"rate_limit", "rate_limited", "quota_exceeded", "usage_limit"})


def hook_name(event: dict[str, object]) -> str:
    """The event a hook record reports, whichever key its agent uses."""
    return str(event.get("hook_event_name") or event.get("event") or event.get("type") or "")


def from_hook(event: dict[str, object]) -> StatusReading | None:
    """Map one hook record (Claude Code settings hooks, the demo agent, Codex
    notify) to a status edge. Unknown events change nothing."""
    name = hook_name(event)
    if name in ("UserPromptSubmit", "PreToolUse", "PostToolUse", "SubagentStart"):
        return StatusReading(AgentStatus.RUNNING, f"hook {name}", source="hook")
    if name == "PermissionRequest":
        tool = event.get("tool_name") or "a tool"
        return StatusReading(AgentStatus.WAITING, f"asks permission for {tool}", source="hook")
    if name == "Notification":
        message = str(event.get("message") or "")
        kind = str(event.get("notification_type") or "")
        if PERMISSION_WORDS.search(message) or kind in ("permission_prompt", "elicitation_dialog"):
            return StatusReading(AgentStatus.WAITING, message or "needs permission", source="hook")
        if "waiting for your input" in message.lower() or kind == "idle_prompt":
            return StatusReading(AgentStatus.IDLE, message, source="hook")
        return None
    if name == "agent-turn-complete":
        messages = event.get("input-messages")
        asked = " ".join(str(m) for m in messages) if isinstance(messages, list) else ""
        if "concise, single-line task title" in asked:
            return None  # Codex's side request that names the thread, not a turn
        return StatusReading(AgentStatus.IDLE, "turn ended", source="hook")
    if name == "StopFailure" and str(event.get("error") or "") in LIMIT_FAILURES:
        said = str(event.get("last_assistant_message") or "").strip()
        return StatusReading(
            AgentStatus.IDLE,
            "turn ended",
            source="hook",
            limit=said[:160] or "its model provider refused the request: rate limited",
        )
    if name == "StopFailure" and str(event.get("error") or "") in AUTH_FAILURES:
        said = str(event.get("last_assistant_message") or "").strip()
        return StatusReading(
            AgentStatus.AUTH, said or "the agent's credentials were rejected", source="hook"
        )
    if name in ("Stop", "StopFailure"):
        return StatusReading(AgentStatus.IDLE, "turn ended", source="hook")
    if name == "SessionStart":
        return StatusReading(AgentStatus.IDLE, "session started", source="hook")
    if name == "SessionEnd":
        return StatusReading(
            AgentStatus.EXITED, f"session ended ({event.get('reason', '')})", source="hook"
        )
    return None


# --- reading a screen (off the event loop) ------------------------------------------


@dataclass(frozen=True)
class ScreenFacts:
    """One observation of a screen: what it shows and when it was captured.

    Computed in the sweep's worker thread; the tracker folds it on the loop.
    `at` is the monotonic time just before the capture, so a screen captured
    before a prompt landed can be told apart from one captured after."""

    tail: tuple[str, ...]
    reading: StatusReading
    prompt_like: bool
    at: float


def read_screen(
    lines: list[str],
    markers: Markers,
    at: float,
    *,
    cursor_after: bool | None = None,
    previous: ScreenFacts | None = None,
) -> ScreenFacts:
    """Classify a screen, incrementally: when its cleaned tail equals the
    previous observation's, the previous reading is reused (no regex runs)."""
    tail = tuple(clean_lines(lines))
    prompt_like = bool(tail) and looks_like_prompt(tail[-1], cursor_after)
    if previous is not None and previous.tail == tail:
        return ScreenFacts(previous.tail, previous.reading, prompt_like, at)
    return ScreenFacts(tail, classify(list(tail), markers), prompt_like, at)


# --- the tracker ------------------------------------------------------------------


@dataclass
class StatusTracker:
    """Folds hooks, screens and process facts into one debounced status.

    - a hook edge applies at once (it is exact);
    - a busy marker applies at once: agents show it only while they work,
      and a missed busy frame is how a working agent got judged idle; after
      a hook's edge it must hold (the screen may lag the hook by a frame),
      and no screen captured before a hook's edge overrides it;
    - a question must hold for `hold` seconds before it counts;
    - `idle` needs the screen unchanged for `idle_debounce` seconds between
      captures (a spinner between frames is not idle); with `quiet_secs` set
      (agents without hooks), a screen unchanged that long whose last line is
      a prompt the cursor waits on is idle too;
    - `on_prompt` (corral pasted a prompt and pressed Enter) starts a turn:
      the agent is running, and no screen captured before that moment, nor
      one unchanged since before it, can end the turn;
    - readings are folded in capture order; an older capture is ignored;
    - a screen never overrides a hook's `waiting` with `idle` unless the
      question is gone from the screen for the debounce time;
    - `exited` and `error` come from the process and stick;
    - a session-start hook only says the agent is up: it never ends a turn;
    - a hook's `waiting` (a permission request for a tool) is paired only
      with a question that is not one of the profile's own dialogs: a trust
      dialog still on screen when the hook fires is not the tool's question,
      so the reading waits without options until the real prompt shows.
    """

    markers: Markers = GENERIC
    dialogs: tuple[re.Pattern[str], ...] = ()  # the profile's first-run dialogs (detect)
    hold: float = 0.5
    idle_debounce: float = 0.5
    quiet_secs: float | None = None
    current: StatusReading = field(
        default_factory=lambda: StatusReading(AgentStatus.UNKNOWN, "starting")
    )
    # what "now" is for readings given no time of their own (tests drive it)
    clock: Clock = time.monotonic
    changed_at: float = float("nan")  # set from the clock when made
    _candidate: StatusReading | None = None
    _candidate_since: float = 0.0
    _last_screen: tuple[str, ...] = ()
    _screen_since: float = 0.0
    _seen_at: float = float("-inf")
    turn_at: float = float("-inf")
    _hook_at: float = float("-inf")
    turn_ends: int = 0
    _ends_at_prompt: int = 0
    # the provider's rate-limit / quota refusals the agent reported (its
    # screen's error line, its StopFailure hook): counted once each
    limits: int = 0
    limit: str | None = None
    _limit_open: bool = False  # this refusal is counted; the agent's next turn ends it

    def __post_init__(self) -> None:
        if self.changed_at != self.changed_at:  # NaN: not given
            self.changed_at = self.clock()

    def _note_limit(self, sentence: str | None) -> None:
        """A refusal reported: counted unless it is the one already counted
        (still on screen, or its hook's twin)."""
        if sentence is None:
            return
        if not self._limit_open:
            self.limits += 1
            self.limit = sentence
        self._limit_open = True

    def _set(self, reading: StatusReading, now: float) -> bool:
        if reading.status is AgentStatus.RUNNING:
            self._limit_open = False  # a new turn: a refusal after it is news
        if reading.status is AgentStatus.IDLE and self.current.status is not AgentStatus.IDLE:
            self.turn_ends += 1 if self.current.status is AgentStatus.RUNNING else 0
        changed = (reading.status, reading.question) != (
            self.current.status,
            self.current.question,
        )
        self.current = reading
        if changed:
            self.changed_at = now
        self._candidate = None
        return changed

    @property
    def _final(self) -> bool:
        return self.current.status in (AgentStatus.EXITED, AgentStatus.ERROR)

    def on_hook(self, event: dict[str, object], now: float | None = None) -> bool:
        if self._final:
            return False
        reading = from_hook(event)
        if reading is None:
            return False
        if hook_name(event) == "SessionStart" and self.current.status is not AgentStatus.UNKNOWN:
            # a start is not a turn's end: the hook is read after the busy
            # frames of a prompt given at launch on a loaded machine, and
            # Claude Code sends it again after compacting in the middle of a turn
            return False
        now = self.clock() if now is None else now
        self._hook_at = now
        self._note_limit(reading.limit)
        if reading.status is AgentStatus.WAITING and reading.question is None:
            # keep the question text the screen already showed, if it is the
            # tool's own prompt (not a dialog still on screen)
            screen = classify(list(self._last_screen), self.markers)
            if screen.question is not None and not self._dialog_on_screen():
                reading = StatusReading(reading.status, reading.reason, screen.question, "hook")
        return self._set(reading, now)

    def on_prompt(self, now: float | None = None) -> bool:
        """corral's prompt landed in the pane and Enter was pressed: a turn
        starts now. Idle must be earned again from screens captured later."""
        if self._final:
            return False
        now = self.clock() if now is None else now
        self.turn_at = now
        self._ends_at_prompt = self.turn_ends
        self._last_screen, self._screen_since = (), now
        reading = StatusReading(
            AgentStatus.RUNNING, "working on the prompt corral sent", None, "prompt"
        )
        return self._set(reading, now)

    def prompted_turn_ended(self, since: float) -> bool:
        """A turn corral's prompt started at or after `since` has ended."""
        return (
            self.turn_at >= since
            and self.current.status is AgentStatus.IDLE
            and self.turn_ends > self._ends_at_prompt
        )

    def on_screen(self, lines: list[str], now: float | None = None) -> bool:
        """A screen captured at `now` (classified here; tests and simple callers)."""
        now = self.clock() if now is None else now
        facts = read_screen(lines, self.markers, now)
        return self.on_facts(facts)

    def on_facts(self, facts: ScreenFacts, now: float | None = None) -> bool:
        """Fold one observation. `now` defaults to its capture time; a later
        `now` re-checks the same screen (the sweep saw no output since)."""
        if self._final:
            return False
        now = facts.at if now is None else now
        if facts.at < self.turn_at or now < self._seen_at:
            return False  # captured before the prompt landed, or out of order
        self._seen_at = now
        if facts.tail != self._last_screen:
            self._last_screen = facts.tail
            self._screen_since = facts.at
        self._note_limit(facts.reading.limit)
        stable = now - self._screen_since
        reading = facts.reading
        if (
            reading.status is AgentStatus.UNKNOWN
            and self.quiet_secs is not None
            and facts.prompt_like
        ):
            if stable < self.quiet_secs:
                return False
            reading = StatusReading(
                AgentStatus.IDLE, f"quiet for {self.quiet_secs:g} s at a prompt-like line"
            )
        if reading.status is AgentStatus.UNKNOWN:
            return False  # keeps a pending question: one odd frame does not reset it
        if reading.status is AgentStatus.RUNNING:
            if self.current.status is AgentStatus.RUNNING:
                self._candidate = None
                return False  # already running: keep the hook's or the prompt's reason
            if self.current.source != "hook":
                return self._set(reading, now)
            # a hook just said otherwise: the screen may lag it by a frame
        if facts.at < self._hook_at and not self._pairs_with_hook(reading, now):
            return False  # captured before the hook's edge
        if reading.status is AgentStatus.RUNNING:
            return self._held(reading, now)
        if reading.status is AgentStatus.IDLE:
            if stable < self.idle_debounce:
                return False
            if self.current.status is AgentStatus.IDLE:
                return False
            return self._set(reading, now)  # the debounce is its hold
        # waiting
        if (reading.status, reading.question) == (self.current.status, self.current.question):
            self._candidate = None
            return False
        if self.current.status is AgentStatus.WAITING:
            if self.current.source == "hook" and self._dialog_on_screen():
                return False  # a dialog is not the tool's question: wait for it
            return self._set(reading, now)  # same wait, better question text: take it
        return self._held(reading, now)

    def _held(self, reading: StatusReading, now: float) -> bool:
        """Take `reading` once it has been seen for `hold` seconds."""
        if self._candidate is None or self._candidate.status is not reading.status:
            self._candidate, self._candidate_since = reading, now
            return False
        if now - self._candidate_since < self.hold:
            return False
        return self._set(reading, now)

    def _pairs_with_hook(self, reading: StatusReading, now: float) -> bool:
        """A hook said "waiting" without the question; the screen captured
        just before it already shows the question, and the sweep has seen no
        output since (`now` is after the hook): that is the hook's question.
        Ignoring it would leave the wait without options for good, since an
        unchanged screen is never captured again. Only a question is taken
        from before the hook this way: a busy frame left on screen when a
        turn ended, re-checked by every later sweep, would restart the turn."""
        return (
            now >= self._hook_at
            and reading.status is AgentStatus.WAITING
            and reading.question is not None
            and self.current.status is AgentStatus.WAITING
            and self.current.source == "hook"
            and self.current.question is None
        )

    def _dialog_on_screen(self) -> bool:
        text = "\n".join(self._last_screen)
        return any(d.search(text) for d in self.dialogs)

    def on_exit(self, status: int | None, now: float | None = None) -> bool:
        now = self.clock() if now is None else now
        if status in (0, None):
            return self._set(
                StatusReading(AgentStatus.EXITED, "the agent exited", None, "process"), now
            )
        return self._set(
            StatusReading(
                AgentStatus.ERROR, f"the agent exited with status {status}", None, "process"
            ),
            now,
        )
