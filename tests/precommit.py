"""The checks of a pre-commit config (the repository's, or a rendered app's), as commands the
tests run: a checkout or an app need not be a git repository, as pre-commit needs."""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml


def hooks(config: Path) -> dict[str, list[str]]:
    """The commands of a pre-commit config's hooks by id. Each is a local, system hook that
    checks the whole project (no file names passed), so its command is the whole check."""
    [repo] = yaml.safe_load(config.read_text())["repos"]
    assert repo["repo"] == "local", "the tools are the project's own: repo: local"
    commands = {}
    for hook in repo["hooks"]:
        assert (hook["language"], hook.get("pass_filenames", True)) == ("system", False), hook
        commands[hook["id"]] = [*shlex.split(hook["entry"]), *hook.get("args", [])]
    return commands
