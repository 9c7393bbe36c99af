"""The docs' examples run: each page's python blocks, in order, in one namespace."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[2] / "docs"
# The pages whose python blocks need only jobq.
PAGES = ["jobs.md", "schedules.md", "store.md", "testing.md"]


def blocks(page: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", page.read_text(), flags=re.S | re.M)


@pytest.mark.parametrize("name", PAGES)
def test_the_examples_on_the_page_run(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    page = DOCS / name
    found = blocks(page)
    assert found, f"{name} has no python examples"
    # A module of its own, as dataclasses and pydantic look their types up there.
    module = types.ModuleType(f"docs_{page.stem}")
    sys.modules[module.__name__] = module
    try:
        for n, code in enumerate(found, 1):
            exec(compile(code, f"{page}:block {n}", "exec"), module.__dict__)
    finally:
        del sys.modules[module.__name__]
