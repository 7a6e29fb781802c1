"""Uploads in progress (issue 33, finding 2), against a real `promptgate serve` on MariaDB:
what an upload names is checked before a byte of its body is read, a token holds at most
its own share of the upload slots, an admin's import is never kept out by other tokens'
uploads, and a body must keep a minimum average rate, not only a byte now and then.

Each upload here is a raw socket that sends its headers with ``Expect: 100-continue``:
the service answers ``100 Continue`` when the route first reads the body, which it does
only once the upload's checks passed and it holds a slot. So a test knows, without
guessing at timing, that an upload holds its slot (it got 100 Continue) or was answered
before its body was read (its first answer is the final one)."""

from __future__ import annotations

import json
import select
import socket
import time
from urllib.parse import quote

from support.service_harness import Service

from gate.domain import Gate

ROWS = b"item_id,expected_decision\na,yes\n"


def open_upload(service, token: str, name: str = "d", path: str = "datasets/d.csv", dry_run: bool = True):
    """A chunked upload whose headers are sent and whose body is not (yet)."""
    query = f"path={quote(path)}" + ("&dry_run=true" if dry_run else "")
    sock = socket.create_connection(("127.0.0.1", service.port), timeout=30)
    sock.sendall(
        f"PUT /v1/datasets/{quote(name)}/rows?{query} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: text/csv\r\nTransfer-Encoding: chunked\r\n"
        "Expect: 100-continue\r\n\r\n".encode()
    )
    return sock


def answer(sock: socket.socket, seconds: float = 20.0) -> tuple[int, str]:
    """The next response on ``sock``: its status and body ("" for 100 Continue), or
    (0, "") when none came within ``seconds``."""
    data, deadline = b"", time.monotonic() + seconds
    while b"\r\n\r\n" not in data:
        if not select.select([sock], [], [], max(0.0, deadline - time.monotonic()))[0]:
            return 0, ""
        chunk = sock.recv(65536)
        if not chunk:
            return 0, ""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split()[1])
    if status == 100:
        return 100, ""
    length = int(next(h.split(b":")[1] for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return status, json.loads(body).get("error", "")


def holding(service, token: str, **upload) -> socket.socket:
    """An upload that holds a slot: the service asked for its body."""
    sock = open_upload(service, token, **upload)
    status, error = answer(sock)
    assert status == 100, (status, error)
    return sock


def refused(service, token: str, **upload) -> tuple[int, str]:
    """The answer to an upload whose body is never sent."""
    sock = open_upload(service, token, **upload)
    try:
        return answer(sock)
    finally:
        sock.close()


def trickle(socks: list[socket.socket]) -> None:
    """One byte of body on each upload (a chunk of one byte)."""
    for sock in socks:
        sock.sendall(b"1\r\nx\r\n")


def declare(service, name: str = "d") -> None:
    """Dataset ``name``, declared by a gate config from datasets/NAME.csv: a pull request may
    compare a copy of it (a dry run)."""
    with service.client("admin") as admin:
        made = admin.put(
            f"/v1/datasets/{name}/rows",
            content=ROWS,
            params={"path": f"datasets/{name}.csv", "declared_in": "gate.yaml"},
        )
        assert made.status_code == 200, made.text


def submit_tokens(service, count: int) -> list[str]:
    gate = Gate.connect(service.db_url)
    try:
        return [gate.create_token(f"ci-{service.port}-{n}", "submit") for n in range(count)]
    finally:
        gate.close()


def test_one_tokens_trickled_dry_runs_never_keep_an_admins_import_out(mysql_url, tmp_path):
    """Hostile review: four chunked dry runs of one submit token, a byte every 20 s, held the
    service's four upload slots: the admin's upload (the default branch's sync) met 429 for
    as long as they went on. Now a token holds at most --max-uploads-per-token (2) of the
    --max-uploads (4); with every slot held, an admin's import still goes through, and any
    other upload meets 429."""
    service = Service(mysql_url, tmp_path, "--body-timeout", "30")
    held: list[socket.socket] = []
    try:
        declare(service)
        attacker, second, third, fourth = submit_tokens(service, 4)
        held += [holding(service, attacker), holding(service, attacker)]
        for _ in range(2):  # the attack's third and fourth dry runs
            status, error = refused(service, attacker)
            assert status == 429 and "this token has 2 uploads in progress" in error, (status, error)
            assert "--max-uploads-per-token" in error
        held += [holding(service, second), holding(service, third)]  # every slot is held now
        trickle(held)
        status, error = refused(service, fourth)
        assert status == 429 and "4 uploads are in progress" in error, (status, error)
        status, error = refused(service, service.tokens["admin"])  # an admin's dry run shares the slots
        assert status == 429, (status, error)
        with service.client("admin") as admin:
            for commit in ("a" * 40, "b" * 40):  # the sync, twice: an import never waits for a slot
                synced = admin.put(
                    "/v1/datasets/d/rows",
                    content=ROWS + b"b,no\n",
                    params={"path": "datasets/d.csv", "declared_in": "gate.yaml", "commit": commit},
                )
                assert synced.status_code == 200, synced.text
                trickle(held)
        for sock in held[:2]:  # the attacker leaves: its slots are free again
            sock.close()
        held = held[2:]
        deadline = time.monotonic() + 15
        while (status := refused(service, fourth)[0]) == 429 and time.monotonic() < deadline:
            time.sleep(0.1)  # its leaving reaches the service a moment later
        assert status == 100  # the fourth token's dry run is asked for its body: it holds a slot
    finally:
        for sock in held:
            sock.close()
        service.stop()
    assert "Traceback" not in service.log(), service.log()


def test_two_tokens_never_hold_every_upload_slot(mysql_url, tmp_path):
    """Review of issue 33: two submit tokens held all four non-admin upload slots (two each),
    so every other pull request's dry run met 429 for as long as theirs lasted. A token
    that holds an upload takes another only while more than half the slots are free (the
    rest are kept for tokens that hold none): two tokens hold three slots at most, and a
    third token's dry run is asked for its body."""
    service = Service(mysql_url, tmp_path, "--body-timeout", "30")
    held: list[socket.socket] = []
    try:
        declare(service)
        first, second, third, fourth = submit_tokens(service, 4)
        held += [holding(service, first), holding(service, first), holding(service, second)]
        status, error = refused(service, second)
        assert status == 429 and "kept for tokens with no upload in progress" in error, (status, error)
        assert "--max-uploads" in error
        held.append(holding(service, third))  # another pull request's dry run goes in
        status, error = refused(service, fourth)
        assert status == 429 and "4 uploads are in progress" in error, (status, error)
        trickle(held)
        with service.client("admin") as admin:  # and the default branch's import, as ever
            synced = admin.put(
                "/v1/datasets/d/rows",
                content=ROWS + b"c,no\n",
                params={"path": "datasets/d.csv", "declared_in": "gate.yaml"},
            )
            assert synced.status_code == 200, synced.text
    finally:
        for sock in held:
            sock.close()
        service.stop()
    assert "Traceback" not in service.log(), service.log()


def paced(sock: socket.socket, rows: int, every: float) -> tuple[int, str, float]:
    """A CSV body sent one row a chunk, one chunk every ``every`` seconds, then its end: the
    service's answer (status, error) and how long it took; (status, error) as soon as the
    service answers before the body ended."""
    started = time.monotonic()
    sock.sendall(b"1a\r\nitem_id,expected_decision\n\r\n")
    for n in range(rows):
        row = b"r%d,yes\n" % n
        sock.sendall(b"%x\r\n%s\r\n" % (len(row), row))
        status, error = answer(sock, every)
        if status:
            return status, error, time.monotonic() - started
    sock.sendall(b"0\r\n\r\n")
    status, error = answer(sock)
    return status, error, time.monotonic() - started


def test_a_dry_run_has_a_total_deadline_and_an_import_has_not(mysql_url, tmp_path):
    """Review of issue 33: a dry run that kept the minimum rate (64 KiB/s after its first
    30 s) could last 30 s + 256 MiB / 64 KiB/s, about 68 minutes, holding its slot
    throughout. A dry run (a pull request's copy of a file) now has
    PROMPTGATE_DRY_RUN_SECONDS in all for its body, however fast it comes; an admin's
    import, at the same pace, is not held to it."""
    service = Service(
        mysql_url,
        tmp_path,
        "--body-timeout",
        "30",
        env={"PROMPTGATE_DRY_RUN_SECONDS": "3", "PROMPTGATE_UPLOAD_MIN_RATE": "1"},
    )
    try:
        declare(service)
        status, error, took = paced(holding(service, service.tokens["submit"]), 60, 0.3)
        assert status == 408 and "PROMPTGATE_DRY_RUN_SECONDS" in error, (status, error)
        assert 2.5 < took < 15, took
        importing = holding(service, service.tokens["admin"], dry_run=False)
        status, error, took = paced(importing, 20, 0.3)  # ~6 s: past the dry runs' deadline
        assert status == 200 and took > 4, (status, error, took)
    finally:
        service.stop()
    assert "Traceback" not in service.log(), service.log()


def test_a_stalled_upload_is_ended_and_uploads_in_progress_are_capped(mysql_url, tmp_path):
    """Hostile review: an upload that trickled its body held a handler and a spool past the
    body deadline that every other route meets (a dry run needs only submit), and nothing
    capped uploads in progress; a client that left mid-upload was an "internal error" with
    two tracebacks in the log. Now with one slot: a stalled dry run holds it, any other
    upload but an admin's import meets 429, the stall is a 408, and leaving frees it."""
    service = Service(
        mysql_url, tmp_path, "--body-timeout", "1.5", "--max-uploads", "1", "--max-uploads-per-token", "1"
    )
    try:
        declare(service)
        stalled = holding(service, service.tokens["submit"])
        stalled.sendall(b"1a\r\nitem_id,expected_decision\n")  # then nothing: the chunk never ends
        status, error = refused(service, service.tokens["submit"])
        assert status == 429 and "this token has 1 uploads in progress" in error, (status, error)
        status, error = refused(service, service.tokens["admin"])
        assert status == 429 and "1 uploads are in progress" in error, (status, error)
        with service.client("admin") as admin:
            imported = admin.put(
                "/v1/datasets/d/rows",
                content=ROWS + b"b,no\n",
                params={"path": "datasets/d.csv", "declared_in": "gate.yaml"},
            )
            assert imported.status_code == 200, imported.text
        started = time.monotonic()
        status, error = answer(stalled)
        assert status == 408 and "--body-timeout" in error and time.monotonic() - started < 10, (status, error)
        stalled.close()
        left = holding(service, service.tokens["submit"])
        left.sendall(b"1a\r\nitem_id,expected_decision\n")
        left.close()  # the client leaves mid-upload: its slot is freed
        deadline = time.monotonic() + 15
        while (status := refused(service, service.tokens["admin"])[0]) == 429 and time.monotonic() < deadline:
            time.sleep(0.1)  # its leaving reaches the service a moment later
        assert status == 100
    finally:
        service.stop()
    assert "internal error" not in service.log() and "Traceback" not in service.log(), service.log()


def test_an_uploads_dataset_and_path_are_checked_before_its_body_is_read(service, tmp_path):
    """Hostile review: an upload's slot was taken and its body spooled before the dataset
    and the path were looked at, so a dry run of a dataset it may not compare held a slot
    for as long as its body took. Each is now answered before the body is asked for."""
    declare(service)
    gate = Gate.connect(service.db_url)
    try:
        (tmp_path / "h.csv").write_bytes(ROWS)
        gate.register_dataset("holdout", str(tmp_path / "h.csv"))  # the operator's: no gate config declares it
    finally:
        gate.close()
    submit, admin = service.tokens["submit"], service.tokens["admin"]
    for token, upload, status, words in (
        (submit, {"name": "nope"}, 404, "unknown dataset 'nope'"),
        (submit, {"name": "holdout"}, 400, "compares only the dataset files its gate config declares"),
        (submit, {"path": "elsewhere/d.csv"}, 400, "compares only the dataset files its gate config declares"),
        (submit, {"path": "../d.csv"}, 400, "is not a file's path in the repository"),
        (submit, {"dry_run": False}, 403, "needs admin"),
        (admin, {"path": "/etc/passwd", "dry_run": False}, 400, "is not a file's path in the repository"),
        (admin, {"name": "Bad Name", "dry_run": False}, 400, "is not a valid name"),
        (admin, {"path": "datasets/d.txt", "dry_run": False}, 400, "unsupported file type"),
    ):
        got = refused(service, token, **upload)
        assert got[0] == status and words in got[1], (upload, got)
    sock = holding(service, admin, dry_run=False)  # a good one is asked for its body
    sock.close()


def test_an_upload_slower_than_the_minimum_rate_is_ended(mysql_url, tmp_path):
    """Hostile review: the deadline measured only the time between two bytes, so a byte
    every 20 s held an upload for ever. An upload must now average PROMPTGATE_UPLOAD_MIN_RATE
    bytes per second once its first --body-timeout seconds are over: a byte every 0.3 s
    (never idle for 3 s) is ended soon after them, in one line that names the setting."""
    service = Service(mysql_url, tmp_path, "--body-timeout", "3", env={"PROMPTGATE_UPLOAD_MIN_RATE": "100"})
    try:
        declare(service)
        sock = holding(service, service.tokens["submit"])
        started, status = time.monotonic(), 0
        while not status and time.monotonic() - started < 20:
            trickle([sock])
            status, error = answer(sock, 0.3)
        took = time.monotonic() - started
        sock.close()
        assert status == 408 and "too slow" in error and "PROMPTGATE_UPLOAD_MIN_RATE" in error, (status, error)
        assert 2.5 < took < 10, took
        with service.client("admin") as admin:  # a body that comes at once is not touched by it
            fast = admin.put("/v1/datasets/d/rows", content=ROWS, params={"path": "datasets/d.csv"})
            assert fast.status_code == 200, fast.text
    finally:
        service.stop()
    assert "Traceback" not in service.log(), service.log()
