"""The mock server drafts replies and judges them (gate/prompt/judge.py), deterministically,
from lines of the system message, so tests build judges that agree with humans on a known
share, judges with a position bias, and a judge that drifts mid-run.

**Drafting** (a generative prompt)::

    - reply when refund*, charged twice: We are sorry: a refund has been issued.
    - reply when password: You can reset your password from the sign-in page.
    - reply otherwise: Thanks for writing; we will look into it.
    - reply pad: 2000

The answer is the text of the first ``reply when`` rule whose keywords (as classification
keywords: whole words, ``*`` a prefix) are in the user messages, else ``reply otherwise``;
``reply pad: N`` makes it at least N characters long (filler words).

**Judging**: the answer judged is the text between ``<answer>`` and ``</answer>`` in the user
messages (between ``<answer_a>``/``<answer_b>`` and their closing tags for a comparison;
the whole user text when the tags are missing)::

    - judge pass good: refund*, reset your password      # a reference phrase present
    - judge max chars: 400                               # longer fails
    - judge otherwise: bad
    - judge wrong: 10%                                    # flips 10 % of verdicts (by a hash of the answer)
    - judge position bias: 30%                            # a comparison: answers A on 30 % of pairs
    - judge position bias when refund*: 100%              # ... of the pairs whose item has these keywords

A comparison judges each answer by the same rules: ``A`` when only the first passes, ``B``
when only the second does, else ``tie``; a pair under the position bias gets ``A`` in both
orders (the hash of the item and its pair ignores the order), so the gate sees the orders
disagree.
``MockLLMServer(judge_drift_after=N)`` (or ``drift_judges(N)``): after N more judging
requests every verdict flips (pass ↔ fail, A ↔ B): a model that changed behind its API.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from .policy import content_text, keywords_pattern

_BULLET = r"^\s*[-*\u2022]\s*"
REPLY_RE = re.compile(
    _BULLET + r"reply\s+(?:when\s+(?P<keywords>[^:]+)|(?P<otherwise>otherwise)|(?P<pad>pad))\s*:\s*(?P<text>.*?)\s*$"
)
JUDGE_RE = re.compile(
    _BULLET
    + r"judge\s+(?:pass\s+(?P<label>[A-Za-z0-9_.-]+)|(?P<otherwise>otherwise)|(?P<max>max chars)|(?P<wrong>wrong)"
    r"|(?P<bias>position bias(?:\s+when\s+(?P<bias_when>[^:]+))?))\s*:\s*(?P<value>.*?)\s*$"
)
FILLER = " Please let us know if there is anything else we can do."
PAIR_TAGS = ("answer_a", "answer_b")


@dataclass(frozen=True)
class Judge:
    passes: tuple[tuple[str, re.Pattern], ...]
    otherwise: str
    max_chars: int | None
    wrong: int
    bias: int
    bias_when: re.Pattern | None = None  # the bias only on items whose text has these keywords

    def verdict(self, answer: str) -> str:
        passed = self.passing(answer)
        if self.wrong and _share(answer) < self.wrong:
            passed = None if passed else self.passes[0][0]
        return passed or self.otherwise

    def passing(self, answer: str) -> str | None:
        if self.max_chars is not None and len(answer) > self.max_chars:
            return None
        return next((label for label, pattern in self.passes if pattern.search(answer)), None)


@lru_cache(maxsize=256)
def parse_judge(system: str) -> Judge | None:
    passes, otherwise, max_chars, wrong, bias, seen = [], "fail", None, 0, 0, False
    bias_when = None
    for line in system.splitlines():
        m = JUDGE_RE.match(line)
        if not m:
            continue
        seen, value = True, m.group("value")
        if m.group("label"):
            pattern = keywords_pattern(value)
            if pattern is not None:
                passes.append((m.group("label"), pattern))
        elif m.group("otherwise"):
            otherwise = value.strip() or otherwise
        elif m.group("max"):
            max_chars = int(value) if value.isdigit() else None
        elif m.group("wrong") or m.group("bias"):
            share = int(value.rstrip("% ")) if value.rstrip("% ").isdigit() else 0
            wrong, bias = (share, bias) if m.group("wrong") else (wrong, share)
            if m.group("bias_when"):
                bias_when = keywords_pattern(m.group("bias_when"))
    return Judge(tuple(passes), otherwise, max_chars, wrong, bias, bias_when) if seen and passes else None


def _share(text: str) -> int:
    """Where a text falls in 0..99, by its hash: a fixed share of answers, the same every time."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") % 100


def _between(text: str, tag: str) -> str | None:
    start = text.find(f"<{tag}>")
    end = text.rfind(f"</{tag}>")
    return text[start + len(tag) + 2 : end].strip() if 0 <= start < end else None


class JudgeDrift:
    """Counts judging requests; after ``after`` of them, verdicts flip."""

    def __init__(self, after: int | None = None):
        self.lock = threading.Lock()
        self.after = after
        self.seen = 0

    def arm(self, after: int | None) -> None:
        with self.lock:
            self.after, self.seen = after, 0

    def drifted(self) -> bool:
        with self.lock:
            self.seen += 1
            return self.after is not None and self.seen > self.after


def judge_answer(messages: Sequence[dict], drift: JudgeDrift) -> str | None:
    """A judging request's label, or None when the system message holds no judge rules."""
    system = "\n".join(content_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer"))
    judge = parse_judge(system) if "judge" in system else None
    if judge is None:
        return None
    user = "\n".join(content_text(m.get("content")) for m in messages if m.get("role") == "user")
    first, second = (_between(user, tag) for tag in PAIR_TAGS)
    flip = drift.drifted()
    if first is None or second is None:
        label = judge.verdict(_between(user, "answer") or user)
        if flip:
            label = judge.otherwise if label != judge.otherwise else judge.passes[0][0]
        return label
    context = user.replace(first, "").replace(second, "")  # the item, whichever answer comes first
    biased = judge.bias_when is None or judge.bias_when.search(context) is not None
    if judge.bias and biased and _share("\x00".join([context, *sorted((first, second))])) < judge.bias:
        return "A"
    a, b = judge.passing(first) is not None, judge.passing(second) is not None
    label = "A" if a and not b else "B" if b and not a else "tie"
    return {"A": "B", "B": "A"}.get(label, label) if flip else label


def draft_reply(messages: Sequence[dict]) -> str | None:
    """A drafting request's reply, or None when the system message holds no reply rules."""
    system = "\n".join(content_text(m.get("content")) for m in messages if m.get("role") in ("system", "developer"))
    if "reply" not in system:
        return None
    rules, otherwise, pad = [], None, 0
    for line in system.splitlines():
        m = REPLY_RE.match(line)
        if not m:
            continue
        if m.group("keywords"):
            rules.append((keywords_pattern(m.group("keywords")), m.group("text")))
        elif m.group("otherwise"):
            otherwise = m.group("text")
        else:
            pad = int(m.group("text")) if m.group("text").isdigit() else 0
    if not rules and otherwise is None:
        return None
    user = "\n".join(content_text(m.get("content")) for m in messages if m.get("role") == "user")
    reply = next((text for pattern, text in rules if pattern is not None and pattern.search(user)), otherwise) or ""
    if len(reply) < pad:
        reply += FILLER * ((pad - len(reply)) // len(FILLER) + 1)
    return reply
