"""The page's actions are POSTs that another site cannot make: each carries a token that only the
page's own forms hold, and one whose Origin or Sec-Fetch-Site says another site sent it is
refused, changing nothing.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

from starlette.responses import PlainTextResponse

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = ["IDS_MOST", "Forms", "number", "one"]

# IDs one POST acts on at the most: the page's own forms post 200 at the most. A store's call
# a job, a post of 200,000 took ten seconds; past this it is refused, changing nothing.
IDS_MOST = 1000

Form = dict[str, list[str]]


class Forms:
    """The token of the page's forms, and the check of a POST that says it came from one."""

    def __init__(self, password: str) -> None:
        # The same on every instance that shares the password, so a form served by
        # one instance posts to any other; another site cannot know it.
        self.token = hmac.new(password.encode(), b"jobs page forms", hashlib.sha256).hexdigest()

    async def read(self, request: Request) -> Form | PlainTextResponse:
        """The POST's fields, or a refusal when another site may have sent it."""
        fetched_from = request.headers.get("sec-fetch-site", "same-origin")
        origin = request.headers.get("origin")
        cross_site = fetched_from not in ("same-origin", "none") or (
            origin is not None and urlsplit(origin).netloc != request.headers.get("host")
        )
        # A url-encoded body, as the page's forms send: parsed here, with no multipart dependency.
        form = parse_qs((await request.body()).decode("utf-8", "replace"))
        token = one(form, "token")
        if len(form.get("id", [])) > IDS_MOST:
            return PlainTextResponse(
                f"Refused: {len(form['id'])} jobs at once; the page acts on {IDS_MOST} at the "
                f"most. Nothing was changed.\n",
                status_code=400,
            )
        if cross_site or not hmac.compare_digest(token.encode(), self.token.encode()):
            return PlainTextResponse(
                "Refused: the jobs page takes POSTs from its own forms only "
                "(this one came from another site, or without the page's token). "
                "Reload the page and try again.\n",
                status_code=403,
            )
        return form


def one(form: Form, name: str) -> str:
    """The form's first ``name``, or ""."""
    return form.get(name, [""])[0]


def number(value: str | None) -> int | None:
    """A count from a redirect's query, or None for anything else: the page's counts are of
    IDS_MOST jobs at the most, and a longer number would make int() raise (past 4,300 digits)."""
    if value is None or not (0 < len(value) <= 9 and value.isascii() and value.isdecimal()):
        return None
    return int(value)
