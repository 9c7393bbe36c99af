"""jobq.cli: the jobs command (typer), for an app to mount beside its own commands.

Needs typer (``pip install 'jobq[cli]'``). An app describes itself once, as a
``Program``: its name as a user types it, how to open it on its database
(``open_app(workers)``, a context manager that yields an ``App``: its queue,
its workers, how long it keeps ended jobs, and a check that its database
answers and is migrated), and the errors to tell in one line::

    program = Program(name="myapp", jobs="myapp jobs", migrate="./myapp migrate",
                      open_app=open_app, where=database_url_shown)
    cli.add_typer(jobs_command(program), name="jobs")

``jobs_command`` then holds every jobs subcommand, and its output, text and
``--json``. The app's own commands (serve, migrate) take the same one-line
errors from ``program.clear_errors()``. Stability: ``App`` and ``Program`` may
gain fields with defaults in a minor release; their fields are not renamed.
"""

from __future__ import annotations

try:
    import typer  # noqa: F401 - the commands are typer's
except ImportError:  # one line, not a traceback into the commands' modules
    raise ModuleNotFoundError(
        "jobq.cli needs typer: pip install 'jobq[cli]'", name="typer"
    ) from None

from jobq.cli.app import App, OpenApp
from jobq.cli.command import jobs_command
from jobq.cli.program import Program

__all__ = ["App", "OpenApp", "Program", "jobs_command"]
