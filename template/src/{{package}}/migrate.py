"""Run the app's migrations: the template's branch ("jobs") and the app's own ("app")."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory

MIGRATIONS = Path(__file__).parent / "migrations"


def config(url: str) -> Config:
    """Alembic's config for the database at ``url``, with no alembic.ini needed."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.attributes["url"] = url  # not a main option: a % in a password would break its parsing
    return cfg


def migrate(url: str) -> list[str]:
    """Upgrade the database at ``url`` to every head; return the heads, sorted."""
    cfg = config(url)
    command.upgrade(cfg, "heads")
    return sorted(ScriptDirectory.from_config(cfg).get_heads())
