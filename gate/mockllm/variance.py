"""Models that do not answer the same way twice, for the tests of trials (gate/prompt/trials.py).

* **A flaky model**: a model named ``mock-flaky-<percent>`` (e.g. ``mock-flaky-30``)
  answers that share of the items (chosen by a hash of the user messages, so the same items
  every time) with a label drawn at random on each call, from the labels its rules name;
  the other items by its rules.
* **A script**: a user message with a line ``answers: yes,no,yes`` is answered from the
  script, in order per identical request: the k-th request with the very same body gets
  the k-th answer (round again after the last). The multiset of an item's answers over N
  trials is then fixed whatever order the calls come in, which is all a trial rule reads.
  Any model answers a script.

A request that matches neither is answered by its rules, as always.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
from collections import Counter
from collections.abc import Sequence

from .policy import Policy, content_text

FLAKY_RE = re.compile(r"^mock-flaky-(\d{1,3})$")
SCRIPT_RE = re.compile(r"^[ \t]*answers[ \t]*:[ \t]*([^\s,]+(?:[ \t]*,[ \t]*[^\s,]+)*)[ \t]*$", re.MULTILINE)


def user_text(messages: Sequence[dict]) -> str:
    return "\n".join(content_text(m.get("content")) for m in messages if m.get("role") == "user")


def answer_script(text: str) -> tuple[str, ...] | None:
    found = SCRIPT_RE.search(text)
    return tuple(a.strip() for a in found.group(1).split(",")) if found else None


def flaky_share(model: str) -> int | None:
    """The percent of items a ``mock-flaky-<percent>`` model answers at random."""
    found = FLAKY_RE.match(model)
    return min(100, int(found.group(1))) if found else None


def is_flaky_item(text: str, percent: int) -> bool:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") % 100 < percent


class AnswerVariance:
    """Scripted and flaky answers (see the module docstring), under one lock."""

    def __init__(self, seed: int = 0):
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._seen: Counter[str] = Counter()  # request body digest -> requests so far

    def answer(self, request: dict, label: str, policy: Policy) -> str:
        """The label to answer: from a script, at random for a flaky item, else ``label``."""
        text = user_text(request["messages"])
        script = answer_script(text) if "answers" in text else None
        if script:
            digest = hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()
            with self._lock:
                n = self._seen[digest]
                self._seen[digest] += 1
            return script[n % len(script)]
        share = flaky_share(request["model"])
        if share and is_flaky_item(text, share):
            with self._lock:
                return self._rng.choice(policy.labels or (label,))
        return label

    def reset(self) -> None:
        with self._lock:
            self._seen.clear()
