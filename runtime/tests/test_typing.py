"""A typed app gets the types it expects: mypy --strict passes on example user code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

USAGE = Path(__file__).parent / "typed" / "usage.py"


def test_example_user_code_type_checks_strictly() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--warn-unused-ignores", str(USAGE)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_package_and_its_tests_type_check_strictly() -> None:
    """mypy, as pyproject.toml sets it (strict), on the package and on these tests."""
    runtime = Path(__file__).parents[1]
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "src/jobq", "tests"],
        capture_output=True,
        text=True,
        cwd=runtime,
    )
    assert out.returncode == 0, out.stdout + out.stderr
