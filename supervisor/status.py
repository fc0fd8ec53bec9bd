"""Agent status: `running | waiting | idle | exited | error | unknown`, with a
reason and, when waiting, the question and its options.

Structured signals win: agent hooks (Claude Code settings hooks, Codex
`notify`, the demo agent) give exact edges. Pane heuristics fill the gaps,
per profile: only the last ~30 lines, ANSI stripped, busy markers before
waiting markers, an idle debounce, and a minimum hold before a change counts.
Ambiguity reports `unknown`: never a false "waiting", never a keypress.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from enum import StrEnum

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*(?:\x07|\x1b\\)|\x1b[()][A-Za-z0-9]")
BOX = re.compile(r"^[\s│┃|─━╭╮╰╯┌┐└┘├┤┬┴┼═║╔╗╚╝\-_=+]*$")
LEAD = re.compile(r"^[\s│┃║△⚠•·*]+")  # frame and glyphs before a menu's text
OPTION = re.compile(r"^\s*(?:[❯›>»]\s*)?(\d{1,2})[.)]\s+(.+?)\s*$")


class AgentStatus(StrEnum):
    RUNNING = "running"
    WAITING = "waiting"
    IDLE = "idle"
    EXITED = "exited"
    ERROR = "error"
    UNKNOWN = "unknown"


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
    menu: InlineMenu | None = None  # questions drawn as one row of options


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
)


def clean_lines(lines: list[str], n: int = 30) -> list[str]:
    """The last `n` meaningful lines: ANSI stripped, NBSP normalised,
    box-drawing rules and trailing blanks dropped."""
    out: list[str] = []
    for raw in lines:
        line = ANSI.sub("", raw).replace("\xa0", " ").rstrip()
        line = line.strip("│┃║ ").rstrip() if line[:1] in "│┃║" else line
        if BOX.match(line) and line.strip():
            continue
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return out[-n:]


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


def classify(lines: list[str], markers: Markers = GENERIC) -> StatusReading:
    """One screen, no memory: busy before waiting before idle; else unknown."""
    tail = clean_lines(lines)
    if not tail:
        return StatusReading(AgentStatus.UNKNOWN, "blank screen")
    for pattern in markers.busy + GENERIC.busy:
        for line in tail:
            if pattern.search(line):
                return StatusReading(AgentStatus.RUNNING, f"busy marker: {line.strip()[:80]}")
    question = find_question(tail)
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


def from_hook(event: dict[str, object]) -> StatusReading | None:
    """Map one hook record (Claude Code settings hooks, the demo agent, Codex
    notify) to a status edge. Unknown events change nothing."""
    name = str(event.get("hook_event_name") or event.get("event") or event.get("type") or "")
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
    if name in ("Stop", "StopFailure"):
        return StatusReading(AgentStatus.IDLE, "turn ended", source="hook")
    if name == "SessionStart":
        return StatusReading(AgentStatus.IDLE, "session started", source="hook")
    if name == "SessionEnd":
        return StatusReading(
            AgentStatus.EXITED, f"session ended ({event.get('reason', '')})", source="hook"
        )
    return None


# --- the tracker ------------------------------------------------------------------


@dataclass
class StatusTracker:
    """Folds hooks, screens and process facts into one debounced status.

    - a hook edge applies at once (it is exact);
    - a screen reading must hold for `hold` seconds before it replaces the
      current status, and `idle` additionally needs `idle_debounce` seconds of
      an unchanged screen (a spinner between frames is not idle);
    - a screen never overrides a hook's `waiting` with `idle` unless the
      question is gone from the screen for the debounce time;
    - `exited` and `error` come from the process and stick.
    """

    markers: Markers = GENERIC
    hold: float = 0.5
    idle_debounce: float = 1.5
    current: StatusReading = field(
        default_factory=lambda: StatusReading(AgentStatus.UNKNOWN, "starting")
    )
    changed_at: float = field(default_factory=time.monotonic)
    _candidate: StatusReading | None = None
    _candidate_since: float = 0.0
    _last_screen: tuple[str, ...] = ()
    _screen_since: float = 0.0
    turn_ends: int = 0

    def _set(self, reading: StatusReading, now: float) -> bool:
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

    def on_hook(self, event: dict[str, object], now: float | None = None) -> bool:
        if self.current.status in (AgentStatus.EXITED, AgentStatus.ERROR):
            return False
        reading = from_hook(event)
        if reading is None:
            return False
        now = time.monotonic() if now is None else now
        if reading.status is AgentStatus.WAITING and reading.question is None:
            # keep the question text the screen already showed, if any
            screen = classify(list(self._last_screen), self.markers)
            if screen.question is not None:
                reading = StatusReading(reading.status, reading.reason, screen.question, "hook")
        return self._set(reading, now)

    def on_screen(self, lines: list[str], now: float | None = None) -> bool:
        if self.current.status in (AgentStatus.EXITED, AgentStatus.ERROR):
            return False
        now = time.monotonic() if now is None else now
        key = tuple(clean_lines(lines))
        if key != self._last_screen:
            self._last_screen = key
            self._screen_since = now
        reading = classify(list(key), self.markers)
        if reading.status is AgentStatus.UNKNOWN:
            self._candidate = None
            return False
        if reading.status is AgentStatus.IDLE and now - self._screen_since < self.idle_debounce:
            return False
        if (
            self.current.source == "hook"
            and self.current.status is AgentStatus.WAITING
            and reading.status is AgentStatus.IDLE
            and now - self._screen_since < self.idle_debounce
        ):
            return False
        if (reading.status, reading.question) == (self.current.status, self.current.question):
            self._candidate = None
            return False
        if self.current.status is AgentStatus.WAITING and reading.status is AgentStatus.WAITING:
            return self._set(reading, now)  # same wait, better question text: take it
        if self._candidate is None or self._candidate.status is not reading.status:
            self._candidate, self._candidate_since = reading, now
            return False
        if now - self._candidate_since < self.hold:
            return False
        return self._set(reading, now)

    def on_exit(self, status: int | None, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
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
