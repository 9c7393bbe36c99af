"""app=existing: the jobs parts alone, written into a FastAPI project that exists.

The test makes the project (its package, its route, its own Alembic history),
renders the jobs parts into it with copier as a user types it, follows the
lines copier printed (the dependencies, alembic.ini's version_locations, the
lifespan), installs the project, and then: `alembic upgrade heads` makes the
app's tables and the jobs' together, a route pushes a job in its transaction
and the queue in the lifespan runs it, the jobs page mounted at /jobs asks for
its password, the jobs command answers, and the parts' own tests, ruff and
mypy --strict pass in the project.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from apps import ROOT

PACKAGE = "shop"

# The project as it was before it had jobs: a FastAPI app on SQLAlchemy, with Alembic.
PYPROJECT = """\
[build-system]
requires = ["hatchling>=1.21"]
build-backend = "hatchling.build"

[project]
name = "shop"
version = "1.0.0"
requires-python = ">=3.11"
dependencies = [
  "fastapi>=0.123",
  "SQLAlchemy>=2.0",
  "alembic>=1.13",
{dependencies}
]

[project.optional-dependencies]
test = ["pytest>=8", "httpx2>=2", "mypy>=1.10", "ruff>=0.6"]

[tool.hatch.build.targets.wheel]
packages = ["src/shop"]

[tool.hatch.metadata]
allow-direct-references = true

[tool.ruff]
line-length = 100
target-version = "py311"

[tool.ruff.lint]
select = ["E", "F", "W", "I", "B", "UP", "SIM", "RUF", "TC"]

[tool.mypy]
strict = true
python_version = "3.11"

[tool.pytest.ini_options]
filterwarnings = ["error"]
"""

ORDERS = '''\
"""The shop's orders table."""

from alembic import op

revision = "shop_0001"
down_revision = None
branch_labels = ("shop",)
depends_on = None


def upgrade() -> None:
    op.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")


def downgrade() -> None:
    op.execute("DROP TABLE orders")
'''

# main.py once jobs are in: what was there, and the lines copier printed (checked below).
MAIN = '''\
"""The shop: one route that takes an order and pushes a job with it."""

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from sqlalchemy import text

from shop.jobs import make_jobs, page, running
from shop.jobs.jobs_db import make_engine
from shop.jobs.kinds import Hello

engine = make_engine(os.environ["DATABASE_URL"])
jobs = make_jobs(engine)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    async with running(jobs.queue):
        yield


app = FastAPI(lifespan=lifespan)
app.mount("/jobs", page(jobs))


@app.post("/orders")
def order(name: str) -> dict[str, str]:
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO orders (name) VALUES (:name)"), {"name": name})
        job = jobs.kinds.hello.push(Hello(name=name), store=jobs.store.bind(conn))
    jobs.queue.wake()
    return {"job": job}
'''

# Run in the project's venv: the server's lifespan runs the queue, which runs the route's job.
SERVE_AND_ORDER = """\
import base64, logging, time
from fastapi.testclient import TestClient
from sqlalchemy import text
from shop.main import app, engine

logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
with TestClient(app) as client:
    assert client.get("/jobs/").status_code == 401  # JOBS_PAGE_PASSWORD is set: it asks for it
    login = {"Authorization": "Basic " + base64.b64encode(b"admin:page-password-of-shop").decode()}
    assert "<title>Failed jobs · shop</title>" in client.get("/jobs/", headers=login).text
    response = client.post("/orders", params={"name": "ann"})
    assert response.status_code == 200, response.text
    deadline = time.monotonic() + 30
    while True:
        with engine.connect() as conn:
            left = conn.execute(text("SELECT count(*) FROM jobs WHERE kind = 'hello'")).scalar_one()
        if left == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
with engine.connect() as conn:
    print("orders", conn.execute(text("SELECT count(*) FROM orders")).scalar_one(), "jobs", left)
"""


def _run(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def _block(printed: str, step: str) -> list[str]:
    """The lines under the printed step (``"1."``), stripped, blank lines dropped."""
    part = printed.split(f"\n{step} ", 1)[1]
    part = re.split(r"\n\d\. ", part, maxsplit=1)[0]
    return [line.strip() for line in part.splitlines()[1:] if line.strip()]


def test_an_existing_fastapi_project_gets_jobs_as_printed_and_its_route_runs_one(
    tmp_path: Path,
) -> None:
    project = tmp_path / PACKAGE
    package = project / "src" / PACKAGE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""The shop."""\n')
    (project / "tests").mkdir()
    bin_ = Path(sys.executable).parent
    assert _run(str(bin_ / "alembic"), "init", "migrations", cwd=project).returncode == 0
    (project / "migrations" / "versions" / "shop_0001_orders.py").write_text(ORDERS)

    # The jobs parts, as a user renders them into the project.
    copied = _run(
        str(bin_ / "copier"), "copy", "--defaults", "--vcs-ref", "HEAD",
        "--data", "app=existing", "--data", f"package={PACKAGE}",
        "--data", f"jobq_source=jobq @ {(ROOT / 'runtime').as_uri()}",
        str(ROOT), str(project),
        cwd=tmp_path,
    )  # fmt: skip
    assert copied.returncode == 0, copied.stderr
    printed = copied.stdout + copied.stderr
    assert (package / "jobs" / "jobs_db.py").read_text() == (
        ROOT / "template" / "_stores" / "sqlite.py"
    ).read_text()
    assert not (project / "src" / PACKAGE / "web.py").exists(), "the jobs parts alone"

    # 1. The dependencies printed, into pyproject.toml.
    dependencies = _block(printed, "1.")
    assert dependencies[0].startswith('"jobq[cli] @ file:'), dependencies
    (project / "pyproject.toml").write_text(
        PYPROJECT.format(dependencies="\n".join(f"  {d}" for d in dependencies))
    )
    # 2. The jobs branch into the project's Alembic: version_locations as printed.
    [locations] = [line for line in _block(printed, "2.") if line.startswith("version_locations")]
    ini = (project / "alembic.ini").read_text()
    database = tmp_path / "shop.sqlite3"
    ini = ini.replace(
        "# version_locations =", locations.replace("<your versions>", "migrations/versions") + "\n#"
    ).replace("driver://user:pass@localhost/dbname", f"sqlite:///{database}")
    (project / "alembic.ini").write_text(ini)
    # 3. The lifespan printed, in the app: main.py has each of its lines.
    main = project / "src" / PACKAGE / "main.py"
    main.write_text(MAIN)
    for line in _block(printed, "3."):
        if not line.startswith(("and in a route", "and the jobs page", "from shop.jobs.jobs_db")):
            assert line in MAIN, f"{line!r}, printed, is not in the app"

    venv = tmp_path / "venv"
    uv = [sys.executable, "-m", "uv"]
    assert (
        _run(*uv, "venv", "-q", "--python", sys.executable, str(venv), cwd=tmp_path).returncode == 0
    )
    python = str(venv / "bin" / "python")
    installed = _run(
        *uv, "pip", "install", "-q", "--python", python, "--reinstall-package", "jobq",
        "-e", ".[test]",
        cwd=project, timeout=900,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "DATABASE_URL": f"sqlite:///{database}"}

    # alembic upgrade heads: the project's branch and the jobs one, together.
    upgraded = _run(str(venv / "bin" / "alembic"), "upgrade", "heads", cwd=project, env=env)
    assert upgraded.returncode == 0, upgraded.stderr
    current = _run(str(venv / "bin" / "alembic"), "current", cwd=project, env=env)
    heads = sorted(line.split()[0] for line in current.stdout.splitlines() if line.strip())
    assert heads == ["0007_jobs", "shop_0001"], current.stdout + current.stderr

    # The route pushes its job in its transaction; the queue in the lifespan runs it.
    page = {"JOBS_PAGE_PASSWORD": "page-password-of-shop"}
    served = _run(python, "-c", SERVE_AND_ORDER, cwd=project, env={**env, **page}, timeout=120)
    assert served.returncode == 0, served.stderr
    assert served.stdout.strip() == "orders 1 jobs 0", served.stdout + served.stderr
    assert "shop.jobs.kinds: hello, ann" in served.stderr

    # The jobs command, as printed (4.).
    assert "DATABASE_URL=... python -m shop.jobs --help" in printed
    listed = _run(python, "-m", "shop.jobs", cwd=project, env=env)
    assert listed.stdout == "No job has failed for good.\n", listed.stderr
    # Its own migrate, on a database whose Alembic history is the project's too: says what to do.
    alone = _run(python, "-m", "shop.jobs", "migrate", cwd=project, env=env)
    assert alone.returncode == 1
    assert "alembic upgrade heads" in alone.stderr
    assert len(alone.stderr.splitlines()) == 1, alone.stderr

    # The parts' own tests, lint and types, in the project.
    tests = _run(
        python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", cwd=project, env=env
    )
    assert tests.returncode == 0, tests.stdout[-4000:] + tests.stderr[-2000:]
    ruff = str(venv / "bin" / "ruff")
    # Only what the template wrote, and main.py as the lines made it: alembic init's own
    # env.py keeps alembic's style.
    ours = ["src", "tests"]
    for check in (["check", "--no-cache", *ours], ["format", "--no-cache", "--check", *ours]):
        linted = _run(ruff, *check, cwd=project, env=env)
        assert linted.returncode == 0, linted.stdout + linted.stderr
    typed = _run(python, "-m", "mypy", "src", "tests", cwd=project, env={**env, "MYPYPATH": "src"})
    assert typed.returncode == 0, typed.stdout + typed.stderr


@pytest.mark.parametrize("db", ["postgres", "mysql"])
def test_the_jobs_parts_for_a_server_database_render_its_store_and_driver(
    db: str, tmp_path: Path
) -> None:
    bin_ = Path(sys.executable).parent
    copied = _run(
        str(bin_ / "copier"), "copy", "--defaults", "--vcs-ref", "HEAD",
        "--data", "app=existing", "--data", f"package={PACKAGE}", "--data", f"db={db}",
        "--data", "package_path=shop",
        "--data", f"jobq_source=jobq @ {(ROOT / 'runtime').as_uri()}",
        str(ROOT), str(tmp_path / "p"),
        cwd=tmp_path,
    )  # fmt: skip
    assert copied.returncode == 0, copied.stderr
    jobs = tmp_path / "p" / PACKAGE / "jobs"
    assert (jobs / "jobs_db.py").read_text() == (
        ROOT / "template" / "_stores" / f"{db}.py"
    ).read_text()
    driver = {"postgres": '"psycopg[binary]>=3.1",', "mysql": '"PyMySQL>=1.1",'}[db]
    assert driver in _block(copied.stdout + copied.stderr, "1.")
    # Every migration of the template's branch, as a new app has them.
    versions = sorted(p.name for p in (jobs / "migrations" / "versions").glob("*.py"))
    sources = ROOT / "template" / "_migrations" / db
    assert versions == sorted(p.name for p in sources.glob("[0-9]*_jobs.py"))
    for source in jobs.rglob("*.py"):
        compile(source.read_text(), str(source), "exec")  # rendered to Python, whatever the db
