"""The test command's parallel run keeps a story's tests on one worker (tests/conftest.py)."""

from __future__ import annotations

import pytest


def test_tests_of_one_xdist_group_run_on_one_worker(pytester: pytest.Pytester) -> None:
    # pytest 9 with pytest-xdist 3.8 grouped nothing: each worker told each story.
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        """
        import os
        import pytest

        @pytest.mark.xdist_group("story")
        @pytest.mark.parametrize("n", range(8))
        def test_read(n):
            print("worker", os.environ["PYTEST_XDIST_WORKER"])
        """
    )
    ran = pytester.runpytest_subprocess(
        "-n", "3", "--dist", "loadgroup", "-v", "-p", "no:cacheprovider"
    )
    ran.assert_outcomes(passed=8)
    workers = {line.split("]")[0] for line in ran.outlines if "PASSED" in line}
    assert len(workers) == 1, ran.outlines
