"""`./myapp serve` as a user starts it, on a free loopback port, for the tests that drive it."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from apps import Installed

LIVENESS = 60.0  # seconds: far longer than any wait here takes on a loaded machine


def until(what: Callable[[], object], about: str, seconds: float = LIVENESS) -> None:
    """Wait until ``what()`` is so; fail the test after ``seconds``, saying ``about`` what."""
    deadline = time.monotonic() + seconds
    while not what():
        assert time.monotonic() < deadline, f"not so after {seconds}s: {about}"
        time.sleep(0.1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


@contextlib.contextmanager
def serving(
    app: Installed, env: dict[str, str], log: Path, port: int | None = None
) -> Iterator[int]:
    """``./myapp serve --port PORT``, its output in ``log``; stopped as Ctrl-C stops it."""
    port = port or free_port()
    with log.open("w") as out:
        server = subprocess.Popen(
            ["./" + app.folder.name, "serve", "--port", str(port)],
            cwd=app.folder,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        until(lambda: server.poll() is not None or listening(port), "the app listens")
        assert server.poll() is None, f"serve ended:\n{log.read_text()}"
        yield port
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(LIVENESS)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
