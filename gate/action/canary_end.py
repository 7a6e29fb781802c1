"""A canary's end on GitHub (issue 46 point 7). The push job set the commit's ``prompt-gate``
status to success and commented ✅ applied; when production then rolls the canary back (or
it ends undecided), the gate, which holds no GitHub credential, cannot say so itself. The
next Action run that looks does, with its own token:

* ``mode: wait`` (a release job, ``publish_canary_end``): once the commit's updates are
  answered and one's canary ended rolled back or undecided, the commit's ``prompt-gate``
  status becomes a failure saying so and a commit comment carries the report (the push
  job's comment is a commit comment too: a new one, as each push's);
* ``mode: drift`` (scheduled, ``drift_canary_ends``): for each prompt out of step with live
  whose latest rollout ended so, the ``prompt-gate`` status of the commit that applied it
  (drift writes no comment).

A GitHub error is a warning: the release's exit code (1) says it all the same."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gate.errors import GateError
from gate.report.canary import ENDED_BADLY
from gate.report.update import UpdateReport
from gate.settings import public_url

from .inputs import ActionOptions
from .outcome import commit_state
from .workflow import ActionLog, Event


def ended_badly(reports: Sequence[UpdateReport]) -> list[UpdateReport]:
    """The APPLIED updates whose canary was rolled back or ended undecided."""
    return [r for r in reports if r.outcome in ENDED_BADLY]


def _client(env: Mapping[str, str], options: ActionOptions, event: Event, factory: Callable[..., Any] | None):
    from .github import GitHubClient  # PyGithub: only once there is something to say

    token = options.github_token or env.get("GITHUB_TOKEN", "")
    return (factory or GitHubClient)(token, event.repository, event.api_url)


def publish_canary_end(
    env: Mapping[str, str],
    options: ActionOptions,
    reports: Sequence[UpdateReport],
    log: ActionLog,
    client=None,
    client_factory: Callable[..., Any] | None = None,
) -> None:
    """``mode: wait``: the commit's status and a comment, when a canary of its updates ended
    rolled back or undecided (nothing otherwise: the push job's status stands)."""
    back = ended_badly(reports)
    if not back:
        return
    from gate.report.markdown import render_markdown

    event = Event.from_env(env)
    state, description = commit_state(reports, [], options.timeout)
    try:
        client = client or _client(env, options, event, client_factory)
        client.set_status(event.sha, state, description, event.run_url)
        log.say(f"commit {event.sha[:12]}: prompt-gate status {state}: {description}")
        if options.comment:
            context = {
                "event": "push",
                "sha": event.sha,
                "mode": "apply",
                "run_url": event.run_url,
                "public_url": public_url(),
            }
            client.commit_comment(event.sha, render_markdown(reports, context=context))
            log.say(f"report comment added to commit {event.sha[:12]}")
    except GateError as exc:
        log.warn(f"could not say on GitHub that the canary was rolled back: {exc}")


def drift_canary_ends(gate, prompts: Sequence[str]) -> list[UpdateReport]:
    """The reports of the updates whose canary, the latest rollout of one of ``prompts``,
    ended rolled back or undecided (one read per prompt; a report per such update)."""
    found = []
    for name in prompts:
        latest = next(iter(gate.rollouts(name, 1)), None)
        if latest is not None and latest["status"] in ENDED_BADLY:
            found.append(gate.status(latest["update_id"], failures=0))
    return ended_badly(found)


def mark_drift_canary_ends(gate, prompts: Sequence[str], log: ActionLog, client, options: ActionOptions) -> None:
    """``mode: drift``: the ``prompt-gate`` status of each commit whose apply production
    rolled back since (``drift_canary_ends``)."""
    for report in drift_canary_ends(gate, prompts):
        sha = (report.update.source or {}).get("sha")
        if not isinstance(sha, str) or not sha:
            continue
        state, description = commit_state([report], [], options.timeout)
        try:
            client.set_status(sha, state, description)
            log.say(f"commit {sha[:12]}: prompt-gate status {state}: {description}")
        except GateError as exc:
            log.warn(f"could not say on GitHub that update {report.update.id}'s canary was rolled back: {exc}")
