"""`python -m gate.cli`: the `promptgate` command."""

from . import main

main()
