"""The operator's jobs page: an ASGI app (Starlette, Jinja2) an app mounts at ``/jobs``.

Install jobq with the ``page`` extra (``jobq[page]``). Given the app's queue,
it shows and acts on its store: each state's list, a job's own page, the
failed jobs (run again, discard), each kind's counts and last hour, the
paused kinds, the schedules, and the processes that run the queue::

    from jobq import page

    Mount("/jobs", page.app(queue, password=os.environ.get("JOBS_PAGE_PASSWORD"), name="myapp"))

It shows every user's jobs, so it is off without a password, and then asks
for it (HTTP basic auth, any user name): serve it over HTTPS. Its actions are
POSTs another site cannot make: each carries a token only the page's forms
hold, and one whose Origin or Sec-Fetch-Site says another site sent it is
refused. Jinja escapes every value and error, so a job's ``<script>`` shows
as text, and its Content-Security-Policy runs no script but its own file.
Its templates, style and script are in the package (``jobq/page/templates``,
``jobq/page/static``).

Stability: the names listed in ``__all__`` are public; the page's HTML, and
the modules under it, may change with any release.
"""

from __future__ import annotations

from jobq.page.asgi import app
from jobq.page.counts import COUNTED_EVERY
from jobq.page.guard import HEADERS, PASSWORD_LENGTH, Guesses, check_password

__all__ = ["COUNTED_EVERY", "Guesses", "HEADERS", "PASSWORD_LENGTH", "app", "check_password"]
