"""SIGTERM and SIGINT for a process's main loop, caught without a lock.

A signal handler runs in the main thread between two bytecodes, and a second signal can
run it again in the middle of the first run (systemd's KillMode, ``kill -- -PGID`` and a
double Ctrl-C all send several in a row). A handler that takes a lock (an ``Event.set``,
a logging call, a queue) can then wait for the lock its own outer run holds, and the
process never stops. So the handler here stores the signal number and nothing else, and
``signal.set_wakeup_fd`` writes a byte to a pipe the main loop sleeps on: it wakes at once
and does the stopping itself, outside any handler.
"""

from __future__ import annotations

import os
import select
import signal

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopSignals:
    """Install with ``install()`` (main thread only), then ``wait(timeout)`` in the loop."""

    def __init__(self, signals=STOP_SIGNALS):
        self.signals = tuple(signals)
        self.received: int | None = None  # the last stop signal caught
        self._read, self._write = os.pipe()
        for fd in (self._read, self._write):
            os.set_blocking(fd, False)

    def install(self) -> StopSignals:
        signal.set_wakeup_fd(self._write, warn_on_full_buffer=False)
        for sig in self.signals:
            signal.signal(sig, self._handle)
        return self

    def hold(self) -> None:
        """The stop is done: further stop signals are ignored while the process exits.
        Python's finalization sets every signal it handled back to the default action
        (signalmodule.c, ``_PySignal_Fini``), so a late SIGTERM of the same storm would
        kill a process that had stopped cleanly (exit -15, a failed unit under systemd);
        an ignored signal it leaves alone."""
        for sig in self.signals:
            signal.signal(sig, signal.SIG_IGN)

    def _handle(self, signum, _frame) -> None:
        self.received = signum  # one store: safe however often and wherever it is re-entered

    @property
    def stopping(self) -> bool:
        return self.received is not None

    def wait(self, timeout: float | None) -> bool:
        """Sleep until a stop signal arrives (at once if one has) or ``timeout`` passes;
        True once one has arrived. Any other caught signal wakes it early too."""
        if self.received is None:
            select.select([self._read], [], [], timeout)
            self._drain()
        return self.received is not None

    def _drain(self) -> None:
        try:
            while os.read(self._read, 512):
                pass
        except BlockingIOError:
            pass
