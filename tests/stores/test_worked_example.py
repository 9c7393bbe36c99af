"""docs/store.md's worked example, a Store of one's own on the store kit, passes jobq's suite.

The store is the page's code as it is, read from its first python block under
"A store of your own, with the kit": the page cannot show a store that fails.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from jobq.testing import ClaimantPromises, StorePromises

PAGE = Path(__file__).resolve().parents[2] / "docs" / "store.md"


def _example() -> types.ModuleType:
    section = PAGE.read_text().split("### A store of your own, with the kit\n", 1)[1]
    [code] = re.findall(r"^```python\n(.*?)^```", section, flags=re.S | re.M)[:1]
    module = types.ModuleType("store_md_outbox")
    sys.modules[module.__name__] = module  # for what looks its types up there
    exec(compile(code, f"{PAGE}:A store of your own", "exec"), module.__dict__)
    return module


example = _example()


def test_the_example_is_a_store_with_no_extras() -> None:
    import jobq

    outbox = example.Outbox(example.make_engine("sqlite://"))
    assert isinstance(outbox, jobq.Store)
    assert not isinstance(outbox, jobq.FailedStore | jobq.BatchStore | jobq.UniqueStore)


class TestTheWorkedExample(StorePromises, ClaimantPromises):
    """The families every Store has (StoreSuite would add the extras', each skipped here)."""

    @pytest.fixture
    def store(self, tmp_path: Path) -> Any:
        return example.Outbox(example.make_engine(f"sqlite:///{tmp_path / 'outbox.sqlite3'}"))
