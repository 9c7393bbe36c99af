"""jobq: background jobs kept in the app's own database."""
