"""The template renders an app for each database, and the app passes its own tests.

Each database's app is rendered once (copier, no --trust), installed into a
virtual environment of its own with the runtime from this checkout (tests/apps.py),
and then: its own pytest suite runs as a subprocess, and `./myapp` runs as a
user types it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import copier
import pytest
import sqlalchemy as sa
from copier.errors import DirtyLocalWarning

from apps import APP, ROOT, SERVER_ENV, Installed, render
from dbfixtures import fresh_database
from precommit import hooks

if TYPE_CHECKING:
    from collections.abc import Callable

# The databases whose app these tests render: each with its own Store and migrations.
DATABASES = ["sqlite", "postgres", "mysql"]
# Each on the default web framework, Starlette, and on FastAPI (web=fastapi).
APPS = [(db, "starlette") for db in DATABASES] + [(db, "fastapi") for db in DATABASES]


@pytest.fixture(
    scope="module",
    params=APPS,
    ids=[db if web == "starlette" else f"{db}-{web}" for db, web in APPS],
)
def app(request: pytest.FixtureRequest, apps: Callable[..., Installed]) -> Installed:
    db, web = request.param
    return apps(db, web)


def test_the_rendered_store_is_the_template_source_as_it_is(app: Installed) -> None:
    rendered = app.folder / "src" / APP
    assert (rendered / "jobs_db.py").read_text() == (
        ROOT / "template" / "_stores" / f"{app.db}.py"
    ).read_text()
    assert (rendered / "web.py").read_text() == (
        ROOT / "template" / "_web" / f"{app.web}.py"
    ).read_text()
    # The plumbing is jobq's store kit's (jobq.sql): the app has its SQL alone.
    assert sorted(p.name for p in rendered.glob("jobs_*.py")) == ["jobs_db.py"]
    sources = sorted((ROOT / "template" / "_migrations" / app.db).glob("[0-9]*_jobs.py"))
    assert [path.name for path in sources][:2] == ["0001_jobs.py", "0002_jobs.py"]
    for source in sources:
        migration = rendered / "migrations" / "versions" / source.name
        assert migration.read_text() == source.read_text(), f"{migration.name} is not its source"
    # Neither the other databases' sources nor the template's own folders are copied.
    assert not list(app.folder.rglob("_stores"))
    assert not list(app.folder.rglob("_migrations"))
    assert not list(app.folder.rglob("_web"))
    assert os.access(app.folder / APP, os.X_OK)


@pytest.mark.parametrize("app_name", ["myapp", "a-much-longer-app-name"])
def test_the_readmes_table_of_files_is_aligned_whatever_the_names(
    app_name: str, tmp_path: Path
) -> None:
    readme = (render("sqlite", tmp_path / "app", app_name=app_name) / "README.md").read_text()
    table = readme.split("## Where things are\n\n```\n")[1].split("```")[0].splitlines()
    assert table[0].startswith(f"{app_name} ")
    # Each description starts in one column, past the longest path.
    columns = {len(line) - len(line.split(maxsplit=1)[1]) for line in table}
    assert len(columns) == 1, table
    assert all(line.split(maxsplit=1)[0] for line in table)


# The app's test modules that import no web code: on the FastAPI app they are the same
# tests of the same code as on the Starlette app (checked below), so they run there alone.
WEB_FREE = ["test_jobs_db.py", "test_schema.py", "test_stats.py", "test_throttle.py",
            "test_sqlite.py"]  # fmt: skip
# And of test_cli.py (the same too) and test_bad_input.py (its commands, and its "web app"
# section), only the tests of serve, which imports web.py, and of the web app run on both.
WEB_ON_BOTH = "not (test_cli or test_bad_input) or serve or page or sign_up or banner"


def test_the_rendered_app_passes_its_own_tests(
    app: Installed, apps: Callable[..., Installed]
) -> None:
    skipped: list[str] = []
    if app.web != "starlette":
        skipped = [*(f"--ignore=tests/{name}" for name in WEB_FREE), "-k", WEB_ON_BOTH]
        _assert_the_same_but_for_the_web(app, apps(app.db))
    tests = app.run(
        app.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *skipped,
        timeout=900,
    )  # fmt: skip
    assert tests.returncode == 0, tests.stdout[-6000:] + tests.stderr[-3000:]
    assert " passed" in tests.stdout


def _assert_the_same_but_for_the_web(app: Installed, starlette: Installed) -> None:
    """``app`` differs from the Starlette app only in web.py, its dependencies, and tests that
    import web code: each WEB_FREE module, and the code it tests, is the same in both."""
    differ = {f"src/{APP}/web.py", "pyproject.toml", "README.md", ".copier-answers.yml"}
    for folder in ("src", "tests"):
        for path in sorted((app.folder / folder).rglob("*")):
            relative = str(path.relative_to(app.folder))
            if not path.is_file() or "__pycache__" in relative or relative in differ:
                continue
            if path.name.startswith("test_") and path.name not in [*WEB_FREE, "test_cli.py"]:
                continue  # a test of the web, run on this app too
            other = starlette.folder / relative
            assert other.is_file(), f"{relative} is the FastAPI app's alone"
            assert path.read_bytes() == other.read_bytes(), f"{relative} differs"
    for name in [*WEB_FREE, "test_cli.py"]:
        test = app.folder / "tests" / name
        if not test.exists():
            continue  # test_sqlite.py: SQLite's app alone
        imports = [
            line for line in test.read_text().splitlines() if line.startswith(("from", "im"))
        ]
        web = [line for line in imports if any(w in line for w in (".web", ".server", "fastapi"))]
        assert not web, f"{name} imports web code: {web}"


def test_the_rendered_app_is_lint_clean(app: Installed) -> None:
    """ruff, as the app's pre-commit hooks run it (the test extra's, as pyproject sets it)."""
    checks = hooks(app.folder / ".pre-commit-config.yaml")
    assert sorted(checks) == ["mypy", "ruff-check", "ruff-format"]
    for hook in ("ruff-check", "ruff-format"):
        # No cache: the app's folder is shared by the run's workers, which only read it.
        done = app.run(*checks[hook], env=app.env(RUFF_NO_CACHE="true"))
        assert done.returncode == 0, f"{hook}: {done.stdout}{done.stderr}"


def test_the_rendered_app_type_checks_strictly(app: Installed, run_folder: Path) -> None:
    """mypy --strict, as the app's pre-commit hook runs it, on its code and its tests.

    The three apps share one mypy cache, one app at a time (mypy's incremental
    mode, as after an edit): what they import is the same, and checking it
    again cost each app 15 s of CPU.
    """
    with (run_folder / "mypy.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released as the file closes
        mypy = app.run(
            *hooks(app.folder / ".pre-commit-config.yaml")["mypy"],
            env=app.env(MYPY_CACHE_DIR=str(run_folder / "mypy-cache")),
        )
    assert mypy.returncode == 0, mypy.stdout + mypy.stderr


def test_pre_commit_passes_in_the_rendered_app_as_a_commit_runs_it(
    apps: Callable[..., Installed], run_folder: Path, tmp_path: Path
) -> None:
    """pre-commit run --all-files (this venv's pre-commit, the app's venv's tools), in a copy of
    the SQLite app made a git repository: the run's app is shared, and only read."""
    app = apps("sqlite")
    folder = tmp_path / APP
    shutil.copytree(
        app.folder, folder, ignore=shutil.ignore_patterns("__pycache__", ".*_cache", "*.egg-info")
    )
    _git(folder, "init", "-q")
    _git(folder, "add", "-A")
    env = app.env(
        PRE_COMMIT_HOME=str(tmp_path / "pre-commit"),
        MYPY_CACHE_DIR=str(run_folder / "mypy-cache"),
    )
    with (run_folder / "mypy.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the cache's, as in the test above
        done = subprocess.run(
            [sys.executable, "-m", "pre_commit", "run", "--all-files"],
            cwd=folder, env=env, capture_output=True, text=True, check=False, timeout=300,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("Passed") == 3, done.stdout


@pytest.mark.parametrize("db", DATABASES)
def test_the_jobs_command_lists_a_failed_job_and_runs_it_again(
    db: str, apps: Callable[..., Installed], tmp_path: Path
) -> None:
    """./myapp as a user types it, on a database where a job failed for good.

    On the Starlette app alone: cli.py is the same whatever web.py is.
    """
    app = apps(db)
    with contextlib.ExitStack() as stack:
        if app.db == "sqlite":
            url = f"sqlite:///{tmp_path / 'app.sqlite3'}"
        else:  # a database of its own on the test server
            url = stack.enter_context(fresh_database(app.server(), "cli"))
        _run_the_jobs_commands(app, app.env(DATABASE_URL=url))


def _run_the_jobs_commands(app: Installed, env: dict[str, str]) -> None:
    def myapp(*args: str) -> subprocess.CompletedProcess[str]:
        return app.run(f"./{APP}", *args, env=env)

    assert myapp("migrate").returncode == 0
    pushed = myapp("jobs", "push", "flaky", '{"up_at": null}')
    assert pushed.stdout == "Pushed flaky job 1.\n", pushed.stderr
    assert "attempt 1: retried" in myapp("jobs", "run-due").stdout
    deadline = time.monotonic() + 60
    # Until flaky's backoff, a second, is out, run-due finds nothing; then it runs attempt 2.
    while "attempt 2" not in (second := myapp("jobs", "run-due")).stdout:
        assert second.stdout == "No job was due.\n", second.stderr
        assert time.monotonic() < deadline, "the retry never came due"
    assert "flaky job 1, attempt 2: failed" in second.stdout

    listed = myapp("jobs")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("1 job failed for good, and is kept for a month")
    assert "1  flaky, which failed at " in listed.stdout
    assert "after 2 attempts" in listed.stdout
    assert "the service is down: connection refused" in listed.stdout
    [failed] = json.loads(myapp("jobs", "--json").stdout)
    assert (failed["id"], failed["attempts"]) == ("1", 2)

    again = myapp("jobs", "retry", "1")
    assert (again.returncode, again.stdout) == (
        0,
        "1 job back to run, from scratch, as the app's queue finds it.\n",
    )
    assert myapp("jobs").stdout == "No job has failed for good.\n"
    unknown = myapp("jobs", "retry", "1")
    assert unknown.returncode == 1
    assert unknown.stderr == (
        f"{APP}: no job 1 failed for good or was cancelled: {APP} jobs and {APP} jobs "
        "cancelled list the ones that did\n"
    )
    assert unknown.stdout == ""


def _git(folder: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "init.defaultBranch=main", *args],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def test_copier_update_brings_a_later_templates_migration_and_keeps_the_apps_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "test")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "test@example.com")
    # The template as it is now, as version 0.1.0 of a repository of its own.
    source = tmp_path / "jobs-starter"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "__pycache__", ".*_cache", "*.sqlite3*", "*.egg-info"
        ),
    )
    _git(source, "init", "-q")
    _git(source, "add", "-A")
    _git(source, "commit", "-q", "-m", "v0.1.0")
    _git(source, "tag", "v0.1.0")
    app = tmp_path / APP
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DirtyLocalWarning)
        copier.run_copy(
            f"git+file://{source}", app, data={"db": "sqlite"}, defaults=True, vcs_ref="v0.1.0",
            unsafe=False, quiet=True,
        )  # fmt: skip
    # With no jobq_source, the app takes the runtime from where the template came, at its commit
    # (from a git URL: from a local folder, copier refuses, as test_answers.py checks).
    assert _pinned_runtime(app) == (source, _git(source, "rev-parse", "v0.1.0^{commit}").strip())
    # The app's own work: a migration on its branch, and an edit to an example file.
    versions = app / "src" / APP / "migrations" / "versions"
    (versions / "app_0003_posts.py").write_text(
        (versions / "app_0001_users.py")
        .read_text()
        .replace('revision = "app_0001"', 'revision = "app_0003"')
        .replace("down_revision: str | None = None", 'down_revision: str | None = "app_0002"')
        .replace('branch_labels: tuple[str, ...] | None = ("app",)', "branch_labels = None")
        .replace('"users"', '"posts"')
    )
    kinds = app / "src" / APP / "kinds.py"
    kinds.write_text(
        kinds.read_text().replace(
            "KEEP_FAILED = timedelta(days=30)", "KEEP_FAILED = timedelta(days=90)"
        )
    )
    _git(app, "init", "-q")
    _git(app, "add", "-A")
    _git(app, "commit", "-q", "-m", "the app")

    # Version 0.2.0 of the template adds a migration to its branch, and the Store that needs it.
    sqlite_migrations = source / "template" / "_migrations" / "sqlite"
    latest = max(
        int(path.name[:4]) for path in sqlite_migrations.glob("[0-9][0-9][0-9][0-9]_jobs.py")
    )
    head, added = f"{latest:04d}_jobs", f"{latest + 1:04d}_jobs"
    (sqlite_migrations / f"{added}.py").write_text(
        '"""An index on kind."""\n\n'
        "from alembic import op\n\n"
        f'revision = "{added}"\n'
        f'down_revision = "{head}"\n'
        "branch_labels = None\n"
        "depends_on = None\n\n\n"
        "def upgrade() -> None:\n"
        '    op.execute("CREATE INDEX jobs_kind ON jobs (kind)")\n\n\n'
        "def downgrade() -> None:\n"
        '    op.execute("DROP INDEX jobs_kind")\n'
    )
    rendered = source / "template" / "src" / "{{package}}" / "migrations" / "versions"
    (rendered / f"{added}.py.jinja").write_text(
        f'{{% include "template/_migrations/" ~ db ~ "/{added}.py" %}}'
    )
    store = source / "template" / "_stores" / "sqlite.py"
    store.write_text(
        store.read_text().replace(
            '    "CREATE INDEX jobs_failed',
            '    "CREATE INDEX jobs_kind ON jobs (kind)",\n    "CREATE INDEX jobs_failed',
        )
    )
    _git(source, "add", "-A")
    _git(source, "commit", "-q", "-m", "v0.2.0")
    _git(source, "tag", "v0.2.0")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DirtyLocalWarning)
        copier.run_update(app, defaults=True, overwrite=True, unsafe=False, quiet=True)

    assert (versions / f"{added}.py").read_text() == (sqlite_migrations / f"{added}.py").read_text()
    assert (app / "src" / APP / "jobs_db.py").read_text() == store.read_text()
    assert (versions / "app_0003_posts.py").exists()
    assert "KEEP_FAILED = timedelta(days=90)" in kinds.read_text()
    assert "_commit: v0.2.0" in (app / ".copier-answers.yml").read_text()
    assert _pinned_runtime(app) == (source, _git(source, "rev-parse", "v0.2.0^{commit}").strip())
    # Both branches migrate, and the schema is what the new Store expects.
    check = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from myapp.migrate import migrate; from myapp.jobs_db import SCHEMA;"
            "print(migrate(sys.argv[1]))",
            f"sqlite:///{tmp_path / 'app.sqlite3'}",
        ],
        cwd=app,
        env={**os.environ, "PYTHONPATH": str(app / "src")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, check.stderr
    assert check.stdout.strip() == f"[{added!r}, 'app_0003']"


def _pinned_runtime(app: Path) -> tuple[Path, str]:
    """The repository and commit the app's jobq requirement names; it must hold runtime/."""
    pyproject = (app / "pyproject.toml").read_text()
    [line] = [line for line in pyproject.splitlines() if re.match(r'\s*"jobq(\[\w+\])? @ ', line)]
    match = re.fullmatch(
        r'\s*"jobq(?:\[cli\])? @ git\+file://(/.+)@([0-9a-f]{40})#subdirectory=runtime",', line
    )
    assert match, line
    repo, commit = Path(match[1]), match[2]
    _git(repo, "cat-file", "-e", f"{commit}:runtime/pyproject.toml")
    return repo, commit


# The last commit before IDs were never given twice (issue 16): SQLite's jobs.id
# without AUTOINCREMENT. The apps made from it are the ones copier update must mend.
PREVIOUS_RELEASE = "e0be186e9b239744ddbfe25532ca98920cb60066"
KEPT = "id, kind, payload, run_at, held_until, attempts, error, failed_at, created_at"


def _app_at(rev: str, db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, what: str) -> Path:
    """The app as the template at ``rev`` renders it, committed in a git repository of its own
    (copier update needs one)."""
    for who in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{who}_NAME", "test")
        monkeypatch.setenv(f"GIT_{who}_EMAIL", "test@example.com")
    if subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "-e", f"{rev}^{{commit}}"], check=False
    ).returncode:
        pytest.fail(f"this checkout lacks {what}, {rev}: fetch it")
    app = tmp_path / APP
    answers = {"db": db, "jobq_source": f"jobq @ {(ROOT / 'runtime').as_uri()}"}
    copier.run_copy(
        str(ROOT), app, data=answers, defaults=True, vcs_ref=rev, unsafe=False, quiet=True
    )
    _git(app, "init", "-q")
    _git(app, "add", "-A")
    _git(app, "commit", "-q", "-m", f"the app, as {what} made it")
    return app


def _database_for(db: str, tmp_path: Path, stack: contextlib.ExitStack) -> str:
    """A database of the app's kind, empty: a SQLite file, or one made on the test server."""
    if db == "sqlite":
        return f"sqlite:///{tmp_path / 'app.sqlite3'}"
    server = os.environ.get(SERVER_ENV[db])
    if not server:
        pytest.fail(f"{SERVER_ENV[db]} is not set: run scripts/test", pytrace=False)
    return stack.enter_context(fresh_database(server, "update"))


def _typed(app: Path, url: str) -> Callable[..., str]:
    """./myapp as a user types it, on this checkout's runtime (the venv pytest runs in):
    its output, once it has exited 0."""
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")},
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "DATABASE_URL": url,
    }

    def myapp(*args: str) -> str:
        done = subprocess.run(
            [str(app / APP), *args], cwd=app, env=env, capture_output=True, text=True,
            timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    return myapp


def _update(app: Path) -> None:
    """copier update to this checkout's template, with no conflict left."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DirtyLocalWarning)
        copier.run_update(
            app, vcs_ref="HEAD", defaults=True, overwrite=True, unsafe=False, quiet=True
        )
    assert not list(app.rglob("*.rej")), "copier update left a conflict"


@pytest.mark.parametrize("db", DATABASES)
def test_copier_update_from_the_previous_release_keeps_the_jobs_and_gives_no_id_twice(
    db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _app_at(PREVIOUS_RELEASE, db, tmp_path, monkeypatch, "the previous release")
    with contextlib.ExitStack() as stack:
        url = _database_for(db, tmp_path, stack)
        myapp = _typed(app, url)
        engine = sa.create_engine(url, poolclass=sa.NullPool)
        stack.callback(engine.dispose)

        def kept() -> list[tuple[object, ...]]:
            with engine.connect() as conn:
                return [tuple(r) for r in conn.execute(sa.text(f"SELECT {KEPT} FROM jobs"))]

        # The previous release: a job that waits, one that failed for good, and the newest done.
        myapp("migrate")
        assert myapp("jobs", "push", "welcome-mail", '{"user": 1}', "--in", "3600") == (
            "Pushed welcome-mail job 1.\n"
        )
        assert myapp("jobs", "push", "welcome-mail", '{"user": 404}') == (
            "Pushed welcome-mail job 2.\n"
        )
        assert myapp("jobs", "push", "prune-jobs") == "Pushed prune-jobs job 3.\n"
        ran = myapp("jobs", "run-due")
        assert "welcome-mail job 2, attempt 1: failed" in ran
        assert "prune-jobs job 3, attempt 1: done" in ran
        # The flaw this update mends: on SQLite, the next push gets the ID of the job just done.
        again = myapp("jobs", "push", "prune-jobs")
        assert again == (
            "Pushed prune-jobs job 3.\n" if db == "sqlite" else "Pushed prune-jobs job 4.\n"
        )
        assert "attempt 1: done" in myapp("jobs", "run-due")
        before = sorted(kept())
        assert [row[0] for row in before] in ([1, 2], ["1", "2"])
        # The app's own edits: a kind's options, its keep, and a command of its own.
        kinds = app / "src" / APP / "kinds.py"
        edited = (
            kinds.read_text()
            .replace('"welcome-mail", attempts=10,', '"welcome-mail", attempts=12,')
            .replace("KEEP_FAILED = timedelta(days=30)", "KEEP_FAILED = timedelta(days=90)")
        )
        assert edited != kinds.read_text()
        kinds.write_text(edited)
        cli = app / "src" / APP / "cli.py"
        cli.write_text(
            cli.read_text() + "\n\n@cli.command()\ndef hello() -> None:\n"
            '    """The app\'s own command."""\n    typer.echo("hello from the app")\n'
        )
        _git(app, "commit", "-q", "-am", "the app's own kinds and command")

        _update(app)
        assert re.search(r" is up to date: \d{4}_jobs, app_0002\.$", myapp("migrate"))
        assert '"welcome-mail", attempts=12,' in kinds.read_text(), "its kind's edit kept"
        assert "KEEP_FAILED = timedelta(days=90)" in kinds.read_text()
        assert myapp("hello") == "hello from the app\n", "its own command kept, beside jobq's"
        assert "kept for 90 days" in myapp("jobs"), "its keep read by jobq's jobs command"

        # The jobs are as they were, IDs and all: one waits, and one is listed as failed.
        assert sorted(kept()) == before
        [failed] = json.loads(myapp("jobs", "--json"))
        assert (str(failed["id"]), failed["kind"]) == ("2", "welcome-mail")
        assert "user 404 has gone" in failed["error"]
        assert myapp("jobs", "run-due") == "No job was due.\n"

        # From now on, no ID is given twice, even once its job is done and gone.
        used = {1, 2, 3, 4}
        first = int(myapp("jobs", "push", "prune-jobs").split()[-1].rstrip("."))
        # SQLite's table kept no trace of an ID whose job was gone before the update: the
        # migration starts past the IDs it copies. The servers never gave one twice.
        assert first not in ({1, 2} if db == "sqlite" else used)
        assert f"prune-jobs job {first}, attempt 1: done" in myapp("jobs", "run-due")
        second = int(myapp("jobs", "push", "prune-jobs").split()[-1].rstrip("."))
        assert second > first


# The last commit that landed before the store kit (issue 26): its Postgres and MySQL
# apps have a jobs_pool.py beside a jobs_db.py of 1,100 lines that imports jobq.rows.
BEFORE_THE_KIT = "116194581490237b5ad5a3c1ca028c05c2ce6ab3"


@pytest.mark.parametrize("db", ["postgres", "mysql"])
def test_copier_update_from_before_the_store_kit_drops_jobs_pool_and_keeps_the_jobs(
    db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = _app_at(BEFORE_THE_KIT, db, tmp_path, monkeypatch, "the last release before the kit")
    package = app / "src" / APP
    assert (package / "jobs_pool.py").exists()
    with contextlib.ExitStack() as stack:
        myapp = _typed(app, _database_for(db, tmp_path, stack))

        # Before: on this checkout's jobq, whose jobq.rows the old store still imports.
        myapp("migrate")
        assert myapp("jobs", "push", "welcome-mail", '{"user": 1}', "--in", "3600") == (
            "Pushed welcome-mail job 1.\n"
        )
        assert myapp("jobs", "push", "welcome-mail", '{"user": 404}') == (
            "Pushed welcome-mail job 2.\n"
        )
        assert "welcome-mail job 2, attempt 1: failed" in myapp("jobs", "run-due")

        _update(app)
        # The plumbing is jobq's now: the app keeps its SQL alone.
        assert sorted(p.name for p in package.glob("jobs_*.py")) == ["jobs_db.py"]
        jobs_db = (package / "jobs_db.py").read_text()
        assert jobs_db == (ROOT / "template" / "_stores" / f"{db}.py").read_text()
        assert re.search(r" is up to date: \d{4}_jobs, app_0002\.$", myapp("migrate"))

        # The waiting job waits, the failed one is listed and runs again, and pushes go on.
        [failed] = json.loads(myapp("jobs", "--json"))
        assert (str(failed["id"]), failed["kind"]) == ("2", "welcome-mail")
        assert myapp("jobs", "run-due") == "No job was due.\n"
        assert myapp("jobs", "push", "prune-jobs") == "Pushed prune-jobs job 3.\n"
        assert "prune-jobs job 3, attempt 1: done" in myapp("jobs", "run-due")
        assert myapp("jobs", "retry", "2").startswith("1 job")


@pytest.mark.parametrize("db", ["postgres", "mysql"])
def test_the_apps_tests_without_a_test_database_stop_with_one_line(
    db: str, apps: Callable[[str], Installed]
) -> None:
    app = apps(db)
    env = {k: v for k, v in app.env().items() if k != "TEST_DATABASE_URL"}
    tests = app.run(app.python, "-m", "pytest", "-q", "-p", "no:cacheprovider", env=env)
    assert tests.returncode != 0
    said = [line for line in (tests.stdout + tests.stderr).splitlines() if line.strip()]
    assert len(said) == 1, said
    assert said[0].startswith(f"ERROR: set TEST_DATABASE_URL to a {db} server's URL"), said
