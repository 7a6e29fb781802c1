"""The OpenAPI document against the running service: schemathesis generates requests for
every operation the document lists, sends them to a real `promptgate serve` (MariaDB and
SQLite) with an admin and a read token, and checks each response: no 500, a status the
operation documents, the content type it documents and a body its schema allows.

Bounded and seeded (``PLAN``): up to 80 cases per operation per dialect, 160 per route in
all (fewer where the schema allows fewer distinct requests), each run derandomized (the same
cases every run): about 1,400 requests per dialect, 30-75 s each on this 2-core machine
(the longer under a load average of 9). Invalid cases (the schema's negative space) are
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


@pytest.fixture
def served(db_url, tmp_path):
    gate = Gate.connect(migrated(db_url), upgrade=True)
    try:  # something to find: a dataset, a mapping, an update (ids 1.. are what generation tries first)
        gate.register_dataset("d1", str(write_rule_rows(tmp_path / "d1.csv", 6)))
        gate.map_dataset("p1", "d1", "0.5")
        gate.submit(rules_spec("p1"), "check")
    finally:
        gate.close()
    svc = Service(db_url, tmp_path)
    yield svc
    svc.stop()


def failures_of(operation, url: str, token: str, mode: GenerationMode, examples: int, sent: list) -> list[str]:
    headers = {"Authorization": f"Bearer {token}"}
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
        response = case.call(base_url=url, headers=headers, timeout=30)
        sent.append(operation.label)
        try:
            case.validate_response(response, checks=CHECKS, headers=headers)
        except (Exception, BaseExceptionGroup) as exc:  # every operation runs; failures reported together
            if len(failed) < 3:
                failed.append(
                    f"{operation.label}: {response.status_code} {response.text[:200]!r}: "
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
    schema = schemathesis.openapi.from_url(served.url + "/openapi.json")
    document = httpx2.get(served.url + "/openapi.json").json()
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 20, "the document lists the API's operations"
    started, failed, sent, unconstrained = time.monotonic(), [], [], set()
    for scope, mode, examples in PLAN:
        for operation in operations:
            if mode == GenerationMode.NEGATIVE and not negatable(document, operation):
                unconstrained.add(operation.label)
                continue
            failed += failures_of(operation, served.url, served.tokens[scope], mode, examples, sent)
    assert failed == [], "\n".join(failed) + "\n" + served.log()[-1500:]
    print(
        f"{len(sent)} requests over {len(operations)} operations in {time.monotonic() - started:.1f} s; "
        f"fewest for one operation: {min(Counter(sent).values())}; no invalid cases (nothing the schema "
        f"constrains): {sorted(unconstrained)}"
    )
    assert "Traceback" not in served.log()
