"""The queue's Prometheus metrics: what its runs came to, and what the jobs table holds.

From the queue's ``observe`` (each instance counts its own runs):

- ``jobq_runs_total{kind, outcome}``: runs, by outcome (done, retried, failed, held back,
  snoozed, cancelled).
- ``jobq_run_seconds{kind}``: how long handlers ran (a histogram).
- ``jobq_wait_seconds{kind}``: how long jobs waited past their time before a
  worker took them (a histogram): a queue that falls behind shows here first.

Read from the store at each scrape, when it counts its jobs (``StatsStore``),
the same on every instance:

- ``jobq_jobs{kind, state}``: jobs due, later (waiting for their time),
  running (held by a worker), failed (for good), cancelled (or expired) and done
  (kept with its result, for a kind that keeps results).
- ``jobq_oldest_due_seconds{kind}``: how long the oldest due job has waited.

Each app has a registry of its own (not prometheus_client's global one), so
that tests and commands can make as many apps as they like. It needs
prometheus_client: install jobq with the ``metrics`` extra (``jobq[metrics]``).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from jobq.job import Outcome
from jobq.store import StatsStore

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from prometheus_client.metrics_core import Metric

    from jobq.job import Ran
    from jobq.store import Store

__all__ = ["Metrics"]

log = logging.getLogger(__name__)

# Seconds: from a no-op job's milliseconds to the 10-minute timeouts of the app's longest kinds.
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 600)


class Metrics:
    """The metrics of one app: pass ``observe`` to its queue, serve ``exposition()``."""

    content_type = CONTENT_TYPE_LATEST  # of the exposition

    def __init__(self, store: Store) -> None:
        self.registry = CollectorRegistry()
        self.runs = Counter(
            "jobq_runs",
            "Runs of jobs on this instance, by kind and outcome: done, retried, failed, "
            "held back, snoozed, cancelled.",
            ["kind", "outcome"],
            registry=self.registry,
        )
        self.took = Histogram(
            "jobq_run_seconds",
            "How long the handlers of jobs ran on this instance.",
            ["kind"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.waited = Histogram(
            "jobq_wait_seconds",
            "How long jobs waited past their time before a worker of this instance took them.",
            ["kind"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_StoreStats(store))

    def observe(self, ran: Ran) -> None:
        """Count one run: the queue's ``observe``."""
        self.runs.labels(ran.kind, str(ran.outcome)).inc()
        if ran.outcome is Outcome.HELD_BACK:
            return  # it never started: its wait is counted as it runs
        self.took.labels(ran.kind).observe(ran.took.total_seconds())
        self.waited.labels(ran.kind).observe(ran.waited.total_seconds())

    def observer(self, also: Callable[[Ran], None] | None = None) -> Callable[[Ran], None]:
        """``observe``, then ``also`` (the app's own), for a queue that takes one function."""
        if also is None:
            return self.observe
        then = also

        def both(ran: Ran) -> None:
            self.observe(ran)
            then(ran)

        return both

    def exposition(self) -> bytes:
        """The metrics in Prometheus's text format (reads the store: call it from a thread)."""
        return generate_latest(self.registry)


class _StoreStats(Collector):
    """Gauges read from the store at each scrape, when it counts its jobs by kind and state."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def describe(self) -> Iterable[Metric]:
        return []  # so that registering it reads nothing from the database

    def collect(self) -> Iterable[Metric]:
        store = self.store
        if not isinstance(store, StatsStore):
            return []
        now = datetime.now(UTC)
        try:
            stats = store.stats(now)
        except Exception as e:  # the run metrics are still worth a scrape
            log.warning("the jobs table could not be counted for /metrics: %s", e)
            return []
        jobs = GaugeMetricFamily(
            "jobq_jobs",
            "Jobs the store keeps, by kind and state: due, later (waiting for their time), "
            "running (held by a worker), failed (for good), cancelled (or expired), done "
            "(kept with its result).",
            labels=["kind", "state"],
        )
        oldest = GaugeMetricFamily(
            "jobq_oldest_due_seconds",
            "How long the oldest due job of each kind has waited past its time (0 for none).",
            labels=["kind"],
        )
        for kind in stats:
            for state in ("due", "later", "running", "failed", "cancelled", "done"):
                jobs.add_metric([kind.kind, state], getattr(kind, state))
            lag = 0.0 if kind.oldest_due is None else (now - kind.oldest_due).total_seconds()
            oldest.add_metric([kind.kind], max(lag, 0.0))
        return [jobs, oldest]
