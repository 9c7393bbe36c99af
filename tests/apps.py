"""Rendered apps: the template rendered for a database and installed in a venv of its own.

Rendering uses vcs_ref="HEAD": what git has committed, plus, on a dirty work
tree, the uncommitted changes too (copier commits them in its own clone of the
repository, warning DirtyLocalWarning), so a developer tests what they see.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import copier
import pytest
from copier.errors import DirtyLocalWarning

from dbfixtures import ENV

ROOT = Path(__file__).resolve().parents[1]
APP = "myapp"
# The server each database's app tests on, passed to its tests as TEST_DATABASE_URL.
SERVER_ENV = {db: ENV[db] for db in ("postgres", "mysql")}


def render(db: str, into: Path, **data: str) -> Path:
    """Render the template for ``db`` into ``into``, with the runtime from this checkout."""
    answers = {"db": db, "jobq_source": f"jobq @ {(ROOT / 'runtime').as_uri()}", **data}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DirtyLocalWarning)
        copier.run_copy(
            src_path=str(ROOT),
            dst_path=into,
            data=answers,
            defaults=True,
            vcs_ref="HEAD" if (ROOT / ".git").exists() else None,
            unsafe=False,  # the template must need no --trust
            quiet=True,
        )
    return into


class Installed:
    """A rendered app, installed in a virtual environment of its own."""

    def __init__(self, db: str, folder: Path, venv: Path, web: str = "starlette") -> None:
        self.db = db
        self.web = web  # the answer web: the framework of its web.py
        self.folder = folder
        self.venv = venv
        self.python = str(venv / "bin" / "python")

    def server(self) -> str:
        """The test server's URL for a Postgres or MySQL app, or fail the test."""
        server = os.environ.get(SERVER_ENV[self.db])
        if not server:
            pytest.fail(f"{SERVER_ENV[self.db]} is not set: run scripts/test", pytrace=False)
        return server

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
        # ./myapp runs the python3 first on PATH: the app's venv's.
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        if self.db in SERVER_ENV:
            env["TEST_DATABASE_URL"] = self.server()
        return {**env, **extra}

    def run(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args,
            cwd=self.folder,
            env=env or self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def install(db: str, base: Path, **data: str) -> Installed:
    """Render the app for ``db`` under ``base`` and install it, with its test extra."""
    folder = render(db, base / APP, **data)
    venv = base / "venv"
    # uv: 3 s of CPU an app where pip took 42. The runtime is a local directory, which
    # uv would take from its cache unless its pyproject changed: build it afresh. Not
    # compiled: the processes the tests start write the bytecode of what they import, once
    # (scripts/test lets them), where compiling all of every package cost 6 s of CPU an app.
    # Where bytecode is not written, compiled as pip does: each process would compile it.
    uv = [sys.executable, "-m", "uv"]
    compiling = ["--compile-bytecode"] if os.environ.get("PYTHONDONTWRITEBYTECODE") else []
    subprocess.run([*uv, "venv", "-q", "--python", sys.executable, str(venv)], check=True)
    installed = Installed(db, folder, venv, data.get("web", "starlette"))
    installing = installed.run(
        *uv, "pip", "install", "-q", *compiling, "--python", installed.python,
        "--reinstall-package", "jobq", "-e", ".[test]",
        timeout=900,
    )  # fmt: skip
    assert installing.returncode == 0, installing.stdout + installing.stderr
    if compiling:  # and the app's own (editable) code
        compiled = installed.run(installed.python, "-m", "compileall", "-q", "src")
        assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    return installed
