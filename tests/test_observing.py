"""docs/observing.md's examples run, in order, in an app rendered on SQLite with its own modules."""

from __future__ import annotations

import re
import subprocess
from typing import TYPE_CHECKING

from apps import ROOT

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from apps import Installed

PAGE = ROOT / "docs" / "observing.md"


def test_the_examples_on_the_observing_page_run_in_a_rendered_app(
    apps: Callable[[str], Installed], tmp_path: Path
) -> None:
    blocks = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(), flags=re.S | re.M)
    assert len(blocks) >= 4, "the page has lost its examples"
    script = tmp_path / "observing.py"
    script.write_text("\n\n".join(blocks))
    app = apps("sqlite")
    # In a folder of its own: the examples' SQLite file is relative to it.
    done = subprocess.run(
        [app.python, str(script)],
        cwd=tmp_path,
        env=app.env(PYTHONWARNINGS="error"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
