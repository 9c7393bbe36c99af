"""Each request's ID, on its response, its log lines and its jobs: jobq.request_id's (web.py's
middleware, app.py's carrier, server.py's log filter), named here too for the app's code that
imports them from the app (the commands' log filter)."""

from __future__ import annotations

from jobq.request_id import (
    HEADER,
    CarryRequestId,
    RequestIdFilter,
    RequestIds,
    current,
    log_request_ids,
)

__all__ = [
    "HEADER",
    "CarryRequestId",
    "RequestIdFilter",
    "RequestIds",
    "current",
    "log_request_ids",
]
