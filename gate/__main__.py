"""`python -m gate`: the `promptgate` command."""

from .cli import main

main()
