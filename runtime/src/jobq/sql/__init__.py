"""The store kit: what a SQL Store needs that is not its SQL.

An app's ``jobs_db.py`` holds its jobs table's schema and SQL: a subclass of its
database's ``SQL`` that names each statement, and a subclass of its ``Table``
that points at it. The kit holds the rest, kept here so that a fix reaches
every app with jobq, not through a merge of its store file:

- ``jobq.sql.table``: ``Table``, the Store's methods written once over a
  ``Driver``, the one interface each database's module gives, and the
  statement names every database shares (no database library);
- ``jobq.sql.rows``: a job's columns, in and out, and its stats (no database
  library);
- ``jobq.sql.sqlite``: its ``SQL`` names, ``Driver`` and ``Table``; the engine
  (pragmas, ``BEGIN IMMEDIATE``), the statements straight on sqlite3, the kept
  connection for pushes and its fork guard, and SQLite's errors as
  ``StoreLocked`` / ``StoreUnavailable``;
- ``jobq.sql.postgres`` and ``jobq.sql.mysql``: each one's ``SQL`` names,
  ``Driver`` and ``Table``; the engine (its lock, connect and read timeouts),
  the statements straight on psycopg or PyMySQL, in
  autocommit on the store's own pool (``jobq.sql.pool``) or in a transaction,
  a statement that deadlocked run once more, Postgres's LISTEN thread, and
  each server's error codes as jobq's portable errors;
- in each database's module, ``claim`` and ``settle``: the Python of a batch
  claim and settle (rounds or passes, lock rows in order, read-backs), around
  the statements its ``Driver`` gives them (``ClaimStatements``, ``SettleStatements``);
- ``jobq.sql.engine``: what the server engines share (their timeouts' checks,
  a pool with no connection free);
- ``jobq.sql.process``: the process a kept connection belongs to (a fork makes
  its own).

Each database's module needs SQLAlchemy and its driver: install jobq with the
extra (``jobq[sqlite]``, ``jobq[postgres]``, ``jobq[mysql]``). ``import jobq``
imports none of them.

Stability: the names each module lists in its ``__all__`` are public. Like
River's driver interface, the kit is for store authors and moves with jobq's
minor versions: a change to it is in the changelog, and a name it drops
stays, with a DeprecationWarning, for one release.
"""

from __future__ import annotations

__all__: list[str] = []
