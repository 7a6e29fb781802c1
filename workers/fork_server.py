"""The fork server of ``promptgate worker --processes N`` (``supervise``): one process that
imports a worker's modules once, from which every worker process, and every one restarted
after a crash, is forked (multiprocessing's ``forkserver``), instead of a fresh interpreter
importing them each time (~0.8 s of CPU a process, most of it the openai SDK).

It is started by the supervisor after ``PROMETHEUS_MULTIPROC_DIR`` is set, so the metrics
it imports record into the host's shared directory (``workers.execute.metrics``); a forked
process records under its own pid.

Importing this module first makes the fork server ignore SIGTERM: a stop sent to the whole
process group (systemd's KillMode=control-group, ``kill -- -PGID``) would otherwise end it
at once, and the supervisor, which learns its workers' exits through it, would take every
worker for dead and exit before they drained. It ends when the supervisor does (its pipe to
the supervisor closes), or on SIGKILL. A forked worker sets SIGTERM back to the default
before anything else (``run_process``), then catches it as it always did."""

from __future__ import annotations

import signal

signal.signal(signal.SIGTERM, signal.SIG_IGN)
