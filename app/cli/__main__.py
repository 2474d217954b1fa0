"""`python -m app.cli`: the same as the `zero-bands` command."""

from app.cli import main

main()
