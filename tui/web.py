"""`corral web`: the same console in a browser, for a glance from another
machine through an SSH tunnel.

textual-serve runs the console (`corral --repo …`) once per browser
connection and relays its screen over a websocket. It listens on 127.0.0.1
only, and every request must carry the token: in the URL (`?token=…`, printed
once when the server starts and kept 0600 in the state dir as `web-token`), or
in the cookie the page gets when it is opened with it (the page's scripts,
styles and websocket are requested without the query). Anything else is
refused with 403. The console it serves owns the state dir like any console:
while another console runs there, the browser shows its refusal.
"""

from __future__ import annotations

import hmac
import os
import secrets
import shlex
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web
from textual_serve.server import Server

TOKEN_FILE = "web-token"
COOKIE = "corral_web_token"
HOST = "127.0.0.1"
DEFAULT_PORT = 8421


def new_token(state_dir: Path) -> str:
    """A fresh random token, written 0600 (readable by its owner only)."""
    token = secrets.token_urlsafe(24)
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = state_dir / TOKEN_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(token + "\n")
    os.chmod(path, 0o600)  # an older file keeps its mode through O_CREAT
    return token


def console_command(repo: Path, backend: str) -> str:
    """The console each browser connection runs (this Python, this corral)."""
    argv = [sys.executable, "-m", "corral.tui.cli", "--repo", str(repo), "--backend", backend]
    return shlex.join(argv)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

# Added to the served page: the terminal fills the window exactly (no page
# margin pushing the console's footer below the fold) and takes the keyboard
# as soon as it exists, so the first key typed reaches the console without a
# click first.
PAGE_FIX = """<style>
html, body { margin: 0; height: 100%; overflow: hidden; }
#terminal { position: fixed; inset: 0; }
</style>
<script>
(function () {
  function focusTerminal() {
    var input = document.querySelector("#terminal textarea");
    if (input) { input.focus(); } else { setTimeout(focusTerminal, 100); }
  }
  window.addEventListener("load", focusTerminal);
  window.addEventListener("focus", focusTerminal);
})();
</script>
"""


class TokenServer(Server):
    """textual-serve's server, with every request checked for the token."""

    def __init__(self, command: str, token: str, *, port: int, title: str) -> None:
        super().__init__(command, host=HOST, port=port, title=title)
        self.token = token

    def _allowed(self, request: web.Request) -> bool:
        given = request.query.get("token") or request.cookies.get(COOKIE) or ""
        return hmac.compare_digest(given.encode(), self.token.encode())

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()

        @web.middleware
        async def require_token(request: web.Request, handler: Handler) -> web.StreamResponse:
            if not self._allowed(request):
                return web.Response(
                    status=403,
                    text="corral web: wrong or missing token (open the URL corral web printed)\n",
                )
            response = await handler(request)
            if request.query.get("token") and not response.prepared:
                response.set_cookie(COOKIE, self.token, httponly=True, samesite="Strict")
            if isinstance(response, web.Response) and response.content_type == "text/html":
                page = response.text or ""
                if "</body>" in page:
                    response.text = page.replace("</body>", PAGE_FIX + "</body>", 1)
            return response

        app.middlewares.append(require_token)
        return app

    def initialize_logging(self) -> None:
        """Quiet: the operator reads the one URL line, not a request log."""

    async def on_startup(self, app: web.Application) -> None:
        """The URL is printed by `corral web` itself (once, with its token)."""


def url_of(port: int, token: str) -> str:
    return f"http://{HOST}:{port}/?token={token}"
