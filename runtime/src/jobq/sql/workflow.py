"""Batches and the jobs that wait for others, on a SQL table: ``WorkflowStore``'s work.

Written once over ``rows.Statements`` (a statement's rows, or its count), in the
transaction of the write that ends a job: so a batch's callback is let go in the
transaction that ends its last member, and a job that waits is let go (or
cancelled) in the one that ends what it waited for. The statements are ``SQL``'s,
each a default a database's SQL may override; none names a database's own syntax.

A job that waits has ``run_at`` ``jobq.batch.WAITS`` (no claim takes it before 9999)
and ``waiting`` 'batch' (a batch's callback: its ID is the batch's) or 'after' (it
has a row in ``job_waits`` for each job it still waits for). ``batch_id`` marks a
batch's members and its callback; ``awaited`` a job some job waits for. A claim
returns both, so a settle knows at once whether its job's end must be followed: an
``awaited`` set after the claim (a push that waits for a running job) is followed
by ``follow``, which the queue runs every poll.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from jobq.sql import rows
from jobq.workflow import because

if TYPE_CHECKING:
    from collections.abc import Sequence

    from jobq.batch import Batch

__all__ = ["Ended", "Statements", "WorkflowSQL"]


class WorkflowSQL:
    """The statements of batches and waits (``jobq.sql.table.SQL`` has them), each a
    default a database's SQL may override. Times are Unix ms; an ID the integer key.

    - ``member_again``, ``member_again_from_checkpoint`` (``table.SQL``'s, beside the
      ``run_again`` they are): ``run_again``'s, for a batch's job too;
    - ``cancel_waiting``: the job ``:id``, not ended and held by no claim at ``:now``,
      ended cancelled (``:error`` kept when given); ``cancel_ask``: one a claim holds, its
      cancel asked; ``followed``: ``(batch_id, awaited, waiting)`` of the job ``:id``;
    - ``expiring``: ``(id, batch_id, awaited)`` of the jobs ``expire`` passes over (a
      batch's, or awaited) that expired by ``:now``; ``expire_one``: one of them ended;
    - ``batch_new``, ``batch_count``, ``batch_go``, ``batch_reopen``: a batch's row made,
      its counts moved (and ``ended_at`` set as nothing is left pending; returning
      ``(pending)`` where ``count_returns``), its callback let go once nothing is
      pending (a no-op once let go: so exactly once), and a member pending again;
    - ``batch``, ``batch_running``, ``batch_not_done``, ``batch_live``: a batch read;
    - ``mark_waiting``: the job ``:id`` waiting ``:waiting``; ``mark_callback``: the
      callback of the batch ``:id``; ``await_job``: the job ``:id``, not ended, awaited;
      ``job_state``: ``(failed_at, ended, batch_id)`` of the job ``:id``;
    - ``wait_for``, ``waiters``, ``unwait``, ``unwait_all``, ``waits``:
      the rows of ``job_waits``; ``go``: a job that waited, due at ``:now``;
      ``stale_waits``: the waits whose job ended (or is gone) without letting them go;
      ``prune_batches``: the batches that ended before ``:before``, deleted.
    """

    member_again: str
    member_again_from_checkpoint: str
    cancel_waiting = """
        UPDATE jobs SET ended = 'cancelled', failed_at = :now, unique_key = NULL, held_until = 0,
            waiting = NULL, error = coalesce(:error, error)
        WHERE id = :id AND failed_at IS NULL AND held_until <= :now
        """
    cancel_ask = """
        UPDATE jobs SET cancel_asked = coalesce(cancel_asked, :now)
        WHERE id = :id AND failed_at IS NULL AND held_until > :now
        """
    followed = "SELECT batch_id, awaited, waiting FROM jobs WHERE id = :id"
    expiring = """
        SELECT id, batch_id, awaited FROM jobs
        WHERE expires_at <= :now AND failed_at IS NULL AND held_until <= :now
          AND attempts = 0 AND snoozes = 0 AND (batch_id IS NOT NULL OR awaited IS NOT NULL)
        """
    expire_one = """
        UPDATE jobs SET ended = 'expired', failed_at = expires_at, unique_key = NULL,
            held_until = 0, waiting = NULL
        WHERE id = :id AND expires_at <= :now AND failed_at IS NULL AND held_until <= :now
          AND attempts = 0 AND snoozes = 0
        """
    batch_new = """
        INSERT INTO job_batches (id, total, pending, done, failed, cancelled, expired, created_at)
        VALUES (:id, :total, :total, 0, 0, 0, 0, :now)
        """
    # Whether the settle statement counts a batch's members itself, as batch_count would, in
    # its one statement (Postgres's): then only a job waited for is followed after it.
    settle_counts: ClassVar[bool] = False
    # Whether batch_count returns the batch's (pending) after it: a database whose UPDATE
    # returns rows. Else the kit lets the callback go (batch_go) after every count.
    count_returns: ClassVar[bool] = False
    # ended_at first: MySQL sets columns left to right, each seeing those set before it.
    batch_count = """
        UPDATE job_batches SET
            ended_at = CASE WHEN pending = :ended AND ended_at IS NULL THEN :now
                ELSE ended_at END,
            pending = pending - :ended, done = done + :done, failed = failed + :failed,
            cancelled = cancelled + :cancelled, expired = expired + :expired
        WHERE id = :id
        """
    batch_go = """
        UPDATE jobs SET run_at = :now, waiting = NULL
        WHERE id = :id AND waiting = 'batch' AND failed_at IS NULL
          AND EXISTS (SELECT 1 FROM job_batches WHERE job_batches.id = :id AND pending = 0)
        """
    batch_reopen = """
        UPDATE job_batches SET pending = pending + 1, failed = failed - :failed,
            cancelled = cancelled - :cancelled, expired = expired - :expired, ended_at = NULL
        WHERE id = :id
        """
    batch = """
        SELECT total, pending, done, failed, cancelled, expired, created_at, ended_at
        FROM job_batches WHERE id = :id
        """
    batch_running = """
        SELECT count(*) FROM jobs
        WHERE batch_id = :id AND id <> :id AND failed_at IS NULL AND held_until > :now
        """
    batch_not_done = """
        SELECT id FROM jobs WHERE batch_id = :id AND id <> :id AND failed_at IS NOT NULL
          AND coalesce(ended, 'failed') <> 'done'
        ORDER BY id
        """
    batch_live = "SELECT id FROM jobs WHERE batch_id = :id AND id <> :id AND failed_at IS NULL"
    mark_waiting = "UPDATE jobs SET waiting = :waiting WHERE id = :id"
    mark_callback = "UPDATE jobs SET waiting = 'batch', batch_id = :id WHERE id = :id"
    await_job = "UPDATE jobs SET awaited = 1 WHERE id = :id AND failed_at IS NULL"
    job_state = "SELECT failed_at, ended, batch_id FROM jobs WHERE id = :id"
    wait_for = "INSERT INTO job_waits (job_id, waits_for, anyway) VALUES (:id, :after, :anyway)"
    waiters = "SELECT job_id, anyway FROM job_waits WHERE waits_for = :after ORDER BY job_id"
    unwait = "DELETE FROM job_waits WHERE job_id = :id AND waits_for = :after"
    unwait_all = "DELETE FROM job_waits WHERE job_id = :id"
    waits = "SELECT waits_for FROM job_waits WHERE job_id = :id ORDER BY waits_for"
    go = """
        UPDATE jobs SET run_at = :now, waiting = NULL
        WHERE id = :id AND waiting = 'after' AND failed_at IS NULL
        """
    prune_batches = "DELETE FROM job_batches WHERE ended_at < :before"
    stale_waits = """
        SELECT w.job_id, w.waits_for, w.anyway, d.failed_at, d.ended
        FROM job_waits AS w LEFT JOIN jobs AS d ON d.id = w.waits_for
        WHERE d.id IS NULL OR d.failed_at IS NOT NULL
        ORDER BY w.job_id, w.waits_for
        """


@dataclass(frozen=True, slots=True)
class Ended:
    """A job that ended in this transaction, for its batch and its waiters."""

    id: int
    how: str  # "done", "failed", "cancelled", "expired"
    batch: int | None
    awaited: bool


Statements = rows.Statements


def follow(sql: Statements, s: WorkflowSQL, ended: Sequence[Ended], now: datetime) -> None:
    """Count each of ``ended`` in its batch (letting its callback go when it was the last),
    and let go, or cancel, the jobs that waited for it; and so on for what those end."""
    at = rows.ms(now)
    todo = list(ended)
    counts: dict[int, Counter[str]] = {}
    while todo:
        end = todo.pop(0)
        if end.batch is not None and end.batch != end.id:
            counts.setdefault(end.batch, Counter())[end.how] += 1
        if end.awaited:
            for waiter, anyway in sql.rows(s.waiters, {"after": end.id}):
                sql.count(s.unwait, {"id": waiter, "after": end.id})
                todo += _resolve(sql, s, int(waiter), end.id, end.how, bool(anyway), at)
    for batch, counted in counts.items():
        _count(sql, s, batch, counted, at)


def _count(sql: Statements, s: WorkflowSQL, batch: int, counted: Counter[str], at: int) -> None:
    """Count ``counted`` ends in ``batch``; let its callback go once nothing is pending."""
    params = {"id": batch, "now": at, "ended": counted.total(), "done": counted["done"]}
    params |= {how: counted[how] for how in ("failed", "cancelled", "expired")}
    if s.count_returns:
        found = sql.rows(s.batch_count, params)
        if not found or found[0][0] != 0:
            return
    else:
        sql.count(s.batch_count, params)
    sql.count(s.batch_go, {"id": batch, "now": at})


def _resolve(
    sql: Statements, s: WorkflowSQL, waiter: int, after: int, how: str, anyway: bool, at: int
) -> list[Ended]:
    """The job ``waiter`` told that ``after`` ended ``how``: let go once it waits for nothing
    more, or cancelled (unless ``anyway``) when ``after`` did not end done; what it ended."""
    if how == "done" or anyway:
        if not sql.rows(s.waits, {"id": waiter}):
            sql.count(s.go, {"id": waiter, "now": at})
        return []
    params = {"id": waiter, "now": at, "error": because(after, how)}
    if not sql.count(s.cancel_waiting, params):
        return []  # ended already
    sql.count(s.unwait_all, {"id": waiter})
    ((batch, awaited, _),) = sql.rows(s.followed, {"id": waiter})
    return [Ended(waiter, "cancelled", _int(batch), bool(awaited))]


def wait(
    sql: Statements, s: WorkflowSQL, id: int, after: Sequence[int], anyway: bool, now: datetime
) -> list[Ended]:
    """Have the job ``id``, just pushed due at ``WAITS``, wait for each of ``after``: let go
    at once when none is left to wait for, cancelled when one ended other than done."""
    at = rows.ms(now)
    sql.count(s.mark_waiting, {"id": id, "waiting": "after"})
    for job in dict.fromkeys(after):
        if sql.count(s.await_job, {"id": job}):
            sql.count(s.wait_for, {"id": id, "after": job, "anyway": 1 if anyway else 0})
            continue
        state = sql.rows(s.job_state, {"id": job})
        how = "done" if not state or state[0][1] == "done" else state[0][1] or "failed"
        if how != "done" and not anyway:
            return _resolve(sql, s, id, job, how, anyway, at)  # cancelled, as it is pushed
    if not sql.rows(s.waits, {"id": id}):
        sql.count(s.go, {"id": id, "now": at})
    return []


def join(sql: Statements, s: WorkflowSQL, callback: int, total: int, now: datetime) -> None:
    """Make the batch of ``callback`` (its ID), whose ``total`` members were pushed with it as
    their ``batch_id``; a batch of none ends at once."""
    at = rows.ms(now)
    sql.count(s.mark_callback, {"id": callback})
    sql.count(s.batch_new, {"id": callback, "total": total, "now": at})
    if not total:
        _count(sql, s, callback, Counter(), at)  # nothing to wait for: it ends at once


def read_batch(sql: Statements, s: WorkflowSQL, id: int, now: datetime) -> Batch | None:
    """The batch ``id`` as it is at ``now``; None for none."""
    from jobq.batch import Batch

    found = sql.rows(s.batch, {"id": id})
    if not found:
        return None
    total, pending, done, failed, cancelled, expired, created_at, ended_at = found[0]
    ((running,),) = sql.rows(s.batch_running, {"id": id, "now": rows.ms(now)})
    not_done = tuple(str(member) for (member,) in sql.rows(s.batch_not_done, {"id": id}))
    return Batch(
        id=str(id),
        total=int(total),
        waiting=int(pending) - int(running),
        running=int(running),
        done=int(done),
        failed=int(failed),
        cancelled=int(cancelled),
        expired=int(expired),
        created_at=rows.at(int(created_at)),
        ended_at=None if ended_at is None else rows.at(int(ended_at)),
        not_done=not_done,
    )


def again(sql: Statements, s: WorkflowSQL, resume: bool, id: int, at: datetime) -> bool:
    """``run_again`` (``resume``: from its checkpoint) of the job ``id``, a batch's member or
    callback, counted as pending again in its batch when a member: the batch is open again
    until it ends."""
    state = sql.rows(s.job_state, {"id": id})  # read before the write clears how it ended
    statement = s.member_again_from_checkpoint if resume else s.member_again
    if not sql.count(statement, {"id": id, "run_at": rows.ms(at)}):
        return False
    ((_, how, batch),) = state
    if batch is not None and int(batch) != id:
        how = how or "failed"
        params = {"id": int(batch)} | {e: int(how == e) for e in ("failed", "cancelled", "expired")}
        sql.count(s.batch_reopen, params)
    return True


def cancel(
    sql: Statements, s: WorkflowSQL, id: int, now: datetime
) -> Literal["cancelled", "asked"] | None:
    """``cancel`` of a job whose end is followed: "cancelled", "asked" or None."""
    at = rows.ms(now)
    if sql.count(s.cancel_waiting, {"id": id, "now": at, "error": None}):
        sql.count(s.unwait_all, {"id": id})
        ((batch, awaited, _),) = sql.rows(s.followed, {"id": id})
        follow(sql, s, [Ended(id, "cancelled", _int(batch), bool(awaited))], now)
        return "cancelled"
    if sql.count(s.cancel_ask, {"id": id, "now": at}):
        return "asked"
    return None


def expire(sql: Statements, s: WorkflowSQL, now: datetime) -> int:
    """End the followed jobs that expired waiting by ``now``, as ``expire`` ends the rest."""
    at = rows.ms(now)
    ended = [
        Ended(int(id), "expired", _int(batch), bool(awaited))
        for id, batch, awaited in sql.rows(s.expiring, {"now": at})
        if sql.count(s.expire_one, {"id": int(id), "now": at})
    ]
    if ended:
        follow(sql, s, ended, now)
    return len(ended)


def follow_stale(sql: Statements, s: WorkflowSQL, now: datetime) -> int:
    """Let go, or cancel, the jobs that waited for a job whose end did not (its claim
    began before the wait was pushed); say how many waits it resolved."""
    at = rows.ms(now)
    stale = sql.rows(s.stale_waits, {})
    ended: list[Ended] = []
    for waiter, after, anyway, failed_at, how in stale:
        sql.count(s.unwait, {"id": waiter, "after": after})
        done = failed_at is None or how == "done"  # gone: done, and deleted
        ended += _resolve(
            sql, s, int(waiter), int(after), "done" if done else how or "failed", bool(anyway), at
        )
    if ended:
        follow(sql, s, ended, now)
    return len(stale)


def _int(value: Any) -> int | None:
    return None if value is None else int(value)
