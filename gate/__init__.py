"""prompt-gate: an evaluation gate for LLM prompt changes."""

__version__ = "0.1.0"
