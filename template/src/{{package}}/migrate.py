"""Run the app's migrations: the template's branch ("jobs") and the app's own ("app").

What is done with them is jobq's (jobq.sql.migrations), the same in every app;
here are the app's folder of migrations, its engine, and the names its
commands, server and tests use.
"""

from __future__ import annotations

from pathlib import Path

from jobq.sql.migrations import TABLES, Migrations, Unmigrated

from . import settings
from .jobs_db import make_engine

__all__ = [
    "MIGRATIONS",
    "TABLES",
    "Unmigrated",
    "check",
    "config",
    "current",
    "current_at",
    "heads",
    "migrate",
    "missing_columns",
    "revisions",
    "upgrade",
]

MIGRATIONS = Path(__file__).parent / "migrations"

_MIGRATIONS = Migrations(MIGRATIONS, make_engine, app=f"./{settings.APP_NAME}", tables=TABLES)
config, revisions, heads = _MIGRATIONS.config, _MIGRATIONS.revisions, _MIGRATIONS.heads
migrate, upgrade, check = _MIGRATIONS.migrate, _MIGRATIONS.upgrade, _MIGRATIONS.check
current, current_at = _MIGRATIONS.current, _MIGRATIONS.current_at
missing_columns = _MIGRATIONS.missing_columns
