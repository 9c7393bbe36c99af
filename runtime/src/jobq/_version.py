"""jobq's version, written here alone.

The wheel's metadata reads it (pyproject.toml's [tool.hatch.version]), as does the
template, for the released range an app asks of the package index (template/_jobq.jinja).
A plain assignment, not importlib.metadata: an editable install keeps the version it was
installed with in its metadata, and would say so after this line changed.
"""

__version__ = "0.2.0"
