"""Judged runs for the tests (gate/prompt/judge.py): a reply-drafting prompt the local model
server answers by its ``reply`` rules, a judge it answers by its ``judge`` rules, the
judge's human-labelled dataset (with a chosen share of rows where the humans disagree with
the judge's rules), and a dataset of tickets, each one distinct."""

from __future__ import annotations

import csv
from pathlib import Path

from gate.prompt.spec import parse_spec

JUDGE_RULES = (
    "Judge the support reply.\n- judge pass good: refund*, reset your password, tracking number\n"
    "- judge max chars: 600\n- judge otherwise: bad"
)
JUDGE_TEMPLATE = "Ticket: {{ item.ticket }}\n<answer>{{ answer }}</answer>"
PAIR_RULES = (
    "Which reply is better?\n- judge pass good: refund*, reset your password, tracking number\n"
    "- judge otherwise: tie\n- judge position bias: {bias}%"
)
PAIR_TEMPLATE = "Ticket: {{ item.ticket }}\n<answer_a>{{ answer_a }}</answer_a>\n<answer_b>{{ answer_b }}</answer_b>"
GOOD_REPLIES = (
    "Draft a reply to the ticket.\n"
    "- reply when refund*, charged: We are sorry: a refund has been issued to your card.\n"
    "- reply when password: You can reset your password from the sign-in page.\n"
    "- reply when parcel, delivery: Here is your tracking number: it arrives tomorrow.\n"
    "- reply otherwise: Thanks for writing; we will look into it."
)
NO_REFUND_REPLIES = (  # worse than GOOD_REPLIES on the refund tickets only
    "Draft a reply to the ticket.\n"
    "- reply when password: You can reset your password from the sign-in page.\n"
    "- reply when parcel, delivery: Here is your tracking number: it arrives tomorrow.\n"
    "- reply otherwise: Thanks for writing; we will look into it."
)
WEAK_REPLIES = (
    "Draft a reply to the ticket.\n"
    "- reply when password: You can reset your password from the sign-in page.\n"
    "- reply otherwise: Thanks for writing; we will look into it."
)
TOPICS = ("I was charged twice for order {i}", "I forgot my password, account {i}", "Where is my parcel {i}?")


def judge_spec(name: str = "reply-judge", rules: str = JUDGE_RULES, **extra):
    return parse_spec(
        {
            "name": name,
            "kind": "judge",
            "model": "mock-1",
            "labels": ["good", "bad"],
            "messages": [{"role": "system", "content": rules}, {"role": "user", "content": JUDGE_TEMPLATE}],
            **extra,
        }
    )


def pair_judge_spec(name: str = "pair-judge", bias: int = 0, bias_when: str | None = None):
    """A comparing judge, position-biased on ``bias`` % of pairs (of the items with the
    keywords ``bias_when`` only, when given)."""
    rules = PAIR_RULES.format(bias=bias)
    if bias_when:
        rules = rules.replace("- judge position bias:", f"- judge position bias when {bias_when}:")
    return parse_spec(
        {
            "name": name,
            "kind": "judge",
            "model": "mock-1",
            "labels": ["A", "B", "tie"],
            "messages": [
                {"role": "system", "content": rules},
                {"role": "user", "content": PAIR_TEMPLATE},
            ],
        }
    )


def reply_spec(rules: str = GOOD_REPLIES, judge: str = "reply-judge", name: str = "reply", **decision):
    return parse_spec(
        {
            "name": name,
            "model": "mock-1",
            "messages": [{"role": "system", "content": rules}, {"role": "user", "content": "{{ item.ticket }}"}],
            "decision": {"type": "judge", "judge": judge, **(decision or {"pass": ["good"]})},
        }
    )


def write_labels(path: Path, n: int = 200, disagree: int = 0) -> Path:
    """The judge's human-labelled rows: a reply the rules pass is labelled good, one they
    fail bad, except the first ``disagree`` rows, where the humans say the opposite."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "expected_decision", "ticket", "answer"])
        for i in range(n):
            good = i % 2 == 0
            answer = "A refund has been issued to your card." if good else "Thanks for writing; we will look into it."
            label = ("good" if good else "bad") if i >= disagree else ("bad" if good else "good")
            w.writerow([f"h{i}", label, TOPICS[i % 3].format(i=i), answer])
    return path


def write_pairs(path: Path, n: int = 60) -> Path:
    """A comparing judge's human-labelled pairs: A, B or tie, as its rules read them."""
    good, plain = "A refund has been issued to your card.", "Thanks for writing; we will look into it."
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "expected_decision", "ticket", "answer_a", "answer_b"])
        for i in range(n):
            a, b, label = [(good, plain, "A"), (plain, good, "B"), (plain, plain, "tie")][i % 3]
            w.writerow([f"p{i}", label, TOPICS[i % 3].format(i=i), a, b])
    return path


def write_tickets(path: Path, n: int = 60) -> Path:
    """Tickets, each distinct: a refund, a password, a parcel, in turn."""
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["item_id", "expected_decision", "ticket"])
        for i in range(n):
            w.writerow([f"t{i}", "good", TOPICS[i % 3].format(i=i)])
    return path


def live_judge(gate, tmp_path: Path, run, disagree: int = 0, bar: str = "0.9", spec=None, rows: int = 200) -> None:
    """The judge mapped to its human-labelled dataset and applied (``run``: evaluates an
    update id to its report, e.g. workers.supervisor.run_until_terminal)."""
    gate.register_dataset("reply-labels", str(write_labels(tmp_path / "labels.csv", rows, disagree)))
    gate.map_dataset("reply-judge", "reply-labels", bar)
    report = run(gate.submit(spec or judge_spec(), "apply"))
    assert report.status == "APPLIED", report.update.reason
