"""Two records of one commit at once (a re-run of the push job beside the first one) end with
one of them (review of issue 39's round). The record was an UPDATE and, when it changed no
row, an INSERT: two writers both found no row and both inserted, and the second got MariaDB's
duplicate key, a 503 whose text was the driver's (``Duplicate entry '…' for key 'PRIMARY'``),
which the Action reads as the gate being down: the push job failed, its record unwritten."""

from __future__ import annotations

import os
import threading

from gate.errors import GateError

WRITERS, COMMITS = 4, 12


def test_records_of_one_commit_written_at_once_all_succeed(mysql_gate):
    gate, errors = mysql_gate, []
    for _ in range(COMMITS):
        sha, start = os.urandom(20).hex(), threading.Barrier(WRITERS)

        def record(k: int) -> None:
            start.wait()
            try:
                gate.record_commit(sha, "not-gated", detail=f"writer {k}")
            except GateError as exc:
                errors.append(str(exc))

        threads = [threading.Thread(target=record, args=(k,)) for k in range(WRITERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        found = gate.commit_record(sha)
        assert found is not None and found.detail in {f"writer {k}" for k in range(WRITERS)}
    assert errors == []
