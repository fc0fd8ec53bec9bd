"""The Textual app: owns the in-process supervisor for its lifetime.

Supervisor calls started from a key press run as app-level asyncio tasks
(never screen workers), so closing a screen never cancels drafting or a run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import events
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.notifications import SeverityLevel
from textual.screen import Screen

from corral.supervisor.errors import CorralError, swallowed

from .console_app import ConsoleApp
from .desktop_notice import desktop_words, osc_notification
from .early_keys import EarlyKeys
from .key_actions import BOARD_KEYS, SESSION_KEYS, check_handlers
from .toast_band import keep_toasts_clear
from .visible import visible

log = logging.getLogger("corral.tui.app")

if TYPE_CHECKING:
    from corral.supervisor.api import Notice
    from corral.supervisor.interface import Discussions
    from corral.supervisor.models import SessionSummary
    from corral.supervisor.remote import DiscussionsSurface, OwnerServices, OwnerSurface

MIN_WIDTH, MIN_HEIGHT = 80, 24
BOARD_SHOWN_WAIT = 3.0  # seconds the socket and MCP wait at most for the first board frame
OWNER_CHECK_SECS = 0.1  # an attached console reads its owner's health this often
TOAST_LIMIT = 2_000  # characters of one toast: an agent's 1 MB message is cut


class CorralApp(ConsoleApp):
    CSS_PATH = "corral.tcss"
    TITLE = "corral"
    BINDINGS = [
        Binding("question_mark", "help", "Help"),
        Binding("ctrl+q", "quit", "Quit", show=False),
    ]

    def __init__(
        self,
        supervisor: OwnerSurface | None,
        *,
        build: Callable[[], OwnerSurface] | None = None,
        state_dir: Path | None = None,
        default_repo: Path | None = None,
        on_ready: Callable[[OwnerSurface], Awaitable[Any]] | None = None,
        clock: Callable[[], float] = time.time,
        owns_supervisor: bool = True,
        services: OwnerServices | None = None,
        attached: bool = False,
        ui_state_dir: Path | None = None,
    ) -> None:
        super().__init__()
        # where the theme is kept (ui.json): the supervisor's state dir unless
        # given (the demo's state dir is temporary; it keeps it in yours)
        self.ui_state_dir = ui_state_dir
        # the supervisor, or how to build it (and its state dir) when building
        # waits for the board's first frame: its modules take longer to import
        # than the board takes to paint
        if supervisor is None and (build is None or state_dir is None):
            raise ValueError("CorralApp needs a supervisor, or build and state_dir")
        self._supervisor = supervisor
        self._build = build
        self._state_dir = state_dir
        self.default_repo = default_repo
        self.on_ready = on_ready
        self.clock = clock
        self.owns_supervisor = owns_supervisor
        self.services = services  # what this owner serves other clients (socket, MCP)
        # or how to make them, after the first frame (their modules take a while)
        self.serve_with: Callable[[], OwnerServices] | None = None
        self.attached = attached  # a client of another process's owner
        self._said_owner_gone = False
        self.owner_stalled_said: str | None = None  # what the console says while it is stalled
        self.owner_stalled_since = 0.0  # when it started saying so (time.monotonic)
        self.ready = asyncio.Event()
        # the board's first full frame is out: what loads after it may start
        # (importing the MCP server holds the interpreter while the board paints)
        self.board_shown = asyncio.Event()
        self.mount_done = False  # Textual writes no frame until the mount handler returned
        self._calls: set[asyncio.Task[Any]] = set()
        self.startup_error: str | None = None
        # the owner's discussions as this console reaches them (see `discussions`)
        self._discussions: DiscussionsSurface | None = None
        self._owned_discussions: Discussions | None = None  # only when this console owns
        # the supervisor has opened: until then the board shows the stored rows
        # (`first_rows`), says "opening…", and offers no key that needs it
        self.opened = asyncio.Event()
        self.early_keys = EarlyKeys()  # keys that act, typed before it opened
        self.first_rows: list[SessionSummary] | None = None
        # "agents unconfined: <why>" on the board's header ("" when all are confined)
        self.agents_note = ""
        self._opening: asyncio.Task[bool] | None = None
        self.keys: dict[str, str] = {}  # action -> key, from [keys] (see use_keys)
        self.startup_note = ""  # said once when its socket serves (the demo's CORRAL_HOME)
        self._opening_keys: list[events.Key] | None = None  # see _open_from_board

    def use_keys(self, keys: dict[str, str]) -> None:
        """Board and session keys as `[keys]` remapped them (checked by
        `keymap.check` before the app runs)."""
        self.keys = dict(keys)
        self.set_keymap(self.keys)

    @property
    def supervisor(self) -> OwnerSurface:
        """The facade; built here on first use when the app was given how to
        build it (normally right after the board's first frame)."""
        if self._supervisor is None:
            assert self._build is not None
            self._supervisor = self._build()
        return self._supervisor

    @property
    def built(self) -> OwnerSurface | None:
        """The supervisor when it exists (None: the app ended before building it)."""
        return self._supervisor

    @property
    def state_dir(self) -> Path:
        if self._state_dir is not None:
            return self._state_dir
        return Path(self.supervisor.state_dir)

    def host_names(self) -> list[str]:
        """The configured hosts (`[[hosts]]` names), read from the
        configuration file while the supervisor is not built yet."""
        if self._supervisor is None:
            from corral.supervisor.paths import configured_host_names

            return configured_host_names()
        return self._supervisor.host_choices()

    async def on_mount(self) -> None:
        if self.owns_supervisor and not self.attached:
            # opening reads and checks every stored session (most of a second
            # for 10,000): the board's first frame comes from the rows the store
            # keeps, and the supervisor opens right after it
            self.first_rows = _stored_board(self.state_dir)
        if self.owns_supervisor and self.first_rows is None:
            if not await self._open():
                return
        elif not self.owns_supervisor:
            self.opened.set()
        if self.attached:
            self.notify(
                "Attached to the corral that owns this state dir: every action here is that "
                "owner's.",
                timeout=8,
            )
        if self.opened.is_set():
            self._say_broken_rows()
        self._load_theme()
        self.set_interval(300, self._reap_discussions)
        from .screens.board import BoardScreen  # its modules load after the first frame

        await self.push_screen(BoardScreen(clock=self.clock))
        if self.attached:
            # a cheap read of the mirror's health: "not answering" shows within a second
            self.set_interval(OWNER_CHECK_SECS, self._check_owner)
        # the rest once this handler has returned: Textual paints nothing while
        # the app's mount handler runs (it is one batch), and the board comes first
        self.run_worker(self._after_mount(), name="after-mount", group="after-mount")
        self.mount_done = True

    async def _open(self) -> bool:
        """Build (when it is not yet) and open the supervisor; False (and the
        app exits) when it cannot."""
        try:
            await self.supervisor.open()
        except CorralError as exc:
            self.startup_error = str(exc)
            self.exit(return_code=2)
            return False
        self.opened.set()
        self._listen_for_notices()
        return True

    def _listen_for_notices(self) -> None:
        """The owner's notices (a session needs you, or finished) reach the
        terminal too, as a desktop notification ([notify] terminal)."""
        listen = getattr(self.supervisor, "listen_for_notices", None)  # attached: the owner's
        if listen is not None:
            listen(self._tell_terminal)

    def _tell_terminal(self, notice: Notice) -> None:
        if self._driver is None or self.is_headless or self.is_web:
            return
        self._driver.write(osc_notification(notice.title, notice.body))

    def _say_broken_rows(self) -> None:
        if self.supervisor.broken_rows:
            self.notify(
                f"{len(self.supervisor.broken_rows)} stored session(s) could not be read and "
                "were left untouched in the database.",
                severity="warning",
            )

    async def _open_after_first_frame(self) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.board_shown.wait(), BOARD_SHOWN_WAIT)
        # a task of its own: quitting while it runs waits for it (see on_unmount)
        # instead of cancelling recovery half-way
        opening = self._opening = asyncio.get_running_loop().create_task(self._open())
        if not await asyncio.shield(opening):
            return False
        self.first_rows = None
        self._say_broken_rows()
        return True

    async def on_event(self, event: events.Event) -> None:
        if (
            isinstance(event, events.Key)
            and not event.is_forwarded
            and not self.opened.is_set()
            and self.mount_done
            and self.early_keys.hold(event, on_board=self._board_in_front())
        ):
            event.stop()
            if len(self.early_keys.held) == 1:
                self.notify("Opening the store: what you type acts, in order, in a moment.")
            return
        if isinstance(event, events.Key) and not event.is_forwarded:
            if self._opening_keys is not None:  # typed with the enter that opens a session
                event.stop()
                self._opening_keys.append(events.Key(event.key, event.character))
                return
            if event.key == "enter" and self.opened.is_set() and self._open_from_board():
                event.stop()
                return
        await super().on_event(event)

    def _open_from_board(self) -> bool:
        """Enter on a board row opens its session now, and the keys typed
        after it (one burst: `enter` then a revision or an answer) wait until
        the session screen is ready for them, then play there in order: none
        acts on the board behind it, none is lost."""
        from .screens.board import BoardScreen

        board = self.screen
        if not isinstance(board, BoardScreen) or not self._board_in_front():
            return False
        if board.selected() is None:
            return False
        self._opening_keys = []
        board.action_open()
        task = asyncio.get_running_loop().create_task(self._play_opening_keys(board))
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)
        return True

    async def _play_opening_keys(self, board: Screen[Any]) -> None:
        try:
            for _ in range(100):  # at most ~1 s for the session screen to take its focus
                screen = self.screen
                if screen is not board and screen.is_mounted and screen.focused is not None:
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0)  # its mount handler's focus has landed
        finally:
            held, self._opening_keys = self._opening_keys or [], None
        for key in held:
            await super().on_event(key)

    def _board_in_front(self) -> bool:
        from textual.widgets import Input

        from .screens.board import BoardScreen

        return isinstance(self.screen, BoardScreen) and not isinstance(self.focused, Input)

    async def _play_early_keys(self) -> None:
        """The keys held while the store opened, each once the one before it has
        done what it does (a screen it opened is ready for typing)."""
        for event in self.early_keys.take():
            before = self.screen
            await super().on_event(event)
            for _ in range(3):  # what the key started: its action, a screen it pushed
                refreshed = asyncio.get_running_loop().create_future()
                self.call_after_refresh(lambda f=refreshed: f.done() or f.set_result(None))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(refreshed, 1)
            for _ in range(100):  # at most ~1 s more for a new screen to take focus
                if self.screen is before or self.screen.focused is not None:
                    break
                await asyncio.sleep(0.01)

    async def _after_mount(self) -> None:
        if not self.opened.is_set() and not await self._open_after_first_frame():
            return
        await self._play_early_keys()
        if self.services is None and self.serve_with is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.board_shown.wait(), BOARD_SHOWN_WAIT)
            self.services = self.serve_with()
        if self.services is not None:  # after the first paint: MCP takes a second to load
            serving = asyncio.get_running_loop().create_task(self._serve())
            self._calls.add(serving)
            serving.add_done_callback(self._calls.discard)
        # probing the sandbox (bubblewrap) takes ~0.1 s: after the board's first frame
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.board_shown.wait(), BOARD_SHOWN_WAIT)
        from corral.supervisor.doctor import confinement_status

        sandbox = await asyncio.to_thread(confinement_status)
        if sandbox.agents_note != self.agents_note:  # on the board's header while it holds
            self.agents_note = sandbox.agents_note
            self.refresh_board_header()
        if sandbox.agents_unconfined:  # said once, here and in `corral doctor`
            self.notify(f"Agents run {sandbox.agents}", severity="warning")
        if self.on_ready is not None:
            task = asyncio.get_running_loop().create_task(self._run_ready())
            self._calls.add(task)
            task.add_done_callback(self._calls.discard)
        else:
            self.ready.set()

    def refresh_board_header(self) -> None:
        """The board's header line says again what it says (the agents' note changed)."""
        from .screens.board import BoardScreen

        for screen in self.screen_stack:
            if isinstance(screen, BoardScreen):
                screen.refresh_header()

    async def _serve(self) -> None:
        """Serve this console's state dir to other clients (socket, MCP)."""
        assert self.services is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.board_shown.wait(), BOARD_SHOWN_WAIT)
        await self.services.start()
        if self.startup_note:
            self.notify(self.startup_note, timeout=10)
        for problem in self.services.problems:
            self.notify(problem, severity="warning", timeout=10)

    def _check_owner(self) -> None:
        """An attached console says once when the owner it follows went away,
        and while it does not answer (stopped, or too busy): the console keeps
        drawing what it mirrored, and says when the owner answers again."""
        stalled = getattr(self.supervisor, "owner_stalled", None)
        if stalled and self.owner_stalled_said is None:
            self.owner_stalled_said = stalled
            self.owner_stalled_since = time.monotonic()
            self.sub_title = stalled
            self.notify(
                f"{stalled}: this console shows what it last saw; actions wait for the owner",
                severity="warning",
                timeout=10,
            )
        elif not stalled and self.owner_stalled_said is not None:
            self.owner_stalled_said = None
            self.sub_title = ""
            self.notify("The owner answers again.", timeout=4)
        gone = getattr(self.supervisor, "owner_gone", None)
        if gone and not self._said_owner_gone:
            self._said_owner_gone = True
            self.notify(
                f"{gone}: this console no longer follows it; quit and run corral again to "
                "own the state dir",
                severity="error",
                timeout=30,
            )

    async def _run_ready(self) -> None:
        try:
            assert self.on_ready is not None
            await self.on_ready(self.supervisor)
        except CorralError as exc:
            self.notify(str(exc), severity="error", timeout=10)
        finally:
            self.ready.set()

    async def on_unmount(self) -> None:
        for task in list(self._calls):
            task.cancel()
        self.actions.cancel_all()
        if self._opening is not None and not self._opening.done():
            with swallowed(log, "waiting for the session screen being opened"):
                await self._opening
        if self.services is not None:
            await self.services.close()
        sup = self._supervisor  # never built: nothing to close
        if sup is not None and self.owns_supervisor and sup.opened:
            await sup.close()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """While a widget takes every key (the agent terminal, the session's
        input), `?` goes to it: the footer does not offer help then."""
        return not (action == "help" and getattr(self.focused, "TAKES_KEYS", False))

    @property
    def discussions(self) -> DiscussionsSurface:
        """The owner's discussions, through the owner whichever process it
        is: over the socket when attached (the console never keeps a copy
        of another process's discussions: two copies lose a turn), else the
        ones this console owns and its socket serves. Made on first use."""
        if self._discussions is None:
            from corral.supervisor.remote import AttachedSupervisor, OwnedDiscussions

            owner = self.supervisor
            if self.attached:
                if not isinstance(owner, AttachedSupervisor):
                    raise CorralError("an attached console needs its owner's AttachedSupervisor")
                self._discussions = owner.discussions
            else:
                self._discussions = OwnedDiscussions(self.owned_discussions)
        return self._discussions

    @property
    def owned_discussions(self) -> Discussions:
        """The discussions this console owns (it owns the state dir): made on
        first use, since the discussion code and the model configuration are
        not needed for the board's first paint; what its socket serves."""
        if self.attached:
            raise CorralError("an attached console's discussions are its owner's")
        if self._owned_discussions is None:
            self._owned_discussions = self._make_discussions()
        return self._owned_discussions

    @owned_discussions.setter
    def owned_discussions(self, value: Discussions) -> None:
        self._owned_discussions = value
        self._discussions = None

    def report_unexpected(self, where: str, exc: BaseException) -> None:
        """A bug, not a refusal: logged with its traceback, shown as one
        notification, and the console carries on."""
        from .guard import LOG_NAME, log, unexpected_sentence

        log.error("%s failed unexpectedly", where, exc_info=exc)
        state_dir = self._state_dir or getattr(self._supervisor, "state_dir", None)
        path = Path(state_dir) / LOG_NAME if state_dir is not None else None
        self.bell()
        self.notify(unexpected_sentence(where, exc, path), severity="error", timeout=15)

    def _make_discussions(self) -> Discussions:
        """Discussions share the supervisor's state dir and the configured
        model; a broken model configuration is a warning, not a failure."""
        from corral.supervisor.factory import make_discussions

        discussions, problem = make_discussions(self.state_dir)
        if problem is not None:
            self.notify(f"model configuration: {problem}", severity="warning")
        return discussions

    def _reap_discussions(self) -> None:
        """Discussions idle for an hour close (they stay resumable); the
        owner's own, when this console is it."""
        if self._owned_discussions is not None:
            self._owned_discussions.reap_idle()

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Every toast shows its words as written: corral never styles a toast,
        and what it says often holds an engine's, agent's, repo's or the
        operator's own text (`[llm]` in a sentence must not vanish as markup)."""
        super().notify(
            visible(message, multiline=True, limit=TOAST_LIMIT),
            title=visible(title, limit=TOAST_LIMIT),
            severity=severity,
            timeout=timeout,
            markup=False,
        )
        if self.screen_stack:  # once the toast's message is handled (it is queued)
            self.call_later(keep_toasts_clear, self.screen)

    def _place_toasts(self, _event: object = None) -> None:
        """Toasts never cover the line in focus (tui/toast_band.py): placed when
        one comes, and again when the focus, a cursor or the size moves."""
        if self._notifications and self.screen_stack:
            self.call_after_refresh(keep_toasts_clear, self.screen)

    on_descendant_focus = _place_toasts
    on_data_table_row_highlighted = _place_toasts
    on_board_table_row_highlighted = _place_toasts

    def desktop_notify(self, title: str, body: str) -> None:
        """`notify-send` where it exists and CORRAL_DESKTOP_NOTIFY=1 (off by default)."""
        import os
        import shutil
        import subprocess

        if os.environ.get("CORRAL_DESKTOP_NOTIFY") != "1" or not shutil.which("notify-send"):
            return
        subprocess.Popen(  # `--`: a body starting with "-" is words, not an option
            ["notify-send", "--", desktop_words(title), desktop_words(body)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def watch_theme(self, theme: str) -> None:
        """Remember the theme (dark, light, …) across runs."""
        path = self._ui_state_path()
        if path is None or not getattr(self, "_theme_loaded", False):
            return
        with contextlib.suppress(OSError):
            path.write_text(json.dumps({"theme": theme}), encoding="utf-8")

    def _ui_state_path(self) -> Path | None:
        state_dir = self.ui_state_dir or self._state_dir
        state_dir = state_dir or getattr(self._supervisor, "state_dir", None)
        return None if state_dir is None else Path(state_dir) / "ui.json"

    def _load_theme(self) -> None:
        path = self._ui_state_path()
        try:
            saved = json.loads(path.read_text(encoding="utf-8")) if path and path.exists() else {}
            if saved.get("theme") in self.available_themes:
                self.theme = saved["theme"]
        except (OSError, ValueError):
            pass
        self._theme_loaded = True

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The command palette (ctrl+p) offers every action of the screen in
        front, with the same words as its keys, plus Textual's own."""
        yield from super().get_system_commands(screen)
        for binding in screen.BINDINGS:
            if not isinstance(binding, Binding) or not binding.description:
                continue
            target = self if binding.action.startswith("app.") else screen
            action = binding.action.removeprefix("app.")
            if target is screen and not screen.check_action(action, ()):
                continue  # what the selected row or the state cannot take is not offered

            async def run(target: App[None] | Screen[Any] = target, action: str = action) -> None:
                await target.run_action(action)

            key = self.get_key_display(binding)  # "?" and "/", not question_mark and slash
            yield SystemCommand(f"{binding.description} ({key})", f"same as pressing {key}", run)

    def action_help(self) -> None:
        from .screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def on_resize(self) -> None:
        size = self.size
        small = size.width < MIN_WIDTH or size.height < MIN_HEIGHT
        was_small, self._too_small = getattr(self, "_too_small", False), small
        self._place_toasts()
        if small and not was_small:
            self.notify(
                f"The window is {size.width}×{size.height}; corral needs at least "
                f"{MIN_WIDTH}×{MIN_HEIGHT} to show everything.",
                severity="warning",
                timeout=4,
            )


check_handlers(CorralApp, (*BOARD_KEYS, *SESSION_KEYS), of_app=True)


def _stored_board(state_dir: Path) -> list[SessionSummary] | None:
    """The board rows the store keeps, as the board shows them (newest first,
    a vanished worktree as none; none at all before the store exists), or None
    when the store has rows it cannot vouch for (then the supervisor opens
    first). Read without the models: the board only reads a row's attributes,
    and the live rows replace these once the supervisor has opened."""
    from typing import cast

    from corral.supervisor.stored_rows import DB_NAME, stored_board_rows

    if not (Path(state_dir) / DB_NAME).exists():
        return []
    return cast("list[SessionSummary] | None", stored_board_rows(state_dir))
