"""The fork server of ``promptgate worker --processes N`` (``supervise``): one process that
imports a worker's modules once, from which every worker process, and every one restarted
after a crash, is forked (multiprocessing's ``forkserver``), instead of a fresh interpreter
importing them each time (~0.9 s of CPU a process, most of it the openai SDK).

It is started by the supervisor after ``PROMETHEUS_MULTIPROC_DIR`` is set, so the metrics
it imports record into the host's shared directory (``workers.execute.metrics``); a forked
process records under its own pid.

Importing this module first makes the fork server ignore SIGTERM: a stop sent to the whole
process group (systemd's KillMode=control-group, ``kill -- -PGID``) would otherwise end it
at once, and the supervisor, which learns its workers' exits through it, would take every
worker for dead and exit before they drained. It ends when the supervisor does (its pipe to
the supervisor closes), or on SIGKILL.

A forked worker (``forked``) sets SIGTERM back to the default before anything else, then
catches it as it always did; and asks the kernel for a SIGTERM when the fork server dies
(Linux: ``PR_SET_PDEATHSIG``), so it drains and exits rather than run on unsupervised when
the fork server, or the supervisor and then the fork server, is killed: the supervisor
starts a new fork server and new workers in their place."""

from __future__ import annotations

import ctypes
import os
import signal

SERVER_PID = os.getpid()  # imported in the fork server: its pid, which every forked worker inherits
PR_SET_PDEATHSIG = 1  # linux/prctl.h

signal.signal(signal.SIGTERM, signal.SIG_IGN)


def forked() -> None:
    """In a worker process just forked from the fork server: SIGTERM's default back, and a
    SIGTERM when the fork server dies (at once if it has died already)."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM) != 0:
            return
    except (OSError, AttributeError):  # not Linux: the worker outlives a dead fork server, as a spawned one did
        return
    if SERVER_PID != os.getpid() and os.getppid() != SERVER_PID:  # it died before the request was made
        os.kill(os.getpid(), signal.SIGTERM)
