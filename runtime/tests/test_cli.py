"""jobq.cli: the jobs command, driven as a user types it, on a MemoryStore.

Most tests drive it with typer's CliRunner through a small app's command
(``cliapp.py``, which mounts it as an app's cli.py does); those that need a
signal, an exit status of a process of its own or its log lines on stderr run
``cliapp.py`` as a process. Each app's own tests drive the same command once on
its real database.
"""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO

import pytest
import sqlalchemy.exc
import typer
from cliapp import KEEP, NAME, Database, Flaky, Unmigrated, command
from typer.testing import CliRunner, Result

import jobq
from jobq.cli.logs import OneLine
from jobq.process import Role
from jobq.supervisor import MOST
from jobq.testing import MemoryStore

CLIAPP = Path(__file__).with_name("cliapp.py")
runner = CliRunner()


@pytest.fixture
def database() -> Database:
    return Database()


def _run(database: Database, *args: str, env: dict[str, str] | None = None) -> Result:
    return runner.invoke(command(database), list(args), env=env)


def _ok(database: Database, *args: str) -> str:
    """The command's output; it must succeed."""
    result = _run(database, *args)
    assert result.exit_code == 0, result.output
    return result.stdout


def _failed_job(
    store: MemoryStore,
    kind: str = "flaky",
    error: str = "connection refused",
    failed_at: datetime | None = None,
    key: str = "",
    carried: dict[str, str] | None = None,
) -> str:
    """A job that failed for good after two attempts (at ``failed_at``, now by default); its ID.

    With a ``key``, it is pushed as a job of a one-at-a-time kind, which keeps its key.
    """
    job = jobq.Job(
        kind=kind,
        payload='{"up_at":null}',
        run_at=failed_at or datetime.now(UTC),
        key=key,
        one_at_a_time=bool(key),
        carried=carried,
    )
    if key:
        assert store.push_unique(job)
    else:
        store.push(job)
    for attempt in (1, 2):
        now = failed_at or datetime.now(UTC)
        claimed = store.claim(now, now + timedelta(minutes=1))
        assert claimed is not None
        claimed.error = error
        # As the queue keeps a failed attempt's traceback with the job (jobq.TRACEBACK_MOST).
        claimed.traceback = f"Traceback (most recent call last):\n  attempt {attempt}\n{error}\n"
        if attempt == 1:
            store.retry(claimed)
        else:
            claimed.failed_at = now
            store.fail(claimed)
    return job.id


def _waiting_job(store: MemoryStore, kind: str = "flaky", *, later: bool = False) -> str:
    """A job that waits, due now or in an hour; its ID."""
    job = jobq.Job(
        kind=kind,
        payload='{"up_at":null}',
        run_at=datetime.now(UTC) + timedelta(hours=1 if later else 0),
    )
    store.push(job)
    return job.id


def _kinds(database: Database) -> str:
    """The app's kinds, as a command lists them."""
    return ", ".join(sorted(database.queues[-1].kinds))


def test_importing_jobq_cli_without_typer_says_in_one_line_how_to_install_it() -> None:
    code = "import sys; sys.modules['typer'] = None; import jobq.cli"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last == "ModuleNotFoundError: jobq.cli needs typer: pip install 'jobq[cli]'"


# The help


def test_the_jobs_help_names_every_jobs_command() -> None:
    cli = command(Database())
    described = " ".join(runner.invoke(cli, ["jobs", "--help"]).output.split("╭")[0].split())
    group = typer.main.get_group(cli).commands["jobs"]
    assert isinstance(group, typer.core.TyperGroup)
    names = {"retry", "prune", "push", "run-due", "pause", "resume", "show", "cancel"}
    more = {"cancelled", "discard", "work", "processes", "health", "batch", "cancel-batch"}
    assert names | more <= set(group.commands)
    for name in group.commands:
        assert f" {name} " in described or f" {name}," in described, (name, described)


# The failed jobs


def test_jobs_lists_the_jobs_that_failed_for_good(database: Database) -> None:
    id = _failed_job(database.memory, error="dial tcp 10.0.0.5:587: connection refused")
    listed = _ok(database, "jobs")
    assert listed.startswith("1 job failed for good, and is kept for a month")
    assert f"{id}  flaky, which failed at " in listed
    assert "after 2 attempts" in listed
    assert '{"up_at":null}' in listed
    assert "dial tcp 10.0.0.5:587: connection refused" in listed
    assert listed.rstrip().endswith(f"{NAME} jobs discard all every ended job.")


def test_jobs_json_is_for_scripts(database: Database) -> None:
    id = _failed_job(database.memory)
    [job] = json.loads(_ok(database, "jobs", "--json"))
    assert job["id"] == id
    assert job["kind"] == "flaky"
    assert job["value"] == {"up_at": None}
    assert job["attempts"] == 2
    assert job["error"] == "connection refused"
    assert datetime.fromisoformat(job["failed_at"]).tzinfo is not None
    assert (job["key"], job["request_id"]) == (None, None)


def test_jobs_shows_the_attempts_a_push_gave_a_job_and_its_snoozes(database: Database) -> None:
    store, now = database.memory, datetime.now(UTC)
    store.push(jobq.Job(kind="flaky", payload='{"up_at":null}', run_at=now, max_attempts=2))
    claimed = store.claim(now, now + timedelta(minutes=1))
    assert claimed is not None
    assert store.snooze(claimed, now), "snoozed, due at once again"
    claimed = store.claim(now, now + timedelta(minutes=1))
    assert claimed is not None
    claimed.error, claimed.failed_at = "connection refused", now
    assert store.fail(claimed)
    assert "after 1 attempt (of the 2 its push gave it), snoozed 1 time\n" in _ok(database, "jobs")
    [job] = json.loads(_ok(database, "jobs", "--json"))
    assert (job["attempts"], job["max_attempts"], job["snoozes"]) == (1, 2, 1)


def test_jobs_shows_a_failed_jobs_key_and_the_request_that_pushed_it(database: Database) -> None:
    keyed = _failed_job(database.memory, key="user-7", carried={"request_id": "req-4f2a"})
    plain = _failed_job(database.memory)
    listed = _ok(database, "jobs")
    keyed_part, plain_part = (
        listed.split(f"{id}  flaky")[1].split("\n\n")[0] for id in (keyed, plain)
    )
    assert "        key: user-7\n" in keyed_part
    assert "        pushed by request req-4f2a\n" in keyed_part
    # A job with neither shows neither.
    assert "key:" not in plain_part
    assert "pushed by request" not in plain_part
    as_json = {job["id"]: job for job in json.loads(_ok(database, "jobs", "--json"))}
    assert (as_json[keyed]["key"], as_json[keyed]["request_id"]) == ("user-7", "req-4f2a")
    assert (as_json[plain]["key"], as_json[plain]["request_id"]) == (None, None)


def test_what_a_job_kept_is_shown_with_its_control_characters_escaped(database: Database) -> None:
    _failed_job(database.memory, error="\x1b[2Jcleared\u202eevil")
    listed = _ok(database, "jobs")
    assert "\x1b" not in listed
    assert "\u202e" not in listed
    assert "\\x1b[2Jcleared\\u202eevil" in listed


# Retry, cancel, discard, prune


def test_jobs_retry_puts_one_back_to_run_from_its_first_attempt(database: Database) -> None:
    id = _failed_job(database.memory)
    assert (
        _ok(database, "jobs", "retry", id)
        == "1 job back to run, from scratch, as the app's queue finds it.\n"
    )
    assert database.memory.failed() == []
    now = datetime.now(UTC)
    again = database.memory.claim(now, now + timedelta(minutes=1))
    assert again is not None
    assert again.attempts == 1


def _long_job_failed(store: MemoryStore) -> str:
    """A job that failed for good after writing its progress, metadata and checkpoint."""
    job = jobq.Job(kind="flaky", payload='{"up_at":null}', run_at=datetime.now(UTC))
    store.push(job)
    now = datetime.now(UTC)
    claimed = store.claim(now, now + timedelta(minutes=1))
    assert claimed is not None
    progress = '{"done": 12, "total": 20, "note": "page 3"}'
    assert store.record(claimed, progress, '{"rows": 1200}', '{"steps": 12}')
    claimed.error, claimed.failed_at = "the disk is full", now
    store.fail(claimed)
    return job.id


@pytest.mark.parametrize("resume", [False, True], ids=["from scratch", "--resume"])
def test_jobs_retry_says_whether_it_starts_from_scratch_or_its_checkpoint(
    database: Database, resume: bool
) -> None:
    id = _long_job_failed(database.memory)
    said = _ok(database, "jobs", "retry", id, *(["--resume"] if resume else []))
    start = "from its last checkpoint" if resume else "from scratch"
    assert said == f"1 job back to run, {start}, as the app's queue finds it.\n"
    now = datetime.now(UTC)
    again = database.memory.claim(now, now + timedelta(minutes=1))
    assert again is not None
    assert again.checkpoint == ('{"steps": 12}' if resume else None)
    assert again.metadata == '{"rows": 1200}', "metadata stays either way"


def test_jobs_show_says_a_long_jobs_progress_metadata_and_checkpoint(database: Database) -> None:
    id = _long_job_failed(database.memory)
    shown = _ok(database, "jobs", "show", id)
    assert "  progress: 12 of 20 (60%), page 3\n" in shown
    assert '  metadata: {"rows": 1200}\n' in shown
    assert '  checkpoint: {"steps": 12} (jobs retry --resume starts there)\n' in shown
    as_json = json.loads(_ok(database, "jobs", "show", id, "--json"))
    assert as_json["progress"] == {"done": 12, "total": 20, "note": "page 3"}
    assert (as_json["metadata"], as_json["checkpoint"]) == ({"rows": 1200}, {"steps": 12})


def test_jobs_retry_all_puts_every_one_back(database: Database) -> None:
    for _ in range(3):
        _failed_job(database.memory)
    assert _ok(database, "jobs", "retry", "all") == (
        "3 jobs back to run, from scratch, as the app's queue finds it.\n"
    )
    assert _ok(database, "jobs", "retry", "all") == "No job to run again: none failed for good.\n"


def test_jobs_retry_of_an_unknown_id_says_so_in_one_line(database: Database) -> None:
    result = _run(database, "jobs", "retry", "42")
    assert result.exit_code == 1
    assert result.stderr == (
        f"{NAME}: no job 42 failed for good or was cancelled: {NAME} jobs and "
        f"{NAME} jobs cancelled list the ones that did\n"
    )


@pytest.mark.parametrize("which", ["", "abc", "1.5", "#7"])
def test_jobs_retry_of_what_is_not_an_id_says_so(database: Database, which: str) -> None:
    _failed_job(database.memory)
    result = _run(database, "jobs", "retry", which)
    assert result.exit_code == 1
    assert result.stderr == (
        f"{NAME}: {json.dumps(which)} is not a job's ID: give the ID {NAME} jobs shows, or all\n"
    )
    assert len(database.memory.failed()) == 1


def test_jobs_cancel_of_a_waiting_job_keeps_it_cancelled_and_it_never_runs(
    database: Database,
) -> None:
    store = database.memory
    due, later, kept = _waiting_job(store), _waiting_job(store, later=True), _waiting_job(store)
    assert _ok(database, "jobs", "cancel", due, later) == (
        f"Cancelled job {due}: it will not run.\nCancelled job {later}: it will not run.\n"
    )
    now = datetime.now(UTC) + timedelta(hours=2)
    claimed = store.claim(now, now + timedelta(minutes=1))
    assert claimed is not None
    assert claimed.id == kept, "only the job not cancelled runs"
    assert store.claim(now, now + timedelta(minutes=1)) is None
    listed = _ok(database, "jobs", "cancelled")
    assert listed.startswith("2 jobs cancelled, and are kept for a month"), listed
    assert f"  {later}  flaky, cancelled at " in listed
    assert listed.count(" before it ran\n") == 2
    as_json = json.loads(_ok(database, "jobs", "cancelled", "--json"))
    assert [(j["id"], j["ended"]) for j in as_json] == [(later, "cancelled"), (due, "cancelled")]
    failed = _ok(database, "jobs")
    assert "No job has failed for good." in failed
    assert f"2 jobs cancelled: {NAME} jobs cancelled lists them." in failed


def test_jobs_cancel_of_a_running_job_asks_its_instance_and_of_an_ended_one_fails(
    database: Database,
) -> None:
    store = database.memory
    failed = _failed_job(store)  # first: its claims take the job due first
    running = _waiting_job(store)
    now = datetime.now(UTC)
    claimed = store.claim(now, now + timedelta(minutes=1))
    assert claimed is not None
    assert claimed.id == running
    asked = _ok(database, "jobs", "cancel", running)
    assert asked.startswith(f"Job {running} is running (or about to, claimed)")
    assert store.asked([running]) == [running]
    result = _run(database, "jobs", "cancel", failed, "4242")
    assert result.exit_code == 1
    assert result.stderr == (
        f"{NAME}: no job {failed} waits or runs (it ended, or never was).\n"
        f"{NAME}: no job 4242 waits or runs (it ended, or never was).\n"
    )
    assert [j.id for j in store.failed()] == [failed], "a failed job stays failed"
    result = _run(database, "jobs", "cancel", "7x")
    assert result.exit_code == 1
    assert "is not a job's ID" in result.stderr


def test_a_job_past_its_expiry_never_runs_and_is_listed_expired(database: Database) -> None:
    now = datetime.now(UTC)
    _ok(database, "jobs")  # the app's queue, to push with
    flaky = database.queues[-1].kinds["flaky"]
    up = Flaky(up_at=now - timedelta(days=1))  # the service is up: a job that runs, is done
    expired = flaky.push(up, expires_at=now - timedelta(seconds=1))
    kept = flaky.push(up, expires_at=now + timedelta(hours=1))
    ran = _ok(database, "jobs", "run-due")
    assert f"flaky job {expired}, attempt 1: expired" in ran
    assert f"flaky job {kept}, attempt 1: done" in ran
    listed = _ok(database, "jobs", "cancelled")
    assert f"  {expired}  flaky, expired at " in listed
    assert " UTC before it ran\n" in listed
    [as_json] = json.loads(_ok(database, "jobs", "cancelled", "--json"))
    assert (as_json["id"], as_json["ended"]) == (expired, "expired")


def test_jobs_retry_runs_a_cancelled_job_by_its_id_and_retry_all_only_failed_ones(
    database: Database,
) -> None:
    store = database.memory
    failed = _failed_job(store)
    cancelled = _waiting_job(store)
    assert store.cancel(cancelled, datetime.now(UTC)) == "cancelled"
    assert _ok(database, "jobs", "retry", "all") == (
        "1 job back to run, from scratch, as the app's queue finds it.\n"
    )
    assert [j.id for j in store.cancelled()] == [cancelled], "all: the failed ones only"
    _ok(database, "jobs", "retry", cancelled)
    assert store.cancelled() == []
    now = datetime.now(UTC)
    ran = {j.id for j in iter(lambda: store.claim(now, now + timedelta(minutes=1)), None)}
    assert ran == {cancelled, failed}


def test_jobs_discard_deletes_ended_jobs_by_id_or_all(database: Database) -> None:
    store = database.memory
    failed = [_failed_job(store) for _ in range(3)]
    cancelled, waiting = _waiting_job(store), _waiting_job(store, later=True)
    store.cancel(cancelled, datetime.now(UTC))
    assert _ok(database, "jobs", "discard", failed[0]) == (
        "Deleted 1 job that ended (failed for good, or cancelled).\n"
    )
    result = _run(database, "jobs", "discard", failed[1], waiting)
    assert result.exit_code == 1, "a job that waits is not discarded"
    assert result.stderr.startswith("Deleted 1 job; the others did not end")
    assert _ok(database, "jobs", "discard", "all") == (
        "Deleted 2 jobs that ended (failed for good, or cancelled).\n"
    )
    assert (store.failed(), store.cancelled()) == ([], [])
    assert "No job has failed for good." in _ok(database, "jobs")
    now = datetime.now(UTC) + timedelta(hours=2)
    claimed = store.claim(now, now + timedelta(minutes=1))
    assert claimed is not None
    assert claimed.id == waiting, "the waiting job is kept"


def test_jobs_prune_deletes_the_jobs_that_ended_longer_ago_than_the_app_keeps_them(
    database: Database,
) -> None:
    now = datetime.now(UTC)
    _failed_job(database.memory, failed_at=now - KEEP - timedelta(hours=1))
    kept = _failed_job(database.memory, failed_at=now - KEEP + timedelta(hours=1))
    assert _ok(database, "jobs", "prune").startswith("Deleted 1 job that ended before ")
    assert [job.id for job in database.memory.failed()] == [kept]


# Lists and one job


def test_jobs_list_shows_the_jobs_of_a_state_a_page_at_a_time(database: Database) -> None:
    store = database.memory

    def listed(*args: str) -> str:
        return _ok(database, "jobs", "list", *args)

    failed = _failed_job(store)
    running = _waiting_job(store)
    waiting = [_waiting_job(store) for _ in range(3)]
    later = _waiting_job(store, later=True)
    now = datetime.now(UTC)
    claimed = store.claim(now, now + timedelta(minutes=5), jobq.Claimant(instance="web-1:4:ab"))
    assert claimed is not None
    assert claimed.id == running
    assert f"  {running}  flaky: running since " in listed("running")
    assert listed("retrying") == "No retrying job.\n"
    assert "on web-1:4:ab" in listed("running")
    assert f"  {later}  flaky: waiting, due at " in listed("scheduled")
    assert f"  {failed}  flaky: failed for good at " in listed("failed")
    assert "connection refused" in listed("failed")
    assert listed("done") == "No done job.\n"
    assert listed("waiting", "--kind", "digest") == "No waiting job of kind digest.\n"
    # Two a page: the oldest first, and each page says where the next begins.
    first = listed("waiting", "--limit", "2")
    assert [line.split()[0] for line in first.splitlines()[::2][:2]] == waiting[:2]
    more = first.splitlines()[-1]
    assert more.startswith(f"More: {NAME} jobs list waiting --after ")
    second = listed("waiting", "--limit", "2", "--after", more.rsplit(" ", 1)[1])
    assert second.split()[0] == waiting[2]
    assert "More:" not in second
    rows = json.loads(listed("running", "--json"))
    assert [(r["id"], r["state"]) for r in rows] == [(running, "running")]
    refused = _run(database, "jobs", "list", "lost")
    assert refused.exit_code == 1
    assert 'no state "lost": give one of waiting, scheduled' in refused.output
    bad = _run(database, "jobs", "list", "--after", "page two")
    assert "is not where a page ended" in bad.output
    assert _run(database, "jobs", "list", "--limit", "0").exit_code == 1
    # Its attempt failed: it waits again, retrying, and says so.
    claimed.error, claimed.run_at = "refused", datetime.now(UTC) + timedelta(minutes=1)
    assert store.retry(claimed)
    assert f"  {running}  flaky: retrying, due at " in listed("retrying")
    assert "(1 attempt)" in listed("retrying")


def test_jobs_show_says_what_became_of_a_job(database: Database) -> None:
    store = database.memory

    def show(id: str) -> str:
        return _ok(database, "jobs", "show", id)

    failed = _failed_job(store, error="connection refused")
    running, waiting = _waiting_job(store), _waiting_job(store, later=True)
    now = datetime.now(UTC)
    claimed = store.claim(
        now, now + timedelta(minutes=5), jobq.Claimant(instance="web-1:42:ab12cd")
    )
    assert claimed is not None
    assert claimed.id == running
    assert show(running).startswith(f"Job {running}, flaky: running since {now:%Y-%m-%d %H:%M}")
    assert "(attempt 1, on web-1:42:ab12cd)" in show(running)
    assert show(waiting).startswith(f"Job {waiting}, flaky: waiting, due at ")
    assert "(no attempt yet)" in show(waiting)
    told = show(failed)
    assert told.startswith(f"Job {failed}, flaky: failed for good at ")
    assert "after 2 attempts" in told
    assert "  last error: connection refused\n" in told
    assert "  its traceback:\n    Traceback (most recent call last):\n      attempt 2\n" in told
    assert '  value: {"up_at":null}\n' in told
    store.cancel(waiting, datetime.now(UTC))
    assert show(waiting).startswith(f"Job {waiting}, flaky: cancelled at ")
    as_json = json.loads(_ok(database, "jobs", "show", running, "--json"))
    assert (as_json["state"], as_json["claimed_by"], as_json["attempts"]) == (
        "running",
        "web-1:42:ab12cd",
        1,
    )
    as_json = json.loads(_ok(database, "jobs", "show", failed, "--json"))
    assert as_json["traceback"].endswith("  attempt 2\nconnection refused\n")
    unknown = _run(database, "jobs", "show", "424242")
    assert unknown.exit_code == 1
    assert unknown.stderr.startswith(f"{NAME}: no job 424242: it was never pushed")
    assert _run(database, "jobs", "show", "4x").exit_code == 1


# Batches and jobs that wait for others


def _batch(store: MemoryStore, n: int = 4) -> tuple[str, list[str]]:
    """A batch of ``n`` flaky jobs, due now, with a digest as its callback; its ID and theirs."""
    now = datetime.now(UTC)
    members = [jobq.Job(kind="flaky", payload='{"up_at":null}', run_at=now) for _ in range(n)]
    callback = jobq.Job(kind="digest", payload="1", run_at=now)
    batch = store.push_batch(members, callback, now)
    return batch, [job.id for job in members]


def test_jobs_batch_counts_its_members_by_state_and_names_those_not_done(
    database: Database,
) -> None:
    store = database.memory
    batch, (first, second, third, fourth) = _batch(store)
    now = datetime.now(UTC)
    claimed = store.claim(now, now + timedelta(minutes=5))
    assert claimed is not None
    assert claimed.id == first
    assert store.done(claimed)
    assert store.cancel(second, now) == "cancelled"
    running = store.claim(now, now + timedelta(minutes=5))
    assert running is not None
    assert running.id == third
    told = _ok(database, "jobs", "batch", batch)
    assert told.startswith(
        f"Batch {batch}, open: 2 of 4 members ended; its callback, job {batch}, is pushed as "
        f"the last ends.\n"
    )
    for state, n in (("waiting", 1), ("running", 1), ("done", 1), ("failed", 0)):
        assert re.search(rf"^  {state} +{n}$", told, re.MULTILINE), (state, told)
    assert re.search(r"^  cancelled +1$", told, re.MULTILINE)
    assert re.search(r"^  total +4$", told, re.MULTILINE)
    assert f"  not done: {second}\n" in told
    assert f"{NAME} jobs cancel-batch {batch} cancels the 2 not ended." in told
    as_json = json.loads(_ok(database, "jobs", "batch", batch, "--json"))
    assert as_json == {
        "id": batch,
        "callback": batch,
        "total": 4,
        "waiting": 1,
        "running": 1,
        "done": 1,
        "failed": 0,
        "cancelled": 1,
        "expired": 0,
        "pending": 2,
        "ended": False,
        "created_at": as_json["created_at"],
        "ended_at": None,
        "not_done": [second],
    }
    assert datetime.fromisoformat(as_json["created_at"]).tzinfo is not None
    # Its last two end: it ended, and says when.
    assert store.cancel(fourth, now) == "cancelled"
    running.failed_at, running.error = datetime.now(UTC), "boom"
    assert store.fail(running)
    ended = _ok(database, "jobs", "batch", batch)
    assert ended.startswith(f"Batch {batch}, ended at ")
    assert f"all 4 members ended, and its callback, job {batch}, was pushed." in ended
    assert f"  not done: {second}, {third}, {fourth}\n" in ended
    assert "cancel-batch" not in ended
    as_json = json.loads(_ok(database, "jobs", "batch", batch, "--json"))
    assert as_json["ended"] is True
    assert datetime.fromisoformat(as_json["ended_at"]).tzinfo is not None
    assert (as_json["pending"], as_json["failed"], as_json["cancelled"]) == (0, 1, 2)


def test_jobs_batch_of_an_unknown_batch_says_so_in_one_line(database: Database) -> None:
    for args in (["424242"], ["424242", "--json"]):
        unknown = _run(database, "jobs", "batch", *args)
        assert unknown.exit_code == 1
        [line] = unknown.stderr.splitlines()
        assert line.startswith(f"{NAME}: no batch 424242: it was never pushed, or was pruned")
        assert unknown.stdout == ""
    not_an_id = _run(database, "jobs", "batch", "4x")
    assert not_an_id.exit_code == 1
    assert "is not a batch's ID" in not_an_id.stderr
    assert _run(database, "jobs", "cancel-batch", "424242").exit_code == 1


def test_jobs_cancel_batch_cancels_the_members_that_have_not_ended(database: Database) -> None:
    store = database.memory
    batch, (first, *rest) = _batch(store, 3)
    now = datetime.now(UTC)
    claimed = store.claim(now, now + timedelta(minutes=5))
    assert claimed is not None
    assert claimed.id == first
    assert store.done(claimed)
    told = _ok(database, "jobs", "cancel-batch", batch)
    assert told.startswith(f"Cancelled 2 members of batch {batch} (a running one stops")
    assert sorted(job.id for job in store.cancelled()) == sorted(rest)
    read = store.batch(batch, datetime.now(UTC))
    assert read is not None
    assert (read.done, read.cancelled, read.ended) == (1, 2, True)
    # The callback, let go as the last ended, is due now; a batch cancelled again has no one.
    assert _ok(database, "jobs", "show", batch).startswith(f"Job {batch}, digest: waiting, due")
    again = _ok(database, "jobs", "cancel-batch", batch)
    assert again == f"Batch {batch} has no member left to cancel: each has ended.\n"


def test_jobs_show_names_what_a_job_waits_for_and_its_batch(database: Database) -> None:
    store = database.memory
    batch, (member, *_) = _batch(store, 2)
    first, second = _waiting_job(store), _waiting_job(store)
    now = datetime.now(UTC)
    after = jobq.Job(kind="digest", payload="2", run_at=now)
    store.push_chain([after], [first, second], False, now)
    told = _ok(database, "jobs", "show", after.id)
    assert told.startswith(f"Job {after.id}, digest: waiting for other jobs to end (no attempt")
    assert f"  waits for {first}, {second}: due once each has ended\n" in told
    assert "9999" not in told
    assert "batch" not in told
    as_json = json.loads(_ok(database, "jobs", "show", after.id, "--json"))
    assert (as_json["waits_for"], as_json["batch"]) == ([first, second], None)
    shown_member = _ok(database, "jobs", "show", member)
    assert f"  member of batch {batch}: 0 of 2 members ended ({NAME} jobs batch {batch})\n" in (
        shown_member
    )
    as_json = json.loads(_ok(database, "jobs", "show", member, "--json"))
    assert (as_json["waits_for"], as_json["batch"]) == ([], batch)
    callback = _ok(database, "jobs", "show", batch)
    assert callback.startswith(f"Job {batch}, digest: waiting for other jobs to end")
    assert f"  callback of batch {batch}: 0 of 2 members ended; it is due as the last ends" in (
        callback
    )
    assert json.loads(_ok(database, "jobs", "show", batch, "--json"))["batch"] == batch
    # A job with neither says neither.
    plain = json.loads(_ok(database, "jobs", "show", first, "--json"))
    assert (plain["waits_for"], plain["batch"]) == ([], None)
    # Listed with the jobs scheduled for later: waiting for others, not due in the year 9999.
    listed = _ok(database, "jobs", "list", "scheduled")
    assert f"  {after.id:>4}  digest: waiting for other jobs to end (no attempt yet)" in listed
    assert "9999" not in listed


def test_a_kind_that_keeps_results_is_shown_counted_and_pruned(database: Database) -> None:
    def invoice_kind(queue: jobq.Queue) -> None:
        @queue.kind("invoice", keep=timedelta(hours=1))
        def invoice(order: int) -> dict[str, int]:
            return {"order": order, "cents": order * 100}

    database.more_kinds.append(invoice_kind)
    pushed = _ok(database, "jobs", "push", "invoice", "7")
    id = pushed.removeprefix("Pushed invoice job ").removesuffix(".\n")
    assert "invoice job " in _ok(database, "jobs", "run-due")
    told = _ok(database, "jobs", "show", id)
    assert told.startswith(f"Job {id}, invoice: done at ")
    assert '  result: {"order":7,"cents":700}\n' in told
    as_json = json.loads(_ok(database, "jobs", "show", id, "--json"))
    assert (as_json["state"], as_json["result"]) == ("done", {"order": 7, "cents": 700})
    stats = json.loads(_ok(database, "jobs", "stats", "--json"))
    assert [(s["kind"], s["done"], s["failed"]) for s in stats] == [("invoice", 1, 0)]
    header = "kind due later running failed cancelled done oldest due waited"
    assert _ok(database, "jobs", "stats").splitlines()[0].split() == header.split()
    assert _ok(database, "jobs", "prune").startswith("Deleted 0 jobs "), "kept for its hour"
    later = datetime.now(UTC) + timedelta(hours=1, seconds=1)
    assert database.memory.prune(later - KEEP, later) == 1


def test_jobs_schedules_lists_each_kinds_schedule_its_next_run_and_the_last_pushed(
    database: Database,
) -> None:
    nightly, before = jobq.Every(timedelta(days=1)), datetime.now(UTC)
    listed = _ok(database, "jobs", "schedules")
    # The next midnight UTC, as the command saw it (it may have struck meanwhile).
    nexts = {nightly.next_after(at) for at in (before, datetime.now(UTC))}
    said = "  prune-jobs  every 24h, next at {:%Y-%m-%d %H:%M:%S} UTC, none pushed yet"
    assert {said.format(at) for at in nexts} & set(listed.splitlines()), listed
    run = jobq.Job(kind="prune-jobs", payload="null", run_at=datetime(2026, 1, 2, tzinfo=UTC))
    assert database.memory.push_scheduled("prune-jobs", run)
    assert ", last pushed 2026-01-02 00:00:00 UTC\n" in _ok(database, "jobs", "schedules")


def test_jobs_stats_counts_each_kinds_jobs_and_names_the_paused_ones(database: Database) -> None:
    _failed_job(database.memory)
    _waiting_job(database.memory)
    _waiting_job(database.memory, later=True)
    _ok(database, "jobs", "pause", "flaky")
    table = _ok(database, "jobs", "stats").splitlines()
    header = "kind due later running failed cancelled oldest due waited"
    assert table[0].split() == header.split()
    assert table[1].split()[:6] == ["flaky", "1", "1", "0", "1", "0"]
    assert table[-1] == "Paused on every instance, their due jobs waiting: flaky."
    [counted] = json.loads(_ok(database, "jobs", "stats", "--json"))
    assert (counted["due"], counted["later"], counted["failed"], counted["paused"]) == (
        1,
        1,
        1,
        True,
    )


# Push, run-due, pause


def test_a_pushed_job_that_fails_is_retried_after_its_backoff_then_failed_for_good(
    database: Database,
) -> None:
    assert _ok(database, "jobs", "push", "flaky", '{"up_at": null}') == "Pushed flaky job 1.\n"
    started = time.monotonic()
    first = _ok(database, "jobs", "run-due")
    assert "flaky job 1, attempt 1: retried" in first
    assert "ConnectionError: the service is down" in first
    # Until flaky's backoff, half a second, is out, run-due finds nothing; then attempt 2.
    while "attempt 2" not in (second := _ok(database, "jobs", "run-due")):
        assert second == "No job was due.\n"
        assert time.monotonic() - started < 30, "the retry never came due"
        time.sleep(0.05)
    assert time.monotonic() - started >= 0.49, "the retry ran before its backoff"
    assert "flaky job 1, attempt 2: failed" in second
    [failed] = json.loads(_ok(database, "jobs", "--json"))
    assert (failed["id"], failed["attempts"]) == ("1", 2)
    assert "the service is down: connection refused" in failed["error"]


def test_push_of_an_unknown_kind_names_the_kinds_there_are(database: Database) -> None:
    result = _run(database, "jobs", "push", "nope")
    assert result.exit_code == 1
    assert result.stderr == f"{NAME}: no kind 'nope': the app's kinds are {_kinds(database)}\n"


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ('{"user": "7"}', "user: Input should be a valid integer"),
        ('{"user": 7, "extra": 2}', "it has no field extra"),
        ('{"user": 7.5}', "user: Input should be a valid integer"),
        ('{"user": 7, "user": 8}', 'it has the key "user" twice'),
        ("{}", "user: Field required"),
        ("user=7", "Invalid JSON"),
        ('{"user": 99999999999999999999}', "past what the database's integers hold"),
    ],
)
def test_push_is_strict_and_refuses_in_one_line_what_it_would_change(
    database: Database, value: str, said: str
) -> None:
    result = _run(database, "jobs", "push", "welcome-mail", value)
    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    assert line.startswith(f"{NAME}: {value} is not a value of welcome-mail: "), line
    assert said in line, line
    now = datetime.now(UTC)
    assert database.memory.claim(now, now + timedelta(minutes=1)) is None


@pytest.mark.parametrize("after", ["-1", "nan", "1e12"])
def test_push_in_a_wait_no_time_holds_is_refused(database: Database, after: str) -> None:
    result = _run(database, "jobs", "push", "prune-jobs", "--in", after)
    assert result.exit_code == 1
    assert "is not a wait the app can keep: give 0 to 3153600000 seconds" in result.stderr


def test_a_paused_kind_runs_only_once_resumed_and_the_others_run_meanwhile(
    database: Database,
) -> None:
    def run(*args: str) -> str:
        return _ok(database, *args)

    pushed = run("jobs", "push", "flaky", '{"up_at": "2000-01-01T00:00:00Z"}')
    assert pushed == "Pushed flaky job 1.\n"
    assert run("jobs", "push", "prune-jobs") == "Pushed prune-jobs job 2.\n"
    paused = run("jobs", "pause", "flaky", "--for", "2h")
    until = datetime.strptime(paused.split(" until ")[1][:19], "%Y-%m-%d %H:%M:%S").replace(
        tzinfo=UTC
    )
    assert timedelta(minutes=119) < until - datetime.now(UTC) <= timedelta(hours=2)
    assert run("jobs", "pause", "welcome-mail") == (
        "Paused welcome-mail on every instance until resumed: its jobs wait in the table.\n"
    )
    listed = run("jobs")
    assert listed.startswith("No job has failed for good.\n")
    assert f"  flaky         until {until:%Y-%m-%d %H:%M:%S} UTC\n" in listed
    assert "  welcome-mail  until resumed\n" in listed

    ran = run("jobs", "run-due")
    assert "prune-jobs job 2, attempt 1: done" in ran
    assert "flaky" not in ran
    assert run("jobs", "run-due") == "No job was due.\n"

    assert run("jobs", "resume", "flaky") == "Resumed flaky: its jobs run again.\n"
    assert run("jobs", "resume", "flaky") == "flaky was not paused.\n"
    assert "flaky job 1, attempt 1: done" in run("jobs", "run-due")
    assert "flaky" not in run("jobs")


@pytest.mark.parametrize("span", ["1x", "0s", "h", "-1h", "1.5h", "10 m", "1234567d"])
def test_pause_for_a_time_it_cannot_read_says_the_forms_it_takes(
    database: Database, span: str
) -> None:
    result = _run(database, "jobs", "pause", "flaky", "--for", span)
    assert result.exit_code == 1
    assert result.stderr == (
        f"{NAME}: --for {span!r} is not a time: give a whole number and s, m, h or d, "
        f"such as 90s, 10m, 1h or 2d\n"
    )


@pytest.mark.parametrize("command_", ["pause", "resume"])
def test_pause_and_resume_of_an_unknown_kind_name_the_kinds(
    database: Database, command_: str
) -> None:
    result = _run(database, "jobs", command_, "nope")
    assert result.exit_code == 1
    assert result.stderr == f"{NAME}: no kind 'nope': the app's kinds are {_kinds(database)}\n"


# Errors, as one line


def test_a_command_on_a_database_that_is_not_migrated_says_the_apps_own_line(
    database: Database,
) -> None:
    said = f"the database has none of the app's tables: run ./{NAME} migrate"
    database.problem = Unmigrated(said)
    for args in (["jobs"], ["jobs", "retry", "all"], ["jobs", "health"], ["jobs", "work"]):
        result = _run(database, *args)
        assert (result.exit_code, result.stderr) == (1, f"{NAME}: {said}\n"), args


def test_a_database_that_is_down_is_one_line_that_names_its_setting(database: Database) -> None:
    driver = OSError('connection to server at "127.0.0.1", port 1 failed: Connection refused')
    database.problem = sqlalchemy.exc.OperationalError("SELECT 1", {}, driver)
    for args in (["jobs"], ["jobs", "processes"], ["jobs", "health"]):
        result = _run(database, *args)
        assert result.exit_code == 1, args
        [line] = result.stderr.splitlines()
        assert line == (
            f"{NAME}: no database server answers where DATABASE_URL points: start it, or fix its "
            f"host and port (DATABASE_URL is sqlite:///app.sqlite3; the driver said: {driver})"
        )


def test_an_error_of_the_store_is_its_own_line_and_a_bug_is_a_traceback(
    database: Database,
) -> None:
    database.problem = jobq.StoreUnavailable("the store is away: try again")
    result = _run(database, "jobs")
    assert (result.exit_code, result.stderr) == (1, f"{NAME}: the store is away: try again\n")
    database.problem = ZeroDivisionError("a bug")
    result = _run(database, "jobs")
    assert isinstance(result.exception, ZeroDivisionError), "not hidden as a line"


def test_a_store_without_the_extra_a_command_needs_is_told_in_one_line(
    plain_store: jobq.Store,
) -> None:
    database = Database(store=plain_store)
    for args, extra in (
        (["jobs"], "FailedStore"),
        (["jobs", "cancel", "1"], "CancelStore"),
        (["jobs", "stats"], "StatsStore"),
        (["jobs", "pause", "x"], "PauseStore"),
        (["jobs", "processes"], "ProcessStore"),
        (["jobs", "batch", "1"], "WorkflowStore"),
        (["jobs", "cancel-batch", "1"], "WorkflowStore"),
    ):
        result = _run(database, *args)
        assert result.exit_code == 1, args
        [line] = result.stderr.splitlines()
        assert line.startswith(f"{NAME}: the app's store cannot "), line
        assert f"it is no jobq.{extra}; update the app's jobs_db.py" in line, line


def test_the_commands_log_lines_escape_what_a_handler_raised() -> None:
    try:
        raise ValueError("\x1b[31mred\u202eevil")
    except ValueError:
        record = logging.LogRecord(
            "jobq", logging.ERROR, __file__, 1, "a job failed err=%s", ("\x1b[2J",), sys.exc_info()
        )
    line = OneLine("%(levelname)s %(name)s: %(message)s").format(record)
    assert "\x1b" not in line, line
    assert "\u202e" not in line, line
    assert "\\x1b[31mred\\u202eevil" in line
    assert "Traceback" in line


# The processes, and health


def _beat(
    store: MemoryStore,
    id: str,
    role: Role,
    ago: float,
    kinds: tuple[str, ...] | None = None,
    workers: int = 4,
) -> None:
    """Record the process ``id`` as beating ``ago`` seconds ago (started an hour before)."""
    now = datetime.now(UTC)
    host, pid, _ = id.split(":")
    process = jobq.Process(
        id=id,
        host=host,
        pid=int(pid),
        role=role,
        kinds=kinds,
        workers=workers,
        started_at=now - timedelta(hours=1),
        beat_at=now - timedelta(seconds=ago),
    )
    store.beat(process, now - timedelta(days=1))


def test_jobs_processes_lists_each_process_and_the_jobs_it_runs(database: Database) -> None:
    store = database.memory
    _beat(store, "web-1:41:ab12cd", "server", 1)
    _beat(store, "box-2:7:ef34", "worker", 2, kinds=("digest", "flaky"), workers=8)
    running = _waiting_job(store)
    now = datetime.now(UTC)
    assert store.claim(now, now + timedelta(minutes=5), jobq.Claimant(instance="box-2:7:ef34"))
    listed = _ok(database, "jobs", "processes")
    assert listed.startswith("2 processes, each beating every poll (0.2 s):\n\n")
    server, worker = listed.split("\n\n")[1:3]
    assert (
        server.splitlines()[0]
        == "  web-1:41:ab12cd  server on web-1, pid 41: 4 workers, every kind"
    )
    assert re.fullmatch(
        r"        started \S+ \S+ UTC, last beat \S+ \S+ UTC \(\ds ago\)", server.splitlines()[1]
    ), server
    assert server.splitlines()[2] == "        running no job"
    assert worker.splitlines()[0] == (
        "  box-2:7:ef34  worker on box-2, pid 7: 8 workers, digest, flaky"
    )
    assert worker.splitlines()[2] == f"        running {running}"
    rows = {row["id"]: row for row in json.loads(_ok(database, "jobs", "processes", "--json"))}
    box = rows["box-2:7:ef34"]
    assert (box["host"], box["pid"], box["role"], box["kinds"], box["workers"]) == (
        "box-2",
        7,
        "worker",
        ["digest", "flaky"],
        8,
    )
    assert box["running"] == [running]
    assert rows["web-1:41:ab12cd"]["kinds"] is None
    assert rows["web-1:41:ab12cd"]["running"] == []
    assert 1.0 <= rows["web-1:41:ab12cd"]["beat_seconds_ago"] < 60
    assert datetime.fromisoformat(box["started_at"]) < datetime.fromisoformat(box["beat_at"])


def test_jobs_processes_of_none_says_so(database: Database) -> None:
    assert _ok(database, "jobs", "processes") == "No process runs the app's queue.\n"
    assert _ok(database, "jobs", "processes", "--json") == "[]\n"


def test_jobs_health_is_well_while_every_process_beats(database: Database) -> None:
    database.poll = 5.0  # seconds: three polls are 15
    assert _ok(database, "jobs", "health") == (
        "Healthy: the database answers and its migrations are current; no process runs the queue.\n"
    )
    _beat(database.memory, "web-1:41:ab12cd", "server", 1)
    _beat(database.memory, "box-2:7:ef34", "worker", 10)
    assert _ok(database, "jobs", "health") == (
        "Healthy: the database answers and its migrations are current, and 2 processes beat "
        "within three polls (15 s).\n"
    )


def test_jobs_health_fails_in_one_line_naming_a_process_past_three_polls(
    database: Database,
) -> None:
    database.poll = 5.0
    _beat(database.memory, "web-1:41:ab12cd", "server", 1)
    _beat(database.memory, "box-2:7:ef34", "worker", 20)
    result = _run(database, "jobs", "health")
    assert result.exit_code == 1
    assert result.stdout == ""
    # Its last beat 20 s ago, or a second more on a slow run.
    assert re.fullmatch(
        f"{NAME}: 1 process of 2 beat no more: worker box-2:7:ef34 on box-2, pid 7, last beat "
        r"2[01]s ago \(each beats every poll, 5 s: past 15 s it is stuck, or gone\)\n",
        result.stderr,
    ), result.stderr


def test_jobs_health_of_a_store_that_keeps_no_processes_checks_the_database_alone(
    plain_store: jobq.Store,
) -> None:
    assert _ok(Database(store=plain_store), "jobs", "health") == (
        "Healthy: the database answers and its migrations are current; the store keeps no "
        "list of processes to check.\n"
    )


# Work


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (
            ["--kinds", "flaky,nope"],
            {},
            '--kinds names no kind "nope": the app\'s kinds are digest, ',
        ),
        (["--workers", "0"], {}, "--workers 0 is no count of workers: give 1 to 1000"),
        (["--processes", "0"], {}, f'--processes "0" is no count of processes: give 1 to {MOST}, '),
        (["--processes", "two"], {}, '--processes "two" is no count of processes'),
        ([], {"QUEUE_PROCESSES": "many"}, 'QUEUE_PROCESSES is "many": give a count of processes'),
        (["--probe", "here"], {}, '--probe "here" is no address: give HOST:PORT, or PORT on '),
        (["--probe", "70000"], {}, '--probe "70000" is no address'),
        (
            ["--processes", "2", "--probe", "127.0.0.1:9000"],
            {},
            "--probe answers for one worker process, and --processes asks for 2: give --probe "
            "with --processes 1",
        ),
    ],
    ids=[
        "unknown kind",
        "no workers",
        "no processes",
        "processes not a number",
        "QUEUE_PROCESSES not a number",
        "probe not an address",
        "probe past the ports",
        "probe with processes",
    ],
)
def test_jobs_work_refuses_what_cannot_run_in_one_line(
    database: Database, args: list[str], env: dict[str, str], said: str
) -> None:
    result = _run(database, "jobs", "work", *args, env=env)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"{NAME}: {said}"), result.stderr
    assert result.stderr.count("\n") == 1


def test_jobs_work_with_no_workers_set_says_the_setting_suits_serve(database: Database) -> None:
    database.workers = 0
    result = _run(database, "jobs", "work")
    assert result.exit_code == 1
    assert result.stderr == (
        f"{NAME}: a worker runs at least 1 job at once: give --workers 1 or more (QUEUE_WORKERS "
        f"is 0, which suits serve on an instance that only pushes)\n"
    )


class Started:
    """``cliapp.py`` run as a process, as a user types the app's command, and what it wrote to
    stderr so far, read as it goes."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(CLIAPP), *args],
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: list[str] = []  # stderr's
        self.out: list[str] = []  # stdout's
        assert self.process.stderr is not None
        assert self.process.stdout is not None
        self._readers = [
            threading.Thread(target=self._read, args=(self.process.stderr, self.lines)),
            threading.Thread(target=self._read, args=(self.process.stdout, self.out)),
        ]
        for reader in self._readers:
            reader.start()

    def _read(self, stream: IO[str], into: list[str]) -> None:
        with stream:
            for line in stream:
                into.append(line)

    def said(self, text: str) -> int:
        return sum(text in line for line in self.lines)

    def until(self, check: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + 30  # bounds a failing test only
        while not check():
            assert self.process.poll() is None, f"it exited before {what}: {self.err}"
            assert time.monotonic() < deadline, f"not within 30 s: {what}: {self.err}"
            time.sleep(0.05)

    def stopped(self, number: int = signal.SIGTERM) -> int:
        """Send ``number``, and wait for the process to exit; its status."""
        self.process.send_signal(number)
        return self.ended()

    def ended(self) -> int:
        status = self.process.wait(timeout=60)
        for reader in self._readers:
            reader.join(timeout=10)
        return status

    @property
    def err(self) -> str:
        return "".join(self.lines)


@pytest.fixture
def started() -> Iterator[Callable[..., Started]]:
    made: list[Started] = []

    def start(*args: str, **env: str) -> Started:
        made.append(Started(*args, env=env))
        return made[-1]

    yield start
    for one in made:
        if one.process.poll() is None:
            one.process.kill()
        one.ended()


def test_jobs_work_runs_the_jobs_with_no_web_server_and_stops_cleanly_on_sigterm(
    started: Callable[..., Started],
) -> None:
    worker = started("jobs", "work", "--workers", "2", CLIAPP_JOBS="3")
    worker.until(lambda: worker.said("flaky ran") == 3, "the worker ran its 3 jobs")
    assert worker.stopped() == 0, worker.err
    assert worker.said("the queue runs") == 1
    assert worker.said("the worker stops") == 1
    assert "Traceback" not in worker.err


def test_jobs_work_that_cannot_start_exits_1_with_one_line(started: Callable[..., Started]) -> None:
    worker = started("jobs", "work", "--kinds", "nope")
    assert worker.ended() == 1
    [line] = [line for line in worker.lines if line.startswith(f"{NAME}:")]
    assert "--kinds names no kind" in line
    assert "Traceback" not in worker.err


def _children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads /proc")
@pytest.mark.parametrize("given", ["option", "environment"])
def test_jobs_work_with_processes_supervises_workers_that_run_the_same_command_alone(
    started: Callable[..., Started], given: str
) -> None:
    if given == "option":
        supervisor = started("jobs", "work", "--workers", "2", "--processes", "2", CLIAPP_JOBS="2")
    else:
        supervisor = started("jobs", "work", "--workers", "2", CLIAPP_JOBS="2", QUEUE_PROCESSES="2")
    supervisor.until(lambda: supervisor.said("a worker is ready") == 2, "2 workers ready")
    # Each worker has a store of its own here (a MemoryStore): each runs its 2 jobs.
    supervisor.until(lambda: supervisor.said("flaky ran") == 4, "each worker ran its jobs")
    workers = _children(supervisor.process.pid)
    assert len(workers) == 2
    typed = ["--processes", "2"] if given == "option" else []
    for pid in workers:
        argv = Path(f"/proc/{pid}/cmdline").read_text().split("\0")[:-1]
        # As typed, and --processes 1 last, which counts (the last of an option given twice).
        typed_as = [str(CLIAPP), "jobs", "work", "--workers", "2", *typed]
        assert argv[1:] == [*typed_as, "--processes", "1"]
    assert supervisor.stopped() == 0, supervisor.err
    assert supervisor.said("the worker stops") == 2
    assert "Traceback" not in supervisor.err


@pytest.mark.parametrize("probe", ["0", "127.0.0.1:0"])
def test_jobs_work_with_a_probe_answers_readyz_while_it_runs(
    started: Callable[..., Started], probe: str
) -> None:
    worker = started("jobs", "work", "--probe", probe)
    worker.until(lambda: worker.said("the worker's probes answer") == 1, "its probes answer")
    [line] = [line for line in worker.lines if "the worker's probes answer" in line]
    found = re.search(r"at=http://(127\.0\.0\.1):(\d+)", line)
    assert found is not None, line  # only a port given: on 127.0.0.1
    url = f"http://127.0.0.1:{found[2]}"
    worker.until(lambda: _status(f"{url}/readyz") == 200, "ready")  # 503 until its first tick
    with urllib.request.urlopen(f"{url}/healthz", timeout=5) as response:
        assert response.status == 200
    assert worker.stopped() == 0, worker.err


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        return e.code


def test_run_due_logs_a_line_for_each_failed_attempt_and_a_stack_only_for_the_unexpected_last(
    started: Callable[..., Started],
) -> None:
    def run_due(kind: str, payload: str, attempts: int = 0) -> tuple[str, list[str]]:
        pushed = [{"kind": kind, "payload": payload, "attempts": attempts}]
        done = started("jobs", "run-due", CLIAPP_PUSH=json.dumps(pushed))
        assert done.ended() == 0, done.err
        return "".join(done.out), done.err.splitlines()

    out, err = run_due("welcome-mail", '{"user": 404}')
    assert "welcome-mail job 1, attempt 1: failed" in out
    # A jobq.Permanent says all in its message: one line, with its level, and no stack.
    assert err == [
        "ERROR jobq: a job failed for good kind=welcome-mail job=1 attempt=1 "
        'err="user 404 has gone"'
    ]
    out, err = run_due("flaky", '{"up_at": null}')
    assert "flaky job 1, attempt 1: retried" in out
    # A retry is one line: the error's type and text, no stack.
    [line] = err
    assert line.startswith("WARNING jobq: a job failed, and will run again kind=flaky job=1 ")
    assert line.endswith('type=ConnectionError err="the service is down: connection refused"')
    # Its last attempt keeps the stack.
    out, err = run_due("flaky", '{"up_at": null}', attempts=1)
    assert "flaky job 1, attempt 2: failed" in out
    first, *stack = err
    assert first == (
        "ERROR jobq: a job failed for good kind=flaky job=1 attempt=2 "
        'err="the service is down: connection refused"'
    )
    assert stack[0] == "Traceback (most recent call last):"
    assert stack[-1] == "ConnectionError: the service is down: connection refused"
