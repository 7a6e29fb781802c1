"""One API, declared once (``gate.contract.shape``): the database's ``Gate`` and the service's
``RemoteGate`` both have every method of ``GateAPI`` with the same parameters (names, kinds,
defaults, annotations) and the same return annotation; one may add only keyword-only
parameters with defaults. The HTTP service's routes under /v1 are exactly those of
``OPERATIONS``, each needing its scope; the clients' methods are exactly its operations, each
calling its route and no path it lacks. The release wait is one loop over a small interface,
and the HTTP status of an error one table, read by the server and the client."""

from __future__ import annotations

import ast
import inspect
import re
import sys
import textwrap
import time
from types import SimpleNamespace

import pytest

from gate.client.remote import RemoteGate
from gate.client.served import ServedClient
from gate.client.session import ServiceSession
from gate.contract.http_status import error_class, http_status
from gate.contract.release import EXIT_NOTHING_TO_GATE, wait_for_release
from gate.contract.shape import OPERATIONS, GateAPI, RuntimeAPI, ServiceOnly
from gate.domain import Gate
from gate.errors import (
    DatabaseError,
    DatasetError,
    Forbidden,
    GateError,
    IllegalTransition,
    MigrationError,
    NotFound,
    SpecError,
    TooLarge,
    TooSlow,
    UsageError,
    WaitTimedOut,
)
from gate.records import CommitRecord

IMPLEMENTATIONS = [Gate, RemoteGate]


def shape_methods() -> list[str]:
    return sorted(
        name for name, member in vars(GateAPI).items() if inspect.isfunction(member) and not name.startswith("_")
    )


def params(fn) -> list[inspect.Parameter]:
    return list(inspect.signature(fn).parameters.values())[1:]  # without self


def mismatches(shape_fn, impl_fn) -> list[str]:
    """How ``impl_fn``'s signature departs from the shape's (empty: it conforms)."""
    shape, impl = params(shape_fn), params(impl_fn)
    found = []
    impl_by_name = {p.name: p for p in impl}
    for i, p in enumerate(shape):
        q = impl[i] if i < len(impl) and p.kind != p.KEYWORD_ONLY else impl_by_name.get(p.name)
        if q is None or (q.name, q.kind, q.default, str(q.annotation)) != (
            p.name,
            p.kind,
            p.default,
            str(p.annotation),
        ):
            found.append(
                f"parameter {i + 1}: the shape has {p}, the implementation {q if q is not None else 'nothing'}"
            )
    shape_names = {p.name for p in shape}
    for q in impl:
        if q.name not in shape_names and (q.kind != q.KEYWORD_ONLY or q.default is q.empty):
            found.append(f"extra parameter {q} must be keyword-only with a default")
    returns = (str(inspect.signature(shape_fn).return_annotation), str(inspect.signature(impl_fn).return_annotation))
    if returns[0] != returns[1]:
        found.append(f"returns {returns[1]}, the shape {returns[0]}")
    return found


def test_the_shape_lists_what_the_cli_and_the_action_call():
    assert {
        "submit",
        "status",
        "wait",
        "wait_for_sha",
        "cancel",
        "live",
        "history",
        "rollback",
        "list_datasets",
        "register_dataset",
        "refresh_dataset",
        "dataset_version",
        "map_dataset",
        "unmap_dataset",
        "prices",
        "live_workers",
        "list_updates",
        "updates_for_sha",
    } <= set(shape_methods())


@pytest.mark.parametrize("impl", IMPLEMENTATIONS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", shape_methods())
def test_gate_and_remote_gate_have_the_shape(impl, name):
    member = vars(impl).get(name) or next((vars(base)[name] for base in impl.__mro__ if name in vars(base)), None)
    assert inspect.isfunction(member), f"{impl.__name__} has no method {name} (gate/contract/shape.py: GateAPI.{name})"
    assert mismatches(getattr(GateAPI, name), member) == [], f"{impl.__name__}.{name}"


def test_the_conformance_check_sees_a_departure():
    class Drifted:
        def list_updates(self, limit: int = 20, prompt_name: str | None = None) -> list[Update]: ...  # noqa: F821

        def cancel(self, update_id: int, reason: str = "cancelled by a user", owner: str | None = None) -> None: ...

        def history(self, name: str, limit: int = 20) -> list[dict]: ...

    assert mismatches(GateAPI.list_updates, Drifted.list_updates) == [
        "parameter 3: the shape has status: 'str | None' = None, the implementation nothing",
        "parameter 4: the shape has sha_prefix: 'str | None' = None, the implementation nothing",
        "parameter 5: the shape has before_id: 'int | None' = None, the implementation nothing",
    ]
    assert mismatches(GateAPI.cancel, Drifted.cancel) == [
        "extra parameter owner: 'str | None' = None must be keyword-only with a default"
    ]
    assert mismatches(GateAPI.history, Drifted.history) == [
        "parameter 2: the shape has limit: 'int' = 50, the implementation limit: 'int' = 20"
    ]


# --- one declaration: the routes and the clients against OPERATIONS --------------------------------

CLIENTS = {GateAPI: RemoteGate, ServiceOnly: RemoteGate, RuntimeAPI: ServedClient}
SESSION = set(vars(ServiceSession))  # the connection's own (close): declared once, on RemoteGate's side


def declared_routes() -> dict[tuple[str, str], set[str]]:
    """(verb, path) → the scopes the operations served by it declare."""
    routes: dict[tuple[str, str], set[str]] = {}
    for op in OPERATIONS:
        if op.path is not None:
            routes.setdefault((op.verb, op.path), set()).add(op.scope)
    return routes


def flat_routes(routes) -> list:
    """The app's routes, included routers opened (FastAPI ≥ 0.160 keeps them lazily)."""
    flat = []
    for route in routes:
        nested = getattr(route, "effective_candidates", None)
        flat.extend(flat_routes(nested()) if nested else [route])
    return flat


def scope_of(dependant) -> str | None:
    """The scope a route's ``Depends(require(scope))`` asks (``auth.require`` names it)."""
    for dep in dependant.dependencies:
        name = getattr(dep.call, "__name__", "")
        if name.startswith("require_"):
            return name.removeprefix("require_")
        found = scope_of(dep)
        if found:
            return found
    return None


def app_routes() -> dict[tuple[str, str], str | None]:
    """The HTTP service's JSON routes (under /v1): (verb, path) → the scope it requires."""
    from gate.service.app import create_app

    app = create_app(SimpleNamespace(engine=None, settings=None))  # routes only: no request is served
    return {
        (verb, route.path): scope_of(route.dependant)
        for route in flat_routes(app.routes)
        if route.path.startswith("/v1/")
        for verb in route.methods - {"HEAD"}
    }


def template(path: str) -> str:
    return re.sub(r"\{[^}]*\}", "{}", path)


def path_text(node: ast.expr) -> str | None:
    """A literal path, an f-string's with each placeholder as {}."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def methods_of(cls) -> dict[str, object]:
    """Every method of a client class and its bases (the nearest definition wins)."""
    found: dict[str, object] = {}
    for base in reversed(cls.__mro__[:-1]):
        found.update({n: m for n, m in vars(base).items() if inspect.isfunction(m)})
    return found


def paths_called(cls, name: str, seen: frozenset = frozenset()) -> set[tuple[str, str]]:
    """(verb, path template) of every request ``cls.name`` makes: its ``_call`` and
    ``http.request`` calls, and those of the private helpers it calls (the public methods it
    calls are operations of their own)."""
    fn = methods_of(cls)[name]
    if inspect.unwrap(fn) is not fn:  # a delegate: the part's method, read in the part's class
        fn = inspect.unwrap(fn)
        cls = getattr(sys.modules[fn.__module__], fn.__qualname__.split(".")[0])
    methods = methods_of(cls)
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))
    named = {  # path = f"..." before the call
        node.targets[0].id: node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
    }
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        attr = node.func.attr
        if attr in ("_call", "request") and len(node.args) >= 2:
            arg = node.args[1]
            verb, path = node.args[0], path_text(named.get(arg.id, arg) if isinstance(arg, ast.Name) else arg)
            if isinstance(verb, ast.Constant) and path is not None:
                found.add((verb.value, template(path)))
        elif attr.startswith("_") and attr in methods and attr not in ("_call", "_answer") and attr not in seen:
            found |= paths_called(cls, attr, seen | {name})
    return found


def public_methods(cls) -> set[str]:
    return {n for n in methods_of(cls) if not n.startswith("_")}


def test_each_operation_is_declared_once_and_names_a_protocol_method():
    names = [op.name for op in OPERATIONS]
    assert sorted(n for n in set(names) if names.count(n) > 1) == []
    for op in OPERATIONS:
        assert (op.verb is None) == (op.path is None) == (op.scope is None), op
        if op.api is not None:
            assert inspect.isfunction(vars(op.api).get(op.name)), f"{op.api.__name__} has no {op.name}"
    for api in CLIENTS:
        declared = {op.name for op in OPERATIONS if op.api is api}
        assert set(n for n, m in vars(api).items() if inspect.isfunction(m) and not n.startswith("_")) == declared


def test_the_http_routes_are_exactly_the_declared_ones_with_their_scopes():
    declared, routes = declared_routes(), app_routes()
    assert sorted(set(declared) - set(routes)) == [], "declared operations the service has no route for"
    assert sorted(set(routes) - set(declared)) == [], "routes gate/contract/shape.py OPERATIONS does not declare"
    wrong = {r: (declared[r], routes[r]) for r in declared if declared[r] != {routes[r]}}
    assert wrong == {}, "(verb, path): (the scopes declared, the scope the route requires)"


@pytest.mark.parametrize("api", list(CLIENTS), ids=lambda api: api.__name__)
def test_each_client_has_exactly_the_declared_methods_with_their_parameters(api):
    client = CLIENTS[api]
    own = {op.name for op in OPERATIONS if op.api is not None and CLIENTS[op.api] is client}
    extra = public_methods(client) - own - (SESSION if client is ServedClient else set())
    assert sorted(extra) == [], f"{client.__name__} methods gate/contract/shape.py OPERATIONS does not declare"
    for op in OPERATIONS:
        if op.api is api:
            member = methods_of(client).get(op.name)
            assert member is not None, f"{client.__name__} has no {op.name} ({api.__name__}.{op.name})"
            assert mismatches(getattr(api, op.name), member) == [], f"{client.__name__}.{op.name}"


@pytest.mark.parametrize("op", [op for op in OPERATIONS if op.api is not None], ids=lambda op: op.name)
def test_each_client_method_calls_its_route_and_no_undeclared_path(op):
    client = CLIENTS[op.api]
    if op.name not in methods_of(client) or op.name in SESSION:
        assert op.path is None, f"{client.__name__}.{op.name} is not a request of the client"
        return
    called = paths_called(client, op.name)
    known = {(verb, template(path)) for verb, path in declared_routes()}
    assert sorted(called - known) == [], f"{client.__name__}.{op.name} calls paths OPERATIONS does not declare"
    if op.path is not None:  # (one with none is composed of other operations: wait_for_sha long-polls as wait)
        assert (op.verb, template(op.path)) in called, f"{client.__name__}.{op.name} never calls {op.verb} {op.path}"


def test_the_declaration_checks_see_a_route_and_a_path_that_drifted():
    class Drifted(RemoteGate):
        def status(self, update_id: int, failures: int = 5):
            return self._call("GET", f"/v1/update/{int(update_id)}")

    assert paths_called(Drifted, "status") == {("GET", "/v1/update/{}")}
    assert paths_called(RemoteGate, "wait") == {("GET", "/v1/updates/{}/wait")}  # through _long_poll
    assert paths_called(RemoteGate, "upload_rows") == {("PUT", "/v1/datasets/{}/rows")}  # RemoteDatasets._put_rows
    assert paths_called(ServedClient, "serve_document") == {("GET", "/v1/prompts/{}/serve")}
    assert app_routes()[("POST", "/v1/updates/{update_id}/cancel")] == "submit"


# --- one status table ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "error, status, raised",
    [
        (NotFound("x"), 404, NotFound),
        (IllegalTransition("x"), 409, IllegalTransition),
        (Forbidden("x"), 403, Forbidden),
        (TooLarge("x"), 413, TooLarge),
        (TooSlow("x"), 408, TooSlow),
        (DatabaseError("x"), 503, DatabaseError),
        (MigrationError("x"), 503, DatabaseError),
        (UsageError("x"), 400, UsageError),
        (SpecError("f", None, "x"), 400, UsageError),
        (DatasetError("x"), 400, UsageError),
        (GateError("x"), 400, UsageError),
    ],
)
def test_the_server_answers_an_error_with_a_status_the_client_reads_back(error, status, raised):
    assert http_status(error) == status
    assert error_class(status) is raised
    assert error.exit_code == raised("x").exit_code


def test_a_status_in_no_row_is_a_plain_gate_error():
    assert error_class(401) is GateError and error_class(429) is GateError


# --- one release wait ------------------------------------------------------------------------------


class Commit:
    """A ReleaseSource: the commit's update appears after ``appears`` look-ups, and ends
    after ``ends`` status reads."""

    def __init__(self, appears: int = 0, ends: int = 2, record=None, recorded_after: int = 0):
        self.lookups = self.reads = self.record_reads = 0
        self.appears, self.ends = appears, ends
        self.record, self.recorded_after = record, recorded_after

    def commit_record(self, sha):
        self.record_reads += 1
        return self.record if self.record_reads > self.recorded_after else None

    def updates_for_sha(self, sha, prompt_name=None, mode=None):
        self.lookups += 1
        return [SimpleNamespace(id=7, prompt_name="p", mode="apply")] if self.lookups > self.appears else []

    def status(self, update_id, failures=5):
        self.reads += 1
        done = self.reads >= self.ends
        return SimpleNamespace(terminal=done, exit_code=0 if done else 3, update=SimpleNamespace(id=update_id))


def test_the_release_wait_watches_an_open_update_instead_of_sleeping():
    commit, watched = Commit(appears=1, ends=3), []
    code, reports = wait_for_release(
        commit, "ab" * 20, None, 5, 0.01, "apply", None, watch=lambda report, deadline: watched.append(report.update.id)
    )
    assert (code, len(reports), watched, commit.lookups) == (0, 1, [7, 7], 4)


def test_the_release_wait_gives_up_when_no_update_appears_in_time():
    """A timeout that passes before anything answers for the commit is a timeout: exit 3."""
    started = time.monotonic()
    with pytest.raises(WaitTimedOut, match="no apply-mode update was submitted for commit") as caught:
        wait_for_release(Commit(appears=10**6), "ab" * 20, None, 0.2, 0.05, "apply", None)
    assert 0.2 <= time.monotonic() - started < 1.0 and caught.value.exit_code == 3


def record(outcome, ids=(), detail=None):
    return CommitRecord("ab" * 20, outcome, tuple(ids), detail, recorded_by="push")


def test_without_a_timeout_the_release_wait_waits_for_the_push_jobs_record():
    """Issue 35.2: `wait --sha` without --timeout exited 2 at once; it waits until the commit
    has an apply-mode update or the push job's record: nothing to gate is its own code, 4."""
    said = []
    commit = Commit(appears=10**6, record=record("nothing"), recorded_after=5)
    code, reports = wait_for_release(commit, "ab" * 20, None, None, 0.01, "apply", said.append)
    assert (code, reports, commit.record_reads) == (EXIT_NOTHING_TO_GATE, [], 6)
    assert said == [
        f"commit {'ab' * 6}: nothing to gate: the Action's push job found no prompt change (recorded by push)"
    ]


def test_a_commit_the_push_job_could_not_gate_fails_the_release_wait():
    said = []
    commit = Commit(appears=10**6, record=record("not-gated", detail="prompts/x.yaml: prompt x is not gated"))
    assert wait_for_release(commit, "ab" * 20, None, None, 0.01, "apply", said.append) == (2, [])
    assert said == [f"commit {'ab' * 6}: not gated: prompts/x.yaml: prompt x is not gated (recorded by push)"]
    with_apply = Commit(appears=0, ends=1, record=record("not-gated", [7], "y is not gated"))
    code, reports = wait_for_release(with_apply, "ab" * 20, None, None, 0.01, "apply", None)
    assert (code, len(reports)) == (2, 1)  # its apply passed; the prompt it could not gate fails the release


def test_a_prompt_the_commit_did_not_change_has_nothing_to_gate():
    commit = Commit(appears=10**6, record=record("submitted", [7]))
    assert wait_for_release(commit, "ab" * 20, "other", None, 0.01, "apply", None) == (EXIT_NOTHING_TO_GATE, [])


def test_a_check_mode_wait_reads_no_record():
    commit = Commit(appears=10**6, record=record("nothing"))
    with pytest.raises(WaitTimedOut):
        wait_for_release(commit, "ab" * 20, None, 0.1, 0.02, "check", None)
    assert commit.record_reads == 0
