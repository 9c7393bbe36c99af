"""A worker's health probes (jobq.probe), asked over real HTTP as Kubernetes asks them."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from datetime import datetime

import pytest

import jobq
from jobq import ConfigError, Process, StoreUnavailable
from jobq.probe import address
from jobq.testing import MemoryStore


class Outage(MemoryStore):
    """A MemoryStore whose beats fail while ``down``, as a database that stopped would."""

    down = False

    def beat(self, process: Process, gone_before: datetime) -> None:
        if self.down:
            raise StoreUnavailable("the database cannot be reached (it was stopped)")
        super().beat(process, gone_before)


async def _get(port: int, path: str, method: str = "GET") -> tuple[int, dict[str, object]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"{method} {path} HTTP/1.1\r\nHost: probe\r\n\r\n".encode())
    await writer.drain()
    said = await reader.read()
    writer.close()
    head, _, body = said.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    return status, json.loads(body) if body else {}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def working() -> AsyncIterator[tuple[Outage, jobq.Queue, int]]:
    store = Outage()
    queue = jobq.Queue(store, poll=0.05)

    @queue.kind("mail")
    async def mail(to: str) -> None: ...

    port = _free_port()
    worker = asyncio.create_task(jobq.work(queue, probe=("127.0.0.1", port)))
    for _ in range(200):
        if queue.ready()[0]:
            break
        await asyncio.sleep(0.01)
    yield store, queue, port
    queue.stop()
    await worker


async def test_a_working_queue_is_up_and_ready(working: tuple[Outage, jobq.Queue, int]) -> None:
    _, _, port = working
    assert await _get(port, "/healthz") == (200, {"status": "up"})
    assert await _get(port, "/readyz") == (200, {"ready": True, "reason": "the queue runs"})
    assert (await _get(port, "/jobs"))[0] == 404
    assert (await _get(port, "/readyz", "POST"))[0] == 405


async def test_readyz_turns_503_while_the_store_is_down_and_200_once_it_is_back(
    working: tuple[Outage, jobq.Queue, int],
) -> None:
    store, _, port = working
    store.down = True
    for _ in range(100):
        status, body = await _get(port, "/readyz")
        if status == 503:
            break
        await asyncio.sleep(0.02)
    assert status == 503
    assert "the database cannot be reached" in str(body["reason"]), body
    assert (await _get(port, "/healthz"))[0] == 200, "the process is still up"
    store.down = False
    for _ in range(100):
        status, body = await _get(port, "/readyz")
        if status == 200:
            break
        await asyncio.sleep(0.02)
    assert (status, body) == (200, {"ready": True, "reason": "the queue runs"})


async def test_a_queue_that_does_not_run_is_not_ready() -> None:
    assert jobq.Queue(MemoryStore()).ready() == (False, "the queue does not run")


@pytest.mark.parametrize(
    ("given", "expected"),
    [("8081", ("127.0.0.1", 8081)), ("0.0.0.0:9000", ("0.0.0.0", 9000)), ("[::1]:1", ("::1", 1))],
)
def test_a_probe_address_is_host_and_port(given: str, expected: tuple[str, int]) -> None:
    assert address(given) == expected


@pytest.mark.parametrize("given", ["", "host:", "host:http", "host:70000"])
def test_a_bad_probe_address_says_what_to_give(given: str) -> None:
    with pytest.raises(ConfigError, match="give HOST:PORT"):
        address(given)


async def test_a_port_taken_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        queue = jobq.Queue(MemoryStore())
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}"):
            await jobq.work(queue, probe=("127.0.0.1", port))
