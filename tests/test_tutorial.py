"""docs/tutorial.md, followed as a new user follows it, on the real Postgres server.

The code is the tutorial's own: its diffs are applied to the rendered app and
its new files written as they are printed. Each command the test runs is one
the tutorial prints (checked), with these differences a test needs: the app is
rendered from this checkout rather than gh:, copier comes from the repository's
venv, the database is a fresh one on the test server rather than `createdb
myapp`, and the servers listen on free ports rather than 8000 and 8001.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import urllib.request
from typing import TYPE_CHECKING

import sqlalchemy as sa
from serving import free_port, serving, until
from sqlalchemy.pool import NullPool

from apps import APP, ROOT, Installed, render
from dbfixtures import fresh_database

if TYPE_CHECKING:
    from pathlib import Path

TUTORIAL = ROOT / "docs" / "tutorial.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.M | re.S)


def _blocks(lang: str) -> list[str]:
    return [body for found, body in FENCE.findall(TUTORIAL.read_text()) if found == lang]


def written(command: str) -> str:
    """``command``, which the tutorial prints in one of its shell blocks; or fail."""
    assert any(command in block for block in _blocks("sh")), (
        f"the tutorial no longer says {command}"
    )
    return command


def apply_diff(folder: Path, diff: str) -> None:
    """Apply one of the tutorial's diffs, hunk by hunk, by the text they show.

    A hunk has no line numbers: its context and `-` lines are found (once) and
    replaced by its context and `+` lines. `...` stands for what is there, on one line.
    """
    [path] = re.findall(r"^\+\+\+ (\S+)$", diff, re.M)
    target = folder / path
    text = target.read_text()
    hunks = re.split(r"^@@.*\n", diff.split(f"+++ {path}\n", 1)[1], flags=re.M)
    for hunk in filter(None, hunks):
        old, new = [], []
        for line in hunk.splitlines():
            sign, rest = line[:1], line[1:]
            if sign in (" ", "-", ""):
                old.append(rest)
            if sign in (" ", "+", ""):
                new.append(rest)
        pattern = "\n".join(re.escape(line).replace(r"\.\.\.", "(.*?)") for line in old)
        found = list(re.finditer(pattern + "\n", text))
        assert len(found) == 1, f"the tutorial's hunk is in {path} {len(found)} times:\n{hunk}"
        kept = list(found[0].groups())
        lines = []
        for line in new:
            while "..." in line:  # what the old lines' `...` matched, in order
                assert kept, f"an added line's `...` stands for nothing in {path}: {line}"
                line = line.replace("...", kept.pop(0), 1)
            lines.append(line)
        replaced = "\n".join(lines)
        text = text[: found[0].start()] + replaced + "\n" + text[found[0].end() :]
    target.write_text(text)


def test_the_tutorial_runs_as_written(tmp_path: Path, postgres_url: str) -> None:
    # 1. A virtual environment and the app.
    written("python3 -m venv .venv")
    venv = tmp_path / ".venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    written("copier copy --defaults --data db=postgres gh:jobs-starter/jobs-starter myapp")
    app = Installed("postgres", render("postgres", tmp_path / APP), venv)
    written("pip install -e '.[test]'")
    install = app.run(app.python, "-m", "pip", "install", "-q", "-e", ".[test]", timeout=900)
    assert install.returncode == 0, install.stdout + install.stderr

    # 2. Its database.
    written("createdb myapp")
    with fresh_database(postgres_url, "tutorial") as url:
        env = app.env(DATABASE_URL=url)
        written("export DATABASE_URL=postgresql+psycopg://localhost/myapp")  # the test's, here

        def myapp(command: str) -> str:
            done = app.run(*written(command).split(), env=env)
            assert done.returncode == 0, done.stdout + done.stderr
            return done.stdout

        myapp("./myapp migrate")

        # 3, 4. The kind and its route: the tutorial's diffs.
        diffs = _blocks("diff")
        assert [re.findall(r"^\+\+\+ (\S+)$", d, re.M) for d in diffs] == [
            ["src/myapp/kinds.py"],
            ["src/myapp/web.py"],
        ]
        for diff in diffs:
            apply_diff(app.folder, diff)

        # 5. Its test, as printed, passes on its own database.
        [test] = [block for block in _blocks("python") if block.startswith("# tests/")]
        (app.folder / "tests" / "test_webhook.py").write_text(test)
        written("export TEST_DATABASE_URL=postgresql+psycopg://localhost/postgres")
        tests = app.run(
            app.python, "-m", *written("pytest tests/test_webhook.py").split(), "-p",
            "no:cacheprovider", env=env, timeout=300,
        )  # fmt: skip
        assert tests.returncode == 0, tests.stdout + tests.stderr
        assert "2 passed" in tests.stdout
        # The app's own tests that list its kinds pass with the tutorial's among them.
        listing = app.run(
            app.python, "-m", "pytest", "tests/test_cli.py", "tests/test_bad_input.py", "-k",
            "kind", "-p", "no:cacheprovider", env=env, timeout=300,
        )  # fmt: skip
        assert listing.returncode == 0, listing.stdout + listing.stderr
        assert " passed" in listing.stdout

        # 6. It fails, retries, and fails for good while the receiver is down.
        written("JOBS_PAGE_PASSWORD=change-me-to-a-secret ./myapp serve")
        receiver = free_port()
        log = tmp_path / "serve.log"
        with serving(app, {**env, "JOBS_PAGE_PASSWORD": "change-me-to-a-secret"}, log) as port:
            # The tutorial's IDs: job 1 is the nightly prune-jobs, pushed as the server starts.
            engine = sa.create_engine(url, poolclass=NullPool)
            try:

                def scheduled() -> bool:
                    with engine.connect() as conn:
                        return bool(conn.exec_driver_sql("SELECT count(*) FROM jobs").scalar())

                until(scheduled, "the server pushed the nightly prune-jobs")
            finally:
                engine.dispose()
            written(
                "curl -X POST 'http://127.0.0.1:8000/webhooks?"
                "url=http://127.0.0.1:8001/hooks&event=signed-up'"
            )
            push = urllib.request.Request(
                f"http://127.0.0.1:{port}/webhooks?"
                f"url=http://127.0.0.1:{receiver}/hooks&event=signed-up",
                method="POST",
            )
            with urllib.request.urlopen(push, timeout=10) as response:
                assert response.status == 202
                assert json.load(response) == {"job": "2"}
            until(
                lambda: "a job failed for good kind=webhook job=2 attempt=3" in log.read_text(),
                "the webhook failed for good",
            )
            shown = log.read_text()
            for attempt in (1, 2):
                again = "WARNING jobq: a job failed, and will run again kind=webhook job=2"
                assert f"{again} attempt={attempt}" in shown, shown
            assert "Connection refused" in shown

            # 7. Found with ./myapp jobs and on the page; run again once the receiver is up.
            listed = myapp("./myapp jobs")
            assert "webhook, which failed at" in listed
            assert "signed-up" in listed
            page = urllib.request.Request(f"http://127.0.0.1:{port}/jobs/")
            login = base64.b64encode(b"me:change-me-to-a-secret").decode()
            page.add_header("Authorization", f"Basic {login}")
            with urllib.request.urlopen(page, timeout=10) as response:
                html = response.read().decode()
            assert 'id="job-2"' in html
            assert "signed-up" in html

            written("QUEUE_WORKERS=0 ./myapp serve --port 8001")
            up = {**env, "QUEUE_WORKERS": "0"}
            with serving(app, up, tmp_path / "receiver.log", port=receiver):
                myapp("./myapp jobs retry 2")
                delivered = (
                    f"INFO myapp.kinds: webhook signed-up delivered to "
                    f"http://127.0.0.1:{receiver}/hooks: 200"
                )
                until(lambda: delivered in log.read_text(), "the webhook was delivered")
                assert delivered.replace(str(receiver), "8001") in TUTORIAL.read_text()
        assert myapp("./myapp jobs") == "No job has failed for good.\n"
