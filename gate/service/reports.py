"""The reports the service hands out: defined in ``gate.report.update`` (no database there,
so the CLI renders a service's answer without loading SQLAlchemy), re-exported here under
their old path."""

from gate.report.update import SAMPLE_FAILURES, RunReport, UpdateReport, comparison, run_report

__all__ = ["SAMPLE_FAILURES", "RunReport", "UpdateReport", "comparison", "run_report"]
