"""What a candidate's run is compared with (the live version's answers on the same dataset
version), staged with the run at submit (``Gate.submit``).

The live version is compared as production calls it: its config with the provider
declaration it was evaluated with (pinned with it, ``version_provider``). A candidate
of the same config on another provider (applied again after the gate config moved the
provider) is a change: it is compared with the live version's answers, not with itself."""

from __future__ import annotations

from gate.calls.providers import resolve
from gate.calls.spend_caps import SpendLimits
from gate.errors import SpecError, UsageError
from gate.prompt.decision import label_key
from gate.prompt.request_keys import pin
from gate.prompt.spec import PromptSpec, parse_spec
from gate.records import LivePrompt
from gate.records.json_codec import extended, made
from gate.records.pinned import PinnedBaseline, PinnedJudge
from gate.store.live import version_provider
from gate.store.prices import find_price
from gate.store.providers import list_providers
from gate.store.runs import baseline_run, insert_run

from .spending import check_cost_bounded, run_calls

# What a run is compared with, pinned with it, by attribute of ``Pinned`` (``baseline``,
# ``baseline_note``, ``baseline_error``): the keys given, in their order.
Compared = dict[str, PinnedBaseline | str | None]


def baseline_of(
    conn,
    spec: PromptSpec,
    provider: dict | None,
    live: LivePrompt | None,
    update_id: int,
    ds,
    mapping,
    version,
    limits: SpendLimits,
    judge: PinnedJudge | None = None,
) -> tuple[Compared, int]:
    """What the candidate's run on ``version`` is compared with, pinned with it as
    ``pinned["baseline"]`` (run_id: the run whose answers are compared; update_id: the
    update that made the live version live; live_version; scored_now or same_config):
    the live version's finished answers on that very version (``baseline_run``);
    else a baseline run staged in this update to score the live version there (its
    answers reused wherever the same request was answered before; ``calls``: the most it
    calls). No live version: none. A live version that cannot be scored any more:
    ``baseline_error`` (a max_broken or max_drop bar then fails rather than go unchecked).
    ``provider``: the declaration the candidate's calls go to. With it, the most calls it adds.
    ``judge``: a graded candidate's (``gate.domain.judging.judged_baseline``): live's answers
    graded by this judge, so only a run pinned with the same judging is reused, and a
    baseline run staged is pinned with it (the judge grades live's answers there)."""
    if live is None:
        return {"baseline": None, "baseline_note": "no live version yet"}, 0
    pinned, live_provider = version_provider(conn, live.name, live.version)
    if live.config_hash == spec.config_hash and (not pinned or live_provider == provider):
        same = made(PinnedBaseline, same_config=True, live_version=live.version, update_id=live.applied_update_id)
        return {"baseline": same}, 0
    ref = {"update_id": live.applied_update_id, "live_version": live.version}
    judged = None if judge is None else (lambda p: p.judge is not None and same_judging(p.judge, judge))
    found = baseline_run(conn, spec.name, ds.id, version.id, live.config_hash, (pinned, live_provider), judged)
    if found is not None:
        return {"baseline": made(PinnedBaseline, run_id=found.id, **ref)}, 0
    try:
        live_spec = parse_spec(live.config)
        if not pinned:  # live since before providers were pinned: as production resolves it
            decl = resolve(live_spec.provider, live_spec.model, list_providers(conn))
            live_provider = decl.to_dict() if decl else None
    except (SpecError, UsageError) as exc:
        why = f"the live version cannot be scored on this dataset version: {exc}"
        return {"baseline": None, "baseline_note": why, "baseline_error": why}, 0
    price = model_price(conn, live_spec.model)
    check_cost_bounded(limits, live_spec, price, f"the live version (v{live.version}), scored alongside,")
    pinned_run = _baseline_pin(live_spec, version, mapping.min_accuracy, live.version, price, judge)
    run_id = insert_run(
        conn, update_id, ds, mapping.min_accuracy, version, pinned_run, baseline_of=(live.config, live_provider)
    )
    staged = made(PinnedBaseline, run_id=run_id, **ref, scored_now=True)
    return {"baseline": staged}, run_calls(live_spec, version.row_count)


def _baseline_pin(live_spec, version, bar, live_version: int, price, judge: PinnedJudge | None) -> dict:
    """A baseline run's pin: live's config on the version, at its price (a graded
    candidate's: with the judge that grades live's answers there)."""
    extra = {"judge": judge} if judge is not None else {}
    return extended(pin(live_spec, version, bar), live_version=live_version, price=price, **extra).to_json() or {}


def same_judging(a: PinnedJudge, b: PinnedJudge) -> bool:
    """Two runs' answers graded alike: the same judge version on the same provider, the same
    pass labels and trials (its sentinels and bars aside)."""
    passing = [None if j.passing is None else sorted(label_key(p) for p in j.passing) for j in (a, b)]
    return (a.name, a.version, a.config_hash, a.provider, a.trials) == (
        b.name,
        b.version,
        b.config_hash,
        b.provider,
        b.trials,
    ) and passing[0] == passing[1]


def model_price(conn, model: str) -> dict | None:
    """The model's price from the gate's table, pinned with the run (a later change of the
    table does not change its cost); None: no price, the cost bar is n/a."""
    price = find_price(conn, model)
    return price.to_dict() if price else None
