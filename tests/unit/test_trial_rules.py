"""Trials (gate/prompt/trials.py): a prompt file's trials, trial_rule and k are bounded and refused
in one line; each rule turns trials into the verdict it promises; one trial keeps the
reuse key it always had, and each trial of N has its own."""

from __future__ import annotations

import pytest
from support.helpers import old_request_key

from gate.errors import SpecError
from gate.prompt.request_keys import request_key, trial_keys
from gate.prompt.spec import parse_spec, parse_spec_text
from gate.prompt.trials import ERROR_ANSWER, TrialRule, judge
from gate.records import Trial

MESSAGES = [{"role": "user", "content": "{{ item.text }}"}]


def spec(**extra):
    return parse_spec({"name": "p", "model": "m", "messages": MESSAGES, **extra}, file="p.yaml")


@pytest.mark.parametrize(
    "extra, field, words",
    [
        ({"trials": 10000}, "trials", "from 1 to 20"),
        ({"trials": -1}, "trials", "from 1 to 20"),
        ({"trials": 0}, "trials", "from 1 to 20"),
        ({"trials": "3"}, "trials", "whole number"),
        ({"trials": True}, "trials", "whole number"),
        ({"trials": 2.5}, "trials", "whole number"),
        ({"trial_rule": "bogus"}, "trial_rule", "majority, all, k_of_n"),
        ({"trial_rule": ["all"]}, "trial_rule", "majority, all, k_of_n"),
        ({"trials": 3, "trial_rule": "k_of_n", "k": 5}, "k", "from 2 to trials (3)"),
        ({"trials": 3, "trial_rule": "k_of_n", "k": 0}, "k", "from 2 to trials (3)"),
        # a minority vote would clear a bar the model misses in one call (a coin flip, 1 of 20)
        ({"trials": 3, "trial_rule": "k_of_n", "k": 1}, "k", "a majority of the trials"),
        ({"trials": 20, "trial_rule": "k_of_n", "k": 10}, "k", "from 11 to trials (20)"),
        ({"trials": 3, "trial_rule": "k_of_n"}, "k", "needs k"),
        ({"trials": 3, "k": 2}, "k", "only for trial_rule: k_of_n"),
    ],
)
def test_hostile_trial_fields_are_refused_in_one_line(extra, field, words):
    with pytest.raises(SpecError) as info:
        spec(**extra)
    message = str(info.value)
    assert info.value.field == field and words in message, message
    assert "\n" not in message and len(message) < 200 and "10000" not in message


def test_trial_fields_are_part_of_the_config_and_absent_by_default():
    plain = spec()
    assert "trials" not in plain.to_config() and plain.trials == 1 and plain.rule.needed == 1
    three = spec(trials=3, trial_rule="k-of-n", k=2)
    assert three.to_config()["trials"] == 3 and three.to_config()["trial_rule"] == "k_of_n"
    assert three.to_config()["k"] == 2 and three.config_hash != plain.config_hash
    assert parse_spec(three.to_config()) == three  # stored and read back unchanged
    assert parse_spec_text(
        "name: p\nmodel: m\ntrials: 5\ntrial_rule: all\nmessages:\n  - {role: user, content: x}\n"
    ).rule == TrialRule(5, "all")


def test_one_trial_keeps_the_old_key_and_each_trial_of_n_has_its_own():
    messages = [{"role": "user", "content": "item 7"}]
    one = spec()
    assert trial_keys(one, messages, "http://x/v1") == (old_request_key(one, messages, "http://x/v1"),)
    assert request_key(one, messages, None) == old_request_key(one, messages, None)
    five = spec(trials=5)
    keys = trial_keys(five, messages, "http://x/v1")
    assert len(set(keys)) == 5
    assert keys[0] == old_request_key(five, messages, "http://x/v1")  # trial 1: the request's own key
    # trial t's key does not depend on N: raising N from 3 to 5 reuses trials 1-3
    assert trial_keys(spec(trials=3), messages, "http://x/v1") == keys[:3]


def trials(*answers):
    return [Trial(None, error="timeout: slow") if a is None else Trial(a) for a in answers]


@pytest.mark.parametrize(
    "rule, answers, verdict, decision",
    [
        (TrialRule(3, "majority"), ("yes", "yes", "no"), "MATCH", "yes"),
        (TrialRule(3, "majority"), ("yes", "no", "no"), "MISMATCH", "no"),
        (TrialRule(4, "majority"), ("yes", "yes", "no", "no"), "MISMATCH", "no"),  # half is not more than half
        (TrialRule(3, "all"), ("yes", "yes", "no"), "MISMATCH", "no"),
        (TrialRule(3, "all"), ("yes", "yes", "yes"), "MATCH", "yes"),
        (TrialRule(3, "k_of_n", 1), ("yes", "no", "no"), "MATCH", "yes"),
        (TrialRule(3, "k_of_n", 2), ("yes", "no", "no"), "MISMATCH", "no"),
        (TrialRule(3, "majority"), ("yes", None, "yes"), "MATCH", "yes"),
        (TrialRule(3, "majority"), ("yes", None, None), "MISMATCH", ERROR_ANSWER),  # a failed trial does not match
        (TrialRule(3, "all"), ("yes", None, "yes"), "MISMATCH", ERROR_ANSWER),
        (TrialRule(3, "majority"), ("maybe", "no", "yes"), "MISMATCH", "maybe"),  # a tie: string order
    ],
)
def test_each_rule_gives_the_verdict_it_promises(rule, answers, verdict, decision):
    outcome = judge(trials(*answers), "yes", rule)
    assert (outcome.verdict, outcome.decision) == (verdict, decision)
    assert outcome.unstable == (len({a for a in answers if a is not None}) > 1)
    assert judge(trials(*reversed(answers)), "yes", rule).decision == decision  # whatever the order


def test_an_item_whose_every_trial_failed_is_an_error():
    outcome = judge(trials(None, None, None), "yes", TrialRule(3))
    assert outcome.verdict == "ERROR" and outcome.decision is None and "timeout" in outcome.error


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"params": {"temperature": 0.7, "max_tokens": 20}},
        {"trials": 3},
        {"response_format": {"type": "json_object"}},
        {"labels": ["ÜRGENT", "later"], "decision": {"type": "regex", "pattern": "(ÜRGENT|later)"}},
    ],
)
def test_the_key_hashed_around_its_messages_is_the_whole_requests_hash(extra):
    """request_key hashes a prompt's fixed text once and an item's messages alone: the bytes
    hashed, and so every key, are the formula's (answers kept before stay reusable)."""
    one = spec(**extra)
    for base in (None, "http://x/v1", "http://ünï/v1"):
        for content in ("item 7", "", 'quote " and backslash \\ and \u2028 and 𝔘', "\ue000promptgate-messages\ue001"):
            messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": content}]
            assert request_key(one, messages, base) == old_request_key(one, messages, base)
            assert request_key(one, tuple(messages), base) == old_request_key(one, messages, base)
