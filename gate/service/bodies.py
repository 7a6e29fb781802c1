"""What the API's routes accept and answer, typed for its OpenAPI document.

Request bodies are pydantic models, so the schema says what each field is; a field of
the wrong kind is refused by a validator with the very line the route said before the
models (``reason must be text of at most 2000 characters``): the app's error boundary
prints a validator's message alone (``app.bad_request``). ``responses(...)`` lists a
route's error statuses, each with the one error body every refusal has. ``field_text`` and
``field_flag`` read a field of a body no model types (a YAML submission's query, a sync's
JSON); ``json_bytes`` is every route's answer, encoded by ``gate.contract.codec``."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import Request, Response
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, WithJsonSchema, model_validator

from gate.contract.codec import encode
from gate.errors import UsageError
from gate.untrusted import CONTROL, LINE_BREAKS

from .dataset_access import scrubbed


class ErrorBody(BaseModel):
    """Every refusal: one line, and the exit code the CLI would give it."""

    error: str
    exit_code: int


WHY = {
    400: "refused input (one line), or a Host the server does not answer for",
    401: "no token, or not a live one",
    403: "the token's scope does not allow it",
    404: "no such thing (an id outside its column's range included)",
    408: "the request body did not arrive in time",
    409: "a state change refused, or lost to a race",
    413: "the request body is over the limit",
    429: "this token holds as many long-polls as it may (Retry-After)",
    503: "the database is unreachable or behind its migrations",
}
COMMON = (400, 401, 503)
BODY = (408, 413)


def responses(*codes: int) -> dict:
    """``responses=`` for a route: the common statuses and ``codes``, each with ErrorBody."""
    return {code: {"model": ErrorBody, "description": WHY[code]} for code in sorted({*COMMON, *codes})}


def _text(limit: int):
    def check(value: Any, info: ValidationInfo) -> Any:
        if value is not None and (not isinstance(value, str) or len(value) > limit):
            raise ValueError(f"{info.field_name} must be text of at most {limit} characters")
        if value is not None and not is_one_line(value):
            raise ValueError(one_line_refusal(str(info.field_name)))
        return value

    return BeforeValidator(check)


def is_one_line(text: str) -> bool:
    """No line break, control or bidi-override character (``gate.untrusted``'s sets): what a
    request's free text (a rollback's reason and actor, a name) is stored as. Printed later
    in a terminal, an Actions log, the history or a page, such a character acts on what
    shows it; refused at the route rather than stored raw."""
    return not (CONTROL.search(text) or LINE_BREAKS.search(text))


def one_line_refusal(key: str) -> str:
    return f"{key} must be one line of text, without control characters"


def _version(value: Any, info: ValidationInfo) -> Any:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"{info.field_name} must be a version number")
    return value


# Text of at most N characters, or None (each spelled out: a type checker reads no call as a type)
Text16 = Annotated[Annotated[str, Field(max_length=16)] | None, _text(16)]
Text64 = Annotated[Annotated[str, Field(max_length=64)] | None, _text(64)]
Text100 = Annotated[Annotated[str, Field(max_length=100)] | None, _text(100)]
Text128 = Annotated[Annotated[str, Field(max_length=128)] | None, _text(128)]
Text191 = Annotated[Annotated[str, Field(max_length=191)] | None, _text(191)]
Text255 = Annotated[Annotated[str, Field(max_length=255)] | None, _text(255)]
Text500 = Annotated[Annotated[str, Field(max_length=500)] | None, _text(500)]
Text2000 = Annotated[Annotated[str, Field(max_length=2000)] | None, _text(2000)]


Version = Annotated[Annotated[int, Field(ge=1)] | None, BeforeValidator(_version)]


def _flag(value: Any, info: ValidationInfo) -> Any:
    if isinstance(value, bool) or (isinstance(value, str) and value.lower() in FLAG_WORDS):
        return value
    raise ValueError(f"{info.field_name} must be true or false")


FLAG_WORDS = ("true", "1", "yes", "false", "0", "no")
Flag = Annotated[
    bool | str,
    BeforeValidator(_flag),
    WithJsonSchema(
        {"anyOf": [{"type": "boolean"}, {"type": "string", "enum": ["true", "false", "1", "0", "yes", "no"]}]}
    ),
]
Bar = Annotated[
    Any,
    WithJsonSchema(
        {
            "anyOf": [{"type": "number"}, {"type": "string"}],
            "description": 'a fraction (0.8), a percentage ("80%") or ...',
        }
    ),
]


class Body(BaseModel):
    """A JSON object; fields not named here are ignored (as before the models)."""

    model_config = ConfigDict(extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def an_object(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError("the request body must be a JSON object")
        return data


class RollbackBody(Body):
    reason: Text2000 = Field(None, description="why (required): the history keeps it")
    to: Version = Field(None, description="the version to restore (default: the one before the live one)")
    seen_version: Version = Field(None, description="the live version the caller saw (default: the one read now)")
    actor: Text100 = Field(None, description="who, beside the token's name")


class CommitRecordBody(Body):
    outcome: Text16 = Field(None, description="submitted, nothing (nothing needed gating) or not-gated")
    update_ids: list[Annotated[int, Field(ge=1)]] | None = Field(
        None, max_length=1000, description="the commit's apply-mode updates the push job submitted"
    )
    detail: Text500 = Field(None, description="not-gated: why, in one line")
    repo: Text191 = None
    ref: Text191 = None


class DatasetBody(Body):
    name: Text128 = Field(None, description="the dataset's name (required)")
    source: Text2000 = Field(None, description="where its rows are read from (required)")
    id_column: Text255 = None
    label_column: Text255 = None


class SyncBody(Body):
    config: str = Field(description="the gate config's YAML text")
    path: Text255 = Field(None, description="its name in messages")
    dry_run: Flag = Field(False, description="only say what would change (needs submit, not admin)")
    files: list[Annotated[str, Field(max_length=128)]] | None = Field(
        None,
        max_length=1000,
        description="the file datasets whose rows the client uploaded (PUT /v1/datasets/NAME/rows)",
    )
    commit: Text64 = Field(
        None,
        description="the commit the config was read at (full hex id): recorded with each "
        "break it newly accepts (accept_breaks)",
    )

    @model_validator(mode="before")
    @classmethod
    def config_given(cls, data: Any) -> Any:
        if isinstance(data, dict) and not isinstance(data.get("config"), str):
            raise ValueError("give the gate config's YAML text as config")
        return data


class MappingBody(Body):
    min_accuracy: Bar = Field(description="the accuracy bar")
    bars: Annotated[dict[str, Any] | None, WithJsonSchema({"type": "object"})] = Field(
        None, description="further bars (gate.verdict.bars.EXTRA_KEYS)"
    )

    @model_validator(mode="before")
    @classmethod
    def bars_given(cls, data: Any) -> Any:
        if isinstance(data, dict):
            if "min_accuracy" not in data:
                raise ValueError('give min_accuracy (and any further bars under "bars")')
            if data.get("bars") is not None and not isinstance(data["bars"], dict):
                raise ValueError("bars must be an object")
        return data


class TokenBody(Body):
    name: Text128 = Field(None, description="the token's name (required)")
    scope: Text16 = Field(None, description="read, submit, admin, feedback or runtime")
    prompts: list[Text128] | None = Field(
        None, max_length=200, description="a runtime token's prompts (required for runtime, refused for the others)"
    )


class ServedBody(Body):
    reports: list[dict[str, Any]] = Field(
        max_length=100, description="one per prompt the process serves (gate.domain.served.checked_report)"
    )


class FeedbackBody(Body):
    events: list[dict[str, Any]] = Field(
        max_length=1000,
        description="each {prompt, version, call_id, correct}: the version that answered, the result's "
        "call_id, whether the answer was right",
    )


def _query(name: str, schema: dict) -> dict:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": "with a YAML body only (a JSON body carries it as a field)",
    }


SUBMIT_BODY = {
    "parameters": [
        _query("mode", {"type": "string", "enum": ["check", "apply"]}),
        *(_query(k, {"type": "string", "maxLength": 255}) for k in ("source_key", "sha", "repo", "path")),
        _query("pr", {"type": "integer", "minimum": 1, "maximum": 2**31 - 1}),
        _query("reuse", {"type": "boolean"}),
        _query("full", {"type": "boolean"}),
        _query("override_rollback", {"type": "boolean"}),
        _query("accept_unjudged", {"type": "boolean"}),
    ],
    "requestBody": {
        "required": True,
        "content": {
            "application/yaml": {
                "schema": {
                    "type": "string",
                    "description": "the prompt file (mode, source_key, sha, "
                    "reuse, full, repo, pr, path as query parameters)",
                }
            },
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["prompt"],
                    "properties": {
                        "prompt": {
                            "anyOf": [{"type": "string"}, {"type": "object"}],
                            "description": "the prompt file as YAML text or as an object",
                        },
                        "mode": {"type": "string", "enum": ["check", "apply"]},
                        "source_key": {"type": "string", "maxLength": 255},
                        "sha": {"type": "string", "maxLength": 255},
                        "reuse": {"type": "boolean"},
                        "full": {"type": "boolean"},
                        "override_rollback": {
                            "type": "boolean",
                            "description": "apply a config a rollback moved away from (admin)",
                        },
                        "accept_unjudged": {
                            "type": "boolean",
                            "description": "apply, not judged, the first version of a compared prompt, which no "
                            "bar can judge (admin, apply mode)",
                        },
                        "proposed_bars": {
                            "type": "array",
                            "maxItems": 50,
                            "items": {"type": "object"},
                            "description": "a check of a prompt the gate does not gate yet, on the bars its pull "
                            "request's gate config proposes: [{dataset, min_accuracy, bars}]",
                        },
                        "repo": {"type": "string", "maxLength": 255},
                        "pr": {"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
                        "path": {"type": "string", "maxLength": 255},
                    },
                }
            },
        },
    },
}


# --- reading a route's fields and answering ------------------------------------------------


def field_text(fields: dict, key: str, limit: int = 255) -> str | None:
    """``fields[key]``: None, or text of at most ``limit`` characters (one line otherwise)."""
    value = fields.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > limit:
        raise UsageError(f"{key} must be text of at most {limit} characters")
    if not is_one_line(value):
        raise UsageError(one_line_refusal(key))
    return value


def field_flag(value: Any, key: str) -> bool:
    """A flag given as JSON or as a query word (``FLAG_WORDS``)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "1", "yes", "false", "0", "no"):
        return value.lower() in ("true", "1", "yes")
    raise UsageError(f"{key} must be true or false")


def gate_of(request: Request):
    return request.app.state.gate


def json_bytes(value: Any, status: int = 200) -> Response:
    return Response(
        json.dumps(scrubbed(encode(value)), ensure_ascii=True, separators=(",", ":")),
        status_code=status,
        media_type="application/json",
    )
