"""The Markdown reports' Jinja templates (``gate.report.markdown`` renders them)."""
