"""The OpenAPI document against the running service: schemathesis generates requests for
every operation the document lists, sends each to two real `promptgate serve`, one on
MariaDB and one on SQLite (the same rows in each), with an admin and a read token, and
checks each response: no 500, a status the operation documents, the content type it
documents and a body its schema allows.

Bounded and seeded (``PLAN``): up to 80 cases per operation per dialect, 160 per route in
all (fewer where the schema allows fewer distinct requests), each run derandomized (the same
cases every run): about 2,000 requests per dialect. Each case is generated once and sent to
both services in turn (generating is most of the client's CPU: when each dialect was a test
of its own the same derandomized cases were generated twice, ~15 s of CPU), each over a
kept connection (a session whose cookies are dropped after each request, as schemathesis's
own runner keeps it). Invalid cases (the schema's negative space) are
generated for every operation whose schema constrains anything; the run prints those that
constrain nothing. Nothing is excluded; one parameter is fixed: the long-poll's ``timeout``
(up to 120 s) is sent as 0, or the run would wait on every queued update it created (its
range is FastAPI's to check). Token revocation runs too: generated names cannot name this
test's own tokens (a suffix of pid and clock)."""

from __future__ import annotations

import time
from collections import Counter

import httpx2
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.transport.requests import ManagedCookiesSession
from support.helpers import rules_spec, write_rule_rows
from support.migrated import migrated
from support.service_harness import Service

from gate.domain import Gate

# (token, generation mode, cases per operation): valid requests as an admin, then ones the
# schema does not allow (each must be refused with a documented 4xx), then valid ones as read
PLAN = (
    ("admin", GenerationMode.POSITIVE, 40),
    ("admin", GenerationMode.NEGATIVE, 25),
    ("read", GenerationMode.POSITIVE, 15),
)
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
FIXED_QUERY = {"/v1/updates/{update_id}/wait": {"timeout": 0}}


def seeded(db_url: str, folder) -> str:
    """Something to find: a dataset, a mapping, an update (ids 1.. are what generation tries first)."""
    gate = Gate.connect(migrated(db_url), upgrade=True)
    try:
        gate.register_dataset("d1", str(write_rule_rows(folder / "d1.csv", 6)))
        gate.map_dataset("p1", "d1", "0.5")
        gate.submit(rules_spec("p1"), "check")
    finally:
        gate.close()
    return db_url


@pytest.fixture
def served(mysql_url, sqlite_url, tmp_path):
    """{dialect: (the service on it, a session kept to it)}, the same rows in each database."""
    started: dict[str, tuple[Service, ManagedCookiesSession]] = {}
    try:
        for dialect, url in (("mariadb", mysql_url), ("sqlite", sqlite_url)):
            folder = tmp_path / dialect
            folder.mkdir()
            session = ManagedCookiesSession()
            session.trust_env = False  # loopback: no proxy variables or .netrc read per request (~2 s of CPU)
            started[dialect] = (Service(seeded(url, folder), folder), session)
        yield started
    finally:
        for svc, session in started.values():
            session.close()
            svc.stop()


def failures_of(operation, served: dict, scope: str, mode: GenerationMode, examples: int, sent: Counter) -> list[str]:
    """Each case sent to every service in turn, its response checked before the next call."""
    failed: list[str] = []
    strategy = operation.as_strategy(mode, query=FIXED_QUERY.get(operation.path))

    @settings(
        max_examples=examples,
        derandomize=True,
        deadline=None,
        database=None,
        print_blob=False,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def run(case):
        for dialect, (svc, session) in served.items():
            headers = {"Authorization": f"Bearer {svc.tokens[scope]}"}
            response = case.call(base_url=svc.url, session=session, headers=headers, timeout=30)
            sent[dialect, operation.label] += 1
            try:
                case.validate_response(response, checks=CHECKS, headers=headers)
            except (Exception, BaseExceptionGroup) as exc:  # every operation runs; failures reported together
                if len(failed) < 3:
                    failed.append(
                        f"{dialect}: {operation.label}: {response.status_code} {response.text[:200]!r}: "
                        f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                    )

    try:
        run()
    except Unsatisfiable:  # nothing left to make invalid: said in the summary, not hidden
        failed.append(f"{operation.label}: no {mode.value} case could be generated")
    return failed


def negatable(document: dict, operation) -> bool:
    """An operation with something the schema constrains: a body, or a parameter that is
    more than any text (a number, a range, a pattern, a choice)."""
    found = document["paths"][operation.path][operation.method.lower()]
    return "requestBody" in found or any(
        p.get("schema", {}) not in ({"type": "string"}, {})
        and set(p.get("schema", {})) - {"type", "title", "description"}
        or p.get("schema", {}).get("type") not in ("string", None)
        for p in found.get("parameters", [])
    )


def test_every_operation_answers_as_its_schema_says(served):
    url = served["mariadb"][0].url
    assert httpx2.get(served["sqlite"][0].url + "/openapi.json").json() == httpx2.get(url + "/openapi.json").json()
    schema = schemathesis.openapi.from_url(url + "/openapi.json")
    document = httpx2.get(url + "/openapi.json").json()
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20, "the document lists the API's operations"
    started, failed, sent, unconstrained = time.monotonic(), [], Counter(), set()
    for scope, mode, examples in PLAN:
        for operation in operations:
            if mode == GenerationMode.NEGATIVE and not negatable(document, operation):
                unconstrained.add(operation.label)
                continue
            failed += failures_of(operation, served, scope, mode, examples, sent)
    logs = "\n".join(f"{dialect}: {svc.log()[-1500:]}" for dialect, (svc, _) in served.items())
    assert failed == [], "\n".join(failed) + "\n" + logs
    for dialect in served:
        counts = [n for (d, _), n in sent.items() if d == dialect]
        print(
            f"{dialect}: {sum(counts)} requests over {len(counts)} operations; fewest for one operation: {min(counts)}"
        )
    print(
        f"in {time.monotonic() - started:.1f} s; no invalid cases (nothing the schema constrains): "
        f"{sorted(unconstrained)}"
    )
    for dialect, (svc, _) in served.items():
        assert "Traceback" not in svc.log(), dialect
