"""The jobs table as a jobq Store: its methods written once, over a database's driver.

An app's ``jobs_db.py`` is its database's SQL: a subclass of its kit's ``SQL``
(``jobq.sql.sqlite.SQL``, ``jobq.sql.postgres.SQL``, ``jobq.sql.mysql.SQL``)
that names each statement, and a subclass of its kit's ``Table`` that points at
it. ``Table`` is the Store, with every extra a SQL table keeps; its methods are
the same on every database, and what differs (how a push, a claim, a settle,
a put-back or a cancel runs its statements) is the ``Driver``'s.

A statement that an app writes its own way is an override of that name in its
``SQL``; the conformance suite (``jobq.testing``) tells it whether the statement
still keeps the Store's promises.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol, Self, TypeVar

from jobq.batch import WAITS
from jobq.errors import ConfigError
from jobq.process import Process
from jobq.sql import browse, rows, tallies, workflow
from jobq.sql.workflow import Ended, WorkflowSQL
from jobq.workflow import keyless

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from sqlalchemy.engine import Connection, Engine

    from jobq.batch import Batch
    from jobq.job import Claimant, Job
    from jobq.listing import Listed, Place
    from jobq.stats import KindStats
    from jobq.status import Status
    from jobq.tally import Tally

    # What a settle runs after its statements, in its transaction, given the IDs it kept:
    # how a batch's member's end is counted with it (jobq.sql.workflow).
    Then = Callable[[rows.Statements, list[str]], None]

__all__ = ["Driver", "FOREVER", "SQL", "Table", "check", "fill", "statement"]

_F = TypeVar("_F", bound="Callable[..., str]")

FOREVER = 2**63 - 1  # a pause until resumed: a BIGINT's largest time


def _ended(how: str) -> str:
    """The jobs that ended ``how``, the latest first. A job ended when failed_at is set;
    ended says how (NULL: failed, before 0004_jobs)."""
    return f"""
        SELECT {rows.JOB_COLUMNS} FROM jobs
        WHERE failed_at IS NOT NULL AND {how} ORDER BY failed_at DESC, id DESC
        """


def _again(clears: str, only: str) -> str:
    """A job that ended (not done) due again at ``:run_at``, with no attempts, and ``clears``;
    of the jobs ``only`` says."""
    return f"""
        UPDATE jobs SET failed_at = NULL, ended = NULL, cancel_asked = NULL, attempts = 0,
            run_at = :run_at, held_until = 0, {clears}waiting = NULL
        WHERE id = :id AND failed_at IS NOT NULL AND (ended IS NULL OR ended <> 'done') {only}
        """


class SQL(WorkflowSQL):
    """The statements a jobs table names on every database. Each database's kit adds the
    statements of its own claim, settle and pushes.

    Each is a ``str`` with ``:name`` parameters; times are Unix milliseconds, an ID
    the integer key:

    - ``failed``, ``cancelled``: the jobs that ended failed (``ended`` NULL or
      'failed'), or cancelled or expired, ``rows.JOB_COLUMNS``, the latest first;
    - ``run_again``: the job ``:id``, ended but not done, due again at ``:run_at``
      with no attempts, its ``progress`` and ``checkpoint`` gone;
      ``run_again_from_checkpoint``: the same,
      keeping them;
    - ``end``: the claimed job ``:id`` (fenced by ``:attempts`` and its hold; a done
      one by no cancel asked) ended as ``rows.ended`` says; a row changed (or, on a
      database that says so, returned) means it ended;
    - ``asked``: of the jobs ``:ids``, those not ended whose cancel was asked;
    - ``discard``, ``discard_all``: delete the ended jobs (of ``:ids``), not the done;
    - ``run_now``: of the jobs ``:ids``, those waiting for later, due at ``:now``;
    - ``status``: the job ``:id``, ``rows.STATUS_COLUMNS``;
    - ``stats``: each kind's counts at ``:now``, as ``rows.stats`` reads them;
    - ``waiting``: ``(id, run_at)`` of the job of kind ``:kind`` that waits with the key
      ``:unique_key``;
    - ``expire``: the jobs past their ``expires_at`` at ``:now`` that never ran, ended;
    - ``pause``: the kind ``:kind`` paused until ``:until`` (``FOREVER``: resumed by
      hand), never shortening a rate's hold; ``resume``: its pause ended;
      ``paused``: ``(kind, until)`` of the kinds paused at ``:now``;
    - ``prune``: the ended jobs, deleted: a done one kept with its result once past its
      ``expires_at`` (at ``:now``), the others ended before ``:before``;
      ``prune_kinds``: the kinds whose hold or pause ended before ``:now``;
      ``prune_locks`` (Postgres and MySQL): the lock rows of keys no job has;
    - ``beat``: the process ``:id`` recorded, or its row's every column replaced
      (``:host``, ``:pid``, ``:role``, ``:kinds``, a JSON array or NULL for every kind,
      ``:workers``, ``:started_at``, ``:beat_at``); ``stale_processes``: a row when a
      process's ``beat_at`` is before ``:gone_before``, and ``prune_processes`` those
      deleted; ``processes``: every process, its
      columns in that order; ``leave``: the process ``:id`` deleted;
    - ``record``: the claimed job ``:id`` (fenced by ``:attempts`` and its hold, as a
      renewal is) with each of ``:progress``, ``:metadata``, ``:checkpoint`` that is
      not NULL written; a row changed means it was written.

    ``asked``, ``discard`` and ``run_now`` are each kit's, as its ``Driver.ids`` gives
    the IDs; the rest but ``end`` and ``stats`` are defaults here.
    """

    end: str
    asked: str
    discard: str
    run_now: str
    stats: str

    # The statements the same on every database, each a default a database's SQL may
    # override (as jobq.sql.browse's and jobq.sql.tallies' are the same everywhere).

    failed = _ended("(ended IS NULL OR ended = 'failed')")
    cancelled = _ended("ended IN ('cancelled', 'expired')")
    # From scratch: its checkpoint and progress go (the next keeps them); metadata stays.
    # Not a batch's: the kit runs member_again for one, and counts it pending again.
    run_again = _again("progress = NULL, checkpoint = NULL, ", "AND batch_id IS NULL")
    run_again_from_checkpoint = _again("", "AND batch_id IS NULL")
    member_again = _again("progress = NULL, checkpoint = NULL, ", "")
    member_again_from_checkpoint = _again("", "")
    # A done job kept with its result is not discarded: the prune deletes it in its time.
    discard_all = "DELETE FROM jobs WHERE failed_at IS NOT NULL AND coalesce(ended, '') <> 'done'"
    # One job, with its hold and when its latest claim took it, for its status.
    status = f"SELECT {rows.STATUS_COLUMNS} FROM jobs WHERE id = :id"
    waiting = "SELECT id, run_at FROM jobs WHERE kind = :kind AND unique_key = :unique_key"
    # The jobs that waited past their expires_at, before any attempt began, end "expired"
    # then, their keys let go; jobs_expires finds them (0005_jobs). MySQL's SQL writes
    # its own, in two steps.
    expire = """
        UPDATE jobs SET ended = 'expired', failed_at = expires_at, unique_key = NULL, held_until = 0
        WHERE expires_at <= :now AND failed_at IS NULL AND held_until <= :now
          AND attempts = 0 AND snoozes = 0 AND batch_id IS NULL AND awaited IS NULL
        """
    # A pause replaces the kind's pause before it, but never shortens a rate's hold.
    # ON CONFLICT: SQLite's and Postgres's upsert, as beat's; MySQL's SQL writes its own.
    pause = """
        INSERT INTO held_kinds (kind, held_until, paused) VALUES (:kind, :until, true)
        ON CONFLICT (kind) DO UPDATE SET paused = true, held_until = CASE
            WHEN held_kinds.paused OR held_kinds.held_until < excluded.held_until
            THEN excluded.held_until ELSE held_kinds.held_until END
        """
    resume = "UPDATE held_kinds SET paused = false, held_until = 0 WHERE kind = :kind AND paused"
    paused = "SELECT kind, held_until FROM held_kinds WHERE paused AND held_until > :now"
    prune = """
        DELETE FROM jobs WHERE failed_at IS NOT NULL AND CASE WHEN ended = 'done'
            THEN coalesce(expires_at, 0) <= :now ELSE failed_at < :before END
        """
    # A rate's hold-backs leave a row a kind.
    prune_kinds = "DELETE FROM held_kinds WHERE held_until < :now"
    prune_locks = """
        DELETE FROM job_locks WHERE alone_key <> '' AND NOT EXISTS (
            SELECT 1 FROM jobs
            WHERE jobs.kind = job_locks.kind AND jobs.alone_key = job_locks.alone_key
        )
        """
    # ON CONFLICT: SQLite's and Postgres's upsert; MySQL's SQL writes its own.
    beat = """
        INSERT INTO job_processes (id, host, pid, role, kinds, workers, started_at, beat_at)
        VALUES (:id, :host, :pid, :role, :kinds, :workers, :started_at, :beat_at)
        ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid,
            role = excluded.role, kinds = excluded.kinds, workers = excluded.workers,
            started_at = excluded.started_at, beat_at = excluded.beat_at
        """
    # A beat deletes the processes gone only when a read that locks nothing finds one:
    # beats of many processes at once then never meet in a DELETE (MySQL deadlocked so).
    stale_processes = "SELECT 1 FROM job_processes WHERE beat_at < :gone_before LIMIT 1"
    prune_processes = "DELETE FROM job_processes WHERE beat_at < :gone_before"
    processes = "SELECT id, host, pid, role, kinds, workers, started_at, beat_at FROM job_processes"
    leave = "DELETE FROM job_processes WHERE id = :id"
    record = """
        UPDATE jobs SET progress = coalesce(:progress, progress),
            metadata = coalesce(:metadata, metadata), checkpoint = coalesce(:checkpoint, checkpoint)
        WHERE id = :id AND attempts = :attempts AND failed_at IS NULL AND held_until > 0
        """


def statement(made: _F) -> _F:
    """Marks a kit's ``SQL`` method that makes a statement (for how many jobs, say) as one an
    app's ``SQL`` must write: ``check`` names it while the app has not."""
    made.__jobq_unwritten__ = True  # type: ignore[attr-defined]
    return made


def fill(sql: SQL, name: str, **parts: str) -> str:
    """``sql``'s statement ``name`` with each ``{part}`` in it written as ``parts`` says.

    How a kit makes a statement's variants (for the claimant's kinds, for how many
    rows) from the one flat text an app writes: a plain replace, no format, so the
    statement's other braces stay as they are. ConfigError when a part is not there.
    """
    statement = getattr(sql, name)
    if not isinstance(statement, str):
        raise ConfigError(
            f"{type(sql).__qualname__}.{name} is not a statement's text: write it as one "
            f"string, with {', '.join('{' + part + '}' for part in parts)} where the kit fills in"
        )
    for part, text in parts.items():
        slot = "{" + part + "}"
        if slot not in statement:
            raise ConfigError(
                f"{type(sql).__qualname__}.{name} has no {slot}, where the kit writes the "
                f"statement's {part}: the template's jobs_db.py shows where it goes"
            )
        statement = statement.replace(slot, text)
    return statement


def check(sql: SQL) -> None:
    """ConfigError unless ``sql`` names every statement its class declares, and writes every
    method ``statement`` marks."""
    declared = {
        name for klass in type(sql).__mro__ for name in getattr(klass, "__annotations__", {})
    }
    missing = sorted(
        {name for name in declared if getattr(sql, name, None) is None}
        | {name for name in dir(sql) if getattr(getattr(sql, name), "__jobq_unwritten__", False)}
    )
    if missing:
        raise ConfigError(
            f"{type(sql).__qualname__} names no statement {', '.join(missing)}: "
            f"add {'them' if len(missing) > 1 else 'it'} to the app's jobs_db.py "
            f"(the template's jobs_db.py has each)"
        )


class Driver(Protocol):
    """What a database's kit does with a table's statements (``sql``).

    ``read`` runs a read alone; ``change`` a write alone, which is a transaction
    of its own, saying how many rows it changed; ``write`` a few statements in
    one transaction. Bound to the app's connection (``bind``), each runs in the
    app's transaction. ``ids`` is a list of IDs as the database's ``:ids``
    parameter takes it. The rest are the operations whose Python differs by
    database; each keeps the promise of the Store method of its name.
    """

    @property
    def sql(self) -> SQL: ...

    def bind(self, connection: Connection) -> Self: ...

    def read(self, statement: Any, params: Mapping[str, Any]) -> list[tuple[Any, ...]]: ...

    def change(self, statement: Any, params: Mapping[str, Any]) -> int: ...

    def write(self, work: Callable[[rows.Statements], Any]) -> Any: ...

    def ids(self, ids: list[int]) -> Any: ...

    def push(self, job: Job) -> None: ...

    def push_unique(self, job: Job) -> bool: ...

    def push_latest(self, job: Job) -> None: ...

    def push_many(self, jobs: Sequence[Job], latest: bool) -> list[bool]: ...

    # ``push_many`` through the statements of a ``write`` under way: its own kind of them.
    def push_many_in(self, sql: Any, jobs: Sequence[Job], latest: bool) -> list[bool]: ...

    def push_scheduled(self, schedule: str, job: Job) -> bool: ...

    def claim(
        self, now: datetime, until: datetime, most: int, by: Claimant | None
    ) -> list[Job]: ...

    def settle(
        self,
        done: Sequence[Job],
        retry: Sequence[Job],
        fail: Sequence[Job],
        then: Then | None = None,
    ) -> list[str]: ...

    def renew(self, jobs: Sequence[Job], until: datetime) -> list[str]: ...

    def put_back(self, job: Job, snoozed_until: datetime | None, hold: datetime | None) -> bool: ...

    def cancel(self, id: int, now: datetime) -> Literal["cancelled", "asked"] | None: ...

    def expire(self, now: datetime) -> int: ...

    def prune(self, before: datetime, now: datetime) -> int: ...


class Table:
    """The jobs table: a jobq Store with every extra a SQL table keeps, each operation a
    transaction of its own, or, bound (``bind``), in the app's.

    A database's kit subclasses it with its driver; an app subclasses that with
    its ``sql``.
    """

    sql: ClassVar[SQL]
    engine: Engine  # the database's, as the table was made with it

    def __init__(self, driver: Driver) -> None:
        self._driver = driver

    def bind(self, connection: Connection) -> Self:
        """The same table through ``connection``'s transaction: a push is kept as it commits,
        or not at all."""
        bound = copy.copy(self)
        bound._driver = self._driver.bind(connection)
        return bound

    # Store

    def push(self, job: Job) -> None:
        self._driver.push(job)

    def claim(self, now: datetime, until: datetime, by: Claimant | None = None) -> Job | None:
        claimed = self._driver.claim(now, until, 1, by)
        return claimed[0] if claimed else None

    def done(self, job: Job) -> bool:
        return bool(self.settle_many(done=(job,)))

    def retry(self, job: Job) -> bool:
        return bool(self._driver.settle((), (job,), ()))

    def fail(self, job: Job) -> bool:
        return bool(self.settle_many(fail=(job,)))

    # BatchStore, RenewStore

    def claim_many(
        self, now: datetime, until: datetime, most: int, by: Claimant | None = None
    ) -> list[Job]:
        return self._driver.claim(now, until, most, by)

    def settle_many(
        self, done: Sequence[Job] = (), retry: Sequence[Job] = (), fail: Sequence[Job] = ()
    ) -> list[str]:
        if not (done or retry or fail):
            return []
        s = self._driver.sql
        counted = s.settle_counts  # the settle statement counts a batch's members itself
        followed = {
            job.id: job for job in (*done, *fail) if job.awaited or (job.batch_id and not counted)
        }
        if not followed:
            return self._driver.settle(done, retry, fail)
        # A batch's member, or a job waited for: its end is followed in the settle's own
        # transaction (jobq.sql.workflow), so that it counts, and lets go, exactly once.
        now = datetime.now(UTC)
        failing = {job.id for job in fail}

        def then(sql: rows.Statements, kept: list[str]) -> None:
            ended = [
                _end_of(followed[id], "failed" if id in failing else "done", counted)
                for id in kept
                if id in followed
            ]
            if ended:
                workflow.follow(sql, s, ended, now)

        return self._driver.settle(done, retry, fail, then)

    def renew(self, jobs: Sequence[Job], until: datetime) -> list[str]:
        return self._driver.renew(jobs, until) if jobs else []

    # FailedStore, CancelStore

    def failed(self) -> list[Job]:
        return [rows.job(row) for row in self._driver.read(self._driver.sql.failed, {})]

    def run_again(self, id: str, at: datetime) -> bool:
        return self._again(self._driver.sql.run_again, id, at)

    def run_again_from_checkpoint(self, id: str, at: datetime) -> bool:
        return self._again(self._driver.sql.run_again_from_checkpoint, id, at)

    def _again(self, statement: str, id: str, at: datetime) -> bool:
        key = rows.row_id(id)
        if key is None:
            return False  # not an ID the table gives out, so not one of its jobs
        if self._driver.change(statement, {"id": key, "run_at": rows.ms(at)}):
            return True  # no batch's: one statement
        s = self._driver.sql
        resume = statement is s.run_again_from_checkpoint
        again: bool = self._driver.write(lambda sql: workflow.again(sql, s, resume, key, at))
        return again

    def cancel(self, id: str, now: datetime) -> Literal["cancelled", "asked"] | None:
        key = rows.row_id(id)
        if key is None:
            return None
        s = self._driver.sql
        followed = self._driver.read(s.followed, {"id": key})
        if not followed or not any(followed[0]):
            return self._driver.cancel(key, now)
        said: Literal["cancelled", "asked"] | None = self._driver.write(
            lambda sql: workflow.cancel(sql, s, key, now)
        )
        return said

    def cancelled(self) -> list[Job]:
        return [rows.job(row) for row in self._driver.read(self._driver.sql.cancelled, {})]

    def end(self, job: Job, ran: bool) -> bool:
        if not (job.batch_id or job.awaited):
            return self._driver.change(self._driver.sql.end, rows.ended(job, ran)) > 0
        now, s = datetime.now(UTC), self._driver.sql

        def work(sql: rows.Statements) -> bool:
            if not sql.count(s.end, rows.ended(job, ran)):
                return False
            workflow.follow(sql, s, [_end_of(job, job.ended or "cancelled")], now)
            return True

        ended: bool = self._driver.write(work)
        return ended

    def expire(self, now: datetime) -> int:
        s = self._driver.sql
        expired = self._driver.expire(now)
        # Read first, alone: a write (SQLite's lock) only when a followed job expired.
        if self._driver.read(s.expiring, {"now": rows.ms(now)}):
            more: int = self._driver.write(lambda sql: workflow.expire(sql, s, now))
            expired += more
        return expired

    def asked(self, ids: Sequence[str]) -> list[str]:
        given = rows.ids(ids)
        if not given:
            return []
        found = self._driver.read(self._driver.sql.asked, {"ids": self._driver.ids(given)})
        return [str(id) for (id,) in found]

    def discard(self, ids: Sequence[str] | None = None) -> int:
        if ids is None:
            return self._driver.change(self._driver.sql.discard_all, {})
        given = rows.ids(ids)
        if not given:
            return 0
        return self._driver.change(self._driver.sql.discard, {"ids": self._driver.ids(given)})

    # ScheduleStore, UniqueStore, LatestStore, PushManyStore

    def push_scheduled(self, schedule: str, job: Job) -> bool:
        return self._driver.push_scheduled(schedule, job)

    def push_unique(self, job: Job) -> bool:
        return self._driver.push_unique(job)

    def push_latest(self, job: Job) -> None:
        self._driver.push_latest(job)

    def push_many(self, jobs: Sequence[Job], latest: bool = False) -> list[bool]:
        return self._driver.push_many(jobs, latest) if jobs else []

    # OneAtATimeStore, AtOnceStore, CarryStore: kept by the statements

    def keeps_one_at_a_time(self) -> None:
        """The claim passes over a job while a claim holds another of its kind and key."""

    def keeps_at_once(self) -> None:
        """The claim passes over a job while its kind holds as many as its limit."""

    def keeps_carried(self) -> None:
        """The carried column keeps it: every push writes it, every read gives it back."""

    # HoldBackStore, GiveBackStore, SnoozeStore

    def hold_back(self, job: Job, until: datetime) -> None:
        self._driver.put_back(job, None, until)

    def give_back(self, job: Job) -> bool:
        return self._driver.put_back(job, None, None)

    def snooze(self, job: Job, until: datetime) -> bool:
        return self._driver.put_back(job, until, None)

    # PauseStore

    def pause(self, kind: str, until: datetime | None) -> None:
        params = {"kind": kind, "until": FOREVER if until is None else rows.ms(until)}
        self._driver.change(self._driver.sql.pause, params)

    def resume(self, kind: str) -> bool:
        return self._driver.change(self._driver.sql.resume, {"kind": kind}) > 0

    def paused(self, now: datetime) -> dict[str, datetime | None]:
        found = self._driver.read(self._driver.sql.paused, {"now": rows.ms(now)})
        return {kind: None if until >= FOREVER else rows.at(until) for kind, until in sorted(found)}

    # StatusStore, BrowseStore

    def status(self, id: str, now: datetime) -> Status | None:
        key = rows.row_id(id)
        if key is None:
            return None
        return rows.status(self._driver.read(self._driver.sql.status, {"id": key}), now)

    def browse(
        self,
        listed: Listed,
        now: datetime,
        *,
        kind: str | None = None,
        after: Place | None = None,
        limit: int = 50,
        text: str | None = None,
    ) -> list[Status]:
        statement, params = browse.statement(
            listed, now, kind=kind, after=after, limit=limit, text=text
        )
        return browse.statuses(self._driver.read(statement, params), now)

    def run_now(self, ids: Sequence[str], now: datetime) -> int:
        given = rows.ids(ids)
        if not given:
            return 0
        params = {"ids": self._driver.ids(given), "now": rows.ms(now)}
        return self._driver.change(self._driver.sql.run_now, params)

    def pushed(self) -> dict[str, datetime]:
        return browse.pushed(self._driver.read(browse.PUSHED, {}))

    # StatsStore, TallyStore, ResultStore

    def stats(self, now: datetime) -> list[KindStats]:
        return rows.stats(self._driver.read(self._driver.sql.stats, {"now": rows.ms(now)}))

    def add_tallies(
        self, at: datetime, instance: str, counts: Mapping[str, tuple[int, int, int]]
    ) -> None:
        if counts:
            self._driver.write(lambda sql: tallies.add(sql, at, instance, counts))

    def tallies(self, since: datetime) -> list[Tally]:
        return tallies.tallies(self._driver.read(tallies.READ, {"since": rows.ms(since)}))

    # ProgressStore

    def record(
        self,
        job: Job,
        progress: str | None = None,
        metadata: str | None = None,
        checkpoint: str | None = None,
    ) -> bool:
        params = {
            **rows.fence(job),
            "progress": progress,
            "metadata": metadata,
            "checkpoint": checkpoint,
        }
        return self._driver.change(self._driver.sql.record, params) > 0

    # WorkflowStore

    def push_batch(self, members: Sequence[Job], callback: Job, now: datetime) -> str:
        keyless((*members, callback), "a batch")
        driver = self._driver

        def work(sql: rows.Statements) -> None:
            callback.run_at = WAITS
            driver.push_many_in(sql, [callback], False)
            for job in members:
                job.batch_id = callback.id  # written as each is pushed: rows.MANY_COLUMNS
            if members:
                driver.push_many_in(sql, members, False)
            workflow.join(sql, driver.sql, int(callback.id), len(members), now)

        try:
            driver.write(work)
        except BaseException:
            for job in members:
                job.batch_id = None  # pushed with none of them: no batch
            raise
        callback.batch_id = callback.id
        return callback.id

    def push_chain(
        self, jobs: Sequence[Job], after: Sequence[str], anyway: bool, now: datetime
    ) -> None:
        keyless(jobs, "a chain")
        first = [key for key in (rows.row_id(id) for id in after) if key is not None]
        driver = self._driver

        def work(sql: rows.Statements) -> None:
            waits = first
            for job in jobs:
                job.run_at = WAITS
                driver.push_many_in(sql, [job], False)
                ended = workflow.wait(sql, driver.sql, int(job.id), waits, anyway, now)
                if ended:
                    workflow.follow(sql, driver.sql, ended, now)
                waits = [int(job.id)]

        driver.write(work)

    def batch(self, id: str, now: datetime) -> Batch | None:
        key = rows.row_id(id)
        if key is None:
            return None
        s = self._driver.sql
        batch: Batch | None = self._driver.write(lambda sql: workflow.read_batch(sql, s, key, now))
        return batch

    def cancel_batch(self, id: str, now: datetime) -> int:
        key = rows.row_id(id)
        if key is None:
            return 0
        live = self._driver.read(self._driver.sql.batch_live, {"id": key})
        return sum(self.cancel(str(member), now) is not None for (member,) in live)

    def waits(self, id: str) -> list[str]:
        key = rows.row_id(id)
        if key is None:
            return []
        return [str(job) for (job,) in self._driver.read(self._driver.sql.waits, {"id": key})]

    def follow(self, now: datetime) -> int:
        s = self._driver.sql
        if not self._driver.read(s.stale_waits, {}):
            return 0  # read alone: the queue asks every poll, and there is seldom any
        resolved: int = self._driver.write(lambda sql: workflow.follow_stale(sql, s, now))
        return resolved

    # ProcessStore

    def beat(self, process: Process, gone_before: datetime) -> None:
        params = {
            "id": process.id,
            "host": process.host,
            "pid": process.pid,
            "role": process.role,
            "kinds": None if process.kinds is None else json.dumps(list(process.kinds)),
            "workers": process.workers,
            "started_at": rows.ms(process.started_at),
            "beat_at": rows.ms(process.beat_at),
            "gone_before": rows.ms(gone_before),
        }

        def work(sql: rows.Statements) -> None:
            if sql.rows(self._driver.sql.stale_processes, params):
                sql.count(self._driver.sql.prune_processes, params)
            sql.count(self._driver.sql.beat, params)

        self._driver.write(work)

    def processes(self) -> list[Process]:
        found = self._driver.read(self._driver.sql.processes, {})
        listed = [
            Process(
                id=id,
                host=host,
                pid=int(pid),
                role=role,
                kinds=None if kinds is None else tuple(json.loads(kinds)),
                workers=int(workers),
                started_at=rows.at(int(started_at)),
                beat_at=rows.at(int(beat_at)),
            )
            for id, host, pid, role, kinds, workers, started_at, beat_at in found
        ]
        return sorted(listed, key=lambda p: (p.started_at, p.id))

    def leave(self, id: str) -> None:
        self._driver.change(self._driver.sql.leave, {"id": id})

    def prune(self, before: datetime, now: datetime | None = None) -> int:
        """``ResultStore.prune`` (``now``: the clock's, unless given), and the kinds' holds and
        pauses ended at ``now``, and what else the database keeps for a while (lock rows)."""
        pruned = self._driver.prune(before, now or datetime.now(UTC))
        self._driver.change(self._driver.sql.prune_batches, {"before": rows.ms(before)})
        return pruned


def _end_of(job: Job, how: str, counted: bool = False) -> Ended:
    """``job``'s end, to follow; ``counted``: its batch counted it already (the settle's)."""
    batch = None if job.batch_id is None or counted else int(job.batch_id)
    return Ended(int(job.id), how, batch, job.awaited)
