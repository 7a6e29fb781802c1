"""The JSON API's routes for production (issue 39) under ``/v1``: what a runtime loads to
serve a prompt (``/prompts/{name}/serve``, answered 304 with no body when the caller's
``If-None-Match`` is still current), what it reports it serves (``/served``), production's
feedback on a canary rollout (``/feedback``: the feedback scope, or submit), the live
prompts (``/prompts``: drift's "live only"), a prompt's rollouts and an update's.

The runtime's routes need a token even on a ``--public-read`` server: ``/serve`` names the
provider declaration a prompt's calls go to (its URL and the name of its key's variable,
never a key), and a report is recorded under the token that sent it.

Issue 48: a runtime token (``--scope runtime --prompts a,b``) loads, reports and sends
feedback for its prompts only, each route checking the prompt it names; only it gets a
canary rollout's call key with the prompt (a read token loads as before, without it), and
feedback counts only for call ids that verify under that key."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Query, Request, Response

from gate.domain.tokens import SERVE
from gate.prompt.call_settings import NAME_RE

from .auth import ANONYMOUS, AuthError, Caller, require
from .bodies import BODY, FeedbackBody, ServedBody, gate_of, json_bytes, responses
from .edge import update_id_path

router = APIRouter()


def named(caller: Caller) -> Caller:
    if caller.scope is None or caller.name == ANONYMOUS:
        raise AuthError(401, "this route needs a token (Authorization: Bearer TOKEN), even on a public-read gate")
    return caller


def in_reach(caller: Caller, prompt: str) -> None:
    """A runtime token names only its own prompts (403 naming the prompt it asked for)."""
    if caller.prompts is not None and prompt not in caller.prompts:
        raise AuthError(403, f"this runtime token may not run prompt {prompt[:128]!r}: it is not among its --prompts")


@router.get("/prompts", summary="Every live prompt: name, version, config hash", responses=responses())
def live_prompts(request: Request, _caller: Caller = Depends(require("read"))):
    return json_bytes(gate_of(request).list_live())


@router.get(
    "/prompts/{name}/serve",
    summary="What a runtime needs to serve a prompt (conditional: If-None-Match)",
    responses={**responses(404), 304: {"description": "unchanged since the ETag sent in If-None-Match"}},
)
def serve(request: Request, name: str, caller: Caller = Depends(require(SERVE))):
    """The live version, its config and provider declaration, and a canary rollout in
    progress with its stable version (and its call key, for a runtime token that may run
    the prompt); the ETag changes when any of it does."""
    in_reach(named(caller), name)
    gate = gate_of(request)
    tag = gate.serve_tag(name)
    if request.headers.get("if-none-match") == tag:
        return Response(status_code=304, headers={"ETag": tag})
    document = gate.serve_document(name, call_key=caller.may_run(name))
    response = json_bytes(document)
    response.headers["ETag"] = document["etag"]
    return response


@router.post("/served", summary="A runtime process's report of what it serves", responses=responses(*BODY))
def served(request: Request, body: ServedBody, caller: Caller = Depends(require(SERVE))):
    """At most 100 prompts a report; recorded under the token's name (a token reports for
    its own processes only, at most 1,000 of them); a runtime token for its prompts only."""
    for report in body.reports:  # a name that is no prompt name is refused as such (400), below
        if isinstance(report, dict) and isinstance(report.get("prompt"), str) and NAME_RE.fullmatch(report["prompt"]):
            in_reach(caller, report["prompt"])
    written = gate_of(request).report_served(
        body.reports, reported_by=named(caller).name, runs=caller.prompts or frozenset()
    )
    return json_bytes({"recorded": written})


@router.post(
    "/feedback",
    summary="Production's outcomes of a canary rollout's calls",
    responses=responses(403, *BODY),
)
def feedback(request: Request, body: FeedbackBody, caller: Caller = Depends(require("feedback"))):
    """At most 1,000 events, each {prompt, version, call_id, correct}; a call id counts once.
    The feedback scope (production's token: it can do nothing else) or admin for any rollout;
    a submit token for the rollouts its own applies started (others' events: ``refused``)."""
    submitter = named(caller).name if caller.scope == "submit" else None
    answer = gate_of(request).record_feedback(
        body.events, submitter=submitter, sender=named(caller).name, prompts=caller.prompts
    )
    refused = getattr(request.app.state, "feedback_refused", None)
    if answer["refused"] and refused is not None:
        refused.inc(answer["refused"])
    return json_bytes(answer)


@router.get("/prompts/{name}/rollouts", summary="A prompt's canary rollouts, newest first", responses=responses())
def rollouts(
    request: Request, name: str, limit: int = Query(20, ge=1, le=200), _caller: Caller = Depends(require("read"))
):
    """One in progress with its figures now (the always-valid interval); decided ones with
    the figures they were decided on."""
    return json_bytes(gate_of(request).rollouts(name, limit))


@router.get("/updates/{update_id}/rollout", summary="The canary rollout an update started", responses=responses(404))
def update_rollout(
    request: Request, update_id: int = Depends(update_id_path), _caller: Caller = Depends(require("read"))
):
    return json_bytes({"rollout": gate_of(request).rollout_of_update(update_id)})
