"""The CPU time a database server has spent, read from /proc, for CPU per job in peers.py.

A server's CPU is its processes' user and system time: on PostgreSQL the
postmaster and every backend, with the backends that have ended counted in
the postmaster's children's time (it waits for each); on MariaDB the one
``mariadbd`` process. The server is found by the port of its URL, in the
command line that started it (scripts/dbservers.py gives each its own).
"""

from __future__ import annotations

import os
from pathlib import Path

import sqlalchemy as sa

__all__ = ["ServerCpu"]

_TICK = os.sysconf("SC_CLK_TCK")


class ServerCpu:
    """The CPU seconds a server has spent so far; ``None`` where it cannot be read."""

    def __init__(self, url: str) -> None:
        parsed = sa.make_url(url)
        self._port = parsed.port
        self._postgres = parsed.get_backend_name() == "postgresql"
        self._main = self._find() if parsed.get_backend_name() != "sqlite" else None

    def seconds(self) -> float | None:
        main = self._main
        if main is None:
            return None
        stat = _stat(main)
        if stat is None:
            return None
        utime, stime, cutime, cstime = stat
        total = utime + stime + cutime + cstime
        if self._postgres:
            for pid in _children(main):
                child = _stat(pid)
                if child is not None:
                    total += child[0] + child[1]
        return total / _TICK

    def _find(self) -> int | None:
        wanted = (f"-p {self._port}", f"--port={self._port}")
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if any(w + " " in line + " " for w in wanted) and (
                "postgres" in line or "mariadbd" in line or "mysqld" in line
            ):
                return int(entry.name)
        return None


def _stat(pid: int) -> tuple[int, int, int, int] | None:
    """utime, stime, cutime and cstime of a process, in clock ticks."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return int(fields[11]), int(fields[12]), int(fields[13]), int(fields[14])


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        if int(text[text.rindex(")") + 2 :].split()[1]) == pid:
            found.append(int(entry.name))
    return found
