"""The status page: server-rendered HTML (Jinja, ``gate/service/templates``), one small
script (a changing page's refresh in place), one small stylesheet. ``/`` the updates
(filter by prompt, status, commit SHA), ``/updates/ID`` an update's report (what the
pull-request comment shows, with the progress of open runs), ``/datasets`` datasets and
the bars each prompt is mapped with, ``/prompts/NAME`` a
prompt's live version and its history, ``/workers`` the fleet and the queue.

Every dataset text, item id, label and model answer is untrusted: the environment
autoescapes everything it prints and no data is ever marked safe; control and
bidi-override characters are dropped (``gate.untrusted``). The responses carry a
Content-Security-Policy allowing only this origin's one static script (``live.js``: a page
still changing fetches itself and updates in place) and no inline script, a second wall
behind the escaping.

Who may look: the read scope (``auth.page_caller``): a bearer header, or the HttpOnly,
SameSite=Strict cookie ``/login`` sets once it has checked the token, which holds a
session, never the token (``Gate.open_session``); anonymous with ``--public-read``. A read
or submit token signs in; an admin token does not (the pages only read: an admin reads
them with a read token). The cookie authorizes these pages only, never the JSON API."""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, quote, urlsplit

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from gate import __version__
from gate.contract.http_status import http_status
from gate.datasets.readability import version_readable
from gate.errors import GateError, NotFound, first_line
from gate.report.figures import bar_name, partly_paired
from gate.report.item_rows import changes, turns_of
from gate.report.judge_view import cost_line, pairwise_line, rate_line, sentinel_line, sentinel_power_line
from gate.report.markdown_filters import bar_pct, interval, num, pct, points, pvalue, ratio, run_pct, usd
from gate.states import UpdateStatus
from gate.untrusted import CONTROL, one_line
from gate.verdict.reasons import plain_reason

from . import views
from .auth import ANONYMOUS, PAGE_COOKIE, PAGE_SCOPES, AuthError, Caller, bearer, page_caller
from .dataset_access import history_shown, holdout_items_hidden, updates_shown
from .edge import origin_allowed
from .shown_errors import shown

if TYPE_CHECKING:
    from gate.records import DatasetMapping

log = logging.getLogger("promptgate.server")
router = APIRouter(include_in_schema=False)
HTML_DIR = Path(__file__).resolve().parent / "templates"
CSP = (  # script and fetch from this origin only: the one static script (live.js), no inline script
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
COOKIE_SECONDS = 12 * 3600
PREVIEW_ROWS = 20  # the dataset page's first rows of the current version
OPEN_REFRESH_SECONDS = 5
PAGE_SIZE = 50
SAMPLES = 20


# --- rendering --------------------------------------------------------------------------


def block_text(value: Any, limit: int = 2000) -> str:
    """Untrusted text kept on its lines (a model's answer): control and bidi-override
    characters dropped, cut at ``limit`` characters."""
    text = "" if value is None else str(value)
    cut = len(text) > limit
    return CONTROL.sub("", text[:limit]) + ("…" if cut else "")


def when(value: dt.datetime | None) -> str:
    return "" if value is None else f"{value:%Y-%m-%d %H:%M:%S} UTC"


def seconds(value: float | None) -> str:
    """A duration or an age in the unit a person reads it in."""
    if value is None:
        return "n/a"
    value = float(value)
    if value < 60:
        return f"{value:.1f} s" if value < 10 else f"{value:.0f} s"
    if value < 3600:
        return f"{value // 60:.0f} min {value % 60:.0f} s"
    if value < 86400:
        return f"{value // 3600:.0f} h {value % 3600 // 60:.0f} min"
    return f"{value // 86400:.0f} d {value % 86400 // 3600:.0f} h"


def short(value: Any, n: int = 12) -> str:
    return one_line(value)[:n]


@lru_cache(maxsize=1)
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(HTML_DIR)),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        pct=pct,
        run_pct=run_pct,
        interval=interval,
        pvalue=pvalue,
        partly_paired=partly_paired,
        bar_name=bar_name,
        plain_reason=plain_reason,
        ratio=ratio,
        usd=usd,
        bar_pct=bar_pct,
        points=points,
        num=num,
        text=one_line,
        block=block_text,
        when=when,
        seconds=seconds,
        short=short,
        sentinel_line=sentinel_line,
        sentinel_power_line=sentinel_power_line,
        rate_line=rate_line,
        pairwise_line=pairwise_line,
        cost_line=cost_line,
        changes=changes,
    )
    return env


def page(
    template: str, caller: Caller | None, *, status: int = 200, refresh: int | None = None, **context: Any
) -> HTMLResponse:
    context.setdefault("nav", None)
    html = (
        environment()
        .get_template(template)
        .render(
            caller=caller,
            anonymous=caller is None or caller.name == ANONYMOUS,
            refresh=refresh,
            version=__version__,
            **context,
        )
    )
    return HTMLResponse(html, status_code=status, headers=HEADERS)


def here(request: Request) -> str:
    return request.url.path + (f"?{request.url.query}" if request.url.query else "")


def guarded(request: Request, build: Callable[[Caller], HTMLResponse]) -> HTMLResponse:
    """A page for a caller with the read scope: a short HTML page linking to /login when
    refused, the error's one line when the gate refuses (no trace, no SQL)."""
    try:
        caller = page_caller(request)
    except AuthError as exc:  # a first visit is asked to sign in; a refused token is told why
        presented = bearer(request) is not None or PAGE_COOKIE in request.cookies
        return page(
            "signin.html.j2", None, status=exc.status, message=str(exc) if presented else None, next=here(request)
        )
    try:
        return build(caller)
    except GateError as exc:
        return page("error.html.j2", caller, status=http_status(exc), message=shown(exc, caller.scope, 300))
    except Exception:  # the cause in the server's log only, as the JSON API does
        log.exception("status page %s", request.url.path)
        return page("error.html.j2", caller, status=500, message="internal error")


def gate_of(request: Request):
    return request.app.state.gate


# --- the pages ----------------------------------------------------------------------------


@router.get("/static/style.css")
def stylesheet() -> Response:
    return Response(
        (HTML_DIR / "style.css").read_bytes(),
        media_type="text/css",
        headers={"Cache-Control": "max-age=300", "X-Content-Type-Options": "nosniff"},
    )


@router.get("/static/live.js")
def live_script() -> Response:
    """The pages' refresh in place (issue 49.8): a static file, as the CSP allows."""
    return Response(
        (HTML_DIR / "live.js").read_bytes(),
        media_type="text/javascript",
        headers={"Cache-Control": "max-age=300", "X-Content-Type-Options": "nosniff"},
    )


def list_filters(params) -> tuple[dict[str, Any], str | None]:
    """The updates list's query: prompt, status, sha (a prefix of hex digits), before (an
    update id: the next page). Returns (filters, the problem with them if any)."""
    prompt = (params.get("prompt") or "").strip()[:128]
    status = (params.get("status") or "").strip().upper()
    sha = (params.get("sha") or "").strip().lower()
    before = (params.get("before") or "").strip()
    filters = {"prompt": prompt, "status": status, "sha": sha, "before": None}
    if status and status not in UpdateStatus.__members__:
        return filters, f"unknown status {status[:20]!r}"
    if sha and (len(sha) > 64 or any(c not in "0123456789abcdef" for c in sha)):
        return filters, "a commit SHA is hex digits (its first few are enough)"
    if before:
        if not re.fullmatch(r"[0-9]{1,18}", before):
            return filters, "before must be an update id"
        filters["before"] = int(before)
    return filters, None


@router.get("/")
def updates_page(request: Request):
    def build(caller: Caller) -> HTMLResponse:
        filters, problem = list_filters(request.query_params)
        found = (
            []
            if problem
            else gate_of(request).list_updates(
                PAGE_SIZE,
                filters["prompt"] or None,
                status=filters["status"] or None,
                sha_prefix=filters["sha"] or None,
                before_id=filters["before"],
            )
        )
        found = updates_shown(caller.scope, found, gate_of(request))
        states = gate_of(request).rollout_states([u.id for u in found])
        rows = [views.update_row(u, states.get(u.id)) for u in found]
        older = found[-1].id if len(found) == PAGE_SIZE else None
        more = {k: v for k, v in filters.items() if v and k != "before"}
        older_url = "/?" + "&".join(f"{k}={quote(str(v))}" for k, v in {**more, "before": older}.items())
        return page(
            "updates.html.j2",
            caller,
            status=400 if problem else 200,
            refresh=OPEN_REFRESH_SECONDS if any(r["open"] for r in rows) else None,
            nav="updates",
            rows=rows,
            filters=filters,
            problem=problem,
            statuses=[s.value for s in UpdateStatus],
            older_url=older_url if older else None,
        )

    return guarded(request, build)


@router.get("/updates/{update_id}")
def update_page(request: Request, update_id: int):
    def build(caller: Caller) -> HTMLResponse:
        samples = request.query_params.get("samples", "")
        count = max(1, min(100, int(samples))) if re.fullmatch(r"[0-9]{1,4}", samples) else SAMPLES
        asked = request.query_params.get("page", "")
        page_no = min(views.MOST_ITEMS // count, int(asked)) if re.fullmatch(r"[1-9][0-9]{0,3}", asked) else 1
        if not 0 < update_id < 2**63:
            raise NotFound(f"unknown update {update_id}")
        report = gate_of(request).status(update_id, count * page_no)  # the pages before it too: deduplicated
        broken = max((r.comparison or {}).get("broken") or 0 for r in report.runs) if report.runs else 0
        if page_no > 1 and broken:  # the failing items besides the broken ones: read past the broken ones
            report = gate_of(request).status(update_id, count * page_no + min(broken, views.MOST_ITEMS))
        if caller.scope != "admin":  # a holdout's items for admin only
            report = holdout_items_hidden(report, gate_of(request))
        view = views.update_view(report, count, page_no)
        return page(
            "update.html.j2",
            caller,
            refresh=None if view["terminal"] else OPEN_REFRESH_SECONDS,
            nav="updates",
            v=view,
            samples=count,
        )

    return guarded(request, build)


@router.get("/datasets")
def datasets_page(request: Request):
    def build(caller: Caller) -> HTMLResponse:
        gate = gate_of(request)
        rows = []
        for ds, mappings in gate.list_datasets():
            try:
                version = gate.dataset_version(ds.name) if ds.current_version_id else None
            except NotFound:
                version = None
            rows.append(
                {
                    "ds": ds,
                    "source": views.dataset_source(ds),
                    "version": version,
                    "maps": [views.mapping_view(m) for m in sorted(mappings, key=lambda m: m.prompt_name)],
                }
            )
        return page("datasets.html.j2", caller, nav="datasets", rows=rows)

    return guarded(request, build)


@router.get("/datasets/{name}")
def dataset_page(request: Request, name: str):
    """One dataset: its source, its versions (v1, v2 … newest first, the current one
    marked), the prompts gated on it with their bars, and the first rows of its current
    version."""

    def build(caller: Caller) -> HTMLResponse:
        gate = gate_of(request)
        if len(name) > 128:
            raise NotFound(f"no dataset named {one_line(name, 128)!r}")
        ds, versions = gate.dataset_versions(name)
        mappings: list[DatasetMapping] = next((maps for d, maps in gate.list_datasets() if d.name == ds.name), [])
        current = next((v for v in versions if v.id == ds.current_version_id), None)
        shown = PREVIEW_ROWS if version_readable(caller.scope, current) else 0  # a holdout's rows: admin only
        preview = gate.preview_dataset(name, shown) if ds.current_version_id else None
        return page(
            "dataset.html.j2",
            caller,
            nav="datasets",
            ds=ds,
            versions=versions,
            rows_hidden=not shown,
            source=views.dataset_source(ds),
            preview=preview,
            preview_rows=PREVIEW_ROWS,
            rows=[
                {
                    "item_id": r.item_id,
                    "expected": r.expected,
                    "input": views.compact_json(r.input),
                    "turns": turns_of(r.input),  # a conversation, drawn as its turns
                }
                for r in (preview.first_rows if preview else [])
            ],
            maps=[views.mapping_view(m) for m in sorted(mappings, key=lambda m: m.prompt_name)],
        )

    return guarded(request, build)


@router.get("/prompts/{name}")
def prompt_page(request: Request, name: str):
    def build(caller: Caller) -> HTMLResponse:
        gate = gate_of(request)
        unknown = NotFound(f"no prompt named {one_line(name, 128)!r} has been mapped or submitted")
        if len(name) > 128:
            raise unknown
        try:
            live = gate.live(name)
        except NotFound:
            live = None
        history = views.history(history_shown(caller.scope, gate.history(name), gate))
        listed = updates_shown(caller.scope, gate.list_updates(20, name), gate)
        states = gate.rollout_states([u.id for u in listed])
        updates = [views.update_row(u, states.get(u.id)) for u in listed]
        mappings = gate.mappings(name)
        if not (live or history or updates or mappings):
            raise unknown
        rollouts = [views.rollout_view(r) for r in gate.rollouts(name, 10)]
        canary = next((r for r in rollouts if r["r"]["status"] == "CANARY"), None)
        return page(
            "prompt.html.j2",
            caller,
            nav="updates",
            name=name,
            live=live,
            history=history,
            by_id={r["u"].id: r for r in updates},
            updates=updates,
            maps=[{"dataset": m.dataset_name, **views.mapping_view(m)} for m in mappings],
            live_json=views.pretty_json(live.config) if live else None,
            refresh=OPEN_REFRESH_SECONDS if canary or any(r["open"] for r in updates) else None,
            served=gate.served(name) if live else None,
            canary=canary,
            rollouts=rollouts,
        )

    return guarded(request, build)


@router.get("/workers")
def workers_page(request: Request):
    def build(caller: Caller) -> HTMLResponse:
        gate = gate_of(request)
        fleet, workers, now = gate.fleet(), gate.live_workers(), views.utc_now()
        return page(
            "workers.html.j2",
            caller,
            nav="workers",
            refresh=10,
            fleet=views.fleet_view(fleet),
            workers=[views.worker_view(w, now) for w in workers],
            stale=gate.stale_processes(50),
        )

    return guarded(request, build)


# --- signing in: a session in an HttpOnly, SameSite=Strict cookie ----------------------------

NOT_HERE = (
    "a token of scope {scope} does not sign in here: the status page only reads, so sign in with a "
    "read token (promptgate token create NAME --scope read)"
)


def safe_next(target: str | None) -> str:
    """Where to go after signing in: a path on this site only (no //host, no scheme)."""
    target = (target or "/").strip()
    parts = urlsplit(target)
    if not target.startswith("/") or target.startswith(("//", "/\\")) or parts.scheme or parts.netloc:
        return "/"
    return target


def same_origin(request: Request) -> bool:
    """A form posted from this site (or by a client that sends no Origin, e.g. httpx):
    the Origin names a host the operator allowed (``serve --allowed-host``), and the very
    one the request was sent to. The Host header alone is the sender's to choose."""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    return origin_allowed(origin, request.app.state.config.allowed_hosts) and urlsplit(
        origin
    ).netloc == request.headers.get("host", "")


@router.get("/login")
def login_form(request: Request):
    return page("signin.html.j2", None, message=None, next=safe_next(request.query_params.get("next")))


@router.post("/login")
async def login(request: Request):
    try:
        form = parse_qs((await request.body()).decode("utf-8", "replace"), max_num_fields=10)
    except ValueError:  # more fields than a sign-in form has: refused, not a 500
        return page(
            "signin.html.j2", None, status=400, message="the sign-in form has a token and a next field only", next="/"
        )
    token = (form.get("token") or [""])[0].strip()
    target = safe_next((form.get("next") or ["/"])[0])
    if not same_origin(request):
        return page("signin.html.j2", None, status=403, message="sign in from this site's own form", next=target)
    found = await run_in_threadpool(request.app.state.tokens.lookup, token) if token else None
    if found is None:
        return page("signin.html.j2", None, status=401, message="invalid token", next=target)
    if found.scope not in PAGE_SCOPES:
        return page("signin.html.j2", None, status=403, message=NOT_HERE.format(scope=found.scope), next=target)
    session = await run_in_threadpool(request.app.state.gate.open_session, found, COOKIE_SECONDS)
    response = RedirectResponse(target, status_code=303, headers={"Cache-Control": "no-store"})
    response.set_cookie(
        PAGE_COOKIE,
        session,
        max_age=COOKIE_SECONDS,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@router.api_route("/logout", methods=["GET", "POST"])
def logout(request: Request):
    """Sign out: the session ends on the server too (a copy of the cookie opens nothing)."""
    session = request.cookies.get(PAGE_COOKIE)
    if session:
        try:
            request.app.state.gate.close_session(session)
        except GateError as exc:  # the cookie goes anyway; the session expires on its own
            log.warning("could not end a status-page session: %s", first_line(exc))
        request.app.state.tokens.forget(session)
    response = RedirectResponse("/login", status_code=303, headers={"Cache-Control": "no-store"})
    response.delete_cookie(PAGE_COOKIE, path="/", httponly=True, samesite="strict")
    return response
