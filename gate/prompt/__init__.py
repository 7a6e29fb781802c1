"""The prompt file and its untrusted parts: the format (``spec``), its call settings, YAML,
templates and their sandbox, the decision step, trials and the request keys answers are reused by."""
