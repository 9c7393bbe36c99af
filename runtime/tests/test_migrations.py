"""jobq.sql.migrations: an app's migrations read without Alembic (their heads, the database's
place) and each way a database is not migrated said with what to type."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from jobq.sql.migrations import Migrations, Unmigrated


def _version(folder: Path, revision: str, down: str | None, branch: str | None = None) -> None:
    labels = f"({branch!r},)" if branch else "None"
    (folder / "versions" / f"{revision}.py").write_text(
        f'revision = "{revision}"\n'
        f"down_revision: str | None = {down!r}\n"
        f"branch_labels: tuple[str, ...] | None = {labels}\n"
    )


@pytest.fixture
def migrations(tmp_path: Path) -> Migrations:
    folder = tmp_path / "migrations"
    (folder / "versions").mkdir(parents=True)
    _version(folder, "0001_jobs", None, "jobs")
    _version(folder, "0002_jobs", "0001_jobs")
    _version(folder, "app_0001", None, "app")
    return Migrations(folder, sa.create_engine, app="./shop")


@pytest.fixture
def engine(tmp_path: Path) -> sa.Engine:
    return sa.create_engine(f"sqlite:///{tmp_path}/app.sqlite3")


def _at(engine: sa.Engine, *revisions: str) -> None:
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE alembic_version (version_num VARCHAR(32))")
        for revision in revisions:
            conn.execute(sa.text("INSERT INTO alembic_version VALUES (:r)"), {"r": revision})


def test_the_heads_and_revisions_are_read_from_the_files(migrations: Migrations) -> None:
    assert migrations.heads() == ["0002_jobs", "app_0001"]
    assert migrations.revisions() == {"0001_jobs", "0002_jobs", "app_0001"}


def test_a_database_at_the_heads_is_migrated(migrations: Migrations, engine: sa.Engine) -> None:
    _at(engine, "app_0001", "0002_jobs")
    migrations.check(engine)
    assert migrations.current(engine) == ["0002_jobs", "app_0001"]


def test_each_database_not_migrated_says_what_to_type(
    migrations: Migrations, engine: sa.Engine, tmp_path: Path
) -> None:
    with pytest.raises(Unmigrated, match=r"none of the app's tables: run \./shop migrate$"):
        migrations.check(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE jobs (id INTEGER PRIMARY KEY)")
    with pytest.raises(Unmigrated, match=r"record so with \./shop migrate --stamp"):
        migrations.check(engine)
    behind = sa.create_engine(f"sqlite:///{tmp_path}/behind.sqlite3")
    _at(behind, "0001_jobs", "app_0001")
    with pytest.raises(Unmigrated, match=r"needs 0002_jobs, app_0001: run \./shop migrate$"):
        migrations.check(behind)
    ahead = sa.create_engine(f"sqlite:///{tmp_path}/ahead.sqlite3")
    _at(ahead, "0003_jobs", "app_0001")
    with pytest.raises(Unmigrated, match=r"at 0003_jobs, which this version of the app does not"):
        migrations.check(ahead)


def test_the_columns_a_hand_dropped_are_named(migrations: Migrations, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/dropped.sqlite3"
    with sa.create_engine(url).begin() as conn:
        conn.exec_driver_sql("CREATE TABLE jobs (id INTEGER PRIMARY KEY, kind TEXT)")
    missing = migrations.missing_columns(url)
    assert "jobs.payload" in missing
    assert "jobs.kind" not in missing


def test_a_migrate_that_commits_between_the_checks_reads_is_never_taken_for_unversioned_tables(
    migrations: Migrations, engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three `migrate`s at once: the second read what the first had not yet committed, then
    what it had. Whichever read comes first, a whole migration (alembic_version and the
    tables in one transaction) reads as migrated or as not begun."""
    real = sa.engine.reflection.Inspector.has_table
    reads: list[str] = []

    def has_table(self: sa.Inspector, name: str, *args: Any, **kwargs: Any) -> bool:
        found = real(self, name, *args, **kwargs)
        reads.append(name)
        if len(reads) == 1:  # another migrate commits, just after this first read
            _at(engine, "app_0001", "0002_jobs")
            with engine.begin() as conn:
                conn.exec_driver_sql("CREATE TABLE jobs (id INTEGER PRIMARY KEY)")
        return found

    monkeypatch.setattr(sa.engine.reflection.Inspector, "has_table", has_table)
    # What `migrate` reads before it takes the migrations' lock: the app's tables without
    # an alembic_version, which it would refuse to migrate over.
    assert migrations._unversioned(engine) == []
    assert len(reads) > 1
    migrations.check(engine)  # at the heads


def test_a_check_that_meets_a_migrate_committing_between_its_reads_finds_the_database_migrated(
    migrations: Migrations, engine: sa.Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`serve` starting while `migrate` commits: its check read no alembic_version, then
    the tables with their version, and must not say the database has none of them."""
    real = sa.engine.reflection.Inspector.has_table
    reads: list[str] = []

    def has_table(self: sa.Inspector, name: str, *args: Any, **kwargs: Any) -> bool:
        found = real(self, name, *args, **kwargs)
        reads.append(name)
        if len(reads) == 1:  # the check's first read: migrate commits just after it
            _at(engine, "app_0001", "0002_jobs")
            with engine.begin() as conn:
                conn.exec_driver_sql("CREATE TABLE jobs (id INTEGER PRIMARY KEY)")
        return found

    monkeypatch.setattr(sa.engine.reflection.Inspector, "has_table", has_table)
    migrations.check(engine)
    assert reads[0] == "alembic_version"  # read before the migrate committed
