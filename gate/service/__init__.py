"""The service API: ``Gate`` (one gate database: datasets and bars, providers,
submissions, reports, the live table) and the reports it hands out. The CLI, the GitHub
Action, the demo and the production runtime are thin over it; it raises only GateError."""

from gate.api.release import combine_exit_codes
from gate.report.update import RunReport, UpdateReport, run_report
from gate.verdict.scoring import parse_bar

from .datasets import DatasetPreview
from .gate import SAMPLE_FAILURES, Gate, latest_per_prompt

__all__ = [
    "SAMPLE_FAILURES",
    "DatasetPreview",
    "Gate",
    "RunReport",
    "UpdateReport",
    "combine_exit_codes",
    "latest_per_prompt",
    "parse_bar",
    "run_report",
]
