"""Builders for the tests of what production serves, drift and canary rollouts: the
prompts (a stable one; a canary as good in production; one that clears every offline bar
and is worse in production), production's traffic, and a gate whose gate config gives the
prompt a ``rollout:``."""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from gate.prompt.spec import parse_spec
from gate.states import UpdateStatus

from .helpers import write_rule_rows

# Offline, the datasets hold alpha (yes) and beta (no) messages. Production also sees gamma
# messages, which are urgent (yes): the stable rules know it, the worse canary does not.
STABLE_RULES = "Classify the message.\n- yes: alpha, gamma\n- no: beta\ndefault: no"
WORSE_RULES = "Classify the message.\n- yes: alpha\n- no: beta\ndefault: no"
TRAFFIC = [
    {"text": "alpha message", "expected": "yes"},
    {"text": "beta message", "expected": "no"},
    {"text": "gamma message", "expected": "yes"},
    {"text": "gamma again", "expected": "yes"},
]
SHA = {n: f"{n:x}" * 40 for n in range(1, 10)}  # a commit per version: SHA[1] = "111…"


def prompt_spec(description: str, rules: str = STABLE_RULES, name: str = "p1", **extra):
    return parse_spec(
        {
            "name": name,
            "model": "mock-1",
            "description": description,
            "messages": [{"role": "system", "content": rules}, {"role": "user", "content": "{{ item.text }}"}],
            **extra,
        }
    )


def write_prompt(path: Path, spec) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(spec.to_config(), sort_keys=False))
    return path


def gate_config(tmp_path: Path, rollout: dict | None = None, extra: dict | None = None) -> Path:
    """A gate config gating p1 on 20 offline rows (bar 0.9), with ``rollout`` for p1."""
    write_rule_rows(tmp_path / "offline.csv", 20)
    config = {
        "datasets": {"offline": {"source": "offline.csv"}},
        "prompts": {"p1": [{"dataset": "offline", "min_accuracy": 0.9}]},
        **({"rollout": {"p1": rollout}} if rollout else {}),
        **(extra or {}),
    }
    path = tmp_path / "gate.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def wait_until(check, timeout: float, what: str, poll: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(poll)


def wait_applied(gate, update_id: int, timeout: float = 120):
    report = gate.wait(update_id, timeout=timeout, poll=0.1)
    assert report.status == UpdateStatus.APPLIED, (report.status, report.update.reason)
    return report


def call_key(service, prompt: str = "p1") -> tuple[int, bytes]:
    """(rollout id, call key) of ``prompt``'s rollout in progress, as a runtime token loads it."""
    import base64

    with service.client("runtime") as runtime:
        doc = runtime.get(f"/v1/prompts/{prompt}/serve").json()
    return doc["rollout"]["id"], base64.urlsafe_b64decode(doc["rollout"]["call_key"])


def minted(
    key: tuple[int, bytes], version: int, count: int, process: str = "proc", start: int = 1, spread: int = 4
) -> list[str]:
    """``count`` call ids runtime processes would mint for ``version`` (issue 48), taking turns
    among ``spread`` processes (so no one process is most of an arm's outcomes)."""
    from gate.rollout.call_ids import mint_call_id, process_tag

    rollout_id, secret = key
    tags = [process_tag(f"{process}-{n}") for n in range(spread)]
    return [mint_call_id(secret, rollout_id, version, tags[i % spread], start + i) for i in range(count)]
