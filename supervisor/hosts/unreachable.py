"""`HostUnreachable`: what the hosts' machinery raises when a host does not
answer. Its own module, so a caller that only catches it (the gates, the
foreman) does not load the connection code before a host is configured."""

from __future__ import annotations


class HostUnreachable(Exception):
    """The host cannot be reached now; the message says which host and what to check."""

    def __init__(self, host: str, message: str) -> None:
        super().__init__(message)
        self.host = host
