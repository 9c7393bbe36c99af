"""`python -m` runs the app's commands."""

from .cli import main

main()
