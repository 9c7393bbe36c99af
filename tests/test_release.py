"""What a release needs: the checks before each commit pass on the repository.

The checks are .pre-commit-config.yaml's hooks, run here by their own commands (the
checkout need not be a git repository, as pre-commit needs), so CI makes them too.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from apps import ROOT


def hooks(config: Path) -> dict[str, list[str]]:
    """The commands of a pre-commit config's hooks by id: each is a local, system hook that
    checks the whole project (no file names passed), so its command is the whole check."""
    [repo] = yaml.safe_load(config.read_text())["repos"]
    assert repo["repo"] == "local", "the tools are the project's own: repo: local"
    commands = {}
    for hook in repo["hooks"]:
        assert (hook["language"], hook["pass_filenames"]) == ("system", False), hook
        commands[hook["id"]] = [*shlex.split(hook["entry"]), *hook.get("args", [])]
    return commands


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
