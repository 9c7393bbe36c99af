"""What a release needs: jobq built as a distribution that installs and runs on its own, an
app rendered from a local clone that installs it from an index once the clone is gone, and
the checks before each commit passing on the repository.

runtime/ is built once a session (python -m build: the sdist, then the wheel from it),
and the tests that use it kept on one xdist worker (an xdist_group), so once a run.
The checks are .pre-commit-config.yaml's hooks, run here by their own commands
(tests/precommit.py), so CI makes them too.
"""

from __future__ import annotations

import email.parser
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import copier
import jobq
import pytest

from apps import APP, ROOT
from precommit import hooks

pytestmark = pytest.mark.xdist_group("release")

UV = [sys.executable, "-m", "uv"]
# What a copy of the checkout leaves out to be the template a user clones.
NOT_THE_TEMPLATE = (".git", ".venv", "__pycache__", ".*_cache", "*.sqlite3*", "*.egg-info")


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder holding runtime/'s sdist and wheel, as a release would upload them.

    Each is built in an isolated environment, which uv makes (in a second; pip took ten).
    """
    out = tmp_path_factory.mktemp("dist")
    built = run(
        sys.executable, "-m", "build", "--installer", "uv", "--outdir", out, ROOT / "runtime"
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return out


def run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    # Python writes the bytecode of what a fresh venv imports once, not at every start.
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "VIRTUAL_ENV")
    }
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


def test_the_sdist_and_the_wheel_pass_twine_check_with_the_one_version(dist: Path) -> None:
    version = jobq.__version__
    wheel, sdist = dist / f"jobq-{version}-py3-none-any.whl", dist / f"jobq-{version}.tar.gz"
    assert sorted(dist.iterdir()) == [wheel, sdist]
    checked = run(sys.executable, "-m", "twine", "check", "--strict", wheel, sdist)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(f"jobq-{version}.dist-info/METADATA").decode()
    assert {"jobq/py.typed", f"jobq-{version}.dist-info/licenses/LICENSE"} <= names
    assert not [n for n in names if "__pycache__" in n or n.startswith(("tests/", "jobq/tests"))]
    # jobq.page's templates, style and script: package data the page reads from its folder.
    page = {"jobq/page/static/page.css", "jobq/page/static/page.js"}
    page |= {f"jobq/page/templates/{n}.html" for n in ("base", "failed", "job", "processes")}
    assert page <= names, sorted(page - names)
    meta = email.parser.Parser().parsestr(metadata)
    assert (meta["Version"], meta["License-Expression"]) == (version, "MIT")
    assert "Typing :: Typed" in meta.get_all("Classifier", [])
    assert "Source, https://github.com/jobs-starter/jobs-starter/tree/main/runtime" in meta.get_all(
        "Project-URL", []
    )
    extras = {"sqlite", "postgres", "mysql", "testing", "otel", "page"}
    assert extras <= set(meta.get_all("Provides-Extra", []))
    # The registry's page is the README, which says how to install and shows a job.
    assert meta["Description-Content-Type"] == "text/markdown"
    assert meta.get_payload() == (ROOT / "runtime" / "README.md").read_text()
    with tarfile.open(sdist) as archive:
        members = set(archive.getnames())
    kept = ("PKG-INFO", "LICENSE", "src/jobq/py.typed", "src/jobq/page/templates/base.html")
    assert {f"jobq-{version}/{n}" for n in kept} <= members


def test_the_wheel_alone_in_a_fresh_venv_runs_the_readmes_job(dist: Path, tmp_path: Path) -> None:
    """No source tree on the path: python -I, in a folder of its own, the wheel's jobq."""
    [wheel] = dist.glob("*.whl")
    venv = tmp_path / "venv"
    python = venv / "bin" / "python"
    assert run(*UV, "venv", "-q", "--python", sys.executable, venv).returncode == 0
    installed = run(
        *UV, "pip", "install", "-q", "--python", python, f"jobq[testing] @ {wheel.as_uri()}"
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    [example] = re.findall(
        r"^```python\n(.*?)^```", (ROOT / "runtime" / "README.md").read_text(), re.S | re.M
    )
    where = "import jobq, sys; print(jobq.__version__, jobq.__file__.startswith(sys.prefix))\n"
    ran = run(python, "-I", "-c", example + where, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == f"welcome, user 7\n{jobq.__version__} True\n"


def test_an_app_rendered_from_a_local_clone_gets_jobq_from_the_index_after_the_clone_is_gone(
    dist: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """jobq_source=index: a released range, here from a local index (--find-links) that
    holds the wheel, as a user's from the package index once jobq is published."""
    clone = tmp_path / "jobs-starter"
    shutil.copytree(ROOT, clone, ignore=shutil.ignore_patterns(*NOT_THE_TEMPLATE))
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "the template"]):
        git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.com", *args]
        subprocess.run(git, cwd=clone, check=True, capture_output=True)
    app = tmp_path / APP
    copier.run_copy(
        str(clone), app, data={"db": "sqlite", "jobq_source": "index"}, defaults=True,
        vcs_ref="HEAD", unsafe=False,
    )  # fmt: skip
    major, minor = (int(part) for part in jobq.__version__.split(".")[:2])
    released = f"jobq>={jobq.__version__},<{f'0.{minor + 1}' if major == 0 else major + 1}"
    assert f"\njobq: {released}\n  (jobq_source=index: " in capsys.readouterr().err
    # With the cli extra: the jobs command the app mounts (jobq.cli).
    assert (
        f'  "{released.replace("jobq", "jobq[cli]", 1)}",\n' in (app / "pyproject.toml").read_text()
    )
    shutil.rmtree(clone)

    venv = tmp_path / "venv"
    python = venv / "bin" / "python"
    assert run(*UV, "venv", "-q", "--python", sys.executable, venv).returncode == 0
    installed = run(*UV, "pip", "install", "-q", "--python", python, "--find-links", dist, app)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    # The app's Store, on the store kit of the wheel's jobq.
    where = "print(jobq.__version__, jobq.__file__.startswith(sys.prefix))"
    ran = run(python, "-I", "-c", f"import jobq, sys, {APP}.jobs_db; {where}", cwd=tmp_path)
    assert (ran.returncode, ran.stdout) == (0, f"{jobq.__version__} True\n"), ran.stderr


def test_ruff_passes_on_the_repository_as_its_pre_commit_hooks_run_it() -> None:
    checks = hooks(ROOT / ".pre-commit-config.yaml")
    assert sorted(checks) == ["mypy", "ruff-check", "ruff-format"]
    # mypy's hook is runtime/tests/test_typing.py's check (20 s of CPU: made once a run).
    assert checks["mypy"] == ["bash", "-c", "cd runtime && exec mypy src/jobq tests"]
    # The tools of this venv, as the hooks find them in the venv a developer activates.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    for hook in ("ruff-check", "ruff-format"):
        done = subprocess.run(
            checks[hook], cwd=ROOT, env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, (
            f"{hook}: {done.stdout}{done.stderr}\n"
            "Fix with: ruff check --fix . && ruff format . (from the repository's root)"
        )
