"""copier refuses the answers that would render an app that cannot install or import.

Each renders with copier as a user would (tests/apps.py's render), and only
renders: no app is installed, so these run in seconds.
"""

from __future__ import annotations

import keyword
import re
import sys
import warnings
from pathlib import Path

import copier
import pytest
from copier.errors import DirtyLocalWarning

from apps import ROOT, render

KEYWORD = "is a Python keyword: a package of that name cannot be imported; choose another name."
DEPENDENCY = (
    "is the name of one of the app's own dependencies: the app would shadow it, "
    "or depend on itself; choose another name."
)
STDLIB = (
    "is a module of Python's standard library: the app's package would shadow it; "
    "choose another name."
)

FOLDER = (
    "is the name of one of the app's folders ({name}/), beside which its command ./{name} "
    "would go; choose another name."
)


@pytest.mark.parametrize(
    ("answers", "question", "said"),
    [
        ({"app_name": "class"}, "app_name", f"class {KEYWORD}"),
        ({"app_name": "jobq"}, "app_name", f"jobq {DEPENDENCY}"),
        ({"app_name": "sqlalchemy"}, "app_name", f"sqlalchemy {DEPENDENCY}"),
        ({"app_name": "prometheus-client"}, "app_name", f"prometheus-client {DEPENDENCY}"),
        ({"app_name": "json"}, "app_name", f"json {STDLIB}"),
        ({"app_name": "tests"}, "app_name", f"tests {FOLDER.format(name='tests')}"),
        ({"app_name": "src"}, "app_name", f"src {FOLDER.format(name='src')}"),
        ({"app_name": "shop", "package": "import"}, "package", f"import {KEYWORD}"),
        ({"app_name": "shop", "package": "starlette"}, "package", f"starlette {DEPENDENCY}"),
        ({"app_name": "shop", "package": "typer"}, "package", f"typer {DEPENDENCY}"),
        ({"app_name": "shop", "package": "email"}, "package", f"email {STDLIB}"),
    ],
)
def test_copier_refuses_a_name_the_app_could_not_take_and_says_why(
    tmp_path: Path, answers: dict[str, str], question: str, said: str
) -> None:
    with pytest.raises(ValueError, match="Validation error") as refused:
        render("sqlite", tmp_path / "app", **answers)
    assert str(refused.value) == f"Validation error for question '{question}': {said}"
    assert not (tmp_path / "app" / "pyproject.toml").exists()


def test_copier_renders_a_name_that_only_looks_like_a_refused_one(tmp_path: Path) -> None:
    app = render("sqlite", tmp_path / "app", app_name="json-shop", package="classes")
    assert (app / "src" / "classes" / "cli.py").exists()
    # The names' list is the template's, not the app's.
    assert not list(app.rglob("_answers*"))


def _listed(name: str) -> set[str]:
    text = (ROOT / "template" / "_answers.jinja").read_text()
    [listed] = re.findall(rf"set {name} = \[(.*?)\]", text, re.DOTALL)
    return set(re.findall(r'"([^"]+)"', listed))


def test_the_refused_names_are_this_pythons_keywords_and_standard_library() -> None:
    """The lists in _answers.jinja are data: this fails when a Python adds a name."""
    assert _listed("keywords") == {k for k in keyword.kwlist if k.islower()}
    assert {n for n in sys.stdlib_module_names if n == n.lower()} <= _listed("stdlib")


def test_copier_refuses_to_pin_jobq_to_a_local_template_folder_and_says_what_to_give(
    tmp_path: Path,
) -> None:
    """By default (jobq_source=git), from a local folder: the pin would break once it moved."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DirtyLocalWarning)
        with pytest.raises(ValueError, match="Validation error") as refused:
            copier.run_copy(
                str(ROOT), tmp_path / "app", data={"db": "sqlite"}, defaults=True,
                vcs_ref="HEAD" if (ROOT / ".git").exists() else None, unsafe=False, quiet=True,
            )  # fmt: skip
    assert str(refused.value) == (
        f"Validation error for question 'jobq_source': the template is a local folder, {ROOT}, "
        "and an app pinned to it would not install once it moved: give --data jobq_source=index "
        "(the released jobq, from the package index), or --data 'jobq_source=jobq @ "
        "file:///a/path/that/lasts/runtime', or render from the template's git URL "
        f"(gh:owner/repo; git+file://{ROOT} to pin to this clone all the same)."
    )
    assert not (tmp_path / "app" / "pyproject.toml").exists()
