"""OpenTelemetry for jobs: a job's spans join the trace of the code that pushed it.

Needs ``opentelemetry-api`` (``pip install 'jobq[otel]'``); ``import jobq``
does not import it, only ``import jobq.otel`` does::

    q = jobq.Queue(store, carry=[jobq.otel.TraceCarrier()])

    @q.kind("welcome-mail")
    @jobq.otel.traced
    async def welcome_mail(job: WelcomeMail) -> None: ...

``TraceCarrier`` carries the pushing context's trace (W3C ``traceparent``,
``tracestate`` and ``baggage``, or whatever propagators the app set) and
makes it current in the job's own context; ``traced`` runs the handler in a
span named for its kind, a child of the push's span. Without an SDK set up,
both cost next to nothing and carry nothing.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar, cast

from opentelemetry import context, propagate, trace
from opentelemetry.propagators.textmap import TextMapPropagator

from jobq.current import current_job

__all__ = ["TraceCarrier", "traced"]

F = TypeVar("F", bound=Callable[..., Any])


class TraceCarrier:
    """A ``jobq.Carrier`` of the pushing context's trace, through OpenTelemetry's propagators.

    ``propagator`` is the app's global one (``OTEL_PROPAGATORS``, W3C trace
    context and baggage by default) unless given, read at each push and run
    so that the SDK may be set up after the queue is made.
    """

    def __init__(self, propagator: TextMapPropagator | None = None) -> None:
        self.propagator = propagator

    def _propagator(self) -> TextMapPropagator:
        return self.propagator or propagate.get_global_textmap()

    def carry(self, into: dict[str, str]) -> None:
        """Put the current trace's headers in ``into`` (nothing outside a span)."""
        self._propagator().inject(into)

    def restore(self, carried: Mapping[str, str]) -> None:
        """Make the carried trace current in the job's context; ValueError for a bad traceparent."""
        propagator = self._propagator()
        fields = {k: v for k, v in carried.items() if k in propagator.fields}
        if not fields:
            return
        ctx = propagator.extract(fields)
        if "traceparent" in fields and not trace.get_current_span(ctx).get_span_context().is_valid:
            raise ValueError(f"traceparent {fields['traceparent']!r} is not a W3C trace context")
        # Never detached: the job's context is its own copy, dropped as the job ends.
        context.attach(ctx)


def traced(handler: F) -> F:
    """Run a kind's handler in a span named for its kind, with the job's ID and attempt.

    Put it under ``@q.kind(...)``. The span is a child of the push's span when
    the queue carries the trace (``TraceCarrier``); an error the handler
    raises is recorded on it, and it is set to ERROR.
    """
    if inspect.iscoroutinefunction(handler):
        run_async = cast("Callable[..., Awaitable[Any]]", handler)

        @functools.wraps(handler)
        async def traced_async(value: Any, *args: Any, **kwargs: Any) -> Any:
            with _span():
                return await run_async(value, *args, **kwargs)

        return cast("F", traced_async)

    @functools.wraps(handler)
    def traced_sync(value: Any, *args: Any, **kwargs: Any) -> Any:
        with _span():
            return handler(value, *args, **kwargs)

    return cast("F", traced_sync)


@contextmanager
def _span() -> Iterator[trace.Span]:
    job = current_job()
    tracer = trace.get_tracer("jobq")  # at each run: the provider the app has set by then
    with tracer.start_as_current_span(
        job.kind,
        kind=trace.SpanKind.CONSUMER,
        attributes={"jobq.kind": job.kind, "jobq.job": job.id, "jobq.attempt": job.attempts},
    ) as span:
        yield span
