"""The public API is what jobq and jobq.testing list in __all__, sorted."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    "module",
    [
        "jobq",
        "jobq.testing",
        "jobq.cli",
        "jobq.sql",
        "jobq.sql.engine",
        "jobq.sql.mysql",
        "jobq.sql.pool",
        "jobq.sql.postgres",
        "jobq.sql.process",
        "jobq.sql.rows",
        "jobq.sql.sqlite",
        "jobq.sql.table",
        "jobq.sql.tallies",
        "jobq.metrics",
        "jobq.page",
        "jobq.page.chart",
        "jobq.probe",
        "jobq.request_id",
        "jobq.supervisor",
    ],
)
def test_all_lists_the_public_names_sorted_and_each_exists(module: str) -> None:
    m = importlib.import_module(module)
    assert m.__all__ == sorted(m.__all__)
    for name in m.__all__:
        assert getattr(m, name) is not None


def _databases_imported_by(modules: str) -> str:
    """Which database libraries importing ``modules`` imports, in a fresh interpreter (as
    other tests may have imported anything)."""
    code = (
        f"import sys, {modules}; "
        "print(sorted({n.split('.')[0] for n in sys.modules} & {'sqlalchemy', 'sqlite3'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_jobq_imports_no_sql() -> None:
    assert _databases_imported_by("jobq, jobq.testing") == "[]"


def test_the_kits_row_reading_imports_no_database_library() -> None:
    assert _databases_imported_by("jobq.sql, jobq.sql.rows, jobq.sql.table") == "[]"


def test_jobq_rows_is_the_kits_rows_for_one_more_release_with_a_warning() -> None:
    sys.modules.pop("jobq.rows", None)
    with pytest.warns(DeprecationWarning, match=r"jobq.rows is now jobq.sql.rows"):
        old = importlib.import_module("jobq.rows")
    from jobq.sql import rows

    assert [getattr(old, name) for name in old.__all__] == [
        getattr(rows, name) for name in old.__all__
    ]
