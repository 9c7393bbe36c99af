"""The promises of a BrowseStore: each job in one list by its state, read a page at a time."""

from __future__ import annotations

import pytest

from jobq.job import Claimant, Job
from jobq.listing import LISTS, Listed, place_of
from jobq.store import BrowseStore, CancelStore, ResultStore, ScheduleStore, Store
from jobq.testing._support import at, brief, job

__all__ = ["BrowseStorePromises"]


def _browse_store(store: Store) -> BrowseStore:
    if not isinstance(store, BrowseStore):
        pytest.skip("the store is not a BrowseStore")
    return store


def _ids(store: BrowseStore, listed: Listed, now: float, kind: str | None = None) -> list[str]:
    return [status.id for status in store.browse(listed, at(now), kind=kind, limit=500)]


def _pages(store: BrowseStore, listed: Listed, now: float, limit: int) -> list[list[str]]:
    """Each page of ``listed`` at ``now``, ``limit`` jobs a page, each past the one before."""
    pages: list[list[str]] = []
    after = None
    while page := store.browse(listed, at(now), after=after, limit=limit):
        pages.append([status.id for status in page])
        after = place_of(listed, page[-1])
        assert len(pages) < 50, "the pages never ended"
    return pages


def _claim(store: Store, pushed: Job, now: float, hold: float = 300) -> Job:
    claimed = store.claim(at(now), at(now + hold), Claimant(instance="host:1:abc"))
    assert claimed is not None
    assert claimed.id == pushed.id, "the claim took the job the test meant"
    return claimed


class BrowseStorePromises:
    """Tests of BrowseStore; a subclass provides a ``store`` fixture, fresh and empty."""

    @brief
    def test_each_job_is_in_the_one_list_its_state_gives_it(self, store: Store) -> None:
        browse = _browse_store(store)
        running, lost = job(kind="running", priority=9), job(kind="lost", priority=8)
        retried, failing = job(kind="retried", priority=7), job(kind="failing", priority=6)
        for pushed in (running, lost, retried, failing):
            store.push(pushed)
        _claim(store, running, now=1)
        _claim(store, lost, now=1, hold=2)  # its worker lost: the hold runs out at 3
        again = _claim(store, retried, now=1)
        again.run_at, again.error = at(60), "refused"
        assert store.retry(again)
        gone = _claim(store, failing, now=1)
        gone.error, gone.failed_at = "refused", at(2)
        assert store.fail(gone)
        due, later = job(kind="due"), job(kind="later", run_at=at(100))
        store.push(due)
        store.push(later)
        expected: dict[Listed, list[str]] = {
            "waiting": [due.id],
            "scheduled": [later.id],
            "retrying": [lost.id, retried.id],  # waiting after an attempt: due or not
            "running": [running.id],
            "failed": [failing.id],
            "cancelled": [],
            "done": [],
        }
        if isinstance(store, CancelStore):
            cancelled = job(kind="cancelled")
            store.push(cancelled)
            assert store.cancel(cancelled.id, at(4)) == "cancelled"
            expected["cancelled"] = [cancelled.id]
        if isinstance(store, ResultStore):
            kept = job(kind="kept", priority=100)  # before the lost job, due again
            store.push(kept)
            claimed = store.claim(at(4), at(300))
            assert claimed is not None
            assert claimed.id == kept.id
            claimed.ended, claimed.failed_at, claimed.result = "done", at(4), "7"
            claimed.expires_at = at(10_000)
            assert store.end(claimed, True)
            expected["done"] = [kept.id]

        for listed in LISTS:
            assert _ids(browse, listed, now=5) == expected[listed], listed
        [shown] = browse.browse("running", at(5))
        assert (shown.state, shown.since) == ("running", at(1))
        assert shown.job is not None
        assert shown.job.claimed_by == "host:1:abc", "the instance that runs it"
        [shown] = browse.browse("failed", at(5))
        assert (shown.state, shown.since) == ("failed", at(2))
        assert shown.job is not None
        assert shown.job.error == "refused"
        # At 400 the running job's hold has run out too: it waits again, after an attempt.
        assert _ids(browse, "running", now=400) == []
        assert running.id in _ids(browse, "retrying", now=400)
        assert _ids(browse, "waiting", now=400) == [due.id, later.id]

    def test_the_waiting_lists_page_the_oldest_first_each_job_once(self, store: Store) -> None:
        browse = _browse_store(store)
        times = [5, 1, 3, 1, 5, 2, 1]  # ties: in push order
        pushed = [job(run_at=at(t)) for t in times]
        for each in pushed:
            store.push(each)
        by_time = sorted(range(len(times)), key=lambda n: (times[n], n))
        order = [pushed[n].id for n in by_time]
        pages = _pages(browse, "waiting", now=10, limit=3)
        assert [len(page) for page in pages] == [3, 3, 1]
        assert [id for page in pages for id in page] == order
        # A job pushed between two pages, before where the first ended, is not listed on the next.
        first = browse.browse("waiting", at(10), limit=3)
        store.push(job(run_at=at(0)))
        rest = browse.browse("waiting", at(10), after=place_of("waiting", first[-1]), limit=10)
        assert [s.id for s in first + rest] == order

    def test_the_ended_lists_page_the_latest_first(self, store: Store) -> None:
        browse = _browse_store(store)
        ends = [3, 7, 3, 9, 1]
        failed: list[Job] = []
        for end in ends:
            pushed = job()
            store.push(pushed)
            claimed = _claim(store, pushed, now=0)
            claimed.error, claimed.failed_at = "refused", at(end)
            assert store.fail(claimed)
            failed.append(claimed)
        ended = sorted(failed, key=lambda j: (j.failed_at or at(0), int(j.id)), reverse=True)
        latest = [j.id for j in ended]
        pages = _pages(browse, "failed", now=20, limit=2)
        assert [len(page) for page in pages] == [2, 2, 1]
        assert [id for page in pages for id in page] == latest

    def test_a_list_of_one_kind_holds_that_kinds_jobs_alone(self, store: Store) -> None:
        browse = _browse_store(store)
        mails = [job(kind="mail"), job(kind="mail", run_at=at(2))]
        for pushed in (mails[0], job(kind="hook"), mails[1], job(kind="hook", run_at=at(1))):
            store.push(pushed)
        assert _ids(browse, "waiting", now=5, kind="mail") == [j.id for j in mails]
        assert _ids(browse, "waiting", now=5, kind="none") == []
        assert len(_ids(browse, "waiting", now=5)) == 4

    def test_a_list_by_a_text_holds_the_jobs_whose_value_has_it(self, store: Store) -> None:
        browse = _browse_store(store)
        values = ['{"to":"Ann@Example.com"}', '{"to":"bob"}', '{"note":"100%_off"}', '{"x":1}']
        pushed = [job(payload=value, run_at=at(i)) for i, value in enumerate(values)]
        for one in pushed:
            store.push(one)

        def found(text: str) -> list[str]:
            page = browse.browse("waiting", at(9), text=text, limit=500)
            return [status.id for status in page]

        assert found("ann@example") == [pushed[0].id], "ASCII letters in either case"
        assert found('"TO"') == [pushed[0].id, pushed[1].id]
        assert found("%_") == [pushed[2].id], "its wildcards are the text's own characters"
        assert found("0%") == [pushed[2].id]
        assert found("_") == [pushed[2].id]
        assert found("!") == []
        assert found("carol") == []
        assert browse.browse("waiting", at(9), kind="other", text="bob") == []

    def test_run_now_makes_a_job_waiting_for_later_due(self, store: Store) -> None:
        browse = _browse_store(store)
        later, backoff = job(kind="later", run_at=at(100)), job(kind="retried", priority=1)
        due, running = job(kind="due"), job(kind="running", run_at=at(1), priority=2)
        for pushed in (later, backoff, due, running):
            store.push(pushed)
        _claim(store, running, now=2)
        again = _claim(store, backoff, now=2)
        again.run_at, again.error = at(200), "refused"
        assert store.retry(again)

        ids = [later.id, backoff.id, due.id, running.id, "404", "no id"]
        assert browse.run_now(ids, at(10)) == 2, "the two waiting for later, and no other"
        assert browse.run_now([later.id], at(11)) == 0, "due already"
        assert browse.run_now([], at(11)) == 0
        claimed = [store.claim(at(11), at(300)) for _ in range(3)]
        assert {c.id for c in claimed if c is not None} == {later.id, backoff.id, due.id}
        assert _ids(browse, "scheduled", now=11) == []

    def test_pushed_says_each_schedules_latest_run(self, store: Store) -> None:
        browse = _browse_store(store)
        if not isinstance(store, ScheduleStore):
            pytest.skip("the store is not a ScheduleStore")
        assert browse.pushed() == {}
        assert store.push_scheduled("daily", job(kind="daily", run_at=at(60)))
        assert store.push_scheduled("daily", job(kind="daily", run_at=at(120)))
        assert not store.push_scheduled("daily", job(kind="daily", run_at=at(90)))
        assert store.push_scheduled("hourly", job(kind="hourly", run_at=at(30)))
        assert browse.pushed() == {"daily": at(120), "hourly": at(30)}

    def test_a_page_asked_of_no_list_or_of_too_many_jobs_is_refused(self, store: Store) -> None:
        browse = _browse_store(store)
        with pytest.raises(ValueError, match="no list"):
            browse.browse("lost", at(0))  # type: ignore[arg-type]
        for limit in (0, 501):
            with pytest.raises(ValueError, match="give 1 to 500"):
                browse.browse("waiting", at(0), limit=limit)
