"""What the Action owes beyond submitting (issue 35): no success about what it did not judge,
a record of what the push job did for each commit, and one line — never a traceback and
never a required check left waiting — when the gate or GitHub cannot be reached or the token
lacks the scope.

* A changed prompt the gate has no bars for is never a pass. On a pull request whose gate
  config proposes bars for it (a new prompt arriving with its bars), it is checked on those
  bars, on datasets the gate has, and every report says so (``proposed_bars``); the merge
  push syncs the config first and judges it on the bars then in the gate (apply). Proposed
  bars only on datasets new in the pull request cannot be judged there: a failure saying
  so. With no bars anywhere: a failure whose one line says what to add.
* On the default branch (apply) the push job records per commit what it submitted, that
  nothing needed gating, or that it could not gate the commit (``Gate.record_commit``), so
  `wait --sha` answers for every commit the Action saw.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gate import gateconfig
from gate.client.session import Unreachable
from gate.errors import DatabaseError, Forbidden, GateError, SpecError

from .github import STATUS_CONTEXT
from .problems import Problem, field_line
from .workflow import inside_workspace, write_output

if TYPE_CHECKING:
    from gate.prompt.spec import PromptSpec

    from .github import ChangedFile

ActionRun = Any  # gate.action.run.ActionRun (which imports this module)

GATE_DOWN = (Unreachable, DatabaseError)  # the gate's service, or its database, did not answer
GATE_DOWN_STATUS = "the gate could not be reached"
ADMIN_FOR_PUSH = (
    "a push to the default branch syncs the gate config and applies prompts, which needs an admin token "
    "(`promptgate token create NAME --scope admin`, a secret of an environment for the default branch only)"
)


def scope_refusal(run: ActionRun, exc: GateError) -> bool:
    """A refusal for the token's scope (the service's 403: "this token's scope (submit) does
    not allow ..."): the run is blocked, saying it is the token and which scope it needs.
    False for any other error (the caller reports it against its file)."""
    if not isinstance(exc, Forbidden) or "scope" not in str(exc):
        return False
    need = ADMIN_FOR_PUSH if run.mode == "apply" else "a pull request's check needs a submit token"
    run.blocked = f"the gate-token's scope is not enough: {need}; the gate said: {exc}"
    return True


# --- a changed prompt the gate has no bars for ----------------------------------------------------


def proposed_bars(run: ActionRun, f: ChangedFile, spec: PromptSpec, text: str) -> list[dict] | None:
    """The bars to check ``spec`` on when the gate has none for it: on a pull request, the
    ones its gate config proposes on datasets the gate has; else None, with the problem
    recorded (the prompt is not judged, so the run cannot pass)."""
    line = field_line(text, "name")
    where = run.config_path or "the gate config"
    proposed = _proposed(run, spec.name) if run.mode == "check" else []
    if not proposed:
        later = " (a pull request's gate config takes effect after merge)" if run.mode == "check" else ""
        run.problems.append(
            Problem(
                f.path,
                line,
                "name",
                f"prompt {spec.name} is not gated: the gate has no bars for it; add them to {where} under "
                f"prompts: {spec.name}: [{{dataset: NAME, min_accuracy: 0.9}}]{later}",
            )
        )
        return None
    known = {ds.name for ds, _ in run.gate.list_datasets()}
    usable = [b for b in proposed if b["dataset"] in known]
    new = sorted({b["dataset"] for b in proposed} - known)
    if not usable:
        run.problems.append(
            Problem(
                f.path,
                line,
                "name",
                f"prompt {spec.name} is not judged: its bars arrive with this pull request on datasets new in it too "
                f"({', '.join(new)}); merge {where} and its datasets first, or judge it on the merge push",
            )
        )
        return None
    if new:
        run.notes.append(f"{spec.name}: proposed bars on {', '.join(new)} not judged here (new datasets).")
    return usable


def _proposed(run: ActionRun, prompt: str) -> list[dict]:
    """The bars the checkout's gate config declares for ``prompt`` (none when it cannot be
    read: its problem is the gate config's own, reported there)."""
    if run.config_path and run.proposed is None:
        try:
            cfg = gateconfig.load_config(inside_workspace(run.event.workspace, run.config_path), run.config_path)
            run.proposed = {}
            for bar in cfg.bars:
                run.proposed.setdefault(bar.prompt, []).append(
                    {"dataset": bar.dataset, "min_accuracy": str(bar.min_accuracy), "bars": bar.bars}
                )
        except (SpecError, GateError):
            run.proposed = {}
    return list((run.proposed or {}).get(prompt, ()))


# --- the push job's record ------------------------------------------------------------------------


def record_commit(run: ActionRun) -> None:
    """On apply (the default branch's push job): record what this run did for the commit."""
    if run.mode != "apply" or not run.sha:
        return
    errors = [p for p in run.problems if p.severity == "error"]
    if run.blocked or errors:
        outcome, detail = "not-gated", run.blocked or f"{errors[0].file}: {errors[0].reason}"
    else:
        outcome, detail = ("submitted" if run.ids else "nothing"), None
    try:
        run.gate.record_commit(run.sha, outcome, run.ids, detail, run.event.repository or None, run.ref)
    except GATE_DOWN:
        raise
    except GateError as exc:
        run.log.warn(f"could not record what this job did for commit {run.sha[:12]} (`wait --sha` waits on): {exc}")
        return
    run.log.say(f"prompt-gate: commit {run.sha[:12]} recorded: {outcome}")


# --- the gate or GitHub down ------------------------------------------------------------------------


def gate_down(run: ActionRun, exc: GateError) -> int:
    """The gate did not answer: an ``error`` commit status (a required check does not wait
    forever), one line, exit 2."""
    line = f"{GATE_DOWN_STATUS}: {exc}"
    run.log.command(f"::error title=prompt-gate::{line}")
    try:
        run.client.set_status(run.sha, "error", GATE_DOWN_STATUS, run.event.run_url)
    except GateError as err:
        run.log.warn(f"could not set the {STATUS_CONTEXT} status either: {err}")
    write_output(run.env, {"status": "unreachable"})
    run.log.say("prompt-gate: unreachable (exit 2)")
    return 2


def github_down(run: ActionRun, exc: GateError) -> int:
    """GitHub's API did not answer while listing the changes: one line, exit 2."""
    run.log.command(f"::error title=prompt-gate::{exc}")
    write_output(run.env, {"status": "failed"})
    return 2
