"""A database fault tells no caller but admin the driver's text (issue 48, finding 5), end to
end: `promptgate serve` on MariaDB as its own account, one of whose grants an operator
revoked. The review: ``503 database: (1142, "INSERT, UPDATE command denied to user
'gate'@'localhost' for table `pg`.`served_report`")`` reached read and feedback tokens,
naming the account, its host, the database and the table. Now every token but admin gets one
generic line with an error id, the service's log has the full text under that id, and admin
gets the text with its id."""

from __future__ import annotations

import re
import secrets

from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import make_url
from support.service_harness import Service

from gate.domain import Gate
from gate.rollout.call_ids import mint_call_id

ERROR_ID = re.compile(r"error id ([0-9a-f]{12})")


def test_a_database_fault_is_one_generic_line_with_an_id_for_every_token_but_admin(mysql_url, tmp_path):
    Gate.connect(mysql_url, upgrade=True).close()
    url, user = make_url(mysql_url), f"gate_{secrets.token_hex(4)}"
    root = create_engine(mysql_url)
    with root.begin() as conn:  # the service's own account, granted table by table
        conn.execute(text(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw-{user}'"))
        for table in inspect(conn).get_table_names():
            conn.execute(text(f"GRANT ALL ON `{url.database}`.`{table}` TO '{user}'@'%'"))
    account = url.set(username=user, password=f"pw-{user}").render_as_string(hide_password=False)
    svc = Service(account, tmp_path)
    try:
        with root.begin() as conn:  # the operator's slip
            conn.execute(text(f"REVOKE SELECT ON `{url.database}`.`prompt_update` FROM '{user}'@'%'"))
            conn.execute(text(f"REVOKE SELECT ON `{url.database}`.`prompt_rollout` FROM '{user}'@'%'"))
            conn.execute(text(f"REVOKE SELECT ON `{url.database}`.`gate_secret` FROM '{user}'@'%'"))
        answers = {}
        for scope in ("read", "submit", "feedback", "admin"):
            with svc.client(scope) as caller:
                if scope == "feedback":
                    # an id of the runtime's form: checking it needs the gate's secret, read from the database
                    call_id = mint_call_id(bytes(32), 1, 1, bytes(6), 1)
                    event = {"prompt": "p1", "version": 1, "call_id": call_id, "correct": True}
                    answers[scope] = [caller.post("/v1/feedback", json={"events": [event]})]
                else:
                    answers[scope] = [caller.get("/v1/updates"), caller.get("/v1/updates/1")]
                    if scope != "admin":
                        answers[scope].append(caller.get("/"))  # the status page
        log = svc.log_path.read_text(errors="replace")
    finally:
        svc.stop()
        with root.begin() as conn:
            conn.execute(text(f"DROP USER '{user}'@'%'"))
        root.dispose()
    for scope, got in answers.items():
        for answer in got:
            assert answer.status_code == 503, (scope, answer.status_code, answer.text[:300])
            body = answer.text
            found = ERROR_ID.search(body)
            assert found, (scope, body[:300])
            assert f"error id {found[1]}" in body and found[1] in log, (scope, found[1])  # the operator's way in
            line = next(line for line in log.splitlines() if found[1] in line)
            assert "command denied" in line and user in line, line  # the full text, server-side
            told = any(s in body for s in ("command denied", user, url.database, "prompt_update", "1142"))
            assert told == (scope == "admin"), (scope, body[:400])
            assert "Traceback" not in body
