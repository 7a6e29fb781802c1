"""What people read about an update: the report the service hands out, its plain text, its
Markdown (the pull request's comment, from ``templates/``) and their figures."""
