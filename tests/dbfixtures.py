"""A fresh, empty database per test on a real server, dropped after it.

Self-contained on purpose: the generated apps copy `fresh_database` into their
own conftest. The server URLs come from scripts/dbservers.py (see ENV).
"""

from __future__ import annotations

import re
import secrets
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.pool import NullPool

if TYPE_CHECKING:
    from collections.abc import Iterator

# Set by `python scripts/dbservers.py run -- ...` (which scripts/test uses).
ENV = {"postgres": "JOBQ_TEST_POSTGRES_URL", "mysql": "JOBQ_TEST_MYSQL_URL"}


@contextmanager
def fresh_database(server_url: str, prefix: str) -> Iterator[str]:
    """Create database `t_<prefix>_<random hex>` on the server; yield its URL; drop it."""
    url = sa.make_url(server_url)
    name = f"t_{re.sub(r'[^a-z0-9_]+', '_', prefix.lower())[:40]}_{secrets.token_hex(4)}"
    postgres = url.get_backend_name() == "postgresql"
    # AUTOCOMMIT: Postgres runs no CREATE/DROP DATABASE inside a transaction.
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name}")
        try:
            yield url.set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                if postgres:  # FORCE (PG 13+) ends the connections a test left open
                    conn.exec_driver_sql(f"DROP DATABASE {name} WITH (FORCE)")
                else:  # MySQL: end them by hand, or DROP waits on their locks
                    ids = conn.exec_driver_sql(
                        "SELECT id FROM information_schema.processlist"
                        " WHERE db = %s AND id <> CONNECTION_ID()",
                        (name,),
                    ).scalars()
                    for conn_id in ids.all():
                        with suppress(sa.exc.DBAPIError):  # it may have ended by itself
                            conn.exec_driver_sql(f"KILL {int(conn_id)}")
                    conn.exec_driver_sql(f"DROP DATABASE {name}")
    finally:
        admin.dispose()
