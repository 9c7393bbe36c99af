"""A database of its own for a benchmark: a SQLite file, or a fresh database on a test server."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from dbfixtures import ENV, fresh_database

if TYPE_CHECKING:
    from collections.abc import Iterator


@contextlib.contextmanager
def database(db: str, prefix: str, folder: Path | None = None) -> Iterator[str]:
    """A URL of an empty database of ``db``, dropped (or its folder deleted) after the block.

    SQLite's file goes in ``folder`` when given, else in a temporary folder.
    The servers are the ones ``scripts/dbservers.py`` starts and names in ENV;
    without them the benchmark exits, saying how to run it.
    """
    if db == "sqlite":
        if folder is not None:
            yield f"sqlite:///{folder}/{prefix}.sqlite3"
            return
        with tempfile.TemporaryDirectory() as temporary:
            yield f"sqlite:///{temporary}/{prefix}.sqlite3"
        return
    server = os.environ.get(ENV[db])
    if not server:
        script = Path(sys.argv[0]).as_posix()
        sys.exit(
            f"{ENV[db]} is not set: run this through `python scripts/dbservers.py run -- "
            f"python {script}`, or pass --only sqlite"
        )
    with fresh_database(server, f"{prefix}_{db}") as url:
        yield url
