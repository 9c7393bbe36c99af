"""The page's door: its password (HTTP basic auth, any user name), a guesser slowed down, and the
headers every response carries (no framing, no script but the page's own, no cache).

The page shows every user's jobs, so it is off with no password, and a short
one is refused as the app starts: serve it over HTTPS.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import math
import time
from typing import TYPE_CHECKING

from starlette.responses import PlainTextResponse

from jobq.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable

    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["Guarded", "Guesses", "HEADERS", "PASSWORD_LENGTH", "check_password", "off"]

SETTING = "JOBS_PAGE_PASSWORD"  # the setting the page's messages tell an operator to set
PASSWORD_LENGTH = 16  # characters, at the least
# Every response of the page: no other site frames it, and it runs only its own script.
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",  # every user's jobs: kept by no cache
}


def check_password(password: str | None) -> str | None:
    """``password``, or None for none (the page off); ConfigError for one too easy to guess:
    under PASSWORD_LENGTH characters, blanks aside, or with a character that is not printable.

    It guards every user's jobs, so a short one stops the app as it starts (the
    page also slows down the guesses of a client that gives wrong ones).
    """
    if password and (len(password.strip()) < PASSWORD_LENGTH or not password.isprintable()):
        raise ConfigError(
            f"{SETTING} is too easy to guess or not plain text: give "
            f"{PASSWORD_LENGTH} or more printable characters, such as the output of "
            f"`openssl rand -base64 18`"
        )
    return password or None


async def off(scope: Scope, receive: Receive, send: Send) -> None:
    """The page with no password: 404, saying how to turn it on."""
    response = PlainTextResponse(
        f"The jobs page is off: set {SETTING} to turn it on (it shows every user's jobs).\n",
        status_code=404,
    )
    await response(scope, receive, send)


class Guesses:
    """Wrong passwords by client address: past FREE of them, a client waits before its next try.

    The wait doubles with each wrong guess past FREE, up to LONGEST seconds, and
    ends with a right one; while it lasts, every try of that client is answered
    429 unchecked, so a guesser gets a few tries a minute. ``clock`` is
    time.monotonic, or a test's. One instance's count: each instance of the app
    keeps its own.
    """

    FREE = 5  # wrong guesses a client may make at once, as a person mistyping does
    LONGEST = 60.0  # seconds
    KEPT = 10_000  # clients remembered: the oldest is forgotten past it

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._wrong: dict[str, tuple[int, float]] = {}  # address: (wrong guesses, wait until)

    def wait(self, client: str) -> float:
        """Seconds ``client`` must wait before its next try: 0 for none."""
        _, until = self._wrong.get(client, (0, 0.0))
        return max(0.0, until - self.clock())

    def wrong(self, client: str) -> None:
        """Count a wrong guess of ``client``'s."""
        count = self._wrong.pop(client, (0, 0.0))[0] + 1
        wait = 0.0 if count < self.FREE else min(self.LONGEST, 2.0 ** (count - self.FREE))
        self._wrong[client] = (count, self.clock() + wait)
        if len(self._wrong) > self.KEPT:
            del self._wrong[next(iter(self._wrong))]  # dicts keep order: the oldest wrong guess

    def right(self, client: str) -> None:
        """Forget ``client``'s wrong guesses: it gave the password."""
        self._wrong.pop(client, None)


class Guarded:
    """ASGI middleware: lets through requests that carry the password; adds HEADERS to every
    response, a refusal's included."""

    def __init__(self, app: ASGIApp, password: str, guesses: Guesses | None = None) -> None:
        self.app = app
        self.password = password.encode()
        self.guesses = guesses or Guesses()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *message.get("headers", []),
                    *((k.lower().encode(), v.encode()) for k, v in HEADERS.items()),
                ]
            await send(message)

        client = (scope.get("client") or ("?", 0))[0]
        wait = self.guesses.wait(client)
        if wait:
            slow_down = PlainTextResponse(
                f"Too many wrong passwords from {client}: try again in {math.ceil(wait)} s.\n",
                status_code=429,
                headers={"Retry-After": str(math.ceil(wait))},
            )
            await slow_down(scope, receive, with_headers)
            return
        authorization = dict(scope["headers"]).get(b"authorization", b"")
        if self._allowed(authorization):
            self.guesses.right(client)
            await self.app(scope, receive, with_headers)
            return
        if authorization:  # a guess: a request with none is a browser asking for the password
            self.guesses.wrong(client)
        refused = PlainTextResponse(
            f"The jobs page needs its password ({SETTING}), with any user name.\n",
            status_code=401,
            headers={"WWW-Authenticate": 'Basic realm="jobs", charset="UTF-8"'},
        )
        await refused(scope, receive, with_headers)

    def _allowed(self, authorization: bytes) -> bool:
        scheme, _, encoded = authorization.partition(b" ")
        if scheme.lower() != b"basic":
            return False
        try:
            _, _, given = base64.b64decode(encoded.strip(), validate=True).partition(b":")
        except (binascii.Error, ValueError):
            return False
        return hmac.compare_digest(given, self.password)
