"""What a verdict stands on, and when an answer already paid for may stand in for a call.

A run pins (``pin``) everything its verdict depends on: the dataset version and its hash,
the bar, the model, the candidate's config hash, the decision rule and labels, and the
call-path version (this package's version and the revision of the call path below).

An item's answer is reused when the very same request was answered before (MATCH or
MISMATCH, never ERROR): the request key (``request_key``) is the hash of the request body
the provider would receive (model, params, rendered messages with the conversation a
``history`` entry inserts, response format, tools with their descriptions and schemas,
tool_choice, parallel_tool_calls), the decision rule and labels that read the answer,
the provider's endpoint and the call-path version. So a merged pull request whose check
passed makes no call when it is applied, an unchanged prompt re-run costs nothing, a
changed template calls every item again and one changed dataset row calls one item.
``submit --no-reuse`` forces fresh calls (a model at temperature > 0 answers differently
each time: a team may want every verdict fresh).

With ``trials: N`` each trial is a distinct answer kept under its own key
(``trial_keys``): trial 1 under the request's key, trial t > 1 under the hash of that key
and t. So an answer is never replayed as another trial of the same item, a prompt with
one trial keeps the key it always had (answers kept before trials existed stay reusable),
and raising N from 3 to 5 calls trials 4 and 5 only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from gate import __version__
from gate.kinds import kind_of
from gate.records import DatasetVersion
from gate.records.json_codec import made
from gate.records.pinned import Pinned, PinnedTrials

from .answer_schema import response_schema
from .spec import PromptSpec, request_kwargs

# Bump when rendering, the request or the reading of an answer changes meaning: answers
# kept under the old revision are then never reused.
CALL_PATH_REVISION = 1
CALL_PATH_VERSION = f"{__version__}/call-path-{CALL_PATH_REVISION}"


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _canonical(value: Any) -> bytes:
    """``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``, UTF-8:
    one encoder for every call (``json.dumps`` with options builds one per call)."""
    return _CANONICAL.encode(value).encode()


def decision_rule(spec: PromptSpec) -> dict[str, Any]:
    """How the answer is read: the rule and the labels it reads, and whether every answer
    is checked against a strict schema first (gate.prompt.answer_schema; only then, so the
    keys of every other prompt stay what they were)."""
    rule = spec.decision.to_dict()
    if response_schema(spec.response_format) is not None:
        rule["answer_schema"] = "checked"
    return {**rule, "labels": list(spec.labels)} if kind_of(spec.decision).pins_labels(spec.decision) else rule


def _request(spec: PromptSpec, messages: Any, base_url: str | None) -> dict[str, Any]:
    return {
        "call_path": CALL_PATH_VERSION,
        "endpoint": base_url or "default",
        "request": request_kwargs(spec, messages),
        "decision": kind_of(spec.decision).keyed_rule(decision_rule(spec)),
    }


def request_key(spec: PromptSpec, messages: Sequence[Mapping[str, str]], base_url: str | None) -> str:
    """The key under which this call's answer is kept and found again: the SHA-256 of the
    canonical JSON of ``_request``. Everything in it but the messages is the same for every
    item of a run, so its canonical text before and after them is hashed once per prompt
    and endpoint (``_KeyPrefix``), and an item hashes only its messages' canonical JSON:
    the same bytes, a third of the CPU (bench/README.md, the database path)."""
    prefix = _key_prefix(spec, base_url)
    if prefix is None:
        return hashlib.sha256(_canonical(_request(spec, list(messages), base_url))).hexdigest()
    digest = prefix.head.copy()
    digest.update(_canonical(list(messages)))
    digest.update(prefix.tail)
    return digest.hexdigest()


_MARK = "\ue000promptgate-messages\ue001"
_PREFIXES: dict[tuple[int, str | None], _KeyPrefix] = {}


class _KeyPrefix:
    """A prompt's canonical request text around its messages: ``head`` (a SHA-256 fed with
    the text before them) and ``tail`` (the bytes after)."""

    def __init__(self, spec: PromptSpec, head: bytes, tail: bytes):
        self.spec = spec  # held, so the id it is cached under stays this spec's
        self.head = hashlib.sha256(head)
        self.tail = tail


def _key_prefix(spec: PromptSpec, base_url: str | None) -> _KeyPrefix | None:
    """The cached text around the messages, or None when the messages' place cannot be
    told apart (the marker found other than once: the caller hashes the whole text)."""
    cached = _PREFIXES.get((id(spec), base_url))
    if cached is not None and cached.spec is spec:
        return cached
    text = _canonical(_request(spec, _MARK, base_url))
    marker = _canonical(_MARK)
    if text.count(marker) != 1:
        return None
    head, tail = text.split(marker)
    if len(_PREFIXES) >= 256:
        _PREFIXES.clear()
    _PREFIXES[(id(spec), base_url)] = made = _KeyPrefix(spec, head, tail)
    return made


def trial_keys(spec: PromptSpec, messages: Sequence[Mapping[str, str]], base_url: str | None) -> tuple[str, ...]:
    """The keys of an item's trials, trial 1 first (one key, the request's, for one trial)."""
    first = request_key(spec, messages, base_url)
    return (first,) + tuple(
        hashlib.sha256(_canonical({"request_key": first, "trial": t})).hexdigest() for t in range(2, spec.trials + 1)
    )


def pin(spec: PromptSpec, version: DatasetVersion, bar: Decimal) -> Pinned:
    """What a run's verdict stands on, stored with the run: the first keys of its pin
    (``Gate.submit`` extends it, ``gate.records.json_codec.extended``)."""
    rule = spec.rule  # gate.prompt.trials.TrialRule.pinned's keys, in its order
    trials = {"trials": made(PinnedTrials, n=rule.trials, rule=rule.rule, k=rule.k, needed=rule.needed)}
    return made(
        Pinned,
        dataset_version_id=version.id,
        content_hash=version.content_hash,
        rows=version.row_count,
        bar=str(bar),
        model=spec.model,
        config_hash=spec.config_hash,
        decision=decision_rule(spec),
        call_path=CALL_PATH_VERSION,
        **(trials if spec.trials > 1 else {}),
    )
