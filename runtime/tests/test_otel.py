"""A job's span is a child of the span it was pushed in, through jobq.otel's carrier."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Mapping

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import jobq
from jobq.otel import TraceCarrier, traced
from jobq.testing import MemoryStore

# A process sets its tracer provider once: these tests share one, in one worker.
pytestmark = pytest.mark.xdist_group("otel")

_exporter = InMemorySpanExporter()


@pytest.fixture(scope="module")
def provider() -> TracerProvider:
    """The process's tracer provider, as an app sets it up: it can be set once a process."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(_exporter))
    trace.set_tracer_provider(provider)
    return provider


@pytest.fixture
def spans(provider: TracerProvider) -> InMemorySpanExporter:
    _exporter.clear()
    return _exporter


def _tracer() -> trace.Tracer:
    return trace.get_tracer("test")


def test_a_jobs_span_is_a_child_of_the_span_it_was_pushed_in(
    spans: InMemorySpanExporter,
) -> None:
    q = jobq.Queue(MemoryStore(), carry=[TraceCarrier()])
    attempts: list[int] = []

    @q.kind("verify-mail", attempts=2, backoff=lambda n: 0)
    @traced
    async def verify(user: int) -> None:
        attempts.append(jobq.current_job().attempts)
        if len(attempts) == 1:
            raise ConnectionError("refused")

    with _tracer().start_as_current_span("POST /users"):
        job = verify.push(7)
    assert q.drain() == 2
    assert attempts == [1, 2]

    finished = spans.get_finished_spans()
    [request] = [s for s in finished if s.name == "POST /users"]
    runs = [s for s in finished if s.name == "verify-mail"]
    assert len(runs) == 2
    for run in runs:
        assert run.parent is not None
        assert run.parent.span_id == request.context.span_id
        assert run.context.trace_id == request.context.trace_id
        assert run.kind is trace.SpanKind.CONSUMER
        assert run.attributes is not None
        assert run.attributes["jobq.job"] == job
    first, second = sorted(runs, key=lambda s: s.start_time or 0)
    assert first.status.status_code is StatusCode.ERROR
    assert second.status.status_code is not StatusCode.ERROR


def test_a_plain_function_handler_is_traced_in_its_thread(
    spans: InMemorySpanExporter,
) -> None:
    q = jobq.Queue(MemoryStore(), carry=[TraceCarrier()])

    @q.kind("report")
    @traced
    def report(day: str) -> None:
        with _tracer().start_as_current_span("render"):
            pass

    with _tracer().start_as_current_span("nightly"):
        report.push("2026-11-30")
    q.drain()
    by_name = {s.name: s for s in spans.get_finished_spans()}
    assert by_name["report"].parent is not None
    assert by_name["report"].parent.span_id == by_name["nightly"].context.span_id
    assert by_name["render"].parent is not None
    assert by_name["render"].parent.span_id == by_name["report"].context.span_id


def test_a_push_outside_a_span_carries_nothing(spans: InMemorySpanExporter) -> None:
    q = jobq.Queue(MemoryStore(), carry=[TraceCarrier()])
    ran: list[tuple[dict[str, str] | None, bool]] = []

    @q.kind("mail")
    async def mail(user: int) -> None:
        span = trace.get_current_span().get_span_context()
        ran.append((jobq.current_job().carried, span.is_valid))

    mail.push(1)
    assert q.drain() == 1
    assert ran == [(None, False)]


class _Tampered:
    """Carries a traceparent that is no trace context, as a row changed by hand would."""

    def carry(self, into: dict[str, str]) -> None:
        into["traceparent"] = "00-not-a-trace-01"

    def restore(self, carried: Mapping[str, str]) -> None: ...


def test_a_tampered_traceparent_is_dropped_with_a_warning_and_the_job_runs(
    spans: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    q = jobq.Queue(MemoryStore(), carry=[_Tampered(), TraceCarrier()])
    ran: list[bool] = []

    @q.kind("mail")
    async def mail(user: int) -> None:
        ran.append(trace.get_current_span().get_span_context().is_valid)

    mail.push(1)
    with caplog.at_level(logging.WARNING, logger="jobq"):
        assert q.drain() == 1
    assert ran == [False]
    assert any(
        "a carrier did not restore" in r.getMessage()
        and "not a W3C trace context" in r.getMessage()
        for r in caplog.records
    )


def test_importing_jobq_does_not_import_opentelemetry() -> None:
    code = "import sys, jobq; print(any(m.startswith('opentelemetry') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
