"""The jobs page (jobq.page) on a MemoryStore, mounted at /jobs as an app mounts it: off
without a password, refused to other sites, values shown as text, each view and action.

The app's own tests check its wiring (the page mounted on its real database);
these check the page.
"""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

import jobq
from jobq import page as jobs_page
from jobq.page import routes
from jobq.testing import MemoryStore

PASSWORD = "correct horse battery staple"


def _auth(user: str, password: str) -> dict[str, str]:
    """The header of HTTP basic auth, as a browser sends it."""
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


AUTH = _auth("admin", PASSWORD)
MARKUP = "<script>alert('pwned')</script>"


@dataclass(frozen=True)
class Jobs:
    """An app's jobs as the page is given them: a queue, its store and a kind to push."""

    queue: jobq.Queue
    store: MemoryStore
    welcome_mail: jobq.Kind[int]


@pytest.fixture
def jobs() -> Jobs:
    """A queue of one worker, which the tests drain, with kinds as the template's app has."""
    store = MemoryStore()
    queue = jobq.Queue(store, workers=1)

    @queue.kind("welcome-mail", attempts=10)
    def welcome_mail(user: int) -> None:
        pass

    @queue.kind("flaky", attempts=1)
    def flaky(value: str) -> None:
        raise jobq.Permanent(value)

    @queue.kind("prune-jobs")
    def prune_jobs(_: int) -> None:
        pass

    prune_jobs.schedule(jobq.Every(timedelta(days=1)), 0)
    return Jobs(queue, store, welcome_mail)


def _mounted(
    queue: jobq.Queue, password: str | None = PASSWORD, guesses: jobs_page.Guesses | None = None
) -> Starlette:
    """An app with the page at /jobs, as web.py mounts it."""
    page = jobs_page.app(queue, password=password, name="shop", guesses=guesses)
    return Starlette(routes=[Mount("/jobs", page)])


@pytest.fixture
def page(jobs: Jobs) -> TestClient:
    """The page, with its password, mounted at /jobs; no queue runs but the tests' drains."""
    return TestClient(_mounted(jobs.queue), headers=AUTH, follow_redirects=False)


def _echo(jobs: Jobs) -> jobq.Kind[str]:
    """A kind that fails for good with its value as its error, at its first attempt."""

    @jobs.queue.kind("echo", attempts=1)
    def echo(value: str) -> None:
        raise jobq.Permanent(value)

    return echo


def _failed(jobs: Jobs, value: str, **job: object) -> str:
    """Push an echo job (with ``job``'s fields), run it till it fails for good; its ID."""
    pushed = jobq.Job(kind="echo", payload=json.dumps(value), run_at=datetime.now(UTC))
    for name, field in job.items():
        setattr(pushed, name, field)
    if pushed.key:  # a unique kind's job: its key is kept by the unique push
        assert jobs.store.push_unique(pushed)
    else:
        jobs.store.push(pushed)
    assert jobs.queue.drain() == 1
    assert pushed.id in [failed.id for failed in jobs.store.failed()]
    return pushed.id


def _token(html: str) -> str:
    found = re.search(r'name="token" value="([0-9a-f]+)"', html)
    assert found, "no form on the page"
    return found.group(1)


# Ported from the template's app, where the page was its own (tests/test_page.py)


@pytest.mark.parametrize("password", [None, ""])
def test_the_page_is_off_unless_a_password_is_set(jobs: Jobs, password: str | None) -> None:
    client = TestClient(_mounted(jobs.queue, password), headers=AUTH)
    for path in ("/jobs/", "/jobs/job/1"):
        response = client.get(path)
        assert response.status_code == 404
        assert "set JOBS_PAGE_PASSWORD" in response.text
    assert client.post("/jobs/run-again", data={"id": "1"}).status_code == 404


def test_a_request_without_the_password_is_refused(jobs: Jobs, page: TestClient) -> None:
    for auth in ({}, _auth("admin", "wrong"), _auth("admin", PASSWORD + "x")):
        # A server of its own each, under the wrong guesses that slow a client down.
        client = TestClient(_mounted(jobs.queue), headers=auth)
        for path in ("/jobs/", "/jobs/job/1", "/jobs/static/page.js"):
            response = client.get(path)
            assert response.status_code == 401, path
            assert response.headers["www-authenticate"].startswith("Basic ")
        assert client.post("/jobs/run-again", data={"id": "1"}).status_code == 401
    # Any user name, with the password.
    assert TestClient(page.app, headers=_auth("anyone", PASSWORD)).get("/jobs/").status_code == 200


def test_a_cross_site_post_is_refused_and_changes_nothing(jobs: Jobs, page: TestClient) -> None:
    _echo(jobs)
    id = _failed(jobs, "boom")
    token = _token(page.get("/jobs/").text)
    refused = [
        ({"id": id}, {}),  # no token
        ({"id": id, "token": "0" * len(token)}, {}),  # not the page's token
        ({"id": id, "token": token}, {"Origin": "https://elsewhere.example"}),
        ({"id": id, "token": token}, {"Sec-Fetch-Site": "cross-site"}),
    ]
    for form, headers in refused:
        response = page.post("/jobs/run-again", data=form, headers=headers)
        assert response.status_code == 403, (form, headers)
        assert "from its own forms only" in response.text
    assert [job.id for job in jobs.store.failed()] == [id], "a refused POST ran it again"

    own = page.post(
        "/jobs/run-again",
        data={"id": id, "token": token},
        headers={"Origin": "http://testserver", "Sec-Fetch-Site": "same-origin"},
    )
    assert own.status_code == 303
    assert jobs.store.failed() == []


def test_markup_in_a_value_or_error_shows_as_text(jobs: Jobs, page: TestClient) -> None:
    _echo(jobs)
    id = _failed(jobs, MARKUP, carried={"request_id": MARKUP})
    for path in ("/jobs/", f"/jobs/job/{id}", "/jobs/?kind=" + MARKUP):
        html = page.get(path).text
        assert "<script>alert" not in html, path
        assert "&lt;script&gt;alert(" in html, path
    # The only script the page runs is its own file (and its policy says so).
    response = page.get("/jobs/")
    assert re.findall(r"<script[^>]*>", response.text) == [
        '<script src="/jobs/static/page.js" defer>'
    ]
    assert "script-src 'self'" in response.headers["content-security-policy"]


def test_a_jobs_page_shows_its_last_attempts_traceback_as_text(
    jobs: Jobs, page: TestClient
) -> None:
    @jobs.queue.kind("deep", attempts=1)
    def deep(value: str) -> None:
        def inner() -> None:
            raise ValueError(value)

        inner()

    deep.push(MARKUP)
    assert jobs.queue.drain() == 1
    [failed] = [job for job in jobs.store.failed() if job.kind == "deep"]
    html = page.get(f"/jobs/job/{failed.id}").text
    traceback = html.split('<pre class="traceback">')[1].split("</pre>")[0]
    assert traceback.startswith("Traceback (most recent call last):")
    assert ", in inner" in traceback, "the frames, down to the raise"
    assert "<script>" not in traceback
    assert traceback.endswith("ValueError: &lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;\n")
    assert "after 1 attempt" in html


def test_the_list_shows_each_failed_job_and_filters_by_kind(
    jobs: Jobs, page: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    _echo(jobs)
    carried = _failed(jobs, "with a request", carried={"request_id": "req-7f3a"})
    # A one-at-a-time job keeps its key as long as it is kept (a unique kind's alone frees it).
    keyed = _failed(jobs, "with a key", key="post-1", one_at_a_time=True)
    flaky = _failed(jobs, "other kind", kind="flaky")
    html = page.get("/jobs/").text
    assert f'id="job-{carried}"' in html
    assert "req-7f3a" in html
    assert "post-1" in html
    assert "with a request" in html  # the value, and the error (the echo kind's)
    assert 'datetime="' in html
    assert " UTC</time>" in html
    assert "all (3)" in html
    assert "echo (2)" in html
    assert "flaky (1)" in html
    # The latest SHOWN alone are read and shown; the counts are the store's, of them all.
    monkeypatch.setattr(routes, "SHOWN", 2)
    few = page.get("/jobs/").text
    assert "The latest 2 of 3" in few
    assert few.count('<tr id="job-') == 2
    assert "all (3)" in few

    echoes = page.get("/jobs/", params={"kind": "echo"}).text
    assert f'id="job-{carried}"' in echoes
    assert f'id="job-{keyed}"' in echoes
    assert f'id="job-{flaky}"' not in echoes

    own = page.get(f"/jobs/job/{carried}")
    assert own.status_code == 200
    assert "with a request" in own.text
    assert "req-7f3a" in own.text
    gone = page.get("/jobs/job/999999")
    assert gone.status_code == 404
    assert "has not failed for good" in gone.text


def test_run_again_puts_a_job_back_and_the_queue_runs_it(jobs: Jobs, page: TestClient) -> None:
    _echo(jobs)
    first, second = _failed(jobs, "one"), _failed(jobs, "two")
    token = _token(page.get("/jobs/").text)
    response = page.post("/jobs/run-again", data={"id": first, "token": token, "kind": "echo"})
    assert response.status_code == 303
    assert response.headers["location"] == "/jobs/?kind=echo&ran=1"
    assert "1 job back to run" in page.get(response.headers["location"]).text
    assert [job.id for job in jobs.store.failed()] == [second]
    # Back from its first attempt: it runs (and, being an echo, fails again).
    assert jobs.queue.drain() == 1
    [again] = [job for job in jobs.store.failed() if job.id == first]
    assert again.attempts == 1


def test_run_again_for_all_shown_runs_the_kind_shown_and_no_other(
    jobs: Jobs, page: TestClient
) -> None:
    _echo(jobs)
    echoes = [_failed(jobs, "one"), _failed(jobs, "two")]
    flaky = _failed(jobs, "other kind", kind="flaky")
    html = page.get("/jobs/", params={"kind": "echo"}).text
    assert "Run again all 2 shown" in html
    form = re.search(r'<form[^>]*class="all">(.*?)</form>', html, re.S)
    assert form is not None
    ids = re.findall(r'name="id" value="([^"]+)"', form.group(1))
    assert sorted(ids) == sorted(echoes)
    response = page.post("/jobs/run-again", data={"id": ids, "token": _token(html)})
    assert response.status_code == 303
    assert [job.id for job in jobs.store.failed()] == [flaky]


def test_discard_deletes_a_failed_job_or_all_shown_for_good(jobs: Jobs, page: TestClient) -> None:
    _echo(jobs)
    first, second, third = (_failed(jobs, value) for value in ("one", "two", "three"))
    html = page.get("/jobs/").text
    assert "Discard all 3 shown" in html
    response = page.post("/jobs/discard", data={"id": second, "token": _token(html)})
    assert response.status_code == 303
    assert "1 job deleted for good" in page.get(response.headers["location"]).text
    assert [job.id for job in jobs.store.failed()] == [third, first]
    response = page.post("/jobs/discard", data={"id": [first, third], "token": _token(html)})
    assert "2 jobs deleted for good" in page.get(response.headers["location"]).text
    assert jobs.store.failed() == []


def test_cancel_of_a_waiting_job_by_its_id_keeps_it_from_running(
    jobs: Jobs, page: TestClient
) -> None:
    pushed = jobq.Job(kind="flaky", payload='{"up_at":null}', run_at=datetime.now(UTC))
    jobs.store.push(pushed)
    token = _token(page.get("/jobs/").text)
    response = page.post("/jobs/cancel", data={"id": pushed.id, "token": token})
    assert response.status_code == 303
    assert f"Job {pushed.id} is cancelled: it will not run." in (
        page.get(response.headers["location"]).text
    )
    assert [job.id for job in jobs.store.cancelled()] == [pushed.id]
    assert jobs.queue.drain() == 0
    again = page.post("/jobs/cancel", data={"id": pushed.id, "token": token})
    assert "does not wait or run" in page.get(again.headers["location"]).text
    refused = page.post("/jobs/cancel", data={"id": "1", "token": "forged"})
    assert refused.status_code == 403


def test_a_done_jobs_page_shows_its_kept_result_as_jobs_show_does(
    jobs: Jobs, page: TestClient
) -> None:
    @jobs.queue.kind("double", result=True)
    def double(n: int) -> dict[str, int]:
        return {"doubled": n * 2}

    id = double.push(21)
    assert jobs.queue.drain() == 1
    html = page.get(f"/jobs/job/{id}").text
    assert f"Job {id}: double, done" in html
    assert '<h3>Result</h3>\n<pre class="result">{\n  &#34;doubled&#34;: 42\n}</pre>' in html


def test_pause_and_resume_a_kind_on_every_instance(jobs: Jobs, page: TestClient) -> None:
    token = _token(page.get("/jobs/").text)
    response = page.post("/jobs/pause", data={"kind": "flaky", "for": "resumed", "token": token})
    assert response.status_code == 303
    assert isinstance(jobs.store, jobq.PauseStore)
    assert jobs.store.paused(datetime.now(UTC)) == {"flaky": None}
    html = page.get(response.headers["location"]).text
    assert "flaky is paused" in html
    assert "until resumed" in html

    hour = page.post("/jobs/pause", data={"kind": "welcome-mail", "for": "hour", "token": token})
    assert hour.status_code == 303
    assert jobs.store.paused(datetime.now(UTC))["welcome-mail"] is not None

    unknown = page.post("/jobs/pause", data={"kind": "nope", "for": "hour", "token": token})
    assert unknown.status_code == 400
    assert "flaky" in unknown.text

    resumed = page.post("/jobs/resume", data={"kind": "flaky", "token": token})
    assert resumed.status_code == 303
    assert "flaky" not in jobs.store.paused(datetime.now(UTC))


def test_the_summary_counts_each_kinds_jobs_where_the_store_counts(
    jobs: Jobs, page: TestClient
) -> None:
    _echo(jobs)
    _failed(jobs, "one")
    jobs.welcome_mail.push(1)
    html = page.get("/jobs/").text
    if not isinstance(jobs.store, jobq.StatsStore):
        assert 'id="kinds"' not in html  # the rest of the page, without the counts
        return
    kinds = html.split('id="kinds"')[1].split("</section>")[0]
    rows = {
        re.sub(r"<[^>]+>", "", row.split("</td>")[0].split(">", 1)[1]).strip(): (
            re.findall(r'class="n">(\d+)<', row)
        )
        for row in kinds.split("<tr")[2:]
    }
    # due, later, running, failed, cancelled; and each of the app's kinds with no job now
    idle = ["0", "0", "0", "0", "0"]
    assert rows == {
        "echo": ["0", "0", "0", "1", "0"],
        "welcome-mail": ["1", "0", "0", "0", "0"],
        **{name: idle for name in jobs.queue.kinds if name not in ("echo", "welcome-mail")},
    }
    assert kinds.count('<tr class="idle">') == len(jobs.queue.kinds) - 2
    assert "waiting" in kinds  # the welcome mail is due, and how long it has waited


def test_each_state_has_a_list_a_page_at_a_time_with_its_values_as_text(
    jobs: Jobs, page: TestClient
) -> None:
    echo = _echo(jobs)
    failed = _failed(jobs, MARKUP)
    now = datetime.now(UTC)
    waiting = [
        jobq.Job(kind="echo", payload=json.dumps(f"{MARKUP} {n}"), run_at=now) for n in range(52)
    ]
    assert jobs.store.push_many(waiting) == [True] * 52
    later = echo.push_at(now + timedelta(hours=1), "later")
    body = page.get("/jobs/list/waiting").text
    assert body.count('<tr id="job-') == 50, "a page of 50"
    assert MARKUP not in body, "a value is text, not markup"
    assert "&lt;script&gt;" in body
    assert f'href="/jobs/job/{waiting[0].id}"' in body
    [following] = re.findall(r'rel="next" href="([^"]+)"', body)
    rest = page.get(following.replace("&amp;", "&")).text
    assert rest.count('<tr id="job-') == 2, "the 2 past the first 50, each once"
    assert f'id="job-{waiting[-1].id}"' in rest
    assert 'rel="next"' not in rest
    assert f'id="job-{later}"' in page.get("/jobs/list/scheduled").text
    assert f'id="job-{failed}"' in page.get("/jobs/list/failed").text
    assert "No done jobs." in page.get("/jobs/list/done").text
    assert "No waiting flaky jobs." in page.get("/jobs/list/waiting?kind=flaky").text
    assert page.get("/jobs/list/lost").status_code == 404
    # Each job has its page, whatever its state: a waiting one's may cancel it.
    shown = page.get(f"/jobs/job/{waiting[0].id}").text
    assert f"Job {waiting[0].id}: echo, waiting" in shown
    assert 'action="/jobs/cancel"' in shown
    assert 'action="/jobs/run-again"' not in shown
    # A place no page gave is the first page, not an error.
    assert page.get("/jobs/list/waiting?after=nowhere").text.count('<tr id="job-') == 50
    # A text in the value finds its jobs, kept by the next page's link and the kinds'.
    found = page.get("/jobs/list/waiting", params={"text": f"{MARKUP.upper()} 5"}).text
    assert found.count('<tr id="job-') == 3, "the 5th, the 50th and the 51st"
    assert "&lt;SCRIPT&gt;" in found.split("<h2>")[1].split("</h2>")[0]
    assert re.search(r'href="/jobs/list/waiting\?text=[^"]+&amp;kind=echo"', found)
    assert "No waiting jobs with" in page.get("/jobs/list/waiting?text=nowhere").text
    # The lists read themselves again, with the page's own script: its policy lets it fetch.
    assert '<section id="listed" data-live>' in body
    assert "connect-src 'self'" in page.get("/jobs/list/waiting").headers["content-security-policy"]


def test_the_checked_jobs_of_a_list_are_done_at_once_and_the_page_says_to_how_many(
    jobs: Jobs, page: TestClient
) -> None:
    _echo(jobs)
    failed = _failed(jobs, "gone")
    later = datetime.now(UTC) + timedelta(hours=1)
    waiting = [jobq.Job(kind="echo", payload=json.dumps(n), run_at=later) for n in range(3)]
    assert jobs.store.push_many(waiting) == [True] * 3
    html = page.get("/jobs/list/scheduled").text
    assert html.count('type="checkbox" name="id"') == 3
    assert 'value="cancel">Cancel the checked' in html
    ids = [job.id for job in waiting] + [failed]  # the failed one as if checked on a stale page
    # And one that never was: not found, which the page says apart from the ended one.
    form = {"token": _token(html), "state": "scheduled", "action": "cancel", "id": [*ids, "424242"]}
    response = page.post("/jobs/act", data=form)
    assert response.status_code == 303
    told = page.get(response.headers["location"]).text
    assert (
        "3 jobs cancelled (a running one stops on its instance); 1 had already ended; "
        "1 was not found."
    ) in told
    assert "No scheduled jobs." in told
    # Three pushed for later, checked and run now: due at once, the fourth left as it was.
    soon = [jobq.Job(kind="echo", payload=json.dumps(n), run_at=later) for n in range(4)]
    assert jobs.store.push_many(soon) == [True] * 4
    html = page.get("/jobs/list/scheduled").text
    assert 'value="run-now">Run now the checked' in html
    checked = [job.id for job in soon[:3]] + [failed, "424242"]
    form = {"token": _token(html), "state": "scheduled", "action": "run-now", "id": checked}
    told = page.get(page.post("/jobs/act", data=form).headers["location"]).text
    said = (
        "3 jobs due now, to run as a worker is free; 1 was due already, running or ended; "
        "1 was not found."
    )
    assert said in told
    assert told.count('<tr id="job-') == 1, "the one not checked waits for its time"
    now = datetime.now(UTC)
    assert {s.id for s in jobs.store.browse("waiting", now)} == {job.id for job in soon[:3]}
    shown = page.get(f"/jobs/job/{soon[3].id}").text
    assert 'name="action" value="run-now"' in shown, "a job's own page runs it now too"
    for job in soon:
        assert jobs.store.cancel(job.id, now) == "cancelled"
    assert jobs.store.discard([job.id for job in soon]) == 4
    assert sorted(job.id for job in jobs.store.cancelled()) == sorted(j.id for j in waiting)
    # From the cancelled list, the same three run again, as one action.
    html = page.get("/jobs/list/cancelled").text
    form = {"token": _token(html), "state": "cancelled", "action": "run-again", "id": ids[:3]}
    told = page.get(page.post("/jobs/act", data=form).headers["location"]).text
    assert "3 jobs back to run." in told
    assert jobs.store.cancelled() == []
    # Without the page's token, or with an action it has not, nothing is done.
    form = {"token": "0" * 64, "state": "failed", "action": "discard", "id": [failed]}
    assert page.post("/jobs/act", data=form).status_code == 403
    form = {"token": _token(html), "state": "failed", "action": "explode", "id": [failed]}
    assert page.post("/jobs/act", data=form).status_code == 400
    assert [job.id for job in jobs.store.failed()] == [failed]
    # A count in the query is words of the page's: a text in it is not shown.
    shown = page.get("/jobs/list/failed?did=cancel&n=<b>1</b>&of=2").text
    assert "<b>" not in shown
    assert "jobs cancelled" not in shown
    # Discarded: the failed one; a waiting one is not ended, and one that never was, not found.
    html = page.get("/jobs/list/failed").text
    form = {"token": _token(html), "state": "failed", "action": "discard"}
    form |= {"id": [failed, waiting[0].id, "424242"]}
    told = page.get(page.post("/jobs/act", data=form).headers["location"]).text
    said = "1 job deleted for good; 1 had not ended, or was done; 1 was not found."
    assert said in told


def test_the_schedules_show_each_next_run_on_utcs_clock_and_on_its_zones(
    jobs: Jobs, page: TestClient
) -> None:
    @jobs.queue.kind("report")
    def report(_: int) -> None:
        pass

    report.schedule(jobq.Cron("0 9 * * MON-FRI", tz="Europe/Paris"), 1)
    html = page.get("/jobs/schedules").text
    assert "<code>cron 0 9 * * MON-FRI in Europe/Paris</code>" in html
    assert "<code>every 24h</code>" in html  # the app's own prune-jobs
    next_run = jobq.Cron("0 9 * * MON-FRI", tz="Europe/Paris").next_after(datetime.now(UTC))
    assert f'datetime="{next_run.isoformat()}"' in html
    assert re.search(r"\d{4}-\d\d-\d\d 09:00 CES?T", html), "09:00 on Paris' clock"
    assert html.count("none yet") == 2, "no run pushed yet, of either schedule"
    pushed = next_run - timedelta(days=7)
    assert jobs.store.push_scheduled("report", jobq.Job(kind="report", payload="1", run_at=pushed))
    html = page.get("/jobs/schedules").text
    assert html.count("none yet") == 1
    assert f'datetime="{pushed.isoformat()}"' in html, "the report's last run pushed"
    assert re.search(r"[4-7] d ago</td>", html), "a week before the next run"
    assert 'href="/jobs/schedules" aria-current="page"' in html


def test_the_last_hour_draws_each_kinds_runs_a_minute_from_every_instance(
    jobs: Jobs, page: TestClient
) -> None:
    if not isinstance(jobs.store, jobq.TallyStore):
        assert 'id="lately"' not in page.get("/jobs/").text
        return
    assert "No run came to an end in the last hour." in page.get("/jobs/").text
    now = datetime.now(UTC)
    jobs.store.add_tallies(
        now - timedelta(minutes=3), "web-1", {"echo": (3, 1, 0), MARKUP: (1, 0, 0)}
    )
    jobs.store.add_tallies(now, "web-2", {"echo": (2, 0, 2)})
    jobs.store.add_tallies(now - timedelta(hours=2), "web-1", {"echo": (100, 0, 0)})  # before
    html = page.get("/jobs/").text
    lately = html.split('<section id="lately" data-live>')[1].split("</section>")[0]
    assert lately.count('<svg xmlns="http://www.w3.org/2000/svg" class="throughput"') == 2
    assert ">echo</a>: 5 done, 1 retried, 2 failed</figcaption>" in lately, "both instances"
    assert MARKUP not in lately, "a kind's name is text"
    assert "&lt;script&gt;" in lately
    assert f"<title>{now:%H:%M} UTC: 2 done, 0 retried, 2 failed</title>" in lately


def test_each_kinds_counts_are_read_once_for_many_views_and_afresh_after_an_action(
    jobs: Jobs, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not isinstance(jobs.store, jobq.StatsStore):
        return
    reads: list[datetime] = []
    counted = jobs.store.stats

    def stats(now: datetime) -> list[jobq.KindStats]:
        reads.append(now)
        return counted(now)

    monkeypatch.setattr(jobs.store, "stats", stats)
    page = TestClient(
        jobs_page.app(jobs.queue, password=PASSWORD, counted_every=3600), headers=AUTH
    )
    jobs.welcome_mail.push(1)

    def due() -> str:
        kinds = page.get("/").text.split('id="kinds"')[1]
        return kinds.split('<a href="/?kind=welcome-mail">welcome-mail</a></td>')[1].split("<")[1]

    assert due() == 'td class="n">1'
    jobs.welcome_mail.push(2)
    assert due() == 'td class="n">1', "read once: the second view shows the first's counts"
    assert len(reads) == 1
    html = page.get("/").text
    page.post("/cancel", data={"id": "424242", "token": _token(html)})
    assert due() == 'td class="n">2', "an action reads them afresh"
    assert len(reads) == 2


# Ported from the template's app's bad input (tests/test_bad_input.py, "The jobs page")

HUGE_ID = "9" * 5000  # past the 4,300 digits int() reads: a traceback, once


def _failed_by_hand(store: MemoryStore, error: str = "refused", payload: str = "{}") -> str:
    """A flaky job that failed for good, with ``error`` and ``payload`` as kept; its ID."""
    job = jobq.Job(kind="flaky", payload=payload, run_at=datetime.now(UTC))
    store.push(job)
    now = datetime.now(UTC)
    claimed = store.claim(now, now + timedelta(minutes=1))
    assert claimed is not None
    claimed.error, claimed.failed_at = error, now
    store.fail(claimed)
    return job.id


def test_the_pages_run_again_of_an_id_past_any_the_table_holds_runs_nothing(
    jobs: Jobs, page: TestClient
) -> None:
    id = _failed_by_hand(jobs.store)
    token = _token(page.get("/jobs/").text)
    response = page.post(
        "/jobs/run-again", data={"token": token, "id": ["99999999999999999999999"]}
    )
    assert response.status_code == 303
    assert response.headers["location"].endswith("?ran=0")
    assert [job.id for job in jobs.store.failed()] == [id]


def test_the_pages_ids_cursors_and_counts_of_thousands_of_digits_are_no_error(
    jobs: Jobs, page: TestClient
) -> None:
    id = _failed_by_hand(jobs.store)
    gone = page.get(f"/jobs/job/{HUGE_ID}")
    assert gone.status_code == 404
    assert HUGE_ID[:41] not in gone.text
    assert page.get(f"/jobs/list/failed?after={HUGE_ID}.1").status_code == 200
    assert page.get("/jobs/list/failed?after=1.99999999999999999999").status_code == 200
    assert page.get("/jobs/list/failed?after=99999999999999999.1").status_code == 200
    assert page.get(f"/jobs/?ran={HUGE_ID}&discarded={HUGE_ID}").status_code == 200
    assert page.get(f"/jobs/list/failed?did=cancel&n={HUGE_ID}&of=1").status_code == 200
    token = _token(page.get("/jobs/").text)
    for path in ("/jobs/run-again", "/jobs/discard", "/jobs/cancel"):
        response = page.post(path, data={"token": token, "id": HUGE_ID})
        assert response.status_code == 303, path
    assert [job.id for job in jobs.store.failed()] == [id]


def test_the_page_refuses_an_action_on_more_jobs_than_it_ever_offers(
    jobs: Jobs, page: TestClient
) -> None:
    id = _failed_by_hand(jobs.store)
    token = _token(page.get("/jobs/").text)
    many = [id] + [str(n) for n in range(10**6, 10**6 + 1000)]
    for path in ("/jobs/run-again", "/jobs/discard", "/jobs/act"):
        form = {"token": token, "id": many, "action": "discard", "state": "failed"}
        refused = page.post(path, data=form)
        assert (refused.status_code, refused.text) == (
            400,
            "Refused: 1001 jobs at once; the page acts on 1000 at the most. Nothing was changed.\n",
        )
    assert [job.id for job in jobs.store.failed()] == [id]


def test_control_characters_in_a_jobs_error_are_escaped_on_the_page(
    jobs: Jobs, page: TestClient
) -> None:
    error = "refused\x1b[2J\u202eevil\nsecond line"
    id = _failed_by_hand(jobs.store, error=error, payload='{"a":"\x1b"}')
    for path in ("/jobs/", f"/jobs/job/{id}"):
        html = page.get(path).text
        assert "\x1b" not in html
        assert "\u202e" not in html
        assert "refused\\x1b[2J\\u202eevil" in html
    assert "refused\\x1b[2J\\u202eevil\nsecond line</pre>" in page.get(f"/jobs/job/{id}").text


def test_a_paused_banner_names_only_the_apps_kinds(page: TestClient) -> None:
    spoof = "Your session expired: log in again at evil.example"
    html = page.get("/jobs/", params={"paused": spoof, "resumed": spoof}).text
    assert "evil.example" not in html
    assert "flaky is paused" in page.get("/jobs/", params={"paused": "flaky"}).text


def test_a_cancel_banner_shows_only_for_a_job_cancelled(jobs: Jobs, page: TestClient) -> None:
    id = _failed_by_hand(jobs.store)
    for said in ("cancelled", "asked"):
        for spoof in (id, "99", "Your session expired: log in again"):
            html = page.get("/jobs/", params={"cancel": spoof, "said": said}).text
            assert 'class="told"' not in html, (spoof, said)
    html = page.get("/jobs/", params={"cancel": id, "said": "none"}).text
    assert f"Job {id} does not wait or run: it ended, or never was." in html


@pytest.mark.parametrize(
    "password", [" ", "short", " " * 20, "fifteen-chars!!", "tab\there-and-long"]
)
def test_a_short_page_password_stops_the_app_as_it_starts(jobs: Jobs, password: str) -> None:
    with pytest.raises(jobq.ConfigError) as refused:
        jobs_page.app(jobs.queue, password=password)
    assert str(refused.value) == (
        "JOBS_PAGE_PASSWORD is too easy to guess or not plain text: give 16 or more printable "
        "characters, such as the output of `openssl rand -base64 18`"
    )
    assert jobs_page.check_password("sixteen-chars!!!") == "sixteen-chars!!!"


def test_wrong_page_passwords_slow_the_guesser_down(jobs: Jobs) -> None:
    now = [1000.0]
    guesses = jobs_page.Guesses(clock=lambda: now[0])
    page = jobs_page.app(jobs.queue, password=PASSWORD, guesses=guesses)
    client = TestClient(page, follow_redirects=False)
    for _ in range(jobs_page.Guesses.FREE - 1):
        assert client.get("/", headers=_auth("admin", "guess")).status_code == 401
    right = _auth("admin", PASSWORD)
    assert client.get("/", headers=right).status_code == 200  # a mistyping, forgiven
    for _ in range(jobs_page.Guesses.FREE):
        assert client.get("/", headers=_auth("admin", "guess")).status_code == 401
    # Past FREE wrong guesses, every try waits, the right password's too: it is not checked.
    waiting = client.get("/", headers=right)
    assert (waiting.status_code, waiting.headers["retry-after"]) == (429, "1")
    assert waiting.text == "Too many wrong passwords from testclient: try again in 1 s.\n"
    now[0] += 1
    assert client.get("/", headers=_auth("admin", "guess")).status_code == 401
    assert client.get("/", headers=right).headers["retry-after"] == "2"
    for _ in range(10):  # each once the last wait is out: the wait doubles
        now[0] += 61
        assert client.get("/", headers=_auth("admin", "guess")).status_code == 401
    assert client.get("/", headers=right).headers["retry-after"] == "60"  # at most
    now[0] += 60
    assert client.get("/", headers=right).status_code == 200
    assert client.get("/", headers=_auth("admin", "guess")).status_code == 401  # from none again


# New with jobq.page


def test_every_response_carries_the_pages_headers_a_refusal_and_a_file_included(
    page: TestClient,
) -> None:
    for response in (
        page.get("/jobs/"),
        page.get("/jobs/static/page.css"),
        page.get("/jobs/job/1"),
        page.post("/jobs/run-again", data={"id": "1"}),
        TestClient(page.app).get("/jobs/"),  # a request without the password: 401
    ):
        for name, value in jobs_page.HEADERS.items():
            assert response.headers[name] == value, (response.url, name)


def test_the_pages_script_and_style_are_served_from_the_package(page: TestClient) -> None:
    script, style = page.get("/jobs/static/page.js"), page.get("/jobs/static/page.css")
    assert script.status_code == style.status_code == 200
    assert "localTimes" in script.text
    assert "font" in style.text
    assert page.get("/jobs/static/../asgi.py").status_code == 404


def test_each_view_is_headed_with_the_apps_name(page: TestClient) -> None:
    for path in ("/jobs/", "/jobs/list/waiting", "/jobs/schedules", "/jobs/processes"):
        assert "<title>" in page.get(path).text
        assert " · shop</title>" in page.get(path).text, path


def test_a_store_that_keeps_no_failed_jobs_is_refused_as_the_app_starts(
    plain_store: jobq.Store,
) -> None:
    queue = jobq.Queue(plain_store)
    with pytest.raises(jobq.ConfigError, match=r"jobq\.FailedStore"):
        jobs_page.app(queue, password=PASSWORD)
    assert jobs_page.app(queue, password=None) is not None, "off, it needs nothing of the store"


# Issue 47: the processes that run the queue, each with its running jobs


def _process(
    id: str, *, pid: int = 4242, role: str = "worker", kinds: tuple[str, ...] | None = None
) -> jobq.Process:
    now = datetime.now(UTC)
    return jobq.Process(
        id=id,
        host="web-1",
        pid=pid,
        role=role,  # type: ignore[arg-type]
        kinds=kinds,
        workers=0 if role == "supervisor" else 4,
        started_at=now - timedelta(hours=2),
        beat_at=now - timedelta(seconds=3),
    )


def _running(jobs: Jobs, by: str, value: int) -> str:
    """A welcome mail claimed by the process ``by``, as its queue claims one: its ID."""
    pushed = jobs.welcome_mail.push(value)
    now = datetime.now(UTC)
    claimed = jobs.store.claim(now, now + timedelta(minutes=5), by=jobq.Claimant(instance=by))
    assert claimed is not None
    assert claimed.id == pushed
    return pushed


def _row(html: str, id: str) -> str:
    """The processes' table row of the process ``id``."""
    [row] = [r for r in html.split("<tr>") if f"<code>{id}</code>" in r]
    return row.split("</tr>")[0]


def test_the_processes_show_each_ones_beat_and_its_running_jobs(
    jobs: Jobs, page: TestClient
) -> None:
    now = datetime.now(UTC)
    web = _process("web-1:4242:aa", role="server")
    worker = _process("web-1:4343:bb", pid=4343, kinds=("flaky", "welcome-mail"))
    for process in (web, worker):
        jobs.store.beat(process, now - timedelta(minutes=5))
    mine = [_running(jobs, worker.id, n) for n in (1, 2)]
    lost = _running(jobs, "gone:1:cc", 3)  # a process no longer listed, its hold not out yet
    waiting = jobs.welcome_mail.push(4)

    html = page.get("/jobs/processes").text
    assert 'href="/jobs/processes" aria-current="page"' in html
    assert '<section id="processes" data-live>' in html
    served, working = _row(html, web.id), _row(html, worker.id)
    assert "<td>server</td>" in served
    assert "<td>every kind</td>" in served
    assert "<td>worker</td>" in working
    assert "<td>flaky, welcome-mail</td>" in working
    assert '<td class="n">4343</td>' in working
    assert '<td class="n">4</td>' in working
    assert f'datetime="{worker.started_at.isoformat()}"' in working
    assert f'datetime="{worker.beat_at.isoformat()}"' in working
    assert "3 s ago" in working
    assert 'class="none">none</span>' in served, "the server runs no job now"
    for id in mine:
        assert f'<a href="/jobs/job/{id}">{id}</a> welcome-mail, since' in working
    assert f'href="/jobs/job/{lost}"' not in served + working
    elsewhere = html.split("Running on no process listed")[1]
    assert f'id="job-{lost}"' in elsewhere
    assert "running on gone:1:cc since" in elsewhere
    assert f'href="/jobs/job/{waiting}"' not in html, "a job that waits runs on no process"


def test_the_processes_list_says_when_none_runs_and_a_store_without_one_shows_no_link(
    jobs: Jobs, page: TestClient, plain_store: jobq.Store
) -> None:
    assert "No process runs the app's queue." in page.get("/jobs/processes").text
    assert 'href="/jobs/processes"' in page.get("/jobs/").text

    class FailedOnly(MemoryStore):
        """A store with the failed jobs, and no list of processes: a ProcessStore's methods
        are not there (None: no attribute a runtime protocol check counts)."""

        beat = processes = leave = None  # type: ignore[assignment]

    queue = jobq.Queue(FailedOnly())
    assert not isinstance(queue.store, jobq.ProcessStore)
    client = TestClient(_mounted(queue), headers=AUTH)
    assert 'href="/jobs/processes"' not in client.get("/jobs/").text
    said = client.get("/jobs/processes")
    assert said.status_code == 200
    assert "This app's store keeps no list of processes" in said.text


def test_a_process_shows_its_text_as_text(jobs: Jobs, page: TestClient) -> None:
    jobs.store.beat(_process(MARKUP + "\u202e"), datetime.now(UTC) - timedelta(minutes=5))
    html = page.get("/jobs/processes").text
    assert MARKUP not in html
    assert "\u202e" not in html
    assert "&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;\\u202e" in html


def test_a_long_jobs_progress_shows_as_a_bar_and_its_metadata_and_checkpoint_escaped(
    jobs: Jobs, page: TestClient
) -> None:
    id = _running(jobs, "web-1:4242:aa", 1)
    now = datetime.now(UTC)
    claimed = jobs.store.status(id, now)
    assert claimed is not None
    assert claimed.job is not None
    note = json.dumps(MARKUP)
    written = jobs.store.record(
        claimed.job,
        f'{{"done": 12, "total": 20, "note": {note}}}',
        json.dumps({"rows": MARKUP}),
        '{"steps": 12}',
    )
    assert written
    listed = page.get("/jobs/list/running").text
    row = listed.split(f'id="job-{id}"')[1].split("</tr>")[0]
    assert '<progress max="100" value="60.0">60%</progress>' in row
    assert "12 of 20 (60%), &lt;script&gt;" in row
    shown = page.get(f"/jobs/job/{id}").text
    assert '<progress max="100" value="60.0">60%</progress>' in shown
    assert "<h3>Metadata</h3>" in shown
    assert "&lt;script&gt;alert" in shown.split("<h3>Metadata</h3>")[1]
    assert MARKUP not in shown
    assert "&#34;steps&#34;: 12" in shown.split("<h3>Checkpoint</h3>")[1]


# Batches and jobs that wait for others


def _batch(jobs: Jobs, n: int = 3) -> tuple[str, list[str]]:
    """A batch of ``n`` welcome mails, due now, with a prune as its callback; its ID and theirs."""
    now = datetime.now(UTC)
    members = [jobq.Job(kind="welcome-mail", payload=str(i), run_at=now) for i in range(n)]
    callback = jobq.Job(kind="prune-jobs", payload="0", run_at=now)
    batch = jobs.store.push_batch(members, callback, now)
    return batch, [job.id for job in members]


def test_a_batchs_page_counts_its_members_and_links_its_callback_and_those_not_done(
    jobs: Jobs, page: TestClient
) -> None:
    batch, (first, second, third) = _batch(jobs)
    now = datetime.now(UTC)
    claimed = jobs.store.claim(now, now + timedelta(minutes=5))
    assert claimed is not None
    assert claimed.id == first
    assert jobs.store.done(claimed)
    assert jobs.store.cancel(second, now) == "cancelled"
    response = page.get(f"/jobs/batches/{batch}")
    assert response.status_code == 200
    html = response.text
    assert f"<h2>Batch {batch}, open</h2>" in html
    assert '<progress max="100" value="66.7">67%</progress> 2 of 3 members' in html
    counts = html.split('<table class="counts">')[1].split("</table>")[0]
    for state, n in (("waiting", 1), ("running", 0), ("done", 1), ("cancelled", 1)):
        assert f'<td class="n {state}">{n}</td>' in counts, state
    assert '<td class="n total">3</td>' in counts
    assert f'<a class="callback" href="/jobs/job/{batch}">job {batch}</a>' in html
    not_done = html.split('<ul class="not-done">')[1].split("</ul>")[0]
    assert f'<a href="/jobs/job/{second}">{second}</a>' in not_done
    assert third not in not_done
    assert 'action="/jobs/cancel-batch"' in html
    # Its last member ends: it ended, and offers no cancel.
    assert jobs.store.cancel(third, now) == "cancelled"
    html = page.get(f"/jobs/batches/{batch}").text
    assert f"<h2>Batch {batch}, ended</h2>" in html
    assert '<progress max="100" value="100.0">100%</progress> 3 of 3 members' in html
    assert "its callback was pushed" in html
    assert 'action="/jobs/cancel-batch"' not in html


def test_an_unknown_batchs_page_is_not_found(page: TestClient) -> None:
    for id in ("424242", "4x", "9" * 400):
        response = page.get(f"/jobs/batches/{id}")
        assert response.status_code == 404, id
        assert "No such batch" in response.text


def test_cancel_batch_cancels_its_members_not_ended_only_from_the_pages_own_form(
    jobs: Jobs, page: TestClient
) -> None:
    batch, members = _batch(jobs)
    html = page.get(f"/jobs/batches/{batch}").text
    token = _token(html)
    for form, headers in (
        ({"id": batch}, {}),  # no token
        ({"id": batch, "token": "0" * len(token)}, {}),
        ({"id": batch, "token": token}, {"Origin": "https://elsewhere.example"}),
    ):
        refused = page.post("/jobs/cancel-batch", data=form, headers=headers)
        assert refused.status_code == 403, form
    assert jobs.store.cancelled() == [], "a refused POST cancelled them"
    response = page.post("/jobs/cancel-batch", data={"id": batch, "token": token})
    assert response.status_code == 303
    assert response.headers["location"] == f"/jobs/batches/{batch}?cancelled=3"
    assert sorted(job.id for job in jobs.store.cancelled()) == sorted(members)
    told = page.get(response.headers["location"]).text
    assert '<p class="told">3 members cancelled' in told
    assert f"<h2>Batch {batch}, ended</h2>" in told
    # The callback, let go as the last member ended, runs.
    assert jobs.queue.drain() == 1
    unknown = page.post("/jobs/cancel-batch", data={"id": "424242", "token": token})
    assert unknown.headers["location"] == "/jobs/batches/424242"
    assert page.get(unknown.headers["location"]).status_code == 404
    assert page.post("/jobs/cancel-batch", data={"id": "x", "token": token}).status_code == 400


def test_a_jobs_page_links_its_batch_and_lists_what_it_waits_for(
    jobs: Jobs, page: TestClient
) -> None:
    batch, (member, *_) = _batch(jobs, 2)
    html = page.get(f"/jobs/job/{member}").text
    assert f'member of <a class="batch" href="/jobs/batches/{batch}">batch {batch}</a>' in html
    callback = page.get(f"/jobs/job/{batch}").text
    assert f'callback of <a class="batch" href="/jobs/batches/{batch}">batch {batch}</a>' in (
        callback
    )
    # Held till its members end: no time of 9999 to show, and no "Run now" to bring it forward.
    assert "once what it waits for lets it go" in callback
    assert "9999" not in callback
    assert "Run now" not in callback
    first = jobs.welcome_mail.push(1)
    second = jobs.welcome_mail.push(2)
    after = jobs.welcome_mail.push(3, after=[first, second])
    shown = page.get(f"/jobs/job/{after}").text
    waits = shown.split('<dd class="waits">')[1].split("</dd>")[0]
    assert f'<a href="/jobs/job/{first}">{first}</a>, ' in waits
    assert f'<a href="/jobs/job/{second}">{second}</a>' in waits
    assert "due once each has ended" in waits
    assert 'class="batch"' not in shown
    assert "Run now" not in shown
    plain = page.get(f"/jobs/job/{first}").text
    assert 'class="waits"' not in plain
    assert 'class="batch"' not in plain
    # The list of jobs scheduled for later says they wait for others, not the year 9999.
    scheduled = page.get("/jobs/list/scheduled").text
    assert "waiting for other jobs to end" in scheduled
    assert "9999" not in scheduled
