"""What people read about an update: the report the service hands out, its plain text, its
Markdown (the pull request's comment, from ``templates/``) and their figures."""

SAMPLE_FAILURES = 5  # failing items a report shows by default (here: a client reads it without loading the report)
