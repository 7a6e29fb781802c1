"""The domain facade: ``Gate`` (one gate database: datasets and bars, providers,
submissions, reports, the live table). The CLI, the GitHub Action, the demo and the
production runtime are thin over it; it raises only GateError."""

from .gate import Gate

__all__ = ["Gate"]
