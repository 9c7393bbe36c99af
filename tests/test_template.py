"""The template renders an app for each database, and the app passes its own tests.

Each database's app is rendered once (copier, no --trust), installed into a
virtual environment of its own with the runtime from this checkout (tests/apps.py),
and then: its own pytest suite runs as a subprocess, and `./myapp` runs as a
user types it.
"""

from __future__ import annotations

import contextlib
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
from copier.errors import DirtyLocalWarning

from apps import APP, ROOT, Installed
from dbfixtures import fresh_database

if TYPE_CHECKING:
    from collections.abc import Callable

# The databases whose app these tests render: each with its own Store and migrations.
DATABASES = ["sqlite", "postgres", "mysql"]


@pytest.fixture(scope="module", params=DATABASES)
def app(request: pytest.FixtureRequest, apps: Callable[[str], Installed]) -> Installed:
    return apps(request.param)


def test_the_rendered_store_is_the_template_source_as_it_is(app: Installed) -> None:
    rendered = app.folder / "src" / APP
    assert (rendered / "jobs_db.py").read_text() == (
        ROOT / "template" / "_stores" / f"{app.db}.py"
    ).read_text()
    assert (rendered / "migrations" / "versions" / "0001_jobs.py").read_text() == (
        ROOT / "template" / "_migrations" / app.db / "0001_jobs.py"
    ).read_text()
    # Neither the other databases' sources nor the template's own folders are copied.
    assert not list(app.folder.rglob("_stores"))
    assert not list(app.folder.rglob("_migrations"))
    assert os.access(app.folder / APP, os.X_OK)


def test_the_rendered_app_passes_its_own_tests(app: Installed) -> None:
    tests = app.run(
        app.python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
        timeout=900,
    )  # fmt: skip
    assert tests.returncode == 0, tests.stdout[-6000:] + tests.stderr[-3000:]
    assert " passed" in tests.stdout


def test_the_rendered_app_is_lint_clean(app: Installed) -> None:
    """ruff, as the app's pyproject sets it and its test extra installs it."""
    ruff = str(app.venv / "bin" / "ruff")
    lint = app.run(ruff, "check", "--no-cache", ".")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    form = app.run(ruff, "format", "--no-cache", "--check", ".")
    assert form.returncode == 0, form.stdout + form.stderr


def test_the_rendered_app_type_checks_strictly(app: Installed) -> None:
    """mypy --strict, as the app's pyproject sets it, on its code and its tests."""
    mypy = app.run(app.python, "-m", "mypy", "src", "tests", env=app.env(MYPYPATH="src"))
    assert mypy.returncode == 0, mypy.stdout + mypy.stderr


def test_the_jobs_command_lists_a_failed_job_and_runs_it_again(
    app: Installed, tmp_path: Path
) -> None:
    """./myapp as a user types it, on a database where a job failed for good."""
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
    time.sleep(1.2)  # flaky's backoff is a second
    assert "attempt 2: failed" in myapp("jobs", "run-due").stdout

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
        "1 job back to run, as the app's queue finds it.\n",
    )
    assert myapp("jobs").stdout == "No job has failed for good.\n"
    unknown = myapp("jobs", "retry", "1")
    assert unknown.returncode == 1
    assert (
        unknown.stderr == f"{APP}: no job 1 failed for good: {APP} jobs lists the ones that did\n"
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
            str(source), app, data={"db": "sqlite"}, defaults=True, vcs_ref="v0.1.0",
            unsafe=False, quiet=True,
        )  # fmt: skip
    # With no jobq_source, the app takes the runtime from where the template came, at its commit.
    assert _pinned_runtime(app) == (source, _git(source, "rev-parse", "v0.1.0^{commit}").strip())
    # The app's own work: a migration on its branch, and an edit to an example file.
    versions = app / "src" / APP / "migrations" / "versions"
    (versions / "app_0002_posts.py").write_text(
        (versions / "app_0001_users.py")
        .read_text()
        .replace('revision = "app_0001"', 'revision = "app_0002"')
        .replace("down_revision: str | None = None", 'down_revision: str | None = "app_0001"')
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
    (sqlite_migrations / "0002_jobs.py").write_text(
        '"""An index on kind."""\n\n'
        "from alembic import op\n\n"
        'revision = "0002_jobs"\n'
        'down_revision = "0001_jobs"\n'
        "branch_labels = None\n"
        "depends_on = None\n\n\n"
        "def upgrade() -> None:\n"
        '    op.execute("CREATE INDEX jobs_kind ON jobs (kind)")\n\n\n'
        "def downgrade() -> None:\n"
        '    op.execute("DROP INDEX jobs_kind")\n'
    )
    rendered = source / "template" / "src" / "{{package}}" / "migrations" / "versions"
    (rendered / "0002_jobs.py.jinja").write_text(
        '{% include "template/_migrations/" ~ db ~ "/0002_jobs.py" %}'
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

    assert (versions / "0002_jobs.py").read_text() == (
        sqlite_migrations / "0002_jobs.py"
    ).read_text()
    assert (app / "src" / APP / "jobs_db.py").read_text() == store.read_text()
    assert (versions / "app_0002_posts.py").exists()
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
    assert check.stdout.strip() == "['0002_jobs', 'app_0002']"


def _pinned_runtime(app: Path) -> tuple[Path, str]:
    """The repository and commit the app's jobq requirement names; it must hold runtime/."""
    pyproject = (app / "pyproject.toml").read_text()
    [line] = [line for line in pyproject.splitlines() if '"jobq @ ' in line]
    match = re.fullmatch(
        r'\s*"jobq @ git\+file://localhost(/.+)@([0-9a-f]{40})#subdirectory=runtime",', line
    )
    assert match, line
    repo, commit = Path(match[1]), match[2]
    _git(repo, "cat-file", "-e", f"{commit}:runtime/pyproject.toml")
    return repo, commit
