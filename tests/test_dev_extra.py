"""A contributor's install runs the runtime's tests: `pip install -e 'runtime[dev]'`.

Checked without installing anything: every third-party module that the runtime
(runtime/src/jobq) or its tests (runtime/tests) import, and every database
driver their SQLAlchemy URLs name, comes from a distribution that the `dev`
extra or the runtime's own dependencies require, or that one of those requires
in turn (as installed here: scripts/test installs `runtime[dev]`).
"""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from functools import cache
from pathlib import Path

import sources

RUNTIME = sources.ROOT / "runtime"
SCANNED = [RUNTIME / "src/jobq", RUNTIME / "tests"]
FIRST_PARTY = {"jobq", "conftest", "typed", "cliapp"}  # the runtime, and its tests' own modules
# A SQLAlchemy URL's driver, "dialect+driver://": the driver is the module it imports.
_URL_DRIVER = re.compile(r"\b[a-z]+\+([a-z0-9_]+)://")


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalized (PEP 503)."""
    found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert found is not None, requirement
    return re.sub(r"[-_.]+", "-", found.group(1)).lower()


def _requirements() -> set[str]:
    project = tomllib.loads((RUNTIME / "pyproject.toml").read_text())["project"]
    return {_name(r) for r in [*project["dependencies"], *project["optional-dependencies"]["dev"]]}


@cache
def _required_by(distribution: str) -> frozenset[str]:
    """What ``distribution``, as installed here, requires, but for its extras."""
    try:
        required = importlib.metadata.requires(distribution) or []
    except importlib.metadata.PackageNotFoundError:
        return frozenset()
    return frozenset(_name(r) for r in required if "extra ==" not in r.replace('"', "'"))


def _provided(names: set[str]) -> set[str]:
    """``names`` and all they require, transitively."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(_required_by(name))
    return seen


def _imported() -> dict[str, Path]:
    """Each top-level module the scanned files import, or name as a URL's driver: a file
    that does."""
    found: dict[str, Path] = {}
    for folder in SCANNED:
        for path in sorted(folder.rglob("*.py")):
            text = path.read_text()
            names = set(_URL_DRIVER.findall(text))
            for node in ast.walk(ast.parse(text, str(path))):
                if isinstance(node, ast.Import):
                    names |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
            for name in names:
                found.setdefault(name, path)
    return {
        name: path
        for name, path in found.items()
        if name not in sys.stdlib_module_names and name not in FIRST_PARTY
    }


def test_the_dev_extra_provides_every_module_the_runtime_and_its_tests_import() -> None:
    provided = _provided(_requirements())
    distributions = importlib.metadata.packages_distributions()
    missing = []
    for module, path in sorted(_imported().items()):
        from_ = {_name(d) for d in distributions.get(module, [])}
        if not from_ & provided:
            where = path.relative_to(sources.ROOT)
            missing.append(f"{module} ({where}; from {sorted(from_) or 'no installed package'})")
    assert missing == [], "add to runtime/pyproject.toml's dev extra: " + ", ".join(missing)


def test_the_check_sees_the_drivers_the_store_kit_loads_by_url() -> None:
    imported = _imported()
    assert {"pymysql", "psycopg", "sqlalchemy"} <= imported.keys()
