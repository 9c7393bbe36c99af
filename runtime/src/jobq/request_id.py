"""Each request's ID: on its response, on every log line it leads to, and carried to its jobs.

``RequestIds`` (ASGI middleware, for any ASGI framework) gives each request an
ID: a well-formed incoming ``X-Request-ID`` (a proxy's or a load balancer's)
is kept, anything else replaced by a new one. The ID is on the response's
``X-Request-ID`` and in ``current`` while the request is served.
``CarryRequestId`` (a ``jobq.Carrier``) carries it to the jobs the request
pushes, under ``request_id``, and sets it again as each one runs (every
attempt, and a run again from the failed), so the queue's lines about a job
and its handler's own say the request that pushed it. ``RequestIdFilter``
puts ``request_id=`` on the log lines that do not have it. Plain ASGI and
logging: it needs no extra.
"""

from __future__ import annotations

import logging
import re
import uuid
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, MutableMapping

    Scope = MutableMapping[str, Any]
    Message = MutableMapping[str, Any]
    Receive = Callable[[], Awaitable[Message]]
    Send = Callable[[Message], Awaitable[None]]
    ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

__all__ = [
    "CarryRequestId",
    "HEADER",
    "KEY",
    "RequestIdFilter",
    "RequestIds",
    "current",
    "log_request_ids",
    "new",
    "well_formed",
]

HEADER = "x-request-id"
KEY = "request_id"  # its name in what a job carries, and on log records

# What an incoming ID may be: short, and nothing that could forge a log line's fields.
_WELL_FORMED = re.compile(r"[A-Za-z0-9._:+/-]{1,128}")
_HEADER = HEADER.encode("latin-1")

current: ContextVar[str] = ContextVar("request_id", default="")


def well_formed(value: str) -> bool:
    """Whether ``value`` may be taken as a request ID: 1 to 128 of A-Z a-z 0-9 . _ : + / -."""
    return _WELL_FORMED.fullmatch(value) is not None


def new() -> str:
    """A new request ID: 32 hex digits, as nginx's $request_id."""
    return uuid.uuid4().hex


class RequestIds:
    """ASGI middleware: each request gets an ID, in ``current`` and on its response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        incoming = next(
            (
                value.decode("latin-1")
                for name, value in scope["headers"]
                if name.lower() == _HEADER
            ),
            "",
        )
        request_id = incoming if well_formed(incoming) else new()

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != _HEADER]
                message["headers"] = [*headers, (_HEADER, request_id.encode("latin-1"))]
            await send(message)

        token = current.set(request_id)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            current.reset(token)


class CarryRequestId:
    """A ``jobq.Carrier``: a job pushed while a request is served runs with its ID."""

    def carry(self, into: dict[str, str]) -> None:
        request_id = current.get()
        if request_id:
            into[KEY] = request_id

    def restore(self, carried: Mapping[str, str]) -> None:
        request_id = carried.get(KEY)
        if request_id is None:
            return
        if not well_formed(request_id):
            raise ValueError(f"{request_id!r} is not a request ID")
        current.set(request_id)  # in the job's own context: no other job sees it


class RequestIdFilter(logging.Filter):
    """Puts the request's ID on a log line: ``request_id=...`` at its end, and on the record.

    A line that has a ``request_id`` already (the queue's lines about a job
    have it, from what the job carried) is left as it is; a line logged
    outside any request gets ``record.request_id = ""`` for formats that name it.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, KEY, None) is not None:
            return True
        request_id = current.get()
        setattr(record, KEY, request_id)
        if request_id:
            record.msg = f"{record.getMessage()} {KEY}={request_id}"
            record.args = None
        return True


def log_request_ids(logger: logging.Logger | None = None) -> None:
    """Add a ``RequestIdFilter`` to each handler of ``logger`` (the root logger by default)."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RequestIdFilter) for f in handler.filters):
            handler.addFilter(RequestIdFilter())
