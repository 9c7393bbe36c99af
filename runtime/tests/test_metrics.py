"""jobq.metrics: the queue's runs and the store's counts, in Prometheus's text format (ported from
the template's app, which keeps its /metrics route and its token)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client.parser import text_string_to_metric_families

import jobq
from jobq.metrics import Metrics
from jobq.testing import MemoryStore


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Each sample of a scrape, by its name and labels."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_metrics_show_the_runs_and_the_counts_of_the_stores_jobs() -> None:
    store = MemoryStore()
    metrics = Metrics(store)
    ran: list[jobq.Ran] = []
    queue = jobq.Queue(store, workers=1, observe=metrics.observer(ran.append))

    @queue.kind("welcome-mail", attempts=1)
    def welcome_mail(user: int) -> None:
        if user == 404:
            raise jobq.Permanent("user 404 has gone")

    welcome_mail.push(1)
    welcome_mail.push(404)
    welcome_mail.push_at(datetime.now(UTC) + timedelta(hours=1), 2)
    dropped = welcome_mail.push_at(datetime.now(UTC) + timedelta(hours=1), 3)
    assert queue.cancel(dropped)
    assert queue.drain() == 2
    assert len(ran) == 2, "the app's own observe too"
    assert metrics.content_type.startswith("text/plain")
    samples = _samples(metrics.exposition().decode())
    mail = (("kind", "welcome-mail"),)

    def runs(outcome: str) -> float:
        return samples.get(("jobq_runs_total", (("kind", "welcome-mail"), ("outcome", outcome))), 0)

    assert (runs("done"), runs("failed"), runs("retried")) == (1, 1, 0)
    assert samples[("jobq_run_seconds_count", mail)] == 2
    assert samples[("jobq_wait_seconds_count", mail)] == 2
    counts = {
        state: samples[("jobq_jobs", (("kind", "welcome-mail"), ("state", state)))]
        for state in ("due", "later", "running", "failed", "cancelled", "done")
    }
    assert counts == {"due": 0, "later": 1, "running": 0, "failed": 1, "cancelled": 1, "done": 0}
    assert samples[("jobq_oldest_due_seconds", mail)] == 0


def test_a_store_that_counts_nothing_has_the_run_metrics_alone(plain_store: jobq.Store) -> None:
    samples = _samples(Metrics(plain_store).exposition().decode())
    assert not [name for name, _ in samples if name == "jobq_jobs"]


def test_a_count_that_fails_is_a_warning_and_the_scrape_still_has_the_runs(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = MemoryStore()

    def down(now: datetime) -> list[jobq.KindStats]:
        raise jobq.StoreUnavailable("the database is down")

    monkeypatch.setattr(store, "stats", down)
    metrics = Metrics(store)
    metrics.observe(
        jobq.Ran(
            kind="mail",
            job="1",
            attempt=1,
            outcome=jobq.Outcome.DONE,
            error=None,
            took=timedelta(seconds=1),
            waited=timedelta(0),
        )
    )
    with caplog.at_level(logging.WARNING):
        samples = _samples(metrics.exposition().decode())
    assert samples[("jobq_runs_total", (("kind", "mail"), ("outcome", "done")))] == 1
    assert "could not be counted for /metrics: the database is down" in caplog.text
