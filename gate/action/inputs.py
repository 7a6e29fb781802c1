"""The Action's inputs, declared once: ``INPUTS`` is what ``ActionOptions`` reads from the
environment (``INPUT_<NAME>``, as a composite action passes them), what ``promptgate
action`` offers as options, and what action.yml must declare (a test holds them equal).
``database-url``, ``gate-url`` and ``gate-token`` are not among them: they reach the gate as
PROMPTGATE_DATABASE_URL, PROMPTGATE_URL and PROMPTGATE_TOKEN."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gate.errors import UsageError

DEFAULT_PROMPTS = "prompts/**/*.yaml"
MODES = ("auto", "check", "apply", "wait", "drift")


@dataclass(frozen=True)
class ActionInput:
    name: str  # as action.yml spells it
    help: str
    kind: str = "text"  # text | flag | seconds | mode

    @property
    def field(self) -> str:
        return self.name.replace("-", "_")

    @property
    def env_names(self) -> list[str]:
        """INPUT_GATE_CONFIG, and INPUT_GATE-CONFIG as the runner itself spells it."""
        return [f"INPUT_{self.name.upper().replace('-', '_')}", f"INPUT_{self.name.upper()}"]


INPUTS = (
    ActionInput("prompts", f"Globs of prompt files, one per line; ! excludes (default {DEFAULT_PROMPTS})."),
    ActionInput("gate-config", "Repository path of the gate config (providers, datasets and bars)."),
    ActionInput(
        "mode",
        "auto: check on pull requests, apply on a push to the default branch; wait: a release job's "
        "`promptgate wait --sha` of the commit (a read token); drift: compare the prompt files with live "
        "(a scheduled workflow).",
        "mode",
    ),
    ActionInput("run-workers", "Run the workers in this process while waiting.", "flag"),
    ActionInput("timeout", "Seconds to wait (default 600).", "seconds"),
    ActionInput("fail-on-reject", "Exit 1 when a candidate is rejected (default on).", "flag"),
    ActionInput("comment", "Write the report as a PR or commit comment (default on).", "flag"),
    ActionInput("github-token", "Token for the GitHub API (the workflow's GITHUB_TOKEN)."),
    ActionInput("report-path", "Where to write the Markdown report (default $RUNNER_TEMP/prompt-gate-report.md)."),
    ActionInput(
        "comment-author", "Login of the report comment's author (default: the token's user, or github-actions[bot])."
    ),
    ActionInput(
        "reuse",
        "Reuse answers already paid for by an identical request (default on; off calls every item "
        "afresh, e.g. for a model at temperature > 0).",
        "flag",
    ),
    ActionInput("full", "Call every item: no run stops early once its verdict is settled (default off).", "flag"),
    ActionInput(
        "override-rollback",
        "Apply a config a rollback moved away from (held: refused without this; admin). Default off.",
        "flag",
    ),
)


def parse_bool(value: Any, name: str = "value") -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise UsageError(f"{name} {value!r} is not true or false")


@dataclass(frozen=True)
class ActionOptions:
    """The inputs (``INPUTS``) as typed values, and two settings of the CLI alone."""

    prompts: str = DEFAULT_PROMPTS  # globs, one per line; a leading ! excludes
    gate_config: str = ""  # repository-relative path of the gate config
    mode: str = "auto"  # auto | check | apply | drift
    run_workers: bool = False
    timeout: float = 600.0
    fail_on_reject: bool = True
    comment: bool = True
    github_token: str = ""
    report_path: str = ""  # default: $RUNNER_TEMP/prompt-gate-report.md
    comment_author: str = ""  # our comments' login; default: the token's user
    reuse: bool = True  # answers already paid for may stand in for calls
    full: bool = False  # no run stops early (submit --full)
    override_rollback: bool = False  # apply a config a rollback moved away from (admin)
    samples: int = 5  # failing items shown per dataset
    concurrency: int | None = None  # model calls in flight with run-workers

    INPUTS = tuple(i.name for i in INPUTS)

    @classmethod
    def from_env(cls, env: Mapping[str, str], **overrides) -> ActionOptions:
        """INPUT_<NAME> with - or _ (INPUT_GATE_CONFIG or INPUT_GATE-CONFIG), then overrides."""
        raw: dict[str, Any] = {}
        for spec in INPUTS:
            for key in spec.env_names:
                if env.get(key, "").strip():
                    raw[spec.field] = env[key].strip()
                    break
        raw.update({k: v for k, v in overrides.items() if v is not None})
        return cls.build(**raw)

    @classmethod
    def build(cls, **raw) -> ActionOptions:
        kinds = {spec.field: spec.kind for spec in INPUTS}
        return cls(**{key: _typed(kinds.get(key, "text"), key, value) for key, value in raw.items()})


def _typed(kind: str, key: str, value: Any) -> Any:
    name = key.replace("_", "-")
    if kind == "flag":
        return parse_bool(value, name)
    if kind == "seconds":
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            raise UsageError(f"{name} {value!r} is not a number of seconds") from None
        if seconds <= 0:
            raise UsageError(f"{name} must be a positive number of seconds")
        return seconds
    if kind == "mode":
        if str(value) not in MODES:
            raise UsageError(f"mode {value!r} is not auto, check, apply, wait or drift")
        return str(value)
    return value
