"""A worker's health probes over HTTP, for Kubernetes or a load balancer: ``GET /healthz`` and
``GET /readyz``, on a port of their own.

``/healthz`` answers 200 while the process answers at all. ``/readyz`` answers
200 while its queue is ready (``Queue.ready``: it ticked within two polls, its
store answering), and 503 otherwise, each with one line of JSON that says why.
They say nothing of any job. A few dozen lines of asyncio, not a web framework:
a worker serves nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import json

from jobq.errors import ConfigError
from jobq.queue import Queue

__all__ = ["address", "answer", "serve"]

_READ_FOR = 5.0  # seconds a probe's request may take to arrive


def address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``PORT``, on 127.0.0.1) as the probes' address; ConfigError if not."""
    host, _, port = text.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(
            f"probe is {text!r}: give HOST:PORT (or PORT, on 127.0.0.1), a port from 0 to 65535"
        )
    return host, int(port)


def answer(queue: Queue, path: str) -> tuple[int, dict[str, object]]:
    """The status and JSON body of a GET of ``path``."""
    if path == "/healthz":
        return 200, {"status": "up"}
    if path == "/readyz":
        ready, why = queue.ready()
        return (200 if ready else 503), {"ready": ready, "reason": why}
    return 404, {"error": "not found: GET /healthz or /readyz"}


async def serve(queue: Queue, host: str, port: int) -> asyncio.Server:
    """Answer the probes of ``queue`` on ``host``:``port`` (0: any free port) until the
    server returned is closed."""

    async def respond(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readline(), _READ_FOR)
            while (await asyncio.wait_for(reader.readline(), _READ_FOR)).strip():
                pass  # the headers: nothing in them changes the answer
            method, path, *_ = [*request.decode("latin-1").split(), "", ""]
            body: dict[str, object]
            if method not in ("GET", "HEAD"):
                status, body = 405, {"error": "GET /healthz or /readyz"}
            else:
                status, body = answer(queue, path.split("?")[0])
            text = json.dumps(body).encode() + b"\n"
            writer.write(
                f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(text)}\r\nConnection: close\r\n\r\n".encode()
                + (text if method != "HEAD" else b"")
            )
            await writer.drain()
        except (TimeoutError, ConnectionError, UnicodeDecodeError):
            pass  # a probe that hung up or never asked: nothing to answer
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    try:
        return await asyncio.start_server(respond, host, port)
    except OSError as error:
        raise ConfigError(
            f"the probes cannot listen on {host}:{port} ({error.strerror or error}): "
            "give another --probe address, or stop what listens there"
        ) from error


_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}
