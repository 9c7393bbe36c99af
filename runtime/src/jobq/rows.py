"""Deprecated: moved to ``jobq.sql.rows``, the store kit's row reading; kept for one release.

An app whose ``jobs_db.py`` still imports ``jobq.rows`` runs as before, with a
DeprecationWarning: ``copier update`` brings the store that imports the kit.
"""

from __future__ import annotations

import warnings

from jobq.sql.rows import *  # noqa: F403  (all it lists: what jobq.rows had, and more)
from jobq.sql.rows import __all__  # noqa: F401

warnings.warn(
    "jobq.rows is now jobq.sql.rows (the store kit): run copier update for the app's "
    "jobs_db.py that imports it, or import jobq.sql.rows; jobq.rows goes in the next release",
    DeprecationWarning,
    stacklevel=2,
)
