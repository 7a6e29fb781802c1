"""The auth matrix: every route of the service × no token, an unknown token, each scope
and a revoked token, against a real `promptgate serve` on MariaDB. The table of routes
and the scope each needs is checked against the application's own routes, so a route
added without a row here fails this test."""

from __future__ import annotations

import re

import httpx2
import pytest
from support.cli import ROOT
from support.helpers import rules_spec, write_rule_rows
from support.migrated import migrated
from support.service_harness import SCOPES, TLS, Service

from gate.contract.shape import OPERATIONS
from gate.domain import Gate
from gate.service import create_app

# (method, route) -> the scope it needs; None: open to anyone (health, the API's schema). The
# JSON API's rows are its declaration's (gate/contract/shape.py: OPERATIONS): a submit route that
# stores (an apply, an upload that is no dry run, a sync) asks admin on top (the matrix's calls
# are check-mode submits and dry runs); waiting is reading (a release pipeline); a runtime's
# routes need a token even with --public-read (test_served.py); feedback is the feedback scope's,
# submit's or admin's; a commit's record is the push job's (admin: "nothing to gate" lets a
# release go); cancel is tried on the submit token's own update (test_service_integrity.py).
NEEDS = {
    **{(op.verb, op.path): op.scope for op in OPERATIONS if op.path is not None},
    ("GET", "/metrics"): "read",
    ("GET", "/healthz"): None,
    ("GET", "/readyz"): None,
    ("GET", "/openapi.json"): None,
    # the status page (tests/integration/test_status_page.py)
    ("GET", "/"): "read",
    ("GET", "/updates/{update_id}"): "read",
    ("GET", "/datasets"): "read",
    ("GET", "/datasets/{name}"): "read",
    ("GET", "/prompts/{name}"): "read",
    ("GET", "/workers"): "read",
    ("GET", "/static/style.css"): None,
    ("GET", "/static/live.js"): None,
    ("GET", "/login"): None,
}
# signing in to the status page takes the token in a form and answers with a redirect:
# tested in tests/integration/test_status_page.py
SIGN_IN = {("POST", "/login"), ("GET", "/logout"), ("POST", "/logout")}
# /docs is off unless `serve --docs` (its pages are open, as the schema is): tests/integration/test_edge.py


def app_routes(tmp_path) -> set[tuple[str, str]]:
    gate = Gate.connect(migrated(f"sqlite:///{tmp_path / 'routes.db'}"), upgrade=True)
    try:
        app = create_app(gate)
        return {
            (method, route.path)
            for route in flat_routes(app.routes)
            for method in getattr(route, "methods", ()) or ()
            if method != "HEAD"
        }
    finally:
        gate.close()


def flat_routes(routes) -> list:
    """The app's routes, included routers opened (FastAPI ≥ 0.160 keeps them lazily)."""
    flat = []
    for route in routes:
        nested = getattr(route, "effective_candidates", None)
        flat.extend(flat_routes(nested()) if nested else [route])
    return flat


def test_every_route_is_in_the_matrix(tmp_path):
    routes = app_routes(tmp_path)
    assert routes - set(NEEDS) - SIGN_IN == set(), "routes with no row in the auth matrix: add them to NEEDS"
    assert set(NEEDS) - routes == set(), "rows for routes the app does not have"


class Calls:
    """A concrete request for each route: real ids, valid bodies."""

    def __init__(self, gate: Gate, tmp_path):
        gate.register_dataset("d1", str(write_rule_rows(tmp_path / "d1.csv", 6)))
        gate.map_dataset("p1", "d1", "0.5")
        self.update_id = gate.submit(rules_spec("p1"), "check")
        self.own_id = self.update_id  # what cancel is called on: the submit token's own (``own``)
        self.version = gate.dataset_version("d1").id
        self.counter = 0

    def own(self, service: Service) -> None:
        """Cancel is tried on an update the submit token submitted (another's is a 403 for
        it whatever its scope allows: tests/integration/test_service_integrity.py)."""
        with service.client("submit") as ci:
            self.own_id = ci.post(
                "/v1/updates", json={"prompt": rules_spec("p1").to_config(), "source_key": "matrix-own"}
            ).json()["id"]

    def request(self, method: str, route: str) -> tuple[str, str, dict]:
        self.counter += 1
        path = (
            route.replace("{update_id}", str(self.update_id))
            .replace("{name}", "d1" if "datasets" in route else "p1")
            .replace("{version}", "0")
            .replace("{prompt}", "p1")
            .replace("{dataset}", "d1")
            .replace("{sha}", "cd" * 20)
        )
        kwargs: dict = {}
        if route == "/v1/updates/{update_id}/cancel":
            path = f"/v1/updates/{self.own_id}/cancel"
        if route == "/v1/tokens/{name}/revoke":
            path = f"/v1/tokens/nobody-{self.counter}/revoke"
        if (method, route) == ("POST", "/v1/updates"):
            kwargs["json"] = {"prompt": rules_spec("p1").to_config(), "source_key": f"matrix-{self.counter}"}
        elif (method, route) == ("POST", "/v1/datasets"):
            kwargs["json"] = {"name": "d2", "source": "https://127.0.0.1:9/none.csv"}
        elif (method, route) == ("PUT", "/v1/prompts/{prompt}/datasets/{dataset}"):
            kwargs["json"] = {"min_accuracy": "0.5"}
        elif (method, route) == ("POST", "/v1/prompts/{name}/rollback"):
            kwargs["json"] = {"reason": "matrix"}
        elif (method, route) == ("POST", "/v1/served"):
            kwargs["json"] = {"reports": []}
        elif (method, route) == ("POST", "/v1/feedback"):
            kwargs["json"] = {"events": []}
        elif (method, route) == ("POST", "/v1/sync"):
            kwargs["json"] = {"config": "datasets: {}\nprompts: {}\n", "dry_run": True}
        elif (method, route) == ("PUT", "/v1/commits/{sha}/record"):
            kwargs["json"] = {"outcome": "nothing"}
        elif (method, route) == ("POST", "/v1/tokens"):
            kwargs["json"] = {"name": f"matrix-{self.counter}", "scope": "read"}
        elif route == "/v1/datasets/{name}/preview":
            kwargs["params"] = {"rows": 0}  # counts: any reader (a holdout's rows need admin: test_dataset_upload)
        elif route == "/v1/datasets/{name}/diff":
            kwargs["params"] = {"old": self.version, "new": self.version}
        elif (method, route) == ("PUT", "/v1/datasets/{name}/rows"):
            kwargs["params"] = {"path": "data/d1.csv", "dry_run": "true"}
            kwargs["content"] = b"item_id,expected_decision,text\na,yes,x\n"
        elif route.endswith("/wait"):
            kwargs["params"] = {"timeout": 0}
        return method, path, kwargs


def call(service: Service, token: str | None, method: str, path: str, kwargs: dict) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx2.request(method, service.url + path, headers=headers, timeout=30, verify=TLS, **kwargs)


def allowed(granted: str, needed: str) -> bool:
    """read < submit < admin nest; feedback is allowed to feedback, runtime, submit and admin,
    and a feedback token is allowed nothing else; serve (load a prompt, report what is served)
    to read and runtime (for its prompts: the matrix asks for p1, the harness's runtime
    token's prompt), and a runtime token is allowed nothing else."""
    if needed == "feedback":
        return granted in ("feedback", "runtime", "submit", "admin")
    if needed == "serve":
        return granted in ("runtime", "read", "submit", "admin")
    nested = ("read", "submit", "admin")
    return granted in nested and nested.index(granted) >= nested.index(needed)


def test_auth_matrix(service, tmp_path):
    gate = Gate.connect(service.db_url)
    calls = Calls(gate, tmp_path)
    calls.own(service)
    revoked = gate.create_token("matrix-revoked", "admin")
    with service.client("admin") as admin:
        assert admin.post("/v1/tokens/matrix-revoked/revoke").json() == {"name": "matrix-revoked", "revoked": True}
    refused = []
    for (method, route), needed in sorted(NEEDS.items(), key=str):
        if needed is None:
            assert call(service, None, *calls.request(method, route)).status_code in (200, 307), route
            continue
        outcomes = {
            "none": call(service, None, *calls.request(method, route)),
            "unknown": call(service, "pgt_" + "A" * 43, *calls.request(method, route)),
            "revoked": call(service, revoked, *calls.request(method, route)),
        }
        for who in ("none", "unknown", "revoked"):
            if outcomes[who].status_code != 401:
                refused.append(f"{method} {route} with {who} token: {outcomes[who].status_code}")
        for scope in SCOPES:
            response = call(service, service.tokens[scope], *calls.request(method, route))
            want_allowed = allowed(scope, needed)
            if want_allowed and response.status_code in (401, 403):
                refused.append(f"{method} {route} refused the {scope} token: {response.text}")
            if not want_allowed and response.status_code != 403:
                refused.append(f"{method} {route} let the {scope} token through: {response.status_code}")
    assert refused == []
    # refusals say nothing that helps a guesser: an unknown and a revoked token read the same
    unknown = call(service, "pgt_" + "B" * 43, "GET", "/v1/datasets", {})
    gone = call(service, revoked, "GET", "/v1/datasets", {})
    assert unknown.json() == gone.json() == {"error": "invalid token", "exit_code": 2}
    assert unknown.headers["www-authenticate"] == "Bearer"
    signed = httpx2.post(service.url + "/login", data={"token": service.tokens["feedback"]}, verify=TLS)
    assert signed.status_code == 403 and "promptgate_session" not in signed.headers.get("set-cookie", "")
    gate.close()


def test_tokens_are_stored_as_hashes_and_listed_without_them(service):
    with service.client("admin") as admin:
        made = admin.post("/v1/tokens", json={"name": "ci-release", "scope": "submit"}).json()
        listed = admin.get("/v1/tokens").json()
    token = made["token"]
    assert token.startswith("pgt_") and len(token) >= 40
    gate = Gate.connect(service.db_url)
    stored = {t.name: t for t in gate.list_tokens()}["ci-release"]
    assert stored.token_hash != token and token not in repr(gate.list_tokens())
    assert all(token not in str(row) and "token_hash" not in row for row in listed)
    with httpx2.Client(base_url=service.url, headers={"Authorization": f"Bearer {token}"}) as ci:
        assert ci.get("/v1/datasets").status_code == 200
        assert ci.post("/v1/tokens", json={"name": "x", "scope": "admin"}).status_code == 403
    gate.close()


@pytest.fixture
def public_service(mysql_url, tmp_path):
    svc = Service(mysql_url, tmp_path, "--public-read")
    yield svc
    svc.stop()


# production's routes need a token even on a public-read gate: /serve names a provider
# declaration, and a report is recorded under the token that sent it (docs/security.md, 9)
TOKEN_EVEN_WHEN_PUBLIC = {("GET", "/v1/prompts/{name}/serve"), ("POST", "/v1/served")}


def test_public_read_opens_reads_only(public_service, tmp_path):
    gate = Gate.connect(public_service.db_url)
    calls = Calls(gate, tmp_path)
    leaks = []
    for (method, route), needed in sorted(NEEDS.items(), key=str):
        if needed is None:
            continue
        status = call(public_service, None, *calls.request(method, route)).status_code
        if (needed == "read" and (method, route) not in TOKEN_EVEN_WHEN_PUBLIC) == (status == 401):
            leaks.append(f"{method} {route} ({needed}) answered {status} with no token")
    assert leaks == []
    gate.close()


def feedback_table() -> dict[tuple[str, str], str]:
    """docs/security.md's "What a feedback token can and cannot do": each route it names
    (`METHOD /path`) → can or cannot."""
    text = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    body = re.search(r"^#### What a feedback token can and cannot do\n(.*?)(?=^`tests/)", text, re.S | re.M).group(1)
    found = {}
    for line in body.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        verdict = "can" if cells[1].startswith("**can**") else "cannot"
        for method, path in re.findall(r"`(GET|POST|PUT|DELETE) (/[^`]*)`", cells[0]):
            found[(method, path)] = verdict
    return found


def test_the_threat_models_feedback_table_says_what_the_matrix_does():
    table = feedback_table()
    assert set(table) <= set(NEEDS) | SIGN_IN, set(table) - set(NEEDS)
    assert table[("POST", "/login")] == "cannot"  # test_auth_matrix: a feedback token is refused there
    can = {route for route, needed in NEEDS.items() if needed and allowed("feedback", needed)}
    assert {route for route, verdict in table.items() if verdict == "can"} == can == {("POST", "/v1/feedback")}
    assert all(
        not allowed("feedback", NEEDS[route])
        for route, verdict in table.items()
        if route in NEEDS and verdict == "cannot"
    )
    assert len(table) >= 10
