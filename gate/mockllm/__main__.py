"""`python -m gate.mockllm`: the local model server (`promptgate mock-llm`)."""

from . import command

command()
