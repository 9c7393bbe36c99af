"""The Store contract: what keeps the jobs, and the extras a Store may have.

Every method is synchronous: one SQL implementation then serves sync apps,
async apps, the app's own transactions and its commands. Times are aware UTC
datetimes; an ID is a string. A Store has an extra by having its methods, so
``isinstance(store, FailedStore)`` tells the queue what it may rely on.

Each promise below is a test of ``jobq.testing.StoreSuite``; ``docs/store.md``
says how the SQL stores keep them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from jobq.batch import Batch
from jobq.job import Claimant, Job
from jobq.listing import Listed, Place
from jobq.process import Process
from jobq.stats import KindStats
from jobq.status import Status
from jobq.tally import Tally

__all__ = [
    "AtOnceStore",
    "BatchStore",
    "BrowseStore",
    "CancelStore",
    "CarryStore",
    "FailedStore",
    "GiveBackStore",
    "HoldBackStore",
    "LatestStore",
    "NotifyStore",
    "OneAtATimeStore",
    "PauseStore",
    "PushManyStore",
    "RenewStore",
    "ResultStore",
    "ScheduleStore",
    "SnoozeStore",
    "StatsStore",
    "StatusStore",
    "Store",
    "TallyStore",
    "UniqueStore",
    "WorkflowStore",
]


@runtime_checkable
class Store(Protocol):
    """Keeps jobs from the moment they are pushed until they have run."""

    def push(self, job: Job) -> None:
        """Keep a new job, due at ``job.run_at``, and set ``job.id``.

        An ID is never given to a second job, even after the first is done and
        gone: the settles' fence is (ID, attempts), and a reused ID would let a
        stalled worker's late settle reach a job it never claimed.
        """
        ...

    def claim(self, now: datetime, until: datetime, by: Claimant | None = None) -> Job | None:
        """Hold the job to run next at ``now`` that no claim holds.

        Of the jobs due at ``now``, that is the one of highest ``priority``,
        then due soonest, then pushed first. Holds it until ``until``, adds one
        to its ``attempts`` and returns it; returns None when no job is due.
        Of claims at once, from any number of threads or processes, no two get
        the same job while its hold lasts. A failed job is never claimed; a job
        whose hold ran out (its worker was killed) is claimed again. A store
        with the limit extras keeps their promises here too.

        ``by`` says who claims. Of ``by.kinds`` (when not None) only: a job of
        another kind is passed over, left as it is (no attempt added, its kind
        not held back). The job is returned, and kept, with ``claimed_by`` set
        to ``by.instance`` (None without ``by``).
        """
        ...

    def done(self, job: Job) -> bool:
        """Remove a job that ran, unless a later claim has taken it since; say whether it did.

        Each settle says whether its fence matched: the queue tells ``observe``
        and ``on_fail`` only of the outcomes the store kept. (A store written
        before settles said so returns None, which the queue reads as kept.)
        A ``CancelStore`` fences each settle by a cancel asked too (see there).
        """
        ...

    def retry(self, job: Job) -> bool:
        """Put a claimed job back, due at ``job.run_at``, with ``job.error``; say whether it did.

        Leaves the job alone (and says False) when a later claim has taken it since.
        """
        ...

    def fail(self, job: Job) -> bool:
        """Keep a claimed job as failed for good, with ``job.error``; say whether it did.

        No claim finds it. Leaves the job alone (and says False) when a later
        claim has taken it since.
        """
        ...


@runtime_checkable
class FailedStore(Store, Protocol):
    """A Store that lists the jobs that failed for good and runs them again."""

    def failed(self) -> list[Job]:
        """The jobs that failed for good, with ``error`` and ``failed_at``, the latest first.

        Each with its ``key`` when it has one.
        """
        ...

    def run_again(self, id: str, at: datetime) -> bool:
        """Put a failed job back, due at ``at``, with no attempts; say whether there was one.

        On a ProgressStore it starts from scratch: its progress and checkpoint go (its
        metadata stays); ``ProgressStore.run_again_from_checkpoint`` keeps them.
        """
        ...


@runtime_checkable
class CancelStore(FailedStore, Protocol):
    """A FailedStore that cancels jobs, lists the cancelled ones, and discards ended jobs.

    A job ends failed, cancelled or expired; ``Job.ended`` says which, and
    ``failed_at`` when. ``failed()`` lists the failed only, ``cancelled()`` the
    other two; ``run_again`` takes a job of either list; the prune deletes each
    when it is old enough.

    An accepted cancel wins: once ``cancel`` said "cancelled" or "asked", the
    job ends cancelled, whatever its handler then does. So a settle of a job
    whose ``cancel_asked`` is set (``done``, ``retry``, ``fail``,
    ``settle_many``, and ``end`` as "done") changes nothing and says it kept
    nothing, as a stale settle does; its queue then ends it cancelled with
    ``end``. ``renew`` still renews it: its handler runs on.
    """

    def cancel(self, id: str, now: datetime) -> Literal["cancelled", "asked"] | None:
        """Cancel the job ``id`` at ``now``, and say what became of it.

        A job that waits (due or later, a retry's backoff, or a claim whose hold
        ran out before ``now``) ends at once: "cancelled", with ``ended``
        "cancelled" and ``failed_at`` ``now``; no claim takes it, and its unique
        key is let go, so the next push of that key is a new job. A job a claim
        holds at ``now`` is left to that claim's queue to stop: its
        ``cancel_asked`` is set to ``now`` (kept if asked before), and it says
        "asked". From then on ``asked`` names it, and a claim gives it back
        with ``cancel_asked`` set (its queue ends it unrun). A job that has ended, or
        that the store never had, is left as it is: None. Of a cancel racing a
        claim or a settle, the one the store kept first holds: a settle kept
        first ended the job (None); a cancel kept first ("asked") fences out the
        claim's settle, which keeps nothing and says so, and the claim's queue
        ends the job cancelled, its handler having run (``end``).
        """
        ...

    def end(self, job: Job, ran: bool) -> bool:
        """Keep a claimed job as ended ``job.ended`` ("cancelled" or "expired"; a
        ``ResultStore`` takes "done" too) at ``job.failed_at``; say whether it did.

        As ``fail`` does, but for the end it names, and keeping the job's error
        as its last attempt left it when ``job.error`` is None. ``ran``: whether
        its handler ran; if not, the attempt its claim added is taken back
        (a job ended as it would have started). Fenced by its claim as
        ``done`` is: a job a later claim has taken since is left alone, and it
        says False; an end as "done" is fenced by a cancel asked too, as
        ``done`` is, and an end as "cancelled" or "expired" is not. The queue
        ends so a job whose cancel was asked as it ran (its settle then left
        alone, or its cancel heard before its handler ended), or that was
        claimed with ``cancel_asked`` set or past its ``expires_at``.
        """
        ...

    def expire(self, now: datetime) -> int:
        """End each job that waits at ``now`` past its ``expires_at``, before any attempt began
        (its attempts 0, never snoozed); say how many.

        Each ends as ``cancel`` ends a waiting job, but "expired", at its
        ``expires_at``, and its unique key is let go, so the next push of that
        key is a new job. A job a claim holds, or that ran once, is left. The
        queue calls it every poll; a claim may still take an expired job
        between two, which its queue then ends unrun.
        """
        ...

    def asked(self, ids: Sequence[str]) -> list[str]:
        """Of ``ids``, the jobs whose cancel was asked and that have not ended, in any order.

        The queue asks about once a second of the jobs its claims hold, so a
        running job learns of its cancel within a second or two.
        """
        ...

    def cancelled(self) -> list[Job]:
        """The jobs that ended cancelled or expired, with ``ended`` and ``failed_at``, the latest
        first."""
        ...

    def discard(self, ids: Sequence[str] | None = None) -> int:
        """Delete, for good, those of ``ids`` that ended (failed, cancelled or expired), or every
        job that ended when ``ids`` is None; say how many. A job that waits or runs is left."""
        ...


@runtime_checkable
class PushManyStore(Store, Protocol):
    """A Store that pushes many jobs in a few statements, all of them or none."""

    def push_many(self, jobs: Sequence[Job], latest: bool = False) -> list[bool]:
        """Keep each of ``jobs``, in order, as one push each would, and set each ``job.id``;
        say for each whether it was pushed.

        A job without a key is pushed as ``push`` pushes it: the store's IDs
        follow the order given. A job with a ``key`` is pushed as ``push_unique``
        would, one after another: one whose kind and key wait already (pushed
        before, or earlier in ``jobs``) pushes nothing, gets the waiting job's
        ID, and says False; with ``latest``, as ``push_latest`` would: the
        waiting job moves to its ``run_at``, and it says True. One transaction
        (or the app's, bound): a failure pushes none of them.
        """
        ...


@runtime_checkable
class StatusStore(Store, Protocol):
    """A Store that says what became of any job it has."""

    def status(self, id: str, now: datetime) -> Status | None:
        """The job ``id`` as it is at ``now``: its state, its row, and since when; None when
        the store does not have it (never pushed, or gone: done and deleted, or pruned).

        A job is "running" while a claim's hold lasts past ``now`` (``since``:
        when that claim took it), "waiting" otherwise until it ends (``due``
        when its ``run_at`` is ``now`` or before, a lost claim's job too), then
        "failed", "cancelled", "expired" or, kept with its result, "done"
        (``since``: when it ended; ``job.result`` the result). A job
        that never ran has ``attempts`` 0; one that did, its latest error.
        """
        ...


@runtime_checkable
class BrowseStore(StatusStore, Protocol):
    """A StatusStore that lists its jobs by state, a page at a time: for an operator's page."""

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
        """A page of the jobs in the list ``listed`` at ``now``, each as ``status`` tells it.

        Each job is in one list (``jobq.Listed`` says which). The waiting,
        scheduled and retrying lists are read the oldest first, by ``run_at``;
        running by when its claim took it; failed, cancelled and done the latest
        first, by when they ended; ties by ID, in push order. ``kind``: its jobs
        alone. ``after``: the place of the previous page's last job
        (``jobq.place_of``), for the page past it: a keyset, so a page costs the
        same however deep it is, and a job pushed or ended meanwhile is neither
        listed twice nor skipped. ``limit``: 1 to 500 jobs (ValueError past).
        ``text``: the jobs whose value's JSON has it, ASCII letters in either
        case (a scan of the list's jobs, slower than the rest of a page's read).
        """
        ...

    def run_now(self, ids: Sequence[str], now: datetime) -> int:
        """Make each of ``ids`` that waits for a later time due at ``now``; say how many.

        A job scheduled for later, or waiting out a retry's backoff, runs as a
        worker is free. A job due already, running, ended or unknown is left as
        it was and not counted.
        """
        ...

    def pushed(self) -> dict[str, datetime]:
        """Each schedule's latest run pushed (``ScheduleStore.push_scheduled``), by its name;
        a schedule that never pushed a run is absent. Empty for a store that keeps none."""
        ...


@runtime_checkable
class ResultStore(StatusStore, CancelStore, Protocol):
    """A Store that keeps a done job with its result, for a kind that keeps results, and
    prunes what ended long enough ago.

    ``end`` takes a fourth end, "done": the job is kept as done at
    ``job.failed_at``, with ``job.result`` (its handler's return value, as
    JSON) until ``job.expires_at`` (the kind's retention), its last error as
    its last failed attempt left it, fenced as ``done`` is (by its claim, and by
    a cancel asked). No claim takes it;
    ``status`` says "done" with the result; ``failed()`` and ``cancelled()``
    do not list it, ``run_again`` and ``discard`` leave it, ``stats`` counts
    it as ``done``. Kinds that keep no results settle with ``done``, as before:
    their jobs are deleted.
    """

    def prune(self, before: datetime, now: datetime) -> int:
        """Delete the jobs that failed, were cancelled or expired before ``before``, and the
        done jobs kept past their ``expires_at`` at ``now``; say how many.

        The app runs it nightly. A job that waits or runs is never deleted.
        """
        ...


@runtime_checkable
class ScheduleStore(Store, Protocol):
    """A Store that keeps which run of each schedule was pushed last."""

    def push_scheduled(self, schedule: str, job: Job) -> bool:
        """Push ``job``, the run of ``schedule`` due at ``job.run_at``, and say whether it did.

        Pushes nothing when a run of ``schedule`` due then or later was pushed
        already, so runs only move forward. Keeps the run and pushes the job
        together or not at all: of several pushes of one run at once, exactly
        one pushes it. When the store is a UniqueStore and ``job.key`` is set,
        a job of its kind and key that waits *is* the run: the run is kept and
        no job is pushed (the method still says True).
        """
        ...


@runtime_checkable
class UniqueStore(Store, Protocol):
    """A Store that keeps, for each waiting job of a unique kind, its value's key."""

    def push_unique(self, job: Job) -> bool:
        """Push ``job`` unless a job of its kind and ``job.key`` waits; say whether it did.

        "Waits" means pushed and not yet claimed, or put back by ``hold_back``:
        a claim lets the key go (so a push while the job runs is pushed, and
        runs too), and ``retry`` does not take it back. Of pushes of one key at
        once, exactly one pushes. When it pushes nothing, ``job.id`` is set to
        the waiting job's ID, and the waiting job is left as it was.
        """
        ...


@runtime_checkable
class LatestStore(UniqueStore, Protocol):
    """A UniqueStore whose pushes can move the job that waits to their own time."""

    def push_latest(self, job: Job) -> None:
        """Push ``job``, or give the job of its kind and key that waits ``job.run_at``.

        Either way ``job.id`` is the ID of the job that waits now. Moving a job
        leaves the rest of it (value, attempts, what it carried) as it was.
        """
        ...


@runtime_checkable
class OneAtATimeStore(UniqueStore, Protocol):
    """A UniqueStore that claims no job while a claim holds another of its kind and key."""

    def keeps_one_at_a_time(self) -> None:
        """Does nothing: its being here says the store keeps this promise.

        A job pushed with ``one_at_a_time`` keeps it, and its ``key``, for as
        long as the store keeps the job. A claim passes over such a job while a
        claim holds another of its kind and key with ``one_at_a_time``, on any
        instance: of claims at once, at most one gets a job of a key. Nothing
        stays locked while the job runs: the hold is what counts, so once it is
        done, failed, put back or its hold ran out, the next may be claimed.
        """


@runtime_checkable
class AtOnceStore(Store, Protocol):
    """A Store that claims no more of a kind than its ``at_once`` at a time."""

    def keeps_at_once(self) -> None:
        """Does nothing: its being here says the store keeps this promise.

        A job pushed with ``at_once`` n > 0 keeps it. A claim passes over such a
        job while n jobs of its kind are held (every held job of the kind
        counts, one pushed before the kind had a limit too), on every instance
        together: of claims at once, no more than n are held.
        """


@runtime_checkable
class HoldBackStore(Store, Protocol):
    """A Store that puts a claimed job back as if unclaimed, and holds its kind back."""

    def hold_back(self, job: Job, until: datetime) -> None:
        """Put a claimed job back as its claim found it; claim none of its kind before ``until``.

        The job is due at its ``run_at`` again, with the attempt its claim
        added taken back, and its ``key`` again unless a job pushed as it ran
        has that key now. The kind's time only moves forward. Like ``done``,
        it leaves the job alone when a later claim has taken it since (but
        still holds the kind back).
        """
        ...


@runtime_checkable
class GiveBackStore(Store, Protocol):
    """A Store that puts a claimed job back as if unclaimed, holding nothing back."""

    def give_back(self, job: Job) -> bool:
        """Put a claimed job back as its claim found it; say whether it did.

        As ``hold_back`` does with the job, and nothing more: due at its
        ``run_at`` again, with the attempt its claim added taken back, and its
        ``key`` again unless a job pushed as it ran has that key now; its kind
        is not held back. Fenced as ``done`` is: a job a later claim has taken
        since is left alone, and it says False. The queue gives back a job it
        did not run to its end through no fault of the job's: one cut short by
        a stop's grace, or claimed as the queue stopped.
        """
        ...


@runtime_checkable
class SnoozeStore(Store, Protocol):
    """A Store that puts a claimed job back, due later, with its attempt given back."""

    def snooze(self, job: Job, until: datetime) -> bool:
        """Put a claimed job back due at ``until``, counting a snooze; say whether it did.

        As ``give_back`` does, but due at ``until`` (not its ``run_at`` as it
        was), and with one more ``snoozes``: the attempt its claim added taken
        back, its ``key`` again unless a job pushed as it ran has it now, its
        carried context and priority as they were. Fenced as ``done`` is: a job
        a later claim has taken since is left alone, and it says False. The
        queue snoozes a job whose handler raised ``jobq.Snooze``.
        """
        ...


@runtime_checkable
class PauseStore(Store, Protocol):
    """A Store that pauses a kind on every instance, until a time or until resumed."""

    def pause(self, kind: str, until: datetime | None) -> None:
        """Claim no job of ``kind`` until ``until`` (None: until ``resume``)."""
        ...

    def resume(self, kind: str) -> bool:
        """Let ``kind``'s jobs be claimed again; say whether it was paused."""
        ...

    def paused(self, now: datetime) -> dict[str, datetime | None]:
        """The kinds paused at ``now``, each with the time it is paused until (None: for good)."""
        ...


@runtime_checkable
class BatchStore(Store, Protocol):
    """A Store that claims and settles many jobs in one go."""

    def claim_many(
        self, now: datetime, until: datetime, most: int, by: Claimant | None = None
    ) -> list[Job]:
        """Up to ``most`` jobs, claimed together: what ``most`` claims in a row would get.

        Each job is held, counted and ordered as ``claim`` promises, and every
        limit the store keeps holds within the batch too: no two jobs of one
        OneAtATime key, no more of an AtOnce kind than its limit leaves, none
        of a kind held back or paused. Fewer than ``most`` (or none) when fewer
        may be claimed.
        """
        ...

    def settle_many(
        self, done: Sequence[Job] = (), retry: Sequence[Job] = (), fail: Sequence[Job] = ()
    ) -> list[str]:
        """``done``, ``retry`` and ``fail`` of each job given, in one go; the IDs it settled.

        Each job is fenced by its ``attempts`` as the single settles are: one a
        later claim has taken is left alone, and the others are settled. Returns
        the IDs of the jobs whose fences matched, in any order: what the store
        kept, and so what the queue tells ``observe`` of.
        """
        ...


@runtime_checkable
class RenewStore(Store, Protocol):
    """A Store whose claims' holds can be renewed while their jobs run (a heartbeat)."""

    def renew(self, jobs: Sequence[Job], until: datetime) -> list[str]:
        """Hold each of ``jobs`` until ``until``; return the IDs of those it renewed.

        A job is renewed only while the claim that returned it still has it
        (fenced by ``attempts``): one a later claim has taken, or that is done,
        failed or put back, is left alone and not returned.
        """
        ...


@runtime_checkable
class CarryStore(Store, Protocol):
    """A Store that keeps what each job carried from the context it was pushed in."""

    def keeps_carried(self) -> None:
        """Does nothing: its being here says the store keeps this promise.

        A job's ``carried`` is kept with it from each of its pushes and given
        back by every claim, through retries and ``run_again``, and in
        ``failed()``. A push that pushes nothing, or moves the job that waits
        (``push_unique``, ``push_latest``), leaves that job what it carried.
        """


@runtime_checkable
class NotifyStore(Store, Protocol):
    """A Store that tells a running queue at once of a push from any instance."""

    def listen(
        self,
        wake: Callable[[], None],
        asked: Callable[[], None] | None = None,
        ended: Callable[[str], None] | None = None,
    ) -> Callable[[], None]:
        """Call ``wake`` (from a thread of the store's) soon after each push commits.

        On any instance, through any connection, in the app's transaction too.
        Returns a function that stops listening. A lost connection is made
        again by the store; meanwhile the queue's poll finds what was pushed.
        A store that is a CancelStore too is given ``asked``, to call soon after
        a cancel of a running job (``cancel`` said "asked") commits, anywhere;
        the queue then asks at once which of its jobs were cancelled. A
        ResultStore is given ``ended`` by a wait for a result: it calls it with
        a job's ID soon after that job ended (``end``, ``fail``, a ``cancel``
        that ended it) and with "" once it may have missed some; ``wake`` is
        not called for those. A store written before ``ended`` is polled.
        """
        ...


@runtime_checkable
class StatsStore(Store, Protocol):
    """A Store that counts its jobs by kind and state, for an operator to read."""

    def stats(self, now: datetime) -> list[KindStats]:
        """Each kind that has a job, with its jobs counted by state at ``now``; sorted by kind.

        A job is in one state of ``KindStats``: failed, running (a claim's hold
        lasts past ``now``), due (``run_at`` at or before ``now``, whatever
        pauses, hold-backs or limits keep it waiting) or later. A kind whose
        jobs are all gone is not listed. The counts are one reading of the
        store, as of one moment; the SQL stores read them with one query.
        """
        ...


@runtime_checkable
class TallyStore(Store, Protocol):
    """A Store that keeps each instance's counts of its runs, by kind and outcome, for a day:
    what an operator's throughput chart reads."""

    def add_tallies(
        self, at: datetime, instance: str, counts: Mapping[str, tuple[int, int, int]]
    ) -> None:
        """Keep what ``instance`` counted up to ``at``: for each kind, its runs that came to
        (done, retried, failed); and delete the counts written a day or more before ``at``.

        Each add is kept beside the others, never merged into one: two instances
        (or one, twice) adding at the same time both count. An add of no kinds
        does nothing. The queue adds its counts every ``Queue(tally=)`` seconds,
        ``at`` the time of the write, and once more as it stops.
        """
        ...

    def tallies(self, since: datetime) -> list[Tally]:
        """The counts added at ``since`` or later, summed over every instance by minute (the
        minute each was added in) and kind; sorted by minute, then kind.

        A kind with no counts in a minute is not listed for it. A day's counts at the most.
        """
        ...


@runtime_checkable
class ProcessStore(Store, Protocol):
    """A Store that keeps a list of the processes that run the app's queue, each with its
    latest beat: what an operator's list of processes reads."""

    def beat(self, process: Process, gone_before: datetime) -> None:
        """Record ``process``, or its new beat (``process.beat_at``) and what it runs now,
        by its ``id``; and delete every process whose latest beat is before ``gone_before``.

        A process beats every poll; the queue gives ``gone_before`` as three holds
        before its beat, so one that stopped beating (killed, its host gone) leaves
        the list within three holds of any other's beat. Kinds are kept as given,
        None (every kind) apart from an empty tuple.
        """
        ...

    def processes(self) -> list[Process]:
        """Every process recorded, sorted by when it started, then by ID."""
        ...

    def leave(self, id: str) -> None:
        """Delete the process ``id`` (as it stops cleanly); nothing for an ID not recorded."""
        ...


@runtime_checkable
class ProgressStore(Store, Protocol):
    """A Store where a running job's handler writes as it goes: its progress, its metadata,
    and a checkpoint its next attempt resumes from (``jobq.progress``, ``jobq.checkpoint``)."""

    def record(
        self,
        job: Job,
        progress: str | None = None,
        metadata: str | None = None,
        checkpoint: str | None = None,
    ) -> bool:
        """Write each of the JSON texts given (None leaves that column as it is) into the
        job's row; say whether it did.

        Fenced by the attempt, as a renewal is: written only while the claim that
        returned ``job`` still has it (its ``attempts``, unsettled and held); a
        write from an attempt that was settled, put back or taken by a later
        claim changes nothing and says False. What was written stays through the
        job's retries and its end: a later claim, a status, a list and ``failed()``
        return all three. With none given it writes nothing, and says whether the
        attempt still holds the job.
        """
        ...

    def run_again_from_checkpoint(self, id: str, at: datetime) -> bool:
        """``run_again`` of a job that ended (not done), keeping its checkpoint and progress:
        its next attempt resumes where the last one got. Says whether there was one."""
        ...


@runtime_checkable
class WorkflowStore(CancelStore, Protocol):
    """A CancelStore that keeps batches (jobs pushed with a callback, pushed once as the last
    of them ends) and jobs that wait for others to end done (``after=``, chains).

    A job that waits is kept due at 9999-12-31 (no claim reaches it) until what it waits
    for lets it go, due then. Every end of a batch's member or of a job that is waited
    for (``done``, ``fail``, ``settle_many``, ``end``, ``cancel``, ``expire``) is followed
    in the transaction that keeps it: counted in its batch, whose callback is let go as
    its last member ends; and each job that waits for it let go once it waits for
    nothing more, or (unless pushed ``anyway``) ended cancelled, its error naming the job
    that did not end done, and so on down a chain. A job whose end was kept by a claim
    that began before a wait for it was pushed is followed by ``follow``, which the queue
    calls every poll. Members and waiting jobs have no key.
    """

    def push_batch(self, members: Sequence[Job], callback: Job, now: datetime) -> str:
        """Push ``members`` and ``callback`` together (one transaction, or the app's, bound),
        and set each ``job.id`` and ``job.batch_id``; say the batch's ID, the callback's.

        The callback waits until every member has ended; with no members it is due at once.
        """
        ...

    def push_chain(
        self, jobs: Sequence[Job], after: Sequence[str], anyway: bool, now: datetime
    ) -> None:
        """Push ``jobs`` together, the first waiting for each of ``after``, each next for the
        one before; set each ``job.id``.

        A job of ``after`` that ended done, or that the store no longer has (a done job
        of a kind that keeps no result is deleted), is not waited for; one that ended
        otherwise cancels the job at once, unless ``anyway``: then it is not waited for
        either. A job that waits for nothing is due at once.
        """
        ...

    def batch(self, id: str, now: datetime) -> Batch | None:
        """The batch ``id`` at ``now``; None when the store has none (never pushed, or pruned)."""
        ...

    def cancel_batch(self, id: str, now: datetime) -> int:
        """``cancel`` each member of the batch ``id`` that has not ended; say how many it
        cancelled or asked. The callback still runs as the last of them ends."""
        ...

    def waits(self, id: str) -> list[str]:
        """The IDs of the jobs the job ``id`` still waits for, lowest first."""
        ...

    def follow(self, now: datetime) -> int:
        """Let go, or cancel, each job that waits for a job that ended without letting it go;
        say how many waits it resolved."""
        ...
