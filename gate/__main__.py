"""`python -m gate`: the `promptgate` command."""

from gate.cli import main

main()
